#include "lockcached/store/background_loop.h"

#include <chrono>

namespace lockcached::store {

void BackgroundLoop::start(Round round) {
  thread_ = std::thread([this, round = std::move(round)] {
    while (!stopping()) {
      int64_t rest_ms = round();
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(rest_ms),
                     [this] { return stopping() || woken_; });
      woken_ = false;
    }
  });
}

void BackgroundLoop::wake() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  wake_.notify_all();
}

void BackgroundLoop::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace lockcached::store
