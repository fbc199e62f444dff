#include "lockcached/store/clock.h"

namespace lockcached::store {
namespace {

constexpr int64_t kMaxRelativeExptime = 60 * 60 * 24 * 30;
// Start far from 0: RelTime 1 ("expired") is then strictly in the past,
// and a warm restart (replication/memory_file.h) can put back last accesses
// from before the start, up to 2^24 s (194 days, what its file keeps).
constexpr int64_t kStartOffset = int64_t{1} << 24;

int64_t monotonic_seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return ts.tv_sec;
}

}  // namespace

Clock::Clock()
    : unix_zero_(static_cast<int64_t>(::time(nullptr)) - kStartOffset),
      monotonic_zero_(monotonic_seconds() - kStartOffset) {}

RelTime Clock::now() const {
  return static_cast<RelTime>(monotonic_seconds() - monotonic_zero_);
}

RelTime to_rel_time(int64_t exptime, const Clock& clock) {
  if (exptime == 0) return 0;
  if (exptime < 0) return 1;
  if (exptime > kMaxRelativeExptime) {
    int64_t rel = exptime - clock.unix_epoch_of_zero();
    return rel <= 1 ? 1 : static_cast<RelTime>(rel);
  }
  return static_cast<RelTime>(exptime + clock.now());
}

}  // namespace lockcached::store
