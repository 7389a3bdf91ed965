#!/usr/bin/env bash
# Speed of the reference model's training step and inference on one GPU, side by side with
# PyTorch eager, from prebuilt binaries (no Rust on the GPU machine), in at most 7.5 minutes
# (the first part compiles and tunes the kernels into the cache the later parts reuse).
# Writes OUT_DIR/speed.md (the figures, with the GPU model) and OUT_DIR/kernel-cache (cubecl's
# autotune results and compiled kernels, to carry to the next run: KERNEL_CACHE=that directory).
#   Build here:   cargo build --release -p trainer
#   Run there:    BIN=target/release DEVICE=cuda scripts/gpu-speed.sh OUT_DIR
# Every step has its own time limit; one that runs out is reported as such and the rest go on.
# DEVICE=wgpu runs the same on a WGPU adapter (llvmpipe too: BATCH=8 FRAMES=16 STEPS=2 keep it short).
set -uo pipefail
BIN=${BIN:-target/release}
DEVICE=${DEVICE:-cuda}
OUT=${1:-${OUT:-gpu-speed-out}}
BATCH=${BATCH:-64}
FRAMES=${FRAMES:-64}
STEPS=${STEPS:-10}
FIRST_LIMIT=${FIRST_LIMIT:-150}
LIMIT=${LIMIT:-90}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export SIGNFLOW_KERNEL_CACHE=${KERNEL_CACHE:-$OUT/kernel-cache}
mkdir -p "$SIGNFLOW_KERNEL_CACHE"
REPORT="$OUT/speed.md"
LOG="$OUT/log.txt"
: > "$LOG"
shape=(--batch "$BATCH" --frames "$FRAMES" --steps "$STEPS")

# step NAME LIMIT_S CMD...: run with a time limit, stdout to OUT/NAME.out, stderr to the log.
step() {
  local name=$1 limit=$2; shift 2
  echo "\$ timeout $limit $*" >> "$LOG"
  local t0=$SECONDS
  timeout --signal=INT --kill-after=10 "$limit" "$@" > "$OUT/$name.out" 2>> "$LOG"
  local rc=$?
  echo "(exit $rc after $((SECONDS - t0)) s)" >> "$LOG"
  case $rc in
    0) echo "- $name: done in $((SECONDS - t0)) s" >> "$REPORT" ;;
    124|137) echo "- $name: **stopped after $limit s** (the last lines of log.txt show where)" >> "$REPORT" ;;
    *) echo "- $name: failed (exit $rc, see log.txt)" >> "$REPORT" ;;
  esac
  return "$rc"
}

{
  echo "# GPU speed $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "- host: $(uname -srm); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  command -v nvidia-smi >/dev/null && echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tr '\n' ';')"
  echo "- device $DEVICE; reference conv-transformer, batch $BATCH x $FRAMES frames, $STEPS timed steps"
  echo "- kernel cache: $SIGNFLOW_KERNEL_CACHE ($(find "$SIGNFLOW_KERNEL_CACHE" -type f | wc -l) files at start)"
  echo
} > "$REPORT"

# 1. The work of one step, counted (launches, host waits, compilations).
step count-f32 "$FIRST_LIMIT" "$BIN/trainer" bench --count --reference --device "$DEVICE" "${shape[@]}" \
  --json "$OUT/count-f32.json"

# 2. f32 and bf16 side by side with PyTorch eager (compare.py runs both and prints the table);
#    without PyTorch, SignFlow's half alone.
have_torch=$(python3 -c "import torch; print(torch.__version__)" 2>/dev/null || echo "")
for p in f32 bf16; do
  if [ -n "$have_torch" ]; then
    step "compare-$p" "$LIMIT" python3 benches/reference/compare.py --device "$DEVICE" --precision "$p" \
      --trainer "$BIN/trainer" --batch "$BATCH" --frames "$FRAMES" --steps "$STEPS" --markdown
  else
    step "bench-$p" "$LIMIT" "$BIN/trainer" bench --reference --device "$DEVICE" --precision "$p" "${shape[@]}" \
      --latency-runs 20 --json "$OUT/bench-$p.json"
  fi
done

# 3. The batch size `auto` picks, and the training step at it.
# The reference recipe on built-in synthetic data (data.path empty), so no dataset is needed.
if step tune-batch "$((LIMIT * 2 / 3))" "$BIN/trainer" tune-batch --device "$DEVICE" --config configs/islr-reference.toml \
    --set 'data.path=""' --set "data.synthetic_dir=\"$OUT/work/synth\"" --set "data.cache_dir=\"$OUT/work/cache\""; then
  auto=$(grep -oE 'chosen: batch_size = [0-9]+' "$OUT/tune-batch.out" | grep -oE '[0-9]+$')
  if [ -n "$auto" ]; then
    step "bench-auto-$auto" "$((LIMIT * 2 / 3))" "$BIN/trainer" bench --reference --device "$DEVICE" --batch "$auto" \
      --frames "$FRAMES" --steps "$STEPS" --latency-runs 0 --json "$OUT/bench-auto.json"
  fi
fi

{
  echo
  [ -n "$have_torch" ] && echo "PyTorch $have_torch" || echo "PyTorch: not installed (SignFlow's figures only)"
  for f in "$OUT"/count-f32.out "$OUT"/compare-*.out "$OUT"/bench-*.out "$OUT"/tune-batch.out; do
    [ -s "$f" ] || continue
    echo
    echo "### $(basename "$f" .out)"
    echo '```'
    head -40 "$f"
    echo '```'
  done
  echo
  echo "kernel cache at the end: $(find "$SIGNFLOW_KERNEL_CACHE" -type f | wc -l) files"
} >> "$REPORT"
cat "$REPORT"
