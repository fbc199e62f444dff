#include "lockcached/tls/context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <ctime>

namespace lockcached::tls {
namespace {

// The newest OpenSSL error, in its own words ("error:...:key values
// mismatch"); the queue is emptied so that the next failure starts clean.
std::string openssl_error() {
  unsigned long code = ERR_get_error();
  char text[256] = "unknown error";
  if (code != 0) ERR_error_string_n(code, text, sizeof text);
  ERR_clear_error();
  return text;
}

// memcached's wording, so that a message reads the same on either server.
bool fail(std::string* error, const char* what, const std::string& file) {
  *error = std::string("Error loading the ") + what + ": " + file + " : " + openssl_error();
  return false;
}

bool configure(SSL_CTX* ctx, const Settings& settings, std::string* error) {
  // Renegotiation is how a client makes a server redo the costliest step
  // as often as it likes; TLS 1.3 has none, and 1.2 clients don't need it.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                               SSL_OP_NO_COMPRESSION);
  // An idle connection gives its record buffers (about 34 KiB) back.
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (!SSL_CTX_set_min_proto_version(ctx, settings.min_version)) {
    *error = "Error setting the minimum TLS version: " + openssl_error();
    return false;
  }
  if (!settings.ciphers.empty() && !SSL_CTX_set_cipher_list(ctx, settings.ciphers.c_str())) {
    *error = "Error setting the ciphers: " + settings.ciphers + " : " + openssl_error();
    return false;
  }
  if (!SSL_CTX_use_certificate_chain_file(ctx, settings.cert_file.c_str())) {
    return fail(error, "certificate chain", settings.cert_file);
  }
  const std::string& key = settings.key_file.empty() ? settings.cert_file : settings.key_file;
  if (!SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) ||
      !SSL_CTX_check_private_key(ctx)) {
    return fail(error, "key", key);
  }
  if (!settings.ca_file.empty()) {
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(settings.ca_file.c_str());
    if (names == nullptr || !SSL_CTX_load_verify_locations(ctx, settings.ca_file.c_str(), nullptr)) {
      if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
      return fail(error, "CA certificate", settings.ca_file);
    }
    SSL_CTX_set_client_CA_list(ctx, names);  // takes ownership
  }
  if (settings.verify_client) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  // Resumed sessions must come from this server's configuration only.
  static constexpr unsigned char kSessionContext[] = "lockcached";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
  return true;
}

}  // namespace

std::shared_ptr<const Context> Context::load(const Settings& settings, std::string* error) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) {
    *error = "Error creating the TLS context: " + openssl_error();
    return nullptr;
  }
  if (!configure(ctx, settings, error)) {
    SSL_CTX_free(ctx);
    return nullptr;
  }
  return std::shared_ptr<const Context>(new Context(ctx));
}

Context::~Context() {
  SSL_CTX_free(ctx_);
}

ServerContext::ServerContext(Settings settings, std::shared_ptr<const Context> loaded)
    : settings_(std::move(settings)),
      current_(std::move(loaded)),
      loaded_at_(current_ ? static_cast<int64_t>(::time(nullptr)) : 0) {}

bool ServerContext::reload(std::string* error) {
  std::shared_ptr<const Context> loaded = Context::load(settings_, error);
  if (!loaded) return false;
  std::lock_guard lock(mutex_);
  current_ = std::move(loaded);
  loaded_at_ = static_cast<int64_t>(::time(nullptr));
  return true;
}

std::shared_ptr<const Context> ServerContext::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

int64_t ServerContext::loaded_at() const {
  std::lock_guard lock(mutex_);
  return loaded_at_;
}

}  // namespace lockcached::tls
