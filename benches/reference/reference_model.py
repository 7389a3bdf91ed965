#!/usr/bin/env python3
"""The reference ISLR conv-transformer in PyTorch, layer for layer the same as SignFlow's
`models::ConvTransformer` (crates/models/src/conv_transformer.rs), and a timer for it.

Written for SignFlow's benchmarks (our own code, not a port of someone's script): it measures what
`trainer bench` measures on the Burn side, on random data of the same shapes, so the two can be put
side by side by `benches/reference/compare.py`.

    python3 benches/reference/reference_model.py --device cpu --json out.json

Measured: a training step (forward, cross-entropy, backward, AdamW step; phases timed separately
with synchronisation in between), batch-1 inference latency (p50/p90) and batch-N inference
throughput. Eager mode, f32 unless --precision bf16/f16 (autocast).
"""

import argparse
import json
import math
import platform
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class ChannelNorm(nn.Module):
    """BatchNorm over the channel axis of a channels-last [B, T, C] tensor (as SignFlow's)."""

    def __init__(self, c, momentum):
        super().__init__()
        self.bn = nn.BatchNorm1d(c, momentum=momentum, eps=1e-5)

    def forward(self, x):
        b, t, c = x.shape
        return self.bn(x.reshape(b * t, c)).reshape(b, t, c)


class CausalDepthwiseConv(nn.Module):
    def __init__(self, c, k):
        super().__init__()
        self.k = k
        self.conv = nn.Conv1d(c, c, k, groups=c, bias=False)

    def forward(self, x):  # [B, T, C]
        h = F.pad(x.transpose(1, 2), (self.k - 1, 0))
        return self.conv(h).transpose(1, 2)


def masked_mean(x, pad_mask):  # x [B, T, C], pad_mask [B, T] (True = pad)
    valid = (~pad_mask).to(x.dtype).unsqueeze(2)
    return (x * valid).sum(1) / valid.sum(1).clamp_min(1.0)


class Eca(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.conv = nn.Conv1d(1, 1, k, padding=k // 2, bias=False)

    def forward(self, x, pad_mask):
        b, _, c = x.shape
        pooled = masked_mean(x, pad_mask).reshape(b, 1, c)
        return x * torch.sigmoid(self.conv(pooled))


class DropPath(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p <= 0:
            return x
        keep = 1 - self.p
        mask = torch.empty((x.shape[0],) + (1,) * (x.dim() - 1), device=x.device, dtype=x.dtype).bernoulli_(keep)
        return x * mask / keep


class SelfAttention(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, pad_mask):
        b, t, d = x.shape
        h = self.heads
        qkv = self.qkv(x).reshape(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = q @ k.transpose(2, 3) / math.sqrt(d // h)
        scores = scores + pad_mask.to(scores.dtype).mul(-1e4).reshape(b, 1, 1, t)
        attn = self.dropout(torch.softmax(scores, dim=-1))
        return self.proj((attn @ v).transpose(1, 2).reshape(b, t, d))


class ConvBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        wide = c["dim"] * c["expand"]
        self.expand = nn.Linear(c["dim"], wide)
        self.dwconv = CausalDepthwiseConv(wide, c["kernel"])
        self.norm = ChannelNorm(wide, c["bn_momentum"])
        self.eca = Eca(c["eca_kernel"])
        self.project = nn.Linear(wide, c["dim"])
        self.drop_path = DropPath(c["drop_path"])

    def forward(self, x, pad_mask):
        h = F.silu(self.expand(x))
        h = self.norm(self.dwconv(h))
        h = self.project(self.eca(h, pad_mask))
        return x + self.drop_path(h)


class TransformerBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["dim"]
        self.norm1 = ChannelNorm(d, c["bn_momentum"])
        self.attention = SelfAttention(d, c["heads"], c["attention_dropout"])
        self.norm2 = ChannelNorm(d, c["bn_momentum"])
        self.ffn_in = nn.Linear(d, d * c["expand"], bias=False)
        self.ffn_out = nn.Linear(d * c["expand"], d, bias=False)
        self.drop_path = DropPath(c["drop_path"])

    def forward(self, x, pad_mask):
        x = x + self.drop_path(self.attention(self.norm1(x), pad_mask))
        return x + self.drop_path(self.ffn_out(F.silu(self.ffn_in(self.norm2(x)))))


REFERENCE = dict(dim=192, stages=2, conv_blocks_per_stage=3, kernel=17, expand=2, heads=4, eca_kernel=5,
                 drop_path=0.2, attention_dropout=0.2, bn_momentum=0.05)


class ConvTransformer(nn.Module):
    def __init__(self, features, classes, c=REFERENCE):
        super().__init__()
        d = c["dim"]
        self.per_stage = c["conv_blocks_per_stage"]
        self.stem = nn.Linear(features, d, bias=False)
        self.stem_norm = ChannelNorm(d, c["bn_momentum"])
        self.conv_blocks = nn.ModuleList(ConvBlock(c) for _ in range(c["stages"] * self.per_stage))
        self.transformer_blocks = nn.ModuleList(TransformerBlock(c) for _ in range(c["stages"]))
        self.top = nn.Linear(d, 2 * d)
        self.classifier = nn.Linear(2 * d, classes)

    def forward(self, x, pad_mask):
        x = self.stem_norm(self.stem(x))
        for s, tb in enumerate(self.transformer_blocks):
            for blk in self.conv_blocks[s * self.per_stage:(s + 1) * self.per_stage]:
                x = blk(x, pad_mask)
            x = tb(x, pad_mask)
        # Late dropout is off (as in SignFlow until `late_dropout_epoch`).
        return self.classifier(masked_mean(self.top(x), pad_mask))


def pad_mask(batch, frames, device):
    """The same padding pattern as `trainer bench`: sample b has (b % 24) padded frames."""
    m = torch.zeros(batch, frames, dtype=torch.bool)
    for b in range(batch):
        n = min(b % 24, frames - 1)
        if n:
            m[b, frames - n:] = True
    return m.to(device)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def time_inference(model, x, mask, a):
    """Batch-1 latencies (after 10 untimed passes) and whole-batch times (after 1), ms; the same
    counts as `trainer bench`. Call inside inference mode."""
    x1, m1 = x[:1].clone(), torch.zeros(1, a.frames, dtype=torch.bool, device=x.device)
    lat, big = [], []
    for i in range(a.latency_runs + 10):
        t0 = time.perf_counter()
        model(x1, m1).float().cpu()
        if i >= 10:
            lat.append((time.perf_counter() - t0) * 1e3)
    for i in range(5):
        t0 = time.perf_counter()
        model(x, mask).float().cpu()
        if i >= 1:
            big.append((time.perf_counter() - t0) * 1e3)
    return lat, big


def time_int8(model, x, mask, a):
    """PyTorch's int8 inference on the CPU: dynamic quantization of every nn.Linear (int8 weights,
    activations quantized per batch at run time), the counterpart of SignFlow's int8 eval graph.
    Timed as the f32 inference is; {} when this PyTorch build has no quantized engine."""
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            q = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    except Exception as e:  # noqa: BLE001 - report and go on without int8
        print(f"no int8 figures: {e}", file=sys.stderr)
        return {}
    with torch.inference_mode():
        lat, big = time_inference(q, x, mask, a)
    return {
        "int8_b1_p50_ms": percentile(lat, 50),
        "int8_b1_p90_ms": percentile(lat, 90),
        "int8_batch_samples_per_s": a.batch / statistics.median(big) * 1e3,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--features", type=int, default=469)
    ap.add_argument("--classes", type=int, default=250)
    ap.add_argument("--steps", type=int, default=10, help="timed training steps (after 2 warm-up steps)")
    ap.add_argument("--latency-runs", type=int, default=100)
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = PyTorch's default)")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    torch.manual_seed(0)
    model = ConvTransformer(a.features, a.classes).to(dev)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    x = torch.randn(a.batch, a.frames, a.features, device=dev)
    mask = pad_mask(a.batch, a.frames, dev)
    labels = torch.arange(a.batch, device=dev) % a.classes
    amp_dtype = {"bf16": torch.bfloat16, "f16": torch.float16}.get(a.precision)
    scaler = torch.amp.GradScaler(dev.type) if a.precision == "f16" else None

    def forward():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            return F.cross_entropy(model(x, mask).float(), labels)

    def backward(loss):
        (scaler.scale(loss) if scaler else loss).backward()

    def update():
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()

    model.train()
    fwd, bwd, step = [], [], []
    for i in range(a.steps + 2):
        sync(dev)
        t0 = time.perf_counter()
        loss = forward()
        sync(dev)
        t1 = time.perf_counter()
        backward(loss)
        sync(dev)
        t2 = time.perf_counter()
        update()
        sync(dev)
        t3 = time.perf_counter()
        if i >= 2:
            fwd.append((t1 - t0) * 1e3)
            bwd.append((t2 - t1) * 1e3)
            step.append((t3 - t2) * 1e3)
    total = [f + b + s for f, b, s in zip(fwd, bwd, step)]
    # The same number of steps back to back, as a training loop runs them: one wait at the end.
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        backward(forward())
        update()
    sync(dev)
    pipelined_ms = (time.perf_counter() - t0) * 1e3 / max(a.steps, 1)

    model.eval()
    with torch.inference_mode(), torch.autocast(dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        lat, big = time_inference(model, x, mask, a)

    int8 = time_int8(model, x, mask, a) if dev.type == "cpu" and a.precision == "f32" else {}

    out = {
        "framework": f"PyTorch {torch.__version__} eager",
        "device": (torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"{platform.processor() or 'cpu'} "
                   f"({torch.get_num_threads()} threads)"),
        "precision": a.precision,
        "trainable_params": params,
        "batch": a.batch, "frames": a.frames, "features": a.features, "classes": a.classes,
        "train_step_ms": statistics.median(total),
        "forward_ms": statistics.median(fwd),
        "backward_ms": statistics.median(bwd),
        "optimizer_ms": statistics.median(step),
        "train_samples_per_s": a.batch / statistics.median(total) * 1e3,
        "train_pipelined_samples_per_s": a.batch / pipelined_ms * 1e3,
        "infer_b1_p50_ms": percentile(lat, 50),
        "infer_b1_p90_ms": percentile(lat, 90),
        "infer_batch_ms": statistics.median(big),
        "infer_batch_samples_per_s": a.batch / statistics.median(big) * 1e3,
        **int8,
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
