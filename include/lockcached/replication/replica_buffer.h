// The bytes waiting for one replica: the frames of every change the store
// reports, and of its snapshot, in the order its shard locks let them in,
// as one stream (one TCP connection per replica). Master sends them; this
// class only collects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "lockcached/replication/encoder.h"
#include "lockcached/store/change_listener.h"

namespace lockcached::replication {

// A store::ChangeListener that encodes each change at once, under the
// caller's shard lock. Encoding later from a reference (ItemRef) would spare
// the copy under the lock, but a touch changes exptime in place, so the
// exptime would have to be captured anyway, the refcount costs two locked
// instructions per change, and the references would pin deleted items'
// memory for as long as the replica lags; a copy of a typical item is
// cheaper than all that, and the frame is what must be buffered anyway.
class ReplicaBuffer final : public store::ChangeListener {
 public:
  // A replica too slow to keep `limit` bytes or fewer waiting is dropped:
  // the buffer then discards its bytes, collects nothing more, and take()
  // says so; the replica must resync.
  ReplicaBuffer(const store::Clock& clock, size_t limit) : encoder_(clock), limit_(limit) {}

  // Before the buffer hears any change: its SetQs carry each item's CAS
  // (a lockcached replica's acks said it takes them, heartbeat.h).
  void send_cas();

  void on_store(const store::Item& item) override;
  void on_delete(std::string_view key) override;
  void on_flush(store::RelTime moment) override;
  // The snapshot's marks (heartbeat.h): its beginning, before the store
  // reports anything to this buffer, and its end, once it went in whole.
  void on_snapshot_begin();
  void on_snapshot_end();

  // Replaces `out` with the waiting bytes, leaving none; false (and no
  // bytes) once the buffer has overflowed.
  bool take(std::string& out);
  size_t size() const;
  bool overflowed() const;
  // Every byte ever added, taken or not: the stream position of the end of
  // the last frame. Read after a change returned (its frame added under the
  // change's lock), it is at or past the end of that change's frame, so a
  // replica whose ack (Applier::bytes_applied) reached it has applied the
  // change (the master's lag, FollowerStatus::lag_ms). It stops growing
  // once the buffer overflowed.
  uint64_t appended() const;

 private:
  // Appends one frame; `size` is an upper bound of its length.
  template <typename Append>
  void add(size_t size, Append&& append);

  const Encoder encoder_;
  const size_t limit_;
  mutable std::mutex mutex_;  // taken under a shard lock, never the reverse
  std::string bytes_;
  uint64_t appended_ = 0;
  bool overflowed_ = false;
  bool with_cas_ = false;
};

}  // namespace lockcached::replication
