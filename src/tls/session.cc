#include "lockcached/tls/session.h"

#include <openssl/bio.h>
#include <openssl/buffer.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <climits>

#include <glog/logging.h>

namespace lockcached::tls {
namespace {

// A memory BIO that reports "try again" when empty, as a non-blocking
// socket would, instead of end of file.
BIO* new_buffer() {
  BIO* bio = BIO_new(BIO_s_mem());
  CHECK(bio != nullptr) << "out of memory";
  BIO_set_mem_eof_return(bio, -1);
  return bio;
}

// A BIO's buffer keeps its largest size; one that held more than this (a
// handshake's certificates, a large value) is swapped for a new one once
// empty, so that an idle connection holds little.
constexpr size_t kKeepBufferBytes = 2 * 1024;

}  // namespace

Session::Session(std::shared_ptr<const Context> context)
    : context_(std::move(context)), ssl_(SSL_new(context_->native())) {
  CHECK(ssl_ != nullptr) << "out of memory";
  in_ = new_buffer();
  out_ = new_buffer();
  SSL_set_bio(ssl_, in_, out_);
  SSL_set_accept_state(ssl_);
}

Session::~Session() {
  SSL_free(ssl_);  // frees both BIOs
}

void Session::put_ciphertext(const char* data, size_t size) {
  while (size > 0) {
    int chunk = static_cast<int>(std::min<size_t>(size, INT_MAX));
    int written = BIO_write(in_, data, chunk);
    CHECK(written == chunk) << "out of memory";
    data += chunk;
    size -= static_cast<size_t>(chunk);
  }
  in_peak_ = std::max(in_peak_, BIO_ctrl_pending(in_));
}

void Session::note_ciphertext() {
  ciphertext_size_ = BIO_ctrl_pending(out_);
  out_peak_ = std::max(out_peak_, ciphertext_size_);
}

size_t Session::read(char* out, size_t room) {
  size_t total = 0;
  while (total < room && !failed_ && !peer_closed_) {
    size_t read = 0;
    int result = SSL_read_ex(ssl_, out + total, room - total, &read);
    if (result == 1) {
      total += read;
      continue;
    }
    note_failure(result);
    break;
  }
  note_ciphertext();  // handshake messages, session tickets, alerts
  return total;
}

size_t Session::write(const void* data, size_t size) {
  if (failed_ || size == 0) return 0;
  size_t written = 0;
  int result = SSL_write_ex(ssl_, data, size, &written);
  note_ciphertext();
  if (result == 1) return written;
  note_failure(result);
  return 0;
}

// WANT_READ is no failure: the handshake or a record waits for the peer.
void Session::note_failure(int result) {
  switch (SSL_get_error(ssl_, result)) {
    case SSL_ERROR_WANT_READ:
      return;
    case SSL_ERROR_ZERO_RETURN:
      peer_closed_ = true;
      return;
    default: {
      failed_ = true;
      unsigned long code = ERR_get_error();
      char text[256] = "connection error";
      if (code != 0) ERR_error_string_n(code, text, sizeof text);
      error_ = text;
      ERR_clear_error();
    }
  }
}

void Session::take_ciphertext(std::string& out) {
  size_t at = out.size();
  out.resize(at + ciphertext_size_);
  while (at < out.size()) {
    int chunk = static_cast<int>(std::min<size_t>(out.size() - at, INT_MAX));
    int read = BIO_read(out_, out.data() + at, chunk);
    CHECK(read > 0) << "the ciphertext buffer lost what it held";
    at += static_cast<size_t>(read);
  }
  ciphertext_size_ = 0;
}

bool Session::holds_ciphertext_in() const {
  return BIO_ctrl_pending(in_) > 0 || SSL_pending(ssl_) > 0;
}

bool Session::handshake_done() const {
  return SSL_is_init_finished(ssl_) == 1;
}

void Session::shutdown() {
  if (SSL_shutdown(ssl_) < 0) ERR_clear_error();
  note_ciphertext();
}

void Session::trim() {
  if (in_peak_ > kKeepBufferBytes && BIO_ctrl_pending(in_) == 0) {
    in_ = new_buffer();
    SSL_set0_rbio(ssl_, in_);  // frees the old one
    in_peak_ = 0;
  }
  if (out_peak_ > kKeepBufferBytes && ciphertext_size_ == 0) {
    out_ = new_buffer();
    SSL_set0_wbio(ssl_, out_);
    out_peak_ = 0;
  }
}

}  // namespace lockcached::tls
