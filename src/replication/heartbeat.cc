#include "lockcached/replication/heartbeat.h"

#include <endian.h>

#include <algorithm>

#include "lockcached/protocol/binary_wire.h"
#include "lockcached/replication/encoder.h"

namespace lockcached::replication {
namespace {

using namespace protocol::binary;

// A response's body is at most a short error text; anything this large is
// not a replica answering us.
constexpr uint32_t kMaxResponseBody = 4096;

// A snapshot's mark: a DeleteQ of `key`.
void append_mark(std::string_view key, std::string& out) {
  wire::append_request_header(wire::kDeleteQ, key.size(), 0, key.size(), out, 0,
                              kSnapshotMarkOpaque);
  out.append(key);
}

}  // namespace

void append_noop_request(std::string& out) {
  wire::append_request_header(wire::kNoop, 0, 0, 0, out);
}

void append_snapshot_begin(std::string& out) {
  append_mark(kSnapshotBeginKey, out);
}

void append_snapshot_end(std::string& out) {
  append_mark(kSnapshotEndKey, out);
}

// The ack: a Noop response whose CAS field carries the position applied.
// The opaque goes out in wire order, as a request's (encoder.cc).
void append_noop_response(uint64_t bytes_applied, std::string& out) {
  Header response{};
  response.magic = kResponseMagic;
  response.opcode = kNoop;
  response.opaque = htobe32(kTakesCasOpaque);
  response.cas = bytes_applied;
  append_header(response, out);
}

bool ResponseReader::feed(std::string_view bytes) {
  pending_.append(bytes);
  size_t pos = 0;
  while (pending_.size() - pos >= kHeaderSize) {
    Header header = decode_header(pending_.data() + pos);
    if (header.magic != kResponseMagic || header.body_length > kMaxResponseBody) return false;
    size_t frame = kHeaderSize + header.body_length;
    if (pending_.size() - pos < frame) break;
    answered_ = true;
    if (header.opcode == kNoop) {
      bytes_applied_ = std::max(bytes_applied_, header.cas);
      if (be32toh(header.opaque) == kTakesCasOpaque) takes_cas_ = true;
    }
    pos += frame;
  }
  pending_.erase(0, pos);
  return true;
}

}  // namespace lockcached::replication
