#include "lockcached/store/crawler.h"

#include <algorithm>
#include <chrono>

namespace lockcached::store {
namespace {

// Items looked at per shard-lock hold: short enough that a client waiting
// for that shard never notices.
constexpr size_t kSliceItems = 512;
// Between passes: at least a second, and ten times what the last pass
// took, so the crawler stays under a tenth of a core on any store size.
constexpr int64_t kMinRestMs = 1000;
constexpr int64_t kMaxRestMs = 30000;

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void Crawler::start() {
  thread_ = std::thread([this] { run(); });
}

void Crawler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Crawler::pause(int64_t milliseconds) {
  std::unique_lock lock(mutex_);
  return !wake_.wait_for(lock, std::chrono::milliseconds(milliseconds),
                         [this] { return stopping_.load(); });
}

void Crawler::run() {
  do {
    int64_t started = now_ms();
    uint64_t cursor = 0;
    while (cursor != Store::kScanDone) {
      cursor = store_.crawl(cursor, kSliceItems);
      std::this_thread::yield();  // let clients have the shard locks between slices
      if (stopping_) return;
    }
    int64_t took = now_ms() - started;
    if (!pause(std::clamp(took * 10, kMinRestMs, kMaxRestMs))) return;
  } while (true);
}

}  // namespace lockcached::store
