// The index of one shard: key -> item, in buckets of one cache line each.
//
// A bucket holds seven slots; a slot is an item pointer with 16 bits of the
// key's hash (a tag) in its unused top bits, so a lookup reads one line of
// the table and dereferences only the item whose tag matches: at 100,000
// keys a chained table (a pointer per bucket, a `next` in every item) read
// 1.38 items per hit, each a likely cache miss. A full bucket links an
// overflow bucket. The filled slots of a bucket and its overflow form a
// prefix (an erase moves the last entry into the hole), so a lookup stops at
// the first empty slot.
//
// An item stays in the bucket its hash picks until the table doubles, when
// bucket b splits into b and b + old size: cursors that walk the buckets
// (the CLOCK hand, the crawler, `keys`) keep their meaning across growth.
// Not thread-safe: the shard's mutex guards it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "lockcached/store/hash.h"
#include "lockcached/store/item.h"

namespace lockcached::store {

// Starts loading the cache line at `address`; never faults, whatever the
// address. An asm statement rather than __builtin_prefetch: GCC 12 deleted
// the builtin from HashTable::prefetch_item's loop, whose only effect it
// is (the function compiled to nothing at -O1 and -O2).
inline void prefetch_line(const void* address) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(address)));
#else
  __builtin_prefetch(address);
#endif
}

class HashTable {
 public:
  // Items per bucket, on average, before the table doubles: 3-6 of a bucket's
  // 7 slots are in use, 11-21 bytes of table per item. About 9% of the items
  // sit in an overflow bucket (a second line to read) just before a doubling,
  // and almost none just after.
  static constexpr size_t kMaxLoad = 6;

  // `seed` is the store's hash seed: growth rehashes keys with it.
  HashTable(uint64_t seed, size_t initial_buckets);
  ~HashTable();
  HashTable(const HashTable&) = delete;
  HashTable& operator=(const HashTable&) = delete;

  // The item stored under `key` (whose hash is `hash`), or nullptr.
  Item* find(uint64_t hash, std::string_view key) const {
    const uint64_t tag = tag_of(hash);
    for (const Bucket* bucket = &buckets_[hash & mask_]; bucket; bucket = bucket->overflow) {
      for (uint64_t slot : bucket->slots) {
        if (slot == 0) return nullptr;
        if ((slot & kTagMask) != tag) continue;
        Item* item = item_of(slot);
        if (item->key_len == key.size() && same_key(item->key_data(), key.data(), key.size()))
          return item;
      }
    }
    return nullptr;
  }

  // Starts loading the bucket of `hash` into the cache; callable without
  // the shard's lock (a multi-get fetches all its buckets before its first
  // lookup). It reads the table's place from atomic copies, which a
  // doubling may have just made stale or mismatched: a prefetch of memory
  // that is not the table's is harmless, it never faults.
  void prefetch(uint64_t hash) const {
    const Bucket* buckets = prefetch_buckets_.load(std::memory_order_relaxed);
    prefetch_line(buckets + (hash & prefetch_mask_.load(std::memory_order_relaxed)));
  }
  // Starts loading the first two lines (header, key and a small value) of
  // the first item in the bucket of `hash` whose tag matches: the item a
  // lookup of that key will read, unless another key's tag matched first
  // (one in 65,536 per slot; the prefetch is then in vain). Needs the
  // shard's lock, since it reads the bucket; it pays off when the bucket is
  // in the cache already (prefetch() came first).
  void prefetch_item(uint64_t hash) const {
    const uint64_t tag = tag_of(hash);
    for (uint64_t slot : buckets_[hash & mask_].slots) {
      if (slot == 0) return;
      if ((slot & kTagMask) != tag) continue;
      const char* item = reinterpret_cast<const char*>(item_of(slot));
      prefetch_line(item);
      prefetch_line(item + 64);
      return;
    }
  }

  // Adds an item whose key is not in the table; the table may double first.
  // Returns whether it did (bucket indexes then mean half as much).
  bool insert(uint64_t hash, Item* item);
  // Takes `item` (stored under `hash`) out; the caller still owns it.
  void erase(uint64_t hash, const Item* item);
  // Doubles an empty table now as often as `items` inserts would, so that
  // they rehash nothing (a warm restart knows how many items come).
  void reserve(size_t items) {
    while (items > kMaxLoad * bucket_count())
      grow();
  }

  size_t size() const { return size_; }
  size_t bucket_count() const { return mask_ + 1; }
  size_t bucket_bytes() const { return bucket_count() * sizeof(Bucket); }
  size_t bucket_of(uint64_t hash) const { return hash & mask_; }

  // Calls visit(Item*) once for every item in bucket `index`. visit may
  // erase the item it was given, and nothing else.
  template <class Visit>
  void for_each_in_bucket(size_t index, Visit&& visit) {
    Bucket* bucket = &buckets_[index];
    int i = 0;
    while (bucket) {
      if (i == Bucket::kSlots) {
        bucket = bucket->overflow;
        i = 0;
        continue;
      }
      uint64_t slot = bucket->slots[i];
      if (slot == 0) return;
      visit(item_of(slot));
      // Unchanged: go on. Erased: the chain's last entry moved here.
      if (bucket->slots[i] == slot) ++i;
    }
  }

 private:
  struct alignas(64) Bucket {
    static constexpr int kSlots = 7;
    uint64_t slots[kSlots] = {};
    Bucket* overflow = nullptr;  // kept, once made, until the table grows
  };
  static_assert(sizeof(Bucket) == 64, "a bucket is one cache line");

  // User-space pointers on Linux fit in 48 bits (unless a process asks mmap
  // for more), which leaves the top 16 bits of a slot for the tag.
  static constexpr uint64_t kTagMask = 0xffffULL << 48;
  // Bits 32-47 of the hash: the bucket takes the low bits, the shard the top.
  static uint64_t tag_of(uint64_t hash) { return (hash << 16) & kTagMask; }
  static Item* item_of(uint64_t slot) { return reinterpret_cast<Item*>(slot & ~kTagMask); }

  void place(uint64_t hash, Item* item);
  void grow();
  static void free_overflow(Bucket* buckets, size_t count);

  const uint64_t seed_;
  std::unique_ptr<Bucket[]> buckets_;
  size_t mask_;
  // buckets_ and mask_ for prefetch(), which holds no lock; grow() updates them.
  std::atomic<const Bucket*> prefetch_buckets_;
  std::atomic<size_t> prefetch_mask_;
  size_t size_ = 0;
};

}  // namespace lockcached::store
