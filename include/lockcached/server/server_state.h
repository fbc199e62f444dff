// What all reactor threads share: the settings, the store and the
// process-wide connection counters. Owned by Server, one per process.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <memory>
#include <mutex>

#include "lockcached/consensus/membership.h"
#include "lockcached/core/watch.h"
#include "lockcached/locks/coordinator.h"
#include "lockcached/locks/lock_service.h"
#include "lockcached/server/settings.h"
#include "lockcached/store/clock.h"
#include "lockcached/store/store.h"
#include "lockcached/tls/context.h"

namespace lockcached::server {

struct ServerState {
  explicit ServerState(const Settings& config)
      : settings(config),
        watch(config.watch_buffer_bytes),
        store({config.memory_limit, config.max_item_size, config.hash_seed, 0, config.cas_enabled,
               config.evictions},
              clock),
        tls(config.tls_enabled()
                ? std::make_unique<tls::ServerContext>(config.tls_files, config.tls_context)
                : nullptr),
        idle_timeout_seconds(config.idle_timeout_seconds) {
    store.set_eviction_observer(&watch);
  }

  // Open connections per port, each against its own limit.
  std::atomic<int>& open_connections(PortKind kind) {
    return kind == PortKind::kCache ? cache_connections : lock_connections;
  }
  int connection_limit(PortKind kind) const {
    return kind == PortKind::kCache ? settings.max_connections : settings.lock_max_connections;
  }

  locks::LockLimits lock_limits() const {
    return {settings.lock_service_max_locks_per_session, settings.lock_service_max_names};
  }
  // Where new lock-service connections send their changes (Server::start
  // sets it first). A single server has one for its whole life; a node
  // replicated by --virtual_ip gets a new one each time it changes role
  // (server.cc), and closes the connections of the old one.
  std::shared_ptr<locks::Coordinator> lock_coordinator() const {
    std::lock_guard lock(lock_service_mutex_);
    return lock_coordinator_;
  }
  std::shared_ptr<locks::LockService> lock_service() const {
    return lock_coordinator()->shared_service();
  }
  // Retires the current one's service (its connections confirm nothing
  // more) and gives new connections `coordinator`.
  void set_lock_coordinator(std::shared_ptr<locks::Coordinator> coordinator) {
    std::lock_guard lock(lock_service_mutex_);
    if (lock_coordinator_) lock_coordinator_->service().retire();
    lock_coordinator_ = std::move(coordinator);
  }

  const Settings settings;
  const store::Clock clock;
  // A cluster member's `cluster add|remove|transfer`; set before the
  // workers start (Server::start_cluster), empty on a single server.
  consensus::MembershipRequester change_members;
  // `watch`'s streams: every thread reports to it, watchers read from it.
  core::WatchHub watch;
  store::Store store;
  // The certificates TLS ports use; nullptr when no port speaks TLS.
  const std::unique_ptr<tls::ServerContext> tls;

 private:
  mutable std::mutex lock_service_mutex_;
  std::shared_ptr<locks::Coordinator> lock_coordinator_;

 public:
  const int64_t started_unix = static_cast<int64_t>(::time(nullptr));
  // What SIGHUP may change while the server runs (Server::reload).
  std::atomic<int> idle_timeout_seconds;
  std::atomic<int> cache_connections{0};
  std::atomic<int> lock_connections{0};
  std::atomic<uint64_t> total_connections{0};
  std::atomic<uint64_t> rejected_connections{0};
  std::atomic<uint64_t> tls_handshake_errors{0};
  // True while this node is a replica: the protocols refuse writes.
  std::atomic<bool> read_only{false};
  // Connection ids double as lock owners: unique for the life of the process.
  std::atomic<uint64_t> next_connection_id{1};
};

}  // namespace lockcached::server
