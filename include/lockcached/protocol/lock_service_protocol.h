// The named-lock service's line protocol (../shared/specs/lock-service.md):
// one request per line, replies "<code> <word or value>". Parses and
// formats only: every change goes to a locks::Coordinator, which makes it
// (locks::LockService) at once on a single server, or once a cluster's log
// has it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockcached/consensus/membership.h"
#include "lockcached/core/auth.h"
#include "lockcached/core/watch.h"
#include "lockcached/locks/coordinator.h"
#include "lockcached/locks/lock_service.h"
#include "lockcached/net/reactor.h"
#include "lockcached/protocol/handler.h"
#include "lockcached/protocol/text_parser.h"

namespace lockcached::protocol {

// What a lock-service connection lends its protocol.
struct LockServiceContext {
  // Where its changes go (locks/coordinator.h). Shared: a replicated node
  // that changes role gets a new one, while this one's timers may still run.
  std::shared_ptr<locks::Coordinator> coordinator;
  net::Reactor& reactor;  // the connection's own: answers hop here
  OutputQueue& out;       // where replies go that come after consume() returned
  // Called on the reactor thread once such a reply is queued.
  std::function<void()> on_async_reply;
  // True while this server is a replica: only stats and quit are served.
  const std::atomic<bool>* read_only = nullptr;
  // Where `watch locks` hears of grants, waits and releases.
  core::WatchHub* watch = nullptr;
  // Who this connection is (the connection's own, living as long as it):
  // in -vv log lines, watch lines, and its sessions (`stats locks`, `stats
  // conns`); nullptr: unknown.
  const net::ClientInfo* client = nullptr;
  // When given, `auth USER PASSWORD` must succeed before anything else.
  const core::Authenticator* authenticator = nullptr;
  // A cluster member's `cluster add|remove|transfer`; empty on a single
  // server, which answers them 400.
  consensus::MembershipRequester change_members = {};
  // The connection speaks TLS: its 503s name the leader's TLS port.
  bool over_tls = false;
};

class LockServiceProtocol final : public ProtocolHandler {
 public:
  explicit LockServiceProtocol(LockServiceContext context);
  ~LockServiceProtocol() override;

  size_t consume(std::string_view input, OutputQueue& out) override;
  bool wants_close() const override { return close_; }
  bool blocked() const override { return pending_ || waiting_ || changing_members_; }
  // Stopped while kMaxQueuedOutput of replies wait (TurnBudget, no -R here).
  bool has_unfinished_work() const override { return budget_.yielded(); }
  void continue_work(OutputQueue& /*out*/) override { budget_.resume(); }
  // Blocked in a `lock NAME SECONDS` (else, when blocked, on a change being
  // decided, or on a `cluster` command).
  bool waiting_for_lock() const { return waiting_; }
  bool awaits_cluster_change() const override { return changing_members_; }
  // Whether the connection has a session of the service it serves (opened
  // or resumed): not behind --auth_file before its `auth`, nor on a cluster
  // member that did not lead. For checks (test/fuzz).
  bool has_session() const { return session_ != nullptr; }
  void connection_closed(core::CloseReason reason) override;

 private:
  // A command's row in the table of lock_service_protocol.cc: name, handler
  // and whether it is served before authenticating, or on a replica.
  struct Command;
  static const Command* find_command(std::string_view name);
  void execute(std::string_view line, OutputQueue& out);
  // Every connection's own session, opened once it may use one.
  void open_session();
  void auth(const Words& words, OutputQueue& out);
  void quit(const Words& words, OutputQueue& out);
  void lock(const Words& words, OutputQueue& out);
  void unlock(const Words& words, OutputQueue& out);
  void unlock_all(const Words& words, OutputQueue& out);
  void conn_id(const Words& words, OutputQueue& out);
  void set_timeout(const Words& words, OutputQueue& out);
  void stats(const Words& words, OutputQueue& out);
  void cluster(const Words& words, OutputQueue& out);
  void on_members_changed(consensus::MembershipChange::Kind kind,
                          const consensus::MembershipResult& result);
  std::string leader_for_client(const std::string& plain, const std::string& tls) const;
  // Hands `change` to the coordinator; its outcome is finished now or,
  // once it comes, on the reactor thread (the protocol blocked till then).
  void submit(locks::Change&& change, OutputQueue& out);
  // Where outcomes come in that were not returned at once.
  locks::Answer answer();
  void on_answer(const locks::Outcome& outcome);
  // The reply to the pending change (or wait), from its outcome.
  void finish(const locks::Outcome& outcome, OutputQueue& out);
  void finish_acquire(const locks::Outcome& outcome, OutputQueue& out);
  // Answers a change made, unless this node changed role meanwhile.
  void confirm(std::string_view reply, OutputQueue& out);
  locks::LockService& service() { return context_.coordinator->service(); }
  const net::ClientInfo& client() const {
    return context_.client ? *context_.client : net::kUnknownClient;
  }
  bool watched() const {
    return context_.watch && context_.client && context_.watch->watching(core::kWatchLocks);
  }
  // One line of the locks stream about this connection's session.
  void report(std::string_view type, std::string_view name, std::string_view details);
  std::vector<std::string> held_names() const;

  LockServiceContext context_;
  core::AuthSession auth_;
  std::shared_ptr<locks::Session> session_;  // null until opened (or on a non-leader)
  uint64_t attachment_ = 0;  // session_'s attachment to this connection (Outcome::attachment)
  // The change whose outcome is awaited, and for a lock its name and wait.
  std::optional<locks::ChangeKind> pending_;
  std::string pending_name_;
  int64_t pending_wait_ms_ = 0;
  bool waiting_ = false;    // queued behind a holder: the grant or timeout answers
  bool confirming_ = false;  // the pending kSetGrace is `conn_id <own id>`'s (200 Resumed)
  std::string not_leader_;  // set once a change was refused as not the leader's
  // Callbacks that may outlive this object hold a weak_ptr to this.
  std::shared_ptr<LockServiceProtocol*> self_;
  bool changing_members_ = false;  // a `cluster` change waits for the cluster
  TurnBudget budget_{0};
  bool close_ = false;
  bool closed_ = false;
};

}  // namespace lockcached::protocol
