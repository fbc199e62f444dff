// The named-lock service's line protocol (../shared/specs/lock-service.md):
// one request per line, replies "<code> <word or value>". Parses and
// formats only; locks::LockService does the work.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lockcached/core/auth.h"
#include "lockcached/core/watch.h"
#include "lockcached/locks/lock_service.h"
#include "lockcached/net/reactor.h"
#include "lockcached/protocol/handler.h"
#include "lockcached/protocol/text_parser.h"

namespace lockcached::protocol {

// What a lock-service connection lends its protocol.
struct LockServiceContext {
  // Shared: a master that loses its role gets a new service, while the
  // grace timers of this one's sessions may still run.
  std::shared_ptr<locks::LockService> service;
  net::Reactor& reactor;  // the connection's own: timers and grant delivery
  OutputQueue& out;       // where replies to waits go when the wait ends
  // Called on the reactor thread once such a reply is queued.
  std::function<void()> on_async_reply;
  // True while this server is a replica: only stats and quit are served.
  const std::atomic<bool>* read_only = nullptr;
  // Where `watch locks` hears of grants, waits and releases, and who this
  // connection is (the connection's own, living as long as it).
  core::WatchHub* watch = nullptr;
  const core::ClientInfo* client = nullptr;
  // The same connection as its sessions record it: its id (in -vv log
  // lines and `stats conns`) and the client's address (for `stats locks`).
  locks::ClientInfo session_client = {};
  // When given, `auth USER PASSWORD` must succeed before anything else.
  const core::Authenticator* authenticator = nullptr;
};

class LockServiceProtocol final : public ProtocolHandler {
 public:
  explicit LockServiceProtocol(LockServiceContext context);
  ~LockServiceProtocol() override;

  size_t consume(std::string_view input, OutputQueue& out) override;
  bool wants_close() const override { return close_; }
  bool blocked() const override { return wait_ != nullptr || replicating_; }
  // Blocked in a `lock NAME SECONDS` (else, when blocked, on the replicas).
  bool waiting_for_lock() const { return wait_ != nullptr; }
  void connection_closed(core::CloseReason reason) override;

 private:
  void execute(std::string_view line, OutputQueue& out);
  void auth(const Words& words, OutputQueue& out);
  void lock(const Words& words, OutputQueue& out);
  void unlock(const Words& words, OutputQueue& out);
  void conn_id(const Words& words, OutputQueue& out);
  void set_timeout(const Words& words, OutputQueue& out);
  void stats(const Words& words, OutputQueue& out);
  void start_wait(std::string_view name, int64_t wait_ms, OutputQueue& out);
  // Both run on the reactor thread; exactly one of them answers a wait.
  void on_granted(uint64_t token);
  void on_wait_timeout();
  void end_wait();
  // Answers a change once the replicas have it (locks::ReplicationBarrier):
  // true when `reply` went to `out` at once (no replica to wait for);
  // false when it goes to context_.out later, the protocol blocked till then.
  bool answer_change(std::string reply, OutputQueue& out);
  void on_replicated(bool replicated, const std::string& reply);
  locks::LockService& service() { return *context_.service; }
  bool watched() const {
    return context_.watch && context_.client && context_.watch->watching(core::kWatchLocks);
  }
  // One line of the locks stream about this connection's session.
  void report(std::string_view type, std::string_view name, std::string_view details);
  std::vector<std::string> held_names() const;

  LockServiceContext context_;
  core::AuthSession auth_;
  std::shared_ptr<locks::Session> session_;
  std::shared_ptr<locks::WaitTicket> wait_;
  net::Reactor::TimerId wait_timer_ = 0;
  // Callbacks that may outlive this object hold a weak_ptr to this.
  std::shared_ptr<LockServiceProtocol*> self_;
  bool replicating_ = false;  // a reply waits for the replicas
  bool close_ = false;
  bool closed_ = false;
};

}  // namespace lockcached::protocol
