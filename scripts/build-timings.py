#!/usr/bin/env python3
"""Summarizes a `cargo build --timings` report: where the compile time of a build went.

Usage: scripts/build-timings.py [REPORT.html] [--top N]
(default: $CARGO_TARGET_DIR or target/, then cargo-timings/cargo-timing.html, the newest report)

Prints the build's wall time, the compile seconds of its units split into the workspace's own
crates, the vendored Burn crates (crates/vendor) and the registry dependencies, and the N most
expensive units. Units compiled in an earlier build (fresh) are not in the report.
"""
import json
import os
import re
import sys
from pathlib import Path

from workspace_packages import path_packages

ROOT = Path(__file__).resolve().parent.parent


def main(argv):
    top = 15
    if "--top" in argv:
        i = argv.index("--top")
        top = int(argv[i + 1])
        del argv[i : i + 2]
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    report = Path(argv[0]) if argv else target / "cargo-timings" / "cargo-timing.html"
    try:
        html = report.read_text()
        units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);\n", html, re.S).group(1))
    except (OSError, AttributeError, ValueError) as e:
        print(f"build timings: no readable report at {report} ({e})")
        return 0
    units = [u for u in units if u["duration"] > 0.05]  # the report lists fresh units too
    if not units:
        print("build timings: nothing was compiled (every unit was fresh)")
        return 0
    packages = path_packages(ROOT)
    own = {name for name, vendored in packages.items() if not vendored}
    vendored = {name for name, vendored in packages.items() if vendored}
    wall = max(u["start"] + u["duration"] for u in units)

    def total(pick):
        return sum(u["duration"] for u in units if pick(u["name"]))

    ours = total(lambda n: n in own)
    vend = total(lambda n: n in vendored)
    deps = total(lambda n: n not in own and n not in vendored)
    print(f"build timings ({report.name}): {len(units)} units, {wall:.0f} s wall, {ours + vend + deps:.0f} unit-seconds")
    print(f"| part | unit-seconds |\n|---|---:|\n| workspace crates | {ours:.0f} |")
    print(f"| vendored Burn crates | {vend:.0f} |\n| registry dependencies | {deps:.0f} |")
    print(f"\n| unit (top {top}) | target | seconds |\n|---|---|---:|")
    for u in sorted(units, key=lambda u: -u["duration"])[:top]:
        target_name = u["target"].strip() or "lib"
        print(f"| {u['name']} {u['version']} | {target_name} | {u['duration']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
