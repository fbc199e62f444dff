// The lock service's part of the replication stream (issue 16): the changes
// a locks::LockChangeListener is told, as memcached binary requests with
// private opcodes, in the same byte stream as the cache's frames; and the
// replica's ack, the one frame that goes the other way. A lock grant is
// answered to its client once every replica acked a position at or past
// the grant's frame (ReplicaBuffer::appended).
//
// The opcodes are in 0xe0..0xe5, which memcached's binary protocol leaves
// unassigned, so a plain memcached follower refuses them instead of taking
// them for something else. Frames, all with data type, vbucket, opaque and
// CAS 0 (but the ack's CAS):
//
//   opcode             extras              key          value
//   0xe0 session       grace ms (u64)      session id   -
//   0xe1 session end   -                   session id   -
//   0xe2 grant         fencing token (u64) lock name    session id
//   0xe3 release       -                   lock name    session id
//   0xe4 token floor   token (u64)         -            -
//   0xe5 ack           -                   -            -      CAS: stream bytes applied
//
// Keys and session ids are 1 to 250 bytes, like a cache key: the lock
// protocol refuses longer names, and session ids are a few characters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lockcached/locks/lock_change_listener.h"
#include "lockcached/replication/encoder.h"
#include "lockcached/store/store.h"

namespace lockcached::replication {

namespace wire {
constexpr uint8_t kLockSession = 0xe0;
constexpr uint8_t kLockSessionEnd = 0xe1;
constexpr uint8_t kLockGrant = 0xe2;
constexpr uint8_t kLockRelease = 0xe3;
constexpr uint8_t kLockTokenFloor = 0xe4;
constexpr uint8_t kLockAck = 0xe5;
constexpr uint8_t kLockExtras = 8;  // a grace period or a token
// The largest body of a lock frame: extras, a name and a session id.
constexpr size_t kLockMaxBody = kLockExtras + 2 * store::kMaxKeyLength;

// Whether `opcode` is a frame of the lock stream from master to replica
// (the ack is not: it goes the other way).
constexpr bool is_lock_frame(uint8_t opcode) {
  return opcode >= kLockSession && opcode <= kLockTokenFloor;
}
}  // namespace wire

// Appends lock frames to a byte string (the master's side, and the
// replica's ack).
class LockStreamEncoder {
 public:
  static void append_session(std::string_view id, int64_t grace_ms, std::string& out);
  static void append_session_end(std::string_view id, std::string& out);
  static void append_grant(std::string_view name, std::string_view session_id, uint64_t token,
                           std::string& out);
  static void append_release(std::string_view name, std::string_view session_id, std::string& out);
  static void append_token_floor(uint64_t token, std::string& out);
  // Replica to master: `applied` stream bytes are applied (Applier::bytes_applied).
  static void append_ack(uint64_t applied, std::string& out);

  // An upper bound of the size of a frame whose key and value take `bytes`.
  static constexpr size_t frame_bound(size_t bytes) {
    return wire::kHeaderSize + wire::kLockExtras + bytes;
  }
};

// The replica's side of one lock frame, for Applier: nullptr when a header
// with a lock opcode has lengths that fit it, else why not (checked before
// the body is read).
const char* check_lock_header(const protocol::binary::Header& header);
// Tells `out` what a whole frame, whose header passed check_lock_header,
// says; nullptr, or why its content is refused.
const char* apply_lock_frame(const protocol::binary::Header& header, std::string_view extras,
                             std::string_view key, std::string_view value,
                             locks::LockChangeListener& out);

// The master's reader of one replica's acks, from bytes cut anywhere.
class AckReader {
 public:
  // Reads every whole ack in `bytes` and keeps a partial one. Returns false
  // once anything else came, or an ack went backwards (error() says which):
  // the master then drops the replica, which must resync.
  bool feed(std::string_view bytes);

  // The latest position acked: every stream byte before it is applied.
  uint64_t acked() const { return acked_; }
  std::string_view error() const { return error_; }

 private:
  // One whole 24-byte frame.
  bool read(const char* frame);
  bool fail(const char* why) {
    error_ = why;
    return false;
  }

  std::string pending_;  // less than one frame
  uint64_t acked_ = 0;
  const char* error_ = "";
};

}  // namespace lockcached::replication
