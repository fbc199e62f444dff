// Counters every protocol feeds, and the interface `stats` reads them through.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockcached::core {

class PrefixStats;

// X-macro: one list drives the counter fields, their sum and their names.
#define LOCKCACHED_THREAD_COUNTERS(X) \
  X(cmd_get)                          \
  X(cmd_set)                          \
  X(cmd_flush)                        \
  X(cmd_touch)                        \
  X(cmd_meta)                         \
  X(get_hits)                         \
  X(get_misses)                       \
  X(delete_misses)                    \
  X(delete_hits)                      \
  X(incr_misses)                      \
  X(incr_hits)                        \
  X(decr_misses)                      \
  X(decr_hits)                        \
  X(cas_misses)                       \
  X(cas_hits)                         \
  X(cas_badval)                       \
  X(touch_hits)                       \
  X(touch_misses)                     \
  X(store_too_large)                  \
  X(store_no_memory)                  \
  X(auth_cmds)                        \
  X(auth_errors)                      \
  X(idle_kicks)                       \
  X(cmd_lock)                         \
  X(lock_hits)                        \
  X(lock_misses)                      \
  X(lock_contended)                   \
  X(bytes_read)                       \
  X(bytes_written)                    \
  X(conn_yields)                      \
  X(conns_dead)

// Plain numbers: a snapshot or a sum.
struct CounterValues {
#define LOCKCACHED_FIELD(name) uint64_t name = 0;
  LOCKCACHED_THREAD_COUNTERS(LOCKCACHED_FIELD)
#undef LOCKCACHED_FIELD
};

// Written by one reactor thread only, read by whoever answers `stats`, so a
// relaxed load and store is enough: no locked instruction on the hot path.
class Counter {
 public:
  void add(uint64_t n = 1) {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t load() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

struct ThreadStats {
#define LOCKCACHED_FIELD(name) Counter name;
  LOCKCACHED_THREAD_COUNTERS(LOCKCACHED_FIELD)
#undef LOCKCACHED_FIELD

  // Adds this thread's counters to `sum`.
  void add_to(CounterValues& sum) const;
};

void subtract(CounterValues& from, const CounterValues& baseline);

using StatList = std::vector<std::pair<std::string, std::string>>;

// kItems, kSlabs, kSizes: memcached's per-slab-class groups, here per
// size class of the allocator (store/size_classes.h).
enum class StatsGroup { kGeneral, kSettings, kReplication, kCluster, kItems, kSlabs, kSizes };

// What `stats` reports; the server wires the process-wide numbers behind it.
class StatsSource {
 public:
  virtual ~StatsSource() = default;
  virtual void collect(StatsGroup group, StatList& out) const = 0;
  virtual void reset() = 0;
  // `stats detail`'s counters; nullptr where there are none (test doubles).
  virtual PrefixStats* prefix_stats() { return nullptr; }
  // `stats conns`: a group per listening socket and connection ("ID:addr"
  // ...); `asking` is the connection that asks, which is executing it.
  virtual void collect_connections(uint64_t /*asking*/, StatList& /*out*/) const {}
  // `stats cachelocks [PREFIX]`: one line per locked cache object.
  virtual void collect_cache_locks(std::string_view /*prefix*/, StatList& /*out*/) const {}
};

}  // namespace lockcached::core
