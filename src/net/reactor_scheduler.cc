#include "lockcached/net/reactor_scheduler.h"

#include <algorithm>

namespace lockcached::net {

timing::Scheduler::TimerId ReactorScheduler::after(int64_t delay_ms, Task task) {
  TimerId id = next_id_.fetch_add(1, std::memory_order_relaxed);
  // A lock-service wait sets its timer on its own turn on a single-threaded
  // server: a post there cost a task, a vector slot and a second closure.
  if (reactor_.in_turn()) {
    arm(id, delay_ms, std::move(task));
    return id;
  }
  int64_t deadline = now_ms() + delay_ms;  // from now, not from when the reactor gets to it
  reactor_.post([this, id, deadline, task = std::move(task)]() mutable {
    arm(id, std::max<int64_t>(deadline - now_ms(), 0), std::move(task));
  });
  return id;
}

void ReactorScheduler::cancel(TimerId id) {
  if (reactor_.in_turn() && disarm(id)) return;
  reactor_.post([this, id] { disarm(id); });
}

void ReactorScheduler::arm(TimerId id, int64_t delay_ms, Task task) {
  armed_[id] = reactor_.add_timer(delay_ms, [this, id, task = std::move(task)] {
    armed_.erase(id);
    task();
  });
}

bool ReactorScheduler::disarm(TimerId id) {
  auto found = armed_.find(id);
  if (found == armed_.end()) return false;  // it ran, or its arming is still posted
  reactor_.cancel_timer(found->second);
  armed_.erase(found);
  return true;
}

}  // namespace lockcached::net
