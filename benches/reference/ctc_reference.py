#!/usr/bin/env python3
"""PyTorch's ctc_loss on random cases, as the reference for SignFlow's CTC (models::ctc).

    python3 benches/reference/ctc_reference.py            # writes crates/models/tests/fixtures/ctc_torch.json

Cases: random logits [batch, frames, classes] (blank 0), random input lengths and targets,
including repeated labels, an empty target and one that cannot fit its frames; the per-sequence
losses (reduction="none", zero_infinity=False) and the gradients of their sum with respect to the
logits (through log_softmax), in float64. The Rust test compares its loss and gradient with these.
"""

import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "crates", "models", "tests", "fixtures", "ctc_torch.json")


def finite_or_none(v):
    """JSON has no infinity: an impossible alignment is written as null."""
    v = float(v)
    return None if v == float("inf") else v


def case(g, batch, frames, classes):
    logits = (torch.randn(batch, frames, classes, generator=g, dtype=torch.float64) * 2).requires_grad_(True)
    lengths = [frames] + [int(torch.randint(frames // 2, frames + 1, (1,), generator=g)) for _ in range(batch - 1)]
    targets = []
    for b in range(batch):
        n = int(torch.randint(0, max(1, lengths[b] // 2) + 1, (1,), generator=g))
        t = [int(v) for v in torch.randint(1, classes, (n,), generator=g)]
        if b == 1 and len(t) >= 2:
            t[1] = t[0]  # a repeated label
        targets.append(t)
    targets[-1] = []  # an empty target
    lp = torch.log_softmax(logits, 2).transpose(0, 1)  # [T, B, C]
    flat = torch.tensor([v for t in targets for v in t], dtype=torch.long)
    loss = torch.nn.functional.ctc_loss(lp, flat, torch.tensor(lengths), torch.tensor([len(t) for t in targets]),
                                        blank=0, reduction="none", zero_infinity=False)
    finite = torch.where(torch.isinf(loss), torch.zeros_like(loss), loss)
    finite.sum().backward()
    return {
        "batch": batch, "frames": frames, "classes": classes,
        "logits": logits.detach().flatten().tolist(), "lengths": lengths, "targets": targets,
        "loss": [finite_or_none(v) for v in loss.detach()], "grad": logits.grad.flatten().tolist(),
    }


def main():
    g = torch.Generator().manual_seed(2026)
    cases = [case(g, 4, 12, 6), case(g, 3, 30, 12), case(g, 2, 50, 29)]
    impossible = case(g, 2, 6, 5)
    impossible["targets"][0] = [1, 2, 3, 4, 1, 2, 3]  # 7 labels in <= 6 frames: infinite loss
    lp = torch.log_softmax(torch.tensor(impossible["logits"]).view(2, 6, 5), 2).transpose(0, 1)
    t = impossible["targets"]
    loss = torch.nn.functional.ctc_loss(lp, torch.tensor([v for x in t for v in x]), torch.tensor(impossible["lengths"]),
                                        torch.tensor([len(x) for x in t]), blank=0, reduction="none")
    impossible["loss"] = [finite_or_none(v) for v in loss]
    impossible.pop("grad")
    cases.append(impossible)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f)
    print("wrote", os.path.normpath(OUT), "torch", torch.__version__)


if __name__ == "__main__":
    main()
