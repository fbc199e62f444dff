// The expiry crawler: a background thread that walks the store a slice at a
// time and reclaims expired and flushed items nobody asks for, so that their
// memory comes back without a client touching them. Each pass also measures
// the size classes' age (Store::crawl); a store with items gets a pass at
// least once a minute for that, expiring items or not.
#pragma once

#include <atomic>
#include <cstdint>

#include "lockcached/store/background_loop.h"
#include "lockcached/store/store.h"

namespace lockcached::store {

class Crawler {
 public:
  explicit Crawler(Store& store) : store_(store) {}

  void start() {
    loop_.start([this] { return pass(); });
  }
  void stop() { loop_.stop(); }

  // memcached's `lru_crawler disable|enable`: a disabled crawler rests
  // until enabled again, and expired items then wait for a lookup or the
  // CLOCK hand. set_enabled returns whether it was the other way before.
  bool set_enabled(bool enabled) {
    bool was = enabled_.exchange(enabled, std::memory_order_relaxed);
    if (enabled && !was) loop_.wake();
    return was != enabled;
  }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  // `lru_crawler crawl`: a whole pass now, needed or not, instead of after
  // the rest.
  void crawl_now() {
    pass_requested_.store(true, std::memory_order_relaxed);
    loop_.wake();
  }

 private:
  // One walk over every shard; returns how long to rest after it.
  int64_t pass();

  Store& store_;
  std::atomic<bool> enabled_{true};
  std::atomic<bool> pass_requested_{false};
  uint64_t flush_cas_seen_ = 0;           // see Store::crawl_needed
  int64_t last_pass_ms_ = INT64_MIN / 2;  // when the last pass began (steady clock)
  BackgroundLoop loop_;
};

}  // namespace lockcached::store
