#include "lockcached/net/reactor.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <climits>
#include <ctime>
#include <utility>

#include <glog/logging.h>

#include "poller.h"

namespace lockcached::net {

int64_t monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

std::string_view io_backend_name(IoBackend backend) {
  return backend == IoBackend::kUring ? "uring" : "epoll";
}

namespace {
// The reactor whose run_once this thread is in, if any: a post() from there
// needs no wake-up, since the loop looks at its queue before it sleeps.
thread_local const Reactor* running_reactor = nullptr;
}  // namespace

// Only notes the wake-up: posted tasks run after the whole batch of events
// is dispatched (run_once), so that a task that frees a handler never frees
// one that a later event of the same batch still names.
class Reactor::Waker final : public EventHandler {
 public:
  explicit Waker(bool& woken) : woken_(woken) {}
  void on_event(uint32_t) override { woken_ = true; }

 private:
  bool& woken_;
};

bool Reactor::uring_available(UringOptions uring, std::string* why) {
  return make_uring_poller(uring, why) != nullptr;
}

Reactor::Reactor(IoBackend backend, UringOptions uring)
    : wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      waker_(std::make_unique<Waker>(woken_)),
      now_ms_(monotonic_ms()) {
  if (backend == IoBackend::kUring) {
    std::string why;
    poller_ = make_uring_poller(uring, &why);
    CHECK(poller_) << "io_uring: " << why;  // callers check uring_available() first
  } else {
    poller_ = std::make_unique<EpollPoller>();
  }
  completes_io_ = poller_->completes_io();
  PCHECK(wake_fd_ >= 0) << "eventfd";
  PCHECK(poller_->add(wake_fd_, EPOLLIN, waker_.get())) << "watching the wake-up eventfd";
}

Reactor::~Reactor() {
  poller_.reset();
  close(wake_fd_);
}

bool Reactor::add(int fd, uint32_t events, EventHandler* handler) {
  return poller_->add(fd, events, handler);
}

bool Reactor::modify(int fd, uint32_t events, EventHandler* handler) {
  return poller_->modify(fd, events, handler);
}

void Reactor::remove(int fd) {
  poller_->remove(fd);
}

void Reactor::receive(int fd, EventHandler* handler, bool once) {
  poller_->receive(fd, handler, once);
}

void Reactor::stop_receiving(EventHandler* handler) {
  poller_->stop_receiving(handler);
}

void Reactor::send(int fd, const void* data, size_t size, EventHandler* handler) {
  poller_->send(fd, data, size, handler);
}

void Reactor::send(int fd, const msghdr* message, EventHandler* handler) {
  poller_->send(fd, message, handler);
}

void Reactor::cancel_io(int fd) {
  poller_->cancel_io(fd);
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
  // A lock-service wait posts three tasks (its timer, the timer's cancel,
  // the grant's answer), mostly from the reactor's own turn: an eventfd
  // write each was 1.6 system calls per lock cycle (bench/RESULTS.md).
  if (in_turn()) {
    posted_here_ = true;
    return;
  }
  uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;  // EAGAIN means a wake-up is already pending
}

bool Reactor::in_turn() const { return running_reactor == this; }

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
  if (!soon_.empty() || posted_here_) return 0;
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
  if (woken_) {
    uint64_t count;
    ssize_t ignored = read(wake_fd_, &count, sizeof count);
    (void)ignored;
  }
  woken_ = false;
  posted_here_ = false;
  {
    std::lock_guard lock(posted_mutex_);
    running_posted_.swap(posted_);
    stopping_ = stop_requested_;
  }
  // Two vectors that trade places keep their capacity: a fresh one each turn
  // grew by reallocation under every lock-service wait (bench/RESULTS.md).
  for (Task& task : running_posted_)
    task();
  running_posted_.clear();
}

void Reactor::run_once(int timeout_ms) {
  const Reactor* outer = std::exchange(running_reactor, this);
  int next_timer = next_timeout_ms();
  if (next_timer >= 0 && (timeout_ms < 0 || next_timer < timeout_ms)) timeout_ms = next_timer;
  poller_->wait(timeout_ms);
  now_ms_ = monotonic_ms();
  poller_->dispatch();
  if (woken_ || posted_here_) run_posted_tasks();
  run_due_timers();
  running_soon_.swap(soon_);  // what these add runs on the next turn
  for (Task& task : running_soon_)
    task();
  running_soon_.clear();
  if (before_sleep_) before_sleep_();
  running_reactor = outer;
}

void Reactor::run() {
  while (!stopping_)
    run_once(-1);
}

}  // namespace lockcached::net
