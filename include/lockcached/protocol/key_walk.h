// The state of one `keys` walk over the store, shared by the text and the
// binary protocol: each step lists one bounded piece of the store.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lockcached/core/command_core.h"

namespace lockcached::protocol {

// Where a walk over the store is: its cursor, and whether it goes on.
class PieceWalk {
 public:
  bool active() const { return active_; }
  // Ends the walk before the store's end (a dump that reached its limit).
  void stop() { active_ = false; }

 protected:
  void restart() {
    cursor_ = 0;
    active_ = true;
  }
  // Runs next_piece(cursor), which returns the next cursor; returns true
  // when the walk just finished.
  template <typename NextPiece>
  bool advance(NextPiece next_piece) {
    cursor_ = next_piece(cursor_);
    active_ = cursor_ != store::Store::kScanDone;
    return !active_;
  }

 private:
  uint64_t cursor_ = 0;
  bool active_ = false;
};

class KeyWalk : public PieceWalk {
 public:
  void start(std::string_view prefix) {
    prefix_.assign(prefix);
    restart();
  }

  // Calls emit(key) for the keys of the next piece; returns true when the
  // walk just finished (the caller then sends its end marker).
  template <typename Emit>
  bool step(core::CommandCore& core, Emit emit) {
    return advance([&](uint64_t cursor) { return core.scan_keys(cursor, prefix_, emit); });
  }

 private:
  std::string prefix_;
};

// The live items, for `stats cachedump` and `lru_crawler metadump`.
class ItemWalk : public PieceWalk {
 public:
  void start() { restart(); }

  // Calls emit(item) for the live items of the next piece, under the
  // store's lock; returns true when the walk just finished.
  template <typename Emit>
  bool step(core::CommandCore& core, Emit emit) {
    return advance([&](uint64_t cursor) { return core.walk_items(cursor, emit); });
  }
};

}  // namespace lockcached::protocol
