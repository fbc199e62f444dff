// What the store tells an observer about every change to its contents: the
// hook replication hangs on (src/replication). The store only reports; it
// never formats anything for the wire.
#pragma once

#include <string_view>

#include "lockcached/store/clock.h"
#include "lockcached/store/item.h"

namespace lockcached::store {

// Every call comes while the store still holds the lock of the key's shard
// (on_flush: of every shard), so the calls for one key arrive in the order
// of its changes, and a walk of the store under the same locks
// (Store::walk_items) sees each change either entirely before or
// entirely after it. Calls come from every thread that changes the store,
// concurrently for keys of different shards: an implementation must be
// thread-safe, short, and must not call back into the store.
class ChangeListener {
 public:
  virtual ~ChangeListener() = default;

  // `item` is now the live version of its key: stored by any storage command
  // (set, add, replace, append and prepend results, cas, incr/decr results,
  // meta-protocol creations), or given a new exptime in place (touch, gat,
  // lock-and-get with a TTL). Key, value and flags of a linked item never
  // change, so a listener may keep a reference (ItemRef::share on
  // const_cast<Item*>(&item): the refcount is the one field a reference
  // touches) and read them later; exptime does change in place under the shard lock, so read
  // it here if it matters.
  virtual void on_store(const Item& item) = 0;
  // `key` is gone: deleted, evicted, or reclaimed after expiry or a flush.
  virtual void on_delete(std::string_view key) = 0;
  // flush_all: `moment` is when it takes effect (RelTime on the store's
  // clock), 0 for at once.
  virtual void on_flush(RelTime moment) = 0;
};

}  // namespace lockcached::store
