#!/usr/bin/env python3
"""Runs a command under the system-call filter a systemd unit declares.

    run-with-unit-filter.py UNIT_FILE COMMAND [ARGS...]

CI containers have no systemd as PID 1, so the packaged unit's
SystemCallFilter= lines cannot be tried by starting the unit. This builds
the same allow-list with libseccomp: the lines in order, each either adding
(NAME or @GROUP) or, with a leading ~, removing, the groups expanded as
`systemd-analyze syscall-filter` lists them on this machine; every other
call fails with the unit's SystemCallErrorNumber= (EPERM here), as under
systemd. The unit's RestrictAddressFamilies= is applied as systemd applies
it, in a filter of its own: socket() of a family the lines do not allow
fails with EAFNOSUPPORT (socketpair() is not restricted). Then it execs
COMMAND.
"""
import errno
import os
import re
import socket
import subprocess
import sys

import seccomp


def groups():
    """{"@name": [member, ...]} from systemd-analyze, members unexpanded."""
    listing = subprocess.run(["systemd-analyze", "syscall-filter"], check=True,
                             capture_output=True, text=True).stdout
    found, current = {}, None
    for line in listing.splitlines():
        if line.startswith("@"):
            current = found.setdefault(line.strip(), [])
        elif current is not None and line.strip() and not line.strip().startswith("#"):
            current.append(line.strip())
    return found


def expand(name, known, seen=None):
    seen = set() if seen is None else seen
    if not name.startswith("@"):
        return {name}
    if name in seen:
        return set()
    seen.add(name)
    calls = set()
    for member in known[name]:
        calls |= expand(member, known, seen)
    return calls


def allowed_calls(unit_file):
    known = groups()
    allowed = set()
    for line in open(unit_file):
        match = re.match(r"SystemCallFilter=(~?)(.*)", line.strip())
        if not match:
            continue
        calls = set()
        for name in match.group(2).split():
            calls |= expand(name, known)
        allowed = allowed - calls if match.group(1) else allowed | calls
    return allowed


def address_families(unit_file):
    """The families RestrictAddressFamilies= allows, or None without it.

    As systemd reads it: an allow-list, or with a leading ~ a deny-list
    (returned as every other family); each line adds to the one before,
    and an empty one resets it."""
    allowed = None
    every = range(64)  # above AF_MAX, which socket() refuses anyway
    for line in open(unit_file):
        match = re.match(r"RestrictAddressFamilies=(~?)(.*)", line.strip())
        if not match:
            continue
        names = match.group(2).split()
        if not names and not match.group(1):
            allowed = None
            continue
        families = {getattr(socket, name) for name in names}
        if match.group(1):
            allowed = (set(every) if allowed is None else allowed) - families
        else:
            allowed = (set() if allowed is None else allowed) | families
    return allowed


def restrict_address_families(unit_file):
    allowed = address_families(unit_file)
    if allowed is None:
        return
    restricted = seccomp.SyscallFilter(seccomp.ALLOW)
    refuse = seccomp.ERRNO(errno.EAFNOSUPPORT)
    for family in range(64):
        if family not in allowed:
            restricted.add_rule(refuse, "socket", seccomp.Arg(0, seccomp.EQ, family))
    restricted.add_rule(refuse, "socket", seccomp.Arg(0, seccomp.GE, 64))
    restricted.load()


def main():
    unit_file, command = sys.argv[1], sys.argv[2:]
    restrict_address_families(unit_file)
    refused = seccomp.SyscallFilter(seccomp.ERRNO(errno.EPERM))
    for call in sorted(allowed_calls(unit_file)):
        try:
            refused.add_rule(seccomp.ALLOW, call)
        except (RuntimeError, ValueError, OSError):
            pass  # a call this architecture does not have
    refused.load()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
