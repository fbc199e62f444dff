# High availability: replication between real lockcached processes in
# network namespaces (test/ha/netns.py: TEST-NET-1 addresses on a private
# bridge, no route out): the harness's own keepalived check
# (test/ha/netns_selftest.py), the virtual IP moved by hand
# (test/ha/replication_test.py), a --virtual_ip master killed with SIGKILL
# under real keepalived (test/ha/failover_test.py, the shipped
# etc/keepalived.conf with the check a --virtual_ip node needs); the
# virtual IP following a Raft cluster's leader under the shipped file as it
# is, when the leader dies and when a partition heals
# (test/ha/cluster_vip_test.py, about 40 s);
# and a client whose link is cut while it holds locks, on both I/O
# backends, plain and TLS (test/ha/dead_client_test.py, about 40 s); and
# the Raft cluster under faults (test/ha/raft_faults.py: kills, partitions,
# one-way faults (a node that hears no one, one that reaches no one),
# whole machines paused, leader changes, restarts, a client machine that
# vanishes holding a lock, a member's machine lost with its disk and
# replaced; keepalived with the shipped file beside every node, clients
# that follow 503 and clients that know only the virtual IP, on both sides
# of every cut, a cache writer; about 4 minutes), then once against a
# server that answers before the log commits (the test-only target
# lockcached-early-answer), which the same checks must catch.
# Needs root, iproute2 and keepalived; takes about six minutes.
missing=()
for package in iproute2 keepalived; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' ||
    missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  # keepalived's package enables a service that starts only with a
  # /etc/keepalived/keepalived.conf; the tests run their own daemons.
  apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends "${missing[@]}" >/dev/null
fi

# Stage 10 builds build/lockcached; build what is missing.
if [ ! -x build/lockcached ] || [ ! -x build/src/cli/lockcached-cli ]; then
  cmake -S . -B build -DLOCKCACHED_WERROR=ON
  cmake --build build -j2 --target lockcached lockcached-cli
fi

# The unsafe server, built beside the tests (they wait on timers most of the
# time) at the lowest priority, in stage 10's directory: one compile of
# raft_node.cc and main.cc and a link, build/lockcached untouched.
early_log=build/early-answer-build.log
nice -n 19 cmake --build build -j2 --target lockcached-early-answer >"$early_log" 2>&1 &
early_build=$!

python3 test/ha/netns_selftest.py
export LOCKCACHED_BINARY=build/lockcached LOCKCACHED_CLI=build/src/cli/lockcached-cli
python3 -W error::ResourceWarning test/ha/replication_test.py
python3 -W error::ResourceWarning test/ha/failover_test.py
python3 -W error::ResourceWarning test/ha/cluster_vip_test.py
python3 -W error::ResourceWarning test/ha/dead_client_test.py
python3 test/ha/raft_faults.py
# The checks must fail a server that answers before a majority has a change.
wait "$early_build" || {
  cat "$early_log"
  echo "25-high-availability: building lockcached-early-answer failed" >&2
  exit 1
}
LOCKCACHED_BINARY=build/lockcached-early-answer python3 test/ha/raft_faults.py \
  --expect-violations partition-leader
