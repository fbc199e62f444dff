#!/usr/bin/env python3
"""Runs libmemcached's memccapable suite against a fresh lockcached.

usage: run_memccapable.py LOCKCACHED_BINARY [MEMCCAPABLE] [-a | -b]

-a (the default) runs the ASCII tests, -b the binary-protocol tests, as
memccapable's own options of those names do. Passes only when memccapable
exits 0, prints "All tests passed" and reports exactly EXPECTED_PASSES
"[pass]" lines. memccapable (libmemcached 1.1.4) exits 1 and prints "N of 27
tests failed" when a test fails; its failure details go to stderr, so both
streams are captured together.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/
from lockcached_server import binary_from_argv, lockcached  # noqa: E402

# libmemcached 1.1.4's memccapable has 27 ASCII and 27 binary tests.
EXPECTED_PASSES = 27
TIMEOUT_S = 120
MODES = {"-a": "ASCII", "-b": "binary"}


def run_memccapable(memccapable, port, mode="-a"):
    """Returns (exit status, stdout and stderr together)."""
    try:
        result = subprocess.run([memccapable, "-h", "127.0.0.1", "-p", str(port), mode],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as timeout:
        output = (timeout.output or b"").decode(errors="replace")
        return None, output + f"\n(memccapable killed after {TIMEOUT_S} s)"
    return result.returncode, result.stdout.decode(errors="replace")


def problems_in(status, output):
    """What is wrong with a memccapable run; empty when it passed."""
    problems = []
    if status != 0:
        problems.append(f"memccapable exit status {status}, expected 0")
    if "All tests passed" not in output:
        problems.append('no "All tests passed" line')
    passes = sum(1 for line in output.splitlines() if line.rstrip().endswith("[pass]"))
    if passes != EXPECTED_PASSES:
        problems.append(f'{passes} "[pass]" lines, expected {EXPECTED_PASSES}')
    return problems


def parse_arguments(argv):
    """(memccapable path, mode) from the arguments after LOCKCACHED_BINARY."""
    memccapable = "memccapable"
    mode = "-a"
    for argument in argv:
        if argument in MODES:
            mode = argument
        elif argument.startswith("-"):
            sys.exit(f"unknown option {argument}; usage: {sys.argv[0]} LOCKCACHED_BINARY"
                     " [MEMCCAPABLE] [-a | -b]")
        else:
            memccapable = argument
    return memccapable, mode


def main():
    binary = binary_from_argv()
    memccapable, mode = parse_arguments(sys.argv[1:])
    suite = MODES[mode]
    with lockcached(binary) as port:
        status, output = run_memccapable(memccapable, port, mode)
        print(output)  # before the server stops: its exit status is checked then
    problems = problems_in(status, output)
    if problems:
        print(f"FAILED: memccapable {suite} suite against lockcached:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print(f"OK: {EXPECTED_PASSES} memccapable {suite} tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
