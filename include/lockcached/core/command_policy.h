// Which of the commands that reach beyond one key the operator allows, and
// how many requests a connection runs before the others on its thread get
// a turn: memcached's -F, -X, -W, -A and -R (--disable_flush_all,
// --disable_dumping, --disable_watch, --enable_shutdown,
// --max_reqs_per_event).
#pragma once

#include <cstdint>

namespace lockcached::core {

struct CommandPolicy {
  bool flush_all = true;  // flush_all, text and binary
  // The item and key dumps: stats cachedump, lru_crawler metadump, keys.
  bool dumps = true;
  bool watch = true;
  bool shutdown = false;  // `shutdown [graceful]`
  // Requests one connection runs per turn of its thread; 0: all those in
  // one read (at most 64 KiB of them).
  uint32_t requests_per_event = 0;
};

}  // namespace lockcached::core
