#!/usr/bin/env bash
# GPU check from prebuilt binaries (no Rust needed on the GPU machine).
#   Build here:   cargo build --release -p device
#   Run there:    BIN=target/release scripts/gpu-check.sh [OUT_DIR]
# Prints the inventory and the auto choice, resolves explicit specs, runs a matmul on CUDA with
# memory statistics before/after empty_cache, and samples the GPUs for 5 s through NVML.
set -uo pipefail
BIN=${BIN:-target/release}
OUT=${1:-${OUT:-gpu-check-out}}
mkdir -p "$OUT"
run() {
  echo "\$ $*" | tee -a "$OUT/log.txt"
  "$@" 2>&1 | tee -a "$OUT/log.txt"
  echo "(exit ${PIPESTATUS[0]})" | tee -a "$OUT/log.txt"
}
command -v nvidia-smi >/dev/null && run nvidia-smi
run "$BIN/device" list
"$BIN/device" list --json > "$OUT/list.json" 2>>"$OUT/log.txt"
run "$BIN/device" select --device auto
run "$BIN/device" select --device cuda
run "$BIN/device" select --device cuda:7
run "$BIN/device" select --device wgpu
run "$BIN/device" check --device cuda --size 4096
run "$BIN/device" check --device cuda --size 4096 --json
run "$BIN/device" check --device wgpu --size 1024
# 5 s of NVML samples while the GPU is busy with repeated large matmuls.
( for _ in 1 2 3; do "$BIN/device" check --device cuda --size 8192 >/dev/null 2>&1; done ) &
load=$!
run "$BIN/device" monitor --interval-ms 250 --duration-s 5 --out "$OUT/monitor.csv"
wait $load
echo "outputs in $OUT"
