// The text of `stats` and its groups, from plain inputs. Server gathers its
// state (counters, the store's numbers, the connection list, replication
// and cluster status) and hands it over; what is shown, and in what words
// and order, is decided here alone. memcached's names, order and forms
// where it has them (the end-to-end tests compare them side by side), then
// ours.
#pragma once

#include <sys/time.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lockcached/consensus/raft_node.h"
#include "lockcached/core/stats.h"
#include "lockcached/core/watch.h"
#include "lockcached/replication/node.h"
#include "lockcached/server/connection_status.h"
#include "lockcached/server/settings.h"
#include "lockcached/store/store.h"

namespace lockcached::server {

// `stats`, the general group: the numbers of the moment.
struct GeneralSample {
  int64_t pid = 0;
  int64_t now_unix = 0;
  int64_t started_unix = 0;
  timeval user_cpu{};  // getrusage's
  timeval system_cpu{};
  int cache_connections = 0;  // open now
  int lock_connections = 0;
  uint64_t total_connections = 0;  // since the start or the last `stats reset`
  uint64_t rejected_connections = 0;
  core::CounterValues counters;  // every worker's, less the last `stats reset`
  store::StoreStats store;
  bool idle_timeout = false;  // connections can idle out now (SIGHUP may change it)
  struct Tls {
    uint64_t handshake_errors = 0;
    int64_t certificates_loaded_unix = 0;
  };
  std::optional<Tls> tls;  // with a TLS port
  core::WatchStats watch;
  std::optional<replication::NodeStatus> replication;  // with --virtual_ip or --cluster
};
void report_general(const Settings& settings, const GeneralSample& sample, core::StatList& out);

// `stats settings`: what the Settings alone do not say.
struct SettingsSample {
  store::StoreStats store;  // the memory limit now (SIGHUP may change it), the shards
  // The ports bound (a setting of 0 is the port the kernel picked).
  uint16_t port = 0;
  uint16_t lock_port = 0;
  uint16_t tls_port = 0;
  uint16_t lock_tls_port = 0;
  // What may change while the server runs.
  int verbosity = 0;
  int idle_timeout_seconds = 0;
  char stat_key_prefix = ':';
  bool detail_enabled = false;
  bool lru_crawler = false;
};
void report_settings(const Settings& settings, const SettingsSample& sample, core::StatList& out);

// `stats conns`, as memcached 1.6 prints it (addr, listen_addr, state,
// secs_since_last_cmd per socket), with the connection id where memcached
// has the file descriptor (the id is also the owner of its cache locks),
// and two lines of ours: protocol and locks_held. `locks_held`: cache and
// lock-service locks by connection id; `asking`: the connection that asks,
// which is executing the command; `now_ms`: the monotonic clock.
void report_connections(const std::vector<ConnectionStatus>& connections,
                        const std::unordered_map<uint64_t, size_t>& locks_held, uint64_t asking,
                        int64_t now_ms, core::StatList& out);

// `stats cachelocks [PREFIX]`: "STAT <key> <holder id> <holder address>
// <seconds held>", by key; a key that is no valid text key comes
// base64-encoded with " b" after the seconds, as `keys` lists it. A lock
// whose holder is not among `connections` is left out: it has closed, and
// released its locks before it left. `now`: the store's clock.
void report_cache_locks(std::vector<store::LockedItem> locked,
                        const std::vector<ConnectionStatus>& connections, store::RelTime now,
                        core::StatList& out);

// `stats cluster`: this member's view of the Raft cluster; nullopt: no
// cluster.
struct ClusterSample {
  consensus::RaftStatus status;
  std::string leader_lock_service;  // "HOST:PORT", empty while unknown
};
void report_cluster(const std::optional<ClusterSample>& cluster, core::StatList& out);

// `stats replication`: the role, then per replica (a master's) or the link
// (a replica's), named as memcached names per-class stats ("items:1:...");
// nullopt: the cache is not replicated.
struct ReplicationSample {
  replication::NodeStatus status;
  std::string virtual_ip;  // the node's
  uint16_t repl_port = 0;
};
void report_replication(const std::optional<ReplicationSample>& replication, core::StatList& out);

}  // namespace lockcached::server
