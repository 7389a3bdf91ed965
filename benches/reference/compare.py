#!/usr/bin/env python3
"""SignFlow vs PyTorch on the reference conv-transformer, side by side, in one run.

    python3 benches/reference/compare.py                 # CPU, f32, batch 64 x 64 frames x 469 features
    python3 benches/reference/compare.py --device cuda --precision bf16

Builds `trainer` in release (the README's profile, so nothing extra compiles), runs
`trainer bench --reference` and `reference_model.py` with the same shape, one after the other (never
together: they would share the cores), and prints samples/s and latency with the ratio
SignFlow / PyTorch. `--repeat N` alternates the two N times and reports the median of each, which
evens out a noisy machine. Needs `pip install -r benches/reference/requirements.txt`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

FIELDS = [
    ("train_samples_per_s", "training samples/s (batch {batch})", True),
    ("train_pipelined_samples_per_s", "  steps back to back, samples/s", True),
    ("train_step_ms", "training step ms", False),
    ("forward_ms", "  forward ms", False),
    ("backward_ms", "  backward ms", False),
    ("optimizer_ms", "  optimizer ms", False),
    ("infer_b1_p50_ms", "inference batch 1 p50 ms", False),
    ("infer_b1_p90_ms", "inference batch 1 p90 ms", False),
    ("infer_batch_samples_per_s", "inference samples/s (batch {batch})", True),
    # int8 (CPU): SignFlow's int8 eval graph vs PyTorch's dynamic quantization of nn.Linear.
    ("int8_b1_p50_ms", "int8 inference batch 1 p50 ms", False),
    ("int8_b1_p90_ms", "int8 inference batch 1 p90 ms", False),
    ("int8_batch_samples_per_s", "int8 inference samples/s (batch {batch})", True),
]
# SignFlow only: its f32 eval graph (BatchNorm folded), against PyTorch's f32 inference.
VERSUS_F32 = [
    ("graph_f32_b1_p50_ms", "infer_b1_p50_ms", "eval graph f32 batch 1 p50 ms", False),
    ("graph_f32_batch_samples_per_s", "infer_batch_samples_per_s", "eval graph f32 samples/s (batch {batch})", True),
]


def run_json(cmd):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        subprocess.run(cmd + ["--json", path], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        with open(path) as f:
            return json.load(f)
    finally:
        os.unlink(path)


def cpu_model():
    """'AMD EPYC (family 25, model 1), 2 threads, avx2': ratios depend on the CPU, so every table names it."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    k, v = (p.strip() for p in line.split(":", 1))
                    info.setdefault(k, v)
    except OSError:
        return "unknown CPU"
    flags = set(info.get("flags", "").split())
    simd = [f for f in ("avx512_vnni", "avx512f", "avx_vnni", "avx2") if f in flags]
    return (f"{info.get('model name', '?')} (family {info.get('cpu family', '?')}, model {info.get('model', '?')}), "
            f"{os.cpu_count()} threads, {' '.join(simd) or 'no AVX2'}")


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--features", type=int, default=469)
    ap.add_argument("--classes", type=int, default=250)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--trainer", help="prebuilt trainer binary (default: cargo build --release -p trainer)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    a = ap.parse_args()

    trainer = a.trainer
    if not trainer:
        subprocess.run(["cargo", "build", "--release", "-p", "trainer"], check=True, cwd=ROOT)
        trainer = os.path.join(ROOT, "target", "release", "trainer")
    shape = ["--batch", str(a.batch), "--frames", str(a.frames), "--features", str(a.features),
             "--classes", str(a.classes), "--steps", str(a.steps)]
    burn_cmd = [trainer, "bench", "--reference", "--device", a.device, "--precision", a.precision] + shape
    torch_cmd = [sys.executable, os.path.join(HERE, "reference_model.py"), "--device", a.device,
                 "--precision", a.precision] + shape

    burn, torch = [], []
    for i in range(a.repeat):
        print(f"[{i + 1}/{a.repeat}] SignFlow: {' '.join(burn_cmd)}", file=sys.stderr)
        burn.append(run_json(burn_cmd))
        print(f"[{i + 1}/{a.repeat}] PyTorch:  {' '.join(torch_cmd)}", file=sys.stderr)
        torch.append(run_json(torch_cmd))

    b0, t0 = burn[0], torch[0]
    title = (f"reference conv-transformer, {a.device} {a.precision}, batch {a.batch} x {a.frames} frames x "
             f"{a.features} features, {a.classes} classes; median of {a.repeat} run(s); CPU: {cpu_model()}")
    rows = [(label.format(batch=a.batch), med(burn, k), med(torch, k), higher) for k, label, higher in FIELDS
            if k in b0 and k in t0]
    rows += [(label.format(batch=a.batch), med(burn, ours), med(torch, theirs), higher)
             for ours, theirs, label, higher in VERSUS_F32 if ours in b0]
    if a.markdown:
        print(f"{title}\n")
        print(f"| | {b0['framework']} | {t0['framework']} | SignFlow / PyTorch |")
        print("|---|---:|---:|---:|")
        for label, bv, tv, higher in rows:
            print(f"| {label.strip()} | {bv:.1f} | {tv:.1f} | {bv / tv:.2f}x |")
    else:
        print(title)
        print(f"SignFlow: {b0['framework']} on {b0['device']}; PyTorch: {t0['framework']} on {t0['device']}")
        print(f"{'':40} {'SignFlow':>10} {'PyTorch':>10} {'ratio':>8}")
        for label, bv, tv, higher in rows:
            note = "(higher is better)" if higher else ""
            print(f"{label:40} {bv:10.1f} {tv:10.1f} {bv / tv:7.2f}x {note}")
    print(f"trainable parameters: SignFlow {b0['trainable_params']}, PyTorch {t0['trainable_params']}")


if __name__ == "__main__":
    main()
