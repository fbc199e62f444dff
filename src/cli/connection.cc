#include "connection.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "failure.h"

namespace lockcached::cli {
namespace {

int remaining_ms(Deadline deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 3'600'000));
}

// Waits for `events` on `fd`; false when the deadline passes first.
bool wait_for(int fd, short events, Deadline deadline) {
  while (true) {
    pollfd poll_fd{fd, events, 0};
    int ready = poll(&poll_fd, 1, remaining_ms(deadline));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
    if (ready == 0 && Clock::now() >= deadline) return false;
  }
}

// Connects one non-blocking socket; returns it, or -1 with errno set.
int connect_one(const addrinfo& address, Deadline deadline) {
  int fd = socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  address.ai_protocol);
  if (fd < 0) return -1;
  int error = 0;
  if (connect(fd, address.ai_addr, address.ai_addrlen) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      socklen_t length = sizeof error;
      error = wait_for(fd, POLLOUT, deadline) ? 0 : ETIMEDOUT;
      if (error == 0) getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    }
  }
  if (error != 0) {
    close(fd);
    errno = error;
    return -1;
  }
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  return fd;
}

// What a recv or send that returned `result` means, as a Transfer; EINTR
// reads as "try again".
Transfer socket_transfer(ssize_t result, short wait, const char* call) {
  if (result > 0) return Transfer::moved(static_cast<size_t>(result));
  if (result == 0) return Transfer::at_end();
  if (errno == EAGAIN || errno == EWOULDBLOCK) return Transfer::waiting(wait);
  if (errno == EINTR) return {};
  return Transfer::failed(std::string(call) + ": " + strerror(errno));
}

}  // namespace

Deadline deadline_after(double seconds) {
  // Far enough to never come, near enough not to overflow the clock.
  constexpr double kNever = 100.0 * 365 * 24 * 3600;
  auto span = std::chrono::duration<double>(std::min(seconds, kNever));
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(span);
}

Connection::Connection(const std::string& host, uint16_t port, const TlsOptions& tls,
                       Deadline deadline)
    : peer_(host + ":" + std::to_string(port)) {
  // Before connecting: a certificate file that cannot be loaded is reported
  // without waiting for a server.
  if (tls.enabled) tls_ = std::make_unique<TlsSession>(tls, host);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int status = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (status != 0) {
    throw Failure(EX_UNAVAILABLE,
                  "cannot connect to " + peer_ + ": " + std::string(gai_strerror(status)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, freeaddrinfo);
  int error = EHOSTUNREACH;
  // "localhost" may name ::1 first while the server listens on 127.0.0.1 only.
  for (addrinfo* address = found; address != nullptr && fd_ < 0; address = address->ai_next) {
    fd_ = connect_one(*address, deadline);
    if (fd_ < 0) error = errno;
  }
  if (fd_ < 0) throw Failure(EX_UNAVAILABLE, "cannot connect to " + peer_ + ": " + strerror(error));
  if (tls_) handshake(deadline);
}

Connection::~Connection() {
  tls_.reset();  // its close_notify needs the socket
  if (fd_ >= 0) close(fd_);
}

void Connection::handshake(Deadline deadline) {
  tls_->attach(fd_);
  while (true) {
    Transfer step = tls_->handshake();
    if (!step.error.empty()) fail(step.error);
    if (step.wait == 0) return;
    if (!wait_for(fd_, step.wait, deadline)) fail("timed out in the TLS handshake");
  }
}

Transfer Connection::read_some(char* into, size_t size) {
  if (tls_) return tls_->read(into, size);
  return socket_transfer(recv(fd_, into, size, 0), POLLIN, "recv");
}

Transfer Connection::write_some(std::string_view bytes) {
  if (tls_) return tls_->write(bytes);
  return socket_transfer(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), POLLOUT, "send");
}

void Connection::fail(const std::string& why) const {
  throw Failure(EX_UNAVAILABLE, "connection to " + peer_ + ": " + why);
}

void Connection::send(std::string_view bytes, Deadline deadline) {
  while (!bytes.empty()) {
    Transfer sent = write_some(bytes);
    if (sent.closed) fail("closed by the server while sending a request");
    if (!sent.error.empty()) fail(sent.error);
    bytes.remove_prefix(sent.bytes);
    if (sent.wait != 0 && !wait_for(fd_, sent.wait, deadline)) {
      fail("timed out sending a request");
    }
  }
}

void Connection::fill(Deadline deadline, std::string_view waiting_for) {
  while (true) {
    char chunk[16384];
    Transfer got = read_some(chunk, sizeof chunk);
    if (got.bytes > 0) {
      buffer_.append(chunk, got.bytes);
      return;
    }
    if (got.closed) fail("closed by the server while waiting for " + std::string(waiting_for));
    if (!got.error.empty()) fail(got.error);
    if (got.wait != 0 && !wait_for(fd_, got.wait, deadline)) {
      fail("no reply in time (waiting for " + std::string(waiting_for) + ")");
    }
  }
}

std::string Connection::read_line(Deadline deadline) {
  size_t searched = 0;
  while (true) {
    size_t newline = buffer_.find('\n', searched);
    if (newline != std::string::npos) {
      size_t end = newline > 0 && buffer_[newline - 1] == '\r' ? newline - 1 : newline;
      std::string line = buffer_.substr(0, end);
      buffer_.erase(0, newline + 1);
      return line;
    }
    searched = buffer_.size();
    fill(deadline, "a reply line");
  }
}

std::string Connection::read_exactly(size_t n, Deadline deadline) {
  while (buffer_.size() < n)
    fill(deadline, std::to_string(n) + " bytes");
  std::string bytes = buffer_.substr(0, n);
  buffer_.erase(0, n);
  return bytes;
}

void Connection::check_open() {
  char chunk[4096];
  while (true) {
    Transfer got = read_some(chunk, sizeof chunk);
    buffer_.append(chunk, got.bytes);
    if (got.closed) fail("closed by the server");
    if (!got.error.empty()) fail(got.error);
    // Nothing more without waiting (through TLS, maybe only a session
    // ticket or the start of a record).
    if (got.wait != 0) return;
  }
}

}  // namespace lockcached::cli
