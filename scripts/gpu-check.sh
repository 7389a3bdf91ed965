#!/usr/bin/env bash
# GPU check from prebuilt binaries (no Rust needed on the GPU machine). Runs every GPU path on
# each GPU backend it finds (CUDA, WGPU; a software Vulkan adapter such as llvmpipe counts) and
# writes OUT_DIR/report.md with what ran, where, and the figures.
#   Build here:   cargo build --release -p device -p infer && cargo build --release -p trainer --features fault-injection
#                 (the training check injects an out-of-memory: trainer::inject)
#   Run there:    BIN=target/release scripts/gpu-check.sh [OUT_DIR]
# Same script, no edits, on a CUDA machine and on a machine with only WGPU.
set -uo pipefail
BIN=${BIN:-target/release}
OUT=${1:-${OUT:-gpu-check-out}}
STEPS=${STEPS:-12}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
REPORT="$OUT/report.md"
: > "$OUT/log.txt"
run() {
  echo "\$ $*" | tee -a "$OUT/log.txt"
  "$@" 2>&1 | tee -a "$OUT/log.txt"
  local rc=${PIPESTATUS[0]}
  echo "(exit $rc)" | tee -a "$OUT/log.txt"
  return "$rc"
}
# Like run, but stdout goes to file $1 (the command line and stderr go to the log).
capture() {
  local file=$1; shift
  echo "\$ $* > $file" | tee -a "$OUT/log.txt"
  "$@" > "$file" 2>> "$OUT/log.txt"
  local rc=$?
  echo "(exit $rc)" | tee -a "$OUT/log.txt"
  return "$rc"
}
result() { echo "| $1 | $2 | $3 |" >> "$REPORT"; }

{
  echo "# GPU check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "- host: $(uname -srm); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  command -v nvidia-smi >/dev/null && echo "- nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tr '\n' ';')"
  echo
  echo "| check | backend | result |"
  echo "|---|---|---|"
} > "$REPORT"

command -v nvidia-smi >/dev/null && run nvidia-smi
run "$BIN/device" list
"$BIN/device" list --json > "$OUT/list.json" 2>>"$OUT/log.txt"
run "$BIN/device" select --device auto

backends=()
for b in cuda wgpu; do
  if run "$BIN/device" select --device "$b"; then backends+=("$b"); else result "select" "$b" "not available (see log.txt)"; fi
done

# Tiny synthetic experiment on the built-in default model (conv-transformer).
work="$OUT/work"
mkdir -p "$work"
common=(--set "data.synthetic_dir=\"$work/synth\"" --set "data.cache_dir=\"$work/cache\""
        --set synthetic.classes=6 --set synthetic.signers=4 --set synthetic.repetitions=4
        --set training.batch_size=8 --set training.log_every=1 --set "training.max_steps=$STEPS"
        --set training.epochs=2 --set training.progress=\"plain\")

for b in "${backends[@]}"; do
  size=1024; [ "$b" = cuda ] && size=4096
  if capture "$OUT/check-$b.json" "$BIN/device" check --device "$b" --size "$size" --json; then
    result "matmul vs CPU, memory before/after empty_cache" "$b" \
      "ok: $(python3 -c "import json;d=json.load(open('$OUT/check-$b.json'));m=d['memory'];print('max abs error',d['matmul']['max_abs_error'],'; memory',json.dumps(m).replace('|','/'))" 2>/dev/null || echo "see check-$b.json")"
  else
    result "matmul check" "$b" "FAILED"
  fi
  for p in f32 f16; do
    dir="$work/train-$b-$p"
    rm -rf "$dir"
    if run "$BIN/trainer" --device "$b" --precision "$p" --out "$dir" "${common[@]}" \
        --inject 'oom_at_steps=[5]' --set checkpoint.gpu_every_steps=4; then
      s="$dir/summary.json"
      result "train $STEPS steps (injected OOM at step 5)" "$b $p" \
        "ok: $(python3 -c "import json;d=json.load(open('$s'));print('precision',d['precision'],'(',d['precision_reason'],'); train loss',round(d['last']['train_loss'],3),'; device faults survived',len(d['device_faults']),'; micro-batch',d['batch_size'],'x',d['accumulation_steps'],'; peak MiB in use / reserved',[round(v,1) for v in d['peak_memory_mib']],';',round(d['samples_per_s']),'samples/s')" 2>/dev/null || echo see $s)"
    else
      result "train $STEPS steps" "$b $p" "FAILED (exit $?)"
    fi
  done
  model="$work/train-$b-f32"
  if [ -f "$model/model/model.json" ]; then
    clip=$(find "$work/synth" -name '*.parquet' | head -1)
    if capture "$OUT/predict-$b.json" "$BIN/infer" predict --model "$model" --device "$b" --input "$clip" --json \
      && capture "$OUT/predict-cpu.json" "$BIN/infer" predict --model "$model" --device cpu --input "$clip" --json; then
      result "infer predict, compared with the CPU" "$b" "$(python3 -c "
import json
g, c = (json.loads(open(f).readline()) for f in ('$OUT/predict-$b.json', '$OUT/predict-cpu.json'))
top = lambda d: d['top'][0]
dp = max(abs(a['probability'] - b['probability']) for a, b in zip(g['top'], c['top']))
print('ok: top-1', top(g)['label'], 'same as the CPU' if top(g)['index'] == top(c)['index'] else 'DIFFERS from the CPU', '; max abs dp', '%.1e' % dp)
" 2>/dev/null || echo "ok (predict-$b.json, predict-cpu.json)")"
    else
      result "infer predict" "$b" "FAILED"
    fi
    run "$BIN/infer" bench --model "$model" --device "$b" --batch 1,8 --runs 10 \
      && result "infer bench" "$b" "ok (log.txt)" || result "infer bench" "$b" "FAILED"
    run "$BIN/infer" stream --model "$model" --device "$b" --input "$clip" \
      && result "infer stream" "$b" "ok (log.txt)" || result "infer stream" "$b" "FAILED"
  fi
done

# Data-parallel: a CPU peer plus the GPU peer (shares by measured speed), and every CUDA GPU when
# there are several; then the fastest-device choice.
for b in "${backends[@]}"; do
  dir="$work/group-cpu-$b"
  rm -rf "$dir"
  if run "$BIN/trainer" --devices "cpu,$b" --balance measured --out "$dir" "${common[@]}" \
      --set distributed.rebalance_every=4 --set device.allow_software_wgpu=true; then
    result "data-parallel cpu + $b, measured shares" "$b" "ok: $(python3 -c "import json;d=json.load(open('$dir/summary.json'));print('train loss',round(d['last']['train_loss'],3),'; peers',[(p['device'],p['rows'],round(p['samples_per_s'] or 0)) for p in d['distributed']['peers']],';',round(d['samples_per_s']),'samples/s')" 2>/dev/null || echo "see $dir/summary.json")"
  else
    result "data-parallel cpu + $b" "$b" "FAILED (exit $?)"
  fi
done
if [[ " ${backends[*]} " == *" cuda "* ]] && [ "$(python3 -c "import json;print(len(json.load(open('$OUT/list.json'))['cuda']['gpus']))" 2>/dev/null || echo 0)" -gt 1 ]; then
  dir="$work/group-gpus"
  rm -rf "$dir"
  run "$BIN/trainer" --devices gpus --out "$dir" "${common[@]}" \
    && result "data-parallel on every CUDA GPU" cuda "ok: $(python3 -c "import json;d=json.load(open('$dir/summary.json'));print(len(d['distributed']['peers']),'peers;',round(d['samples_per_s']),'samples/s')" 2>/dev/null)" \
    || result "data-parallel on every CUDA GPU" cuda "FAILED"
fi
dir="$work/fastest"
rm -rf "$dir"
if run "$BIN/trainer" --out "$dir" "${common[@]}" --set 'device.choose="fastest"' --set device.allow_software_wgpu=true; then
  result "device.choose = fastest" "all" "$(python3 -c "import json;d=json.load(open('$dir/summary.json'));print(d['device'],':',d['device_reason'])" 2>/dev/null | tr '|' '/')"
else
  result "device.choose = fastest" "all" "FAILED"
fi

# NVML samples while a CUDA GPU is busy.
if [[ " ${backends[*]} " == *" cuda "* ]]; then
  ( for _ in 1 2 3; do "$BIN/device" check --device cuda --size 8192 >/dev/null 2>&1; done ) &
  load=$!
  run "$BIN/device" monitor --interval-ms 250 --duration-s 5 --out "$OUT/monitor.csv" \
    && result "NVML monitor 5 s" cuda "ok (monitor.csv)" || result "NVML monitor" cuda "FAILED"
  wait $load
fi
echo "report: $REPORT"
cat "$REPORT"
