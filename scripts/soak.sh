#!/usr/bin/env bash
# Soak test: a long training run with the trainer's resident memory sampled every second, then
# the streaming recognizer over a long live stream (examples/stream_soak.rs). Writes OUT/soak.md
# with the RSS trend (first vs last quarter of the run) and the stream's memory and latency per
# block, plus the raw samples (OUT/rss.csv, OUT/stream.txt).
#   Build:  cargo build --release -p trainer -p infer --example stream_soak
#   Run:    scripts/soak.sh [OUT]       (STEPS=2000 FRAMES=100000; ~3 min on 2 cores)
set -uo pipefail
BIN=${BIN:-target/release}
OUT=${1:-${OUT:-soak-out}}
STEPS=${STEPS:-2000}
FRAMES=${FRAMES:-100000}
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
for b in "$BIN/trainer" "$BIN/examples/stream_soak"; do
  [ -x "$b" ] || { echo "no $b: cargo build --release -p trainer -p infer --example stream_soak" >&2; exit 2; }
done

# The built-in default experiment, run long enough for STEPS optimizer steps (22 a epoch).
epochs=$(( (STEPS + 21) / 22 ))
"$BIN/trainer" --device cpu --set training.progress=plain --set "training.epochs=$epochs" \
  --set "training.max_steps=$STEPS" --set "data.synthetic_dir=$OUT/synth" --set "data.cache_dir=$OUT/cache" \
  --out "$OUT/run" > "$OUT/train.log" 2>&1 &
pid=$!
echo "seconds,rss_mib" > "$OUT/rss.csv"
t=0
while kill -0 "$pid" 2>/dev/null; do
  rss=$(awk '/VmRSS/{print $2/1024}' "/proc/$pid/status" 2>/dev/null)
  [ -n "$rss" ] && echo "$t,$rss" >> "$OUT/rss.csv"
  sleep 1; t=$((t + 1))
done
wait "$pid" || { echo "training failed (see $OUT/train.log)" >&2; exit 1; }
steps=$(sed -n 's/.*"steps": *\([0-9]*\).*/\1/p' "$OUT/run/summary.json" | head -1)

"$BIN/examples/stream_soak" "$OUT/run" "$FRAMES" $(( FRAMES / 10 )) > "$OUT/stream.txt" 2>&1 \
  || { echo "stream soak failed (see $OUT/stream.txt)" >&2; exit 1; }

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
python3 - "$OUT" "$steps" "$cpu" <<'EOF' | tee "$OUT/soak.md"
import csv, sys
out, steps, cpu = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [(int(r["seconds"]), float(r["rss_mib"])) for r in csv.DictReader(open(f"{out}/rss.csv"))]
# Skip start-up (data loading, first allocations): the first 10% of the samples.
body = [m for _, m in rows[len(rows) // 10:]]
q = max(1, len(body) // 4)
first, last = sum(body[:q]) / q, sum(body[-q:]) / q
print("# Soak run\n")
print(f"CPU: {cpu}\n")
print(f"## Training: {steps} optimizer steps, {len(rows)} s, RSS sampled every second\n")
print("| | MiB |\n|---|---:|")
print(f"| RSS min / max after start-up | {min(body):.1f} / {max(body):.1f} |")
print(f"| mean of the first quarter / last quarter | {first:.1f} / {last:.1f} |")
print(f"| growth, last vs first quarter | {last - first:+.1f} ({(last - first) / first * 100:+.1f}%) |\n")
print("## Streaming recognizer\n")
print("```text")
print(open(f"{out}/stream.txt").read().rstrip())
print("```")
EOF
