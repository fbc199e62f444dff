// One owner of time for whoever must act later: timers and the clock they
// run on, behind an interface. A reactor thread implements it for the
// lock service of a single server, the Raft thread for a cluster's, and
// tests replace it with a clock they drive (ManualScheduler), so nothing
// that waits reads the wall clock itself.
#pragma once

#include <cstdint>
#include <functional>

namespace lockcached::timing {

// What time it is, for whoever must record it (a lock's acquisition).
class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds on a clock that never goes back (its origin is arbitrary).
  virtual int64_t now_ms() const = 0;
};

// The monotonic clock (CLOCK_MONOTONIC).
const Clock& steady_clock();

class Scheduler : public Clock {
 public:
  using Task = std::function<void()>;
  using TimerId = uint64_t;

  // Runs `task` once, `delay_ms` from now, on the scheduler's own thread.
  virtual TimerId after(int64_t delay_ms, Task task) = 0;
  // A timer that has not run yet never will; one that ran or is unknown: no-op.
  virtual void cancel(TimerId id) = 0;
};

}  // namespace lockcached::timing
