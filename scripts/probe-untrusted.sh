#!/usr/bin/env bash
# The untrusted-input probes of docs/SECURITY.md against the release binaries: each crafted input
# is fed to the CLI that reads it, and a row gives its exit status, seconds and peak memory (the
# expectation: status 1 (infer: 2, its status for an error), a few seconds, well under 1 GB, and the error names the input).
# Usage: scripts/probe-untrusted.sh   (builds trainer and infer in release first; scripts/cached
# runs it against CI's build). Needs python3 and GNU time (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p trainer -p infer
bin=${CARGO_TARGET_DIR:-target}/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SIGNFLOW_REQUIRE_WGPU=0
printf '| probe | exit | seconds | peak MB | message |\n|---|---:|---:|---:|---|\n'
probe() { # probe NAME COMMAND...: one row
  local name=$1 rc=0
  shift
  /usr/bin/time -f '%e %M' -o "$work/time" "$@" >"$work/out" 2>"$work/err" </dev/null || rc=$?
  read -r secs kb < <(tail -1 "$work/time") || true
  local msg
  msg=$(grep -v '^Command exited' "$work/err" | grep -m1 -iE 'error|refus|warning' | cut -c1-160 | sed 's/|/\\|/g')
  printf '| %s | %s | %s | %d | %s |\n' "$name" "$rc" "$secs" "$((kb / 1024))" "$msg"
}

# A small trained model to feed.
"$bin/trainer" --config configs/smoke.toml --device cpu --out "$work/run" >/dev/null 2>&1
model=$work/run/model
"$bin/trainer" generate --config configs/smoke.toml --to "$work/data" >/dev/null
sample=$(find "$work/data" -name '*.parquet' | head -1)

# Files: a user's directory as --out.
mkdir -p "$work/theirs/model" && echo 'name = "theirs"' >"$work/theirs/config.toml" && echo keep >"$work/theirs/model/keep.txt"
probe "trainer --out a directory of someone's files" "$bin/trainer" --config configs/smoke.toml --device cpu --out "$work/theirs"
[ "$(cat "$work/theirs/config.toml")" = 'name = "theirs"' ] && [ -f "$work/theirs/model/keep.txt" ] || echo "LOST USER FILES"

python3 - "$work" crates/bundle/tests/fixtures/tiny_reference.pt "$model/model.json" <<'PY'
import json, struct, sys, zipfile
work, fixture, card = sys.argv[1:]
src = zipfile.ZipFile(fixture)
def edit(name, fn):
    with zipfile.ZipFile(f"{work}/{name}", "w", zipfile.ZIP_STORED) as out:
        for i in src.infolist():
            b = fn(i.filename, src.read(i))
            if b is not None:
                out.writestr(i.filename, b)
def pkl(old, new):
    return lambda n, b: b.replace(old, new, 1) if n.endswith("data.pkl") else b
edit("int64.pt", pkl(b"ctorch\nFloatStorage\n", b"ctorch\nLongStorage\n"))
J = lambda v: b"J" + struct.pack("<i", v)
edit("broadcast.pt", pkl(b"QK\x00K\x10K\n\x86q\tK\nK\x01\x86", b"QK\x00" + J(200000) + J(200000) + b"\x86q\tK\x00K\x00\x86"))
edit("deep.pt", lambda n, b: b"\x80\x02" + b"(" * 5_000_000 + b"t" * 5_000_000 + b"." if n.endswith("data.pkl") else b)
# A card for the fixture's architecture (benches/reference/torch_interop.py's TINY).
c = json.load(open(card))
c["model"] = {"kind": "conv_transformer", "dim": 16, "stages": 1, "conv_blocks_per_stage": 1, "kernel": 5,
              "expand": 2, "heads": 2, "eca_kernel": 3, "drop_path": 0.0, "attention_dropout": 0.0}
c["input_features"] = 10
c["labels"] = ["a", "b", "c", "d", "e"]
import os
os.makedirs(f"{work}/tiny_card")
open(f"{work}/tiny_card/model.json", "w").write(json.dumps(c))
# A card selecting two million landmarks.
c = json.load(open(card))
c["preprocess"]["landmarks"] = ["0-2000000"]
import os, shutil
shutil.copytree(os.path.dirname(card), f"{work}/landmarks_model")
open(f"{work}/landmarks_model/model.json", "w").write(json.dumps(c))
os.remove(f"{work}/landmarks_model/manifest.json")
# .npy declaring 2147483647 frames of 0 x 3 values (129 bytes).
h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2147483647, 0, 3), }"
h = h + " " * (117 - len(h) - 1) + "\n"
open(f"{work}/zero.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode())
# .npy version 3 whose header declares 2 GB (12 bytes in all).
open(f"{work}/header.npy", "wb").write(b"\x93NUMPY\x03\x00" + struct.pack("<I", 2_000_000_000))
# A card of a transformer whose positional table covers 65,536 frames.
c = json.load(open(card))
c["model"] = {"kind": "transformer", "dim": 16, "layers": 1, "heads": 2, "ff_dim": 16, "max_frames": 65536}
shutil.copytree(os.path.dirname(card), f"{work}/positions_model")
open(f"{work}/positions_model/model.json", "w").write(json.dumps(c))
os.remove(f"{work}/positions_model/manifest.json")
PY
for f in int64 broadcast deep; do
  probe "import-torch $f.pt" "$bin/infer" import-torch --weights "$work/$f.pt" --card "$work/tiny_card/model.json" --out "$work/imported-$f"
done
probe "predict a .npy of shape (2147483647, 0, 3)" "$bin/infer" predict --device cpu --model "$model" --input "$work/zero.npy"
probe "predict a 12-byte .npy whose header declares 2 GB" "$bin/infer" predict --device cpu --model "$model" --input "$work/header.npy"
probe "predict with a card of a transformer over 65,536 frames" "$bin/infer" predict --device cpu --model "$work/positions_model" --input "$sample"
probe "predict with a card selecting landmarks 0-2000000" "$bin/infer" predict --device cpu --model "$work/landmarks_model" --input "$sample"
probe "stream a 1.5 GB line without a newline" bash -c "head -c 1500000000 /dev/zero | tr '\\0' a | '$bin/infer' stream --device cpu --model '$model' --input -"
