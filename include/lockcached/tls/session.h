// One TLS connection as a byte transformer over memory BIOs: the caller
// reads the socket and puts the ciphertext in, takes plaintext out, puts
// plaintext in and sends the ciphertext that comes out. OpenSSL never
// touches the socket, so TLS needs nothing from the I/O backend and a
// handshake never blocks: a step that needs the peer just waits for the
// next read.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "lockcached/tls/context.h"

typedef struct ssl_st SSL;
typedef struct bio_st BIO;

namespace lockcached::tls {

class Session {
 public:
  // The plaintext one read of `n` ciphertext bytes can yield at most, on
  // top of `n`: a record that was partly buffered before.
  static constexpr size_t kMaxBufferedPlaintext = 16 * 1024;

  explicit Session(std::shared_ptr<const Context> context);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Ciphertext from the peer.
  void put_ciphertext(const char* data, size_t size);
  // Decrypts what it can into `out`; 0 when it needs more ciphertext (or
  // the handshake is still going). Check failed() and peer_closed() after.
  size_t read(char* out, size_t room);
  // Encrypts `size` bytes; returns how many it took: all of them once the
  // handshake is done, none before.
  size_t write(const void* data, size_t size);

  // Ciphertext waiting to be sent (handshake messages, encrypted replies):
  // its size, known without asking OpenSSL (TlsTransport asks after
  // every step, and each BIO call costs about a hundred instructions).
  size_t ciphertext_size() const { return ciphertext_size_; }
  // Moves all of it to the end of `out`.
  void take_ciphertext(std::string& out);

  bool handshake_done() const;
  // A protocol error, a failed handshake or verification: close.
  bool failed() const { return failed_; }
  // The peer sent close_notify: it sends nothing more.
  bool peer_closed() const { return peer_closed_; }
  // Received bytes not read out yet: ciphertext, or plaintext of a record
  // read in part. Maybe only part of a record, which read() cannot finish.
  bool holds_ciphertext_in() const;
  // Why it failed, OpenSSL's words, for the log.
  const std::string& error() const { return error_; }
  // Queues close_notify: the connection ends cleanly.
  void shutdown();
  // Gives back memory a burst left in the buffers once they are empty.
  void trim();

 private:
  void note_failure(int result);
  // After OpenSSL may have written ciphertext.
  void note_ciphertext();

  std::shared_ptr<const Context> context_;  // the SSL_CTX outlives ssl_
  SSL* ssl_;
  BIO* in_;   // ciphertext from the peer, owned by ssl_
  BIO* out_;  // ciphertext to the peer, owned by ssl_
  size_t ciphertext_size_ = 0;
  // The most each buffer held since it was last made anew: a buffer keeps
  // its largest size, and only one that grew is worth replacing.
  size_t in_peak_ = 0;
  size_t out_peak_ = 0;
  bool failed_ = false;
  bool peer_closed_ = false;
  std::string error_;
};

}  // namespace lockcached::tls
