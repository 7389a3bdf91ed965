#!/usr/bin/env python3
"""The build cache of `.ci/run`: a mirror of the checkout next to a kept target directory.

Usage:
  scripts/ci-cache.py prepare CACHE CHECKOUT   # print the mirror to build in, ready for cargo
  scripts/ci-cache.py seal CACHE               # after a complete build: record what built the cache
  scripts/ci-cache.py forget CACHE             # drop the target directory (a clean build follows)

Why a mirror: cargo decides whether a workspace crate is fresh by comparing its source files'
modification times with the last build. A fresh clone gives every file a new time, so every
workspace crate (and the vendored Burn crates under crates/vendor, with everything above them)
would rebuild. `prepare` copies the checkout's tracked files into CACHE/src and rewrites only the
files whose bytes differ, so an unchanged file keeps the time cargo saw when it built it, and
cargo's own fingerprints decide what to rebuild. Untracked files left in the mirror (test output)
are deleted, so the mirror holds exactly the checkout's tracked files, apart from cubecl's
autotune results (`crates/*/target/`, written by the WGPU tests), which are kept.

What keeps it honest:
- the target directory records the rustc that built it; another toolchain starts it clean;
- `seal` records the fingerprints of the path packages after a build; if anything else built
  into CACHE/target since its last seal (a fingerprint newer than the record; a run of ours that
  stopped before its seal built from the mirror, so cargo judges what it left), every mirror
  file gets a new time, so all path packages rebuild from the mirror's bytes;
- `.ci/run` retries a build once with a clean target directory, saying so, when rustc could not
  read what the cache holds.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from workspace_packages import path_packages

STATE = "state.json"
# Untracked files the mirror keeps: cubecl's autotune results, which the WGPU tests write to
# `target/autotune` next to the crate they run in. Like Mesa's shader cache they only save time:
# cubecl checks each entry against the kernels it has and tunes again when they differ.
KEPT = re.compile(r"^(crates/[^/]+/target|examples/web/node_modules)(/|$)")


def rustc_version():
    return subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout.strip()


def tracked_files(checkout):
    out = subprocess.run(["git", "-C", str(checkout), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def fingerprints(target, names):
    """Newest modification time (ns) under each path package's fingerprint directories."""
    found = {}
    fp = target / "release" / ".fingerprint"
    if not fp.is_dir():
        return found
    patterns = {name: re.compile(re.escape(name) + r"-[0-9a-f]{16}$") for name in names}
    for entry in fp.iterdir():
        for name, pattern in patterns.items():
            if pattern.match(entry.name):
                newest = max((f.stat().st_mtime_ns for f in entry.iterdir()), default=entry.stat().st_mtime_ns)
                found[name] = max(found.get(name, 0), newest)
    return found


def load_state(cache):
    try:
        return json.loads((cache / STATE).read_text())
    except (OSError, ValueError):
        return None


def write_state(cache, state):
    tmp = cache / (STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, cache / STATE)


def same_file(src, dst):
    if src.is_symlink() or dst.is_symlink():
        return src.is_symlink() and dst.is_symlink() and os.readlink(src) == os.readlink(dst)
    if not dst.is_file() or src.stat().st_size != dst.stat().st_size:
        return False
    if (src.stat().st_mode & 0o111) != (dst.stat().st_mode & 0o111):
        return False
    with open(src, "rb") as a, open(dst, "rb") as b:
        while True:
            x, y = a.read(1 << 20), b.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def copy(src, dst):
    if dst.is_symlink() or dst.is_file():
        dst.unlink()
    elif dst.is_dir():
        shutil.rmtree(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copyfile(src, dst)
        os.chmod(dst, src.stat().st_mode & 0o777)


def sync(checkout, mirror):
    """Make `mirror` hold exactly the checkout's tracked files; returns (kept, written, removed)."""
    files = tracked_files(checkout)
    wanted = set(files)
    kept = written = removed = 0
    for rel in files:
        src, dst = checkout / rel, mirror / rel
        if not (src.is_file() or src.is_symlink()):
            continue  # a submodule or a file deleted but not staged
        if same_file(src, dst):
            kept += 1
        else:
            copy(src, dst)
            written += 1
    for root, dirs, names in os.walk(mirror, topdown=False):
        if KEPT.match(str(Path(root).relative_to(mirror))):
            continue
        for name in names:
            path = Path(root) / name
            if str(path.relative_to(mirror)) not in wanted:
                path.unlink()
                removed += 1
        for name in dirs:
            path = Path(root) / name
            if KEPT.match(str(path.relative_to(mirror))):
                continue
            if path.is_symlink():
                if str(path.relative_to(mirror)) not in wanted:
                    path.unlink()
            elif not any(path.iterdir()):
                path.rmdir()
    return kept, written, removed


def touch_all(mirror):
    now = time.time()
    for root, _, names in os.walk(mirror):
        for name in names:
            path = Path(root) / name
            if not path.is_symlink():
                os.utime(path, (now, now))


def prepare(cache, checkout):
    cache.mkdir(parents=True, exist_ok=True)
    mirror, target = cache / "src", cache / "target"
    rustc = rustc_version()
    state = load_state(cache)
    reason = None
    if target.exists():
        if state is None:
            reason = "no record of what built it"
        elif state.get("rustc") != rustc:
            say(f"target directory was built by another toolchain ({first_line(state.get('rustc'))}): starting it clean")
            shutil.rmtree(target)
        elif not state.get("sealed"):
            # A run stopped mid-build (killed, out of budget) built from this mirror's bytes:
            # cargo writes a unit's fingerprint only after the unit is complete, so what it left
            # is judged by cargo like anything else.
            say("the last run stopped before its build completed; cargo's fingerprints decide what it left")
        else:
            names = path_packages(mirror)
            now = fingerprints(target, names)
            changed = [n for n in now if now[n] > state.get("fingerprints", {}).get(n, 0)]
            if changed:
                reason = "built into by something other than .ci/run (" + ", ".join(sorted(changed)) + ")"
    kept, written, removed = sync(checkout, mirror)
    if reason and target.exists():
        touch_all(mirror)
        say(f"target directory {reason}: every path package rebuilds; dependencies are reused")
    elif target.exists():
        say(f"warm: {kept} files unchanged since the last build, {written} changed, {removed} removed")
    else:
        say("cold: no target directory yet, everything builds")
    write_state(cache, {"rustc": rustc, "sealed": False, "checkout": str(checkout)})
    print(mirror)


def seal(cache):
    state = load_state(cache) or {}
    target = cache / "target"
    state.update(
        sealed=True,
        sealed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        fingerprints=fingerprints(target, path_packages(cache / "src")),
    )
    write_state(cache, state)


def forget(cache):
    shutil.rmtree(cache / "target", ignore_errors=True)
    state = load_state(cache) or {}
    state["sealed"] = False
    write_state(cache, state)


def first_line(text):
    return (text or "unknown").splitlines()[0]


def say(message):
    print(f"cache: {message}", file=sys.stderr)


def main(argv):
    if len(argv) == 3 and argv[0] == "prepare":
        prepare(Path(argv[1]).resolve(), Path(argv[2]).resolve())
    elif len(argv) == 2 and argv[0] == "seal":
        seal(Path(argv[1]).resolve())
    elif len(argv) == 2 and argv[0] == "forget":
        forget(Path(argv[1]).resolve())
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
