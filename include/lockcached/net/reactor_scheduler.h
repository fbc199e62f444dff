// A reactor thread as a timing::Scheduler that any thread may use: timers
// are armed and cancelled on the reactor's thread, directly when the caller
// is in its turn, else by posting to it; they run on its thread.
// A single server's lock service keeps its timers here (waits' timeouts,
// detached sessions' grace: locks::LocalCoordinator).
#pragma once

#include <atomic>
#include <unordered_map>

#include "lockcached/net/reactor.h"
#include "lockcached/timing/scheduler.h"

namespace lockcached::net {

class ReactorScheduler final : public timing::Scheduler {
 public:
  explicit ReactorScheduler(Reactor& reactor) : reactor_(reactor) {}

  int64_t now_ms() const override { return monotonic_ms(); }
  // The delay counts from the call, though from another thread the reactor
  // arms it a loop turn later.
  TimerId after(int64_t delay_ms, Task task) override;
  // A timer not armed yet was posted by an after() from another thread: the
  // cancel is posted behind it, so it finds the timer armed (or already run).
  void cancel(TimerId id) override;

 private:
  void arm(TimerId id, int64_t delay_ms, Task task);
  bool disarm(TimerId id);  // false: not armed (yet, or any more)

  Reactor& reactor_;
  std::atomic<TimerId> next_id_{1};
  std::unordered_map<TimerId, Reactor::TimerId> armed_;  // the reactor's thread only
};

}  // namespace lockcached::net
