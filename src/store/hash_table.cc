#include "lockcached/store/hash_table.h"

#include <cstdio>
#include <cstdlib>

namespace lockcached::store {
namespace {

size_t round_up_to_power_of_two(size_t n) {
  size_t size = 1;
  while (size < n)
    size *= 2;
  return size;
}

}  // namespace

HashTable::HashTable(uint64_t seed, size_t initial_buckets)
    : seed_(seed),
      buckets_(std::make_unique<Bucket[]>(round_up_to_power_of_two(initial_buckets))),
      mask_(round_up_to_power_of_two(initial_buckets) - 1),
      prefetch_buckets_(buckets_.get()),
      prefetch_mask_(mask_) {}

HashTable::~HashTable() {
  free_overflow(buckets_.get(), bucket_count());
}

bool HashTable::insert(uint64_t hash, Item* item) {
  bool grew = false;
  if (size_ >= kMaxLoad * bucket_count()) {
    grow();
    grew = true;
  }
  place(hash, item);
  ++size_;
  return grew;
}

void HashTable::place(uint64_t hash, Item* item) {
  uint64_t pointer = reinterpret_cast<uint64_t>(item);
  if (pointer & kTagMask) {
    std::fprintf(stderr, "lockcached: item address %p has more than 48 bits\n",
                 static_cast<void*>(item));
    std::abort();
  }
  uint64_t slot = pointer | tag_of(hash);
  for (Bucket* bucket = &buckets_[hash & mask_];; bucket = bucket->overflow) {
    for (uint64_t& free_slot : bucket->slots) {
      if (free_slot == 0) {
        free_slot = slot;
        return;
      }
    }
    if (!bucket->overflow) bucket->overflow = new Bucket;
  }
}

void HashTable::erase(uint64_t hash, const Item* item) {
  // Find the item's slot, then the chain's last entry, which fills the hole.
  Bucket* hole_bucket = nullptr;
  int hole = 0;
  Bucket* last_bucket = nullptr;
  int last = 0;
  for (Bucket* bucket = &buckets_[hash & mask_]; bucket; bucket = bucket->overflow) {
    int i = 0;
    for (; i < Bucket::kSlots && bucket->slots[i] != 0; ++i) {
      if (item_of(bucket->slots[i]) == item) {
        hole_bucket = bucket;
        hole = i;
      }
      last_bucket = bucket;
      last = i;
    }
    if (i < Bucket::kSlots) break;  // the first empty slot ends the chain
  }
  if (!hole_bucket) return;
  hole_bucket->slots[hole] = last_bucket->slots[last];
  last_bucket->slots[last] = 0;
  --size_;
}

void HashTable::grow() {
  size_t old_count = bucket_count();
  std::unique_ptr<Bucket[]> old = std::move(buckets_);
  buckets_ = std::make_unique<Bucket[]>(old_count * 2);
  mask_ = old_count * 2 - 1;
  prefetch_buckets_.store(buckets_.get(), std::memory_order_relaxed);
  prefetch_mask_.store(mask_, std::memory_order_relaxed);
  for (size_t b = 0; b < old_count; ++b) {
    for (const Bucket* bucket = &old[b]; bucket; bucket = bucket->overflow) {
      for (uint64_t slot : bucket->slots) {
        if (slot == 0) break;
        Item* item = item_of(slot);
        place(hash_key(item->key(), seed_), item);
      }
    }
  }
  free_overflow(old.get(), old_count);
}

void HashTable::free_overflow(Bucket* buckets, size_t count) {
  for (size_t b = 0; b < count; ++b) {
    Bucket* overflow = buckets[b].overflow;
    while (overflow) {
      Bucket* next = overflow->overflow;
      delete overflow;
      overflow = next;
    }
  }
}

}  // namespace lockcached::store
