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
// What the notes found is not found again: running() gives the get its
// key's hash, and a text get where its line ends.
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

  // A noted get. Plain fields, no string_view: a ReadAhead is made for
  // every read, and its array must cost nothing to make (a string_view's
  // constructor, 32 times, cost 160 instructions per read at depth 1).
  struct Get {
    size_t offset;       // where it starts in the read
    size_t line_length;  // a text get's line, without its '\n' (0: binary)
    const char* key_data;
    size_t key_size;
    uint64_t hash;  // the key's (CommandCore::key_hash)
    std::string_view key() const { return {key_data, key_size}; }
  };

  explicit ReadAhead(const core::CommandCore& core) : core_(core) {}

  bool full() const { return count_ == kMaxGets; }
  // The get that starts at byte `offset` of the read reads `key`; its
  // bucket is fetched now. Offsets come in increasing order.
  void note(size_t offset, std::string_view key, size_t line_length = 0) {
    if (full()) return;
    uint64_t hash = core_.key_hash(key);
    core_.prefetch_bucket(hash);
    gets_[count_++] = {offset, line_length, key.data(), key.size(), hash};
  }
  // The request that starts at byte `offset` runs now: the item of the
  // first noted get after it is fetched. Returns the request's own note,
  // or nullptr when it has none. Offsets come in increasing order.
  const Get* running(size_t offset) {
    const Get* self = nullptr;
    while (next_ < count_ && gets_[next_].offset <= offset) {
      if (gets_[next_].offset == offset) self = &gets_[next_];
      ++next_;
    }
    if (next_ < count_ && fetched_ <= next_) {
      core_.prefetch_item(gets_[next_].hash);
      fetched_ = next_ + 1;
    }
    return self;
  }

 private:
  const core::CommandCore& core_;
  std::array<Get, kMaxGets> gets_;  // only the first count_ are ever read
  size_t count_ = 0;
  size_t next_ = 0;     // the first get after the running request
  size_t fetched_ = 0;  // the first get whose item is not fetched yet
};

}  // namespace lockcached::protocol
