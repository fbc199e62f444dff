// -v / -vv: how much the server logs about connections (1) and requests (2).
//
// One level per process, like glog's --v it replaces for our own messages:
// glog's FLAGS_v is a plain int that VLOG reads unsynchronized, so it cannot
// change while threads log. This one is an atomic that main sets from the
// flags, SIGHUP sets from a re-read flagfile and the `verbosity` command sets
// as memcached's does.
#pragma once

#include <atomic>

#include <glog/logging.h>

namespace lockcached::core {

inline std::atomic<int> log_verbosity{0};

// The `verbosity` command of either protocol: as memcached's, the level -v
// or -vv set at start (above 2 means 2), for the whole server.
inline void set_log_verbosity(unsigned level) {
  log_verbosity.store(level > 2 ? 2 : static_cast<int>(level), std::memory_order_relaxed);
}

inline bool verbose_at(int level) {
  return log_verbosity.load(std::memory_order_relaxed) >= level;
}

}  // namespace lockcached::core

// VLOG for lockcached's own -v/-vv messages.
#define LOCKCACHED_VLOG(level) LOG_IF(INFO, ::lockcached::core::verbose_at(level))
