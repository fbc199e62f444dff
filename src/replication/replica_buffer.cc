#include "lockcached/replication/replica_buffer.h"

#include "lockcached/replication/heartbeat.h"

namespace lockcached::replication {

template <typename Append>
void ReplicaBuffer::add(size_t size, Append&& append) {
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
}

void ReplicaBuffer::send_cas() {
  std::lock_guard lock(mutex_);
  with_cas_ = true;
}

// with_cas_ is read under mutex_, which add() holds.
void ReplicaBuffer::on_store(const store::Item& item) {
  add(Encoder::set_size(item), [&](std::string& out) {
    if (with_cas_) {
      encoder_.append_set_with_cas(item, out);
    } else {
      encoder_.append_set(item, out);
    }
  });
}

void ReplicaBuffer::on_delete(std::string_view key) {
  add(wire::kHeaderSize + key.size(), [&](std::string& out) { encoder_.append_delete(key, out); });
}

void ReplicaBuffer::on_flush(store::RelTime moment) {
  add(wire::kHeaderSize + wire::kFlushExtras,
      [&](std::string& out) { encoder_.append_flush(moment, out); });
}

void ReplicaBuffer::on_snapshot_begin() {
  add(wire::kHeaderSize + kSnapshotBeginKey.size(),
      [](std::string& out) { append_snapshot_begin(out); });
}

void ReplicaBuffer::on_snapshot_end() {
  add(wire::kHeaderSize + kSnapshotEndKey.size(),
      [](std::string& out) { append_snapshot_end(out); });
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

bool ReplicaBuffer::overflowed() const {
  std::lock_guard lock(mutex_);
  return overflowed_;
}

}  // namespace lockcached::replication
