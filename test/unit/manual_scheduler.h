// A timing::Scheduler whose clock the test moves: advance() runs every
// timer that falls due, in order of its deadline, on the test's thread.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "lockcached/timing/scheduler.h"

namespace lockcached::testing {

class ManualScheduler final : public timing::Scheduler {
 public:
  int64_t now_ms() const override { return now_ms_; }
  TimerId after(int64_t delay_ms, Task task) override {
    TimerId id = next_id_++;
    timers_.emplace(std::make_pair(now_ms_ + delay_ms, id), std::move(task));
    return id;
  }
  void cancel(TimerId id) override {
    for (auto timer = timers_.begin(); timer != timers_.end(); ++timer) {
      if (timer->first.second == id) {
        timers_.erase(timer);
        return;
      }
    }
  }
  // Moves the clock `ms` on, running what falls due (a timer a task sets
  // that falls due too runs as well).
  void advance(int64_t ms) {
    int64_t until = now_ms_ + ms;
    while (!timers_.empty() && timers_.begin()->first.first <= until) {
      auto due = timers_.begin();
      now_ms_ = due->first.first;
      Task task = std::move(due->second);
      timers_.erase(due);
      task();
    }
    now_ms_ = until;
  }
  size_t pending() const { return timers_.size(); }

 private:
  int64_t now_ms_ = 1000;
  TimerId next_id_ = 1;
  std::map<std::pair<int64_t, TimerId>, Task> timers_;
};

}  // namespace lockcached::testing
