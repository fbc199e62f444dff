// lockcached's flags: gflags' definitions (the defaults and what --help
// and --helpfull say of each), then the table that says the rest of each
// (flags.h).
#include "lockcached/config/flags.h"

#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>

#include <glog/logging.h>

#include "lockcached/config/checks.h"
#include "lockcached/net/socket.h"

DEFINE_int32(port, 11211, "TCP port of the memcached protocols (0: any free port)");
DEFINE_int32(lock_port, 11400,
             "TCP port of the named-lock service (0: off, -1: any free port). Not given, it "
             "follows the cache port (--port, or the port every --listen address gives, the "
             "first's): plus 189 (11211: 11400), any free port with port 0, off above 65346 and "
             "with --unix_socket; so instances on different cache ports each get their own");
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
DEFINE_string(io, "auto",
              "Client I/O backend: auto (io_uring where the kernel allows it, epoll where it "
              "does not; one log line says which and why), uring (io_uring: a loop turn's "
              "receives and sends in one system call; falls back to epoll, with a warning, "
              "where the kernel refuses io_uring), or epoll");
DEFINE_bool(uring_sqpoll, false,
            "With io_uring (--io=uring, or auto where it picks io_uring): a kernel thread per "
            "reactor thread takes the submissions "
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
DEFINE_bool(disable_flush_all, false, "Refuse flush_all, text and binary (memcached's -F)");
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

namespace lockcached::config {
namespace {

// --help's groups, in its order.
constexpr std::string_view kPorts = "Ports and addresses";
constexpr std::string_view kMemory = "Memory";
constexpr std::string_view kConnections = "Connections and threads";
constexpr std::string_view kCommands = "Commands (memcached's -C -F -X -W -A -D)";
constexpr std::string_view kLockService = "Named-lock service";
constexpr std::string_view kCluster = "Cluster (Raft)";
constexpr std::string_view kReplication = "Replication";
constexpr std::string_view kTls = "TLS";
constexpr std::string_view kAuthentication = "Authentication";
constexpr std::string_view kProcess = "Process";
constexpr std::string_view kLogging = "Logging (glog)";

constexpr Reload kAtStart = Reload::kAtStart;
constexpr Reload kOnSighup = Reload::kOnSighup;
// Also for the flags whose text is parsed (parsed_flags.h): their parse
// is their check, made once.
const Check kAny;

// Built at the first call, not at static initialization: glog's string
// flags are references that its own library sets up.
std::vector<Flag> make_table() {
  return {
      {"port", &FLAGS_port, kPorts, between(0, 65535), kAtStart, "-p"},
      {"lock_port", &FLAGS_lock_port, kPorts, between(-1, 65535)},
      {"listen", &FLAGS_listen, kPorts, kAny, kAtStart, "-l"},
      {"unix_socket", &FLAGS_unix_socket, kPorts, text_check(unix_socket_problem), kAtStart, "-s"},
      {"unix_socket_mask", &FLAGS_unix_socket_mask, kPorts, kAny, kAtStart, "-a"},
      {"listen_backlog", &FLAGS_listen_backlog, kPorts, at_least(1), kAtStart, "-b"},

      {"memory_limit_mb", &FLAGS_memory_limit_mb, kMemory, at_least(1), kOnSighup, "-m"},
      {"max_item_size", &FLAGS_max_item_size, kMemory, between(1024, int64_t{1} << 30), kAtStart,
       "-I"},
      {"memory_file", &FLAGS_memory_file, kMemory, kAny, kAtStart, "-e"},
      {"disable_evictions", &FLAGS_disable_evictions, kMemory, kAny, kAtStart, "-M"},
      {"lru_crawler", &FLAGS_lru_crawler, kMemory, kAny, kAtStart, "-o lru_crawler"},
      {"lock_memory", &FLAGS_lock_memory, kMemory, kAny, kAtStart, "-k"},

      {"max_connections", &FLAGS_max_connections, kConnections, at_least(1), kAtStart, "-c"},
      {"lock_max_connections", &FLAGS_lock_max_connections, kConnections, at_least(1)},
      {"idle_timeout", &FLAGS_idle_timeout, kConnections, at_least(0), kOnSighup,
       "-o idle_timeout"},
      {"tcp_keepalive", &FLAGS_tcp_keepalive, kConnections, between(0, net::kMaxKeepaliveSeconds)},
      {"threads", &FLAGS_threads, kConnections, between(0, 1024), kAtStart, "-t"},
      {"io", &FLAGS_io, kConnections, one_of({"auto", "epoll", "uring"})},
      {"uring_sqpoll", &FLAGS_uring_sqpoll, kConnections},
      {"max_reqs_per_event", &FLAGS_max_reqs_per_event, kConnections, at_least(0), kAtStart, "-R"},
      {"protocol", &FLAGS_protocol, kConnections, one_of({"auto", "ascii", "binary"}), kAtStart,
       "-B"},

      {"disable_cas", &FLAGS_disable_cas, kCommands, kAny, kAtStart, "-C"},
      {"disable_flush_all", &FLAGS_disable_flush_all, kCommands, kAny, kAtStart, "-F"},
      {"disable_dumping", &FLAGS_disable_dumping, kCommands, kAny, kAtStart, "-X"},
      {"disable_watch", &FLAGS_disable_watch, kCommands, kAny, kAtStart, "-W"},
      {"enable_shutdown", &FLAGS_enable_shutdown, kCommands, kAny, kAtStart, "-A"},
      {"stats_prefix_delimiter", &FLAGS_stats_prefix_delimiter, kCommands,
       text_check(one_character_problem), kAtStart, "-D"},
      {"stats_detail", &FLAGS_stats_detail, kCommands, kAny, kAtStart, "-D"},
      {"watch_buffer_kb", &FLAGS_watch_buffer_kb, kCommands, at_least(1), kAtStart,
       "-o watcher_logbuf_size"},

      {"lock_service_max_locks_per_session", &FLAGS_lock_service_max_locks_per_session,
       kLockService},
      {"lock_service_max_names", &FLAGS_lock_service_max_names, kLockService},

      {"cluster", &FLAGS_cluster, kCluster},
      {"node_id", &FLAGS_node_id, kCluster},
      {"data_dir", &FLAGS_data_dir, kCluster},
      {"cluster_secret_file", &FLAGS_cluster_secret_file, kCluster},
      {"cluster_join", &FLAGS_cluster_join, kCluster},
      {"election_timeout_ms", &FLAGS_election_timeout_ms, kCluster, between(100, 60000)},

      {"virtual_ip", &FLAGS_virtual_ip, kReplication, text_check(virtual_ip_problem)},
      {"repl_port", &FLAGS_repl_port, kReplication, between(1, 65535)},
      {"repl_buffer_size", &FLAGS_repl_buffer_size, kReplication, between(1, 65536)},
      {"repl_timeout", &FLAGS_repl_timeout, kReplication, between(2, 3600)},

      {"tls", &FLAGS_tls, kTls, kAny, kAtStart, "-Z"},
      {"tls_port", &FLAGS_tls_port, kTls, between(-1, 65535)},
      {"lock_tls_port", &FLAGS_lock_tls_port, kTls, between(-1, 65535)},
      {"tls_cert_file", &FLAGS_tls_cert_file, kTls, kAny, kAtStart, "-o ssl_chain_cert"},
      {"tls_key_file", &FLAGS_tls_key_file, kTls, kAny, kAtStart, "-o ssl_key"},
      {"tls_ca_file", &FLAGS_tls_ca_file, kTls, kAny, kAtStart, "-o ssl_ca_cert"},
      {"tls_verify_client", &FLAGS_tls_verify_client, kTls, kAny, kAtStart, "-o ssl_verify_mode"},
      {"tls_min_version", &FLAGS_tls_min_version, kTls, one_of({"1.2", "1.3"}), kAtStart,
       "-o ssl_min_version"},
      {"tls_ciphers", &FLAGS_tls_ciphers, kTls, kAny, kAtStart, "-o ssl_ciphers"},
      {"tls_handshake_timeout", &FLAGS_tls_handshake_timeout, kTls, between(1, 3600)},

      {"auth_file", &FLAGS_auth_file, kAuthentication, kAny, kAtStart, "-Y"},
      {"enable_sasl", &FLAGS_enable_sasl, kAuthentication, kAny, kAtStart, "-S"},

      {"flagfile", std::monostate{}, kProcess},
      {"user", &FLAGS_user, kProcess, text_check(user_problem), kAtStart, "-u"},
      {"daemonize", &FLAGS_daemonize, kProcess, kAny, kAtStart, "-d"},
      {"pid_file", &FLAGS_pid_file, kProcess, kAny, kAtStart, "-P"},
      {"enable_coredumps", &FLAGS_enable_coredumps, kProcess, kAny, kAtStart, "-r"},

      {"logtostderr", &FLAGS_logtostderr, kLogging},
      {"log_dir", &FLAGS_log_dir, kLogging},
      {"v", &FLAGS_v, kLogging, at_least(0), kOnSighup, "-v",
       "Logging detail: 1 logs connections opening and closing, 2 every request too "
       "(memcached's -v, -vv; SIGHUP re-reads it)"},
      {"logbufsecs", &FLAGS_logbufsecs, kLogging},
  };
}

}  // namespace

std::span<const Flag> flags() {
  static const std::vector<Flag> table = make_table();
  return table;
}

const Flag* find_flag(std::string_view name) {
  std::span<const Flag> all = flags();
  auto found =
      std::find_if(all.begin(), all.end(), [&](const Flag& flag) { return flag.name == name; });
  return found == all.end() ? nullptr : &*found;
}

const Flag* flag_spelled(std::string_view option) {
  std::span<const Flag> all = flags();
  auto found = std::find_if(all.begin(), all.end(),
                            [&](const Flag& flag) { return flag.memcached == option; });
  return found == all.end() ? nullptr : &*found;
}

Value value_of(const Flag& flag) {
  struct Read {
    Value operator()(std::monostate) const { return std::string(); }
    Value operator()(const bool* value) const { return *value; }
    Value operator()(const int32_t* value) const { return int64_t{*value}; }
    Value operator()(const int64_t* value) const { return *value; }
    Value operator()(const uint64_t* value) const { return *value; }
    Value operator()(const std::string* value) const { return *value; }
  };
  return std::visit(Read{}, flag.storage);
}

// gflags' FlagValue::ParseFrom, to the letter: a bool is one of 1 t true y
// yes / 0 f false n no (any case); a number is the whole text, in base 16
// after a leading 0x, else 10, in its type's range, an unsigned one without
// a minus sign; the empty text is a string's alone.
std::optional<Value> value_from_text(std::string_view name, const std::string& text) {
  gflags::CommandLineFlagInfo info;
  if (!gflags::GetCommandLineFlagInfo(std::string(name).c_str(), &info)) return std::nullopt;
  const std::string& type = info.type;
  if (type == "string") return text;
  if (type == "bool") {
    for (const char* yes : {"1", "t", "true", "y", "yes"}) {
      if (strcasecmp(text.c_str(), yes) == 0) return true;
    }
    for (const char* no : {"0", "f", "false", "n", "no"}) {
      if (strcasecmp(text.c_str(), no) == 0) return false;
    }
    return std::nullopt;
  }
  if (text.empty()) return std::nullopt;
  const char* start = text.c_str();
  const char* whole_end = start + text.size();
  int base = text.size() >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X') ? 16 : 10;
  char* end = nullptr;
  errno = 0;
  if (type == "int32" || type == "int64") {
    long long parsed = std::strtoll(start, &end, base);
    if (errno != 0 || end != whole_end) return std::nullopt;
    if (type == "int32" && static_cast<int32_t>(parsed) != parsed) return std::nullopt;
    return int64_t{parsed};
  }
  if (type == "uint32" || type == "uint64") {
    while (*start == ' ')
      ++start;
    if (*start == '-') return std::nullopt;
    unsigned long long parsed = std::strtoull(start, &end, base);
    if (errno != 0 || end != whole_end) return std::nullopt;
    if (type == "uint32" && static_cast<uint32_t>(parsed) != parsed) return std::nullopt;
    return uint64_t{parsed};
  }
  if (type == "double") {
    std::strtod(start, &end);
    if (errno != 0 || end != whole_end) return std::nullopt;
    return text;
  }
  return std::nullopt;
}

bool is_bool(const Flag& flag) {
  return std::holds_alternative<bool*>(flag.storage);
}

bool is_default(std::string_view name) {
  return gflags::GetCommandLineFlagInfoOrDie(std::string(name).c_str()).is_default;
}

}  // namespace lockcached::config
