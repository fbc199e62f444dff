"""Starts lockcached, or Debian's memcached, for the Python tests (clients/,
peers/, cli/).

Standard library only. The lockcached binary comes from the command line
(see binary_from_argv) or from the LOCKCACHED_BINARY environment variable;
memcached is $MEMCACHED_BINARY, else the one on PATH.
"""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

DEFAULT_FLAGS = ("--port=0", "--lock_port=0", "--threads=2", "--listen=127.0.0.1")
READY_DEADLINE_S = 10
EXIT_DEADLINE_S = 5
_LISTENING = re.compile(r"Listening on \S+:(\d+) \(([A-Za-z ]+)\)")
READY = re.compile(r"lockcached \S+ ready")  # the line that says it serves


def binary_from_argv(argv=None):
    """Removes and returns the lockcached path: argv[1], else $LOCKCACHED_BINARY.

    Removing it leaves the rest of argv for unittest or argparse.
    """
    argv = sys.argv if argv is None else argv
    if len(argv) > 1 and not argv[1].startswith("-"):
        return argv.pop(1)
    binary = os.environ.get("LOCKCACHED_BINARY")
    if not binary:
        sys.exit(f"usage: {argv[0]} LOCKCACHED_BINARY [args...] (or set $LOCKCACHED_BINARY)")
    return binary


def server_run_by(binary):
    """The lockcached binary that `binary` runs: `binary` itself, or, for a
    wrapper script of test/CMakeLists.txt, the server it names last on its
    exec line, as 'PATH' (test/e2e/server_process.cc's server_run_by reads it
    the same way)."""
    with open(binary, "rb") as f:
        if f.read(2) != b"#!":
            return binary
        script = f.read()
    wrapped = re.search(rb"^exec .*'([^']+)'", script, re.M)
    return os.fsdecode(wrapped.group(1)) if wrapped else binary


def main_with_tools(defaults):
    """Runs a test module's unittest cases: `python3 TEST.py LOCKCACHED_BINARY
    [TOOL...] [unittest options]`. Returns (lockcached, tools, options):
    the tools named on the command line, the rest from `defaults` (a list),
    and the options for run_tests."""
    binary = binary_from_argv()
    named = [argument for argument in sys.argv[1:] if not argument.startswith("-")]
    options = [argument for argument in sys.argv[1:] if argument.startswith("-")]
    return binary, named + list(defaults[len(named):]), options


def run_tests(options):
    """unittest.main for this module; 0 when every test ran and passed."""
    result = unittest.main(argv=[sys.argv[0], "-v", *options], exit=False).result
    return 0 if result.wasSuccessful() and result.testsRun > 0 else 1


class _StderrDrain:
    """Reads a process's stderr in a thread, keeps the lines, finds the port."""

    def __init__(self, stream):
        self.lines = []
        self.port = None
        # Every listening port by what it speaks: "memcached protocol",
        # "lock service", "memcached protocol over TLS", "lock service over TLS".
        self.ports = {}
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream):
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            match = _LISTENING.search(line)
            if match:
                self.ports.setdefault(match.group(2), int(match.group(1)))
                if match.group(2) == "memcached protocol" and self.port is None:
                    self.port = int(match.group(1))
            if READY.search(line):
                self.ready.set()
        self.ready.set()  # EOF: the process is gone, stop waiting

    def join(self):
        self._thread.join(timeout=EXIT_DEADLINE_S)

    def text(self):
        return "\n".join(self.lines)


def _stop(process, name, drain=None):
    """SIGTERM, then requires exit status 0 within EXIT_DEADLINE_S."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        status = process.wait(timeout=EXIT_DEADLINE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        status = None
        process.wait()
    log = ""
    if drain is not None:
        drain.join()
        process.stderr.close()
        log = "\nstderr:\n" + drain.text()
    if status is None:
        raise AssertionError(f"{name} did not exit within {EXIT_DEADLINE_S} s of SIGTERM{log}")
    if status != 0:
        raise AssertionError(f"{name} exited with status {status} after SIGTERM{log}")


def _stop_after_error(process, name, drain=None):
    """Like _stop, but only reports a problem: the test's own error comes first."""
    try:
        _stop(process, name, drain)
    except AssertionError as problem:
        print(problem, file=sys.stderr)


class Running:
    """A started lockcached: its process, its ports by what they speak
    (see _StderrDrain.ports) and what it logged so far (log())."""

    def __init__(self, process, drain):
        self.process = process
        self.ports = drain.ports
        self._drain = drain

    def log(self):
        return self._drain.text()


@contextlib.contextmanager
def lockcached_process(binary, flags=DEFAULT_FLAGS):
    """Runs `binary flags...` until it says it is ready; yields a Running.

    On exit sends SIGTERM and asserts that the server exits 0 within 5 s.
    """
    process = subprocess.Popen([binary, *flags], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    drain = _StderrDrain(process.stderr)
    try:
        drain.ready.wait(READY_DEADLINE_S)
        if process.poll() is not None or not drain.ports:
            status = process.poll()
            why = f"exited with status {status}" if status is not None else "still runs"
            raise RuntimeError(f"lockcached did not report ready within {READY_DEADLINE_S} s"
                               f" ({why}); stderr:\n{drain.text()}")
        yield Running(process, drain)
    except BaseException:
        _stop_after_error(process, "lockcached", drain)
        raise
    _stop(process, "lockcached", drain)


@contextlib.contextmanager
def lockcached(binary, flags=DEFAULT_FLAGS):
    """Runs `binary flags...`; yields the memcached-protocol port.

    On exit sends SIGTERM and asserts that the server exits 0 within 5 s.
    """
    with lockcached_process(binary, flags) as running:
        if "memcached protocol" not in running.ports:
            raise RuntimeError(f"lockcached has no plain memcached port:\n{running.log()}")
        yield running.ports["memcached protocol"]


def free_port():
    """A TCP port that was free a moment ago (for servers without port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_until(sock, end):
    """What `sock` sends up to and including `end` (everything, if it closes first)."""
    reply = b""
    while not reply.endswith(end):
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        reply += chunk
    return reply


def stats(port, group=""):
    """`stats [GROUP]` of the server on `port`, as a name -> value dict."""
    command = f"stats {group}".strip().encode() + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(command)
        reply = read_until(sock, b"END\r\n").decode(errors="replace")
    return dict(re.findall(r"^STAT (\S+) (.*?)\r$", reply, re.M))


def request(sock, command, ending=b"\r\n"):
    """Sends `command`; the reply up to `ending` (see read_until)."""
    sock.sendall(command)
    return read_until(sock, ending)


def answers_version(port, tls=None):
    """True when a server on `port` answers "version\\r\\n" with a VERSION line.

    With `tls` (an ssl.SSLContext) it asks in TLS, as the server's clients must.
    """
    try:
        with contextlib.ExitStack() as stack:
            sock = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=1))
            if tls is not None:
                sock = stack.enter_context(tls.wrap_socket(sock, server_hostname="localhost"))
            sock.sendall(b"version\r\n")
            return read_until(sock, b"\r\n").startswith(b"VERSION ")
    except OSError:
        return False


def memcached_command(port, extra=()):
    binary = os.environ.get("MEMCACHED_BINARY", "memcached")
    command = [binary, "-U", "0", "-p", str(port), "-l", "127.0.0.1", "-t", "1", *extra]
    if os.geteuid() == 0:
        command += ["-u", "root"]  # memcached refuses to run as root without -u
    return command


def _start_memcached(port, log, extra, tls, ready):
    """Starts memcached on `port`, stderr to the file `log`; returns the
    process once it answers (in TLS with `tls`; or once ready(port)), else
    None."""
    process = subprocess.Popen(memcached_command(port, extra), stdin=subprocess.DEVNULL,
                               stdout=log, stderr=log)
    deadline = time.monotonic() + READY_DEADLINE_S
    while time.monotonic() < deadline and process.poll() is None:
        if ready(port) if ready else answers_version(port, tls):
            return process
        time.sleep(0.05)
    if process.poll() is None:
        process.kill()
    process.wait()
    return None


@contextlib.contextmanager
def memcached(extra=(), tls=None, ready=None):
    """Runs Debian's memcached on a free port, with `extra` options; yields the port.

    `tls`: the ssl.SSLContext a client needs where `extra` turns TLS on (-Z).
    `ready`: how to tell it serves, ready(port), where a text `version` cannot
    (-B binary).
    """
    # A file, not a pipe: nobody reads memcached's output while it runs.
    with tempfile.TemporaryFile() as log:
        for _ in range(3):  # the free port may be taken before memcached binds it
            port = free_port()
            process = _start_memcached(port, log, extra, tls, ready)
            if process is not None:
                break
        else:
            log.seek(0)
            output = log.read().decode(errors="replace")
            raise RuntimeError(f"memcached did not start "
                               f"({' '.join(memcached_command(port, extra))}):"
                               f"\n{output}")
    try:
        yield port
    finally:
        # The reference's own stop is not under test, and its SIGTERM takes
        # a second or two (its background threads sleep): killed.
        process.kill()
        process.wait()
