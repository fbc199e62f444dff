// A session of the named-lock service (docs/lock-service.md): one line per
// request, every reply a status code.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "connection.h"
#include "login.h"

namespace lockcached::cli {

// One line of `stats locks`.
struct LockInfo {
  std::string name;
  std::string session;  // the holder's public id (the whole id from an older server)
  uint64_t held_ms = 0;
  uint64_t waiters = 0;
  uint64_t token = 0;
  // The holder's client "IP:PORT", "detached" while its session is in its
  // grace period; empty from a server that does not say.
  std::string client;
};

class LockServiceClient {
 public:
  // `timeout` bounds connecting (the TLS handshake included) and each reply
  // (a lock wait gets its wait on top). With `login`, logs in (`auth`)
  // before anything else; a refusal is a Failure with kExitLoginRefused.
  LockServiceClient(const std::string& host, uint16_t port, const TlsOptions& tls, double timeout,
                    const std::optional<Login>& login);

  // How long the server keeps this session's locks after a disconnect.
  void set_grace_ms(uint64_t millis);
  // The fencing token, or nullopt when the lock was not granted within
  // `wait_seconds` (0: try once; infinity: wait for as long as it takes).
  std::optional<uint64_t> lock(const std::string& name, double wait_seconds);
  // False when this session did not hold it (any more).
  bool unlock(const std::string& name);
  // Every lock whose name starts with `prefix`.
  void list(const std::string& prefix, const std::function<void(const LockInfo&)>& each);
  // A request with a reply and no effect: keeps the connection from counting
  // as idle and proves the server still answers.
  void ping();
  void quit();
  // `cluster add|remove|transfer ...` at the leader (followed like a
  // change); the server's reply, which waits for the cluster.
  std::string change_members(const std::string& request);

  Connection& connection() { return *connection_; }

 private:
  std::string call(const std::string& request, double extra_wait = 0);
  // A change only a cluster's leader makes (docs/high-availability.md):
  // until this client holds a lock, "503 not leader: HOST:PORT" moves it to
  // the leader (a new connection and session, its grace set again) and the
  // request goes there; "503 not leader: election" asks the same node
  // again a moment later (also on a new connection and session). A node
  // that fails to answer (closes the connection, refuses it: a leader that
  // stopped leading or died) is not asked again while another is known:
  // the last node that named a leader is, or else the node the user named
  // (the leader that was may be gone for good). Gives up after the timeout.
  std::string change(const std::string& request, double extra_wait = 0);
  // Where to ask after host:port failed to answer.
  std::pair<std::string, uint16_t> fallback_for(const std::string& host, uint16_t port) const;
  std::string ask_anew(const std::string& host, uint16_t port, const std::string& request,
                       double extra_wait);
  void connect(const std::string& host, uint16_t port);
  void log_in(const Login& login);
  [[noreturn]] void unexpected(std::string_view request, const std::string& reply) const;

  double timeout_;
  TlsOptions tls_;
  std::optional<Login> login_;
  std::unique_ptr<Connection> connection_;
  std::string host_;  // where connection_ goes
  uint16_t port_ = 0;
  std::string given_host_;  // the node the user named
  uint16_t given_port_ = 0;
  std::string naming_host_;  // the last node that named a leader; empty if none
  uint16_t naming_port_ = 0;
  std::optional<uint64_t> grace_ms_;  // what set_grace_ms asked, for a new session
  bool holds_ = false;                // a lock was granted: the session cannot move
};

// Lock names: 1 to 250 bytes, no spaces or control characters.
bool valid_lock_name(std::string_view name);

}  // namespace lockcached::cli
