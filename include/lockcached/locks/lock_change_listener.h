// What the lock service tells an observer about every change to the state
// that must survive a failover (issue 16): sessions with their grace
// periods, the locks they hold with their fencing tokens, and the tokens'
// high-water mark. Waiters are not part of it: a waiting client re-queues
// itself on the new master. The service only reports; it never formats
// anything for the wire (replication/lock_stream.h does).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace lockcached::locks {

// Calls come from every thread that changes the service, concurrently for
// different names and sessions: an implementation must be thread-safe,
// short, and must not call back into the service. Each call is made while
// the service holds the lock that orders the changes it reports
// (LockService::set_change_listener says which), so the calls about one
// name, or about one session, arrive in the order of its changes, and a
// replica that applies them in arrival order ends in the master's state.
class LockChangeListener {
 public:
  virtual ~LockChangeListener() = default;

  // Session `id` exists with this grace period: just created, or its grace
  // changed (set_timeout).
  virtual void on_session(std::string_view id, int64_t grace_ms) = 0;
  // Session `id` is gone, and with it every lock it still held: discarded,
  // expired after its grace, or detached with a grace of 0. Releases of
  // its locks may follow (each with its on_release); they change nothing
  // more on a replica.
  virtual void on_session_end(std::string_view id) = 0;
  // Lock `name` is now held by session `session_id` with fencing token
  // `token`: a free lock taken, or a released one handed to its first
  // waiter.
  virtual void on_grant(std::string_view name, std::string_view session_id, uint64_t token) = 0;
  // Session `session_id` no longer holds lock `name`.
  virtual void on_release(std::string_view name, std::string_view session_id) = 0;
  // Every token handed out so far is at most `token`: what a new master
  // must stay above even when no lock is held (sent by a snapshot and by
  // LockService::adopt; a grant's token says as much for itself).
  virtual void on_token_floor(uint64_t token) = 0;
};

// The state those calls describe, as plain data: what a replica keeps
// (replication::LockMirror) and what a new master adopts
// (LockService::adopt).
struct SessionState {
  int64_t grace_ms = 0;
  std::unordered_set<std::string> held;  // names, each also in LockState::locks
  bool operator==(const SessionState&) const = default;
};

struct LockOwner {
  std::string session;
  uint64_t token = 0;
  bool operator==(const LockOwner&) const = default;
};

struct LockState {
  std::unordered_map<std::string, SessionState> sessions;  // by id
  std::unordered_map<std::string, LockOwner> locks;        // by name
  uint64_t token_high_water = 0;                           // no token handed out so far is greater
  bool operator==(const LockState&) const = default;
};

}  // namespace lockcached::locks
