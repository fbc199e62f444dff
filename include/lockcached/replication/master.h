// The master's side of replication: a listener on the virtual IP's
// replication port, and for each replica that connects a ReplicaBuffer, a
// Snapshot and the socket they drain into. Everything here runs on the
// replication thread (replication::Node); the store's and the lock
// service's threads only append to the buffers, and wait on the master's
// barrier for a lock change to be acked by every replica.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockcached/locks/lock_service.h"
#include "lockcached/net/reactor.h"
#include "lockcached/store/store.h"

namespace lockcached::replication {

// What `stats replication` shows of one replica.
struct FollowerStatus {
  std::string address;
  bool syncing = false;       // the snapshot is still being sent
  uint64_t snapshot_items = 0;
  uint64_t bytes_sent = 0;    // onto the socket
  uint64_t bytes_acked = 0;   // applied, as the replica last said (0: it does not say)
  size_t bytes_pending = 0;   // waiting in its buffer or our send queue
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
  // A replica that has not acked a lock change this long after it was made
  // is dropped (and must resync), so that the change can be confirmed.
  int64_t sync_timeout_ms = 1000;
};

class Master {
 public:
  // Replicates `store` and `locks`, and makes `locks` wait for the
  // replicas before a change is confirmed (locks::ReplicationBarrier).
  // Without `locks` (a Raft cluster, whose log replicates the lock service),
  // the store alone.
  Master(net::Reactor& reactor, store::Store& store, locks::LockService* locks,
         MasterSettings settings);
  // Closes every replica's connection, takes the listeners and the barrier
  // away, and fails every change still waiting for the replicas.
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
  // Every millisecond too: drops the replicas that kept a lock change
  // waiting longer than sync_timeout_ms.
  void expire_syncs();
  // Frees replicas dropped since the last call (never while one of their
  // own callbacks runs).
  void free_dropped();

  // Thread-safe.
  std::vector<FollowerStatus> followers() const;
  uint64_t dropped_total() const;
  uint64_t sync_timeouts() const;

 private:
  class Follower;
  class FanOut;
  class Acceptor;
  class Barrier;
  // A lock change waiting for replicas to ack the stream position of its
  // frame: follower id and position, for each replica connected then.
  struct PendingSync {
    std::vector<std::pair<uint64_t, uint64_t>> targets;
    std::function<void(bool)> done;
    int64_t deadline_ms;
  };

  void accept();
  std::vector<Follower*> live_followers() const;
  void drop(Follower* follower, const std::string& why);
  // With mutex_ held: gives the store and the lock service a listener over
  // exactly the live followers (none: no listener, so a master without
  // replicas pays nothing per change).
  void install_fan_out_locked();
  // Any thread (Barrier): false when no connected replica has yet to ack a
  // lock frame: the change is on every one, or there is none.
  bool sync(std::function<void(bool)> done);
  // Confirms the syncs every replica they wait for has acked (or left).
  void complete_syncs();
  // The live follower `id` while it has not acked `position`, else null.
  Follower* owing_locked(uint64_t id, uint64_t position) const;

  net::Reactor& reactor_;
  store::Store& store_;
  locks::LockService* const locks_;  // null: the store alone (a Raft cluster's)
  const MasterSettings settings_;
  const size_t piece_items_;  // items per snapshot piece
  int listen_fd_ = -1;
  std::unique_ptr<Acceptor> acceptor_;
  // Guards followers_, syncs_ and the counters, which other threads read
  // (followers(), sync()). Taken before a buffer's or a service's lock.
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Follower>> followers_;
  std::vector<std::unique_ptr<Follower>> dropped_;
  uint64_t next_follower_id_ = 1;
  uint64_t dropped_total_ = 0;
  uint64_t sync_timeouts_ = 0;
  std::vector<PendingSync> syncs_;
  std::unique_ptr<FanOut> fan_out_;
  std::shared_ptr<Barrier> barrier_;
};

}  // namespace lockcached::replication
