// A connection's I/O on the io_uring backend (--io=uring): the reactor
// receives into its shared buffers and sends what we hand it, and tells us
// when each is done. One receive and one send at most are in flight; the
// protocol side (run, the TLS session, the output queue) is the epoll
// path's, in connection.cc.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "lockcached/server/connection.h"
#include "lockcached/server/worker.h"

namespace lockcached::server {
namespace {

// A copy of sent ciphertext larger than this is given back once sent: a
// connection that once sent a large value keeps no large buffer idle.
constexpr size_t kKeepCiphertextCapacity = 4096;

}  // namespace

void Connection::on_received(const char* data, int result, bool more) {
  if (!more) receive_ = Receive::kOff;
  if (closed()) return;
  if (result <= 0) {
    if (result == 0) {
      return io_ == IoState::kWatching ? close(core::CloseReason::kNormal) : close_when_sent();
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
  if (tls_) {
    InputRoom room = input_.room(kMinTlsRoom);
    return finish_read(room.data, decrypt(data, size, room));
  }
  take_input({data, size});
}

// Bytes that came while output waits (or a long command runs) are kept, not
// handled: what arrives before the receive stops (update_io asked it to, as
// input was paused), a turn's worth at most.
void Connection::stash(const char* data, size_t size) {
  if (io_ == IoState::kDraining) return;  // nothing more is read once a client said quit
  worker_.stats().bytes_read.add(size);
  last_read_ms_.store(worker_.reactor().now_ms(), std::memory_order_relaxed);
  if (tls_) {
    tls_->put_ciphertext(data, size);  // decrypted when handled
  } else {
    input_.append({data, size});
  }
  stashed_ = true;
}

void Connection::on_sent(int result) {
  sending_ = false;
  if (closed()) return;
  if (result < 0) {
    if (result != -EINTR && result != -EAGAIN) return close_after_error(-result);
    result = 0;  // the same bytes go again
  }
  auto sent = static_cast<size_t>(result);
  if (tls_) {
    ciphertext_sent_ += sent;
    if (ciphertext_sent_ < in_flight_ciphertext_.size()) return send_ciphertext_in_flight();
    in_flight_ciphertext_.clear();
    if (in_flight_ciphertext_.capacity() > kKeepCiphertextCapacity) {
      std::string().swap(in_flight_ciphertext_);
    }
  } else {
    worker_.stats().bytes_written.add(sent);
    in_flight_.consume(sent);
    if (!in_flight_.empty()) return send_in_flight();
    send_vector_.reset();
    // Nothing came in meanwhile: the buffer just sent fills up next, so one
    // buffer serves a connection that waits for each reply. The other one
    // filled only while replies queued behind a send (pipelining): it goes
    // back, so an idle connection keeps one buffer, as on epoll.
    if (out_.empty()) {
      in_flight_.swap(out_);
      in_flight_.release_memory();
    }
  }
  on_writable();  // what queued meanwhile, a long command's next step, a watcher
}

// flush(), on this backend: hands the kernel what is queued, unless a send
// is in flight (it ends in on_sent, which comes back here).
void Connection::submit_send() {
  if (!sending_) {
    if (tls_) {
      if (!encrypt_replies()) return close();
      if (tls_->ciphertext_size() > 0) {
        std::string_view ciphertext = tls_->ciphertext();
        // A copy: the session's buffer moves when more is written to it.
        in_flight_ciphertext_.assign(ciphertext.data(), ciphertext.size());
        tls_->consume_ciphertext(ciphertext.size());
        ciphertext_sent_ = 0;
        send_ciphertext_in_flight();
      }
      if (!output_pending()) tls_->trim();
    } else if (!out_.empty()) {
      in_flight_.swap(out_);  // in_flight_ is empty while no send is in flight
      send_in_flight();
    }
  }
  update_interest();
}

void Connection::send_in_flight() {
  sending_ = true;
  iovec iov[kMaxSendPieces];
  int count = in_flight_.gather(iov, kMaxSendPieces);
  if (count == 1) return worker_.reactor().send(fd_, iov[0].iov_base, iov[0].iov_len, this);
  if (!send_vector_) send_vector_ = std::make_unique<SendVector>();
  std::copy(iov, iov + count, send_vector_->iov);
  send_vector_->message = {};
  send_vector_->message.msg_iov = send_vector_->iov;
  send_vector_->message.msg_iovlen = static_cast<size_t>(count);
  worker_.reactor().send(fd_, &send_vector_->message, this);
}

void Connection::send_ciphertext_in_flight() {
  sending_ = true;
  worker_.reactor().send(fd_, in_flight_ciphertext_.data() + ciphertext_sent_,
                         in_flight_ciphertext_.size() - ciphertext_sent_, this);
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
  if (!tls_) return resume_input();
  // The kept ciphertext waits in the session: decrypt it now.
  InputRoom room = input_.room(kMinTlsRoom);
  finish_read(room.data, decrypt(nullptr, 0, room));
}

}  // namespace lockcached::server
