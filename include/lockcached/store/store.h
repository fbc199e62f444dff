// The object store: a power-of-two number of shards, each with its own mutex,
// chained hash table, memory budget and LRU list. This is the one place where
// cache semantics live (CAS, add/replace rules, arithmetic, expiry, flush,
// lock ownership); protocols translate its results into their replies.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockcached/store/change_listener.h"
#include "lockcached/store/clock.h"
#include "lockcached/store/eviction_observer.h"
#include "lockcached/store/hash.h"
#include "lockcached/store/item.h"
#include "lockcached/store/size_classes.h"

namespace lockcached::store {

constexpr size_t kMaxKeyLength = 250;

struct StoreConfig {
  size_t memory_limit = size_t{1024} << 20;
  size_t max_item_size = size_t{1} << 20;
  uint64_t hash_seed = 0;
  // 0 picks a count from the memory limit (see Store::Store).
  unsigned shard_count = 0;
  // memcached's -C: clients see a CAS of 0 and no CAS they send matches
  // (the items keep theirs inside: flush_all needs it).
  bool cas_enabled = true;
  // memcached's -M: a store that finds no room is refused instead of
  // evicting live items (expired and flushed ones still make room).
  bool evictions = true;
};

// A compare_cas no item ever has (the CAS counter starts at 1 and counts
// one a change): memcached's meta commands compare even a C0, which then
// never matches, where 0 in this API means "no check".
constexpr uint64_t kUnmatchableCas = ~uint64_t{0};

enum class StoreCommand : uint8_t { kSet, kAdd, kReplace, kAppend, kPrepend, kCas };
enum class StoreStatus : uint8_t {
  kStored,
  kNotStored,
  kExists,
  kNotFound,
  kLocked,     // locked by another connection
  kNotLocked,  // replace_and_unlock by a connection that does not hold the lock
  kNoMemory,
};
enum class DeleteStatus : uint8_t { kDeleted, kNotFound, kExists, kLocked };
enum class ArithStatus : uint8_t { kOk, kNotFound, kNonNumeric, kExists, kLocked, kNoMemory };
enum class LockStatus : uint8_t { kOk, kNotFound, kLocked, kNotLocked };

struct StoreResult {
  StoreStatus status;
  uint64_t cas = 0;  // of the stored item when status is kStored
};

struct ArithRequest {
  bool increment = true;
  uint64_t delta = 0;
  uint64_t compare_cas = 0;  // 0: no check
  // Meta arithmetic: a new exptime on success; on a creation, unless the
  // client gave N after T (memcached applies them in the request's order).
  bool set_exptime = false;
  RelTime new_exptime = 0;
  bool creation_ttl_last = false;
  // Binary protocol: create the item with `initial` when it is missing.
  bool create = false;
  uint64_t initial = 0;
  RelTime exptime = 0;
};

struct ArithResult {
  ArithStatus status;
  uint64_t value = 0;
  uint64_t cas = 0;
  RelTime exptime = 0;
  RelTime exptime_before = 0;  // before a new TTL or the creation's TTL
  bool created = false;
};

// A meta-protocol get ("mg"): what to do besides reading.
struct MetaGetRequest {
  // What the T, N, R and t flags do to the item found (or created), in the
  // order the client gave them, as memcached applies them: `mg k T60 N30`
  // on a miss leaves 30 s, `R30 T10` on an item with 100 s left does not
  // win, and `t` reads the TTL as of its place.
  enum class Step : uint8_t {
    kTouch,      // T: a new exptime
    kVivifyTtl,  // N: the exptime of an item this request created
    kRecache,    // R: win if the exptime is below `time`
    kReadTtl,    // t: note the exptime (MetaGetResult::exptime_read)
  };
  struct Action {
    Step step;
    RelTime time = 0;
  };
  static constexpr size_t kMaxActions = 4;  // each flag at most once

  void add(Step step, RelTime time = 0) { actions[action_count++] = {step, time}; }
  bool touches() const {
    for (size_t i = 0; i < action_count; ++i) {
      if (actions[i].step == Step::kTouch) return true;
    }
    return false;
  }

  bool bump = true;     // false: "u", leave access state alone
  bool vivify = false;  // "N": create an empty item on a miss
  // False: a look that claims nothing ("me"): a stale item's recache token
  // (W) stays for the next reader.
  bool claims = true;
  std::array<Action, kMaxActions> actions{};
  size_t action_count = 0;
};

// What mg reports, taken under the shard lock.
struct MetaGetResult {
  ItemRef item;
  bool created = false;
  bool won = false;             // W: this client should recache
  bool token_was_sent = false;  // Z: another client already won
  bool stale = false;           // X
  bool fetched_before = false;  // h
  bool key_binary = false;      // the key was stored in base64 form
  RelTime last_access = 0;      // l, before this access
  RelTime exptime = 0;          // after the request
  RelTime exptime_read = 0;     // at the kReadTtl step
};

// One size class's counters (store/size_classes.h), per shard and summed:
// memcached's per-slab-class item statistics, for an allocator's classes.
struct SizeClassCounters {
  uint64_t number = 0;     // live items
  uint64_t requested = 0;  // the sum of their total_size()
  uint64_t allocated = 0;  // what the allocator gave them (allocation_size)
  uint64_t evicted = 0;
  uint64_t evicted_nonzero = 0;  // evicted while they had an exptime
  uint64_t evicted_unfetched = 0;
  uint64_t outofmemory = 0;  // stores refused for want of memory
  uint64_t reclaimed = 0;    // expired or flushed items taken out
  uint64_t expired_unfetched = 0;
  uint64_t crawler_reclaimed = 0;
  uint64_t crawler_items_checked = 0;
  RelTime evicted_at = 0;    // when the last eviction came (0: none yet)
  RelTime evicted_time = 0;  // seconds since that item's last access
  // The oldest last access the crawler's last complete pass saw (0: none).
  RelTime oldest_access = 0;
};

struct SizeClassStats : SizeClassCounters {
  unsigned id = 0;
  // The class's size; for the last class, the largest item the store takes.
  size_t chunk_size = 0;
  // Seconds since oldest_access: memcached's "age" of the least recently
  // used item, as of the crawler's last pass (0 when not measured).
  RelTime age = 0;
};

struct StoreStats {
  uint64_t curr_items = 0;
  uint64_t total_items = 0;
  uint64_t bytes = 0;
  uint64_t evictions = 0;
  uint64_t reclaimed = 0;  // expired or flushed items taken out
  uint64_t expired_unfetched = 0;
  uint64_t evicted_unfetched = 0;
  uint64_t crawler_reclaimed = 0;
  uint64_t limit_bytes = 0;
  uint64_t target_bytes = 0;  // eviction starts here (<= limit_bytes)
  uint64_t locked_items = 0;
  // Lookups (by any command) that found their item expired, or flushed.
  uint64_t found_expired = 0;
  uint64_t found_flushed = 0;
  // Times eviction passed over an item because it was locked.
  uint64_t evict_passed_locked = 0;
  uint64_t hash_bytes = 0;  // the shards' bucket arrays (not their overflow buckets)
  unsigned shards = 0;
};

// Who holds a locked item's lock, and since when (the store's clock).
struct LockHolder {
  OwnerId owner = kNoOwner;
  RelTime since = 0;
};

// One locked item, as Store::locked_items lists it.
struct LockedItem {
  std::string key;
  OwnerId owner = kNoOwner;
  RelTime since = 0;
};

class Store {
 public:
  Store(const StoreConfig& config, const Clock& clock);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const Clock& clock() const { return clock_; }
  size_t max_item_size() const { return max_item_size_; }
  // The lowest limit at which every shard still holds one of the largest
  // items: the shards are counted once, at the start, for the limit then,
  // and each takes its share of a limit set later. Below it the largest
  // items could no longer be stored.
  size_t smallest_memory_limit() const { return shards_.size() * max_item_size_; }
  bool cas_enabled() const { return cas_enabled_; }
  bool evictions() const { return evictions_; }
  // The CAS a client is shown of `item`: 0 with cas_enabled false.
  uint64_t client_cas(const Item& item) const { return cas_enabled_ ? item.cas : 0; }

  // An unlinked item for the caller to fill; empty when value_len is over the
  // item size limit or memory is short.
  ItemRef allocate(std::string_view key, uint32_t flags, RelTime exptime, size_t value_len) const;

  ItemRef get(std::string_view key);
  // Calls reader(item) under the shard lock when `key` is live; returns whether
  // it was. The hot path of a get: a reader that copies the bytes it needs
  // (or takes its own reference) spares the two locked instructions of an
  // ItemRef. `reader` must be short and must not call into the store.
  template <typename Reader>
  bool read(std::string_view key, Reader&& reader) {
    return read_hashed(key, key_hash(key), std::forward<Reader>(reader));
  }
  // read() of a key whose key_hash() the caller has: a pipelined get,
  // hashed once when its read was looked ahead (protocol::ReadAhead).
  template <typename Reader>
  bool read_hashed(std::string_view key, uint64_t hash, Reader&& reader) {
    using Callable = std::remove_reference_t<Reader>;
    return read_with(
        key, hash, [](void* callable, Item& item) { (*static_cast<Callable*>(callable))(item); },
        &reader);
  }
  // read() for `count` keys (key_at(i) gives the i-th) in their order: a
  // multi-get. Calls reader(i, item) under the shard lock for each live
  // key. The keys are read at one moment: the clock is read, and a due
  // flush_all applied, once for all of them. The buckets of up to
  // kReadAhead keys are fetched into the cache before the first of them is
  // looked up, so that their cache misses overlap instead of adding up.
  template <typename KeyAt, typename Reader>
  void read_each(size_t count, KeyAt&& key_at, Reader&& reader) {
    const RelTime now = clock_.now();
    apply_due_flush(now);
    uint64_t hashes[kReadAhead];
    for (size_t first = 0; first < count; first += kReadAhead) {
      const size_t n = std::min(kReadAhead, count - first);
      for (size_t i = 0; i < n; ++i)
        hashes[i] = hash_key(key_at(first + i), hash_seed_);
      prefetch_buckets(hashes, n);
      for (size_t i = 0; i < n; ++i) {
        auto call = [&reader, at = first + i](Item& item) { reader(at, item); };
        using Call = decltype(call);
        read_at(
            now, key_at(first + i), hashes[i],
            [](void* callable, Item& item) { (*static_cast<Call*>(callable))(item); }, &call);
      }
    }
  }
  // A pipeline's gets are fetched into the cache in two steps, so that their
  // misses overlap (protocol::ReadAhead): the bucket of each key when the
  // read arrives, which takes no lock (HashTable::prefetch); then, once the
  // bucket is likely in the cache, the item it leads to. The second step
  // reads the bucket under the shard's lock, only if it is free at once: a
  // prefetch is worth no wait.
  uint64_t key_hash(std::string_view key) const { return hash_key(key, hash_seed_); }
  void prefetch_bucket(uint64_t hash) const { prefetch_buckets(&hash, 1); }
  void prefetch_item(uint64_t hash) const;
  // Sets a new exptime and returns the item (gat, touch).
  ItemRef touch(std::string_view key, RelTime exptime);

  // Links `item` according to `command`. compare_cas is checked for kCas
  // (0 never matches) and, when non-zero, for kReplace/kAppend/kPrepend (the
  // binary protocol turns a set or add with a CAS into kCas); without CAS
  // (cas_enabled false) kCas never matches and the others ignore it, as
  // memcached -C does. `owner` may modify items it has
  // locked; everybody else gets kLocked. A kSet that finds no memory also
  // removes the old value, as memcached does.
  // With mark_stale ("ms ... I"), a kCas whose compare_cas is older than
  // the item's stores anyway, marked stale.
  StoreResult store(StoreCommand command, const ItemRef& item, uint64_t compare_cas, OwnerId owner,
                    bool mark_stale = false);
  DeleteStatus remove(std::string_view key, uint64_t compare_cas, OwnerId owner);
  ArithResult arith(std::string_view key, const ArithRequest& request, OwnerId owner);

  // Meta protocol. meta_get reads and applies the request's side effects
  // atomically; invalidate ("md KEY I") marks an item stale with a new CAS
  // instead of deleting it, and may set a new exptime.
  MetaGetResult meta_get(std::string_view key, const MetaGetRequest& request);
  DeleteStatus invalidate(std::string_view key, uint64_t compare_cas, OwnerId owner,
                          const RelTime* exptime);
  RelTime now() const { return clock_.now(); }

  // Server-side locks (../shared/specs/locking.md). A lock ties an existing
  // item to `owner`; only the owner may then modify it, and it neither
  // expires nor is evicted nor flushed until unlocked.
  LockStatus lock(std::string_view key, OwnerId owner);
  // lock() and get in one step; renews the exptime when one is given (LaG).
  ItemRef lock_and_get(std::string_view key, OwnerId owner, const RelTime* exptime,
                       LockStatus* status);
  // Who holds the lock on `key` (kNoOwner: nobody, or no such item).
  OwnerId lock_owner(std::string_view key);
  // kNotLocked unless `owner` holds the lock.
  LockStatus unlock(std::string_view key, OwnerId owner);
  // Replaces a locked item and unlocks it atomically (RaU); the caller must
  // hold the lock (else kNotLocked).
  StoreResult replace_and_unlock(const ItemRef& item, uint64_t compare_cas, OwnerId owner);

  // Every locked item whose key starts with `prefix`, shard by shard (each
  // under its lock; the walk reads the lock tables, never the items of a
  // shard that has no lock). For `stats cachelocks`.
  std::vector<LockedItem> locked_items(std::string_view prefix) const;
  // Releases every cache lock, whoever holds it, and returns how many: a
  // master demoted to a replica, whose clients' locks belonged to the
  // master it was (replication::Node::demote).
  size_t release_all_locks();

  // Walks the keys in pieces, for the `keys` debugging command. Starting at
  // `cursor` (0 at first), calls visit(key) for each live key that starts
  // with `prefix`, looking at about `budget` items under one shard lock.
  // Returns where to go on, or kScanDone. Keys may repeat when a table grows
  // during the walk; none present throughout is missed.
  static constexpr uint64_t kScanDone = ~uint64_t{0};
  uint64_t scan_keys(uint64_t cursor, std::string_view prefix, size_t budget,
                     const std::function<void(std::string_view)>& visit);

  // Walks the live items in pieces: like scan_keys, calls visit(item)
  // under the shard lock for each live item among about `budget` items from
  // `cursor`. A replication snapshot: run while a ChangeListener is set,
  // every item is seen either by the walk or, after the walk passed it, by
  // the listener (docs/architecture.md, "Replication"). Also the item dumps
  // (`stats cachedump`, `lru_crawler metadump`).
  uint64_t walk_items(uint64_t cursor, size_t budget,
                      const std::function<void(const Item&)>& visit);

  // One step of the expiry crawler: reclaims the expired and flushed items
  // among about `budget` items from `cursor` (0 at first) under one shard
  // lock. Returns where to go on, or kScanDone after the last shard. Also
  // notes the oldest last access of each size class; a shard walked to its
  // end reports them as its classes' oldest_access (see SizeClassStats::age).
  uint64_t crawl(uint64_t cursor, size_t budget);
  // Whether a crawl could find anything: some item has an exptime, or a
  // flush_all came (or is pending) since the flush the caller saw last,
  // which *flush_cas_seen records (0 at first).
  bool crawl_needed(uint64_t* flush_cas_seen);

  // Invalidates every unlocked item stored before now + delay_seconds.
  void flush_all(int64_t delay_seconds);
  // Invalidates every unlocked item stored before the CAS counter passed
  // `cas`, as a flush_all then would have. For a store without a change
  // listener (a replica's, which reports nothing): a replica that applied a
  // master's whole snapshot beside what it held drops what the snapshot did
  // not bring (replication::Applier).
  void flush_stored_before(uint64_t cas) { raise_flush_cas(cas); }
  // Items stored before the CAS counter passed `cas` lose the second chance
  // CLOCK gives a used item: a replica applying a snapshot beside its old
  // items evicts those before the snapshot's, which start with their bit
  // set (replication::Applier). 0: none.
  void evict_first_stored_before(uint64_t cas) {
    evict_first_below_.store(cas, std::memory_order_relaxed);
  }
  // A delayed flush_all's moment that has not come yet; 0: none.
  RelTime pending_flush() const { return flush_time_.load(std::memory_order_relaxed); }

  // A warm restart (replication/memory_file.h). The CAS the last stored
  // item got: the next one gets more.
  uint64_t cas_counter() const { return next_cas_.load(std::memory_order_relaxed); }
  // Makes every CAS from now on larger than `cas`, so that a CAS a client
  // read before the restart never names a later item.
  void raise_cas_counter(uint64_t cas);
  // Links `item` as it was saved: its CAS and meta state as they are in it,
  // `atime` and `accessed` put back after linking (which would reset them).
  // An item that expired or was flushed meanwhile is not linked; neither is
  // one that finds no room. Returns whether it was linked.
  bool restore(const ItemRef& item, RelTime atime, bool accessed);
  // Sizes the hash tables of an empty store (a warm restart's, before it
  // loads) for `items`, spread evenly over the shards.
  void reserve(size_t items);
  // Sets the limit and the eviction target to `bytes`, and evicts down to
  // them at once (never a locked item).
  void set_memory_limit(size_t bytes);
  // Evicts down to `bytes` (at most the limit) from the next store on: how
  // MemoryGovernor keeps the process near the limit while the allocator
  // holds fragmented pages.
  void set_eviction_target(size_t bytes);

  StoreStats stats() const;
  // Every size class, ids 1..kSizeClassCount in order, empty ones included.
  std::vector<SizeClassStats> class_stats() const;
  // Zeroes what memcached's "stats reset" zeroes: every counter but the
  // live items' number, sizes and the crawler's oldest access.
  void reset_stats();

  // Reports every change from now on to `listener` (nullptr: to nobody, the
  // default). Returns once no call to the previous listener is in progress,
  // so the caller may then destroy it. A store without a listener pays one
  // pointer test per change and nothing per read.
  void set_change_listener(ChangeListener* listener);
  // Reports every eviction by the CLOCK hand to `observer` (nullptr: to
  // nobody). Set it before the store is shared between threads; an
  // eviction then pays one pointer test for it.
  void set_eviction_observer(EvictionObserver* observer) { eviction_observer_ = observer; }

 private:
  struct Shard;
  // A key's shard held locked and its live item: how every command on one
  // key begins (store.cc).
  struct Lookup;

  Shard& shard_for(uint64_t hash) const;
  bool read_with(std::string_view key, uint64_t hash, void (*call)(void*, Item&), void* reader) {
    const RelTime now = clock_.now();
    apply_due_flush(now);
    return read_at(now, key, hash, call, reader);
  }
  // read_with at `now`, once apply_due_flush(now) ran (read_each); `hash`
  // is the key's.
  bool read_at(RelTime now, std::string_view key, uint64_t hash, void (*call)(void*, Item&),
               void* reader);
  // A multi-get reads ahead this many keys' buckets (read_each).
  static constexpr size_t kReadAhead = 16;
  void prefetch_buckets(const uint64_t* hashes, size_t count) const;
  bool is_flushed(const Item& item, RelTime now);
  // Every lookup calls it: the test for "no delayed flush_all pending" is
  // inline, the rest is not.
  void apply_due_flush(RelTime now) {
    if (flush_time_.load(std::memory_order_relaxed) != 0) [[unlikely]]
      apply_pending_flush(now);
  }
  void apply_pending_flush(RelTime now);
  // Whether a flush_all took `item`, as of the last apply_due_flush.
  bool flushed_before(const Item& item) const {
    return item.cas < flush_cas_.load(std::memory_order_relaxed);
  }
  void raise_flush_cas(uint64_t cas);
  // Flushes at `moment` (0: now), as flush_all does.
  void start_flush(RelTime moment);
  static void note_access(Item* item, RelTime now);
  bool is_live(const Item& item, RelTime now);
  // is_live once apply_due_flush(now) ran: find() applies it first, once.
  bool is_live_flush_applied(const Item& item, RelTime now) const;
  ChangeListener* listener() const { return listener_.load(std::memory_order_acquire); }
  // Sets a linked item's exptime in place (touch) and reports it.
  void retime(Shard& shard, Item* item, RelTime exptime);
  // Calls visit(shard, item) for about `budget` items from `cursor` under
  // one shard lock, then, if that finished the shard, shard_done(shard)
  // under the same lock: the walk of crawl, scan_keys and walk_items.
  template <typename Visit, typename ShardDone>
  uint64_t walk_piece(uint64_t cursor, size_t budget, Visit&& visit, ShardDone&& shard_done);
  template <typename Visit>
  uint64_t walk_piece(uint64_t cursor, size_t budget, Visit&& visit) {
    return walk_piece(cursor, budget, std::forward<Visit>(visit), [](Shard&) {});
  }
  void set_lock(Shard& shard, Item* item, OwnerId owner);
  void clear_lock(Shard& shard, Item* item);
  // Finds a live item; unlinks an expired or flushed one on the way.
  Item* find(Shard& shard, uint64_t hash, std::string_view key, RelTime now) {
    apply_due_flush(now);  // before anything can be stored after the moment
    return find_live(shard, hash, key, now);
  }
  // find, once apply_due_flush(now) ran.
  Item* find_live(Shard& shard, uint64_t hash, std::string_view key, RelTime now);
  // `counted`: a new item for total_items; false for a copy that stands for
  // memcached changing its item in place (an incr that fits, md I, the
  // unlock of a flush-spared item), which memcached does not count.
  void link(Shard& shard, uint64_t hash, Item* item, bool counted = true);
  // Takes an item out of its shard and reports the key gone. Callers that
  // hold the key's hash pass it, sparing a second pass over the key.
  void unlink(Shard& shard, Item* item);
  void unlink(Shard& shard, Item* item, uint64_t hash);
  // unlink without the report: the key lives on in a new item.
  void detach(Shard& shard, Item* item, uint64_t hash);
  // Links new_item in place of old_item (which may be null).
  void replace(Shard& shard, uint64_t hash, Item* old_item, Item* new_item,
               bool counted = true);
  // Evicts until an item of `needed` bytes fits, counting `freed` bytes
  // (the item it replaces) as free; never evicts `keep`. When nothing more
  // can go, counts the refusal against needed's size class.
  bool make_room(Shard& shard, size_t needed, size_t freed, RelTime now, const Item* keep);
  // Evicts until the shard's items take at most `bytes`, never a locked
  // item or `keep`; false when nothing more can go, or nothing went in
  // `lookahead` buckets.
  bool evict_down_to(Shard& shard, size_t bytes, RelTime now, const Item* keep,
                     size_t lookahead);
  void report_eviction(const Item& item, RelTime now) const;
  // Takes out an item that expired or was flushed.
  void reclaim(Shard& shard, Item* item);
  void reclaim(Shard& shard, Item* item, uint64_t hash);
  uint64_t next_cas() { return next_cas_.fetch_add(1, std::memory_order_relaxed) + 1; }
  // A copy of `item` standing in for a change memcached makes in place
  // (readers may still be sending the old one): its key, flags, value and
  // meta state, with `exptime`; the caller gives it its new CAS. Empty when
  // memory is short.
  ItemRef copy_in_place(const Item& item, RelTime exptime) const;
  ItemRef combine(const Item& old_item, const Item& addition, bool append) const;

  const Clock& clock_;
  const size_t max_item_size_;
  const uint64_t hash_seed_;
  const bool cas_enabled_;
  const bool evictions_;
  unsigned shard_bits_;
  std::vector<std::unique_ptr<Shard>> shards_;  // each its own allocation: no false sharing
  // Every linked item writes it: on a line of its own, so that the sets of
  // other threads do not take away the lines every lookup reads (shards_
  // above, the flush_all state below).
  alignas(64) std::atomic<uint64_t> next_cas_{0};
  // flush_all state, read on every lookup.
  alignas(64) std::atomic<RelTime> flush_time_{0};  // a delayed flush_all's moment; 0: none pending
  std::atomic<uint64_t> flush_cas_{0};  // items with a smaller cas are gone
  std::atomic<uint64_t> evict_first_below_{0};  // evict_first_stored_before
  // Read under the shard lock of the change it reports: a change either
  // sees a listener set before a walk took that lock, or the walk sees it.
  std::atomic<ChangeListener*> listener_{nullptr};
  EvictionObserver* eviction_observer_ = nullptr;
};

}  // namespace lockcached::store
