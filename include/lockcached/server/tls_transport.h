// TLS over whatever carries the bytes: ciphertext in, plaintext to the
// protocol; replies encrypted, ciphertext out. Everything TLS a connection
// has lives here: its tls::Session (which never touches the socket
// either), its handshake, the ciphertext on its way out, and its goodbye.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "lockcached/core/stats.h"
#include "lockcached/net/reactor.h"
#include "lockcached/server/transport.h"
#include "lockcached/tls/session.h"

namespace lockcached::server {

class TlsTransport final : public Transport {
 public:
  // `connection_id` names the connection in the log. `ciphertext_scratch`:
  // the worker's buffer (`scratch_size` bytes) where a read's ciphertext
  // lands before it is decrypted. `handshake_errors` counts the clients
  // whose handshake failed (`stats`: ssl_handshake_errors).
  TlsTransport(std::shared_ptr<const tls::Context> context, uint64_t connection_id,
               core::Counter& bytes_written, std::atomic<uint64_t>& handshake_errors,
               char* ciphertext_scratch, size_t scratch_size);

  Input read(int fd, InputBuffer& input) override;
  Input decode(const char* raw, size_t size, InputBuffer& input) override;
  void keep(const char* raw, size_t size, InputBuffer& input) override;
  bool holds_input() const override { return session_.holds_ciphertext_in(); }

  int send(int fd, protocol::OutputQueue& replies) override;
  int gather(protocol::OutputQueue& replies, iovec* iov, int max) override;
  bool consume(protocol::OutputQueue& replies, size_t bytes) override;

  bool handshake_done() const override { return session_.handshake_done(); }
  void say_goodbye() override;
  std::string_view last_words() override;

 private:
  // Room for all one decryption may give: a record buffered from before,
  // and the new bytes (a read of the room left, or one completed receive),
  // so that nothing is left inside the session for a socket that will not
  // signal again.
  static constexpr size_t kMinRoom =
      tls::Session::kMaxBufferedPlaintext + std::max(InputBuffer::kMinCapacity, net::kMaxReceiveSize);

  Input decrypt(InputBuffer& input);
  Input broken();
  // Moves replies into the session while its ciphertext backlog is small;
  // false when the session failed.
  bool encrypt(protocol::OutputQueue& replies);
  // All of outgoing_ was sent: it is emptied, and given back if large.
  void forget_sent();
  // After every call that may have changed it.
  void note_output();

  tls::Session session_;
  const uint64_t connection_id_;
  core::Counter& bytes_written_;
  std::atomic<uint64_t>& handshake_errors_;
  char* const ciphertext_scratch_;
  const size_t scratch_size_;
  // Ciphertext taken out of the session for gather(): it stays put until
  // sent, while the session may write more (a handshake's answers, session
  // tickets) into buffers that move.
  std::string outgoing_;
  size_t sent_ = 0;  // of outgoing_
};

}  // namespace lockcached::server
