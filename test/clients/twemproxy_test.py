#!/usr/bin/env python3
"""twemproxy (Debian's nutcracker) in front of two lockcached servers,
configured by the shipped etc/nutcracker.yml.

usage: twemproxy_test.py LOCKCACHED_BINARY [NUTCRACKER_YML]

Runs the yml with only its listen port and its servers' addresses replaced.
Checks that keys spread over both servers, each where libketama's ring puts
it (the ring a client computes to find the server to lock a key on), that
the cache commands work through the proxy, and pins down what twemproxy
does with what it does not know: lockcached's lock commands, the LOCKED
reply, the binary protocol. docs/scaling.md describes the results.

Standard library only; nutcracker is $NUTCRACKER_BINARY, else the one on
PATH. Prints a line per check, then "N passed, M failed"; exits 1 when a
check failed.
"""

import bisect
import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "test"))  # lockcached_server

from lockcached_server import answers_version, binary_from_argv, free_port, lockcached  # noqa: E402

SHIPPED_CONFIG = os.path.join(REPO, "etc", "nutcracker.yml")
KEYS = 1000
BATCH = 100  # keys per pipelined burst and per multi-get
MIN_SHARE = 0.25  # of KEYS that each of two servers must own
IO_TIMEOUT_S = 10
READY_DEADLINE_S = 10
EXIT_DEADLINE_S = 5
START_ATTEMPTS = 3  # a free port may be taken before nutcracker binds it
# What twemproxy answers when a server replies something it cannot parse
# (lockcached's LOCKED): the errno of its parser, EINVAL.
UNPARSABLE_REPLY = b"SERVER_ERROR Invalid argument"

SETTING = re.compile(r"^\s+([a-z_]+):\s+(\S+)\s*$")
SERVER = re.compile(r"^(\s+)-\s+(\S+?):(\d+):(\d+)(?:\s+(\S+))?\s*$")
LISTEN = re.compile(r"^(\s+listen:\s+)\S+\s*$")


# --- the configuration file -------------------------------------------------

def pool_settings(text):
    """The pool's `key: value` settings (the file holds one pool)."""
    settings = {}
    for line in text.splitlines():
        match = SETTING.match(line)
        if match:
            settings[match.group(1)] = match.group(2)
    return settings


def server_lines(text):
    return [SERVER.match(line) for line in text.splitlines() if SERVER.match(line)]


def with_addresses(text, listen_port, ports):
    """`text` listening on 127.0.0.1:listen_port, its first len(ports)
    servers moved to 127.0.0.1:ports[i] (name and weight kept), the others
    dropped."""
    out, used = [], 0
    for line in text.splitlines():
        server = SERVER.match(line)
        if LISTEN.match(line):
            line = LISTEN.sub(rf"\g<1>127.0.0.1:{listen_port}", line)
        elif server:
            if used == len(ports):
                continue
            indent, _, _, weight, name = server.groups()
            line = f"{indent}- 127.0.0.1:{ports[used]}:{weight}" + (f" {name}" if name else "")
            used += 1
        out.append(line)
    if used < len(ports):
        raise AssertionError(f"the config lists {used} servers, the test needs {len(ports)}")
    return "\n".join(out) + "\n"


def with_setting(text, key, value):
    pattern = re.compile(rf"^(\s+{key}:\s+)\S+", re.MULTILINE)
    changed, count = pattern.subn(rf"\g<1>{value}", text)
    if count != 1:
        raise AssertionError(f"the config has {count} `{key}:` settings, expected 1")
    return changed


def nutcracker_binary():
    binary = os.environ.get("NUTCRACKER_BINARY") or shutil.which("nutcracker")
    if not binary:
        sys.exit("nutcracker not found: apt-get install nutcracker, or set $NUTCRACKER_BINARY")
    return binary


def nutcracker_t(path):
    """`nutcracker -t -c path`: (exit status, output)."""
    done = subprocess.run([nutcracker_binary(), "-t", "-c", path], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=EXIT_DEADLINE_S)
    return done.returncode, (done.stdout + done.stderr).decode(errors="replace")


# --- libketama's ring, which twemproxy builds with hash: md5 -------------------

def ketama_ring(servers):
    """Sorted (point, server index) for [(name, weight)]: libketama's
    continuum, 160 points per server at equal weights, each from md5
    of "name-k"."""
    total = sum(weight for _, weight in servers)
    points = []
    for index, (name, weight) in enumerate(servers):
        # The epsilon is libketama's, against a share that floating point
        # leaves at 39.999... instead of 40.
        for k in range(int(weight / total * 40 * len(servers) + 1e-10)):
            digest = hashlib.md5(f"{name}-{k}".encode()).digest()
            points += [(int.from_bytes(digest[i:i + 4], "little"), index) for i in (0, 4, 8, 12)]
    return sorted(points)


def ketama_owner(ring, key):
    """Index of the server whose point is the first at or after the key's hash."""
    hashed = int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "little")
    return ring[bisect.bisect_left(ring, (hashed, -1)) % len(ring)][1]


def ring_of(config_text):
    """The ring of a config whose servers have no names (as shipped)."""
    return ketama_ring([(f"{m.group(2)}:{m.group(3)}", int(m.group(4)))
                        for m in server_lines(config_text)])


# --- the nutcracker process -------------------------------------------------

def _read(path):
    with open(path, errors="replace") as file:
        return file.read()


def _wait_ready(process, port):
    """True once the proxy answers `version` (it forwards it to a server),
    False if nutcracker exited (a port was taken)."""
    deadline = time.monotonic() + READY_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if answers_version(port):
            return True
        time.sleep(0.05)
    raise RuntimeError(f"nutcracker did not answer on port {port} within {READY_DEADLINE_S} s")


def _stop_nutcracker(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=EXIT_DEADLINE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(f"nutcracker did not exit within {EXIT_DEADLINE_S} s of SIGTERM")


def _start_nutcracker(config_text, ports, workdir, attempt):
    """(process, listen port), or None when nutcracker exited (a port was taken)."""
    listen, stats = free_port(), free_port()
    base = os.path.join(workdir, f"nutcracker-{listen}-{attempt}")
    with open(base + ".yml", "w") as file:
        file.write(with_addresses(config_text, listen, ports))
    # -o, -p: Debian's defaults are under /var/log and /run; -s: the stats
    # port (default 22222) must be free too.
    command = [nutcracker_binary(), "-c", base + ".yml", "-o", base + ".log", "-p", base + ".pid",
               "-s", str(stats), "-a", "127.0.0.1"]
    with open(base + ".err", "wb") as err:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    try:
        if _wait_ready(process, listen):
            return process, listen
    except BaseException:
        process.kill()
        process.wait()
        raise
    return None


@contextlib.contextmanager
def nutcracker(config_text, ports, workdir):
    """Runs nutcracker on `config_text` pointed at `ports`; yields its port."""
    for attempt in range(START_ATTEMPTS):
        started = _start_nutcracker(config_text, ports, workdir, attempt)
        if started:
            break
    else:
        raise RuntimeError("nutcracker exited at start every time; last log:\n" + _logs(workdir))
    process, listen = started
    try:
        yield listen
    finally:
        _stop_nutcracker(process)


def _logs(workdir):
    names = sorted(os.listdir(workdir))
    return "\n".join(f"{name}: {_read(os.path.join(workdir, name))}"
                     for name in names if name.endswith((".log", ".err")))


# --- a text-protocol client ---------------------------------------------------

class Client:
    """One connection, blocking, with a timeout on every read."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S)
        self.reader = self.sock.makefile("rb")

    def close(self):
        self.reader.close()
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def line(self):
        line = self.reader.readline()
        if not line.endswith(b"\r\n"):
            raise AssertionError(f"connection closed mid-reply (got {line!r})")
        return line[:-2]

    def call(self, request):
        self.send(request)
        return self.line()

    def store(self, command, key, value, suffix=""):
        head = f"{command} {key} 0 0 {len(value)}{suffix}\r\n".encode()
        return self.call(head + value + b"\r\n")

    def get_many(self, keys, command="get"):
        """{key: value} or, for gets, {key: (value, cas)}."""
        self.send(f"{command} {' '.join(keys)}\r\n".encode())
        found = {}
        while (line := self.line()) != b"END":
            parts = line.split()
            if parts[0] != b"VALUE":
                raise AssertionError(f"{command}: unexpected line {line!r}")
            size = int(parts[3])
            value = self.reader.read(size + 2)[:size]
            found[parts[1].decode()] = (value, int(parts[4])) if command == "gets" else value
        return found

    def get(self, key):
        return self.get_many([key]).get(key)

    def stats(self):
        self.send(b"stats\r\n")
        stats = {}
        while (line := self.line()) != b"END":
            _, name, value = line.decode().split(" ", 2)
            stats[name] = value
        return stats

    def rest(self):
        """Everything the peer sends until it closes (the timeout raises if
        it never does)."""
        data = b""
        while chunk := self.sock.recv(4096):
            data += chunk
        return data


@contextlib.contextmanager
def client(port):
    connection = Client(port)
    try:
        yield connection
    finally:
        connection.close()


# --- the checks ---------------------------------------------------------------

class Env:
    """What the checks share: the servers' ports, the proxy's, the config."""

    def __init__(self, config_text, servers, proxy, workdir, stop_second):
        self.config_text = config_text
        self.servers = servers
        self.proxy = proxy
        self.workdir = workdir
        self.stop_second = stop_second
        self.ring = ring_of(with_addresses(config_text, proxy, servers))

    def owner(self, key):
        """Index of the server that holds `key`, asked directly."""
        holders = [i for i, port in enumerate(self.servers) if direct_get(port, key) is not None]
        if len(holders) != 1:
            raise AssertionError(f"{key!r} is on servers {holders}, expected exactly one")
        return holders[0]

    def key_on(self, index, prefix):
        """A key that the ring puts on server `index`, stored through the
        proxy with value b"v0": what a client that locks does to find the
        server to lock on."""
        key = next(f"{prefix}-{n}" for n in range(1000)
                   if ketama_owner(self.ring, f"{prefix}-{n}") == index)
        with client(self.proxy) as proxy:
            assert proxy.store("set", key, b"v0") == b"STORED"
        assert self.owner(key) == index, f"the proxy put {key!r} where the ring does not"
        return key


def direct_get(port, key):
    with client(port) as direct:
        return direct.get(key)


def check_shipped_config_passes_nutcracker_t(env):
    status, output = nutcracker_t(SHIPPED_CONFIG)
    assert status == 0 and "syntax is ok" in output, f"nutcracker -t: {status} {output}"
    settings = pool_settings(env.config_text)
    expected = {"distribution": "ketama", "hash": "md5", "redis": "false",
                "auto_eject_hosts": "false"}
    for key, value in expected.items():
        assert settings.get(key) == value, f"{key}: {settings.get(key)}, docs say {value}"
    servers = server_lines(env.config_text)
    assert len(servers) >= 2, f"{len(servers)} servers, want several"
    named = [s.group(0).strip() for s in servers if s.group(5)]
    assert not named, f"named servers break libketama compatibility: {named}"


def check_broken_config_fails_nutcracker_t(env):
    path = os.path.join(env.workdir, "broken.yml")
    with open(path, "w") as file:
        file.write(with_setting(env.config_text, "distribution", "no_such_distribution"))
    status, output = nutcracker_t(path)
    assert status != 0 and "syntax is invalid" in output, f"nutcracker -t: {status} {output}"


def check_test_copy_passes_nutcracker_t(env):
    path = os.path.join(env.workdir, "copy.yml")
    with open(path, "w") as file:
        file.write(with_addresses(env.config_text, free_port(), env.servers))
    status, output = nutcracker_t(path)
    assert status == 0, f"nutcracker -t: {status} {output}"


def _value(n):
    return f"value-{n}-{'x' * (n % 50)}".encode()


def _store_all(proxy, keys):
    for start in range(0, len(keys), BATCH):
        batch = keys[start:start + BATCH]
        proxy.send(b"".join(f"set {k} 0 0 {len(_value(n))}\r\n".encode() + _value(n) + b"\r\n"
                            for n, k in batch))
        replies = [proxy.line() for _ in batch]
        assert replies == [b"STORED"] * len(batch), f"set replies: {set(replies)}"


def _read_all(proxy, keys):
    for start in range(0, len(keys), BATCH):
        batch = keys[start:start + BATCH]
        found = proxy.get_many([k for _, k in batch])  # twemproxy splits it per server
        missing = [k for n, k in batch if found.get(k) != _value(n)]
        assert not missing, f"{len(missing)} keys read back wrong through the proxy: {missing[:5]}"


def _held_on(port, names):
    with client(port) as direct:
        held = set()
        for start in range(0, len(names), BATCH):
            held |= set(direct.get_many(names[start:start + BATCH]))
        return held


def _curr_items(env):
    counts = []
    for port in env.servers:
        with client(port) as direct:
            counts.append(int(direct.stats()["curr_items"]))
    return counts


def check_keys_spread_over_both_servers(env):
    """Each server gets a fair share, and each key lands where libketama's
    ring says."""
    keys = [(n, f"spread:{n}") for n in range(KEYS)]
    items_before = _curr_items(env)
    with client(env.proxy) as proxy:
        _store_all(proxy, keys)
        _read_all(proxy, keys)
    names = [k for _, k in keys]
    held = [_held_on(port, names) for port in env.servers]
    counts = [len(keys_held) for keys_held in held]
    print(f"     {KEYS} keys through the proxy: {counts[0]} on server 1, {counts[1]} on server 2")
    assert not (held[0] & held[1]), "a key is stored on both servers"
    assert sum(counts) == KEYS, f"{KEYS - sum(counts)} keys are on neither server"
    new_items = [after - before for before, after in zip(items_before, _curr_items(env))]
    assert new_items == counts, f"curr_items grew by {new_items}, keys held {counts}"
    for i, count in enumerate(counts):
        assert count >= MIN_SHARE * KEYS, f"server {i + 1} got only {count}"
    astray = [k for k in names if k not in held[ketama_owner(env.ring, k)]]
    assert not astray, f"{len(astray)} keys are not where libketama puts them: {astray[:5]}"


def check_cache_commands_through_proxy(env):
    with client(env.proxy) as proxy:
        assert proxy.store("set", "counter", b"10") == b"STORED"
        assert proxy.call(b"incr counter 5\r\n") == b"15"
        assert proxy.call(b"decr counter 3\r\n") == b"12"
        assert direct_get(env.servers[env.owner("counter")], "counter") == b"12"
        assert proxy.call(b"incr nothing-here 1\r\n") == b"NOT_FOUND"
        assert proxy.store("add", "counter", b"x") == b"NOT_STORED"
        assert proxy.store("replace", "counter", b"20") == b"STORED"
        assert proxy.store("append", "counter", b"0") == b"STORED"
        assert proxy.store("prepend", "counter", b"1") == b"STORED"
        assert proxy.get("counter") == b"1200"
        assert proxy.call(b"touch counter 100\r\n") == b"TOUCHED"
        assert proxy.call(b"delete counter\r\n") == b"DELETED"
        assert proxy.call(b"delete counter\r\n") == b"NOT_FOUND"
        assert proxy.get("counter") is None


def check_cas_through_proxy(env):
    with client(env.proxy) as proxy:
        assert proxy.store("set", "doc", b"v1") == b"STORED"
        value, cas = proxy.get_many(["doc"], "gets")["doc"]
        assert value == b"v1"
        assert proxy.store("cas", "doc", b"v2", f" {cas}") == b"STORED"
        assert proxy.store("cas", "doc", b"v3", f" {cas}") == b"EXISTS"
        assert proxy.store("cas", "no-doc", b"v", f" {cas}") == b"NOT_FOUND"
        assert proxy.get("doc") == b"v2"


def _locks_taken(env):
    total = 0
    for port in env.servers:
        with client(port) as direct:
            total += int(direct.stats()["cmd_lock"])
    return total


def check_lock_commands_close_the_connection(env):
    """twemproxy's parser does not know them: no reply, the connection closes,
    and nothing reaches a server."""
    key = env.key_on(0, "lockme")
    before = _locks_taken(env)
    for request in (f"lock {key}", f"unlock {key}", "unlock_all", "keys", f"keys {key}"):
        with client(env.proxy) as proxy:
            proxy.send(request.encode() + b"\r\n")
            reply = proxy.rest()
            assert reply == b"", f"{request!r} through the proxy answered {reply!r}"
    assert _locks_taken(env) == before, "a lock request reached a server"
    with client(env.servers[0]) as direct:  # the key was never locked
        assert direct.call(f"lock {key}\r\n".encode()) == b"OK"
        assert direct.call(f"unlock {key}\r\n".encode()) == b"OK"


def check_requests_pipelined_before_a_lock_may_be_lost(env):
    with client(env.proxy) as proxy:
        assert proxy.store("set", "before", b"v") == b"STORED"
    with client(env.proxy) as proxy:
        proxy.send(b"get before\r\nlock before\r\n")
        reply = proxy.rest()
        assert reply in (b"", b"VALUE before 0 1\r\nv\r\nEND\r\n"), f"got {reply!r}"


def check_binary_protocol_closes_the_connection(env):
    key = b"k"
    for opcode, name in ((0x00, "Get"), (0x40, "Lock")):
        header = struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), 0, 0, 0, len(key), 0, 0)
        with client(env.proxy) as proxy:
            proxy.send(header + key)
            reply = proxy.rest()
            assert reply == b"", f"binary {name} through the proxy answered {reply!r}"


def _refused_writes(proxy, key, times):
    requests = [f"set {key} 0 0 2\r\nv9\r\n", f"delete {key}\r\n", f"incr {key} 1\r\n",
                f"append {key} 0 0 1\r\nx\r\n"]
    for n in range(times):
        reply = proxy.call(requests[n % len(requests)].encode())
        assert reply == UNPARSABLE_REPLY, f"write {n + 1} to a locked key answered {reply!r}"


def check_locked_key_through_proxy(env):
    """Locked directly on its server, the key stays readable through the
    proxy; writes are refused (as SERVER_ERROR) and never land elsewhere."""
    key = env.key_on(0, "held")
    limit = int(pool_settings(env.config_text)["server_failure_limit"])
    with client(env.servers[0]) as holder, client(env.proxy) as proxy:
        assert holder.call(f"lock {key}\r\n".encode()) == b"OK"
        _refused_writes(proxy, key, limit + 2)
        assert proxy.get(key) == b"v0", "the locked value changed, or moved to another server"
        assert direct_get(env.servers[1], key) is None, "a write went to the other server"
        assert holder.call(f"unlock {key}\r\n".encode()) == b"OK"
        assert proxy.store("set", key, b"v1") == b"STORED"
        assert direct_get(env.servers[0], key) == b"v1"


def check_noreply_write_to_locked_key_is_dropped(env):
    key = env.key_on(0, "quiet")
    with client(env.servers[0]) as holder, client(env.proxy) as proxy:
        assert holder.call(f"lock {key}\r\n".encode()) == b"OK"
        proxy.send(f"set {key} 0 0 2 noreply\r\nv9\r\n".encode())
        assert proxy.get(key) == b"v0"


def check_auto_eject_would_bypass_locks(env):
    """Why the shipped config says auto_eject_hosts: false: with it on,
    server_failure_limit LOCKED replies eject a healthy server, and the next
    write of the locked key succeeds on another server."""
    key = env.key_on(0, "eject")
    ejecting = with_setting(env.config_text, "auto_eject_hosts", "true")
    limit = int(pool_settings(ejecting)["server_failure_limit"])
    with nutcracker(ejecting, env.servers, env.workdir) as port, \
            client(env.servers[0]) as holder, client(port) as proxy:
        assert holder.call(f"lock {key}\r\n".encode()) == b"OK"
        _refused_writes(proxy, key, limit)
        assert proxy.store("set", key, b"bypass") == b"STORED"
        assert direct_get(env.servers[1], key) == b"bypass"
        assert direct_get(env.servers[0], key) == b"v0"


def check_dead_server_answers_server_error(env):
    """Without ejection a dead server's keys fail (clients see a miss or an
    error), the other server's keys keep working. Stops server 2: last."""
    dead_key, live_key = env.key_on(1, "dead"), env.key_on(0, "live")
    env.stop_second()
    limit = int(pool_settings(env.config_text)["server_failure_limit"])
    with client(env.proxy) as proxy:
        for _ in range(limit + 2):
            reply = proxy.store("set", dead_key, b"v")
            assert reply.startswith(b"SERVER_ERROR"), f"set on a dead server: {reply!r}"
        print(f"     a dead server's key answers {reply.decode()!r}")
        assert proxy.store("set", live_key, b"v") == b"STORED"
        assert proxy.get(live_key) == b"v"


CHECKS = [
    check_shipped_config_passes_nutcracker_t,
    check_broken_config_fails_nutcracker_t,
    check_test_copy_passes_nutcracker_t,
    check_keys_spread_over_both_servers,
    check_cache_commands_through_proxy,
    check_cas_through_proxy,
    check_lock_commands_close_the_connection,
    check_requests_pipelined_before_a_lock_may_be_lost,
    check_binary_protocol_closes_the_connection,
    check_locked_key_through_proxy,
    check_noreply_write_to_locked_key_is_dropped,
    check_auto_eject_would_bypass_locks,
    check_dead_server_answers_server_error,  # stops a server: keep last
]


def run_checks(env):
    passed = failed = 0
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        try:
            check(env)
        except Exception as error:  # a failed check must not stop the others
            failed += 1
            detail = str(error) if isinstance(error, AssertionError) else traceback.format_exc()
            print(f"FAIL {name}: {detail or traceback.format_exc()}", flush=True)
        else:
            passed += 1
            print(f"ok   {name}", flush=True)
    return passed, failed


def run_all(binary, config_text):
    """Starts two servers and the proxy, runs the checks; (passed, failed)."""
    with tempfile.TemporaryDirectory(prefix="twemproxy-test-") as workdir, \
            contextlib.ExitStack() as servers:
        second = contextlib.ExitStack()  # closed early by the dead-server check
        ports = [servers.enter_context(lockcached(binary))]
        ports.append(second.enter_context(lockcached(binary)))
        servers.push(second)
        with nutcracker(config_text, ports, workdir) as proxy:
            passed, failed = run_checks(Env(config_text, ports, proxy, workdir, second.close))
        if failed:
            print(_logs(workdir), file=sys.stderr)
    return passed, failed


def main():
    binary = binary_from_argv()
    config_path = sys.argv[1] if len(sys.argv) > 1 else SHIPPED_CONFIG
    with open(config_path) as file:
        config_text = file.read()
    try:
        passed, failed = run_all(binary, config_text)
    except Exception:  # start-up or shutdown (a server's exit status) went wrong
        print(f"FAIL setup or teardown:\n{traceback.format_exc()}", flush=True)
        passed, failed = 0, 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
