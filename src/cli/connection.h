// One TCP connection to a lockcached port with deadlines on every step.
// Every failure (refused, reset, closed, timed out) is a Failure with exit
// status EX_UNAVAILABLE naming the server, so callers only handle answers.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace lockcached::cli {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// `seconds` from now; a duration too long to represent means "never".
Deadline deadline_after(double seconds);

class Connection {
 public:
  // Connects to the first address of `host` that accepts; the socket is
  // close-on-exec, so a command run under a lock never inherits it.
  Connection(const std::string& host, uint16_t port, Deadline deadline);
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
  [[noreturn]] void fail(const std::string& why) const;

  int fd_ = -1;
  std::string peer_;
  std::string buffer_;
};

}  // namespace lockcached::cli
