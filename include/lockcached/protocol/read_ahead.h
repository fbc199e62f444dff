// The pipelined gets of one read, fetched into the CPU cache ahead of their
// lookups. A protocol makes one on the stack for each read it consumes:
// a connection keeps nothing of it.
//
// A get's lookup misses the cache twice when the store is larger than it:
// the key's bucket, then the item the bucket leads to. Run one after the
// other, a pipeline of gets pays those misses one after the other too. So a
// protocol notes the gets of a read when it arrives (note(): the bucket of
// each is fetched at once, their misses overlapping), and tells ReadAhead
// which request runs (running(): the item of the next get is fetched,
// its bucket being in the cache by then), so that each get's item arrives
// while the request before it runs. bench/RESULTS.md has what it bought.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lockcached/core/command_core.h"

namespace lockcached::protocol {

class ReadAhead {
 public:
  // Gets noted per read at most: a pipeline's depth, with room to spare.
  static constexpr size_t kMaxGets = 32;

  explicit ReadAhead(const core::CommandCore& core) : core_(core) {}

  bool full() const { return count_ == kMaxGets; }
  // The get that starts at byte `offset` of the read reads `key`; its
  // bucket is fetched now. Offsets come in increasing order.
  void note(size_t offset, std::string_view key) {
    if (full()) return;
    uint64_t hash = core_.key_hash(key);
    core_.prefetch_bucket(hash);
    gets_[count_++] = {offset, hash};
  }
  // The request that starts at byte `offset` runs now: the item of the
  // first noted get after it is fetched.
  void running(size_t offset) {
    while (next_ < count_ && gets_[next_].offset <= offset)
      ++next_;
    if (next_ < count_) core_.prefetch_item(gets_[next_++].hash);
  }

 private:
  struct Get {
    size_t offset;
    uint64_t hash;
  };

  const core::CommandCore& core_;
  std::array<Get, kMaxGets> gets_;  // only the first count_ are ever read
  size_t count_ = 0;
  size_t next_ = 0;  // the first get whose item is not fetched yet
};

}  // namespace lockcached::protocol
