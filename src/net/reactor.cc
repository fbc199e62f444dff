#include "lockcached/net/reactor.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

#include <glog/logging.h>

namespace lockcached::net {
namespace {

constexpr int kMaxEventsPerWait = 256;

// Marks the wake-up eventfd in epoll_event.data.ptr.
EventHandler* const kWakeMarker = nullptr;

}  // namespace

int64_t monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

Reactor::Reactor()
    : epoll_fd_(epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      now_ms_(monotonic_ms()) {
  PCHECK(epoll_fd_ >= 0) << "epoll_create1";
  PCHECK(wake_fd_ >= 0) << "eventfd";
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = kWakeMarker;
  PCHECK(epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event) == 0) << "epoll_ctl(eventfd)";
}

Reactor::~Reactor() {
  close(wake_fd_);
  close(epoll_fd_);
}

bool Reactor::add(int fd, uint32_t events, EventHandler* handler) {
  epoll_event event{};
  event.events = events;
  event.data.ptr = handler;
  return epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) == 0;
}

bool Reactor::modify(int fd, uint32_t events, EventHandler* handler) {
  epoll_event event{};
  event.events = events;
  event.data.ptr = handler;
  return epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &event) == 0;
}

void Reactor::remove(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

Reactor::TimerId Reactor::add_timer(int64_t delay_ms, Task task) {
  TimerId id = next_timer_id_++;
  timers_.push({monotonic_ms() + delay_ms, id});
  timer_tasks_.emplace(id, std::move(task));
  return id;
}

// The heap entry stays until its deadline and is skipped then: O(log n)
// without a heap that supports deletion.
void Reactor::cancel_timer(TimerId id) {
  timer_tasks_.erase(id);
}

void Reactor::post(Task task) {
  {
    std::lock_guard lock(posted_mutex_);
    posted_.push_back(std::move(task));
  }
  uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;  // EAGAIN means a wake-up is already pending
}

void Reactor::stop() {
  {
    std::lock_guard lock(posted_mutex_);
    stop_requested_ = true;
  }
  uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

int Reactor::next_timeout_ms() const {
  if (timers_.empty()) return -1;
  int64_t wait = timers_.top().deadline_ms - monotonic_ms();
  if (wait <= 0) return 0;
  return wait > INT_MAX ? INT_MAX : static_cast<int>(wait);
}

void Reactor::run_due_timers() {
  while (!timers_.empty() && timers_.top().deadline_ms <= now_ms_) {
    TimerId id = timers_.top().id;
    timers_.pop();
    auto found = timer_tasks_.find(id);
    if (found == timer_tasks_.end()) continue;  // cancelled
    Task task = std::move(found->second);
    timer_tasks_.erase(found);
    task();
  }
}

void Reactor::run_posted_tasks() {
  uint64_t count;
  ssize_t ignored = read(wake_fd_, &count, sizeof count);
  (void)ignored;
  std::vector<Task> tasks;
  {
    std::lock_guard lock(posted_mutex_);
    tasks.swap(posted_);
    stopping_ = stop_requested_;
  }
  for (Task& task : tasks)
    task();
}

void Reactor::run() {
  epoll_event events[kMaxEventsPerWait];
  while (!stopping_) {
    int count = epoll_wait(epoll_fd_, events, kMaxEventsPerWait, next_timeout_ms());
    now_ms_ = monotonic_ms();
    if (count < 0) {
      PCHECK(errno == EINTR) << "epoll_wait";
      continue;
    }
    for (int i = 0; i < count; ++i) {
      if (events[i].data.ptr == kWakeMarker) {
        run_posted_tasks();
      } else {
        static_cast<EventHandler*>(events[i].data.ptr)->on_event(events[i].events);
      }
    }
    run_due_timers();
    if (before_sleep_) before_sleep_();
  }
}

}  // namespace lockcached::net
