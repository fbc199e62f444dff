#include "lockcached/replication/replica_buffer.h"

#include <utility>

#include "lockcached/replication/lock_stream.h"

namespace lockcached::replication {

template <typename Append>
void ReplicaBuffer::add(size_t size, Append&& append, bool lock_frame) {
  std::lock_guard lock(mutex_);
  if (overflowed_) return;
  if (bytes_.size() + size > limit_) {
    overflowed_ = true;
    std::string().swap(bytes_);  // the replica starts over: free the memory now
    return;
  }
  size_t before = bytes_.size();
  append(bytes_);
  appended_ += bytes_.size() - before;
  if (lock_frame) lock_appended_ = appended_;
}

template <typename Append>
void ReplicaBuffer::add_lock(size_t size, Append&& append) {
  add(size, std::forward<Append>(append), true);
}

void ReplicaBuffer::on_store(const store::Item& item) {
  add(Encoder::set_size(item), [&](std::string& out) { encoder_.append_set(item, out); });
}

void ReplicaBuffer::on_delete(std::string_view key) {
  add(wire::kHeaderSize + key.size(), [&](std::string& out) { encoder_.append_delete(key, out); });
}

void ReplicaBuffer::on_flush(store::RelTime moment) {
  add(wire::kHeaderSize + wire::kFlushExtras,
      [&](std::string& out) { encoder_.append_flush(moment, out); });
}

void ReplicaBuffer::on_session(std::string_view id, int64_t grace_ms) {
  add_lock(LockStreamEncoder::frame_bound(id.size()),
      [&](std::string& out) { LockStreamEncoder::append_session(id, grace_ms, out); });
}

void ReplicaBuffer::on_session_end(std::string_view id) {
  add_lock(LockStreamEncoder::frame_bound(id.size()),
      [&](std::string& out) { LockStreamEncoder::append_session_end(id, out); });
}

void ReplicaBuffer::on_grant(std::string_view name, std::string_view session_id, uint64_t token) {
  add_lock(LockStreamEncoder::frame_bound(name.size() + session_id.size()),
      [&](std::string& out) { LockStreamEncoder::append_grant(name, session_id, token, out); });
}

void ReplicaBuffer::on_release(std::string_view name, std::string_view session_id) {
  add_lock(LockStreamEncoder::frame_bound(name.size() + session_id.size()),
      [&](std::string& out) { LockStreamEncoder::append_release(name, session_id, out); });
}

void ReplicaBuffer::on_token_floor(uint64_t token) {
  add_lock(LockStreamEncoder::frame_bound(0),
      [&](std::string& out) { LockStreamEncoder::append_token_floor(token, out); });
}

bool ReplicaBuffer::take(std::string& out) {
  out.clear();
  std::lock_guard lock(mutex_);
  out.swap(bytes_);
  return !overflowed_;
}

size_t ReplicaBuffer::size() const {
  std::lock_guard lock(mutex_);
  return bytes_.size();
}

uint64_t ReplicaBuffer::appended() const {
  std::lock_guard lock(mutex_);
  return appended_;
}

uint64_t ReplicaBuffer::lock_appended() const {
  std::lock_guard lock(mutex_);
  return lock_appended_;
}

bool ReplicaBuffer::overflowed() const {
  std::lock_guard lock(mutex_);
  return overflowed_;
}

}  // namespace lockcached::replication
