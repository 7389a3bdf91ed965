#!/usr/bin/env python3
"""Seed empty cubecl autotune caches from a kept set of results, and keep that set complete.

    seed-autotune.py SEED DEST [DEST ...]            copy SEED's result files that a DEST lacks
    seed-autotune.py --missing SEED CACHE [CACHE ...] list results the caches have and SEED lacks
    seed-autotune.py --merge SEED CACHE [CACHE ...]   add those results to SEED

SEED, each DEST and each CACHE are autotune directories as cubecl writes them (`<cubecl version>/
<device>/<kernel family>.json.log`, one JSON result per line). Seeding copies every result file
of SEED that a DEST lacks; a file a DEST already has is never touched, so results a machine tuned
itself win and nothing of a user's is overwritten. cubecl checks each entry's checksum (of the
candidates' names) when it first uses it and tunes again where the set of candidates changed; a
seed entry only picks which of the candidates runs, so one that no longer fits costs speed or the
tuning it would have cost anyway, never a wrong result.

CI seeds the tests' caches with the llvmpipe results kept in benches/reference/kernel-cache/
llvmpipe: on a machine without them, cubecl would compile and time every matrix-product and
reduction candidate of every new shape before the tests' first steps (a fused matrix product has
17 candidates; on llvmpipe with Mesa's shader cache empty each compiles in about a second). After
the tests it lists what they tuned that the seed lacks (`--missing`): a change that brings new
shapes leaves results there, and `--merge` from the same caches adds them, so the next cold
machine does not tune them again.
"""

import json
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


def key_of(line: str) -> str | None:
    """A result line's tuning key, or None for a line that is not a result."""
    try:
        key = json.loads(line)["key"]
    except (ValueError, KeyError, TypeError):
        return None
    return json.dumps(key, sort_keys=True) if isinstance(key, dict) else None


def results(path: Path) -> dict[str, str]:
    """A result file's lines by their tuning key."""
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        key = key_of(line)
        if key is not None:
            out.setdefault(key, line)
    return out


def missing(source: Path, caches: list[Path]) -> dict[Path, list[str]]:
    """The result lines of `caches` whose keys `source` lacks, by file relative to the caches."""
    known: dict[Path, dict[str, str]] = {}
    lacking: dict[Path, dict[str, str]] = {}
    for cache in caches:
        for f in sorted(cache.rglob("*.json.log")) if cache.is_dir() else []:
            rel = f.relative_to(cache)
            if rel not in known:
                kept = source / rel
                known[rel] = results(kept) if kept.exists() else {}
            for key, line in results(f).items():
                if key not in known[rel]:
                    lacking.setdefault(rel, {}).setdefault(key, line)
    return {rel: list(lines.values()) for rel, lines in lacking.items()}


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 and argv[1] in ("--missing", "--merge") else None
    args = argv[2:] if mode else argv[1:]
    if len(args) < 2:
        print("\n".join(__doc__.strip().splitlines()[2:5]), file=sys.stderr)
        return 2
    source = Path(args[0])
    if not source.is_dir():
        print(f"seed-autotune: {source} is not a directory of autotune results", file=sys.stderr)
        return 1
    if mode:
        try:
            lacking = missing(source, [Path(d) for d in args[1:]])
        except OSError as e:
            # Listing is advice: a cache that cannot be read does not fail CI.
            print(f"seed-autotune: cannot compare with the seed: {e}")
            return 1 if mode == "--merge" else 0
        for rel, lines in sorted(lacking.items()):
            print(f"seed-autotune: {source / rel}: {len(lines)} result(s) tuned here that the seed lacks")
            if mode == "--merge":
                target = source / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                old = target.read_text() if target.exists() else ""
                if old and not old.endswith("\n"):
                    old += "\n"
                target.write_text(old + "".join(line + "\n" for line in lines))
        total = sum(len(v) for v in lacking.values())
        if mode == "--missing" and total:
            caches = " ".join(str(Path(d).resolve()) for d in args[1:] if Path(d).is_dir())
            print(f"seed-autotune: the seed lacks {total} result(s): a cold machine tunes them again; "
                  f"scripts/seed-autotune.py --merge {source} {caches} adds them")
        elif not total:
            print(f"seed-autotune: {source} has every result of the {len(args) - 1} caches")
        return 0
    for d in args[1:]:
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
