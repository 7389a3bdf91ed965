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
# KERNEL_SEED=FILE.txz (a whole cache an earlier run brought back as kernels.txz: autotune results
# and compiled PTX) seeds an empty cache instead, which also skips the compilation.
# Order, for each of PRECISIONS (default "f32 bf16"; put bf16 first to give it the budget): the
# step counted on the cache as it is (the first run compiles and tunes the kernels; a cut run's
# launch log is kept to show where it stood), counted again on the warm cache (compilations of a
# second identical run), and against PyTorch (training, inference at batch 1 and BATCH); then the
# batch `auto` picks and a bench there, in `auto` precision and in f32. At the end the cache
# comes back as kernels.txz when it compresses to under 16 MiB.
# REFERENCE=1 adds the f32 step with Burn's tensor ops in place of SignFlow's CubeCL kernels.
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
PRECISIONS=${PRECISIONS:-f32 bf16}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export SIGNFLOW_KERNEL_CACHE=${KERNEL_CACHE:-$OUT/kernel-cache}
mkdir -p "$SIGNFLOW_KERNEL_CACHE"
HERE=$(cd "$(dirname "$0")/.." && pwd)
gpu_name=$(command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
seed="$HERE/benches/reference/kernel-cache/$(echo "${gpu_name:-none}" | tr 'A-Z ' 'a-z-')"
seeded=no
if [ -z "$(find "$SIGNFLOW_KERNEL_CACHE" -type f | head -1)" ]; then
  if [ -n "${KERNEL_SEED:-}" ] && [ -f "$KERNEL_SEED" ]; then
    xz -dc "$KERNEL_SEED" | tar xf - -C "$SIGNFLOW_KERNEL_CACHE" && seeded="from $KERNEL_SEED"
  elif [ -d "$seed" ]; then
    cp -r "$seed"/. "$SIGNFLOW_KERNEL_CACHE"/ && seeded="from $seed"
  fi
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

have_torch=$(python3 -c "import torch; print(torch.__version__)" 2>/dev/null || echo "")

# Side by side with PyTorch eager (compare.py runs both and prints the table); without PyTorch,
# SignFlow's half alone.
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

# measure P: the work of one step in precision P counted (P named: `auto` is bf16 on GPUs with
# bf16 tensor cores): the first run on this cache compiles and tunes, with its launch log kept
# under OUT/tmp when it is cut, so where it stood (compiling, tuning, running) shows; then, when
# it finished, the same again on the warm cache (what a second identical run compiles) and P
# against PyTorch.
measure() {
  local p=$1 rc smi=
  mkdir -p "$OUT/tmp"
  if [ "$DEVICE" = cuda ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 5 > "$OUT/$p-gpu.csv" 2>/dev/null &
    smi=$!
  fi
  TMPDIR="$OUT/tmp" step "count-$p" "$FIRST_LIMIT" "$BIN/trainer" bench --count --reference --device "$DEVICE" \
    --precision "$p" "${shape[@]}" --json "$OUT/count-$p.json"
  rc=$?
  [ -n "$smi" ] && kill "$smi" 2>/dev/null
  echo "  (kernel cache now $(files) files)" >> "$REPORT"
  local left_log
  left_log=$(find "$OUT/tmp" -name kernels.log 2>/dev/null | head -1)
  if [ -n "$left_log" ]; then
    {
      echo "$p launch log left by the cut run: $(wc -l < "$left_log") lines, $(grep -ci compil "$left_log") compilation lines"
      echo "last 30 lines:"
      tail -30 "$left_log" | cut -c1-240
      echo "GPU utilization, memory (every 5 s):"
      cat "$OUT/$p-gpu.csv" 2>/dev/null
    } > "$OUT/count-$p-cut.out"
  fi
  rm -rf "$OUT/tmp"
  [ "$rc" -eq 0 ] || return "$rc"
  step "count-$p-warm" "$LIMIT" "$BIN/trainer" bench --count --reference --device "$DEVICE" --precision "$p" \
    --batch "$BATCH" --frames "$FRAMES" --steps 3 --json "$OUT/count-$p-warm.json"
  compare "$p"
}

for p in $PRECISIONS; do
  measure "$p"
done

# 3b. With REFERENCE=1: the f32 step again with Burn's tensor ops in place of SignFlow's CubeCL
# kernels (SIGNFLOW_GPU_KERNELS=reference), the kernels' own gain on this GPU.
if [ "${REFERENCE:-0}" = 1 ]; then
  SIGNFLOW_GPU_KERNELS=reference step "bench-f32-reference-ops" "$LIMIT" "$BIN/trainer" bench --reference \
    --device "$DEVICE" --precision f32 "${shape[@]}" --latency-runs 0 --json "$OUT/bench-f32-reference-ops.json"
fi

# 4. The batch size `auto` picks, and the training step at it.
# The reference recipe on built-in synthetic data (data.path empty), so no dataset is needed.
if step tune-batch "$((LIMIT * 2 / 3))" "$BIN/trainer" tune-batch --device "$DEVICE" --config configs/islr-reference.toml \
    --set 'data.path=""' --set "data.synthetic_dir=\"$OUT/work/synth\"" --set "data.cache_dir=\"$OUT/work/cache\""; then
  auto=$(grep -oE 'chosen: batch_size = [0-9]+' "$OUT/tune-batch.out" | grep -oE '[0-9]+$')
  if [ -n "$auto" ]; then
    step "bench-auto-$auto" "$((LIMIT * 2 / 3))" "$BIN/trainer" bench --reference --device "$DEVICE" --batch "$auto" \
      --frames "$FRAMES" --steps "$STEPS" --latency-runs 0 --json "$OUT/bench-auto.json"
    # f32 at the same batch: at batch 64 the step is bound by the host's work per launch, the
    # same in every precision, so half precision's gain over f32 shows only where the GPU's
    # arithmetic is the larger part (the batch `auto` picks is the largest that fits).
    step "bench-auto-$auto-f32" "$((LIMIT * 2 / 3))" "$BIN/trainer" bench --reference --device "$DEVICE" \
      --precision f32 --batch "$auto" --frames "$FRAMES" --steps "$STEPS" --latency-runs 0 \
      --json "$OUT/bench-auto-f32.json"
  fi
fi
rm -rf "$OUT/work"
# The autotune results (kilobytes) come back.
[ -d "$SIGNFLOW_KERNEL_CACHE/autotune" ] && tar czf "$OUT/autotune.tgz" -C "$SIGNFLOW_KERNEL_CACHE" autotune
# The whole cache (compiled PTX too) when it is small enough to bring back.
tar cf - -C "$SIGNFLOW_KERNEL_CACHE" . | xz -T0 -6 > "$OUT/kernels.txz"
[ "$(stat -c %s "$OUT/kernels.txz")" -gt $((16 << 20)) ] && rm -f "$OUT/kernels.txz"

{
  echo
  [ -n "$have_torch" ] && echo "PyTorch $have_torch" || echo "PyTorch: not installed (SignFlow's figures only)"
  for f in "$OUT"/count-*.out "$OUT"/compare-*.out "$OUT"/bench-*.out "$OUT"/tune-batch.out; do
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
