#include "lockcached/store/memory_governor.h"

#include <algorithm>

namespace lockcached::store {
namespace {

// Often enough that a client storing at full speed over loopback adds only
// a few megabytes between two readings; a reading costs microseconds.
constexpr int64_t kRoundMs = 20;
// After a cut, what each byte the heap grows takes off the target: chosen
// with MemoryE2e.ShiftingItemSizesKeepRssNearTheLimit (1: peaks of 115 MB
// for a 64 MB limit as sizes shift; the whole excess again: a cache of
// 100-byte values held 27 MB; 4: 49 MB, peaks under 97 MB).
constexpr size_t kGrowthCut = 4;

}  // namespace

size_t allowed_heap(size_t limit) {
  return limit + limit / 8 + (size_t{4} << 20);
}

EvictionTarget next_eviction_target(const MemoryReading& reading) {
  size_t allowed = allowed_heap(reading.limit);
  size_t floor = reading.limit / 8;
  if (reading.heap_resident > allowed && reading.heap_at_cut == 0) {
    // Newly over: the items must shrink by the excess, from what they take
    // now (evictions may not have caught up with the old target).
    size_t excess = reading.heap_resident - allowed;
    size_t wanted = reading.item_bytes > excess ? reading.item_bytes - excess : 0;
    return {std::max(floor, std::min(reading.target, wanted)), reading.heap_resident};
  }
  if (reading.heap_resident > allowed) {
    // Cut already: only growth since the lowest heap after the cut lowers
    // the target again. Evicting items scattered over the allocator's
    // pages frees holes, not pages: the heap holds still while the items
    // shrink, and new items fill the holes. Cutting by the same excess
    // each round ran a cache of small values down to its floor, an eighth
    // of the limit, for good. Growth means the holes do not fit what is
    // stored now (item sizes shifted): freeing a page takes evicting every
    // item on it, several times its size in items scattered over many.
    size_t growth = reading.heap_resident > reading.heap_at_cut
                        ? reading.heap_resident - reading.heap_at_cut
                        : 0;
    size_t cut = std::min(reading.target, kGrowthCut * growth);
    // The next growth counts from here (the lowest since, or the new peak).
    return {std::max(floor, reading.target - cut), reading.heap_resident};
  }
  // Back up by half the room there is, once there is a fair amount, so
  // the target does not swing with every reading.
  size_t room = allowed - reading.heap_resident;
  if (room > reading.limit / 16) return {std::min(reading.limit, reading.target + room / 2), 0};
  return {reading.target, 0};
}

void MemoryGovernor::start() {
  if (!allocator_.resident || allocator_.resident() == 0) return;
  loop_.start([this] { return round(); });
}

int64_t MemoryGovernor::round() {
  StoreStats stats = store_.stats();
  // Reading the allocator costs a few hundred thousand instructions (it
  // merges every arena's statistics); a store under half full with its
  // target at the limit has nothing to correct.
  if (stats.bytes < stats.limit_bytes / 2 && stats.target_bytes == stats.limit_bytes) {
    return kRoundMs;
  }
  MemoryReading reading{stats.limit_bytes, stats.bytes, stats.target_bytes, allocator_.resident(),
                        heap_at_cut_};
  if (reading.heap_resident > allowed_heap(reading.limit)) {
    allocator_.release_free_pages();
    reading.heap_resident = allocator_.resident();
  }
  EvictionTarget next = next_eviction_target(reading);
  heap_at_cut_ = next.heap_at_cut;
  if (next.target != reading.target) store_.set_eviction_target(next.target);
  return kRoundMs;
}

}  // namespace lockcached::store
