#!/usr/bin/env python3
"""Runs a `cargo test` command, times each test binary and stops one that runs past its limit.

Usage: scripts/test-watchdog.py [--limit-s N] [--report FILE] -- cargo test --workspace --release

cargo runs the test binaries one after another; this reads its output as it comes and starts a
section at each `Running ...` / `Doc-tests ...` line. A section that runs longer than the limit
(default 1500 s, or $SIGNFLOW_TEST_LIMIT_S) ends the whole command: the process group is killed
and the binary is named, with the tests libtest reported as running for over 60 seconds. At the
end it prints one row per section (tests passed, failed, ignored, seconds), also into --report
when given, and exits with the command's status (124 after a stop by the watchdog).
"""
import argparse
import os
import re
import selectors
import signal
import subprocess
import sys
import time

SECTION = re.compile(r"^\s+(Running (?:unittests )?(\S+)(?: \((\S+)\))?|Doc-tests (\S+))\s*$")
RESULT = re.compile(r"^test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored")
SLOW = re.compile(r"^test (\S+) has been running for over 60 seconds")
DONE = re.compile(r"^test (\S.*?) \.\.\. (ok|FAILED|ignored)")


class Section:
    """One test binary (or the doc-tests of a crate) in cargo's output."""

    def __init__(self, name, started):
        self.name = name
        self.started = started
        self.ended = None
        self.counts = None
        self.slow = []
        self.done = []  # (seconds since the section started, test name): when libtest reported it

    def seconds(self, now):
        return (self.ended or now) - self.started


def section_name(match):
    running, path, binary, doc = match.groups()[0:4]
    if doc:
        return f"doc-tests {doc}"
    crate = os.path.basename(binary).rsplit("-", 1)[0] if binary else "?"
    return f"{crate}: {path}"


def table(sections, now):
    rows = ["| test binary | passed | failed | ignored | seconds |", "|---|---:|---:|---:|---:|"]
    for s in sections:
        p, f, i = s.counts or ("-", "-", "-")
        rows.append(f"| {s.name} | {p} | {f} | {i} | {s.seconds(now):.1f} |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-s", type=float, default=float(os.environ.get("SIGNFLOW_TEST_LIMIT_S", 1500)))
    parser.add_argument("--report", help="also write the timing table (markdown) to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")

    start = time.monotonic()
    build = Section("build (compile before the first binary)", start)
    sections = [build]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    pending = b""
    stopped = None
    while True:
        now = time.monotonic()
        current = sections[-1]
        if current is not build and current.seconds(now) > args.limit_s:
            stopped = current
            break
        if not sel.select(timeout=1.0):
            if proc.poll() is not None:
                break
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace").rstrip("\r")
            now = time.monotonic()
            m = SECTION.match(line)
            if m:
                sections[-1].ended = now
                sections.append(Section(section_name(m), now))
                continue
            m = RESULT.match(line)
            if m:
                sections[-1].counts = (m.group(2), m.group(3), m.group(4))
                continue
            m = SLOW.match(line)
            if m:
                sections[-1].slow.append(m.group(1))
                continue
            m = DONE.match(line)
            if m:
                sections[-1].done.append((now - sections[-1].started, m.group(1)))

    now = time.monotonic()
    if stopped is not None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        status = 124
    else:
        status = proc.wait()
    sections[-1].ended = sections[-1].ended or now

    report = table(sections, now)
    total = f"total {now - start:.1f} s"
    print(f"\n== test binaries ({total})\n{report}")
    if args.report:
        with open(args.report, "w") as f:
            f.write(report + "\n" + total + "\n")
            for sec in sections:
                for at, name in sec.done:
                    f.write(f"{sec.name}\t{at:.1f}\t{name}\n")
    if stopped is not None:
        slow = ", ".join(stopped.slow) or "none reported yet"
        print(
            f"watchdog: `{stopped.name}` ran past its limit of {args.limit_s:.0f} s and was stopped; "
            f"tests running for over 60 s: {slow}",
            file=sys.stderr,
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
