// The floor's io_uring loop: the least one thread can do per request with
// io_uring, to set beside the epoll floor (epoll.cc).
//
// One multishot accept serves the listener, one multishot receive each
// connection, filling buffers the kernel picks from a provided buffer ring
// when data arrives (no buffer per idle connection, no submission per
// read). Each receive completion is answered into the connection's queue;
// once per loop turn every connection with queued replies and no send in
// flight gets one send of all of them. At most one send is in flight per
// connection, so its bytes stay put and replies go out in order; what
// arrives meanwhile queues behind it. A turn ends in one
// io_uring_submit_and_wait, which submits the turn's sends and re-armed
// requests and waits for the next completions.
//
// The receive stays armed while a send is in flight (the epoll floor stops
// reading instead): the queue grows by what the client sends unanswered,
// which a load generator bounds with its pipeline depth.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../common/uring.h"
#include "answer.h"

namespace floor_server {
namespace {

constexpr unsigned kEntries = 1024;
// Receives of small requests touch only a buffer's first page, so the 8 MiB
// are mostly never resident; 100 KB values arrive in a few buffers.
constexpr unsigned kBuffers = 512;
constexpr unsigned kBufferSize = 16 * 1024;

// A completion's user_data: the connection's address with the operation in
// its low bits (a Conn is at least 8-byte aligned); 0 for the listener.
enum Op : uint64_t { kAccept = 0, kRecv = 1, kSend = 2 };
constexpr uint64_t kOpMask = 3;

struct Conn {
  int fd = -1;
  Requests requests;
  Output queued;    // replies not handed to the kernel yet
  Output sending;   // the send in flight: must not move until it completes
  size_t sent = 0;  // how much of `sending` the kernel took so far
  bool in_send = false;
  bool receiving = false;  // a multishot receive is armed
  bool ready = false;      // on the list of connections to send to this turn
  bool shut = false;       // shut down: waits for its requests to end
  bool buried = false;
};

class UringFloor {
 public:
  explicit UringFloor(size_t value_size) : answerer_(value_size) {}
  int run(int listener);

 private:
  void arm_accept();
  void on_completion(const io_uring_cqe* cqe);
  void on_accept(const io_uring_cqe* cqe);
  void on_recv(Conn* conn, const io_uring_cqe* cqe);
  void on_send(Conn* conn, int result);
  void send_ready();
  void send_rest(Conn* conn);
  void finish_if_done(Conn* conn);
  void shut_down(Conn* conn);
  void bury_if_idle(Conn* conn);

  static uint64_t tag(Conn* conn, Op op) { return reinterpret_cast<uint64_t>(conn) | op; }

  Answerer answerer_;
  bench::Uring uring_;
  int listener_ = -1;
  std::vector<Conn*> ready_;  // connections with new replies this turn
  std::vector<Conn*> dead_;   // freed at the end of the turn, once nothing refers to them
};

int UringFloor::run(int listener) {
  std::string error;
  if (!uring_.open(kEntries, kBuffers, kBufferSize, error)) {
    std::fprintf(stderr, "lockcached-floor: io_uring: %s\n", error.c_str());
    return 1;
  }
  // main() made the listener non-blocking for epoll; io_uring waits for
  // connections itself, so it is handed a plain blocking one.
  fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) & ~O_NONBLOCK);
  listener_ = listener;
  arm_accept();
  io_uring* ring = uring_.ring();
  for (;;) {
    const int submitted = io_uring_submit_and_wait(ring, 1);
    if (submitted < 0 && submitted != -EINTR) {
      std::fprintf(stderr, "lockcached-floor: io_uring_submit_and_wait: %s\n",
                   std::strerror(-submitted));
      return 1;
    }
    unsigned head = 0;
    unsigned seen = 0;
    io_uring_cqe* cqe = nullptr;
    io_uring_for_each_cqe(ring, head, cqe) {
      on_completion(cqe);
      ++seen;
    }
    io_uring_cq_advance(ring, seen);
    send_ready();
    // The turn's buffers go back before the next submit, which may carry
    // receives re-armed for want of buffers (ENOBUFS).
    uring_.publish();
    for (Conn* conn : dead_)
      delete conn;
    dead_.clear();
  }
}

// Accepted sockets stay blocking: io_uring polls them itself, and a
// non-blocking one would gain nothing.
void UringFloor::arm_accept() {
  io_uring_sqe* sqe = uring_.sqe();
  io_uring_prep_multishot_accept(sqe, listener_, nullptr, nullptr, SOCK_CLOEXEC);
  io_uring_sqe_set_data64(sqe, kAccept);
}

void UringFloor::on_completion(const io_uring_cqe* cqe) {
  const uint64_t data = io_uring_cqe_get_data64(cqe);
  auto* conn = reinterpret_cast<Conn*>(data & ~kOpMask);
  switch (data & kOpMask) {
    case kAccept:
      on_accept(cqe);
      break;
    case kRecv:
      on_recv(conn, cqe);
      break;
    case kSend:
      on_send(conn, cqe->res);
      break;
  }
}

void UringFloor::on_accept(const io_uring_cqe* cqe) {
  // A multishot accept ends on an error (EMFILE, say) or when the kernel
  // drops it; a new one keeps the listener served.
  if (!(cqe->flags & IORING_CQE_F_MORE)) arm_accept();
  if (cqe->res < 0) return;
  const int one = 1;
  setsockopt(cqe->res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto* conn = new Conn;
  conn->fd = cqe->res;
  conn->receiving = true;
  uring_.recv_multishot(conn->fd, tag(conn, kRecv));
}

void UringFloor::on_recv(Conn* conn, const io_uring_cqe* cqe) {
  const bool more = cqe->flags & IORING_CQE_F_MORE;
  if (!more) conn->receiving = false;
  if (cqe->res > 0 && bench::Uring::has_buffer(cqe)) {
    const unsigned id = bench::Uring::buffer_id(cqe);
    if (!conn->shut) {
      answerer_.answer(conn->requests, uring_.buffer(id), static_cast<size_t>(cqe->res),
                       conn->queued);
      if (!conn->ready) {
        conn->ready = true;
        ready_.push_back(conn);
      }
    }
    uring_.recycle(id);
  }
  if (conn->shut) {
    bury_if_idle(conn);
    return;
  }
  // 0 is the peer's close; any error but ENOBUFS (every provided buffer
  // taken: this turn gives them back) ends the connection too.
  if (cqe->res == 0 || (cqe->res < 0 && cqe->res != -ENOBUFS)) {
    shut_down(conn);
    return;
  }
  if (!more && !conn->requests.closing) {
    conn->receiving = true;
    uring_.recv_multishot(conn->fd, tag(conn, kRecv));
  }
}

void UringFloor::on_send(Conn* conn, int result) {
  if (result < 0 || conn->shut) {
    conn->in_send = false;
    shut_down(conn);
    return;
  }
  conn->sent += static_cast<size_t>(result);
  if (conn->sent < conn->sending.size()) {
    send_rest(conn);  // a short send: the socket buffer was full
    return;
  }
  conn->in_send = false;
  finish_if_done(conn);
  if (!conn->shut && !conn->queued.empty() && !conn->ready) {
    conn->ready = true;
    ready_.push_back(conn);
  }
}

// One send per connection per turn: everything answered since its last send.
void UringFloor::send_ready() {
  for (Conn* conn : ready_) {
    conn->ready = false;
    if (conn->shut || conn->in_send) continue;  // a send in flight: queued waits behind it
    if (!conn->queued.empty()) {
      std::swap(conn->sending, conn->queued);
      conn->queued.clear();
      conn->sent = 0;
      send_rest(conn);
    }
    finish_if_done(conn);
  }
  ready_.clear();
}

void UringFloor::send_rest(Conn* conn) {
  conn->in_send = true;
  uring_.send(conn->fd, conn->sending.data() + conn->sent, conn->sending.size() - conn->sent,
              tag(conn, kSend));
}

// After "quit", the connection closes once its last replies are out.
void UringFloor::finish_if_done(Conn* conn) {
  if (conn->requests.closing && !conn->in_send && conn->queued.empty()) shut_down(conn);
}

// shutdown ends the armed receive (it completes with 0) and any send in
// flight; the descriptor is closed and the connection freed only once
// neither can complete any more, since their completions name it.
void UringFloor::shut_down(Conn* conn) {
  if (!conn->shut) {
    conn->shut = true;
    shutdown(conn->fd, SHUT_RDWR);
  }
  bury_if_idle(conn);
}

void UringFloor::bury_if_idle(Conn* conn) {
  if (conn->receiving || conn->in_send || conn->buried) return;
  conn->buried = true;
  close(conn->fd);
  dead_.push_back(conn);
}

}  // namespace

int run_uring(int listener, size_t value_size) {
  return UringFloor(value_size).run(listener);
}

}  // namespace floor_server
