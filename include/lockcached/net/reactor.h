// The event loop: timers, a wake-up channel for work handed over from other
// threads, and an I/O backend behind them (a Poller: epoll, or io_uring).
// One per reactor thread; everything registered with it is touched by that
// thread only.
//
// Two ways to do I/O, both on every backend's reactor except where noted:
// - readiness (add/modify/remove): the handler is told a descriptor is
//   readable or writable (level-triggered) and makes the system calls itself;
// - completion (receive/send, io_uring only): the reactor makes the calls
//   and tells the handler what they did, many per system call.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lockcached::net {

enum class IoBackend : uint8_t { kEpoll, kUring };
// How a kUring reactor sets up its ring.
struct UringOptions {
  // --uring_sqpoll: a kernel thread per ring takes the submissions from
  // shared memory, so a reactor that has completions to handle makes no
  // system call at all. The thread spins for a while after the last
  // submission, on a CPU of its own where the machine has one to spare.
  bool sqpoll = false;
};
// The most one completed receive() delivers.
constexpr size_t kMaxReceiveSize = 16 * 1024;
std::string_view io_backend_name(IoBackend backend);

// Whatever owns a file descriptor and wants its events.
class EventHandler {
 public:
  virtual ~EventHandler() = default;
  // Readiness: EPOLLIN / EPOLLOUT / EPOLLERR / EPOLLHUP.
  virtual void on_event(uint32_t events) = 0;
  // Completion: a receive() delivered `result` bytes at `data` (valid only
  // during the call), 0 at end of stream, or -errno. `more`: the receive
  // goes on and will deliver again; else it is over.
  virtual void on_received(const char* /*data*/, int /*result*/, bool /*more*/) {}
  // Completion: a send() ended with `result` bytes sent, or -errno.
  virtual void on_sent(int /*result*/) {}
};

class Poller;

class Reactor {
 public:
  using Task = std::function<void()>;
  using TimerId = uint64_t;

  // kUring needs uring_available(); check it first. `uring` matters to
  // kUring only.
  explicit Reactor(IoBackend backend = IoBackend::kEpoll, UringOptions uring = {});
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // Whether this kernel lets the process use every io_uring feature the
  // kUring backend needs; if not, why (for the one log line that says so).
  static bool uring_available(UringOptions uring, std::string* why);

  // events: EPOLLIN / EPOLLOUT (level-triggered). False if the kernel refuses.
  bool add(int fd, uint32_t events, EventHandler* handler);
  bool modify(int fd, uint32_t events, EventHandler* handler);
  void remove(int fd);

  // Completion I/O, only where completes_io(). At most one receive and one
  // send in flight per descriptor. A receive goes on delivering until an
  // on_received call says it is over (an error, end of stream, or
  // stop_receiving), or after one delivery where `once`; a send ends in one
  // on_sent call. The handler must
  // outlive both, and a send's bytes (and its msghdr and iovecs) must stay
  // untouched until on_sent.
  bool completes_io() const { return completes_io_; }
  void receive(int fd, EventHandler* handler, bool once = false);
  // Ends `handler`'s receive soon; what it delivers meanwhile still comes.
  void stop_receiving(EventHandler* handler);
  void send(int fd, const void* data, size_t size, EventHandler* handler);
  void send(int fd, const msghdr* message, EventHandler* handler);
  // Ends the descriptor's receive and send soon (-ECANCELED, or what they
  // did before); call before closing it.
  void cancel_io(int fd);

  // Runs `task` once after `delay_ms` on this reactor's thread.
  TimerId add_timer(int64_t delay_ms, Task task);
  void cancel_timer(TimerId id);

  // Thread-safe: runs `task` on this reactor's thread soon, after the
  // tasks posted before it. From a task or handler of this reactor, it only
  // queues (no wake-up system call).
  void post(Task task);
  // True on this reactor's thread while it runs a turn (a handler, a task,
  // a timer): then its timers may be touched directly.
  bool in_turn() const;
  // This thread only: runs `task` after the events of this turn, and the
  // loop does not sleep before it ran.
  void call_soon(Task task) { soon_.push_back(std::move(task)); }
  // Runs after each batch of events, before the loop sleeps again.
  void set_before_sleep(Task task) { before_sleep_ = std::move(task); }

  // monotonic_ms() as of the wake-up that delivered the events being handled:
  // one clock read per batch of events instead of one per event.
  int64_t now_ms() const { return now_ms_; }

  // Dispatches events until stop(); stop() may be called from any thread.
  void run();
  void stop();
  // One turn of the loop: waits up to `timeout_ms` for events and handles
  // them (for a shutdown that waits for cancelled I/O to end).
  void run_once(int timeout_ms);

 private:
  struct Timer {
    int64_t deadline_ms;
    TimerId id;
    bool operator>(const Timer& other) const { return deadline_ms > other.deadline_ms; }
  };
  // The wake-up eventfd's reader.
  class Waker;

  int next_timeout_ms() const;
  void run_due_timers();
  void run_posted_tasks();

  std::unique_ptr<Poller> poller_;
  bool completes_io_ = false;
  int wake_fd_;  // eventfd: post() and stop() write, the loop reads
  bool woken_ = false;  // the wake-up eventfd was readable in this batch
  bool posted_here_ = false;  // post() from this reactor's own turn queued a task
  std::unique_ptr<Waker> waker_;
  bool stopping_ = false;
  std::mutex posted_mutex_;
  std::vector<Task> posted_;
  std::vector<Task> running_posted_;  // posted_'s tasks while they run (keeps its capacity)
  std::vector<Task> soon_;
  std::vector<Task> running_soon_;  // soon_'s tasks while they run
  bool stop_requested_ = false;  // guarded by posted_mutex_
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  std::unordered_map<TimerId, Task> timer_tasks_;  // a cancelled timer has no task
  TimerId next_timer_id_ = 1;
  int64_t now_ms_;
  Task before_sleep_;
};

int64_t monotonic_ms();

}  // namespace lockcached::net
