// The io_uring backend: the reactor's receives and sends go through one
// ring, submitted together with the wait (one io_uring_enter per loop turn
// instead of a read and a send per request). Received bytes land in a ring
// of provided buffers shared by all connections of the thread, so an idle
// connection holds no receive buffer. Descriptors that want readiness (the
// listeners, replication links, the wake-up eventfd) stay in an epoll set,
// and the ring polls that set's descriptor.
//
// liburing earns its place: it is the kernel's own library for the ring's
// memory layout and barriers, which are easy to get subtly wrong by hand.
#include <liburing.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <span>
#include <vector>

#include <glog/logging.h>

#include "poller.h"

namespace lockcached::net {
namespace {

constexpr unsigned kRingEntries = 1024;
// Received bytes land here: kBufferCount buffers of kBufferSize for the
// whole thread. A receive that finds none free ends with ENOBUFS; its
// connection then takes one buffer per receive until drained
// (Connection::on_received), so that connections take turns.
constexpr unsigned kBufferCount = 128;
constexpr unsigned kBufferSize = kMaxReceiveSize;
constexpr uint16_t kBufferGroup = 0;
// --uring_sqpoll: how long the kernel's submission thread spins after the
// last submission before it sleeps (a sleeping one costs the next submit a
// system call to wake it).
constexpr unsigned kSqpollIdleMs = 10;

// What a completion is, in the low bits of its user_data; the rest is the
// handler (EventHandler objects are at least 8-byte aligned).
// A timer's user_data holds its deadline instead of a handler.
enum Op : uint64_t { kIgnored = 0, kReceive = 1, kSend = 2, kEpollReady = 3, kTimer = 4 };
constexpr uint64_t kOpMask = 7;

uint64_t tag(EventHandler* handler, Op op) {
  return reinterpret_cast<uint64_t>(handler) | op;
}

// The provided buffers and the ring that hands them to the kernel.
class BufferRing {
 public:
  bool open(io_uring* ring, std::string* why) {
    size_t ring_bytes = kBufferCount * sizeof(io_uring_buf);
    void* ring_memory = mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void* buffers = mmap(nullptr, size_t{kBufferCount} * kBufferSize, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ring_memory == MAP_FAILED || buffers == MAP_FAILED) {
      *why = "no memory for the receive buffers";
      return false;
    }
    ring_ = static_cast<io_uring_buf_ring*>(ring_memory);
    buffers_ = static_cast<char*>(buffers);
    io_uring_buf_reg registration{};
    registration.ring_addr = reinterpret_cast<uint64_t>(ring_);
    registration.ring_entries = kBufferCount;
    registration.bgid = kBufferGroup;
    int error = io_uring_register_buf_ring(ring, &registration, 0);
    if (error < 0) {
      *why = std::string("provided buffer rings refused: ") + strerror(-error);
      return false;
    }
    io_uring_buf_ring_init(ring_);
    for (unsigned i = 0; i < kBufferCount; ++i)
      put_back(static_cast<uint16_t>(i));
    return true;
  }

  ~BufferRing() {
    if (ring_) munmap(ring_, kBufferCount * sizeof(io_uring_buf));
    if (buffers_) munmap(buffers_, size_t{kBufferCount} * kBufferSize);
  }

  const char* data(uint16_t id) const { return buffers_ + size_t{id} * kBufferSize; }

  void put_back(uint16_t id) {
    io_uring_buf_ring_add(ring_, buffers_ + size_t{id} * kBufferSize, kBufferSize, id,
                          io_uring_buf_ring_mask(kBufferCount), 0);
    io_uring_buf_ring_advance(ring_, 1);
  }

 private:
  io_uring_buf_ring* ring_ = nullptr;
  char* buffers_ = nullptr;
};

class UringPoller final : public Poller {
 public:
  ~UringPoller() override {
    if (ring_open_) io_uring_queue_exit(&ring_);
  }

  bool open(UringOptions options, std::string* why) {
    // The kernel runs completion work when the thread waits on the ring
    // (DEFER_TASKRUN, Linux 6.1), not by interrupting it at any moment.
    // That needs a single submitting thread, the reactor's; the ring is made
    // disabled and enabled by that thread at its first wait. Older kernels
    // get COOP_TASKRUN (5.19), then nothing. SQPOLL rules DEFER_TASKRUN out:
    // its kernel thread is the submitter and runs the completion work.
    const unsigned plain[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED,
        IORING_SETUP_COOP_TASKRUN, 0};
    const unsigned sqpoll[] = {
        IORING_SETUP_SQPOLL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED,
        IORING_SETUP_SQPOLL};
    sqpoll_ = options.sqpoll;
    int error = 0;
    for (unsigned flags : sqpoll_ ? std::span<const unsigned>(sqpoll) : plain) {
      io_uring_params params{};
      params.flags = flags;
      params.sq_thread_idle = kSqpollIdleMs;  // read with SQPOLL only
      error = io_uring_queue_init_params(kRingEntries, &ring_, &params);
      if (error != -EINVAL) {
        disabled_ = flags & IORING_SETUP_R_DISABLED;
        break;
      }
    }
    if (error < 0) {
      *why = std::string(options.sqpoll ? "io_uring_setup with SQPOLL: " : "io_uring_setup: ") +
             strerror(-error);
      return false;
    }
    ring_open_ = true;
    // Waits with a timeout in one call (5.11), and cancel by descriptor
    // (5.19, which provided buffer rings need too).
    if (!(ring_.features & IORING_FEAT_EXT_ARG)) {
      *why = "this kernel's io_uring cannot wait with a timeout (Linux 5.11+ needed)";
      return false;
    }
    return buffers_.open(&ring_, why);
  }

  bool add(int fd, uint32_t events, EventHandler* handler) override {
    return epoll_.add(fd, events, handler);
  }
  bool modify(int fd, uint32_t events, EventHandler* handler) override {
    return epoll_.modify(fd, events, handler);
  }
  void remove(int fd) override { epoll_.remove(fd); }

  bool completes_io() const override { return true; }

  // Multishot: armed once, it delivers each arrival until it is stopped,
  // saving a submission and a poll set-up per request. `once`: a plain
  // receive into one provided buffer (length 0: the buffer's).
  void receive(int fd, EventHandler* handler, bool once) override {
    io_uring_sqe* sqe = next_sqe();
    if (once) {
      io_uring_prep_recv(sqe, fd, nullptr, 0, 0);
    } else {
      io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
    }
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kBufferGroup;
    io_uring_sqe_set_data64(sqe, tag(handler, kReceive));
  }

  void stop_receiving(EventHandler* handler) override {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_cancel64(sqe, tag(handler, kReceive), 0);
    io_uring_sqe_set_data64(sqe, kIgnored);
  }

  void send(int fd, const void* data, size_t size, EventHandler* handler) override {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_send(sqe, fd, data, size, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, tag(handler, kSend));
  }

  void send(int fd, const msghdr* message, EventHandler* handler) override {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_sendmsg(sqe, fd, message, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, tag(handler, kSend));
  }

  // Submitted at once: the kernel finds the operations by the descriptor,
  // which the caller closes next.
  void cancel_io(int fd) override {
    if (sqpoll_) return cancel_io_sqpoll(fd);
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_cancel_fd(sqe, fd, IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(sqe, kIgnored);
    io_uring_submit(&ring_);
  }

  void wait(int timeout_ms) override {
    if (!enabled_) enable();
    if (!epoll_armed_) arm_epoll();
    if (timeout_ms > 0) arm_timer(monotonic_ms() + timeout_ms);
    if (sqpoll_) {
      // The kernel's thread takes the submissions (a system call only to
      // wake it); completions that are there already need no wait.
      io_uring_submit(&ring_);
      if (io_uring_cq_ready(&ring_) > 0) return;
    }
    if (timeout_ms != 0) {
      io_uring_submit_and_wait(&ring_, 1);
      return;
    }
    io_uring_cqe* cqe;
    __kernel_timespec timeout{};
    timeout.tv_sec = timeout_ms / 1000;
    timeout.tv_nsec = int64_t{timeout_ms % 1000} * 1000000;
    io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &timeout, nullptr);
  }

  void dispatch() override {
    unsigned head;
    unsigned seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      complete(*cqe);
    }
    io_uring_cq_advance(&ring_, seen);
  }

 private:
  // In the reactor's thread, before its first wait.
  void enable() {
    if (disabled_) {
      // Debian's liburing 2.3 declares io_uring_enable_rings but does not
      // export it: the system call it wraps.
      PCHECK(syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS,
                     nullptr, 0) == 0)
          << "enabling the io_uring";
    }
    // Registered for this thread (5.18), the ring needs no descriptor
    // lookup per io_uring_enter; an older kernel just does the lookup.
    io_uring_register_ring_fd(&ring_);
    enabled_ = true;
  }

  // Under SQPOLL a submitted operation is in the queue until the kernel's
  // thread takes it, and it finds its descriptor only then: the descriptor
  // must not be closed (and its number reused by the next accept) before.
  // So the queue is drained first; then the kernel cancels what it holds
  // for the descriptor, synchronously, before the caller closes it.
  void cancel_io_sqpoll(int fd) {
    if (!enabled_) enable();  // else the kernel's thread is not running yet
    while (io_uring_submit(&ring_), io_uring_sq_ready(&ring_) > 0) sched_yield();
    io_uring_sync_cancel_reg cancel{};
    cancel.fd = fd;
    cancel.flags = IORING_ASYNC_CANCEL_FD | IORING_ASYNC_CANCEL_ALL;
    cancel.timeout.tv_sec = -1;  // no time limit
    cancel.timeout.tv_nsec = -1;
    int error = io_uring_register_sync_cancel(&ring_, &cancel);
    LOG_IF(WARNING, error < 0 && error != -ENOENT)
        << "io_uring: cancelling the I/O of a closing descriptor: " << strerror(-error);
  }

  io_uring_sqe* next_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {  // the queue is full: hand it to the kernel
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  // The reactor's next timer, as a timeout in the ring, so that a wait needs
  // no timeout of its own (a kernel timer set up and torn down per wait).
  // Armed again only for a sooner deadline; one passed over (its timer was
  // cancelled or moved) just wakes the loop once.
  void arm_timer(int64_t deadline_ms) {
    if (timer_armed_ && timer_deadline_ms_ <= deadline_ms) return;
    timer_armed_ = true;
    timer_deadline_ms_ = deadline_ms;
    timer_at_.tv_sec = deadline_ms / 1000;
    timer_at_.tv_nsec = deadline_ms % 1000 * 1000000;
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_timeout(sqe, &timer_at_, 0, IORING_TIMEOUT_ABS);  // CLOCK_MONOTONIC
    io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(deadline_ms) << 3 | kTimer);
  }

  // Readiness of the epoll set, once: it is armed again after its events
  // were handled, so it behaves level-triggered like epoll itself.
  void arm_epoll() {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_poll_add(sqe, epoll_.fd(), POLLIN);
    io_uring_sqe_set_data64(sqe, kEpollReady);
    epoll_armed_ = true;
  }

  void complete(const io_uring_cqe& cqe) {
    auto* handler = reinterpret_cast<EventHandler*>(cqe.user_data & ~kOpMask);
    switch (cqe.user_data & kOpMask) {
      case kReceive:
        return received(*handler, cqe);
      case kSend:
        return handler->on_sent(cqe.res);
      case kTimer:
        if (static_cast<int64_t>(cqe.user_data >> 3) == timer_deadline_ms_) timer_armed_ = false;
        return;
      case kEpollReady:
        epoll_armed_ = false;
        epoll_.wait(0);
        epoll_.dispatch();
        return;
      default:
        return;
    }
  }

  // The buffer goes back to the kernel once the handler has seen it.
  void received(EventHandler& handler, const io_uring_cqe& cqe) {
    bool more = cqe.flags & IORING_CQE_F_MORE;
    if (!(cqe.flags & IORING_CQE_F_BUFFER)) return handler.on_received(nullptr, cqe.res, more);
    auto id = static_cast<uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
    handler.on_received(buffers_.data(id), cqe.res, more);
    buffers_.put_back(id);
  }

  io_uring ring_{};
  bool ring_open_ = false;
  bool disabled_ = false;  // made disabled: the reactor's thread enables it
  bool enabled_ = false;   // enable() ran
  bool sqpoll_ = false;
  BufferRing buffers_;
  EpollPoller epoll_;
  bool epoll_armed_ = false;
  bool timer_armed_ = false;
  int64_t timer_deadline_ms_ = 0;
  __kernel_timespec timer_at_{};  // read by the kernel when the timeout is submitted
};

}  // namespace

std::unique_ptr<Poller> make_uring_poller(UringOptions options, std::string* why) {
  auto poller = std::make_unique<UringPoller>();
  if (!poller->open(options, why)) return nullptr;
  return poller;
}

}  // namespace lockcached::net
