// Bytes as they are: what the client sent is the plaintext, the replies
// are what goes out. Nothing is copied: a read lands where the protocol
// reads it, and a send points into the output queue.
#pragma once

#include "lockcached/core/stats.h"
#include "lockcached/server/transport.h"

namespace lockcached::server {

class PlainTransport final : public Transport {
 public:
  // `bytes_written`: counts what the socket took.
  explicit PlainTransport(core::Counter& bytes_written) : bytes_written_(bytes_written) {}

  Input read(int fd, InputBuffer& input) override;
  Input decode(const char* raw, size_t size, InputBuffer& input) override;
  void keep(const char* raw, size_t size, InputBuffer& input) override;
  bool holds_input() const override { return false; }  // keep() put it all in `input`

  int send(int fd, protocol::OutputQueue& replies) override;
  int gather(protocol::OutputQueue& replies, iovec* iov, int max) override;
  bool consume(protocol::OutputQueue& replies, size_t bytes) override;

  bool handshake_done() const override { return true; }
  void say_goodbye() override {}
  std::string_view last_words() override { return {}; }

 private:
  core::Counter& bytes_written_;
};

}  // namespace lockcached::server
