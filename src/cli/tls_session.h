// TLS for lockcached-cli's connections: OpenSSL on the connection's own
// non-blocking socket. Every OpenSSL call of the CLI is in tls_session.cc;
// the Connection drives it (and does all the waiting, with its deadlines),
// so the protocol clients above never see whether TLS is on.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

// OpenSSL's types, declared as its headers do, so that this header does not
// pull them in everywhere.
struct ssl_ctx_st;
struct ssl_st;

namespace lockcached::cli {

// --tls and its companions (docs/cli.md, "TLS").
struct TlsOptions {
  bool enabled = false;
  std::string ca_file;    // CA bundle to verify the server; empty: the system's
  std::string cert_file;  // client certificate (mutual TLS), with key_file
  std::string key_file;
  std::string server_name;  // name to verify and send as SNI; empty: the host
};

// The options for the nodes that the first, at `host`, sends the client on
// to (a follower's "503 not leader: ADDRESS"). Their certificates must carry
// the name the user gave, --tls_server_name or --host's host name: the
// address a node names is no name the user vouched for. Where --host is an
// address, each node is checked against its own.
TlsOptions options_for_nodes_named(const TlsOptions& options, const std::string& host);

// The outcome of one attempt to move bytes (or to take the handshake a step
// further) on a non-blocking connection. At most one field is set; none set
// means the handshake is complete, or a read or write should be tried again.
struct Transfer {
  size_t bytes = 0;     // moved
  short wait = 0;       // nothing moved: poll for these events, then try again
  bool closed = false;  // the server closed the connection
  std::string error;    // the connection is broken: why

  static Transfer moved(size_t bytes) {
    Transfer transfer;
    transfer.bytes = bytes;
    return transfer;
  }
  static Transfer waiting(short events) {
    Transfer transfer;
    transfer.wait = events;
    return transfer;
  }
  static Transfer at_end() {
    Transfer transfer;
    transfer.closed = true;
    return transfer;
  }
  static Transfer failed(std::string why) {
    Transfer transfer;
    transfer.error = std::move(why);
    return transfer;
  }
};

class TlsSession {
 public:
  // Loads the CA and the client certificate, and sets the name the server's
  // certificate must carry: `options.server_name`, else `host`. Throws
  // Failure (EX_CONFIG) for a file that cannot be loaded; the Connection
  // makes this before connecting, so that a bad file never waits for a
  // server.
  TlsSession(const TlsOptions& options, const std::string& host);
  // Sends close_notify when the session is still sound.
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Runs the session on the connected non-blocking socket `fd`.
  void attach(int fd);
  // One step of the client handshake, server verification included.
  Transfer handshake();
  Transfer read(char* into, size_t size);
  Transfer write(std::string_view bytes);

 private:
  // What an OpenSSL call that returned `result` means, as a Transfer.
  Transfer outcome(int result, std::string_view during);
  // A server that refuses the session (in TLS 1.3, a client certificate,
  // after the client's handshake is done) sends an alert and closes with
  // the client's request unread, which resets the connection: the request's
  // write fails before the alert is read. The alert, where it came, says
  // why; empty where none did.
  std::string unread_alert();

  std::unique_ptr<ssl_ctx_st, void (*)(ssl_ctx_st*)> context_;
  std::unique_ptr<ssl_st, void (*)(ssl_st*)> ssl_;
  // After a fatal error OpenSSL must not be asked to send close_notify.
  bool broken_ = false;
};

}  // namespace lockcached::cli
