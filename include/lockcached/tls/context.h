// The server's TLS configuration, loaded into an OpenSSL SSL_CTX: the
// certificate chain, its key, the CA that signs client certificates, and
// what is asked of a client. Connections (tls::Session) take the current
// one when they are accepted; a reload builds a new one and swaps it in
// only when every file loaded, so a bad file never breaks TLS.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

typedef struct ssl_ctx_st SSL_CTX;

namespace lockcached::tls {

// OpenSSL's numbers for the versions a server may demand at least.
constexpr int kTls12 = 0x0303;  // TLS1_2_VERSION
constexpr int kTls13 = 0x0304;  // TLS1_3_VERSION

struct Settings {
  std::string cert_file;  // PEM certificate chain, the server's first
  std::string key_file;   // PEM private key; empty: it is in cert_file
  std::string ca_file;    // PEM CAs whose client certificates are accepted
  bool verify_client = false;  // mutual TLS: no valid client certificate, no handshake
  int min_version = kTls12;    // or kTls13
  std::string ciphers;         // TLS 1.2 cipher list; empty: OpenSSL's default
};

// One loaded configuration. Immutable once made; shared by the sessions
// made from it, which keep it alive past a reload.
class Context {
 public:
  // nullptr with memcached's wording of what failed in *error.
  static std::shared_ptr<const Context> load(const Settings& settings, std::string* error);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  SSL_CTX* native() const { return ctx_; }

 private:
  explicit Context(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

// The context new connections get, reloadable from any thread
// (memcached's refresh_certs, SIGHUP).
class ServerContext {
 public:
  // `loaded`: `settings`' files as loaded already (config::load checks
  // them so), current until a reload; nullptr: none until reload().
  explicit ServerContext(Settings settings, std::shared_ptr<const Context> loaded = nullptr);

  // Loads the files again; on failure the current context stays.
  bool reload(std::string* error);
  std::shared_ptr<const Context> current() const;
  // Unix time of the last successful load (`time_since_server_cert_refresh`).
  int64_t loaded_at() const;

 private:
  const Settings settings_;
  mutable std::mutex mutex_;
  std::shared_ptr<const Context> current_;
  int64_t loaded_at_ = 0;
};

}  // namespace lockcached::tls
