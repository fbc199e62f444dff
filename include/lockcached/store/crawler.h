// The expiry crawler: a background thread that walks the store a slice at a
// time and reclaims expired and flushed items nobody asks for, so that their
// memory comes back without a client touching them. Each pass also measures
// the size classes' age (Store::crawl); a store with items gets a pass at
// least once a minute for that, expiring items or not.
#pragma once

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

 private:
  // One walk over every shard; returns how long to rest after it.
  int64_t pass();

  Store& store_;
  uint64_t flush_cas_seen_ = 0;           // see Store::crawl_needed
  int64_t last_pass_ms_ = INT64_MIN / 2;  // when the last pass began (steady clock)
  BackgroundLoop loop_;
};

}  // namespace lockcached::store
