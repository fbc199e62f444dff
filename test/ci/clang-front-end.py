#!/usr/bin/env python3
"""Clang's warnings on sources a build directory did not compile.

    test/ci/clang-front-end.py BUILD_DIR DIR...

Runs Clang's front end alone (-fsyntax-only) on every source under one of
the DIRs (relative to the repository, e.g. test/e2e bench) that BUILD_DIR's
compile_commands.json lists, with the build's own flags, two at a time.
Clang's warnings come from its front end, so this is the warning check of a
full Clang build of those files at a fraction of its time (CI stage 30
builds only what its tests run). Exits 1 if any file fails.
"""
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys


def front_end_only(command):
    """The compile command with its output dropped and -fsyntax-only added."""
    words = shlex.split(command)
    kept = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word == "-o":
            skip = True
            continue
        if word == "-c":
            continue
        kept.append(word)
    return kept + ["-fsyntax-only"]


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    build, dirs = sys.argv[1], sys.argv[2:]
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    prefixes = [os.path.join(root, d).rstrip("/") + "/" for d in dirs]
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = [e for e in json.load(f)
                   if any(os.path.abspath(e["file"]).startswith(p) for p in prefixes)]
    if not entries:
        print("clang-front-end: no sources under %s in %s" % (" ".join(dirs), build),
              file=sys.stderr)
        return 1

    def check(entry):
        result = subprocess.run(front_end_only(entry["command"]), cwd=entry["directory"],
                                capture_output=True, text=True)
        return entry["file"], result.returncode, result.stderr

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for name, status, errors in pool.map(check, entries):
            if status != 0:
                failed += 1
                print("clang-front-end: %s:\n%s" % (name, errors), file=sys.stderr)
    print("clang-front-end: %d of %d sources under %s without a warning"
          % (len(entries) - failed, len(entries), " ".join(dirs)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
