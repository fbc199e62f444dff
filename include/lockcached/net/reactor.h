// The event loop: one epoll set, timers, and a wake-up channel for work
// handed over from other threads. One per reactor thread; everything
// registered with it is touched by that thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <unordered_map>
#include <vector>

namespace lockcached::net {

// Whatever owns a file descriptor and wants its readiness events.
class EventHandler {
 public:
  virtual ~EventHandler() = default;
  virtual void on_event(uint32_t events) = 0;
};

class Reactor {
 public:
  using Task = std::function<void()>;
  using TimerId = uint64_t;

  Reactor();
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // events: EPOLLIN / EPOLLOUT (level-triggered). False if epoll refuses.
  bool add(int fd, uint32_t events, EventHandler* handler);
  bool modify(int fd, uint32_t events, EventHandler* handler);
  void remove(int fd);

  // Runs `task` once after `delay_ms` on this reactor's thread.
  TimerId add_timer(int64_t delay_ms, Task task);
  void cancel_timer(TimerId id);

  // Thread-safe: runs `task` on this reactor's thread soon.
  void post(Task task);
  // Runs after each batch of events, before the loop sleeps again.
  void set_before_sleep(Task task) { before_sleep_ = std::move(task); }

  // monotonic_ms() as of the wake-up that delivered the events being handled:
  // one clock read per batch of events instead of one per event.
  int64_t now_ms() const { return now_ms_; }

  // Dispatches events until stop(); stop() may be called from any thread.
  void run();
  void stop();

 private:
  struct Timer {
    int64_t deadline_ms;
    TimerId id;
    bool operator>(const Timer& other) const { return deadline_ms > other.deadline_ms; }
  };

  int next_timeout_ms() const;
  void run_due_timers();
  void run_posted_tasks();

  int epoll_fd_;
  int wake_fd_;  // eventfd: post() and stop() write, the loop reads
  bool stopping_ = false;
  std::mutex posted_mutex_;
  std::vector<Task> posted_;
  bool stop_requested_ = false;  // guarded by posted_mutex_
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  std::unordered_map<TimerId, Task> timer_tasks_;  // a cancelled timer has no task
  TimerId next_timer_id_ = 1;
  int64_t now_ms_;
  Task before_sleep_;
};

int64_t monotonic_ms();

}  // namespace lockcached::net
