// A copy of the whole store for a new replica, taken a bounded piece at a
// time while the master keeps serving (never a stop-the-world copy).
//
// The rule that makes snapshot + stream a correct replica: set the replica's
// listener on the store (Store::set_change_listener) BEFORE the first piece,
// and send the snapshot's items to that same listener, which must keep one
// order for both (ReplicaBuffer does). Then every frame about a key is
// added under that key's shard lock, in the order of the changes: a change
// the walk has not reached yet is sent twice (by the stream now, by the walk
// later, with the same or a newer state), which is harmless because the
// replica applies frames in order and the last one for a key wins; a change
// after the walk passed the key arrives only through the stream; a key
// nobody changes arrives through the walk. The replica must start empty,
// or drop at the snapshot's end every item it held before the snapshot
// began (Applier, for a master that marks the beginning: heartbeat.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockcached/store/change_listener.h"
#include "lockcached/store/store.h"

namespace lockcached::replication {

class Snapshot {
 public:
  // Items looked at per piece, under one shard lock: the crawler's slice.
  static constexpr size_t kPieceItems = 512;

  // Sends each live item of `store` to out.on_store, as if it had just
  // been stored.
  Snapshot(store::Store& store, store::ChangeListener& out) : store_(store), out_(out) {}

  // Sends the live items among about `budget` more; returns whether any
  // remain. Each piece holds one shard lock for its duration, so a caller
  // paces the pieces (by the replica's buffer) to keep both the lock hold
  // and the buffered bytes bounded.
  bool send_piece(size_t budget = kPieceItems);
  bool done() const { return cursor_ == store::Store::kScanDone; }
  uint64_t items_sent() const { return items_sent_; }

 private:
  store::Store& store_;
  store::ChangeListener& out_;
  uint64_t cursor_ = 0;
  uint64_t items_sent_ = 0;
};

}  // namespace lockcached::replication
