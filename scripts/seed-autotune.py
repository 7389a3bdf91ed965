#!/usr/bin/env python3
"""Seed empty cubecl autotune caches from a kept set of results.

    seed-autotune.py SEED DEST [DEST ...]

SEED and each DEST are autotune directories as cubecl writes them (`<cubecl version>/<device>/
<kernel family>.json.log`). Every result file of SEED that a DEST lacks is copied there; a file a
DEST already has is never touched, so results a machine tuned itself win and nothing of a user's
is overwritten. cubecl checks each entry's checksum (of the candidates' names) when it first
uses it and tunes again where the set of candidates changed; a seed entry only picks which of
the candidates runs, so one that no longer fits costs speed or the tuning it would have cost
anyway, never a wrong result.

CI seeds the tests' caches with the llvmpipe results kept in benches/reference/kernel-cache/
llvmpipe: on a machine without them, cubecl would compile and time every matrix-product and
reduction candidate of every new shape before the tests' first steps.
"""

import shutil
import sys
from pathlib import Path


def seed(source: Path, dest: Path) -> int:
    """Copies the result files of `source` that `dest` lacks; returns how many."""
    copied = 0
    for f in sorted(source.rglob("*.json.log")):
        target = dest / f.relative_to(source)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".seed-tmp")
        shutil.copyfile(f, tmp)
        tmp.rename(target)
        copied += 1
    return copied


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    source = Path(argv[1])
    if not source.is_dir():
        print(f"seed-autotune: {source} is not a directory of autotune results", file=sys.stderr)
        return 1
    for d in argv[2:]:
        dest = Path(d)
        try:
            n = seed(source, dest)
        except OSError as e:
            # A cache that cannot be written only means that the tests tune for themselves.
            print(f"seed-autotune: {dest}: not seeded ({e})")
            continue
        print(f"seed-autotune: {dest}: {n} result files added" if n else f"seed-autotune: {dest}: complete")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
