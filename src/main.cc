// lockcached: flags in, server up, signals handled, server down.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>
#ifdef LOCKCACHED_WITH_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "lockcached/config/command_line.h"
#include "lockcached/config/flag_loader.h"
#include "lockcached/config/usage.h"
#include "lockcached/core/verbosity.h"
#include "lockcached/net/socket.h"
#include "lockcached/replication/virtual_ip.h"
#include "lockcached/server/listen_address.h"
#include "lockcached/server/process.h"
#include "lockcached/server/server.h"
#include "lockcached/version.h"
#include "lockcached_license.h"

DEFINE_int32(port, 11211, "TCP port of the memcached protocols (0: any free port)");
DEFINE_int32(lock_port, 11400,
             "TCP port of the named-lock service (0: off, -1: any free port). Not given, it "
             "follows --port: --port plus 189 (11211: 11400), any free port with --port=0, off "
             "above 65346 and with --unix_socket; so instances on different cache ports each "
             "get their own");
DEFINE_string(listen, "0.0.0.0",
              "Where the memcached protocols listen, as memcached's -l: [notls:]HOST[:PORT],... "
              "(a PORT of the address's own instead of --port; notls: plain with --tls; "
              "[IPv6]:PORT; * for every address). The other ports listen on each HOST");
DEFINE_string(unix_socket, "",
              "A unix-domain socket for the memcached protocols instead of TCP (memcached's -s): "
              "no cache port then, and no lock port unless --lock_port is given");
DEFINE_string(unix_socket_mask, "0700",
              "Permission bits of --unix_socket's file, in octal (memcached's -a)");
DEFINE_int32(listen_backlog, 1024,
             "Connections the kernel queues on each listening socket until they are accepted "
             "(memcached's -b; net.core.somaxconn caps it)");
DEFINE_int32(threads, 0, "Reactor threads (0: one per CPU core)");
DEFINE_string(io, "epoll",
              "Client I/O backend: epoll, or uring (io_uring: a loop turn's receives and sends "
              "in one system call; falls back to epoll, with a warning, where the kernel "
              "refuses io_uring)");
DEFINE_bool(uring_sqpoll, false,
            "With --io=uring: a kernel thread per reactor thread takes the submissions "
            "(SQPOLL), so a busy reactor makes no system call; it spins on a CPU, worth it only "
            "where CPUs are spare. Falls back, with a warning, where the kernel refuses it");
DEFINE_int32(memory_limit_mb, 1024, "Memory for items, in megabytes (SIGHUP re-reads it)");
DEFINE_int64(max_item_size, 1048576, "Largest value accepted, in bytes");
DEFINE_string(memory_file, "",
              "A warm restart (memcached's -e): SIGUSR1 writes the cache to this file as it "
              "stops and the next start loads it, if --memory_limit_mb and --max_item_size are "
              "unchanged; a start removes it, so a crash or a SIGTERM stop means a cold start "
              "(empty: every start is cold)");
DEFINE_bool(disable_evictions, false,
            "When memory is full, refuse a store (SERVER_ERROR out of memory storing object) "
            "instead of evicting; expired items still make room (memcached's -M)");
DEFINE_bool(lru_crawler, true,
            "Run the expiry crawler, which takes out expired items nobody asks for "
            "(memcached's -o lru_crawler and no_lru_crawler; lru_crawler enable and disable "
            "switch it while serving)");
DEFINE_bool(lock_memory, false,
            "Lock all memory into RAM with mlockall (memcached's -k); where it cannot be done "
            "(no privilege, a bounded RLIMIT_MEMLOCK) the server warns and runs unlocked");
DEFINE_int32(max_connections, 4096, "Simultaneous client connections on the cache port");
DEFINE_int32(lock_max_connections, 1024,
             "Simultaneous client connections on the lock port, a budget of its own so that "
             "cache load cannot lock out lock-service clients");
DEFINE_int32(idle_timeout, 0,
             "Close connections idle for this many seconds (0: never; SIGHUP re-reads it; "
             "memcached's -o idle_timeout)");
DEFINE_int32(max_reqs_per_event, 0,
             "Requests one cache connection runs before the others on its thread get a turn "
             "(memcached's -R; 0: all those of one read, at most 64 KiB)");
DEFINE_string(protocol, "auto",
              "Protocols a cache connection may speak: auto (its first byte decides), ascii "
              "(text and meta only) or binary (memcached's -B)");
DEFINE_bool(disable_cas, false,
            "No CAS: gets, gats, mg and binary replies show a CAS of 0, and cas never matches "
            "(memcached's -C)");
DEFINE_bool(disable_flush_all, false,
            "Refuse flush_all, text and binary (memcached's -F)");
DEFINE_bool(disable_dumping, false,
            "Refuse the dumps of keys: stats cachedump, lru_crawler metadump and keys "
            "(memcached's -X)");
DEFINE_bool(disable_watch, false, "Refuse the watch command (memcached's -W)");
DEFINE_bool(enable_shutdown, false,
            "Allow the shutdown command: shutdown stops the server as SIGINT does, shutdown "
            "graceful as SIGUSR1 does (memcached's -A)");
DEFINE_int32(watch_buffer_kb, 256,
             "Kilobytes of lines a watch connection may have waiting; more are dropped "
             "(memcached's -o watcher_logbuf_size)");
DEFINE_string(stats_prefix_delimiter, ":",
              "The character that ends a key's prefix for stats detail (memcached's -D)");
DEFINE_bool(stats_detail, false,
            "Count stats detail from the start, as after stats detail on (memcached's -D "
            "turns it on)");
DEFINE_int32(tcp_keepalive, 15,
             "Seconds after which a client connection whose peer stopped answering (its "
             "machine died, its network was cut) is closed and its locks end, found by TCP "
             "keepalive probes and TCP_USER_TIMEOUT (0: off)");
DEFINE_string(user, "", "Run as this user once the ports are bound (when started as root)");
DEFINE_bool(daemonize, false,
            "Detach into the background once every port is bound (memcached's -d)");
DEFINE_string(pid_file, "", "Write the process id to this file (memcached's -P)");
DEFINE_bool(enable_coredumps, false,
            "Raise the core-file size limit as far as allowed (memcached's -r); a hard limit "
            "of 0 stops the start");
DEFINE_uint64(lock_service_max_locks_per_session, 10000,
              "Named locks one lock-service session may hold plus wait for (0: no limit)");
DEFINE_uint64(lock_service_max_names, 1000000,
              "Named locks that may exist in the lock service at once (0: no limit)");
DEFINE_string(virtual_ip, "",
              "Cache replication (docs/high-availability.md): the address keepalived moves; the "
              "node holding it is the master, the others read-only replicas (empty: no "
              "replication). The lock service is not replicated: a new master starts it empty; "
              "for a replicated one, use --cluster");
DEFINE_int32(repl_port, 11213, "TCP port, on the virtual IP, where replicas connect to the master");
DEFINE_int32(repl_buffer_size, 30,
             "Megabytes of changes the master keeps for one replica; a replica further behind is "
             "dropped and resyncs");
DEFINE_int32(repl_timeout, 10,
             "Seconds of silence after which master and replica give each other up; a replica "
             "that lost its master waits as long for the virtual IP before it resyncs");
DEFINE_bool(tls, false, "Serve TLS on --port and --lock_port (memcached's -Z)");
DEFINE_int32(tls_port, 0,
             "A further cache port that speaks TLS, next to the plain --port (0: none, -1: any "
             "free port)");
DEFINE_int32(lock_tls_port, 0,
             "A further lock-service port that speaks TLS, next to the plain --lock_port (0: "
             "none, -1: any free port)");
DEFINE_string(tls_cert_file, "",
              "PEM certificate chain the TLS ports present, the server's own first (memcached's "
              "ssl_chain_cert; refresh_certs and SIGHUP re-read it)");
DEFINE_string(tls_key_file, "", "PEM private key of --tls_cert_file (empty: in that file)");
DEFINE_string(tls_ca_file, "", "PEM CA certificates that sign the client certificates accepted");
DEFINE_bool(tls_verify_client, false,
            "Mutual TLS: refuse a client without a certificate signed by --tls_ca_file");
DEFINE_string(tls_min_version, "1.2", "Oldest TLS version accepted: 1.2 or 1.3");
DEFINE_string(tls_ciphers, "", "TLS 1.2 cipher list, OpenSSL's syntax (empty: its default)");
DEFINE_int32(tls_handshake_timeout, 10,
             "Seconds a client has to finish its TLS handshake before it is cut off");
DEFINE_string(auth_file, "",
              "memcached's -Y: a file of user:password lines; every client must authenticate "
              "first (text: a set whose data is \"user password\", binary: SASL PLAIN, lock "
              "service: auth USER PASSWORD); SIGHUP re-reads it");
DEFINE_bool(enable_sasl, false,
            "memcached's -S, accepted with --auth_file only: binary SASL PLAIN is on whenever "
            "--auth_file is given");
DEFINE_string(cluster, "",
              "A Raft cluster (docs/high-availability.md): its initial voters as "
              "ID@IPV4:PORT,... (their cluster ports); the leader serves the lock service "
              "(empty: a single server)");
DEFINE_uint64(node_id, 0, "With --cluster: this node's id in --cluster");
DEFINE_string(data_dir, "",
              "With --cluster: where this node keeps its Raft log, snapshots, term and vote "
              "(must exist; an empty one makes the node start from the initial voters)");
DEFINE_string(cluster_secret_file, "",
              "With --cluster: a file holding the secret (16 bytes or more) every member must "
              "prove it knows before the cluster port takes its messages");
DEFINE_bool(cluster_join, false,
            "With --cluster: this node joins a running cluster; with an empty --data_dir it "
            "waits for the leader to add it (cluster add) instead of starting from the initial "
            "voters");
DEFINE_int32(election_timeout_ms, 1000,
             "With --cluster: a follower that hears no leader for 1-2 times this stands for "
             "election; a leader that hears no majority for this long steps down");

#ifdef LOCKCACHED_WITH_JEMALLOC
// jemalloc reads this at start-up. Freed pages stay for reuse about a
// second: a cache frees memory exactly when it stores something else, and
// giving a 100 KB item's pages back at once made every such store fault
// them in again (3.5x the CPU per request, measured). Keeping them for
// jemalloc's default 10 s let RSS reach three times the limit while item
// sizes shifted, so the memory governor has them given back whenever the
// heap is over its bound (docs/architecture.md, "Memory and eviction").
extern "C" const char* malloc_conf;
const char* malloc_conf = "dirty_decay_ms:1000,muzzy_decay_ms:0";
#endif

namespace {

namespace config = lockcached::config;
namespace server = lockcached::server;
using lockcached::core::Authenticator;

// Exit statuses (lockcached(1), "EXIT STATUS"). 64 tells lockcached.service
// (RestartPreventExitStatus=64) that restarting cannot help.
constexpr int kUsageError = 64;  // EX_USAGE: the configuration is wrong
constexpr int kStartFailure = 1;  // the moment's fault, e.g. a port still in use

const std::vector<config::FlagGroup> kFlagGroups = {
    {"Ports and addresses",
     {"port", "lock_port", "listen", "unix_socket", "unix_socket_mask", "listen_backlog"}},
    {"Memory",
     {"memory_limit_mb", "max_item_size", "memory_file", "disable_evictions", "lru_crawler",
      "lock_memory"}},
    {"Connections and threads",
     {"max_connections", "lock_max_connections", "idle_timeout", "tcp_keepalive", "threads", "io",
      "uring_sqpoll", "max_reqs_per_event", "protocol"}},
    {"Commands (memcached's -C -F -X -W -A -D)",
     {"disable_cas", "disable_flush_all", "disable_dumping", "disable_watch", "enable_shutdown",
      "stats_prefix_delimiter", "stats_detail", "watch_buffer_kb"}},
    {"Named-lock service", {"lock_service_max_locks_per_session", "lock_service_max_names"}},
    {"Cluster (Raft)",
     {"cluster", "node_id", "data_dir", "cluster_secret_file", "cluster_join",
      "election_timeout_ms"}},
    {"Replication", {"virtual_ip", "repl_port", "repl_buffer_size", "repl_timeout"}},
    {"TLS", {"tls", "tls_port", "lock_tls_port", "tls_cert_file", "tls_key_file", "tls_ca_file",
             "tls_verify_client", "tls_min_version", "tls_ciphers", "tls_handshake_timeout"}},
    {"Authentication", {"auth_file", "enable_sasl"}},
    {"Process", {"flagfile", "user", "daemonize", "pid_file", "enable_coredumps"}},
    {"Logging (glog)", {"logtostderr", "log_dir", "v", "logbufsecs"}},
};

constexpr const char* kUsageIntro =
    "lockcached: memcached-compatible cache server with server-side locking.\n"
    "Usage: lockcached [--flag=value ...] [--flagfile=FILE]";
constexpr const char* kUsageOutro =
    "memcached's options work too, short and long: -p -U -l -s -a -m -M -c -k -t -I -v\n"
    "-vv -u -d -P -r -A -C -F -X -W -B -b -R -D -Y -S -Z -e -h -V -i, and -o with\n"
    "idle_timeout, lru_crawler, no_lru_crawler, watcher_logbuf_size and the TLS\n"
    "settings (UDP stays off). Those that tune memcached's own machinery (-f -n -L\n"
    "-N, -o hashpower, slab_*, the other lru_*, ext_* and the like) are accepted\n"
    "with a warning that says why they change nothing here. A flagfile holds one\n"
    "--flag=value per line; an unknown flag or a bad value anywhere stops the server\n"
    "with exit status 64, as does an address it may never listen on (not this\n"
    "host's, a privileged port); an address in use exits 1.\n"
    "Signals: SIGTERM, SIGINT and SIGUSR1 stop it cleanly, SIGUSR1 after writing\n"
    "the cache to --memory_file (-e) when it is set; SIGHUP re-reads the flagfile\n"
    "for --memory_limit_mb, --idle_timeout and --v, reloads the TLS certificates\n"
    "and re-reads --auth_file.\n"
    "--helpfull lists every flag, glog's and gflags' included.\n";

// The flag at fault and what is wrong with its value; empty when all is well.
struct FlagProblem {
  std::string flag;
  std::string message;
};

bool tls_enabled() {
  return FLAGS_tls || FLAGS_tls_port != 0 || FLAGS_lock_tls_port != 0;
}

FlagProblem check_tls_flags() {
  if (FLAGS_tls_port < -1 || FLAGS_tls_port > 65535) return {"tls_port", "must be -1..65535"};
  if (FLAGS_lock_tls_port < -1 || FLAGS_lock_tls_port > 65535) {
    return {"lock_tls_port", "must be -1..65535"};
  }
  if (FLAGS_tls_min_version != "1.2" && FLAGS_tls_min_version != "1.3") {
    return {"tls_min_version", "must be 1.2 or 1.3"};
  }
  if (FLAGS_tls_handshake_timeout < 1 || FLAGS_tls_handshake_timeout > 3600) {
    return {"tls_handshake_timeout", "must be 1..3600"};
  }
  if (!tls_enabled()) {
    // A certificate nobody serves means the operator believes TLS is on.
    for (const char* name : {"tls_cert_file", "tls_key_file", "tls_ca_file", "tls_ciphers"}) {
      if (!gflags::GetCommandLineFlagInfoOrDie(name).is_default) {
        return {name, "is set, but no port speaks TLS (--tls, --tls_port or --lock_tls_port)"};
      }
    }
    if (FLAGS_tls_verify_client) {
      return {"tls_verify_client", "is set, but no port speaks TLS (--tls, --tls_port or "
                                   "--lock_tls_port)"};
    }
    return {};
  }
  if (FLAGS_tls_cert_file.empty()) return {"tls_cert_file", "is needed when a port speaks TLS"};
  if (FLAGS_tls_verify_client && FLAGS_tls_ca_file.empty()) {
    return {"tls_verify_client", "needs --tls_ca_file, the CA client certificates must be signed by"};
  }
  return {};
}

// --listen as memcached's -l has it; nothing (and *error) for a mistake.
std::vector<server::ListenAddress> listen_addresses(std::string* error) {
  std::vector<server::ListenAddress> addresses;
  if (!server::parse_listen_addresses(FLAGS_listen, &addresses, error)) addresses.clear();
  return addresses;
}

// --unix_socket_mask: octal permission bits; nullopt for anything else.
std::optional<unsigned> unix_socket_mask() {
  unsigned mask = 0;
  const std::string& text = FLAGS_unix_socket_mask;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), mask, 8);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || mask > 0777) {
    return std::nullopt;
  }
  return mask;
}

bool is_default(const char* flag) {
  return gflags::GetCommandLineFlagInfoOrDie(flag).is_default;
}

FlagProblem check_listen_flags() {
  std::string error;
  std::vector<server::ListenAddress> addresses = listen_addresses(&error);
  if (addresses.empty()) return {"listen", error};
  // memcached's rule: "'notls' option is valid only when SSL is enabled".
  if (!FLAGS_tls && std::any_of(addresses.begin(), addresses.end(),
                                [](const auto& address) { return address.notls; })) {
    return {"listen", "notls: needs --tls (memcached's -Z); without it no port speaks TLS"};
  }
  if (FLAGS_unix_socket.size() > lockcached::net::kMaxUnixPathLength) {
    return {"unix_socket", "a unix socket's path may have " +
                               std::to_string(lockcached::net::kMaxUnixPathLength) +
                               " bytes at most"};
  }
  if (!unix_socket_mask()) return {"unix_socket_mask", "must be octal permission bits, 0 to 0777"};
  return {};
}

// With --virtual_ip, clients reach the master's cache on the virtual IP,
// which a replica does not hold yet: only a wildcard listener (of the
// address's family) answers there the moment keepalived moves it.
FlagProblem check_virtual_ip_listened() {
  if (FLAGS_virtual_ip.empty()) return {};
  if (!FLAGS_unix_socket.empty()) {
    return {"virtual_ip", "needs the cache on TCP, but --unix_socket serves it instead"};
  }
  std::string ignored;  // checked before
  std::vector<server::ListenAddress> addresses = listen_addresses(&ignored);
  bool v6 = FLAGS_virtual_ip.find(':') != std::string::npos;
  std::string wildcard = v6 ? "::" : "0.0.0.0";
  if (std::any_of(addresses.begin(), addresses.end(),
                  [&](const auto& address) { return address.host == wildcard; })) {
    return {};
  }
  return {"virtual_ip", FLAGS_virtual_ip + " is not covered by --listen=" + FLAGS_listen +
                            ": a replica must answer on it the moment it moves there (" +
                            (v6 ? "--listen=::" : "--listen=0.0.0.0") + ")"};
}

// Where the lock service listens when --lock_port is not given: beside the
// cache port, so that instances on different cache ports (as memcached's
// operators run them, -p 11211, -p 11212...) never share one.
constexpr int kLockPortOffset = 11400 - 11211;

// Sets --lock_port from --port where it was not given; a warning when that
// leaves the lock service off.
std::string follow_cache_port() {
  if (!is_default("lock_port")) return "";
  // --unix_socket is memcached's -s, which turns the network off: no lock
  // port either, unless asked for (or --cluster, whose leader serves it).
  if (!FLAGS_unix_socket.empty() && FLAGS_cluster.empty()) {
    FLAGS_lock_port = server::kLockServiceOff;
    return "";
  }
  if (FLAGS_port == 0) {
    FLAGS_lock_port = server::kAnyFreePort;
    return "";
  }
  FLAGS_lock_port = FLAGS_port + kLockPortOffset;
  if (FLAGS_lock_port <= 65535) return "";
  FLAGS_lock_port = server::kLockServiceOff;
  return "no lock service: --port " + std::to_string(FLAGS_port) + " plus " +
         std::to_string(kLockPortOffset) + " is no port (give --lock_port)";
}

server::CacheProtocol cache_protocol() {
  if (FLAGS_protocol == "ascii") return server::CacheProtocol::kText;
  if (FLAGS_protocol == "binary") return server::CacheProtocol::kBinary;
  return server::CacheProtocol::kAuto;
}

// The members of --cluster, or nothing (none given, or a mistake).
std::vector<lockcached::consensus::Member> cluster_members(std::string* error) {
  if (FLAGS_cluster.empty()) return {};
  return lockcached::consensus::parse_members(FLAGS_cluster, error);
}

FlagProblem check_cluster_flags() {
  if (FLAGS_election_timeout_ms < 100 || FLAGS_election_timeout_ms > 60000) {
    return {"election_timeout_ms", "must be 100..60000"};
  }
  if (FLAGS_cluster.empty()) {
    for (const char* name : {"node_id", "data_dir", "cluster_secret_file", "cluster_join"}) {
      if (!gflags::GetCommandLineFlagInfoOrDie(name).is_default) {
        return {name, "is set, but --cluster is not"};
      }
    }
    return {};
  }
  std::string error;
  std::vector<lockcached::consensus::Member> members = cluster_members(&error);
  if (members.empty()) return {"cluster", error};
  if (std::none_of(members.begin(), members.end(),
                   [](const auto& member) { return member.id == FLAGS_node_id; })) {
    return {"node_id", "must be one of the ids in --cluster"};
  }
  if (FLAGS_data_dir.empty()) return {"data_dir", "is needed with --cluster"};
  if (!std::filesystem::is_directory(FLAGS_data_dir)) {
    return {"data_dir", "no such directory: " + FLAGS_data_dir};
  }
  if (FLAGS_cluster_secret_file.empty()) {
    return {"cluster_secret_file", "is needed with --cluster: the cluster port must let only "
                                   "members in"};
  }
  if (!FLAGS_user.empty() && lockcached::server::user_exists(FLAGS_user)) {
    std::string stranger = lockcached::server::not_owned_by(FLAGS_user, FLAGS_data_dir);
    if (!stranger.empty()) {
      return {"data_dir", stranger + " is not owned by --user " + FLAGS_user + ": chown -R " +
                              FLAGS_user + " " + FLAGS_data_dir};
    }
  }
  // One way to run a cluster: the leader is the master.
  if (!FLAGS_virtual_ip.empty()) return {"virtual_ip", "cannot be used with --cluster"};
  if (FLAGS_lock_port == 0) return {"lock_port", "cannot be 0 with --cluster"};
  return {};
}

// The file is written at the stop, maybe after weeks: a directory that
// cannot take it is a mistake to report now. (Started as root with --user,
// the user's permission is not known here; the save logs a failure.)
FlagProblem check_memory_file() {
  if (FLAGS_memory_file.empty()) return {};
  std::filesystem::path path(FLAGS_memory_file);
  std::filesystem::path directory = path.parent_path().empty() ? "." : path.parent_path();
  if (!path.has_filename() || std::filesystem::is_directory(path)) {
    return {"memory_file", "must name a file, not a directory: " + FLAGS_memory_file};
  }
  if (!std::filesystem::is_directory(directory)) {
    return {"memory_file", "no such directory: " + directory.string()};
  }
  bool as_other_user = geteuid() == 0 && !FLAGS_user.empty();
  if (!as_other_user && access(directory.c_str(), W_OK | X_OK) != 0) {
    return {"memory_file", "cannot write in " + directory.string() + ": " + strerror(errno)};
  }
  return {};
}

FlagProblem check_flags() {
  if (FLAGS_port < 0 || FLAGS_port > 65535) return {"port", "must be 0..65535"};
  if (FLAGS_lock_port < -1 || FLAGS_lock_port > 65535) return {"lock_port", "must be -1..65535"};
  if (FLAGS_threads < 0 || FLAGS_threads > 1024) return {"threads", "must be 0..1024"};
  if (FLAGS_io != "epoll" && FLAGS_io != "uring") return {"io", "must be epoll or uring"};
  if (FLAGS_uring_sqpoll && FLAGS_io != "uring") return {"uring_sqpoll", "needs --io=uring"};
  if (FLAGS_memory_limit_mb < 1) return {"memory_limit_mb", "must be at least 1"};
  if (FLAGS_v < 0) return {"v", "must be 0 or more"};
  // glog would carry on with every line lost ("COULD NOT CREATE A LOGGINGFILE").
  if (!FLAGS_logtostderr && !FLAGS_log_dir.empty() &&
      access(FLAGS_log_dir.c_str(), W_OK | X_OK) != 0) {
    return {"log_dir", "cannot write to " + FLAGS_log_dir + ": " + std::strerror(errno)};
  }
  if (FLAGS_max_item_size < 1024 || FLAGS_max_item_size > (int64_t{1} << 30)) {
    return {"max_item_size", "must be 1024..1073741824"};
  }
  // memcached's rule (and exit status) for -m 2 -I 4m: such an item could
  // never be stored.
  if (FLAGS_max_item_size > (int64_t{FLAGS_memory_limit_mb} << 20) / 2) {
    return {"max_item_size", "must be at most half of --memory_limit_mb (" +
                                 std::to_string(FLAGS_memory_limit_mb) + " MB)"};
  }
  if (FLAGS_max_connections < 1) return {"max_connections", "must be at least 1"};
  if (FLAGS_lock_max_connections < 1) return {"lock_max_connections", "must be at least 1"};
  if (FLAGS_idle_timeout < 0) return {"idle_timeout", "must be 0 or more"};
  if (FLAGS_listen_backlog < 1) return {"listen_backlog", "must be at least 1"};
  if (FLAGS_max_reqs_per_event < 0) return {"max_reqs_per_event", "must be 0 or more"};
  if (FLAGS_protocol != "auto" && FLAGS_protocol != "ascii" && FLAGS_protocol != "binary") {
    return {"protocol", "must be auto, ascii or binary"};
  }
  if (FLAGS_watch_buffer_kb < 1) return {"watch_buffer_kb", "must be at least 1"};
  if (FLAGS_stats_prefix_delimiter.size() != 1) {
    return {"stats_prefix_delimiter", "must be one character"};
  }
  if (FLAGS_tcp_keepalive < 0 || FLAGS_tcp_keepalive > lockcached::net::kMaxKeepaliveSeconds) {
    return {"tcp_keepalive",
            "must be 0.." + std::to_string(lockcached::net::kMaxKeepaliveSeconds)};
  }
  if (FlagProblem problem = check_listen_flags(); !problem.flag.empty()) return problem;
  if (!FLAGS_virtual_ip.empty() && !lockcached::replication::is_numeric_address(FLAGS_virtual_ip)) {
    return {"virtual_ip", "must be a numeric IPv4 or IPv6 address: " + FLAGS_virtual_ip};
  }
  if (FlagProblem problem = check_virtual_ip_listened(); !problem.flag.empty()) return problem;
  if (FLAGS_repl_port < 1 || FLAGS_repl_port > 65535) return {"repl_port", "must be 1..65535"};
  // A buffer must hold a few of the largest items, or one large set would
  // drop every replica.
  if (FLAGS_repl_buffer_size < 1 || FLAGS_repl_buffer_size > 65536) {
    return {"repl_buffer_size", "must be 1..65536"};
  }
  if (!FLAGS_virtual_ip.empty() &&
      (int64_t{FLAGS_repl_buffer_size} << 20) < 4 * FLAGS_max_item_size) {
    return {"repl_buffer_size", "must hold at least 4 x --max_item_size with --virtual_ip"};
  }
  if (FLAGS_repl_timeout < 2 || FLAGS_repl_timeout > 3600) {
    return {"repl_timeout", "must be 2..3600"};
  }
  if (FlagProblem problem = check_memory_file(); !problem.flag.empty()) return problem;
  if (FlagProblem problem = check_cluster_flags(); !problem.flag.empty()) return problem;
  if (FlagProblem problem = check_tls_flags(); !problem.flag.empty()) return problem;
  if (FLAGS_enable_sasl && FLAGS_auth_file.empty()) {
    return {"enable_sasl", "(memcached's -S) needs --auth_file (-Y): lockcached checks SASL "
                           "PLAIN against that file"};
  }
  if (!FLAGS_user.empty() && !server::user_exists(FLAGS_user)) {
    return {"user", "no such user: " + FLAGS_user};
  }
  return {};
}

// --cluster_secret_file, read at start: its first line, at least 16 bytes.
bool read_cluster_secret(std::string* secret, std::string* error) {
  if (FLAGS_cluster_secret_file.empty()) return true;
  std::ifstream file(FLAGS_cluster_secret_file);
  if (!file || !std::getline(file, *secret)) {
    *error = FLAGS_cluster_secret_file + ": cannot read it";
    return false;
  }
  if (!secret->empty() && secret->back() == '\r') secret->pop_back();
  if (secret->size() < 16) {
    *error = FLAGS_cluster_secret_file + ": the secret must be 16 bytes or more";
    return false;
  }
  return true;
}

lockcached::tls::Settings tls_settings_from_flags() {
  lockcached::tls::Settings tls;
  tls.cert_file = FLAGS_tls_cert_file;
  tls.key_file = FLAGS_tls_key_file;
  tls.ca_file = FLAGS_tls_ca_file;
  tls.verify_client = FLAGS_tls_verify_client;
  tls.min_version = FLAGS_tls_min_version == "1.3" ? lockcached::tls::kTls13 : lockcached::tls::kTls12;
  tls.ciphers = FLAGS_tls_ciphers;
  return tls;
}

server::Settings settings_from_flags(std::shared_ptr<Authenticator> authenticator) {
  server::Settings settings;
  settings.authenticator = std::move(authenticator);
  std::string ignored;  // checked at start
  settings.listen = listen_addresses(&ignored);
  settings.port = static_cast<uint16_t>(FLAGS_port);
  settings.unix_socket = FLAGS_unix_socket;
  settings.unix_socket_mask = unix_socket_mask().value_or(0700);
  settings.lock_port = FLAGS_lock_port;
  settings.threads = FLAGS_threads > 0 ? static_cast<unsigned>(FLAGS_threads)
                                       : std::max(1u, std::thread::hardware_concurrency());
  settings.memory_limit = static_cast<size_t>(FLAGS_memory_limit_mb) << 20;
  settings.max_item_size = static_cast<size_t>(FLAGS_max_item_size);
  settings.memory_file = FLAGS_memory_file;
  settings.io = FLAGS_io == "uring" ? lockcached::net::IoBackend::kUring
                                    : lockcached::net::IoBackend::kEpoll;
  settings.uring.sqpoll = FLAGS_uring_sqpoll;
  // A kernel without io_uring (too old, or turned off by sysctl or seccomp)
  // still gets a working server, and one line that says why it is epoll;
  // one that refuses only SQPOLL gets io_uring without it. Each probe
  // builds a ring: a granted SQPOLL one settles both questions.
  using lockcached::net::Reactor;
  bool uring_granted = false;
  if (std::string why; settings.uring.sqpoll) {
    uring_granted = Reactor::uring_available(settings.uring, &why);
    if (!uring_granted) {
      LOG(WARNING) << "--uring_sqpoll: " << why << "; submitting from the reactor threads";
      settings.uring.sqpoll = false;
    }
  }
  if (std::string why; settings.io == lockcached::net::IoBackend::kUring && !uring_granted &&
                       !Reactor::uring_available(settings.uring, &why)) {
    LOG(WARNING) << "--io=uring: " << why << "; using epoll";
    settings.io = lockcached::net::IoBackend::kEpoll;
  }
  settings.max_connections = FLAGS_max_connections;
  settings.lock_max_connections = FLAGS_lock_max_connections;
  settings.idle_timeout_seconds = FLAGS_idle_timeout;
  settings.listen_backlog = FLAGS_listen_backlog;
  settings.protocol = cache_protocol();
  settings.commands.flush_all = !FLAGS_disable_flush_all;
  settings.commands.dumps = !FLAGS_disable_dumping;
  settings.commands.watch = !FLAGS_disable_watch;
  settings.commands.shutdown = FLAGS_enable_shutdown;
  settings.commands.requests_per_event = static_cast<uint32_t>(FLAGS_max_reqs_per_event);
  settings.cas_enabled = !FLAGS_disable_cas;
  settings.evictions = !FLAGS_disable_evictions;
  settings.lru_crawler = FLAGS_lru_crawler;
  settings.stats_prefix_delimiter = FLAGS_stats_prefix_delimiter[0];
  settings.stats_detail = FLAGS_stats_detail;
  settings.watch_buffer_bytes = static_cast<size_t>(FLAGS_watch_buffer_kb) << 10;
  settings.coredumps_enabled = FLAGS_enable_coredumps;
  settings.tcp_keepalive_seconds = FLAGS_tcp_keepalive;
  settings.lock_service_max_locks_per_session = FLAGS_lock_service_max_locks_per_session;
  settings.lock_service_max_names = FLAGS_lock_service_max_names;
  settings.hash_seed = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  settings.fencing_token_floor = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  settings.cluster = cluster_members(&ignored);
  settings.node_id = FLAGS_node_id;
  settings.cluster_join = FLAGS_cluster_join;
  settings.data_dir = FLAGS_data_dir;
  read_cluster_secret(&settings.cluster_secret, &ignored);
  settings.election_timeout_ms = static_cast<unsigned>(FLAGS_election_timeout_ms);
  settings.virtual_ip = FLAGS_virtual_ip;
  settings.repl_port = static_cast<uint16_t>(FLAGS_repl_port);
  settings.repl_buffer_size = static_cast<size_t>(FLAGS_repl_buffer_size) << 20;
  settings.repl_timeout_seconds = FLAGS_repl_timeout;
  settings.tls = FLAGS_tls;
  settings.tls_port = FLAGS_tls_port;
  settings.lock_tls_port = FLAGS_lock_tls_port;
  settings.tls_files = tls_settings_from_flags();
  settings.tls_handshake_timeout_seconds = FLAGS_tls_handshake_timeout;
  return settings;
}


// Tells systemd (Type=notify in lockcached.service) how the service is
// doing; without $NOTIFY_SOCKET, i.e. not under systemd, it does nothing.
void notify_service_manager(const std::string& state) {
#ifdef LOCKCACHED_WITH_SYSTEMD
  if (int result = sd_notify(0, state.c_str()); result < 0) {
    LOG(WARNING) << "sd_notify(" << state << "): " << strerror(-result);
  }
#else
  if (std::getenv("NOTIFY_SOCKET") != nullptr && state.starts_with("READY=1")) {
    LOG(ERROR) << "NOTIFY_SOCKET is set but lockcached was built without libsystemd: "
                  "systemd will not learn that it is ready";
  }
#endif
}

// --auth_file, read at start: a bad file stops the server as a bad flag
// does. nullptr without the flag.
std::shared_ptr<Authenticator> load_auth_file(std::string* error) {
  if (FLAGS_auth_file.empty()) return nullptr;
  auto authenticator = std::make_shared<Authenticator>();
  if (!authenticator->load(FLAGS_auth_file, error)) return nullptr;
  return authenticator;
}

// The command line made strict: memcached's options translated, flagfiles
// read, every flag checked, the auth file loaded into *authenticator.
// Returns the translated arguments (what SIGHUP walks again), or exits: 64
// with one line for a mistake, 0 after --help or --version.
std::vector<std::string> load_configuration(int argc, char** argv,
                                            std::shared_ptr<Authenticator>* authenticator) {
  auto usage_error = [](const std::string& message) {
    std::cerr << "lockcached: " << message << "\n";
    std::exit(kUsageError);
  };
  // gflags takes "-name" as well as "--name"; memcached's short options
  // must leave those alone.
  config::FlagRegistry registry = config::gflags_registry();
  config::TranslatedCommandLine command_line = config::translate_memcached_options(
      {argv, argv + argc},
      [&](std::string_view name) { return config::names_flag(registry, name); });
  if (!command_line.error.empty()) usage_error(command_line.error);
  config::LoadedFlags loaded = config::load_flags(command_line.args, registry);
  if (!loaded.error.empty()) usage_error(loaded.error);
  if (loaded.info_request == "version") {
    std::cout << "lockcached " << LOCKCACHED_VERSION << "\n";
    std::exit(EXIT_SUCCESS);
  }
  if (loaded.info_request == "license") {  // memcached's -i
    std::cout << "lockcached " << LOCKCACHED_VERSION << "\n\n" << kLicenseText;
    std::exit(EXIT_SUCCESS);
  }
  if (loaded.info_request == "help") {
    std::cout << config::usage_text(kUsageIntro, kFlagGroups, kUsageOutro,
                                    {{"v", "Logging detail: 1 logs connections opening and "
                                           "closing, 2 every request too (memcached's -v, -vv; "
                                           "SIGHUP re-reads it)"}});
    std::exit(EXIT_SUCCESS);
  }
  if (loaded.info_request == "helpfull") {
    gflags::ShowUsageWithFlags(argv[0]);
    std::exit(EXIT_SUCCESS);
  }
  if (std::string warning = follow_cache_port(); !warning.empty()) {
    command_line.warnings.push_back(warning);
  }
  if (FlagProblem problem = check_flags(); !problem.flag.empty()) {
    std::string origin = loaded.origin_of(problem.flag);
    usage_error("--" + problem.flag + ": " + problem.message +
                (origin.empty() ? "" : " (" + origin + ")"));
  }
  // Inherited by the daemon -d forks, and checked before it: a limit that
  // allows no core file stops the start as memcached's -r does.
  if (std::string error; FLAGS_enable_coredumps && !server::enable_core_dumps(&error)) {
    usage_error("--enable_coredumps: " + error);
  }
  if (std::string error; !(*authenticator = load_auth_file(&error)) && !error.empty()) {
    usage_error("--auth_file: " + error);
  }
  if (std::string secret, error; !read_cluster_secret(&secret, &error)) {
    usage_error("--cluster_secret_file: " + error);
  }
  // Certificate, key and CA files that do not load are a configuration
  // mistake like a bad flag (memcached exits 64 for them too); the server
  // loads them again when it starts, and at SIGHUP.
  if (std::string error;
      tls_enabled() && !lockcached::tls::Context::load(tls_settings_from_flags(), &error)) {
    usage_error("TLS: " + error);
  }
  for (const std::string& warning : command_line.warnings)
    std::cerr << "lockcached: warning: " << warning << "\n";
  std::string ignored;  // checked above
  std::vector<server::ListenAddress> addresses = listen_addresses(&ignored);
  if (!FLAGS_unix_socket.empty() &&
      (!is_default("port") || std::any_of(addresses.begin(), addresses.end(), [](auto& address) {
        return address.port != server::ListenAddress::kDefaultPort;
      }))) {
    std::cerr << "lockcached: warning: --port and the ports of --listen are not used: "
                 "--unix_socket serves the memcached protocols instead of TCP (memcached's -s)\n";
  }
  return command_line.args;
}

// SIGHUP: walk the command line and its flagfiles again and apply what can
// change while serving. A mistake in the file is logged and changes nothing.
void reload(server::Server& server, const std::vector<std::string>& args,
            Authenticator* authenticator) {
  // The same file (its name is not re-read); a bad one keeps the old users.
  if (std::string error; authenticator && !authenticator->reload(&error)) {
    LOG(ERROR) << "SIGHUP: --auth_file unchanged: " << error;
  } else if (authenticator) {
    LOG(INFO) << "SIGHUP: --auth_file re-read: " << authenticator->users() << " users";
  }
  config::CollectedFlags collected = config::collect_flags(args, config::gflags_registry());
  if (!collected.error.empty()) {
    LOG(ERROR) << "SIGHUP: configuration unchanged: " << collected.error;
    return;
  }
  int memory_limit_mb = FLAGS_memory_limit_mb;
  int idle_timeout = server.idle_timeout();
  int verbosity = lockcached::core::log_verbosity.load(std::memory_order_relaxed);
  for (const auto& [name, value, origin] : collected.settings) {
    int* target = name == "memory_limit_mb" ? &memory_limit_mb
                  : name == "idle_timeout"  ? &idle_timeout
                  : name == "v"             ? &verbosity
                                            : nullptr;
    if (target == nullptr) continue;
    char* end = nullptr;
    long parsed = std::strtol(value.c_str(), &end, 10);
    int minimum = name == "memory_limit_mb" ? 1 : 0;
    if (value.empty() || *end != '\0' || parsed < minimum || parsed > INT32_MAX) {
      LOG(ERROR) << "SIGHUP: configuration unchanged: bad value '" << value << "' for --"
                 << name << " (" << origin << ")";
      return;
    }
    *target = static_cast<int>(parsed);
  }
  if (memory_limit_mb != FLAGS_memory_limit_mb) {
    LOG(INFO) << "SIGHUP: --memory_limit_mb " << FLAGS_memory_limit_mb << " -> "
              << memory_limit_mb;
    FLAGS_memory_limit_mb = memory_limit_mb;
    server.set_memory_limit(static_cast<size_t>(memory_limit_mb) << 20);
  }
  if (idle_timeout != server.idle_timeout()) {
    LOG(INFO) << "SIGHUP: --idle_timeout " << server.idle_timeout() << " -> " << idle_timeout;
    server.set_idle_timeout(idle_timeout);
  }
  if (verbosity != lockcached::core::log_verbosity.load(std::memory_order_relaxed)) {
    LOG(INFO) << "SIGHUP: --v " << lockcached::core::log_verbosity.load() << " -> " << verbosity;
    lockcached::core::log_verbosity.store(verbosity, std::memory_order_relaxed);
  }
  // The files behind --tls_cert_file, --tls_key_file and --tls_ca_file may
  // be new (a renewed certificate); their names are not re-read.
  if (std::string error; tls_enabled()) server.refresh_certs(&error);
  LOG(INFO) << "SIGHUP: configuration re-read; other flags take effect at the next start";
}

// Serves until a stop signal, which it returns; SIGHUP reloads. Signals are
// blocked in every thread (see main), so they arrive here and nowhere else,
// and the default actions that would kill the process without flushing the
// log never run.
int serve_until_stopped(server::Server& server, const std::vector<std::string>& args,
                        Authenticator* authenticator, const sigset_t& signals) {
  for (;;) {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    if (signal_number == SIGHUP) {
      reload(server, args, authenticator);
      google::FlushLogFiles(google::GLOG_INFO);
      continue;
    }
    LOG(INFO) << "Got " << strsignal(signal_number)
              << (signal_number == SIGUSR1 ? " (graceful shutdown)" : "") << ", shutting down";
    return signal_number;
  }
}

// memcached's rule: only a graceful stop (SIGUSR1) keeps the cache for the
// next start; SIGTERM and SIGINT stop without writing it.
void save_cache(server::Server& server, int stop_signal) {
  if (FLAGS_memory_file.empty()) return;
  if (stop_signal == SIGUSR1) {
    server.save_memory_file();
  } else {
    LOG(INFO) << "--memory_file " << FLAGS_memory_file << " not written: only SIGUSR1 keeps "
              << "the cache, the next start is cold";
  }
}

}  // namespace

int main(int argc, char** argv) {
  // glog converts every message's time with mktime(). With TZ unset, glibc
  // then frees and re-reads its zone for each call, from whichever thread
  // logs: a waste per message, and a race ThreadSanitizer reports (glibc's
  // own lock is invisible to it). Naming the zone it would use anyway makes
  // every call after the first a string compare. A TZ already set wins.
  setenv("TZ", ":/etc/localtime", /*overwrite=*/0);
  // A service logs to stderr (the journal under systemd) unless told otherwise.
  gflags::SetCommandLineOptionWithMode("logtostderr", "true", gflags::SET_FLAGS_DEFAULT);
  gflags::SetVersionString(LOCKCACHED_VERSION);
  // Blocked from the first instant, in every thread that will start (they
  // inherit the mask): a SIGHUP during start-up must not kill the server.
  sigset_t signals;
  sigemptyset(&signals);
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP, SIGUSR1})
    sigaddset(&signals, signal_number);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::shared_ptr<Authenticator> authenticator;
  std::vector<std::string> args = load_configuration(argc, argv, &authenticator);
  google::InitGoogleLogging(argv[0]);
  lockcached::core::log_verbosity.store(FLAGS_v, std::memory_order_relaxed);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // A crash (SIGSEGV, SIGABRT, ...) flushes the buffered log lines and
  // writes a stack trace. Not under a sanitizer, whose own report must win.
  google::InstallFailureSignalHandler();
#endif

  // Before any thread starts: fork copies only this one.
  server::Daemon daemon;
  if (std::string error; FLAGS_daemonize && !daemon.detach(&error)) {
    LOG(ERROR) << "cannot daemonize: " << error;
    return kStartFailure;
  }
  auto fail = [&](int status) {
    google::FlushLogFiles(google::GLOG_INFO);
    daemon.failed(status);
    return status;
  };
  // After the fork: mlockall is not inherited.
  bool memory_locked = false;
  if (std::string why_not; FLAGS_lock_memory) {
    memory_locked = server::lock_all_memory(!FLAGS_user.empty() && geteuid() == 0, &why_not);
    LOG_IF(WARNING, !memory_locked) << "--lock_memory (-k): memory not locked: " << why_not;
  }
  unsigned long wanted_fds = static_cast<unsigned long>(FLAGS_max_connections) +
                             static_cast<unsigned long>(FLAGS_lock_max_connections) + 64;
  if (unsigned long got = server::raise_descriptor_limit(wanted_fds); got < wanted_fds) {
    LOG(WARNING) << "open files limited to " << got
                 << ": fewer connections than --max_connections plus --lock_max_connections "
                    "will be accepted";
  }
  server::Settings settings = settings_from_flags(authenticator);
  settings.memory_locked = memory_locked;
  server::Server server(settings);
  std::string error;
  if (bool configuration_error = false; !server.start(&error, &configuration_error)) {
    LOG(ERROR) << "cannot start: " << error;
    return fail(configuration_error ? kUsageError : kStartFailure);
  }
  server::PidFile pid_file;
  if (!pid_file.write(FLAGS_pid_file, &error)) {
    LOG(ERROR) << "cannot start: " << error;
    server.stop();
    return fail(kStartFailure);
  }
  if (FLAGS_user.empty() && geteuid() == 0) {
    LOG(WARNING) << "running as root; use --user to drop privileges";
  } else if (!FLAGS_user.empty() &&
             ((!FLAGS_unix_socket.empty() &&
               !server::give_to_user(FLAGS_unix_socket, FLAGS_user, &error)) ||
              !server::drop_privileges(FLAGS_user, &error))) {
    LOG(ERROR) << "cannot start: " << error;
    server.stop();
    return fail(kStartFailure);
  }
  // Linux stops a process that changed its user from dumping core; -r
  // asked for core files.
  if (FLAGS_enable_coredumps && !FLAGS_user.empty()) prctl(PR_SET_DUMPABLE, 1);
  LOG(INFO) << "lockcached " << LOCKCACHED_VERSION << " ready";
  std::string status = "STATUS=memcached protocols on " +
                       (FLAGS_unix_socket.empty() ? "port " + std::to_string(server.port())
                                                  : "unix:" + FLAGS_unix_socket);
  if (server.lock_port() != 0) status += ", lock service on " + std::to_string(server.lock_port());
  notify_service_manager("READY=1\n" + status);
  daemon.ready(/*keep_output=*/FLAGS_v > 0);

  int stop_signal = serve_until_stopped(server, args, authenticator.get(), signals);
  notify_service_manager("STOPPING=1");
  server.stop();
  save_cache(server, stop_signal);
  LOG(INFO) << "stopped";
  google::FlushLogFiles(google::GLOG_INFO);
  return EXIT_SUCCESS;
}
