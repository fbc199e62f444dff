// The replication stream's keep-alive, both ways. The master sends a binary
// Noop once a tick; any memcached-compatible replica answers it, so the
// master learns that the replica lives, and a replica that hears nothing
// for a while knows that the master is gone (a dead machine sends no RST).
// A lockcached replica also sends a Noop response of its own every tick,
// with the count of stream bytes it has applied in the CAS field: the
// master's measure of its lag. It sends the first the moment it connects,
// and each carries kTakesCasOpaque: the master then sends it each item's
// CAS (encoder.h), which no other replica would take.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lockcached::replication {

void append_noop_request(std::string& out);
// What a lockcached master puts first in a new replica's stream: the
// snapshot that follows comes beside what the replica holds. The replica
// keeps that until the snapshot's end, and drops then what the snapshot did
// not bring (Applier), so a master that dies half-way through its snapshot
// leaves the replica what it had. A DeleteQ, as the end's mark is, for the
// same reasons. A replica that sees another first frame (an older master's)
// empties its store before applying it.
constexpr std::string_view kSnapshotBeginKey{"\0lockcached snapshot begin\0", 27};
void append_snapshot_begin(std::string& out);
// What a lockcached master puts in the stream after a new replica's
// snapshot: from there on the replica's cache has the master's data (a
// Raft member then may lead, Server::cache_may_lead). A DeleteQ of a key no
// text client can write, so that any replica applies it as a harmless
// delete: an older lockcached or yrmcds replica, which refuses unknown
// frames and a CAS in a frame, keeps streaming.
constexpr std::string_view kSnapshotEndKey{"\0lockcached snapshot end\0", 25};
void append_snapshot_end(std::string& out);
// Both marks carry this opaque; a client's delete goes out with 0
// (Encoder::append_delete). A binary or base64 key may hold these very
// bytes, and its delete must not pass for a mark: in a marked stream the
// replica takes for the end only a DeleteQ with both. An older replica
// reads the key alone, and an older master's end comes with opaque 0.
constexpr uint32_t kSnapshotMarkOpaque = 0x6c634d6b;  // "lcMk"
// What a lockcached replica's acks carry in the opaque field ("lcCs"): it
// takes a SetQ's CAS as the item's (Applier), so its master sends each
// item's CAS, and a client's CAS stays true when it becomes the master.
// An older lockcached replica refuses a CAS in a frame, and to memcached a
// SetQ's CAS is a compare-and-swap: their acks, or the Noop responses
// memcached answers with, carry the opaque of the master's Noop (0).
constexpr uint32_t kTakesCasOpaque = 0x6c634373;  // "lcCs"
void append_noop_response(uint64_t bytes_applied, std::string& out);

// Reads what a replica sends back, cut anywhere: responses only.
class ResponseReader {
 public:
  // False once the bytes are not responses: the replica must be dropped.
  bool feed(std::string_view bytes);
  // The largest count a Noop response carried; 0 when none did.
  uint64_t bytes_applied() const { return bytes_applied_; }
  // A whole response came.
  bool answered() const { return answered_; }
  // A Noop response carried kTakesCasOpaque.
  bool takes_cas() const { return takes_cas_; }

 private:
  std::string pending_;
  uint64_t bytes_applied_ = 0;
  bool answered_ = false;
  bool takes_cas_ = false;
};

}  // namespace lockcached::replication
