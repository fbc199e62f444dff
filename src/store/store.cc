#include "lockcached/store/store.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lockcached/store/decimal.h"
#include "lockcached/store/hash.h"
#include "lockcached/store/hash_table.h"

namespace lockcached::store {
namespace {

constexpr unsigned kMaxShards = 64;
// Per shard; 64 shards of 128 one-line buckets are 512 KiB for an empty
// store.
constexpr size_t kInitialBuckets = 128;
// Without evictions: how many buckets a store that finds no room looks
// through for expired or flushed items before it is refused (tens of
// microseconds; a whole table's walk per refused store would make a full
// cache slow for everyone).
constexpr size_t kReclaimLookahead = 1024;

// What memcached keeps of an item it changes in place, and so what a copy
// standing in for such a change takes over: the meta state (stale, the win
// token, fetched, the key's base64 encoding).
void carry_meta_state(const Item& from, Item& to) {
  to.stale = from.stale;
  to.token_sent = from.token_sent;
  to.fetched = from.fetched;
  to.key_binary = from.key_binary;
}

}  // namespace

struct Store::Shard {
  explicit Shard(uint64_t hash_seed) : table(hash_seed, kInitialBuckets) {}

  std::mutex mutex;
  HashTable table;
  size_t bytes = 0;
  // Linked items with an exptime: while there are none (and no flush_all
  // came), the crawler has nothing to look for here.
  size_t expiring = 0;
  size_t limit = 0;
  // Where eviction starts: the limit, or less while the allocator holds
  // more memory than the items need (MemoryGovernor, after a size shift).
  size_t target = 0;
  // The CLOCK hand: the bucket eviction looks at next. A read only sets the
  // item's `accessed` bit; the hand clears it (a second chance) and evicts
  // the item when it comes round again without the bit set.
  size_t hand = 0;
  // Owners of the locked items, and since when (`stats cachelocks`): few,
  // so not fields of every item.
  std::unordered_map<const Item*, LockHolder> owners;
  uint64_t total_items = 0;
  uint64_t locked = 0;
  // Lookups that found their item expired or flushed (memcached's
  // get_expired and get_flushed: any command's lookup, not only a get's).
  uint64_t found_expired = 0;
  uint64_t found_flushed = 0;
  // Items the CLOCK hand had to pass over because they were locked
  // (reported as memcached's lrutail_reflocked).
  uint64_t evict_passed_locked = 0;
  // Per size class (index id - 1), made when the class is first used
  // here: all 63 in each of 64 shards would be 400 KiB, which a small
  // cache's memory governor counts. The shard's evictions, reclaims and
  // crawler counts are their sums.
  struct ClassCounters : SizeClassCounters {
    // The crawler's pass over this shard so far: the oldest last access
    // seen (0: none), published as oldest_access when the pass ends.
    RelTime crawl_oldest = 0;
  };
  std::array<std::unique_ptr<ClassCounters>, kSizeClassCount> classes;

  ClassCounters& counters(unsigned id) {
    std::unique_ptr<ClassCounters>& counters = classes[id - 1];
    if (!counters) counters = std::make_unique<ClassCounters>();
    return *counters;
  }
  ClassCounters& class_of(const Item* item) { return counters(size_class_of(item->total_size())); }

  // Changes a linked item's exptime, keeping `expiring` true.
  void set_exptime(Item* item, RelTime exptime) {
    if (item->exptime == 0 && exptime != 0) ++expiring;
    if (item->exptime != 0 && exptime == 0) --expiring;
    item->exptime = exptime;
  }

  OwnerId owner_of(const Item* item) const {
    return item->locked ? owners.find(item)->second.owner : kNoOwner;
  }
  // Locked by a connection other than `owner`.
  bool locked_against(const Item* item, OwnerId owner) const {
    return item->locked && owner_of(item) != owner;
  }
};

// The preamble of every command on one key: hash the key, take its shard's
// lock, find the live item (an expired or flushed one is taken out on the
// way). The lock is held for the Lookup's life. The clock is read before
// the lock is taken, keeping its call out of the critical section. Members
// are initialized in the order they are declared, each from the ones
// before.
struct Store::Lookup {
  Lookup(Store& store, std::string_view key)
      : hash(hash_key(key, store.hash_seed_)),
        shard(store.shard_for(hash)),
        now(store.clock_.now()),
        lock(shard.mutex),
        item(store.find(shard, hash, key, now)) {}
  // At `at`, once apply_due_flush(at) ran, of a key whose hash is known
  // (a multi-get's keys, read_each).
  Lookup(Store& store, std::string_view key, uint64_t key_hash, RelTime at)
      : hash(key_hash),
        shard(store.shard_for(hash)),
        now(at),
        lock(shard.mutex),
        item(store.find_live(shard, hash, key, now)) {}

  const uint64_t hash;
  Shard& shard;
  const RelTime now;
  const std::lock_guard<std::mutex> lock;
  Item* item;  // null: no live item
};

Store::Store(const StoreConfig& config, const Clock& clock)
    : clock_(clock),
      max_item_size_(config.max_item_size),
      hash_seed_(config.hash_seed),
      cas_enabled_(config.cas_enabled),
      evictions_(config.evictions) {
  unsigned shards = config.shard_count;
  if (shards == 0) {
    // Each shard must be able to hold a few of the largest items.
    shards = kMaxShards;
    while (shards > 1 && config.memory_limit / shards < 4 * config.max_item_size)
      shards /= 2;
  }
  shard_bits_ = 0;
  while ((1u << shard_bits_) < shards)
    ++shard_bits_;
  shards_.reserve(size_t{1} << shard_bits_);
  for (size_t i = 0; i < (size_t{1} << shard_bits_); ++i)
    shards_.push_back(std::make_unique<Shard>(hash_seed_));
  set_memory_limit(config.memory_limit);
}

Store::~Store() {
  for (auto& shard : shards_) {
    for (size_t b = 0; b < shard->table.bucket_count(); ++b) {
      shard->table.for_each_in_bucket(b, [](Item* item) {
        item->linked = false;
        item_release(item);
      });
    }
  }
}

Store::Shard& Store::shard_for(uint64_t hash) const {
  return *shards_[shard_bits_ == 0 ? 0 : hash >> (64 - shard_bits_)];
}

// A delayed flush_all takes effect when the first lookup after its moment
// turns it into a CAS bound: everything stored until then has a lower CAS.
bool Store::is_flushed(const Item& item, RelTime now) {
  apply_due_flush(now);
  return flushed_before(item);
}

void Store::apply_pending_flush(RelTime now) {
  RelTime due = flush_time_.load(std::memory_order_relaxed);
  if (due != 0 && due <= now && flush_time_.compare_exchange_strong(due, 0)) {
    raise_flush_cas(next_cas());
  }
}

void Store::raise_flush_cas(uint64_t cas) {
  uint64_t current = flush_cas_.load(std::memory_order_relaxed);
  while (current < cas && !flush_cas_.compare_exchange_weak(current, cas)) {
  }
}

bool Store::is_live(const Item& item, RelTime now) {
  apply_due_flush(now);
  return is_live_flush_applied(item, now);
}

bool Store::is_live_flush_applied(const Item& item, RelTime now) const {
  if (item.is_locked()) return true;  // locked objects neither expire nor flush
  if (item.exptime != 0 && item.exptime <= now) return false;
  return !flushed_before(item);
}

Item* Store::find_live(Shard& shard, uint64_t hash, std::string_view key, RelTime now) {
  Item* item = shard.table.find(hash, key);
  if (!item || is_live_flush_applied(*item, now)) return item;
  // memcached looks at the flush first: an item both flushed and expired
  // counts as flushed.
  ++(flushed_before(*item) ? shard.found_flushed : shard.found_expired);
  reclaim(shard, item, hash);
  return nullptr;
}

void Store::link(Shard& shard, uint64_t hash, Item* item, bool counted) {
  // The table doubles: bucket b is now b and b + old size, so the hand
  // goes on from the first of them.
  if (shard.table.insert(hash, item)) shard.hand *= 2;
  item->refs.fetch_add(1, std::memory_order_relaxed);  // the store's own reference
  item->linked = true;
  item->accessed = true;  // a new item gets one turn of the hand to be used
  item->atime = clock_.now();
  if (item->locked) ++shard.locked;
  if (item->exptime != 0) ++shard.expiring;
  size_t size = item->total_size();
  shard.bytes += size;
  SizeClassCounters& counters = shard.class_of(item);
  ++counters.number;
  counters.requested += size;
  counters.allocated += allocation_size(size);
  if (counted) ++shard.total_items;
  // Encoding the change is the listener's business: it may copy the bytes
  // now or keep a reference and copy them after the lock is released.
  if (ChangeListener* listener = this->listener()) listener->on_store(*item);
}

void Store::unlink(Shard& shard, Item* item) {
  unlink(shard, item, hash_key(item->key(), hash_seed_));
}

void Store::unlink(Shard& shard, Item* item, uint64_t hash) {
  if (ChangeListener* listener = this->listener()) listener->on_delete(item->key());
  detach(shard, item, hash);
}

void Store::detach(Shard& shard, Item* item, uint64_t hash) {
  shard.table.erase(hash, item);
  if (item->locked) {
    shard.owners.erase(item);
    --shard.locked;
  }
  item->linked = false;
  if (item->exptime != 0) --shard.expiring;
  size_t size = item->total_size();
  shard.bytes -= size;
  SizeClassCounters& counters = shard.class_of(item);
  --counters.number;
  counters.requested -= size;
  counters.allocated -= allocation_size(size);
  item_release(item);
}

void Store::replace(Shard& shard, uint64_t hash, Item* old_item, Item* new_item,
                    bool counted) {
  if (old_item) {
    if (old_item->locked) {  // the holder's write keeps its lock
      new_item->locked = true;
      shard.owners.emplace(new_item, shard.owners.find(old_item)->second);
    }
    detach(shard, old_item, hash);  // link reports the new version
  }
  link(shard, hash, new_item, counted);
}

bool Store::make_room(Shard& shard, size_t needed, size_t freed, RelTime now, const Item* keep) {
  // A replacement no larger than what it replaces takes no room: asked to
  // bring the shard down to its target, a shard kept above it by locked
  // items (a lowered limit) refused even its holder's smaller write.
  if (needed <= freed) return true;
  size_t bytes = needed - freed;
  // Without evictions (memcached's -M) only expired and flushed items make
  // room, and a store looks at a few buckets for them, not the whole table
  // (the crawler takes out the rest).
  size_t buckets = shard.table.bucket_count();
  size_t lookahead = evictions_ ? 2 * buckets : std::min(kReclaimLookahead, buckets);
  // An item larger than a lowered target still fits once the rest is gone.
  if (bytes <= shard.limit &&
      evict_down_to(shard, std::max(shard.target, bytes) - bytes, now, keep, lookahead)) {
    return true;
  }
  ++shard.counters(size_class_of(needed)).outofmemory;
  return false;
}

// CLOCK: the hand walks the buckets and visits every item of a bucket once
// per turn. An item used since the hand last passed loses its `accessed` bit
// and stays; one that was not is evicted (without evictions, none is; expired
// ones still go), and so is one stored before evict_first_stored_before's
// mark, used or not. Locked items and `keep` are passed over. Two turns clear
// every bit, so finding nothing to evict in two turns means nothing can go;
// the search gives up after `lookahead` buckets without one.
bool Store::evict_down_to(Shard& shard, size_t bytes, RelTime now, const Item* keep,
                          size_t lookahead) {
  const uint64_t second_chance_from = evict_first_below_.load(std::memory_order_relaxed);
  size_t empty_moves = 0;
  while (shard.bytes > bytes) {
    bool evicted = false;
    shard.table.for_each_in_bucket(shard.hand, [&](Item* item) {
      if (item == keep) {
        // passed over
      } else if (item->locked) {
        ++shard.evict_passed_locked;
      } else if (!is_live(*item, now)) {
        reclaim(shard, item);
        evicted = true;
      } else if (!evictions_) {
        // live, and kept
      } else if (item->accessed && item->cas >= second_chance_from) {
        item->accessed = false;
      } else {
        SizeClassCounters& counters = shard.class_of(item);
        ++counters.evicted;
        if (item->exptime != 0) ++counters.evicted_nonzero;
        if (!item->fetched) ++counters.evicted_unfetched;
        counters.evicted_at = now;
        counters.evicted_time = now > item->atime ? now - item->atime : 0;
        if (eviction_observer_) report_eviction(*item, now);
        unlink(shard, item);
        evicted = true;
      }
    });
    shard.hand = (shard.hand + 1) & (shard.table.bucket_count() - 1);
    if (!evicted && ++empty_moves > lookahead) return false;
  }
  return true;
}

void Store::report_eviction(const Item& item, RelTime now) const {
  Eviction eviction;
  eviction.key = item.key();
  eviction.fetched = item.fetched;
  eviction.ttl = item.exptime == 0 ? -1 : int64_t{item.exptime} - int64_t{now};
  eviction.idle = now - item.atime;
  eviction.total_size = item.total_size();
  eviction.value_len = item.value_len;
  eviction_observer_->on_eviction(eviction);
}

void Store::reclaim(Shard& shard, Item* item) {
  reclaim(shard, item, hash_key(item->key(), hash_seed_));
}

void Store::reclaim(Shard& shard, Item* item, uint64_t hash) {
  SizeClassCounters& counters = shard.class_of(item);
  ++counters.reclaimed;
  if (!item->fetched) ++counters.expired_unfetched;
  unlink(shard, item, hash);
}

bool Store::crawl_needed(uint64_t* flush_cas_seen) {
  uint64_t flush_cas = flush_cas_.load(std::memory_order_relaxed);
  bool flushed = flush_cas != *flush_cas_seen || flush_time_.load(std::memory_order_relaxed) != 0;
  *flush_cas_seen = flush_cas;
  if (flushed) return true;
  for (auto& shard : shards_) {
    std::lock_guard lock(shard->mutex);
    if (shard->expiring > 0) return true;
  }
  return false;
}

// cursor = shard index << 32 | bucket index. Buckets keep their meaning
// when a table doubles (hash_table.h), so a cursor survives growth.
template <typename Visit, typename ShardDone>
uint64_t Store::walk_piece(uint64_t cursor, size_t budget, Visit&& visit, ShardDone&& shard_done) {
  uint64_t shard_index = cursor >> 32;
  size_t bucket = static_cast<uint32_t>(cursor);
  size_t shard_count = shards_.size();
  if (shard_index >= shard_count) return kScanDone;
  Shard& shard = *shards_[shard_index];
  std::lock_guard lock(shard.mutex);
  size_t seen = 0;
  for (; bucket < shard.table.bucket_count() && seen < budget; ++bucket) {
    shard.table.for_each_in_bucket(bucket, [&](Item* item) {
      ++seen;
      visit(shard, item);
    });
  }
  if (bucket < shard.table.bucket_count()) return shard_index << 32 | bucket;
  shard_done(shard);
  return shard_index + 1 < shard_count ? (shard_index + 1) << 32 : kScanDone;
}

uint64_t Store::crawl(uint64_t cursor, size_t budget) {
  RelTime now = clock_.now();
  auto visit = [&](Shard& shard, Item* item) {
    Shard::ClassCounters& counters = shard.class_of(item);
    ++counters.crawler_items_checked;
    if (!is_live(*item, now)) {
      ++counters.crawler_reclaimed;
      reclaim(shard, item);
      return;
    }
    if (counters.crawl_oldest == 0 || item->atime < counters.crawl_oldest) {
      counters.crawl_oldest = item->atime;
    }
  };
  auto shard_done = [](Shard& shard) {
    for (auto& counters : shard.classes) {
      if (counters) counters->oldest_access = std::exchange(counters->crawl_oldest, 0);
    }
  };
  return walk_piece(cursor, budget, visit, shard_done);
}

ItemRef Store::allocate(std::string_view key, uint32_t flags, RelTime exptime,
                        size_t value_len) const {
  if (value_len > max_item_size_ || key.size() > kMaxKeyLength) return {};
  return ItemRef(item_allocate(key, flags, exptime, value_len));
}

void Store::note_access(Item* item, RelTime now) {
  item->accessed = true;
  item->fetched = true;
  item->atime = now;
}

ItemRef Store::get(std::string_view key) {
  ItemRef found;
  read(key, [&found](Item& item) { found = ItemRef::share(&item); });
  return found;
}

bool Store::read_at(RelTime now, std::string_view key, uint64_t hash, void (*call)(void*, Item&),
                    void* reader) {
  Lookup found(*this, key, hash, now);
  if (!found.item) return false;
  note_access(found.item, now);
  call(reader, *found.item);
  return true;
}

void Store::prefetch_buckets(const uint64_t* hashes, size_t count) const {
  for (size_t i = 0; i < count; ++i)
    shard_for(hashes[i]).table.prefetch(hashes[i]);
}

void Store::prefetch_item(uint64_t hash) const {
  Shard& shard = shard_for(hash);
  std::unique_lock lock(shard.mutex, std::try_to_lock);
  if (lock) shard.table.prefetch_item(hash);
}

ItemRef Store::touch(std::string_view key, RelTime exptime) {
  Lookup found(*this, key);
  if (!found.item) return {};
  retime(found.shard, found.item, exptime);
  note_access(found.item, found.now);
  return ItemRef::share(found.item);
}

MetaGetResult Store::meta_get(std::string_view key, const MetaGetRequest& request) {
  Lookup found(*this, key);
  MetaGetResult result;
  Item* item = found.item;
  if (!item && request.vivify) {
    // An empty placeholder that never expires until its N step says so:
    // the client that gets W fills it in.
    ItemRef placeholder = allocate(key, 0, 0, 0);
    if (placeholder && make_room(found.shard, placeholder->total_size(), 0, found.now, nullptr)) {
      placeholder->cas = next_cas();
      link(found.shard, found.hash, placeholder.get());
      item = placeholder.get();
      result.created = true;
    }
  }
  if (!item) return result;
  result.fetched_before = item->fetched;
  result.key_binary = item->key_binary;
  result.last_access = found.now - item->atime;
  result.token_was_sent = item->token_sent;
  result.stale = item->stale;
  bool won = result.created || (item->stale && !item->token_sent);
  for (size_t i = 0; i < request.action_count; ++i) {
    const MetaGetRequest::Action& action = request.actions[i];
    switch (action.step) {
      case MetaGetRequest::Step::kTouch:
        retime(found.shard, item, action.time);
        break;
      case MetaGetRequest::Step::kVivifyTtl:
        if (result.created) retime(found.shard, item, action.time);
        break;
      case MetaGetRequest::Step::kRecache:
        if (!item->token_sent && !result.created && item->exptime != 0 &&
            item->exptime < action.time) {
          won = true;
        }
        break;
      case MetaGetRequest::Step::kReadTtl:
        result.exptime_read = item->exptime;
        break;
    }
  }
  if (won && request.claims) item->token_sent = true;
  result.won = won && request.claims;
  if (request.bump) note_access(item, found.now);
  result.exptime = item->exptime;
  result.item = ItemRef::share(item);
  return result;
}

DeleteStatus Store::invalidate(std::string_view key, uint64_t compare_cas, OwnerId owner,
                               const RelTime* exptime) {
  Lookup found(*this, key);
  Item* item = found.item;
  if (!item) return DeleteStatus::kNotFound;
  if (found.shard.locked_against(item, owner)) return DeleteStatus::kLocked;
  if (compare_cas != 0 && client_cas(*item) != compare_cas) return DeleteStatus::kExists;
  ItemRef copy = copy_in_place(*item, exptime ? *exptime : item->exptime);
  if (!copy) return DeleteStatus::kNotFound;
  copy->stale = true;  // the next reader is told to recache (W), the rest Z
  copy->token_sent = false;
  copy->cas = next_cas();
  replace(found.shard, found.hash, item, copy.get(), /*counted=*/false);  // in place in memcached
  return DeleteStatus::kDeleted;
}

ItemRef Store::copy_in_place(const Item& item, RelTime exptime) const {
  ItemRef copy = allocate(item.key(), item.flags, exptime, item.value_len);
  if (!copy) return {};
  std::memcpy(copy->value(), item.value(), item.value_len);
  carry_meta_state(item, *copy);
  return copy;
}

ItemRef Store::combine(const Item& old_item, const Item& addition, bool append) const {
  size_t length = size_t{old_item.value_len} + addition.value_len;
  ItemRef combined = allocate(old_item.key(), old_item.flags, old_item.exptime, length);
  if (!combined) return {};
  const Item& first = append ? old_item : addition;
  const Item& second = append ? addition : old_item;
  std::memcpy(combined->value(), first.value(), first.value_len);
  std::memcpy(combined->value() + first.value_len, second.value(), second.value_len);
  return combined;
}

StoreResult Store::store(StoreCommand command, const ItemRef& item, uint64_t compare_cas,
                         OwnerId owner, bool mark_stale) {
  Lookup found(*this, item->key());
  Item* old_item = found.item;
  if (old_item && found.shard.locked_against(old_item, owner)) return {StoreStatus::kLocked};
  ItemRef to_link = item;
  switch (command) {
    case StoreCommand::kSet:
      break;
    case StoreCommand::kAdd:
      if (old_item) {
        old_item->accessed = true;  // like memcached, a failed add counts as a use
        return {StoreStatus::kNotStored};
      }
      break;
    case StoreCommand::kCas: {
      if (!old_item) return {StoreStatus::kNotFound};
      uint64_t current = client_cas(*old_item);
      if (compare_cas == 0 || current != compare_cas) {
        // memcached: an older CAS with "invalidate" still stores, as stale,
        // keeping the item's TTL and whether its win token went out (so
        // the next reader is not told to recache again). A CAS of 0 is no
        // older one: it is never a match.
        if (!mark_stale || compare_cas == 0 || compare_cas > current) {
          return {StoreStatus::kExists};
        }
        to_link->stale = true;
        to_link->exptime = old_item->exptime;
        to_link->token_sent = old_item->token_sent;
      }
      break;
    }
    case StoreCommand::kReplace:
    case StoreCommand::kAppend:
    case StoreCommand::kPrepend:
      if (!old_item) return {StoreStatus::kNotStored};
      if (cas_enabled_ && compare_cas != 0 && old_item->cas != compare_cas) {
        return {StoreStatus::kExists};
      }
      if (command != StoreCommand::kReplace) {
        to_link = combine(*old_item, *item, command == StoreCommand::kAppend);
        if (!to_link) return {StoreStatus::kNotStored};
      }
      break;
  }
  // The old version's bytes count as free for its replacement.
  size_t freed = old_item ? old_item->total_size() : 0;
  if (!make_room(found.shard, to_link->total_size(), freed, found.now, old_item)) {
    // A set that fails must not leave the old value for readers to find,
    // unless it is locked: its holder's failed set keeps it and the lock.
    if (old_item && command == StoreCommand::kSet && !old_item->locked) {
      unlink(found.shard, old_item, found.hash);
    }
    return {StoreStatus::kNoMemory};
  }
  to_link->cas = next_cas();
  replace(found.shard, found.hash, old_item, to_link.get());
  return {StoreStatus::kStored, client_cas(*to_link)};
}

DeleteStatus Store::remove(std::string_view key, uint64_t compare_cas, OwnerId owner) {
  Lookup found(*this, key);
  Item* item = found.item;
  if (!item) return DeleteStatus::kNotFound;
  if (found.shard.locked_against(item, owner)) return DeleteStatus::kLocked;
  if (compare_cas != 0 && client_cas(*item) != compare_cas) return DeleteStatus::kExists;
  unlink(found.shard, item, found.hash);
  return DeleteStatus::kDeleted;
}

ArithResult Store::arith(std::string_view key, const ArithRequest& request, OwnerId owner) {
  Lookup found(*this, key);
  Item* old_item = found.item;

  uint64_t value;
  size_t min_length = 0;
  uint32_t flags = 0;
  RelTime exptime = request.exptime;
  RelTime exptime_before = 0;
  if (!old_item) {
    if (!request.create) return {ArithStatus::kNotFound};
    value = request.initial;
  } else {
    if (found.shard.locked_against(old_item, owner)) return {ArithStatus::kLocked};
    // memcached refuses an empty value before it looks at the CAS.
    if (old_item->value_len == 0) return {ArithStatus::kNonNumeric};
    if (request.compare_cas != 0 && request.compare_cas != client_cas(*old_item)) {
      return {ArithStatus::kExists};
    }
    if (!read_unsigned_decimal(old_item->value_view(), &value)) return {ArithStatus::kNonNumeric};
    if (request.increment) {
      value += request.delta;  // wraps at 2^64, as memcached
    } else {
      value = request.delta > value ? 0 : value - request.delta;
    }
    // memcached rewrites a shorter number in place, padded with spaces.
    min_length = old_item->value_len;
    flags = old_item->flags;
    exptime = exptime_before = old_item->exptime;
  }
  if (request.set_exptime && !(old_item == nullptr && request.creation_ttl_last)) {
    exptime = request.new_exptime;
  }

  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  size_t length = static_cast<size_t>(end - digits);
  if (length > min_length) min_length = length;
  // A new item every time: readers may still be sending the old one.
  ItemRef fresh = allocate(key, flags, exptime, min_length);
  if (!fresh) return {ArithStatus::kNoMemory};
  std::memcpy(fresh->value(), digits, length);
  // memcached rewrites a number that still fits in place, so the item's
  // meta state (stale, win token, binary key) carries over, and it counts
  // no new item; a longer one is a new, plain item there too.
  bool in_place = old_item && length <= old_item->value_len;
  if (in_place) carry_meta_state(*old_item, *fresh);
  std::memset(fresh->value() + length, ' ', min_length - length);
  size_t freed = old_item ? old_item->total_size() : 0;
  if (!make_room(found.shard, fresh->total_size(), freed, found.now, old_item)) {
    return {ArithStatus::kNoMemory};
  }
  fresh->cas = next_cas();
  replace(found.shard, found.hash, old_item, fresh.get(), !in_place);
  return {ArithStatus::kOk, value, client_cas(*fresh), exptime, exptime_before,
          old_item == nullptr};
}

void Store::retime(Shard& shard, Item* item, RelTime exptime) {
  shard.set_exptime(item, exptime);
  if (ChangeListener* listener = this->listener()) listener->on_store(*item);
}

void Store::set_lock(Shard& shard, Item* item, OwnerId owner) {
  item->locked = true;
  shard.owners.emplace(item, LockHolder{owner, clock_.now()});
  ++shard.locked;
}

void Store::clear_lock(Shard& shard, Item* item) {
  item->locked = false;
  shard.owners.erase(item);
  --shard.locked;
  item->accessed = true;
}

LockStatus Store::lock(std::string_view key, OwnerId owner) {
  LockStatus status;
  lock_and_get(key, owner, nullptr, &status);
  return status;
}

ItemRef Store::lock_and_get(std::string_view key, OwnerId owner, const RelTime* exptime,
                            LockStatus* status) {
  Lookup found(*this, key);
  Item* item = found.item;
  if (!item) {
    *status = LockStatus::kNotFound;
    return {};
  }
  // Not re-entrant, as yrmcds: the holder locking again is refused too.
  if (item->locked) {
    *status = LockStatus::kLocked;
    return {};
  }
  set_lock(found.shard, item, owner);
  if (exptime) retime(found.shard, item, *exptime);
  *status = LockStatus::kOk;
  note_access(item, found.now);
  return ItemRef::share(item);
}

OwnerId Store::lock_owner(std::string_view key) {
  Lookup found(*this, key);
  return found.item ? found.shard.owner_of(found.item) : kNoOwner;
}

LockStatus Store::unlock(std::string_view key, OwnerId owner) {
  Lookup found(*this, key);
  Item* item = found.item;
  if (!item) return LockStatus::kNotFound;
  if (found.shard.owner_of(item) != owner) return LockStatus::kNotLocked;
  clear_lock(found.shard, item);
  if (is_flushed(*item, found.now)) {
    // A flush_all while it was locked spared it, and unlocking must not
    // apply that flush after the fact: the item counts as stored now, with
    // a new CAS.
    ItemRef copy = copy_in_place(*item, item->exptime);
    if (copy) {
      copy->cas = next_cas();
      replace(found.shard, found.hash, item, copy.get(), /*counted=*/false);  // the same item
    }
  }
  return LockStatus::kOk;
}

StoreResult Store::replace_and_unlock(const ItemRef& item, uint64_t compare_cas, OwnerId owner) {
  Lookup found(*this, item->key());
  Item* old_item = found.item;
  if (!old_item) return {StoreStatus::kNotFound};
  if (found.shard.owner_of(old_item) != owner) return {StoreStatus::kNotLocked};
  if (cas_enabled_ && compare_cas != 0 && old_item->cas != compare_cas) {
    return {StoreStatus::kExists};
  }
  if (!make_room(found.shard, item->total_size(), old_item->total_size(), found.now, old_item)) {
    return {StoreStatus::kNoMemory};
  }
  clear_lock(found.shard, old_item);
  item->cas = next_cas();
  replace(found.shard, found.hash, old_item, item.get());
  return {StoreStatus::kStored, client_cas(*item)};
}

std::vector<LockedItem> Store::locked_items(std::string_view prefix) const {
  std::vector<LockedItem> locked;
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->mutex);
    for (const auto& [item, holder] : shard->owners) {
      std::string_view key = item->key();
      if (key.substr(0, prefix.size()) == prefix) {
        locked.push_back({std::string(key), holder.owner, holder.since});
      }
    }
  }
  return locked;
}

size_t Store::release_all_locks() {
  size_t released = 0;
  for (auto& shard : shards_) {
    std::lock_guard lock(shard->mutex);
    while (!shard->owners.empty()) {
      // The map names its items const; the shard's lock makes them this
      // thread's to change.
      clear_lock(*shard, const_cast<Item*>(shard->owners.begin()->first));
      ++released;
    }
  }
  return released;
}

uint64_t Store::scan_keys(uint64_t cursor, std::string_view prefix, size_t budget,
                          const std::function<void(std::string_view)>& visit) {
  RelTime now = clock_.now();
  return walk_piece(cursor, budget, [&](Shard&, Item* item) {
    std::string_view key = item->key();
    if (is_live(*item, now) && key.substr(0, prefix.size()) == prefix) visit(key);
  });
}

uint64_t Store::walk_items(uint64_t cursor, size_t budget,
                           const std::function<void(const Item&)>& visit) {
  RelTime now = clock_.now();
  return walk_piece(cursor, budget, [&](Shard&, Item* item) {
    if (is_live(*item, now)) visit(*item);
  });
}

void Store::flush_all(int64_t delay_seconds) {
  RelTime moment = delay_seconds <= 0 ? 0 : clock_.now() + static_cast<RelTime>(delay_seconds);
  ChangeListener* listener = this->listener();
  if (!listener) return start_flush(moment);
  // With a listener, the flush must fall between two changes of every key:
  // a store that got its CAS before the flush's must be reported before it,
  // one after it after it, or a replica would drop what the master kept (or
  // keep what it dropped). Holding every shard lock (in index order, the
  // only place that takes more than one) orders the flush against all of
  // them. flush_all is rare; without a listener it takes no lock at all.
  for (auto& shard : shards_)
    shard->mutex.lock();
  start_flush(moment);
  // Read again under the locks: it may have been removed meanwhile.
  if ((listener = this->listener())) {
    listener->on_flush(moment);
    // The flush spares locked items here, and a replica, which holds no
    // locks, would drop them: they follow the flush again. (A delayed
    // flush spares what is locked when it falls due, which the replica
    // learns only from the unlock, which stores the item anew.)
    if (moment == 0) {
      for (auto& shard : shards_)
        for (const auto& [item, owner] : shard->owners)
          listener->on_store(*item);
    }
  }
  for (auto& shard : shards_)
    shard->mutex.unlock();
}

void Store::raise_cas_counter(uint64_t cas) {
  uint64_t current = next_cas_.load(std::memory_order_relaxed);
  while (current < cas && !next_cas_.compare_exchange_weak(current, cas)) {
  }
}

bool Store::restore(const ItemRef& item, RelTime atime, bool accessed) {
  raise_cas_counter(item->cas);
  RelTime now = clock_.now();
  if (!is_live(*item, now)) return false;
  uint64_t hash = hash_key(item->key(), hash_seed_);
  Shard& shard = shard_for(hash);
  std::lock_guard lock(shard.mutex);
  Item* old_item = shard.table.find(hash, item->key());  // none: a file holds a key once
  size_t freed = old_item ? old_item->total_size() : 0;
  if (!make_room(shard, item->total_size(), freed, now, old_item)) return false;
  replace(shard, hash, old_item, item.get());
  item->atime = std::min(atime, now);
  item->accessed = accessed;
  return true;
}

void Store::reserve(size_t items) {
  for (auto& shard : shards_) {
    std::lock_guard lock(shard->mutex);
    shard->table.reserve(items / shards_.size());
  }
}

void Store::start_flush(RelTime moment) {
  if (moment == 0) {
    flush_time_.store(0, std::memory_order_relaxed);
    raise_flush_cas(next_cas());
  } else {
    flush_time_.store(moment, std::memory_order_relaxed);
  }
}

void Store::set_change_listener(ChangeListener* listener) {
  listener_.store(listener, std::memory_order_release);
  // Every call reads the listener under a shard lock and returns before
  // releasing it: once each lock has been taken once, none is in progress.
  for (auto& shard : shards_)
    std::lock_guard lock(shard->mutex);
}

void Store::set_memory_limit(size_t bytes) {
  RelTime now = clock_.now();
  for (auto& shard : shards_) {
    std::lock_guard lock(shard->mutex);
    shard->limit = shard->target = bytes / shards_.size();
    // A lower limit holds at once, as memcached's cache_memlimit frees
    // memory at once, not only when the next store needs room. Locked items
    // stay, so a shard full of them may stay over.
    evict_down_to(*shard, shard->limit, now, nullptr, 2 * shard->table.bucket_count());
  }
}

void Store::set_eviction_target(size_t bytes) {
  for (auto& shard : shards_) {
    std::lock_guard lock(shard->mutex);
    shard->target = std::min(shard->limit, bytes / shards_.size());
  }
}

StoreStats Store::stats() const {
  StoreStats stats;
  stats.shards = static_cast<unsigned>(shards_.size());
  for (const auto& shard_ptr : shards_) {
    Shard& shard = *shard_ptr;
    std::lock_guard lock(shard.mutex);
    stats.curr_items += shard.table.size();
    stats.total_items += shard.total_items;
    stats.bytes += shard.bytes;
    for (const auto& counters : shard.classes) {
      if (!counters) continue;
      stats.evictions += counters->evicted;
      stats.reclaimed += counters->reclaimed;
      stats.expired_unfetched += counters->expired_unfetched;
      stats.evicted_unfetched += counters->evicted_unfetched;
      stats.crawler_reclaimed += counters->crawler_reclaimed;
    }
    stats.limit_bytes += shard.limit;
    stats.target_bytes += shard.target;
    stats.locked_items += shard.locked;
    stats.found_expired += shard.found_expired;
    stats.found_flushed += shard.found_flushed;
    stats.evict_passed_locked += shard.evict_passed_locked;
    stats.hash_bytes += shard.table.bucket_bytes();
  }
  return stats;
}

std::vector<SizeClassStats> Store::class_stats() const {
  std::vector<SizeClassStats> classes(kSizeClassCount);
  for (const auto& shard_ptr : shards_) {
    Shard& shard = *shard_ptr;
    std::lock_guard lock(shard.mutex);
    for (size_t i = 0; i < kSizeClassCount; ++i) {
      if (!shard.classes[i]) continue;
      const SizeClassCounters& from = *shard.classes[i];
      SizeClassStats& to = classes[i];
      to.number += from.number;
      to.requested += from.requested;
      to.allocated += from.allocated;
      to.evicted += from.evicted;
      to.evicted_nonzero += from.evicted_nonzero;
      to.evicted_unfetched += from.evicted_unfetched;
      to.outofmemory += from.outofmemory;
      to.reclaimed += from.reclaimed;
      to.expired_unfetched += from.expired_unfetched;
      to.crawler_reclaimed += from.crawler_reclaimed;
      to.crawler_items_checked += from.crawler_items_checked;
      if (from.evicted_at > to.evicted_at) {  // the latest eviction of any shard
        to.evicted_at = from.evicted_at;
        to.evicted_time = from.evicted_time;
      }
      if (from.oldest_access != 0 &&
          (to.oldest_access == 0 || from.oldest_access < to.oldest_access)) {
        to.oldest_access = from.oldest_access;
      }
    }
  }
  RelTime now = clock_.now();
  for (unsigned id = 1; id <= kSizeClassCount; ++id) {
    SizeClassStats& stats = classes[id - 1];
    stats.id = id;
    stats.chunk_size = id < kLargestSizeClass ? size_class_size(id)
                                              : Item::size_for(kMaxKeyLength, max_item_size_);
    if (stats.number > 0 && stats.oldest_access != 0 && stats.oldest_access < now) {
      stats.age = now - stats.oldest_access;
    }
  }
  return classes;
}

void Store::reset_stats() {
  for (auto& shard_ptr : shards_) {
    Shard& shard = *shard_ptr;
    std::lock_guard lock(shard.mutex);
    shard.total_items = 0;
    shard.found_expired = shard.found_flushed = shard.evict_passed_locked = 0;
    for (auto& counters : shard.classes) {
      if (!counters) continue;
      Shard::ClassCounters kept;
      kept.number = counters->number;
      kept.requested = counters->requested;
      kept.allocated = counters->allocated;
      kept.oldest_access = counters->oldest_access;
      kept.crawl_oldest = counters->crawl_oldest;
      *counters = kept;
    }
  }
}

}  // namespace lockcached::store
