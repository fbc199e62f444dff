#include "lockcached/store/memory_governor.h"

#include <algorithm>

namespace lockcached::store {
namespace {

// Often enough that a client storing at full speed over loopback adds only
// a few megabytes between two readings; a reading costs microseconds.
constexpr int64_t kRoundMs = 20;

}  // namespace

size_t allowed_heap(size_t limit) {
  return limit + limit / 8 + (size_t{4} << 20);
}

size_t next_eviction_target(const MemoryReading& reading) {
  size_t allowed = allowed_heap(reading.limit);
  size_t floor = reading.limit / 8;
  if (reading.heap_resident > allowed) {
    // From what the items take, not from the old target: while evictions
    // have not caught up yet, the same excess must not lower it twice.
    size_t excess = reading.heap_resident - allowed;
    size_t wanted = reading.item_bytes > excess ? reading.item_bytes - excess : 0;
    return std::max(floor, std::min(reading.target, wanted));
  }
  // Back up by half the room there is, once there is a fair amount, so
  // the target does not swing with every reading.
  size_t room = allowed - reading.heap_resident;
  if (room > reading.limit / 16) return std::min(reading.limit, reading.target + room / 2);
  return reading.target;
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
  MemoryReading reading{stats.limit_bytes, stats.bytes, stats.target_bytes, allocator_.resident()};
  if (reading.heap_resident > allowed_heap(reading.limit)) {
    allocator_.release_free_pages();
    reading.heap_resident = allocator_.resident();
  }
  size_t target = next_eviction_target(reading);
  if (target != reading.target) store_.set_eviction_target(target);
  return kRoundMs;
}

}  // namespace lockcached::store
