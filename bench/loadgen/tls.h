// A connection's byte stream, plain or TLS: the one place where the load
// generator knows about OpenSSL. The plain path is read(2) and write(2)
// behind one inlined branch, so --tls costs nothing when it is off.
#pragma once

#include <sys/epoll.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "options.h"

// OpenSSL's types, declared rather than included: only tls.cc sees OpenSSL.
struct ssl_st;
struct ssl_ctx_st;

namespace loadgen {

struct TlsContextFree {
  void operator()(ssl_ctx_st* ctx) const;
};

// The client side of TLS (an SSL_CTX), shared by every connection of a run.
using TlsContext = std::unique_ptr<ssl_ctx_st, TlsContextFree>;

// Without --tls_ca_file nothing is verified: the load generator talks to a
// server on 127.0.0.1 that the caller started, and it measures the
// encryption, not the trust. Null and a message in `error` when OpenSSL
// refuses the setup.
TlsContext make_tls_context(const Options& options, std::string& error);

class Transport {
 public:
  Transport() = default;
  explicit Transport(int fd) : fd_(fd) {}
  ~Transport();
  Transport(Transport&& other) noexcept;
  Transport& operator=(Transport&& other) noexcept;

  int fd() const { return fd_; }

  // Runs the TLS client handshake on this socket, blocking or not: waits at
  // most 10 s, so that a server that does not speak TLS fails the run
  // instead of hanging it.
  bool start_tls(ssl_ctx_st* tls, std::string& error);

  // As read(2) and write(2): bytes moved, 0 from read when the server
  // closed, -1 with errno EAGAIN when the call must wait (for the direction
  // interest() then asks for), and -1 with failure() saying why otherwise.
  ssize_t read(void* into, size_t size) {
    return ssl_ == nullptr ? ::read(fd_, into, size) : tls_read(into, size);
  }
  ssize_t write(const void* from, size_t size) {
    return ssl_ == nullptr ? ::write(fd_, from, size) : tls_write(from, size);
  }
  std::string failure() const { return ssl_ == nullptr ? std::strerror(errno) : tls_failure_; }

  // True when OpenSSL holds received bytes that epoll cannot see (the rest
  // of a record already taken off the socket): read again before waiting,
  // or those bytes wait for the next packet, which may never come.
  bool buffered() const { return ssl_ != nullptr && tls_buffered(); }

  // The epoll events to wait for, given whether there is output to send.
  // TLS can turn them around: a read may need to send (a key update), a
  // write may need to receive first.
  uint32_t interest(bool output) const {
    if (ssl_ == nullptr) return EPOLLIN | (output ? EPOLLOUT : 0u);
    const bool send = read_waits_for_ == EPOLLOUT || (output && write_waits_for_ != EPOLLIN);
    return EPOLLIN | (send ? EPOLLOUT : 0u);
  }

  // What epoll's events mean for this stream: EPOLLIN means "read" and
  // EPOLLOUT "write", except where a TLS call waits for the other one.
  uint32_t ready(uint32_t events) const {
    if (ssl_ == nullptr) return events;
    if ((events & EPOLLOUT) && read_waits_for_ == EPOLLOUT) events |= EPOLLIN;
    if ((events & EPOLLIN) && write_waits_for_ == EPOLLIN) events |= EPOLLOUT;
    return events;
  }

  // "TLSv1.3 TLS_AES_256_GCM_SHA384", or "" on a plain stream.
  std::string tls_name() const;

 private:
  ssize_t tls_read(void* into, size_t size);
  ssize_t tls_write(const void* from, size_t size);
  ssize_t settle(int result, uint32_t& waits_for);
  bool tls_buffered() const;
  void release();

  int fd_ = -1;
  ssl_st* ssl_ = nullptr;
  uint32_t read_waits_for_ = 0;   // EPOLLIN or EPOLLOUT while SSL_read must wait; else 0
  uint32_t write_waits_for_ = 0;  // the same for SSL_write
  std::string tls_failure_;
};

}  // namespace loadgen
