#!/usr/bin/env bash
# Speed of the reference model's training step and inference on one GPU, side by side with
# PyTorch eager, from prebuilt binaries (no Rust on the GPU machine), inside a time budget
# (BUDGET seconds, default 450: a step that would not fit is shortened or skipped).
# Writes OUT_DIR/speed.md (the figures, with the GPU model), OUT_DIR/log.txt, the JSON reports and
# OUT_DIR/autotune.tgz (the autotune results, small enough to bring back), and keeps cubecl's
# autotune results and compiled kernels in KERNEL_CACHE (default OUT_DIR/kernel-cache) for the
# steps after the first. An empty cache is first seeded from benches/reference/kernel-cache/<GPU>
# (e.g. nvidia-h200: autotune results an earlier run brought back), since tuning the matrix
# products of a cold cache takes minutes on CUDA (docs/gpu-report.md).
#   Build here:   cargo build --release -p trainer
#   Run there:    BIN=target/release DEVICE=cuda scripts/gpu-speed.sh OUT_DIR
# Order: the f32 step counted on a cold cache (it compiles and tunes the kernels), counted again
# on the warm cache (compilations of a second identical run), f32 against PyTorch (training,
# inference at batch 1 and BATCH), the bf16 step counted (its launch log is kept when the step is
# cut, to show where it stood), bf16 against PyTorch, then the batch `auto` picks and a bench there.
# DEVICE=wgpu runs the same on a WGPU adapter (llvmpipe too: BATCH=8 FRAMES=16 STEPS=2 keep it short).
set -uo pipefail
BIN=${BIN:-target/release}
DEVICE=${DEVICE:-cuda}
OUT=${1:-${OUT:-gpu-speed-out}}
BATCH=${BATCH:-64}
FRAMES=${FRAMES:-64}
STEPS=${STEPS:-10}
FIRST_LIMIT=${FIRST_LIMIT:-240}
LIMIT=${LIMIT:-90}
BUDGET=${BUDGET:-450}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export SIGNFLOW_KERNEL_CACHE=${KERNEL_CACHE:-$OUT/kernel-cache}
mkdir -p "$SIGNFLOW_KERNEL_CACHE"
HERE=$(cd "$(dirname "$0")/.." && pwd)
gpu_name=$(command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
seed="$HERE/benches/reference/kernel-cache/$(echo "${gpu_name:-none}" | tr 'A-Z ' 'a-z-')"
seeded=no
if [ -d "$seed" ] && [ -z "$(find "$SIGNFLOW_KERNEL_CACHE" -type f | head -1)" ]; then
  cp -r "$seed"/. "$SIGNFLOW_KERNEL_CACHE"/ && seeded="from $seed"
fi
REPORT="$OUT/speed.md"
LOG="$OUT/log.txt"
: > "$LOG"
shape=(--batch "$BATCH" --frames "$FRAMES" --steps "$STEPS")

# step NAME LIMIT_S CMD...: run with a time limit (cut to what is left of BUDGET; skipped under
# 20 s), stdout to OUT/NAME.out, stderr to the log.
step() {
  local name=$1 limit=$2; shift 2
  local left=$((BUDGET - SECONDS))
  if [ "$left" -lt 20 ]; then
    echo "- $name: skipped (the ${BUDGET} s budget is spent)" >> "$REPORT"
    return 125
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "\$ timeout $limit $*" >> "$LOG"
  local t0=$SECONDS
  timeout --signal=INT --kill-after=10 "$limit" "$@" > "$OUT/$name.out" 2>> "$LOG"
  local rc=$?
  echo "(exit $rc after $((SECONDS - t0)) s)" >> "$LOG"
  case $rc in
    0) echo "- $name: done in $((SECONDS - t0)) s" >> "$REPORT" ;;
    124|137|130) echo "- $name: **stopped after $limit s** (the last lines of log.txt show where)" >> "$REPORT" ;;
    *) echo "- $name: failed (exit $rc, see log.txt)" >> "$REPORT" ;;
  esac
  return "$rc"
}

files() { find "$SIGNFLOW_KERNEL_CACHE" -type f | wc -l; }

{
  echo "# GPU speed $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "- host: $(uname -srm); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) threads"
  command -v nvidia-smi >/dev/null && echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tr '\n' ';')"
  echo "- device $DEVICE; reference conv-transformer, batch $BATCH x $FRAMES frames, $STEPS timed steps"
  echo "- kernel cache: $SIGNFLOW_KERNEL_CACHE ($(files) files at start; seeded: $seeded)"
  echo
} > "$REPORT"

# 1. The work of one f32 step, counted (f32 named: `auto` is bf16 on GPUs with bf16 tensor cores) (launches, host waits, compilations): the first run on
#    this cache compiles and tunes; the second, identical, shows what a warm cache leaves.
step count-f32 "$FIRST_LIMIT" "$BIN/trainer" bench --count --reference --device "$DEVICE" --precision f32 "${shape[@]}" \
  --json "$OUT/count-f32.json"
echo "  (kernel cache now $(files) files)" >> "$REPORT"
step count-f32-warm "$LIMIT" "$BIN/trainer" bench --count --reference --device "$DEVICE" --precision f32 \
  --batch "$BATCH" --frames "$FRAMES" --steps 3 --json "$OUT/count-f32-warm.json"

# 2. f32 side by side with PyTorch eager (compare.py runs both and prints the table); without
#    PyTorch, SignFlow's half alone.
have_torch=$(python3 -c "import torch; print(torch.__version__)" 2>/dev/null || echo "")
compare() {
  local p=$1
  if [ -n "$have_torch" ]; then
    step "compare-$p" "$LIMIT" python3 benches/reference/compare.py --device "$DEVICE" --precision "$p" \
      --trainer "$BIN/trainer" --batch "$BATCH" --frames "$FRAMES" --steps "$STEPS" --markdown
  else
    step "bench-$p" "$LIMIT" "$BIN/trainer" bench --reference --device "$DEVICE" --precision "$p" "${shape[@]}" \
      --latency-runs 20 --json "$OUT/bench-$p.json"
  fi
}
compare f32

# 3. The bf16 step counted. Its launch log lives in a temporary directory under OUT/tmp, left
#    there when the step is cut, so where it stood (compiling, tuning, running) shows.
mkdir -p "$OUT/tmp"
if [ "$DEVICE" = cuda ] && command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 5 > "$OUT/bf16-gpu.csv" 2>/dev/null &
  smi=$!
fi
TMPDIR="$OUT/tmp" step count-bf16 "$FIRST_LIMIT" "$BIN/trainer" bench --count --reference --device "$DEVICE" \
  --precision bf16 "${shape[@]}" --json "$OUT/count-bf16.json"
bf16=$?
[ -n "${smi:-}" ] && kill "$smi" 2>/dev/null
left_log=$(find "$OUT/tmp" -name kernels.log 2>/dev/null | head -1)
if [ -n "$left_log" ]; then
  {
    echo "bf16 launch log left by the cut run: $(wc -l < "$left_log") lines, $(grep -ci compil "$left_log") compilation lines"
    echo "last 30 lines:"
    tail -30 "$left_log" | cut -c1-240
    echo "GPU utilization, memory (every 5 s):"
    cat "$OUT/bf16-gpu.csv" 2>/dev/null
  } > "$OUT/count-bf16-cut.out"
fi
rm -rf "$OUT/tmp"
[ "$bf16" -eq 0 ] && compare bf16

# 4. The batch size `auto` picks, and the training step at it.
# The reference recipe on built-in synthetic data (data.path empty), so no dataset is needed.
if step tune-batch "$((LIMIT * 2 / 3))" "$BIN/trainer" tune-batch --device "$DEVICE" --config configs/islr-reference.toml \
    --set 'data.path=""' --set "data.synthetic_dir=\"$OUT/work/synth\"" --set "data.cache_dir=\"$OUT/work/cache\""; then
  auto=$(grep -oE 'chosen: batch_size = [0-9]+' "$OUT/tune-batch.out" | grep -oE '[0-9]+$')
  if [ -n "$auto" ]; then
    step "bench-auto-$auto" "$((LIMIT * 2 / 3))" "$BIN/trainer" bench --reference --device "$DEVICE" --batch "$auto" \
      --frames "$FRAMES" --steps "$STEPS" --latency-runs 0 --json "$OUT/bench-auto.json"
  fi
fi
rm -rf "$OUT/work"
# The autotune results (kilobytes) come back; the compiled kernels (tens of MB) stay.
[ -d "$SIGNFLOW_KERNEL_CACHE/autotune" ] && tar czf "$OUT/autotune.tgz" -C "$SIGNFLOW_KERNEL_CACHE" autotune

{
  echo
  [ -n "$have_torch" ] && echo "PyTorch $have_torch" || echo "PyTorch: not installed (SignFlow's figures only)"
  for f in "$OUT"/count-f32.out "$OUT"/count-f32-warm.out "$OUT"/compare-*.out "$OUT"/bench-*.out \
      "$OUT"/count-bf16.out "$OUT"/count-bf16-cut.out "$OUT"/tune-batch.out; do
    [ -s "$f" ] || continue
    echo
    echo "### $(basename "$f" .out)"
    echo '```'
    head -60 "$f"
    echo '```'
  done
  echo
  echo "kernel cache at the end: $(files) files, $(du -sh "$SIGNFLOW_KERNEL_CACHE" | cut -f1)"
} >> "$REPORT"
cat "$REPORT"
