// A connection's I/O on the io_uring backend (--io=uring): the reactor
// receives into its shared buffers and sends what we hand it, and tells us
// when each is done. One receive and one send at most are in flight; the
// raw bytes go through the transport's calls, as on epoll, and the protocol
// side (run, the output queue) is the epoll path's, in connection.cc.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "lockcached/server/connection.h"
#include "lockcached/server/worker.h"

namespace lockcached::server {

void Connection::on_received(const char* data, int result, bool more) {
  if (!more) receive_ = Receive::kOff;
  if (closed()) return;
  if (result <= 0) {
    // The end may come while input is paused (a multishot receive
    // delivers what arrived before its stop): handled once what came before
    // it is answered.
    if (result == 0) {
      return io_ == IoState::kWatching ? close(core::CloseReason::kNormal) : end_of_input();
    }
    // Stopped (input paused), out of provided buffers (the thread's are all
    // in use this turn), or interrupted: receive again once input is wanted.
    // A multishot receive takes up to dozens of buffers at once while data
    // waits (a bulk upload, a flood), so once they ran short the starved
    // connections receive one buffer at a time, in turn, as epoll reads:
    // a flood cannot keep a quiet client waiting.
    if (result == -ENOBUFS) receive_once_ = true;
    if (result == -ECANCELED || result == -ENOBUFS || result == -EINTR || result == -EAGAIN) {
      return update_interest();
    }
    return close_after_error(-result);
  }
  auto size = static_cast<size_t>(result);
  // Less than a buffer: the socket is drained; multishot again.
  if (size < net::kMaxReceiveSize) receive_once_ = false;
  if (io_ == IoState::kWatching) {
    worker_.stats().bytes_read.add(size);
    return update_interest();
  }
  bool unfinished = protocol_ && protocol_->has_unfinished_work();
  if (!wants_input(unfinished)) return stash(data, size);
  finish_read(transport_->decode(data, size, input_));
}

// Bytes that came while output waits (or a long command runs) are kept, not
// handled: what arrives before the receive stops (update_io asked it to, as
// input was paused), a turn's worth at most.
void Connection::stash(const char* data, size_t size) {
  if (io_ == IoState::kDraining) return;  // nothing more is read once a client said quit
  last_active_ms_.store(worker_.reactor().now_ms(), std::memory_order_relaxed);
  transport_->keep(data, size, input_);
  // Plaintext kept in the input buffer counts now; bytes the transport
  // keeps (TLS records) count as the plaintext they decode to, when they do
  // (take_input), as every other read does.
  if (!transport_->holds_input()) worker_.stats().bytes_read.add(size);
  stashed_ = true;
}

void Connection::on_sent(int result) {
  sending_ = false;
  if (closed()) return;
  if (result == -EAGAIN) {
    // The socket is full and its peer half-closed: io_uring's own wait for
    // room wakes on the peer's FIN (RDHUP, which its polls cannot mask) and
    // gives up. Sent again at once, it fails again at once, a core's worth
    // of sends for as long as the client reads nothing. The epoll set
    // waits for EPOLLOUT alone (on_event, then on_room_to_send).
    if (!worker_.reactor().add(fd_, EPOLLOUT, this)) return close();
    sending_ = true;  // the same bytes are still to go
    waiting_for_room_ = true;
    return;
  }
  if (result < 0) {
    if (result != -EINTR) return close_after_error(-result);
    result = 0;  // the same bytes go again
  }
  if (transport_->consume(in_flight_, static_cast<size_t>(result))) {
    if (!send_in_flight()) return close();
    if (sending_) return;
  }
  send_vector_.reset();
  // Nothing came in meanwhile: the queue just sent fills up next, so one
  // buffer serves a connection that waits for each reply. The other one
  // filled only while replies queued behind a send (pipelining): it goes
  // back, so an idle connection keeps one buffer, as on epoll.
  if (out_.empty()) {
    in_flight_.swap(out_);
    in_flight_.release_memory();
  }
  on_writable();  // what queued meanwhile, a long command's next step, a watcher
}

void Connection::on_room_to_send() {
  worker_.reactor().remove(fd_);
  waiting_for_room_ = false;
  on_sent(0);  // nothing was sent: the same bytes go again
}

// flush(), on this backend: hands the kernel what is queued, unless a send
// is in flight (it ends in on_sent, which comes back here).
void Connection::submit_send() {
  if (!sending_ && (unsent() > 0 || transport_->holds_output())) {
    // The queue being sent holds still: replies queued meanwhile go to out_.
    if (in_flight_.empty()) in_flight_.swap(out_);
    if (!send_in_flight()) return close();
  }
  update_interest();
}

bool Connection::send_in_flight() {
  iovec iov[Transport::kMaxSendPieces];
  int count = transport_->gather(in_flight_, iov, Transport::kMaxSendPieces);
  if (count <= 0) return count == 0;
  sending_ = true;
  if (count == 1) {
    worker_.reactor().send(fd_, iov[0].iov_base, iov[0].iov_len, this);
    return true;
  }
  if (!send_vector_) send_vector_ = std::make_unique<SendVector>();
  std::copy(iov, iov + count, send_vector_->iov);
  send_vector_->message = {};
  send_vector_->message.msg_iov = send_vector_->iov;
  send_vector_->message.msg_iovlen = static_cast<size_t>(count);
  worker_.reactor().send(fd_, &send_vector_->message, this);
  return true;
}

// update_interest(), on this backend: a receive goes on while input is
// wanted and is stopped while not; what cannot wait for a completion comes
// back on the next turn.
void Connection::update_io(bool input, bool unfinished) {
  if (input) {
    if (stashed_) {
      call_next_turn();  // handle what was kept first
    } else if (receive_ == Receive::kOff) {
      receive_ = Receive::kArmed;
      worker_.reactor().receive(fd_, this, receive_once_);
    }
  } else if (receive_ == Receive::kArmed) {
    receive_ = Receive::kStopping;
    worker_.reactor().stop_receiving(this);
  }
  // A long command goes on once its last piece was sent; with nothing to
  // send, on the next turn, after the other connections had theirs.
  if (unfinished && !sending_) call_next_turn();
}

void Connection::call_next_turn() {
  if (next_turn_pending_) return;
  next_turn_pending_ = true;
  worker_.reactor().call_soon([this] { on_next_turn(); });
}

void Connection::on_next_turn() {
  next_turn_pending_ = false;
  if (closed()) return;
  if (!stashed_) return on_writable();
  stashed_ = false;
  // What was kept: plaintext waits in the input buffer, raw bytes the
  // transport kept (TLS ciphertext) decode now.
  Input input = transport_->decode(nullptr, 0, input_);
  if (input.status == Input::Status::kAgain) return resume_input();
  // More was kept than the room took (several receives while input was
  // paused): the rest comes on a later turn, since no receive will bring
  // it. A part of a record alone decodes to nothing (kAgain above), so
  // this ends.
  stashed_ = transport_->holds_input();
  finish_read(input);
}

}  // namespace lockcached::server
