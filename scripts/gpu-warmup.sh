#!/usr/bin/env bash
# Where the first training step's time goes on a GPU: the reference model's step counted twice,
# first on an empty kernel cache, then on the cache the first run left (cubecl's autotune
# results and compiled kernels), with the launch log sampled every 5 s (lines launched, kernels
# compiled, autotune runs of matrix-product candidates, GPU utilization). From prebuilt binaries.
#   Build here:   cargo build --release -p trainer
#   Run there:    BIN=target/release DEVICE=cuda scripts/gpu-warmup.sh OUT_DIR
# Writes OUT_DIR/warmup.md, OUT_DIR/log.txt and the two count reports as JSON.
set -uo pipefail
BIN=${BIN:-target/release}
DEVICE=${DEVICE:-cuda}
OUT=${1:-${OUT:-gpu-warmup-out}}
BATCH=${BATCH:-64}
FRAMES=${FRAMES:-64}
PRECISION=${PRECISION:-f32}
COLD_LIMIT=${COLD_LIMIT:-160}
WARM_LIMIT=${WARM_LIMIT:-75}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export SIGNFLOW_KERNEL_CACHE=${KERNEL_CACHE:-$OUT/kernel-cache}
REPORT="$OUT/warmup.md"
LOG="$OUT/log.txt"
: > "$LOG"
util() {
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null | tr '\n' ' '
}

# counted NAME LIMIT: one `bench --count` run, its launch log sampled every 5 s into the report.
counted() {
  local name=$1 limit=$2 tmp="$OUT/tmp-$1"
  mkdir -p "$tmp"
  echo "## $name (limit $limit s; cache $(find "$SIGNFLOW_KERNEL_CACHE" -type f 2>/dev/null | wc -l) files, $(du -sh "$SIGNFLOW_KERNEL_CACHE" 2>/dev/null | cut -f1))" >> "$REPORT"
  echo >> "$REPORT"
  echo "| s | launch-log lines | kernels compiled | matmul runs | GPU util, memory |" >> "$REPORT"
  echo "|---:|---:|---:|---:|---|" >> "$REPORT"
  echo "\$ timeout $limit trainer bench --count --reference --device $DEVICE --precision $PRECISION --batch $BATCH --frames $FRAMES --steps 2" >> "$LOG"
  local t0=$SECONDS
  TMPDIR="$tmp" timeout --signal=INT --kill-after=10 "$limit" "$BIN/trainer" bench --count --reference \
    --device "$DEVICE" --precision "$PRECISION" --batch "$BATCH" --frames "$FRAMES" --steps 2 --json "$OUT/$name.json" \
    > "$OUT/$name.out" 2>> "$LOG" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    local f
    f=$(find "$tmp" -name kernels.log 2>/dev/null | head -1)
    [ -n "$f" ] || continue
    echo "| $((SECONDS - t0)) | $(wc -l < "$f") | $(grep -c '^\[Compiling' "$f") | $(grep -c '^Executing MatmulEntry' "$f") | $(util) |" >> "$REPORT"
  done
  wait "$pid"
  local rc=$?
  echo "(exit $rc after $((SECONDS - t0)) s)" >> "$LOG"
  {
    echo
    echo "exit $rc after $((SECONDS - t0)) s"
    echo '```'
    head -40 "$OUT/$name.out"
    echo '```'
    echo
  } >> "$REPORT"
  rm -rf "$tmp"
}

{
  echo "# First-step warm-up $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "- host: $(uname -srm); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) threads"
  command -v nvidia-smi >/dev/null && echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tr '\n' ';')"
  echo "- device $DEVICE, precision $PRECISION; reference conv-transformer, batch $BATCH x $FRAMES frames; kernel cache $SIGNFLOW_KERNEL_CACHE"
  echo "- CUDA driver JIT cache: ${CUDA_CACHE_PATH:-~/.nv/ComputeCache} ($(du -sh "${CUDA_CACHE_PATH:-$HOME/.nv/ComputeCache}" 2>/dev/null | cut -f1) at start)"
  echo
} > "$REPORT"
counted cold "$COLD_LIMIT"
counted warm "$WARM_LIMIT"
echo "CUDA driver JIT cache at the end: $(du -sh "${CUDA_CACHE_PATH:-$HOME/.nv/ComputeCache}" 2>/dev/null | cut -f1)" >> "$REPORT"
cat "$REPORT"
