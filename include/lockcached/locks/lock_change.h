// A change to the lock service, as plain data, and what it did.
//
// A lock-service connection expresses everything it wants changed as a
// Change; LockService::apply carries it out. On a single server the change
// is applied at once, on the connection's thread (LocalCoordinator); in a
// cluster it is proposed to the Raft log first and applied on every member
// when the log commits it, in log order (cluster::LockMachine), so that
// every member, given the same changes in the same order, reaches the same
// state. Nothing in a change's effect may therefore depend on where or
// when it is applied: the session's secret comes in the change, a
// session's serial and a grant's token from the state, time from the
// entry's stamp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockcached/locks/lock_service.h"

namespace lockcached::locks {

enum class ChangeKind : uint8_t {
  kOpen = 1,    // a new session for a new connection (secret: the id's secret)
  kResume,      // `conn_id ID`: take session `id` over; the own one ends
  kDetach,      // the connection went away: the session's grace starts
  kSetGrace,    // `set_timeout`
  kAcquire,     // `lock NAME [SECONDS]`: wait_ms 0 does not wait
  kCancelWait,  // the session's wait ends unanswered (timed_out, or its connection left)
  kRelease,     // `unlock NAME`
  kReleaseAll,  // `unlock_all`
  kExpire,      // a detached session's grace ran out
  kTermStart,   // a new leader: every session detaches, every wait ends
};

struct Change {
  ChangeKind kind = ChangeKind::kOpen;
  // The session the change is about (resolved by whoever applies it: the
  // connection's own on a single server, by serial in a cluster).
  std::shared_ptr<Session> session;
  std::string serial;  // the session's serial, when `session` is to be found by it
  // kAcquire, kRelease; kTermStart: the new leader's cache replication
  // address ("HOST:PORT").
  std::string name;
  // kResume: the whole id asked for; kOpen: the new secret; kTermStart: the
  // new leader's lock-service address ("HOST:PORT").
  std::string id;
  int64_t wait_ms = 0;
  int64_t grace_ms = 0;
  // kExpire: the detachment whose grace ran out. kDetach, kCancelWait,
  // kRelease: 0, or the attachment (Outcome::attachment) of the connection
  // it comes from: then it is done only while the session still has that
  // attachment. A connection that is gone speaks for a session that may
  // have been resumed elsewhere since (a new leader detaches every session,
  // and a client may resume before its old connection's last word comes).
  uint64_t detachment = 0;
  bool timed_out = false;  // kCancelWait
  net::ClientInfo client;  // kOpen, kResume: the connection (reported only)
  // kTermStart: the new leader's limits, which every member applies from
  // then on, whatever its own flags say (absent in an older leader's entry:
  // the limits stay). So a change is refused by a limit on every member
  // or on none.
  std::optional<LockLimits> limits;
  // kTermStart: the least grace a session that holds locks gets at this
  // term's start, whatever its own (0 for lockcached-cli's run). The old
  // leader may still answer that session's client until it finds it lost
  // its majority (libraft checks once per election timeout): the leader's
  // three election timeouts (LockMachine) outlast that, so the client is
  // told before anyone else is granted its locks.
  int64_t grace_floor_ms = 0;
  // kTermStart: where the new leader's lock service speaks TLS, "HOST:PORT"
  // ("": nowhere).
  std::string lock_tls_address;

  // What a coordinator's timers propose; the caller names the session
  // (`session` or `serial`). A wait's timeout ends only the wait of the
  // connection that asked (`attachment`), not one the session made on a
  // later connection.
  static Change wait_timed_out(uint64_t attachment) {
    Change cancel;
    cancel.kind = ChangeKind::kCancelWait;
    cancel.detachment = attachment;
    cancel.timed_out = true;
    return cancel;
  }
  static Change grace_over(uint64_t detachment) {
    Change expire;
    expire.kind = ChangeKind::kExpire;
    expire.detachment = detachment;
    return expire;
  }
};

enum class OutcomeStatus : uint8_t {
  kDone,       // changed as asked (kAcquire: granted, `token`)
  kRefused,    // kResume: cannot resume; kRelease: not held
  kBusy,       // kAcquire without a wait: someone else holds it
  kLimited,    // kAcquire: a LockLimits bound refused it (`limit`)
  kQueued,     // kAcquire with a wait: queued; the grant comes later
  kNotLeader,  // a cluster member that does not lead took no change
  kLost,       // the change's fate is unknown (leadership lost meanwhile)
  kLater,      // Coordinator::submit: not known yet; it comes through the answer
};

struct Outcome {
  OutcomeStatus status = OutcomeStatus::kDone;
  uint64_t token = 0;                // kAcquire granted
  Limit limit = Limit::kNone;        // kLimited
  std::shared_ptr<Session> session;  // kOpen, kResume: the session now used
  int64_t grace_ms = 0;              // kDetach: the grace that started (0: ended)
  uint64_t detachment = 0;           // kDetach: what kExpire must name
  uint64_t attachment = 0;           // kOpen, kResume: what the connection's changes name
  // kNotLeader: "HOST:PORT" of the leader's lock port, or "" (an election);
  // and of its TLS lock port, "" when it has none. A connection over TLS
  // names the second (a client there cannot speak to a plain port).
  std::string leader;
  std::string leader_tls;
  // kTermStart: the sessions now in their grace, for the leader's timers.
  std::vector<LockService::Adopted> in_grace;
  std::vector<std::string> released;  // kExpire: the names its grace let go
};

}  // namespace lockcached::locks
