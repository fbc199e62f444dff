// Server time as the cache sees it: whole seconds since start-up.
#pragma once

#include <cstdint>
#include <ctime>

namespace lockcached::store {

// Seconds since the server started, offset so that 1 is always in the past
// (memcached maps "already expired" exptimes to 1, and we keep that
// convention) and so that times from before the start fit (clock.cc).
using RelTime = uint32_t;

// The two system clocks read together, in nanoseconds: what a Clock starts
// from.
struct ClockReadings {
  int64_t realtime_ns = 0;   // CLOCK_REALTIME(_COARSE): unix time
  int64_t monotonic_ns = 0;  // CLOCK_MONOTONIC(_COARSE): what now() counts
};

// Both coarse clocks, read with no clock tick between the two readings.
ClockReadings read_system_clocks();

class Clock {
 public:
  Clock() : Clock(read_system_clocks()) {}
  // Takes realtime - monotonic as one difference and ticks its seconds at
  // whole unix seconds: the unix time of a moment is then floor(realtime)
  // in every process on the machine, whatever phase of a second each
  // started at (a master and its replica agree on what an absolute exptime
  // means, and when a delayed flush_all takes effect).
  explicit Clock(ClockReadings start);
  virtual ~Clock() = default;

  // Monotonic: wall-clock jumps must not expire or revive items.
  virtual RelTime now() const;
  // The RelTime that a CLOCK_MONOTONIC reading stands for (now() reads it).
  RelTime at_monotonic(int64_t monotonic_ns) const;
  // The unix time that RelTime 0 stands for; converts absolute exptimes.
  int64_t unix_epoch_of_zero() const { return unix_zero_; }

 protected:
  int64_t unix_zero_;
  int64_t monotonic_zero_;
  // Where in a monotonic second the unix seconds begin, in [0, 1e9).
  int64_t phase_ns_;
};

// A clock that only moves when told to; for tests of expiry.
class ManualClock : public Clock {
 public:
  RelTime now() const override { return now_; }
  void advance(RelTime seconds) { now_ += seconds; }

 private:
  RelTime now_ = 2;
};

// memcached's rules: 0 never expires; up to 30 days is relative to now; more
// is an absolute unix time; negative (or an absolute time in the past) has
// already expired.
RelTime to_rel_time(int64_t exptime, const Clock& clock);

}  // namespace lockcached::store
