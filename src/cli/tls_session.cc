#include "tls_session.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "failure.h"

namespace lockcached::cli {
namespace {

// OpenSSL writes to its socket with write(2), not send(MSG_NOSIGNAL), so a
// server that has closed its end would kill the CLI with SIGPIPE. SIGPIPE
// is ignored only while OpenSSL runs, not for the whole process: an ignored
// SIGPIPE would be inherited by the command that `run` and `lock` start.
class IgnoreSigpipe {
 public:
  IgnoreSigpipe() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &saved_);
  }
  ~IgnoreSigpipe() { sigaction(SIGPIPE, &saved_, nullptr); }
  IgnoreSigpipe(const IgnoreSigpipe&) = delete;
  IgnoreSigpipe& operator=(const IgnoreSigpipe&) = delete;

 private:
  struct sigaction saved_ {};
};

// The first error OpenSSL has queued, in words ("unable to load
// certificate"), and the queue emptied for the next call.
std::string openssl_reason() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  // A failed system call (a file not found) is queued as its errno.
  if (code != 0 && ERR_SYSTEM_ERROR(code)) return strerror(ERR_GET_REASON(code));
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  if (reason != nullptr) return reason;
  return code != 0 ? "OpenSSL error " + std::to_string(code) : "unknown OpenSSL error";
}

// Whether the error OpenSSL queued is an alert the server sent.
bool from_the_server() {
  int reason = ERR_GET_REASON(ERR_peek_error());
  return reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256;
}

[[noreturn]] void cannot_load(std::string_view option, const std::string& file) {
  throw Failure(EX_CONFIG,
                "cannot load --" + std::string(option) + " " + file + ": " + openssl_reason());
}

bool is_ip_literal(const std::string& name) {
  in6_addr address;
  return inet_pton(AF_INET, name.c_str(), &address) == 1 ||
         inet_pton(AF_INET6, name.c_str(), &address) == 1;
}

}  // namespace

TlsOptions options_for_nodes_named(const TlsOptions& options, const std::string& host) {
  TlsOptions named = options;
  if (named.enabled && named.server_name.empty() && !is_ip_literal(host)) named.server_name = host;
  return named;
}

TlsSession::TlsSession(const TlsOptions& options, const std::string& host)
    : context_(SSL_CTX_new(TLS_client_method()), SSL_CTX_free), ssl_(nullptr, SSL_free) {
  SSL_CTX* context = context_.get();
  if (context == nullptr) throw Failure(EX_SOFTWARE, "TLS: " + openssl_reason());
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
  // Connection::send retries with what is left of its buffer after a partial
  // write, and from wherever that now lies.
  SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // A server that closes without close_notify (memcached does) reads as a
  // plain close: every reply says where it ends (a line, a length), so a
  // truncated one is caught anyway ("closed while waiting for ...").
  SSL_CTX_set_options(context, SSL_OP_IGNORE_UNEXPECTED_EOF);
  if (options.ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(context) != 1) {
      throw Failure(EX_CONFIG, "cannot load the system's CA certificates: " + openssl_reason());
    }
  } else if (SSL_CTX_load_verify_file(context, options.ca_file.c_str()) != 1) {
    cannot_load("tls-ca-file", options.ca_file);
  }
  if (!options.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(context, options.cert_file.c_str()) != 1) {
      cannot_load("tls-cert-file", options.cert_file);
    }
    // Loading the key checks that it is the certificate's ("key values
    // mismatch").
    if (SSL_CTX_use_PrivateKey_file(context, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      cannot_load("tls-key-file", options.key_file);
    }
  }
  ssl_.reset(SSL_new(context));
  if (ssl_ == nullptr) throw Failure(EX_SOFTWARE, "TLS: " + openssl_reason());
  const std::string& name = options.server_name.empty() ? host : options.server_name;
  // "*.example.com" may stand for "cache1.example.com", never "c*.example.com".
  SSL_set_hostflags(ssl_.get(), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  // An address is checked against the certificate's IP addresses, and is no
  // server name to send (SNI carries host names only).
  bool named = is_ip_literal(name)
                   ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_.get()), name.c_str()) == 1
                   : SSL_set_tlsext_host_name(ssl_.get(), name.c_str()) == 1 &&
                         SSL_set1_host(ssl_.get(), name.c_str()) == 1;
  if (!named) throw UsageError("TLS: cannot check certificates for the name \"" + name + "\"");
}

TlsSession::~TlsSession() {
  // One try, without waiting: the server learns the session ended on purpose.
  if (!broken_ && SSL_is_init_finished(ssl_.get()) == 1) {
    IgnoreSigpipe ignore;
    SSL_shutdown(ssl_.get());
  }
  ERR_clear_error();
}

void TlsSession::attach(int fd) {
  if (SSL_set_fd(ssl_.get(), fd) != 1) throw Failure(EX_SOFTWARE, "TLS: " + openssl_reason());
}

Transfer TlsSession::handshake() {
  IgnoreSigpipe ignore;
  ERR_clear_error();
  int result = SSL_connect(ssl_.get());
  if (result == 1) return {};
  Transfer step = outcome(result, "TLS handshake failed");
  if (step.closed)
    step = Transfer::failed("TLS handshake failed: the server closed the connection");
  return step;
}

Transfer TlsSession::read(char* into, size_t size) {
  IgnoreSigpipe ignore;
  ERR_clear_error();
  size_t done = 0;
  int result = SSL_read_ex(ssl_.get(), into, size, &done);
  if (result == 1) return Transfer::moved(done);
  return outcome(result, "TLS error");
}

Transfer TlsSession::write(std::string_view bytes) {
  IgnoreSigpipe ignore;
  ERR_clear_error();
  size_t done = 0;
  int result = SSL_write_ex(ssl_.get(), bytes.data(), bytes.size(), &done);
  if (result == 1) return Transfer::moved(done);
  return outcome(result, "TLS error");
}

Transfer TlsSession::outcome(int result, std::string_view during) {
  int error = SSL_get_error(ssl_.get(), result);
  // Read at once: anything below may change it.
  int system_error = errno;
  if (error == SSL_ERROR_WANT_READ) return Transfer::waiting(POLLIN);
  if (error == SSL_ERROR_WANT_WRITE) return Transfer::waiting(POLLOUT);
  if (error == SSL_ERROR_ZERO_RETURN) return Transfer::at_end();
  broken_ = true;
  std::string why(during);
  if (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
    std::string alert = unread_alert();
    if (!alert.empty()) {
      why += ": the server refused the session: " + alert;
    } else {
      why += system_error != 0 ? ": " + std::string(strerror(system_error))
                               : ": the server closed the connection";
    }
  } else if (long verify = SSL_get_verify_result(ssl_.get()); verify != X509_V_OK) {
    why += ": certificate verify failed: ";
    why += X509_verify_cert_error_string(verify);
  } else if (from_the_server()) {
    why += ": the server refused the session: " + openssl_reason();
  } else {
    why += ": " + openssl_reason();
  }
  ERR_clear_error();
  return Transfer::failed(why);
}

std::string TlsSession::unread_alert() {
  ERR_clear_error();
  char byte;
  size_t done = 0;
  int result = SSL_read_ex(ssl_.get(), &byte, 1, &done);
  if (result != 1 && SSL_get_error(ssl_.get(), result) == SSL_ERROR_SSL && from_the_server()) {
    return openssl_reason();
  }
  ERR_clear_error();
  return "";
}

}  // namespace lockcached::cli
