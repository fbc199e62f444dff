// The load generator's io_uring loop (--io=uring): the same connections,
// requests and reply checks as the epoll loop (engine.cc), with fewer
// system calls per request, so that the load generator costs less CPU per
// request than the server it measures.
//
// Each connection has one multishot receive armed, which fills buffers the
// kernel picks from the thread's provided buffer ring as replies arrive.
// A loop turn: reap every completion (check the replies, write the next
// requests into the connection's `out`), give the turn's buffers back, put
// one send per connection with new requests in the submission queue, then
// one io_uring_enter submits them all and waits for the next completions.
// At most one send is in flight per connection: its bytes (`sending`) stay
// put until it completes, and requests written meanwhile wait in `out`.
//
// Each run (the preload, the measured run) makes its own ring in the thread
// that runs it, since the ring belongs to one thread (bench/common/uring.h);
// a run ends with every request answered or at its deadline, and the ring's
// teardown cancels what is still armed.
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "../common/uring.h"
#include "conn.h"
#include "engine.h"

namespace loadgen {
namespace {

constexpr unsigned kEntries = 1024;
constexpr unsigned kBuffers = 256;
constexpr unsigned kBufferSize = 32 * 1024;

// A completion's user_data: the connection's address with the operation in
// its low bits (a Conn is at least 8-byte aligned).
enum OpTag : uint64_t { kRecv = 1, kSend = 2 };
constexpr uint64_t kTagMask = 3;

template <typename Conn>
uint64_t tag(Conn& conn, OpTag op) {
  return reinterpret_cast<uint64_t>(&conn) | op;
}

}  // namespace

void Worker::run_uring(int64_t deadline_ns) {
  bench::Uring uring;
  std::string error;
  if (!uring.open(kEntries, kBuffers, kBufferSize, error)) {
    ++stats_.errors;
    stats_.problem("io_uring: " + error);
    return;
  }
  uring_ = &uring;
  arm_uring();
  for (;;) {
    const int64_t now = now_ns();
    if (!keep_going(now, deadline_ns)) break;
    send_ready();
    uring.publish();
    // At most 100 ms, so that a stall is noticed; one io_uring_enter
    // (IORING_ENTER_EXT_ARG) submits the turn's requests and waits.
    const int64_t wait =
        deadline_ns == 0 ? 100'000'000 : std::min<int64_t>(100'000'000, deadline_ns - now);
    __kernel_timespec timeout{wait / 1'000'000'000, wait % 1'000'000'000};
    io_uring_cqe* first = nullptr;
    const int ret = io_uring_submit_and_wait_timeout(uring.ring(), &first, 1, &timeout, nullptr);
    if (ret < 0 && ret != -ETIME && ret != -EINTR) {
      ++stats_.errors;
      stats_.problem(std::string("io_uring_submit_and_wait_timeout: ") + std::strerror(-ret));
      break;
    }
    reap(now_ns());
  }
  uring_ = nullptr;
  ready_.clear();
}

// The start of a run on a fresh ring: what the last run's ring had in flight
// is gone with it (every request was answered, so every send had
// completed), so each live connection gets a new receive and its first
// requests.
void Worker::arm_uring() {
  const int64_t now = now_ns();
  for (auto& conn : conns_) {
    conn->in_send = false;
    conn->receiving = false;
    conn->ready = false;
    conn->sending.consume(conn->sending.size());
    if (conn->dead) continue;
    conn->receiving = true;
    uring_->recv_multishot(conn->stream.fd(), tag(*conn, kRecv));
    fill(*conn, now);
    queue_send(*conn);
  }
}

// Every completion of the turn; `now` stamps the replies they carry.
void Worker::reap(int64_t now) {
  io_uring* ring = uring_->ring();
  unsigned head = 0;
  unsigned seen = 0;
  io_uring_cqe* cqe = nullptr;
  io_uring_for_each_cqe(ring, head, cqe) {
    ++seen;
    const uint64_t data = io_uring_cqe_get_data64(cqe);
    Conn& conn = *reinterpret_cast<Conn*>(data & ~kTagMask);
    if ((data & kTagMask) == kRecv) {
      on_recv(conn, cqe, now);
    } else {
      on_send(conn, cqe->res);
    }
  }
  io_uring_cq_advance(ring, seen);
}

void Worker::on_recv(Conn& conn, const io_uring_cqe* cqe, int64_t now) {
  const bool more = cqe->flags & IORING_CQE_F_MORE;
  if (!more) conn.receiving = false;
  if (cqe->res > 0 && bench::Uring::has_buffer(cqe)) {
    const unsigned id = bench::Uring::buffer_id(cqe);
    if (!conn.dead) {
      const auto size = static_cast<size_t>(cqe->res);
      conn.in.append(uring_->buffer(id), size);
      stats_.bytes_in += size;
      if (take_replies(conn, now)) {
        fill(conn, now);
        queue_send(conn);
      }
    }
    uring_->recycle(id);
  }
  if (conn.dead) return;
  if (cqe->res == 0) {
    kill(conn, "the server closed a connection");
    return;
  }
  // ENOBUFS: every provided buffer was taken; this turn gives them back.
  if (cqe->res < 0 && cqe->res != -ENOBUFS) {
    kill(conn, std::string("recv: ") + std::strerror(-cqe->res));
    return;
  }
  if (!more) {  // the multishot receive ended (ENOBUFS, or the kernel's choice)
    conn.receiving = true;
    uring_->recv_multishot(conn.stream.fd(), tag(conn, kRecv));
  }
}

void Worker::on_send(Conn& conn, int result) {
  conn.in_send = false;
  if (conn.dead) return;
  if (result < 0) {
    kill(conn, std::string("send: ") + std::strerror(-result));
    return;
  }
  conn.sending.consume(static_cast<size_t>(result));
  if (!conn.sending.empty()) {
    send_rest(conn);  // a short send: the socket buffer was full
    return;
  }
  queue_send(conn);  // what was written while this send was in flight
}

// Puts the connection on this turn's send list, once.
void Worker::queue_send(Conn& conn) {
  if (conn.ready || conn.out.empty()) return;
  conn.ready = true;
  ready_.push_back(&conn);
}

// One send per connection per turn, of every request written since its
// last send; one with a send in flight waits for it to complete.
void Worker::send_ready() {
  for (Conn* conn : ready_) {
    conn->ready = false;
    if (conn->dead || conn->in_send || conn->out.empty()) continue;
    std::swap(conn->out, conn->sending);
    send_rest(*conn);
  }
  ready_.clear();
}

void Worker::send_rest(Conn& conn) {
  conn.in_send = true;
  uring_->send(conn.stream.fd(), conn.sending.head(), conn.sending.size(), tag(conn, kSend));
}

}  // namespace loadgen
