#include "lockcached/replication/lock_mirror.h"

#include <algorithm>
#include <string>

namespace lockcached::replication {

void LockMirror::on_session(std::string_view id, int64_t grace_ms) {
  state_.sessions[std::string(id)].grace_ms = grace_ms;
}

void LockMirror::on_session_end(std::string_view id) {
  auto session = state_.sessions.find(std::string(id));
  if (session == state_.sessions.end()) return;
  for (const std::string& name : session->second.held)
    state_.locks.erase(name);
  state_.sessions.erase(session);
}

void LockMirror::on_grant(std::string_view name, std::string_view session_id, uint64_t token) {
  on_token_floor(token);
  auto session = state_.sessions.find(std::string(session_id));
  if (session == state_.sessions.end()) return;
  std::string key(name);
  forget_holder(key);
  state_.locks[key] = {std::string(session_id), token};
  session->second.held.insert(std::move(key));
}

void LockMirror::on_release(std::string_view name, std::string_view session_id) {
  auto lock = state_.locks.find(std::string(name));
  if (lock == state_.locks.end() || lock->second.session != session_id) return;
  forget_holder(lock->first);
  state_.locks.erase(lock);
}

void LockMirror::on_token_floor(uint64_t token) {
  state_.token_high_water = std::max(state_.token_high_water, token);
}

void LockMirror::forget_holder(const std::string& name) {
  auto lock = state_.locks.find(name);
  if (lock == state_.locks.end()) return;
  auto holder = state_.sessions.find(lock->second.session);
  if (holder != state_.sessions.end()) holder->second.held.erase(name);
}

}  // namespace lockcached::replication
