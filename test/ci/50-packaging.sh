#!/usr/bin/env bash
# The Debian package: make it with CPack from stage 10's build (prefix /usr,
# with libsystemd and man pages), install it with apt beside Debian's
# memcached holding 127.0.0.1:11211 and check that postinst saw the port
# taken and did not start the service, check what it holds (man pages and
# changelog included), verify its systemd unit, run the service the way the
# unit does and check that it tells systemd READY=1 and serves, rotate its
# glog files with the installed logrotate file, then remove and purge it.
# CI runs in a container without systemd as PID 1, so the unit is verified
# (systemd-analyze) and its ExecStart is run by hand, as an unprivileged
# user, with a NOTIFY_SOCKET this script listens on.
set -euo pipefail

work=$(mktemp -d)
chmod 755 "$work"
# Debian's memcached stays installed after the stage only if it was before
# (the README's test command installs it; other stages run /usr/bin/memcached).
memcached_before=$(dpkg-query -W -f='${db:Status-Status}' memcached 2>/dev/null || true)
cleanup() {
  # The servers, should a check have failed while they ran.
  if [ -s "$work/pid" ]; then kill "$(cat "$work/pid")" 2>/dev/null || true; fi
  if [ -s "$work/memcached/pid" ]; then kill "$(cat "$work/memcached/pid")" 2>/dev/null || true; fi
  if dpkg-query -W lockcached >/dev/null 2>&1; then dpkg --purge lockcached >/dev/null || true; fi
  if [ "$memcached_before" != installed ]; then apt-get purge -y memcached >/dev/null 2>&1 || true; fi
  rm -rf "$work" /var/log/lockcached /etc/lockcached/users
}
trap cleanup EXIT

fail() {
  echo "50-packaging: $*" >&2
  exit 1
}

# help2man makes the man pages, man-db reads them back; iproute2's ss lets
# check-ports name the program that holds a port.
# python3-seccomp: the unit's system-call filter, tried without systemd.
apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends libsystemd-dev dpkg-dev file systemd \
  logrotate python3 python3-seccomp help2man man-db iproute2 memcached >/dev/null

# The package holds stage 10's build: the server and CLI that the whole
# suite tested, built as a user's build is (RelWithDebInfo), here configured
# for /usr with libsystemd and man pages. The prefix changes installed files
# only (the unit, the flagfile's path, check-ports), never a compiled one, so
# this builds the man pages and nothing else (everything, if the stage runs
# alone). The build directory's prefix and options are put back at the end.
build=${LOCKCACHED_PACKAGE_BUILD:-build}
prefix_before=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
restore_build() {
  cmake -S . -B "$build" -DCMAKE_INSTALL_PREFIX="${prefix_before:-/usr/local}" \
    -DLOCKCACHED_SYSTEMD=AUTO -DLOCKCACHED_MAN_PAGES=AUTO >/dev/null
}
trap 'restore_build; cleanup' EXIT
cmake -S . -B "$build" -DLOCKCACHED_WERROR=ON -DCMAKE_INSTALL_PREFIX=/usr -DLOCKCACHED_SYSTEMD=ON \
  -DLOCKCACHED_MAN_PAGES=ON >/dev/null
cmake --build "$build" -j2
rm -f "$build"/lockcached_*.deb
(cd "$build" && cpack -G DEB)
deb=$(ls "$build"/lockcached_*.deb)
echo "built $deb"

# --- install beside Debian's memcached -----------------------------------------
# memcached's postinst starts nothing without systemd: start it by hand on
# the address and port /etc/memcached.conf gives it, 127.0.0.1:11211, and
# install lockcached while it holds them.
install -d -o nobody "$work/memcached"
memcached -d -l 127.0.0.1 -p 11211 -u nobody -P "$work/memcached/pid"
for _ in $(seq 100); do
  if [ -s "$work/memcached/pid" ] && (: </dev/tcp/127.0.0.1/11211) 2>/dev/null; then break; fi
  sleep 0.1
done
memcached_pid=$(cat "$work/memcached/pid" 2>/dev/null) && kill -0 "$memcached_pid" ||
  fail "memcached did not start on 127.0.0.1:11211 (is the port taken already?)"

apt-get install -y -o DPkg::Lock::Timeout=300 "./$deb" 2>&1 | tee "$work/install.log"

for package in memcached lockcached; do
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$package")" = installed ] ||
    fail "$package is not installed"
done
# postinst asked check-ports, which found the port taken, said so, and the
# service was not started (without systemd postinst never starts it; with
# systemd this "held" is what keeps it from starting into a failed unit).
for line in "lockcached: 127.0.0.1:11211 (--port) is in use by memcached (pid $memcached_pid)" \
  "lockcached: /etc/lockcached/lockcached.conf, then run: systemctl start lockcached" \
  "lockcached: lockcached.service was not started."; do
  grep -qF "$line" "$work/install.log" || fail "the installation did not say: $line"
done
check_ports=/usr/libexec/lockcached/check-ports
decision=$("$check_ports" 2>"$work/check-ports.err")
[ "$decision" = held ] || fail "check-ports says $decision while memcached holds 11211"
grep -qF 'is in use by memcached' "$work/check-ports.err" || fail "check-ports does not name memcached"
# check_ports_says DECISION TEXT LINE...: check-ports on a flagfile of these
# LINEs decides DECISION and says TEXT on stderr (nothing at all where TEXT
# is empty). It must read the file as the server does and find the ports the
# server would bind.
check_ports_says() {
  local expected=$1 text=$2
  shift 2
  printf '%s\n' "$@" >"$work/case.conf"
  decision=$("$check_ports" "$work/case.conf" 2>"$work/check-ports.err")
  [ "$decision" = "$expected" ] ||
    fail "check-ports says $decision, not $expected, for: $* ($(cat "$work/check-ports.err"))"
  if [ -z "$text" ]; then
    [ ! -s "$work/check-ports.err" ] || fail "check-ports says, for $*: $(cat "$work/check-ports.err")"
  else
    grep -qF -- "$text" "$work/check-ports.err" ||
      fail "check-ports does not say \"$text\" for: $* ($(cat "$work/check-ports.err"))"
  fi
}
# A comment after a value, as the shipped flagfile's header shows.
check_ports_says held "lockcached: 127.0.0.1:11211 (--port) is in use by memcached" \
  "--port=11211  # the usual port" "--lock_port=0" $'--listen=127.0.0.1\t# loopback only'
# --lock_port left out and a port of its own on every --listen entry: the
# lock port follows the first entry's (11022 + 189), not --port.
check_ports_says held "lockcached: 127.0.0.1:11211 (--lock_port) is in use by memcached" \
  "--port=12345" "--listen=127.0.0.1:11022"
# --unix_socket turns the lock port off, but under --cluster, whose leader
# serves it: the server keeps it at --port + 189.
check_ports_says held "lockcached: 127.0.0.1:11211 (--lock_port) is in use by memcached" \
  "--port=11022" "--listen=127.0.0.1" "--unix_socket=$work/lockcached.sock" \
  "--cluster=1@127.0.0.1:11500" "--node_id=1"
check_ports_says start "" "--port=11022" "--listen=127.0.0.1" "--unix_socket=$work/lockcached.sock"
# With the port free again, the decision is to start, without a word.
kill "$memcached_pid"
for _ in $(seq 100); do
  if ! kill -0 "$memcached_pid" 2>/dev/null; then break; fi
  sleep 0.1
done
decision=$("$check_ports" 2>"$work/check-ports.err")
[ "$decision" = start ] && [ ! -s "$work/check-ports.err" ] ||
  fail "check-ports says $decision with the ports free: $(cat "$work/check-ports.err")"
check_ports_says start "" "--port=11211  # the usual port" "--lock_port=11400 # beside it" \
  "--listen=127.0.0.1"
echo "check-ports: held beside memcached, start once it is gone"

# --- what the package holds ------------------------------------------------------
for path in /usr/bin/lockcached /etc/lockcached/lockcached.conf \
  /lib/systemd/system/lockcached.service /etc/logrotate.d/lockcached \
  /usr/share/doc/lockcached/README.md /usr/share/doc/lockcached/copyright \
  /usr/share/doc/lockcached/changelog.Debian.gz "$check_ports" \
  /usr/share/man/man1/lockcached.1.gz; do
  dpkg -S "$path" >/dev/null || fail "the package does not hold $path"
done
# Every relative link of the installed README and docs leads to a file the
# package holds (they are laid out as in the repository).
for page in /usr/share/doc/lockcached/README.md /usr/share/doc/lockcached/docs/*.md \
  /usr/share/doc/lockcached/bench/*.md; do
  for target in $(grep -o '](\([^)#]*\)' "$page" | sed 's/^](//' | grep -v '^[a-z]*:' || true); do
    [ -e "$(dirname "$page")/$target" ] || fail "$page links to $target, which is not installed"
  done
done
if [ -f src/cli/CMakeLists.txt ]; then
  dpkg -S /usr/bin/lockcached-cli /usr/share/man/man1/lockcached-cli.1.gz >/dev/null ||
    fail "the package does not hold lockcached-cli and its man page"
fi

# The man pages, as man shows them: text from each binary's --help (a flag,
# an option) and from etc/man/*.h2m.in (the sections --help cannot hold),
# nothing groff warns about. Read whole (grep -q would cut man's pipe short
# under pipefail), not hyphenated.
man_page_has() {
  local text
  text=$(man --nh --nj -P cat "$1") || fail "man $1 failed"
  for expected in "${@:2}"; do
    grep -qF -- "$expected" <<<"$text" || fail "$1(1) lacks \"$expected\""
  done
}
man_page_has lockcached lock_port SIGNALS SIGHUP 'EXIT STATUS' /etc/lockcached/lockcached.conf
if [ -f src/cli/CMakeLists.txt ]; then
  man_page_has lockcached-cli --kill-on-loss 'EXIT STATUS' EX_TEMPFAIL LOCKCACHED_LOCK_PORT
fi
for page in /usr/share/man/man1/lockcached*.1.gz; do
  warnings=$(man --warnings -l "$page" 2>&1 >/dev/null)
  [ -z "$warnings" ] || fail "$page: $warnings"
done

# The changelog: its top entry is the package's version, and its trailer
# the package's Maintainer.
changelog=/usr/share/doc/lockcached/changelog.Debian.gz
zcat "$changelog" >"$work/changelog"
version=$(dpkg-query -W -f='${Version}' lockcached)
[ "$(dpkg-parsechangelog -l "$work/changelog" -SVersion)" = "$version" ] ||
  fail "changelog.Debian's version is not the package's $version"
maintainer=$(dpkg-query -W -f='${Maintainer}' lockcached)
[ "$(dpkg-parsechangelog -l "$work/changelog" -SMaintainer)" = "$maintainer" ] ||
  fail "changelog.Debian's trailer is not the package's Maintainer ($maintainer)"
[[ "$maintainer" != *localhost* ]] || fail "Maintainer: $maintainer"
echo "Version: $version, Maintainer: $maintainer"
dpkg-query -W -f='${Conffiles}\n' lockcached | grep -q '^ /etc/lockcached/lockcached.conf ' ||
  fail "/etc/lockcached/lockcached.conf is not a conffile"
depends=$(dpkg-query -W -f='${Depends}' lockcached)
echo "Depends: $depends"
for library in libsystemd0 libgoogle-glog0v6 libgflags2.2 libjemalloc2 libraft2 libuv1; do
  [[ "$depends" == *"$library"* ]] || fail "Depends lacks $library (shlibdeps)"
done
# postinst enabled the unit (deb-systemd-helper works without systemd running).
[ -L /etc/systemd/system/multi-user.target.wants/lockcached.service ] ||
  fail "postinst did not enable lockcached.service"

# --- the unit -----------------------------------------------------------------
unit=/lib/systemd/system/lockcached.service
verify=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $verify"
# verify exits 0 on unknown or unparsable settings; it only warns.
if grep -i lockcached <<<"$verify"; then fail "systemd-analyze verify warns about the unit"; fi
grep -qx 'Type=notify' "$unit" || fail "the packaged unit is not Type=notify"
# A stop or restart of the service is graceful: with --memory_file, warm.
grep -qx 'KillSignal=SIGUSR1' "$unit" || fail "the packaged unit does not stop with SIGUSR1"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
echo "ExecStart: $exec_start"

# --- run it as the unit would -------------------------------------------------
# As an unprivileged user (the unit's DynamicUser=) without new privileges;
# ports: any free one, added after ExecStart's flags (a later flag wins).
# Logs go to files in /var/log/lockcached (the unit's LogsDirectory=) so that
# the installed logrotate file is exercised on what glog really writes.
install -d -o nobody -g nogroup -m 755 /var/log/lockcached
read -r -a command <<<"$exec_start"
command=(setpriv --reuid=nobody --regid=nogroup --clear-groups --no-new-privs
  "${command[@]}" --port=0 --lock_port=-1 --logtostderr=false
  --log_dir=/var/log/lockcached --logbufsecs=0)

WORK=$work python3 - "${command[@]}" <<'PYTHON'
import os, re, signal, socket, subprocess, sys, time

work = os.environ["WORK"]
notify_path = os.path.join(work, "notify")
notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
notify.bind(notify_path)
os.chmod(notify_path, 0o777)  # the server runs as nobody
notify.settimeout(20)

def fail(message):
    print("50-packaging:", message, file=sys.stderr)
    sys.exit(1)

def receive():
    try:
        return notify.recv(4096).decode()
    except socket.timeout:
        fail("no notification from the server within 20 s")

def request(port, data, until):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(data)
        reply = b""
        while not reply.endswith(until):
            chunk = conn.recv(4096)
            if not chunk:
                break
            reply += chunk
        return reply

server = subprocess.Popen(sys.argv[1:], env=dict(os.environ, NOTIFY_SOCKET=notify_path),
                          stdin=subprocess.DEVNULL)
with open(os.path.join(work, "pid"), "w") as f:
    f.write(str(server.pid))
ready = receive()
print("notification:", ready.replace("\n", " | "))
if "READY=1" not in ready.split("\n"):
    fail("the first notification is not READY=1: " + ready)
match = re.search(r"STATUS=memcached protocols on port (\d+), lock service on (\d+)", ready)
if not match:
    fail("no STATUS with the ports: " + ready)
port, lock_port = int(match.group(1)), int(match.group(2))

version = request(port, b"version\r\n", b"\r\n")
if not version.startswith(b"VERSION "):
    fail("version: %r" % version)
if request(port, b"set stage50 0 0 5\r\nhello\r\n", b"\r\n") != b"STORED\r\n":
    fail("set was not STORED")
got = request(port, b"get stage50\r\n", b"END\r\n")
if got != b"VALUE stage50 0 5\r\nhello\r\nEND\r\n":
    fail("get: %r" % got)
locked = request(lock_port, b"lock stage50 0\r\n", b"\r\n")
if not locked.startswith(b"200 Acquired"):
    fail("lock service: %r" % locked)
print("served:", version.strip().decode(), "| set/get ok | lock service ok")

# The installed logrotate file on glog's files, while the server writes.
logs = [f for f in os.listdir("/var/log/lockcached") if ".log.INFO." in f]
if len(logs) != 1:
    fail("expected one glog INFO file, found %r" % os.listdir("/var/log/lockcached"))
live = os.path.join("/var/log/lockcached", logs[0])
subprocess.run(["logrotate", "--force", "--state", os.path.join(work, "logrotate.state"),
                "/etc/logrotate.d/lockcached"], check=True)
rotated = os.path.join("/var/log/lockcached/old", logs[0] + ".1")
with open(rotated, "rb") as f:
    if b"Listening on" not in f.read():
        fail("the rotated copy lacks the start-up lines")
if os.path.getsize(live) != 0:
    fail("copytruncate left %d bytes in the live file" % os.path.getsize(live))

server.send_signal(signal.SIGTERM)
status = server.wait(timeout=20)
if status != 0:
    fail("exit status %d after SIGTERM" % status)
if receive() != "STOPPING=1":
    fail("no STOPPING=1")
# glog went on writing into the truncated file, at its start: no hole.
with open(live, "rb") as f:
    after = f.read()
if b"shutting down" not in after or after.startswith(b"\0"):
    fail("after the rotation glog's file holds %r" % after[:200])
print("SIGTERM: exit 0, STOPPING=1; logrotate copytruncate: rotated, glog writes on")
PYTHON

# --- the unit's group and system-call filter ----------------------------------
# docs/security.md's hardened set-up under the unit: an --auth_file that is
# root's, mode 640, group lockcached (SupplementaryGroups=); read at start
# and again at SIGHUP by the unit's unprivileged user. The unit's
# SystemCallFilter= and RestrictAddressFamilies= lines are applied with
# libseccomp as systemd would.
getent group lockcached >/dev/null || fail "postinst did not create the group lockcached"
grep -qx 'SupplementaryGroups=lockcached' "$unit" || fail "the unit joins no group lockcached"
printf 'stage50:0f1e2d3c4b5a6978\n' >/etc/lockcached/users
chown root:lockcached /etc/lockcached/users
chmod 640 /etc/lockcached/users
# A unit that refuses io_uring: the check must see the difference.
sed '/^SystemCallFilter=io_uring/d; $a SystemCallFilter=~io_uring_setup' "$unit" >"$work/no-uring.service"
# And one whose RestrictAddressFamilies= lacks AF_NETLINK, which
# --virtual_ip's getifaddrs() needs.
grep -q '^RestrictAddressFamilies=.* AF_NETLINK' "$unit" ||
  fail "the unit's RestrictAddressFamilies= lacks AF_NETLINK (--virtual_ip needs it)"
sed '/^RestrictAddressFamilies=/s/ AF_NETLINK//' "$unit" >"$work/no-netlink.service"
read -r -a command <<<"$exec_start"
# --io as the shipped flagfile has it (auto): io_uring under the unit's filter.
command+=(--port=0 --lock_port=0 --auth_file=/etc/lockcached/users)
# systemd applies the filter after it has switched users: so does this.
cp test/ci/run-with-unit-filter.py "$work/"
as_unit=(setpriv --reuid=nobody --regid=nogroup --groups=lockcached --no-new-privs)
/usr/bin/python3 - "$unit" "$work/no-uring.service" "$work/no-netlink.service" \
  "$work/run-with-unit-filter.py" "${as_unit[@]}" -- "${command[@]}" <<'PYTHON'
import os, re, signal, socket, subprocess, sys, time

unit, no_uring, no_netlink, filter_script = sys.argv[1:5]
split = sys.argv.index("--")
as_unit, command = sys.argv[5:split], sys.argv[split + 1:]

def filtered(unit_file):
    return as_unit + [sys.executable, filter_script, unit_file] + command

def fail(message):
    print("50-packaging:", message, file=sys.stderr)
    sys.exit(1)

def start(argv, listen=r"127\.0\.0\.1"):
    server = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    log = []
    def wait_for(pattern):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = server.stderr.readline()
            if not line:
                break
            log.append(line)
            if re.search(pattern, line):
                return re.search(pattern, line)
        server.kill()
        fail("no %r from %s; it wrote:\n%s" % (pattern, argv, "".join(log)))
    port = int(wait_for(r"Listening on %s:(\d+) \(memcached" % listen)[1])
    wait_for(r" ready$")
    return server, port, wait_for, log

def io_backend(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        login = b"stage50 0f1e2d3c4b5a6978"
        conn.sendall(b"set auth 0 0 %d\r\n%s\r\nstats settings\r\n" % (len(login), login))
        reply = b""
        while not reply.endswith(b"END\r\n"):
            chunk = conn.recv(4096)
            if not chunk:
                fail("the server closed the connection: %r" % reply)
            reply += chunk
    if not reply.startswith(b"STORED\r\n"):
        fail("the login with the group-readable --auth_file failed: %r" % reply[:80])
    return re.search(rb"STAT io (\w+)", reply)[1].decode()

# What this kernel allows at all, with no filter: the filter checks mean
# something only where io_uring works.
server, port, _, _ = start(as_unit + command)
kernel = io_backend(port)
server.terminate(); server.wait()
server, port, wait_for, log = start(filtered(unit))
backend = io_backend(port)
server.send_signal(signal.SIGHUP)
wait_for(r"SIGHUP: --auth_file re-read: 1 users")
server.terminate()
if server.wait(timeout=20) != 0:
    fail("exit status %d after SIGTERM under the unit's filter" % server.returncode)
print("under the unit's user, group and filter: --auth_file read at start and at SIGHUP")

# --virtual_ip replication under the unit's RestrictAddressFamilies=: the
# server looks for the virtual IP among this host's addresses with
# getifaddrs(), which asks the kernel over an AF_NETLINK socket. 127.0.0.1
# is this host's: the server starts as master. Without AF_NETLINK it cannot
# start (exit 1, and systemd would restart it in a loop).
with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    repl_port = probe.getsockname()[1]
vip = ["--listen=0.0.0.0", "--virtual_ip=127.0.0.1", "--repl_port=%d" % repl_port]
server, _, _, log = start(filtered(unit) + vip, listen=r"0\.0\.0\.0")
server.terminate()
if server.wait(timeout=20) != 0:
    fail("exit status %d after SIGTERM with --virtual_ip" % server.returncode)
if not any("replication: master; replicas connect to 127.0.0.1:%d" % repl_port in line
           for line in log):
    fail("--virtual_ip=127.0.0.1 did not start as master under the unit:\n" + "".join(log))
try:
    refused = subprocess.run(filtered(no_netlink) + vip, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=20)
except subprocess.TimeoutExpired:
    fail("without AF_NETLINK --virtual_ip still started: the check cannot see a refusal")
if refused.returncode == 0 or "getifaddrs" not in refused.stderr:
    fail("without AF_NETLINK --virtual_ip still started (exit %d): the check cannot see a "
         "refusal:\n%s" % (refused.returncode, refused.stderr))
print("under the unit's RestrictAddressFamilies=: --virtual_ip finds its address (not without "
      "AF_NETLINK)")
if kernel != "uring":
    print("io_uring is refused on this kernel: its filter check is skipped")
    sys.exit(0)
if backend != "uring":
    fail("--io=auto took %s under the unit's system-call filter" % backend)
server, port, _, log = start(filtered(no_uring))
refused = io_backend(port)
server.terminate(); server.wait()
if refused != "epoll" or not any("--io=auto: epoll, because the kernel refuses io_uring" in line
                                 for line in log):
    fail("a filter without io_uring still gave %s: the check cannot see a refusal" % refused)
print("the unit's system-call filter lets --io=auto take io_uring (epoll, saying why, without it)")
PYTHON
rm /etc/lockcached/users

# --- remove -------------------------------------------------------------------
dpkg -r lockcached
[ ! -e /usr/bin/lockcached ] || fail "dpkg -r left /usr/bin/lockcached"
[ -e /etc/lockcached/lockcached.conf ] || fail "dpkg -r removed the conffile (only purge may)"
dpkg --purge lockcached
[ ! -e /etc/lockcached/lockcached.conf ] || fail "dpkg --purge left the conffile"
[ ! -e /etc/systemd/system/multi-user.target.wants/lockcached.service ] ||
  fail "purge left the unit enabled"
echo "50-packaging: package built, installed, verified, served, removed"
