#!/usr/bin/env bash
# Writes the golden files that the trainer test `golden_files_of_this_release_load_resume_and_hold_their_format`
# reads: what the current release writes for the smoke experiment, on the synthetic data of
# `trainer generate` (which a test regenerates bit for bit), into OUT (a new directory):
#   OUT/finished     a complete run: config.toml, checkpoints, metrics, summary, the bundle in model/
#   OUT/interrupted  the same run stopped after 7 steps (checkpoints at steps 3 and 6)
#   OUT/input.npz    a fixed input (x: [2, window, features], valid: [2])
#   OUT/logits.npy   what `infer logits` gives for it with finished/model
# When a format changes, its version is bumped and a new OUT is written beside the old ones,
# which keep loading. Usage (after `cargo build --release -p infer && cargo build --release -p
# trainer --features fault-injection`):
#   BIN=target/release scripts/golden-fixtures.sh crates/trainer/tests/fixtures/golden-v1
set -euo pipefail
BIN=${BIN:-target/release}
out=${1:?usage: scripts/golden-fixtures.sh OUT}
[ -e "$out" ] && { echo "$out exists" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
common=(--config configs/smoke.toml --device cpu --set training.progress=off
  --set "data.path=$tmp/data" --set "data.cache_dir=$tmp/cache")
"$BIN/trainer" generate --config configs/smoke.toml --to "$tmp/data" >/dev/null
"$BIN/trainer" "${common[@]}" --out "$out/finished" >/dev/null
"$BIN/trainer" "${common[@]}" --out "$out/interrupted" --inject interrupt_after_steps=7 >/dev/null
python3 - "$out/finished/model/model.json" "$out/input.npz" <<'PY'
import json, math, struct, sys, zipfile
card = json.load(open(sys.argv[1]))
window, features = card["preprocess"]["window"], card["input_features"]
def npy(shape, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{s}," for s in shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + struct.pack(f"<{len(values)}f", *values)
x = [math.sin(0.37 * i) * 0.8 for i in range(2 * window * features)]
with zipfile.ZipFile(sys.argv[2], "w") as z:
    z.writestr("x.npy", npy([2, window, features], x))
    z.writestr("valid.npy", npy([2], [float(window), float(window // 2)]))
PY
"$BIN/infer" logits --model "$out/finished" --device cpu --input "$out/input.npz" --out "$out/logits.npy" >/dev/null
du -sh "$out"
