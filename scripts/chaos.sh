#!/usr/bin/env bash
# Chaos harness: kill -9 the trainer at random moments -- during dataset generation, during
# preprocessing/caching, during checkpoint writes and anywhere in training -- continue after each
# kill (--resume once the run directory has its config, otherwise the same command again), then
# check that the final weights equal an uninterrupted run's bit for bit (CPU, summary.json
# final_weights_fingerprint). Prints and writes OUT/chaos.md: kills, resumes, work lost.
#   Build:  cargo build --release -p trainer --features fault-injection   (for the pauses)
#   Run:    scripts/chaos.sh [OUT]          (default experiment, 20 kills, ~3 min on 2 cores)
# Knobs (environment): KILLS (20), SEED (1, the kill times), MAX_MS (longest wait before a random
# kill, 3000), EVERY (checkpoint.every_steps, 20), CONFIG (an experiment file; default: built-in),
# SETS (extra space-separated KEY=VALUE overrides), PAUSE_MS (a pause inside every checkpoint
# write, 0; slows short runs so kills land), BIN.
set -uo pipefail
BIN=${BIN:-target/release}
OUT=${1:-${OUT:-chaos-out}}
KILLS=${KILLS:-20}
SEED=${SEED:-1}
MAX_MS=${MAX_MS:-3000}
EVERY=${EVERY:-20}
PAUSE_MS=${PAUSE_MS:-0}
RANDOM=$SEED
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/chaos.log"
: > "$LOG"
TRAINER="$BIN/trainer"
[ -x "$TRAINER" ] || { echo "no $TRAINER: cargo build --release -p trainer --features fault-injection" >&2; exit 2; }
"$TRAINER" --help | grep -q -- '--inject' \
  || { echo "$TRAINER has no --inject: cargo build --release -p trainer --features fault-injection" >&2; exit 2; }
# A pause inside every checkpoint write (ms), injected (trainer::inject).
pause_args() { [ "$1" -gt 0 ] && echo --inject "checkpoint_pause_ms=$1"; }

common=(--device cpu --set training.progress=off --set "checkpoint.every_steps=$EVERY")
[ -n "${CONFIG:-}" ] && common=(--config "$CONFIG" "${common[@]}")
for kv in ${SETS:-}; do common+=(--set "$kv"); done
data_of() { echo --set "data.synthetic_dir=$1/synth" --set "data.cache_dir=$1/cache"; }

fingerprint() { sed -n 's/.*"final_weights_fingerprint": *"\([0-9a-f]*\)".*/\1/p' "$1/summary.json"; }
valid() { python3 -c "import json,sys;s=json.load(open(sys.argv[1]));l=s['last'];print(l['valid_loss'],l['valid_top1'],s['steps'])" "$1/summary.json" 2>/dev/null; }
last_step() { # the last step row in metrics.csv (0 without one)
  [ -f "$1/metrics.csv" ] && awk -F, '$1=="step"{s=$3} END{print s+0}' "$1/metrics.csv" || echo 0
}
now_ms() { date +%s%3N; }

echo "== reference: uninterrupted run" | tee -a "$LOG"
t0=$(now_ms)
# shellcheck disable=SC2046
"$TRAINER" "${common[@]}" $(data_of "$OUT/ref") $(pause_args "$PAUSE_MS") --out "$OUT/ref/run" >>"$LOG" 2>&1 \
  || { echo "reference run failed (see $LOG)" >&2; exit 1; }
ref_ms=$(( $(now_ms) - t0 ))
ref_fp=$(fingerprint "$OUT/ref/run")
echo "reference: ${ref_ms} ms, fingerprint $ref_fp, valid (loss top1 steps) $(valid "$OUT/ref/run")" | tee -a "$LOG"

RUN="$OUT/chaos/run"
kills=0 resumes=0 restarts=0 lost=0 during_gen=0 during_cache=0 during_ckpt=0
wait_for() { # wait_for MS CMD...: poll until CMD succeeds or MS pass; 0 when it succeeded
  local until=$(( $(now_ms) + $1 )); shift
  while [ "$(now_ms)" -lt "$until" ]; do "$@" && return 0; kill -0 "$pid" 2>/dev/null || return 1; sleep 0.01; done
  return 1
}
generating() { compgen -G "$OUT/chaos/synth/*/landmarks/*/*.parquet" >/dev/null && ! compgen -G "$OUT/chaos/synth/*/train.csv" >/dev/null; }
# After generation and before training: reading, preprocessing and caching the sequences.
caching() { compgen -G "$OUT/chaos/synth/*/train.csv" >/dev/null && [ ! -f "$RUN/metrics.csv" ]; }
writing_checkpoint() { compgen -G "$RUN/checkpoints/.tmp-step-*" >/dev/null; }

while [ "$kills" -lt "$KILLS" ]; do
  pause=$PAUSE_MS
  phase=random
  case "$kills" in
    0) phase=generation ;;
    1) phase=cache ;;
    *) [ $((kills % 4)) -eq 3 ] && phase=checkpoint && pause=$(( PAUSE_MS > 300 ? PAUSE_MS : 300 )) ;;
  esac
  if [ -f "$RUN/config.toml" ]; then
    args=(--resume "$RUN"); resumes=$((resumes + 1))
  else
    # shellcheck disable=SC2046
    args=("${common[@]}" $(data_of "$OUT/chaos") --out "$RUN"); restarts=$((restarts + 1))
  fi
  # shellcheck disable=SC2046
  "$TRAINER" "${args[@]}" $(pause_args "$pause") >>"$LOG" 2>&1 &
  pid=$!
  case $phase in
    generation) wait_for 60000 generating || phase="random (generation finished first)" ;;
    cache) wait_for 60000 caching || phase="random (caching finished first)" ;;
    checkpoint) wait_for 60000 writing_checkpoint || phase="random (no checkpoint write seen)" ;;
  esac
  case $phase in
    random*) wait_for $(( RANDOM % MAX_MS + 1 )) false ;;
  esac
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"; rc=$?
    echo "the trainer ended (exit $rc) before kill $((kills + 1)); the run is complete" | tee -a "$LOG"
    [ "$rc" -eq 0 ] && break
    echo "FAIL: a continued run exited $rc (see $LOG)" | tee -a "$LOG"; exit 1
  fi
  at=$(last_step "$RUN")
  kill -9 "$pid"; wait "$pid" 2>/dev/null
  kills=$((kills + 1))
  case $phase in generation) during_gen=$((during_gen + 1)) ;; cache) during_cache=$((during_cache + 1)) ;; checkpoint) during_ckpt=$((during_ckpt + 1)) ;; esac
  kept=$(ls -d "$RUN"/checkpoints/step-* 2>/dev/null | sed 's/.*step-0*//' | sort -n | tail -1)
  kept=${kept:-0}
  [ "$at" -gt "$kept" ] && lost=$((lost + at - kept))
  echo "kill $kills ($phase): last logged step $at, last complete checkpoint $kept" | tee -a "$LOG"
done

echo "== finishing" | tee -a "$LOG"
if [ ! -f "$RUN/summary.json" ]; then
  if [ -f "$RUN/config.toml" ]; then
    "$TRAINER" --resume "$RUN" >>"$LOG" 2>&1; rc=$?; resumes=$((resumes + 1))
  else
    # shellcheck disable=SC2046
    "$TRAINER" "${common[@]}" $(data_of "$OUT/chaos") --out "$RUN" >>"$LOG" 2>&1; rc=$?; restarts=$((restarts + 1))
  fi
  [ "$rc" -eq 0 ] || { echo "FAIL: the final continuation exited $rc (see $LOG)" | tee -a "$LOG"; exit 1; }
fi
fp=$(fingerprint "$RUN")
leftovers=$(find "$RUN" "$OUT/chaos/synth" "$OUT/chaos/cache" -name '.tmp*' 2>/dev/null | wc -l)
skipped=$(grep -c '"checkpoint_skipped"' "$RUN/events.jsonl" 2>/dev/null)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
verdict=PASS
[ "$fp" = "$ref_fp" ] || verdict=FAIL
[ "$leftovers" -eq 0 ] || verdict=FAIL
{
  echo "# Chaos run"
  echo
  echo "CPU: $cpu ($(nproc) threads); seed $SEED; checkpoint every $EVERY steps; config ${CONFIG:-built-in default} ${SETS:-}"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| kills (kill -9) | $kills: $during_gen during dataset generation, $during_cache during preprocessing/caching, $during_ckpt during a checkpoint write, the rest at random |"
  echo "| continuations | $resumes with --resume, $restarts from the start (killed before the run directory had its config) |"
  echo "| work lost | $lost steps in all (logged steps past the last complete checkpoint at each kill) |"
  echo "| checkpoints passed over as unreadable | ${skipped:-0} |"
  echo "| leftover temporary files | $leftovers |"
  echo "| final weights fingerprint | $fp (uninterrupted: $ref_fp) |"
  echo "| valid loss, top-1, steps | $(valid "$RUN") (uninterrupted: $(valid "$OUT/ref/run")) |"
  echo "| uninterrupted run time | ${ref_ms} ms |"
  echo
  echo "$verdict"
} | tee "$OUT/chaos.md"
[ "$verdict" = PASS ]
