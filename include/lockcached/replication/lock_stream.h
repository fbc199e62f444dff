// The lock service's part of the replication stream (issue 16): the changes
// a locks::LockChangeListener is told, as memcached binary requests with
// private opcodes, in the same byte stream as the cache's frames. The
// replica acks positions in that stream as it acks the cache's, with a Noop
// response whose CAS is the bytes applied (heartbeat.h); a lock change is
// answered to its client once every replica acked a position at or past
// the change's frame (ReplicaBuffer::lock_appended, Master::sync).
//
// The opcodes are in 0xe0..0xe4, which memcached's binary protocol leaves
// unassigned, so a plain memcached follower refuses them instead of taking
// them for something else. Frames, all with data type, vbucket, opaque and
// CAS 0:
//
//   opcode             extras              key          value
//   0xe0 session       grace ms (u64)      session id   -
//   0xe1 session end   -                   session id   -
//   0xe2 grant         fencing token (u64) lock name    session id
//   0xe3 release       -                   lock name    session id
//   0xe4 token floor   token (u64)         -            -
//
// Keys and session ids are 1 to 250 bytes, like a cache key: the lock
// protocol refuses longer names, and session ids are at most 46 characters.
// Ids travel whole, secret included (locks/session_id.h): a client resumes
// its session on the new master with the id the old one gave it. Whoever
// can read the stream can take sessions over, as they can read every value.
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
constexpr uint8_t kLockExtras = 8;  // a grace period or a token
// The largest body of a lock frame: extras, a name and a session id.
constexpr size_t kLockMaxBody = kLockExtras + 2 * store::kMaxKeyLength;

// Whether `opcode` is a frame of the lock stream.
constexpr bool is_lock_frame(uint8_t opcode) {
  return opcode >= kLockSession && opcode <= kLockTokenFloor;
}
}  // namespace wire

// Appends lock frames to a byte string (the master's side).
class LockStreamEncoder {
 public:
  static void append_session(std::string_view id, int64_t grace_ms, std::string& out);
  static void append_session_end(std::string_view id, std::string& out);
  static void append_grant(std::string_view name, std::string_view session_id, uint64_t token,
                           std::string& out);
  static void append_release(std::string_view name, std::string_view session_id, std::string& out);
  static void append_token_floor(uint64_t token, std::string& out);

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

}  // namespace lockcached::replication
