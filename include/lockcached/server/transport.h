// How a connection's bytes travel: as they are (PlainTransport) or inside
// TLS (TlsTransport). The connection calls its transport, never a TLS
// session, as Redis's connections call their ConnectionType and Envoy's
// their TransportSocket.
//
// Each I/O backend moves the raw bytes its own way, and the transport has
// calls for both:
//
//   io_uring: the reactor receives and sends; the connection hands the
//     transport what was received (decode, keep) and asks it what to send
//     (gather), and later what was sent (consume).
//   epoll: the connection is told the socket is ready and asks the
//     transport to read it (read) or to send on it (send), which are
//     decode and gather/consume around the system calls: one virtual call
//     per read or send, never one per byte or per reply.
//
// So each transport works on every backend, and the connection has no TLS
// code at all.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lockcached/net/socket.h"
#include "lockcached/protocol/output_queue.h"
#include "lockcached/server/input_buffer.h"

namespace lockcached::server {

// What a read, or raw bytes handed over, came to.
struct Input {
  enum class Status : uint8_t {
    kBytes,   // `bytes`, for the protocol
    kAgain,   // nothing yet: no data after all, a handshake step, part of a record
    kEnd,     // the client ended the stream (end of file, TLS close_notify)
    kBroken,  // the stream cannot go on (a TLS protocol error): close
    kFailed,  // the socket failed with `error` (an errno)
  };
  Status status;
  std::string_view bytes = {};
  int error = 0;
  // kBytes: the client ended the stream right after them (a TLS
  // close_notify in the same read): no event will come to say so.
  bool ended = false;
};

class Transport {
 public:
  // What send() returns when the stream broke (TLS: encryption failed).
  static constexpr int kBroken = -1;
  static constexpr int kMaxSendPieces = 64;  // iovecs in one send

  virtual ~Transport() = default;

  // Input.
  // epoll: one read() of the readable socket `fd`, into `input`'s room (or,
  // TLS, ciphertext decrypted into it).
  virtual Input read(int fd, InputBuffer& input) = 0;
  // io_uring: `size` raw bytes the reactor received, or none (to decode
  // what keep() kept): the bytes themselves, or decoded into input.room().
  virtual Input decode(const char* raw, size_t size, InputBuffer& input) = 0;
  // io_uring: raw bytes that came while input was paused, kept until
  // decode() is called again. Plaintext waits in `input`.
  virtual void keep(const char* raw, size_t size, InputBuffer& input) = 0;
  // io_uring: whether raw bytes kept here would decode() to more input now
  // (TLS: records that did not fit the room). No receive will bring them.
  virtual bool holds_input() const = 0;

  // Output.
  // epoll: sends on `fd` what it takes now of `replies`; 0, the errno of a
  // send that failed, or kBroken.
  virtual int send(int fd, protocol::OutputQueue& replies) = 0;
  // io_uring: describes up to `max` pieces of the raw bytes to send next:
  // the pieces of `replies` themselves, or what they encrypt to. 0 when
  // nothing is to be sent, kBroken when the stream broke. The pieces stay
  // where they are until consume(), whatever else the transport is asked
  // meanwhile, as long as `replies` does not change.
  virtual int gather(protocol::OutputQueue& replies, iovec* iov, int max) = 0;
  // io_uring: the first `bytes` of what gather() described were sent.
  // Whether anything more waits to be sent, in `replies` or here.
  virtual bool consume(protocol::OutputQueue& replies, size_t bytes) = 0;
  // Raw bytes held here beside the replies (TLS: ciphertext). Known
  // without a virtual call: the connection asks after every flush.
  bool holds_output() const { return holds_output_; }

  // False for a client that has not finished its handshake yet
  // (--tls_handshake_timeout).
  virtual bool handshake_done() const = 0;
  // The connection is closing politely: the transport's own words for it
  // (TLS: close_notify) go into last_words().
  virtual void say_goodbye() = 0;
  // What is left to send before the socket closes, for one try (TLS: an
  // alert that says why, or close_notify). Only while no send is in flight.
  virtual std::string_view last_words() = 0;

 protected:
  // What a read() that returned `result` <= 0 came to.
  static Input unread(ssize_t result);
  // send(), for a transport `self` of type T (final, so that its gather and
  // consume are called directly): what it gathers, sent until the socket
  // is full or nothing is left.
  template <class T>
  static int send_gathered(T& self, int fd, protocol::OutputQueue& replies);

  bool holds_output_ = false;
};

template <class T>
int Transport::send_gathered(T& self, int fd, protocol::OutputQueue& replies) {
  for (;;) {
    iovec iov[kMaxSendPieces];
    int count = self.gather(replies, iov, kMaxSendPieces);
    if (count <= 0) return count;
    // Most replies are one piece of bytes: send() spares the kernel the
    // message header and iovec copies of sendmsg().
    ssize_t sent = count == 1 ? net::send_some(fd, iov[0].iov_base, iov[0].iov_len)
                              : net::send_some(fd, iov, static_cast<size_t>(count));
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return errno;
    }
    if (!self.consume(replies, static_cast<size_t>(sent))) return 0;
  }
}

}  // namespace lockcached::server
