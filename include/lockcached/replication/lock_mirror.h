// The replica's copy of the master's lock service: the sessions, the locks
// they hold and the tokens' high-water mark, as plain data
// (locks::LockState), kept by applying the lock stream's frames in arrival
// order (Applier hands them here). On promotion the new master installs it
// with LockService::adopt.
#pragma once

#include <cstdint>
#include <string_view>

#include "lockcached/locks/lock_change_listener.h"

namespace lockcached::replication {

// Each call states "this is now so", so a state sent twice (by the stream
// and by a snapshot) applies harmlessly, and the last call about a name or
// a session wins. Not thread-safe: one Applier feeds it, and the promotion
// reads it once that applier stopped.
class LockMirror final : public locks::LockChangeListener {
 public:
  void on_session(std::string_view id, int64_t grace_ms) override;
  // Drops the session and every lock it holds.
  void on_session_end(std::string_view id) override;
  // Ignored, but for the high-water mark, when the session is unknown: it
  // ended before this grant's frame was sent (a snapshot's grant of a lock
  // whose release was still on its way), and ended sessions hold nothing.
  void on_grant(std::string_view name, std::string_view session_id, uint64_t token) override;
  // Ignored unless that session holds the lock.
  void on_release(std::string_view name, std::string_view session_id) override;
  void on_token_floor(uint64_t token) override;

  const locks::LockState& state() const { return state_; }

 private:
  // The name leaves its holder's set of held names, if it has a holder.
  void forget_holder(const std::string& name);

  locks::LockState state_;
};

}  // namespace lockcached::replication
