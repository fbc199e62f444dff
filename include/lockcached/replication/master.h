// The master's side of replication: a listener on the virtual IP's
// replication port, and for each replica that connects a ReplicaBuffer, a
// Snapshot and the socket they drain into. Everything here runs on the
// replication thread (replication::Node); the store's threads only append
// to the buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockcached/net/reactor.h"
#include "lockcached/store/store.h"

namespace lockcached::replication {

// What `stats replication` shows of one replica.
struct FollowerStatus {
  std::string address;
  bool syncing = false;       // the snapshot is still being sent
  uint64_t snapshot_items = 0;
  uint64_t bytes_sent = 0;    // stream bytes onto the socket (keep-alive Noops not counted)
  uint64_t bytes_acked = 0;   // applied, as the replica last said (0: it does not say)
  size_t bytes_pending = 0;   // stream bytes waiting in its buffer or our send queue
  int64_t connected_ms = 0;   // since
  int64_t silent_ms = 0;      // since the replica last sent anything
  // How long ago the oldest change the replica has not acked was made
  // (to about 10 ms); 0 when it acked everything.
  int64_t lag_ms = 0;
};

struct MasterSettings {
  std::string address;       // the virtual IP, or a Raft leader's own: replicas connect there
  uint16_t port = 11213;
  size_t buffer_limit = size_t{30} << 20;  // per replica; past it, dropped
  int64_t silence_limit_ms = 10000;        // a replica silent this long is dropped
};

class Master {
 public:
  // Replicates `store` (the cache alone: the lock service is not
  // replicated this way, docs/high-availability.md).
  Master(net::Reactor& reactor, store::Store& store, MasterSettings settings);
  // Closes every replica's connection and takes the listener away.
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  // Opens the replication listener. False, with *error set, when it cannot.
  bool listen(std::string* error);
  // Once a tick (about a second): a Noop to each replica, which answers it,
  // and away with those that said nothing for too long.
  void heartbeat();
  // Sends what waits for any replica. The owner calls it every millisecond
  // (Node::kSendIntervalMs) rather than being woken by each change.
  void pump_all();
  // Frees replicas dropped since the last call (never while one of their
  // own callbacks runs).
  void free_dropped();

  // Thread-safe.
  std::vector<FollowerStatus> followers() const;
  uint64_t dropped_total() const;

 private:
  class Follower;
  class FanOut;
  class Acceptor;

  void accept();
  std::vector<Follower*> live_followers() const;
  void drop(Follower* follower, const std::string& why);
  // The follower's stream begins: its buffer joins the store's listener.
  void stream_to(Follower* follower);
  // With mutex_ held: gives the store a listener over exactly the live
  // followers whose stream began (none: no listener, so a master without
  // replicas pays nothing per change).
  void install_fan_out_locked();

  net::Reactor& reactor_;
  store::Store& store_;
  const MasterSettings settings_;
  const size_t piece_items_;  // items per snapshot piece
  const size_t snapshot_fill_;  // pieces are added while less than this waits
  int listen_fd_ = -1;
  std::unique_ptr<Acceptor> acceptor_;
  // Guards followers_ and the counters, which other threads read
  // (followers()). Taken before a buffer's lock.
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Follower>> followers_;
  std::vector<std::unique_ptr<Follower>> dropped_;
  uint64_t dropped_total_ = 0;
  std::unique_ptr<FanOut> fan_out_;
};

}  // namespace lockcached::replication
