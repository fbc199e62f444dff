// The lock service as a cluster's replicated state machine
// (docs/high-availability.md).
//
// Every member holds a LockService and applies to it, in log order, the
// changes the Raft log commits (cluster/lock_log.h): the same changes in
// the same order give every member the same sessions, locks, waiters and
// tokens. Only the leader takes changes: a connection's change is proposed
// to the log, and its outcome goes back to the connection once the entry is
// committed by a majority and applied; on any other member a change is
// answered `not leader` with the leader's lock-service address.
//
// The leader also owns the lock service's time: a wait's timeout and a
// detached session's grace are timers on the Raft thread that, when they
// run out, propose the change (kCancelWait, kExpire) rather than make it,
// so the log decides whether a grant or a timeout came first. A member that
// starts to lead proposes kTermStart first: every session detaches and
// starts its grace from then, and every wait ends, so nobody else is granted
// a session's lock before its grace ran out on the new leader.
//
// Fencing tokens are the Raft index of the entry that granted them, shifted
// left by kTokenShift, plus the grant's place in the entry: they grow with
// the log, across leaders, pauses and restarts, with no clock involved.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "lockcached/cluster/lock_log.h"
#include "lockcached/consensus/raft_node.h"
#include "lockcached/locks/coordinator.h"

namespace lockcached::cluster {

// Grants per entry that keep "token >> kTokenShift == index" (more only
// push later tokens up: a token still never goes back).
constexpr int kTokenShift = 20;

class LockMachine final : public consensus::StateMachine, public locks::Coordinator {
 public:
  // Where this member serves, "HOST:PORT": `lock` its lock service,
  // `replication` its cache's replication stream, `lock_tls` its lock
  // service over TLS ("" when it has no such port); a leader announces them
  // in its first change, so that the others can name the lock service's
  // and follow the replication stream. `role_changed` runs on the Raft thread
  // whenever this member starts or stops leading, or the leader changes:
  // the member's lock-service connections must then close.
  struct Addresses {
    std::string lock;
    std::string replication;
    std::string lock_tls = {};
  };
  // `term_grace_floor_ms`: what its terms' first entries carry
  // (Change::grace_floor_ms): three election timeouts.
  LockMachine(locks::LockLimits limits, uint64_t node_id, Addresses addresses,
              std::function<void()> role_changed, int64_t term_grace_floor_ms = 0);
  ~LockMachine() override;
  // The node this machine serves: before it starts, and nullptr as the
  // server stops, while lock-service connections may still be closing (and
  // proposing their detach) on other threads.
  void attach(consensus::RaftNode* node) { node_.store(node, std::memory_order_release); }

  // ---- locks::Coordinator, from any thread ----
  locks::Outcome submit(locks::Change&& change, locks::Answer answer) override;
  bool answers_at_once() const override { return false; }

  // ---- consensus::StateMachine, on the Raft thread ----
  void apply(uint64_t index, uint64_t stamp_ms,
             std::span<const std::string_view> commands) override;
  std::string snapshot() override;
  bool restore(std::string_view data) override;
  void on_status(const consensus::RaftStatus& status) override;

  // Where the leader serves; empty while there is none, or it has not yet
  // announced itself (its first change is not applied).
  Addresses leader_addresses() const;
  std::string leader_lock_address() const { return leader_addresses().lock; }

 private:
  // A connection's change on its way through the log.
  struct Pending {
    locks::Answer answer;
    bool wait = false;
  };
  // What acquisitions are stamped with: the entry's stamp while one is
  // applied (the same on every member), the wall clock otherwise (`stats
  // locks` held_ms, display only).
  class EntryClock final : public timing::Clock {
   public:
    int64_t now_ms() const override;
    void set(int64_t stamp_ms) { stamp_ms_ = stamp_ms; }

   private:
    std::atomic<int64_t> stamp_ms_{0};
  };

  void apply_change(const LoggedChange& logged);
  // Proposed by this run of this member (entries of an earlier run are not).
  bool from_here(const Origin& origin) const {
    return origin.node == node_id_ && origin.incarnation == incarnation_;
  }
  // Hands `outcome` to the connection waiting for `request` (0: none);
  // `last`: it waits for nothing more.
  void answer(uint64_t request, const locks::Outcome& outcome, bool last);
  // Tells a detach's answer that the session's grace ran out (or forgets it:
  // resumed, or no grace at all).
  void end_grace(const locks::Change& change, const locks::Outcome& outcome);
  // The leader's own change (a timer's, its first), answered to `request`.
  void propose(const locks::Change& change, uint64_t request = 0);
  void arm_expiry(const std::string& serial, uint64_t detachment, int64_t grace_ms);
  void arm_timeout(const std::string& serial, uint64_t attachment, uint64_t request,
                   int64_t wait_ms);
  void cancel_timers();
  void fail_pending();

  const uint64_t node_id_;
  const Addresses addresses_;
  const locks::LockLimits limits_;  // this member's flags: its terms' entries carry them
  const int64_t term_grace_floor_ms_;
  const uint64_t incarnation_;
  const std::function<void()> role_changed_;
  EntryClock clock_;
  std::atomic<consensus::RaftNode*> node_{nullptr};
  consensus::RaftNode* node() const { return node_.load(std::memory_order_acquire); }

  mutable std::mutex mutex_;  // guards pending_, grace_ends_, status_ and announced_
  std::unordered_map<uint64_t, Pending> pending_;
  // By session serial: the answer of a detach from here, told when the
  // session's grace runs out (`watch locks`).
  std::unordered_map<std::string, locks::Answer> grace_ends_;
  consensus::RaftStatus status_;
  Origin announced_;  // the last leader that announced itself (kTermStart)
  Addresses announced_addresses_;
  std::atomic<uint64_t> next_request_{1};

  // The Raft thread's only.
  bool leading_ = false;
  uint64_t leading_term_ = 0;  // the term it leads in, while leading_
  std::set<timing::Scheduler::TimerId> timers_;
  std::unordered_map<uint64_t, timing::Scheduler::TimerId> wait_timers_;  // by request
};

}  // namespace lockcached::cluster
