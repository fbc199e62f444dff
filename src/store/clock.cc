#include "lockcached/store/clock.h"

#include <time.h>

namespace lockcached::store {
namespace {

constexpr int64_t kMaxRelativeExptime = 60 * 60 * 24 * 30;
// Start far from 0: RelTime 1 ("expired") is then strictly in the past,
// and a warm restart (replication/memory_file.h) can put back last accesses
// from before the start, up to 2^24 s (194 days, what its file keeps).
constexpr int64_t kStartOffset = int64_t{1} << 24;

constexpr int64_t kNanosPerSecond = 1'000'000'000;

int64_t nanoseconds(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * kNanosPerSecond + ts.tv_nsec;
}

// Rounds towards minus infinity (a clock before 1970 stays consistent).
int64_t floor_seconds(int64_t ns) {
  int64_t seconds = ns / kNanosPerSecond;
  return ns % kNanosPerSecond < 0 ? seconds - 1 : seconds;
}

}  // namespace

ClockReadings read_system_clocks() {
  // The coarse clocks move only at a tick, and then together: with the same
  // monotonic reading on both sides, realtime - monotonic is the kernel's
  // exact offset, so two processes compute the same one.
  ClockReadings readings;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int64_t before = nanoseconds(CLOCK_MONOTONIC_COARSE);
    readings = ClockReadings{nanoseconds(CLOCK_REALTIME_COARSE),
                             nanoseconds(CLOCK_MONOTONIC_COARSE)};
    if (before == readings.monotonic_ns) break;
  }
  return readings;
}

Clock::Clock(ClockReadings start) {
  int64_t offset_ns = start.realtime_ns - start.monotonic_ns;
  int64_t offset_seconds = floor_seconds(offset_ns);
  phase_ns_ = offset_ns - offset_seconds * kNanosPerSecond;
  monotonic_zero_ = floor_seconds(start.monotonic_ns + phase_ns_) - kStartOffset;
  // unix_zero_ + at_monotonic(m) = floor(m + offset) = floor(realtime).
  unix_zero_ = monotonic_zero_ + offset_seconds;
}

RelTime Clock::at_monotonic(int64_t monotonic_ns) const {
  return static_cast<RelTime>(floor_seconds(monotonic_ns + phase_ns_) - monotonic_zero_);
}

RelTime Clock::now() const { return at_monotonic(nanoseconds(CLOCK_MONOTONIC_COARSE)); }

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
