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

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int64_t Crawler::pass() {
  // A store without TTLs never pays for the walk: visiting every item once a
  // second would cost a cache-sized stream of memory reads for nothing.
  if (!store_.crawl_needed(&flush_cas_seen_)) return kMinRestMs;
  int64_t started = now_ms();
  uint64_t cursor = 0;
  while (cursor != Store::kScanDone && !loop_.stopping()) {
    cursor = store_.crawl(cursor, kSliceItems);
    std::this_thread::yield();  // let clients have the shard locks between slices
  }
  return std::clamp((now_ms() - started) * 10, kMinRestMs, kMaxRestMs);
}

}  // namespace lockcached::store
