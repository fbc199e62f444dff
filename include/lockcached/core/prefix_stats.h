// `stats detail on|off|dump`: memcached's per-prefix counters. A key's
// prefix is what comes before its first delimiter (memcached's
// stat_key_prefix, ':' unless -D names another); keys without one are not
// counted.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lockcached::core {

struct PrefixCounts {
  uint64_t gets = 0;
  uint64_t hits = 0;
  uint64_t sets = 0;
  uint64_t deletes = 0;
};

struct PrefixLine {
  std::string prefix;
  PrefixCounts counts;
};

class PrefixStats {
 public:
  // Beyond this many prefixes new ones are not counted: a client choosing
  // keys must not grow the table without bound while detail is on.
  static constexpr size_t kMaxPrefixes = 100000;

  // Off by default, as in memcached; memcached's -D turns it on from the start.
  explicit PrefixStats(char delimiter = ':', bool enabled = false)
      : delimiter_(delimiter), enabled_(enabled) {}

  char delimiter() const { return delimiter_; }

  // While off, recording costs one relaxed load.
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }

  void record_get(std::string_view key, bool hit) {
    if (enabled()) add(key, 1, hit ? 1 : 0, 0, 0);
  }
  void record_set(std::string_view key) {
    if (enabled()) add(key, 0, 0, 1, 0);
  }
  void record_delete(std::string_view key) {
    if (enabled()) add(key, 0, 0, 0, 1);
  }

  // Every prefix counted so far, in the order first seen; kept when detail
  // is turned off, as memcached keeps them.
  std::vector<PrefixLine> dump() const;
  // memcached's text of the dump, which both protocols send as it is:
  // "PREFIX <prefix> get N hit N set N del N\r\n" per prefix, then "END\r\n".
  std::string dump_text() const;
  // `stats reset` clears them too.
  void clear();

 private:
  void add(std::string_view key, uint64_t gets, uint64_t hits, uint64_t sets, uint64_t deletes);

  const char delimiter_;
  std::atomic<bool> enabled_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, size_t> index_;  // prefix -> position in lines_
  std::vector<PrefixLine> lines_;
};

}  // namespace lockcached::core
