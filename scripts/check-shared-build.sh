#!/usr/bin/env bash
# Fails when `cargo run --release -p PKG` would compile dependencies with other features than
# `cargo test --workspace --release`, which would mean compiling Burn twice (~17 min each). The
# trainer's test-only `fault-injection` feature is the one allowed difference (it rebuilds the
# trainer crate alone).
# Fix a reported difference by adding the crate to the "feature unification" block of
# crates/device/Cargo.toml. Usage: scripts/check-shared-build.sh [PKG]   (default: device)
set -euo pipefail
cd "$(dirname "$0")/.."
pkg=${1:-device}
run=$(mktemp); test=$(mktemp)
trap 'rm -f "$run" "$test"' EXIT
cargo tree -p "$pkg" -e no-dev -f '{p} {f}' --prefix none | sed 's/ (\*)//; s/ (proc-macro)//' | sort -u > "$run"
cargo tree --workspace -f '{p} {f}' --prefix none | sed 's/ (\*)//; s/ (proc-macro)//' | sort -u > "$test"
python3 - "$run" "$test" "$pkg" <<'PY'
import sys
def load(path):
    d = {}
    for line in open(path):
        p = line.split()
        if len(p) >= 2:
            d.setdefault(p[0] + " " + p[1], set()).add(" ".join(p[2:]))
    return d
run, test, pkg = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]
# Test-only features of workspace crates, which the tests turn on through a crate's
# dev-dependency on itself: they change that crate alone (Burn and every dependency stay shared).
TEST_ONLY = {"trainer": {"fault-injection"}}
for k, sets in test.items():
    drop = TEST_ONLY.get(k.split()[0], set())
    test[k] = {" ".join(w for w in f.split() if w not in drop) for f in sets}
# A crate may be built twice in the test build (once for proc-macros on the host, once for the
# target) with different features; what matters is that each build of the run is one of them.
bad = [(k, run[k], test[k]) for k in sorted(run) if k in test and not run[k] <= test[k]]
for k, r, t in bad:
    print(f"{k}: `cargo run -p {pkg}` features {sorted(r)} but tests use {sorted(t)}")
if bad:
    sys.exit(f"{len(bad)} crate(s) would be compiled twice; see crates/device/Cargo.toml")
print(f"shared build OK: `cargo run --release -p {pkg}` and `cargo test --workspace --release` use the same features")
PY
