// What the store tells an observer about each item its CLOCK hand evicts
// (the `watch evictions` stream). Plain data: the store reports, it never
// formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lockcached::store {

struct Eviction {
  std::string_view key;  // valid only during the call
  bool fetched = false;  // read since it was stored
  int64_t ttl = -1;      // seconds left; -1: it never expired
  uint32_t idle = 0;     // seconds since its last access
  size_t total_size = 0; // Item::total_size()
  uint32_t value_len = 0;
};

// Called under the evicting shard's lock, from whichever thread made room:
// an implementation must be thread-safe, short, and must not call back
// into the store.
class EvictionObserver {
 public:
  virtual ~EvictionObserver() = default;
  virtual void on_eviction(const Eviction& eviction) = 0;
};

}  // namespace lockcached::store
