#include "tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <utility>

namespace loadgen {
namespace {

constexpr std::chrono::seconds kHandshakeTimeout{10};

// Everything on OpenSSL's error queue of this thread, emptying it: a stale
// entry would make the next SSL_get_error lie.
std::string openssl_errors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(code, line, sizeof line);
    if (!text.empty()) text += "; ";
    text += line;
  }
  return text.empty() ? "unknown TLS error" : text;
}

// Waits for EPOLLIN or EPOLLOUT on `fd` until `deadline`; false on timeout.
bool wait_for(int fd, uint32_t event, std::chrono::steady_clock::time_point deadline) {
  pollfd entry{fd, static_cast<short>(event == EPOLLOUT ? POLLOUT : POLLIN), 0};
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    const int n = poll(&entry, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

}  // namespace

void TlsContextFree::operator()(ssl_ctx_st* ctx) const {
  SSL_CTX_free(ctx);
}

TlsContext make_tls_context(const Options& options, std::string& error) {
  TlsContext tls(SSL_CTX_new(TLS_client_method()));
  SSL_CTX* ctx = tls.get();
  if (ctx == nullptr) {
    error = "SSL_CTX_new: " + openssl_errors();
    return nullptr;
  }
  // A server that closes without close_notify reads as a close, as on a
  // plain socket, not as an error.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  // The engine writes what its output buffer holds; a write that must be
  // retried may by then have more bytes behind it, moved by the buffer.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (options.tls_ca_file.empty()) return tls;  // a client context verifies nothing by default
  if (SSL_CTX_load_verify_locations(ctx, options.tls_ca_file.c_str(), nullptr) != 1 ||
      X509_VERIFY_PARAM_set1_ip_asc(SSL_CTX_get0_param(ctx), options.host.c_str()) != 1) {
    error = "--tls_ca_file: " + openssl_errors();
    return nullptr;
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  return tls;
}

Transport::~Transport() {
  release();
}

Transport::Transport(Transport&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      ssl_(std::exchange(other.ssl_, nullptr)),
      read_waits_for_(other.read_waits_for_),
      write_waits_for_(other.write_waits_for_),
      tls_failure_(std::move(other.tls_failure_)) {}

Transport& Transport::operator=(Transport&& other) noexcept {
  if (this == &other) return *this;
  release();
  fd_ = std::exchange(other.fd_, -1);
  ssl_ = std::exchange(other.ssl_, nullptr);
  read_waits_for_ = other.read_waits_for_;
  write_waits_for_ = other.write_waits_for_;
  tls_failure_ = std::move(other.tls_failure_);
  return *this;
}

void Transport::release() {
  // No close_notify: the run is over, and the servers treat the EOF alike.
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) close(fd_);
  ssl_ = nullptr;
  fd_ = -1;
}

bool Transport::start_tls(ssl_ctx_st* tls, std::string& error) {
  ssl_ = SSL_new(tls);
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) {
    error = "SSL_new: " + openssl_errors();
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + kHandshakeTimeout;
  for (;;) {
    const int result = SSL_connect(ssl_);
    if (result == 1) return true;
    uint32_t waits_for = 0;
    if (settle(result, waits_for) == 0 || errno != EAGAIN) {
      error = "TLS handshake: " + tls_failure_;
      return false;
    }
    if (!wait_for(fd_, waits_for, deadline)) {
      error = "TLS handshake: no answer in 10 s (does the server speak TLS on this port?)";
      return false;
    }
  }
}

ssize_t Transport::tls_read(void* into, size_t size) {
  size_t n = 0;
  read_waits_for_ = 0;
  if (SSL_read_ex(ssl_, into, size, &n) == 1) return static_cast<ssize_t>(n);
  return settle(0, read_waits_for_);
}

ssize_t Transport::tls_write(const void* from, size_t size) {
  size_t n = 0;
  write_waits_for_ = 0;
  if (SSL_write_ex(ssl_, from, size, &n) == 1) return static_cast<ssize_t>(n);
  return settle(0, write_waits_for_);
}

// A failed SSL call as read(2) would have put it; `waits_for` gets the
// direction OpenSSL must wait for before the call can go on.
ssize_t Transport::settle(int result, uint32_t& waits_for) {
  const int saved_errno = errno;
  const int code = SSL_get_error(ssl_, result);
  if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) {
    waits_for = code == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT;
    errno = EAGAIN;
    return -1;
  }
  if (code == SSL_ERROR_ZERO_RETURN) {
    tls_failure_ = "the server closed the connection";
    return 0;
  }
  if (code == SSL_ERROR_SYSCALL && saved_errno != 0) {
    tls_failure_ = std::strerror(saved_errno);
    ERR_clear_error();
  } else {
    tls_failure_ = openssl_errors();
  }
  errno = EIO;
  return -1;
}

bool Transport::tls_buffered() const {
  return SSL_has_pending(ssl_) == 1;
}

std::string Transport::tls_name() const {
  if (ssl_ == nullptr) return "";
  return std::string(SSL_get_version(ssl_)) + " " + SSL_get_cipher_name(ssl_);
}

}  // namespace loadgen
