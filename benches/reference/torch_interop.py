#!/usr/bin/env python3
"""SignFlow <-> PyTorch weights, checked on logits.

    # A trained SignFlow conv-transformer, exported as safetensors and loaded into the PyTorch
    # reference module: both compute logits on the same random windows; prints the max |diff|.
    python3 benches/reference/torch_interop.py compare --model runs/<run>

    # Writes the PyTorch fixture of the Rust import test (crates/bundle/tests/fixtures/): a small
    # reference model's state_dict (torch.save) and its logits on fixed inputs.
    python3 benches/reference/torch_interop.py fixture

`compare` builds and runs the release `infer` binary (`infer export-safetensors`, `infer logits`).
Needs `pip install -r benches/reference/requirements.txt safetensors numpy`.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from reference_model import ConvTransformer  # noqa: E402


def pad_mask(batch, frames, valid):
    m = torch.zeros(batch, frames, dtype=torch.bool)
    for b, v in enumerate(valid):
        m[b, v:] = True
    return m


def load_safetensors(model, path):
    from safetensors.torch import load_file
    state = load_file(path)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # PyTorch's BatchNorm counts batches; SignFlow has no such buffer.
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        sys.exit(f"{path}: missing {missing}, unexpected {unexpected}")


def config_of(card):
    m = dict(card["model"])
    assert m.pop("kind") == "conv_transformer", "only the conv-transformer has a PyTorch reference module"
    return m


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def compare(a):
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "infer"], cwd=ROOT, check=True)
    infer = os.path.join(ROOT, "target", "release", "infer")
    with tempfile.TemporaryDirectory() as tmp:
        st = os.path.join(tmp, "model.safetensors")
        subprocess.run([infer, "export-safetensors", "--model", a.model, "--out", st], check=True)
        from safetensors import safe_open
        with safe_open(st, "pt") as f:
            card = json.loads(f.metadata()["signflow_model_card"])
        features, classes = card["input_features"], len(card["labels"])
        window = card["preprocess"]["window"]
        model = ConvTransformer(features, classes, config_of(card)).eval()
        load_safetensors(model, st)
        g = torch.Generator().manual_seed(a.seed)
        x = torch.randn(a.batch, window, features, generator=g)
        valid = [window - (b * 7) % (window // 2) for b in range(a.batch)]
        np.savez(os.path.join(tmp, "windows.npz"), x=x.numpy(), valid=np.array(valid, dtype=np.float64))
        out = os.path.join(tmp, "logits.npy")
        subprocess.run([infer, "logits", "--model", a.model, "--input", os.path.join(tmp, "windows.npz"),
                        "--out", out], check=True)
        signflow = torch.from_numpy(np.load(out))
        with torch.no_grad():
            torch_logits = model(x, pad_mask(a.batch, window, valid))
        diff = (torch_logits - signflow).abs().max().item()
        agree = (torch_logits.argmax(1) == signflow.argmax(1)).float().mean().item()
        print(json.dumps({"max_abs_diff": diff, "top1_agreement": agree, "batch": a.batch, "frames": window,
                          "features": features, "classes": classes, "params": card["trainable_params"],
                          "torch": torch.__version__, "cpu": cpu_model()}, indent=2))
        if diff > 1e-4:
            sys.exit(f"max |logit difference| {diff:.3g} exceeds 1e-4")


TINY = dict(dim=16, stages=1, conv_blocks_per_stage=1, kernel=5, expand=2, heads=2, eca_kernel=3,
            drop_path=0.0, attention_dropout=0.0, bn_momentum=0.05)


def fixture(a):
    out = os.path.join(ROOT, "crates", "bundle", "tests", "fixtures")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = ConvTransformer(10, 5, TINY)
    # Random normalisation parameters and statistics, so a wrong mapping cannot go unnoticed.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm1d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 2.0)
    model.eval()
    torch.save(model.state_dict(), os.path.join(out, "tiny_reference.pt"))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 12, 10, generator=g)
    valid = [12, 8]
    with torch.no_grad():
        logits = model(x, pad_mask(2, 12, valid))
    np.savez(os.path.join(out, "tiny_reference_logits.npz"), x=x.numpy(), valid=np.array(valid, dtype=np.float64),
             logits=logits.numpy())
    print("wrote", out, "config", json.dumps(TINY))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--model", required=True, help="a SignFlow run or model directory (conv-transformer)")
    c.add_argument("--batch", type=int, default=16)
    c.add_argument("--seed", type=int, default=0)
    sub.add_parser("fixture")
    a = ap.parse_args()
    compare(a) if a.cmd == "compare" else fixture(a)


if __name__ == "__main__":
    main()
