// A reactor thread as a timing::Scheduler that any thread may use: timers
// are armed and cancelled by posting to the reactor, and run on its thread.
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
  // The delay counts from the call, though the reactor arms it a loop turn later.
  TimerId after(int64_t delay_ms, Task task) override;
  // Posted after the after() that returned `id`, so it finds the timer armed
  // (or already run).
  void cancel(TimerId id) override;

 private:
  Reactor& reactor_;
  std::atomic<TimerId> next_id_{1};
  std::unordered_map<TimerId, Reactor::TimerId> armed_;  // the reactor's thread only
};

}  // namespace lockcached::net
