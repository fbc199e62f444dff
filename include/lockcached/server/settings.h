// Everything configurable, filled in by main from the command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockcached/consensus/raft_node.h"
#include "lockcached/core/auth.h"
#include "lockcached/core/command_policy.h"
#include "lockcached/net/reactor.h"
#include "lockcached/server/listen_address.h"
#include "lockcached/tls/context.h"

namespace lockcached::server {

constexpr int kPortOff = 0;  // a port setting that turns its port off
constexpr int kLockServiceOff = kPortOff;
constexpr int kAnyFreePort = -1;

// Which protocol a listening port speaks.
enum class PortKind { kCache, kLockService };

// What a cache connection may speak (memcached's -B): by its first byte
// (kAuto), or only the one.
enum class CacheProtocol : uint8_t { kAuto, kText, kBinary };

struct Settings {
  // --listen: each address serves the memcached protocols on its own port
  // or `port`; the other ports listen once on each host.
  std::vector<ListenAddress> listen{{"0.0.0.0", ListenAddress::kDefaultPort, false, "0.0.0.0"}};
  uint16_t port = 11211;  // 0: any free port (tests)
  // --unix_socket (memcached's -s): the memcached protocols on this
  // unix-domain socket, and on no TCP port; empty: none. Its file's mode
  // (memcached's -a).
  std::string unix_socket;
  unsigned unix_socket_mask = 0700;
  int lock_port = 11400;  // the named-lock service; kLockServiceOff, kAnyFreePort
  unsigned threads = 4;
  // The client connections' I/O; kUring only where Reactor::uring_available().
  net::IoBackend io = net::IoBackend::kEpoll;
  net::UringOptions uring;  // with kUring; sqpoll only where the kernel grants it
  // With --io=auto: which backend it took and why, logged once the server
  // is up (a configuration error stays the start's one line).
  std::string io_choice;
  size_t memory_limit = size_t{1024} << 20;
  size_t max_item_size = size_t{1} << 20;
  int max_connections = 4096;       // on the cache port
  int lock_max_connections = 1024;  // on the lock port: its own budget, so that
                                    // cache load never locks operators out
  int idle_timeout_seconds = 0;     // close connections idle this long; 0: never
  int listen_backlog = 1024;        // each listening socket's (memcached's -b)
  CacheProtocol protocol = CacheProtocol::kAuto;
  // memcached's -F, -X, -W, -A and -R.
  core::CommandPolicy commands;
  bool cas_enabled = true;  // memcached's -C turns it off
  bool evictions = true;    // memcached's -M turns it off
  // The expiry crawler runs from the start (memcached's -o no_lru_crawler
  // turns it off; `lru_crawler enable|disable` switch it while serving).
  bool lru_crawler = true;
  // Each `watch` connection's buffer (memcached's -o watcher_logbuf_size).
  size_t watch_buffer_bytes = size_t{256} << 10;
  // `stats detail`: the prefix delimiter, and whether counting starts on
  // (memcached's -D sets both).
  char stats_prefix_delimiter = ':';
  bool stats_detail = false;
  // What main did to the process before the server started: memcached's
  // -k (all memory locked) and -r (core files as large as allowed).
  bool memory_locked = false;
  bool coredumps_enabled = false;
  // Close a client connection whose peer stopped answering for about this
  // long (net::keepalive_times); 0: never look.
  int tcp_keepalive_seconds = 15;
  // Named-lock service bounds (locks::LockLimits); 0: none.
  size_t lock_service_max_locks_per_session = 10000;
  size_t lock_service_max_names = 1000000;
  uint64_t hash_seed = 0;
  // Fencing tokens start above this; main sets the start time in
  // microseconds since the Unix epoch (docs/lock-service.md).
  uint64_t fencing_token_floor = 0;
  // A Raft cluster (docs/high-availability.md); empty: a single server.
  std::vector<consensus::Member> cluster;
  uint64_t node_id = 0;
  std::string data_dir;
  std::string cluster_secret;  // from --cluster_secret_file
  bool cluster_join = false;   // an empty data_dir waits to be added
  unsigned election_timeout_ms = 1000;
  // Replication (docs/high-availability.md); empty: none, a single server.
  std::string virtual_ip;
  uint16_t repl_port = 11213;
  size_t repl_buffer_size = size_t{30} << 20;  // per replica, on the master
  int repl_timeout_seconds = 10;
  // TLS (docs/security.md). `tls`: `port` and `lock_port` speak TLS;
  // `tls_port`, `lock_tls_port`: further ports that do, next to plain ones
  // (kPortOff: none; kAnyFreePort).
  bool tls = false;
  int tls_port = kPortOff;
  int lock_tls_port = kPortOff;
  tls::Settings tls_files;
  // tls_files as config::load loaded them, to start with; nullptr: start()
  // loads them.
  std::shared_ptr<const tls::Context> tls_context;
  int tls_handshake_timeout_seconds = 10;
  // A warm restart (memcached's -e): the cache is saved here at a graceful
  // stop and loaded at start (replication/memory_file.h); empty: never.
  std::string memory_file;
  // --auth_file, loaded (docs/authentication.md); nullptr: no authentication.
  // Server::reload reloads it in place (SIGHUP).
  std::shared_ptr<core::Authenticator> authenticator;
  bool tls_enabled() const { return tls || tls_port != kPortOff || lock_tls_port != kPortOff; }
};

// What a SIGHUP changes of the settings while the server runs
// (config::reloaded): each value the flagfile changed; nullopt: it stays.
struct RunTimeChanges {
  std::optional<size_t> memory_limit;
  std::optional<int> idle_timeout_seconds;
  std::optional<int> verbosity;  // core::log_verbosity
};

}  // namespace lockcached::server
