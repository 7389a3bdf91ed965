#!/usr/bin/env bash
# The PyTorch importer under valgrind's memcheck: runs the release test that feeds it crafted
# `.pt` files (crates/bundle/tests/bundle.rs, `crafted_pytorch_files_are_refused_with_what_is_wrong`,
# and the import of the real fixture) and fails on any invalid read or write, use of freed memory
# or double free. Needs valgrind (apt-get install valgrind). Run it in the checkout, or through
# scripts/cached to use CI's build.
set -euo pipefail
command -v valgrind >/dev/null || { echo "memcheck: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
bin=$(cargo test --release -p suite --test suite --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "suite" and m["profile"]["test"]:
        print(m["executable"])' | tail -1)
[ -n "$bin" ] || { echo "memcheck: cannot find the suite test binary" >&2; exit 2; }
cd crates/suite
for test in bundle::crafted_pytorch_files_are_refused_with_what_is_wrong bundle::pytorch_views_and_other_float_types_import \
  bundle::a_pytorch_state_dict_imports_and_reproduces_its_logits; do
  echo "== valgrind: $test"
  # Burn's thread pools keep memory until exit: leaks are not what this checks.
  valgrind --error-exitcode=99 --leak-check=no --track-origins=no --quiet "$bin" --exact "$test" --test-threads=1
done
echo "memcheck: no memory errors"
