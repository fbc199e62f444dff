// One TCP connection to a lockcached port, in TLS when asked, with
// deadlines on every step (the TLS handshake included). Every failure
// (refused, reset, closed, timed out, a certificate that does not verify) is
// a Failure with exit status EX_UNAVAILABLE naming the server, so callers
// only handle answers.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tls_session.h"

namespace lockcached::cli {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// `seconds` from now; a duration too long to represent means "never".
Deadline deadline_after(double seconds);

class Connection {
 public:
  // Connects to the first address of `host` that accepts, then with
  // `tls.enabled` runs the TLS handshake on it; the socket is close-on-exec,
  // so a command run under a lock never inherits it (nor uses the TLS
  // session, which lives in this process's memory only).
  Connection(const std::string& host, uint16_t port, const TlsOptions& tls, Deadline deadline);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }

  void send(std::string_view bytes, Deadline deadline);
  // One line, its "\r\n" (or "\n") removed.
  std::string read_line(Deadline deadline);
  std::string read_exactly(size_t n, Deadline deadline);
  // For a connection that expects no unsolicited bytes: reads what is there
  // without waiting. Throws when the server has closed the connection.
  void check_open();

 private:
  // Waits until more bytes arrive; throws on close, error or deadline.
  void fill(Deadline deadline, std::string_view waiting_for);
  void handshake(Deadline deadline);
  // One non-blocking attempt, through TLS when it is on.
  Transfer read_some(char* into, size_t size);
  Transfer write_some(std::string_view bytes);
  [[noreturn]] void fail(const std::string& why) const;

  int fd_ = -1;
  std::string peer_;
  std::unique_ptr<TlsSession> tls_;  // null: plain TCP
  std::string buffer_;
};

}  // namespace lockcached::cli
