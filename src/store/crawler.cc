#include "lockcached/store/crawler.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace lockcached::store {
namespace {

// Items looked at per shard-lock hold: short enough that a client waiting
// for that shard never notices.
constexpr size_t kSliceItems = 512;
// Between passes: at least a second, and ten times what the last pass
// took, so the crawler stays under a tenth of a core on any store size.
constexpr int64_t kMinRestMs = 1000;
constexpr int64_t kMaxRestMs = 30000;
// A store with items gets a pass at least this often even when nothing can
// expire: each pass measures the size classes' age (Store::crawl). A pass
// starts once this much less one rest has gone by since the last began.
constexpr int64_t kAgePassMs = 60000;

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int64_t Crawler::pass() {
  // A store without TTLs pays for the walk only once a minute, to measure
  // age: visiting every item once a second would cost a cache-sized stream
  // of memory reads for nothing.
  if (!enabled()) return kMaxRestMs;  // set_enabled(true) wakes it
  int64_t started = now_ms();
  bool requested = pass_requested_.exchange(false, std::memory_order_relaxed);
  if (!store_.crawl_needed(&flush_cas_seen_) && !requested &&
      (started - last_pass_ms_ < kAgePassMs - kMinRestMs || store_.stats().curr_items == 0)) {
    return kMinRestMs;
  }
  last_pass_ms_ = started;
  uint64_t cursor = 0;
  while (cursor != Store::kScanDone && !loop_.stopping() && enabled()) {
    cursor = store_.crawl(cursor, kSliceItems);
    std::this_thread::yield();  // let clients have the shard locks between slices
  }
  return std::clamp((now_ms() - started) * 10, kMinRestMs, kMaxRestMs);
}

}  // namespace lockcached::store
