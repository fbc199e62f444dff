#include "lockcached/server/tls_transport.h"

#include <cstring>

#include <glog/logging.h>

#include "lockcached/core/verbosity.h"

namespace lockcached::server {
namespace {

// Replies are encrypted only while less than this waits to be sent, and at
// most this much at once: the ciphertext backlog stays bounded.
constexpr size_t kMaxCiphertextBacklog = 64 * 1024;
// Small reply pieces are joined into records of up to this much: a record
// per piece would add 22+ bytes and a MAC each.
constexpr size_t kRecordSize = 16 * 1024;
// Sent ciphertext's buffer is given back once it holds more than this: a
// connection that once sent a large value keeps no large buffer idle.
constexpr size_t kKeepOutgoingCapacity = 4096;
// Pieces of replies looked at for one record.
constexpr int kMaxRecordPieces = 64;

}  // namespace

TlsTransport::TlsTransport(std::shared_ptr<const tls::Context> context, uint64_t connection_id,
                           core::Counter& bytes_written, std::atomic<uint64_t>& handshake_errors,
                           char* ciphertext_scratch, size_t scratch_size)
    : session_(std::move(context)),
      connection_id_(connection_id),
      bytes_written_(bytes_written),
      handshake_errors_(handshake_errors),
      ciphertext_scratch_(ciphertext_scratch),
      scratch_size_(scratch_size) {}

// One read of ciphertext, limited so that all it decrypts to fits the room.
Input TlsTransport::read(int fd, InputBuffer& input) {
  InputRoom room = input.room(kMinRoom);
  size_t limit = std::min(room.size - tls::Session::kMaxBufferedPlaintext, scratch_size_);
  ssize_t received = net::read_some(fd, ciphertext_scratch_, limit);
  if (received <= 0) return unread(received);
  return decode(ciphertext_scratch_, static_cast<size_t>(received), input);
}

Input TlsTransport::decode(const char* raw, size_t size, InputBuffer& input) {
  if (size > 0) session_.put_ciphertext(raw, size);
  Input decrypted = decrypt(input);
  note_output();  // a handshake's answers, session tickets, alerts
  // A burst from the client, all read now, gives its buffer back: with
  // nothing to answer (noreply), no send would.
  session_.trim();
  return decrypted;
}

Input TlsTransport::decrypt(InputBuffer& input) {
  InputRoom room = input.room(kMinRoom);
  size_t decrypted = session_.read(room.data, room.size);
  if (session_.failed()) return broken();
  if (decrypted > 0) {
    return {.status = Input::Status::kBytes,
            .bytes = {room.data, decrypted},
            .ended = session_.peer_closed()};
  }
  if (session_.peer_closed()) return {Input::Status::kEnd};
  return {Input::Status::kAgain};  // a handshake step, or part of a record
}

// The alert that tells the client why is in last_words().
Input TlsTransport::broken() {
  LOCKCACHED_VLOG(1) << '<' << connection_id_ << " TLS: " << session_.error();
  if (!session_.handshake_done()) handshake_errors_.fetch_add(1, std::memory_order_relaxed);
  return {Input::Status::kBroken};
}

// Decrypted when input resumes.
void TlsTransport::keep(const char* raw, size_t size, InputBuffer& /*input*/) {
  session_.put_ciphertext(raw, size);
}

int TlsTransport::send(int fd, protocol::OutputQueue& replies) {
  return send_gathered(*this, fd, replies);
}

// New ciphertext is taken out of the session only once what was taken
// before is sent: the pieces described stay put until then.
int TlsTransport::gather(protocol::OutputQueue& replies, iovec* iov, int max) {
  if (sent_ == outgoing_.size()) {
    if (!encrypt(replies)) return kBroken;
    session_.take_ciphertext(outgoing_);
  }
  note_output();
  if (!holds_output_) {
    session_.trim();  // nothing waits: the buffers a burst grew go back
    return 0;
  }
  if (max == 0) return 0;
  iov[0] = {outgoing_.data() + sent_, outgoing_.size() - sent_};
  return 1;
}

bool TlsTransport::consume(protocol::OutputQueue& replies, size_t bytes) {
  sent_ += bytes;
  if (sent_ == outgoing_.size()) forget_sent();
  note_output();
  if (holds_output_ || !replies.empty()) return true;
  session_.trim();  // as in gather()
  return false;
}

bool TlsTransport::encrypt(protocol::OutputQueue& replies) {
  while (!replies.empty() && session_.handshake_done() &&
         session_.ciphertext_size() < kMaxCiphertextBacklog) {
    iovec iov[kMaxRecordPieces];
    int count = replies.gather(iov, kMaxRecordPieces);
    const char* data = static_cast<const char*>(iov[0].iov_base);
    size_t size = std::min(iov[0].iov_len, kMaxCiphertextBacklog);
    char joined[kRecordSize];
    if (count > 1 && size < kRecordSize) {
      size = 0;
      for (int i = 0; i < count && size < kRecordSize; ++i) {
        size_t part = std::min(iov[i].iov_len, kRecordSize - size);
        std::memcpy(joined + size, iov[i].iov_base, part);
        size += part;
      }
      data = joined;
    }
    size_t taken = session_.write(data, size);
    if (taken == 0) return !session_.failed();
    bytes_written_.add(taken);
    replies.consume(taken);
  }
  return true;
}

void TlsTransport::forget_sent() {
  outgoing_.clear();
  sent_ = 0;
  if (outgoing_.capacity() > kKeepOutgoingCapacity) std::string().swap(outgoing_);
}

void TlsTransport::note_output() {
  holds_output_ = sent_ < outgoing_.size() || session_.ciphertext_size() > 0;
}

void TlsTransport::say_goodbye() {
  if (!session_.handshake_done() || session_.failed()) return;
  session_.shutdown();
  note_output();
}

// No send is in flight, so outgoing_ may grow: what was not sent of it
// yet, then the session's last records.
std::string_view TlsTransport::last_words() {
  session_.take_ciphertext(outgoing_);
  note_output();
  return std::string_view(outgoing_).substr(sent_);
}

}  // namespace lockcached::server
