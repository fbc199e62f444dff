#include "lockcached/net/reactor_scheduler.h"

#include <algorithm>

namespace lockcached::net {

timing::Scheduler::TimerId ReactorScheduler::after(int64_t delay_ms, Task task) {
  TimerId id = next_id_.fetch_add(1, std::memory_order_relaxed);
  int64_t deadline = now_ms() + delay_ms;  // from now, not from when the reactor gets to it
  reactor_.post([this, id, deadline, task = std::move(task)]() mutable {
    int64_t delay = std::max<int64_t>(deadline - now_ms(), 0);
    armed_[id] = reactor_.add_timer(delay, [this, id, task = std::move(task)] {
      armed_.erase(id);
      task();
    });
  });
  return id;
}

void ReactorScheduler::cancel(TimerId id) {
  reactor_.post([this, id] {
    auto found = armed_.find(id);
    if (found == armed_.end()) return;  // it ran
    reactor_.cancel_timer(found->second);
    armed_.erase(found);
  });
}

}  // namespace lockcached::net
