// A background thread that runs a round of work again and again, resting
// between rounds as long as the last round asked. stop() cuts a rest short,
// so shutdown never waits for one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace lockcached::store {

class BackgroundLoop {
 public:
  // One round; returns how many milliseconds to rest before the next.
  using Round = std::function<int64_t()>;

  BackgroundLoop() = default;
  ~BackgroundLoop() { stop(); }
  BackgroundLoop(const BackgroundLoop&) = delete;
  BackgroundLoop& operator=(const BackgroundLoop&) = delete;

  void start(Round round);
  void stop();
  // Cuts the current rest short: the next round starts now.
  void wake();
  // A long round checks this between its slices.
  bool stopping() const { return stopping_.load(std::memory_order_relaxed); }

 private:
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};
  bool woken_ = false;  // under mutex_
};

}  // namespace lockcached::store
