#!/usr/bin/env python3
"""Common memcached clients against a real lockcached, one scenario each.

usage: run_clients.py LOCKCACHED_BINARY [--libmemcached-client PATH]
                      [--node-modules DIR] [--only NAME]...

Every row (one client, one protocol) runs the same steps against one
lockcached started on an ephemeral port; each row's keys carry its own
prefix:

  store   set a value                       read    get it back, a miss is a miss
  delete  delete, gone, delete again fails  incr    10 + 5 = 15, a missing key misses
  cas     gets, someone else's set, cas with the stale CAS fails, a fresh one works
  locked  the driver holds a lock on PREFIX"locked" (value "held") from its own
          connection: the client still reads it, its set must not succeed,
          and the client keeps working
  lock    the client takes and releases a lock itself (raw text command or
          custom binary opcode), and a second connection's set is refused
          meanwhile

A row passes when every step is ok, or n/a where the row says the client has
no way to do it, and the locked value is still "held" afterwards. Clients
in other languages are scripts beside this one that print one
"STEP ok|FAIL|n/a DETAIL" line per step. Prints a table, each row's
details, and a last line "N passed, M failed"; exits 1 if any row failed.

Needs Debian's python3 with python3-pymemcache, and the packages that
test/ci/40-clients.sh installs.
"""

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))  # test/: lockcached_server
from lockcached_server import free_port, lockcached  # noqa: E402

from pymemcache.client.base import Client  # noqa: E402

STEPS = ("store", "read", "delete", "incr", "cas", "locked", "lock")
CLIENT_TIMEOUT_S = 60
NGINX_READY_S = 10
_STEP_LINE = re.compile(r"^(\w+) (ok|FAIL|n/a)\b ?(.*)$")


@dataclasses.dataclass
class Row:
    client: str
    package: str  # Debian package (or "npm:NAME") whose version is shown
    protocol: str
    run: object  # callable(Context, prefix, protocol) -> [(step, status, detail)]
    lock_via: str  # how the client reaches the lock commands, in short
    not_applicable: frozenset = frozenset()
    slug: str = ""

    def prefix(self):
        return f"{self.slug}-{self.protocol}-"


@dataclasses.dataclass
class Context:
    port: int
    libmemcached_client: str
    node_modules: str


class TextConnection:
    """A raw text-protocol connection: the driver's own lock holder."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S)
        self.buffer = b""

    def close(self):
        self.sock.close()

    def line(self):
        while b"\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("lockcached closed the connection")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line.decode(errors="replace")

    def command(self, text):
        self.sock.sendall(text.encode() + b"\r\n")
        return self.line()

    def set(self, key, value):
        return self.command(f"set {key} 0 0 {len(value)}\r\n{value}")

    def get(self, key):
        self.sock.sendall(f"get {key}\r\n".encode())
        header = self.line()
        if header == "END":
            return None
        value = self.line()
        if self.line() != "END":
            raise AssertionError(f"get {key}: no END after the value")
        return value


# ---------------------------------------------------------------- pymemcache


def pymemcache_client(port):
    return Client(("127.0.0.1", port), connect_timeout=5, timeout=CLIENT_TIMEOUT_S,
                  default_noreply=False)


def pymemcache_raw(client, line):
    """One raw text command's reply line. raw_command is public from
    pymemcache 4.0 on; Debian 12 ships 3.5.2, whose _misc_cmd does the same."""
    if hasattr(client, "raw_command"):
        return client.raw_command(line, b"\r\n").decode().strip()
    return client._misc_cmd([line.encode() + b"\r\n"], line.split()[0].encode(),
                            False)[0].decode()


def attempt(action):
    """(result, None) or (None, "ExceptionName: message")."""
    try:
        return action(), None
    except Exception as error:  # noqa: BLE001: what a client raises is the finding
        return None, f"{type(error).__name__}: {error}"


def run_pymemcache(context, prefix, protocol):
    client, other = pymemcache_client(context.port), pymemcache_client(context.port)
    steps = []
    k, n, c, mine = (prefix + name for name in ("k", "n", "c", "mine"))
    steps.append(("store", client.set(k, b"v1"), "set returns True"))
    steps.append(("read", client.get(k) == b"v1" and client.get(prefix + "missing") is None,
                  "get returns v1, a miss None"))
    deleted, gone, again = client.delete(k), client.get(k) is None, client.delete(k)
    steps.append(("delete", deleted and gone and again is False,
                  f"delete {deleted}, then gone, again {again}"))
    client.set(n, b"10")
    total, miss = client.incr(n, 5), client.incr(prefix + "missing", 1)
    steps.append(("incr", total == 15 and miss is None, f"10+5={total}, missing key {miss}"))
    client.set(c, b"v1")
    _, stale = client.gets(c)
    client.set(c, b"v2")
    refused = client.cas(c, b"v3", stale)
    _, fresh = client.gets(c)
    accepted = client.cas(c, b"v3", fresh)
    steps.append(("cas", refused is False and accepted is True and client.get(c) == b"v3",
                  f"stale cas {refused}, fresh cas {accepted}"))
    steps.append(locked_step(lambda: client.get(prefix + "locked"),
                             lambda: client.set(prefix + "locked", b"mine"), b"held"))
    client.set(mine, b"v1")
    taken = pymemcache_raw(client, f"lock {mine}")
    stored_meanwhile, error = attempt(lambda: other.set(mine, b"v2"))
    readable = other.get(mine) == b"v1"
    released = pymemcache_raw(client, f"unlock {mine}")
    after = other.set(mine, b"v2")
    steps.append(("lock", taken == "OK" and not stored_meanwhile and readable
                  and released == "OK" and after is True,
                  f"lock {taken}; another client's set meanwhile: {error or stored_meanwhile}; "
                  f"unlock {released}; set after it {after}"))
    client.close()
    other.close()
    return [(step, "ok" if ok else "FAIL", detail) for step, ok, detail in steps]


def locked_step(read, write, expected):
    """The "locked" step for an in-process client: reads work, the write does
    not succeed, and the client still reads afterwards."""
    before = read()
    stored, error = attempt(write)
    after, read_error = attempt(read)
    ok = before == expected and not stored and after == expected
    return ("locked", ok, f"set on a locked key: {error or stored!r}; read after it: "
                          f"{read_error or after!r}")


# ---------------------------------------------------------- memccp / memccat


def run_tools(context, prefix, protocol):
    binary = ["--binary"] if protocol == "binary" else []
    servers = f"--servers=127.0.0.1:{context.port}"

    def tool(name, *args):
        result = subprocess.run([name, servers, *binary, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=CLIENT_TIMEOUT_S)
        return result.returncode, result.stdout.decode(errors="replace").strip()

    with tempfile.TemporaryDirectory() as directory:
        def copy(name, content):
            path = os.path.join(directory, name)
            with open(path, "w") as handle:
                handle.write(content)
            return tool("memccp", path)

        def cat(name):
            out = os.path.join(directory, "fetched")
            status, output = tool("memccat", f"--file={out}", name)
            if status != 0:
                return None
            with open(out) as handle:
                return handle.read()

        k = prefix + "k"
        stored, output = copy(k, "v1")
        steps = [("store", "ok" if stored == 0 else "FAIL", f"memccp exit {stored} {output}")]
        ok = cat(k) == "v1" and cat(prefix + "missing") is None
        steps.append(("read", "ok" if ok else "FAIL", "memccat returns v1, fails on a miss"))
        first, _ = tool("memcrm", k)
        again, _ = tool("memcrm", k)
        ok = first == 0 and cat(k) is None and again != 0
        steps.append(("delete", "ok" if ok else "FAIL", f"memcrm exit {first}, again {again}"))
        steps.append(("incr", "n/a", "no tool increments"))
        steps.append(("cas", "n/a", "no tool does gets/cas"))
        status, output = copy(prefix + "locked", "mine")
        ok = cat(prefix + "locked") == "held" and status != 0
        steps.append(("locked", "ok" if ok else "FAIL",
                      f"memccp onto a locked key: exit {status}: {output.splitlines()[:1]}"))
        steps.append(("lock", "n/a", "the tools send no raw commands"))
    return steps


# ---------------------------------------------------------------- nginx


NGINX_CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  server {{
    listen 127.0.0.1:{http_port};
    location / {{
      set $memcached_key $uri;
      memcached_pass 127.0.0.1:{memcached_port};
      default_type text/html;
    }}
  }}
}}
"""


def nginx_binary():
    return shutil.which("nginx") or "/usr/sbin/nginx"


def _start_nginx(directory, memcached_port, log):
    """nginx on a free port: (process, port), or None if it did not come up."""
    http_port = free_port()
    conf = os.path.join(directory, "nginx.conf")
    with open(conf, "w") as handle:
        handle.write(NGINX_CONF.format(dir=directory, http_port=http_port,
                                       memcached_port=memcached_port))
    process = subprocess.Popen([nginx_binary(), "-p", directory, "-e", "stderr", "-c", conf],
                               stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    deadline = time.monotonic() + NGINX_READY_S
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", http_port),
                                                                     timeout=1):
            return process, http_port
        time.sleep(0.05)
    if process.poll() is None:
        process.kill()
    process.wait()
    return None


@contextlib.contextmanager
def nginx(memcached_port):
    """Runs nginx with a generated config passing every URI to memcached_port;
    yields the HTTP port."""
    with tempfile.TemporaryDirectory() as directory, tempfile.TemporaryFile() as log:
        for _ in range(3):  # the free port may be taken before nginx binds it
            started = _start_nginx(directory, memcached_port, log)
            if started:
                break
        else:
            log.seek(0)
            raise RuntimeError(f"nginx did not start:\n{log.read().decode(errors='replace')}")
        process, http_port = started
        try:
            yield http_port
        finally:
            process.send_signal(signal.SIGQUIT)  # graceful shutdown
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def http_get(port, path):
    """(status, body) of GET path."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}",
                                    timeout=CLIENT_TIMEOUT_S) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def run_nginx(context, prefix, protocol):
    page = b"<html><body>served from lockcached</body></html>"
    client = pymemcache_client(context.port)
    with nginx(context.port) as http_port:
        stored = client.set(prefix + "page.html", page)
        status, body = http_get(http_port, prefix + "page.html")
        steps = [("store", "ok" if stored else "FAIL", "pymemcache stored the page"),
                 ("read", "ok" if (status, body) == (200, page) else "FAIL",
                  f"GET: {status}, {len(body)} bytes")]
        client.delete(prefix + "page.html")
        status, _ = http_get(http_port, prefix + "page.html")
        steps.append(("delete", "ok" if status == 404 else "FAIL",
                      f"GET after pymemcache deleted it: {status}"))
        steps.append(("incr", "n/a", "nginx only reads"))
        steps.append(("cas", "n/a", "nginx only reads"))
        status, body = http_get(http_port, prefix + "locked")
        steps.append(("locked", "ok" if (status, body) == (200, b"held") else "FAIL",
                      f"GET of a locked page: {status} {body[:20]!r}"))
        steps.append(("lock", "n/a", "nginx only reads"))
    client.close()
    return steps


# ----------------------------------------------------- clients in other languages


def script_runner(argv_of, env_of=None):
    """A row run by a program that prints "STEP ok|FAIL|n/a DETAIL" lines;
    argv_of(context) is its command, to which HOST PORT PREFIX PROTOCOL are added."""

    def run(context, prefix, protocol):
        environment = dict(os.environ, **(env_of(context) if env_of else {}))
        result = subprocess.run([*argv_of(context), "127.0.0.1", str(context.port), prefix,
                                 protocol], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                timeout=CLIENT_TIMEOUT_S, env=environment)
        steps = parse_steps(result.stdout.decode(errors="replace"))
        if result.returncode != 0:
            stderr = result.stderr.decode(errors="replace").strip()
            steps.append(("exit", "FAIL", f"status {result.returncode}; stderr: {stderr[-2000:]}"))
        return steps

    return run


def parse_steps(output):
    steps = []
    for line in output.splitlines():
        match = _STEP_LINE.match(line)
        if match:
            steps.append(match.groups())
    return steps


def interpreted(interpreter, name):
    """argv_of for a script beside this file."""
    return lambda context: [interpreter, os.path.join(HERE, name)]


def libmemcached_client(context):
    return [context.libmemcached_client]


def memjs_env(context):
    return {"NODE_PATH": context.node_modules}


ROWS = [
    Row("pymemcache", "python3-pymemcache", "text", run_pymemcache, "raw text", slug="pymemcache"),
    Row("libmemcached C API", "libmemcached-dev", "text", script_runner(libmemcached_client),
        "none", frozenset({"lock"}), slug="libmemcached"),
    Row("libmemcached C API", "libmemcached-dev", "binary", script_runner(libmemcached_client),
        "none", frozenset({"lock"}), slug="libmemcached"),
    Row("memccp/memccat/memcrm", "libmemcached-tools", "text", run_tools, "none",
        frozenset({"incr", "cas", "lock"}), slug="memccp"),
    Row("memccp/memccat/memcrm", "libmemcached-tools", "binary", run_tools, "none",
        frozenset({"incr", "cas", "lock"}), slug="memccp"),
    Row("php-memcached", "php-memcached", "text",
        script_runner(interpreted("php", "php_memcached_client.php")), "none", frozenset({"lock"}),
        slug="php"),
    Row("php-memcached", "php-memcached", "binary",
        script_runner(interpreted("php", "php_memcached_client.php")), "none", frozenset({"lock"}),
        slug="php"),
    Row("dalli", "ruby-dalli", "binary", script_runner(interpreted("ruby", "dalli_client.rb")),
        "opcode", slug="dalli"),
    Row("Cache::Memcached::Fast", "libcache-memcached-fast-perl", "text",
        script_runner(interpreted("perl", "perl_fast_client.pl")), "none", frozenset({"lock"}),
        slug="perl"),
    Row("memjs", "npm:memjs", "binary",
        script_runner(interpreted("node", "memjs_client.js"), memjs_env), "opcode", slug="memjs"),
    Row("nginx memcached module", "nginx", "text", run_nginx, "none",
        frozenset({"incr", "cas", "lock"}), slug="/nginx"),
]


# ------------------------------------------------------------------- driver


def package_version(package, context):
    if package.startswith("npm:"):
        path = os.path.join(context.node_modules, package[4:], "package.json")
        with contextlib.suppress(OSError, ValueError):
            with open(path) as handle:
                return json.load(handle)["version"]
        return "?"
    result = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return result.stdout.decode().strip() or "?"


def verdict(row, steps):
    """(passed, {step: shown status})."""
    shown = {}
    passed = True
    for step, status, _ in steps:
        if step not in STEPS:
            passed = passed and status != "FAIL"
            continue
        shown[step] = status
    for step in STEPS:
        status = shown.get(step, "missing")
        allowed = ("ok", "n/a") if step in row.not_applicable else ("ok",)
        if status not in allowed:
            passed = False
    return passed, shown


def run_row(row, context, holder):
    """Runs one row with PREFIX"locked" held by the driver; returns its steps."""
    locked = row.prefix() + "locked"
    try:
        holder.set(locked, "held")
        if holder.command(f"lock {locked}") != "OK":
            return [("setup", "FAIL", f"the driver could not lock {locked}")]
        steps = run_client(row, context)
        still = holder.get(locked)
        if still != "held":
            steps.append(("held", "FAIL", f"the locked value changed to {still!r}"))
        if holder.command(f"unlock {locked}") != "OK":
            steps.append(("held", "FAIL", "the driver's lock was gone"))
    except OSError as error:  # the server died, or stopped answering
        return [("server", "FAIL", f"{type(error).__name__}: {error}")]
    return steps


def run_client(row, context):
    try:
        return row.run(context, row.prefix(), row.protocol)
    except Exception as error:  # noqa: BLE001: a crashing row is a failed row
        return [("error", "FAIL", f"{type(error).__name__}: {error}")]


def print_table(results):
    header = ("client", "version", "protocol", *STEPS, "locks via", "result")
    rows = [(row.client, version, row.protocol,
             *(shown.get(step, "-") for step in STEPS), row.lock_via,
             "PASS" if passed else "FAIL")
            for row, version, passed, shown, _ in results]
    widths = [max(len(str(line[i])) for line in [header, *rows]) for i in range(len(header))]
    for line in [header, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(line, widths)).rstrip())


def print_details(results):
    for row, _, passed, _, steps in results:
        print(f"\n{row.client} ({row.protocol}): {'PASS' if passed else 'FAIL'}")
        for step, status, detail in steps:
            print(f"  {step:7} {status:5} {detail}")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lockcached")
    parser.add_argument("--libmemcached-client", default="build-clients/libmemcached_client")
    parser.add_argument("--node-modules", default="build-clients/node/node_modules")
    parser.add_argument("--only", action="append", default=[],
                        help="run only the rows whose client contains this (repeatable)")
    return parser.parse_args()


def main():
    args = parse_args()
    context_args = dict(libmemcached_client=os.path.abspath(args.libmemcached_client),
                        node_modules=os.path.abspath(args.node_modules))
    rows = [row for row in ROWS
            if not args.only or any(name.lower() in row.client.lower() for name in args.only)]
    results = []
    try:
        with lockcached(args.lockcached) as port:
            context = Context(port=port, **context_args)
            holder = TextConnection(port)
            for row in rows:
                steps = run_row(row, context, holder)
                passed, shown = verdict(row, steps)
                results.append((row, package_version(row.package, context), passed, shown,
                                steps))
            holder.close()
    except Exception as error:  # noqa: BLE001: start or shutdown failed; report it as a row
        server = Row("lockcached", "", "-", None, "-")
        results.append((server, "", False, {}, [("server", "FAIL", str(error))]))
    print_table(results)
    print_details(results)
    passed = sum(1 for _, _, ok, _, _ in results if ok)
    print(f"\n{passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) and results else 1


if __name__ == "__main__":
    sys.exit(main())
