// The expiry crawler: a background thread that walks the store a slice at a
// time and reclaims expired and flushed items nobody asks for, so that their
// memory comes back without a client touching them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "lockcached/store/store.h"

namespace lockcached::store {

class Crawler {
 public:
  explicit Crawler(Store& store) : store_(store) {}
  ~Crawler() { stop(); }
  Crawler(const Crawler&) = delete;
  Crawler& operator=(const Crawler&) = delete;

  void start();
  void stop();

 private:
  void run();
  // Waits up to `milliseconds`; false once stop() was called.
  bool pause(int64_t milliseconds);

  Store& store_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};
};

}  // namespace lockcached::store
