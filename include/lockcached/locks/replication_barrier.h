// What the lock-service protocol waits on before it answers a change, when
// this server is a master with replicas (issue 16: locks are replicated
// synchronously). The replication layer implements it
// (replication::Master); the lock service only carries it to the protocol.
#pragma once

#include <functional>

namespace lockcached::locks {

class ReplicationBarrier {
 public:
  virtual ~ReplicationBarrier() = default;

  // Called after a change to the service returned, on the thread that made
  // it. Returns false, and never calls `done`, when no replica is connected:
  // the caller answers at once. Otherwise `done` is called once, on another
  // thread and with no lock held, with true when every replica connected at
  // the time of this call has applied every change reported before it (a
  // replica too slow for the sync timeout is dropped instead), or with false
  // when this server stopped being the master first: the change may then
  // exist nowhere else, and the caller must not confirm it to its client.
  virtual bool after_replicated(std::function<void(bool replicated)> done) = 0;
};

}  // namespace lockcached::locks
