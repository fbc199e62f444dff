// The state of one `keys` walk over the store, shared by the text and the
// binary protocol: each step lists one bounded piece of the store.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lockcached/core/command_core.h"

namespace lockcached::protocol {

class KeyWalk {
 public:
  void start(std::string_view prefix) {
    prefix_.assign(prefix);
    cursor_ = 0;
    active_ = true;
  }
  bool active() const { return active_; }

  // Calls emit(key) for the keys of the next piece; returns true when the
  // walk just finished (the caller then sends its end marker).
  template <typename Emit>
  bool step(core::CommandCore& core, Emit emit) {
    cursor_ = core.scan_keys(cursor_, prefix_, emit);
    active_ = cursor_ != store::Store::kScanDone;
    return !active_;
  }

 private:
  std::string prefix_;
  uint64_t cursor_ = 0;
  bool active_ = false;
};

}  // namespace lockcached::protocol
