#include "lockcached/replication/heartbeat.h"

#include <endian.h>

#include <algorithm>
#include <cstring>

#include "lockcached/protocol/binary_wire.h"

namespace lockcached::replication {
namespace {

using namespace protocol::binary;

// A response's body is at most a short error text; anything this large is
// not a replica answering us.
constexpr uint32_t kMaxResponseBody = 4096;

void append_noop(uint8_t magic, uint64_t cas, std::string& out) {
  char header[kHeaderSize] = {};
  header[0] = static_cast<char>(magic);
  header[1] = static_cast<char>(kNoop);
  uint64_t cas_be = htobe64(cas);
  std::memcpy(header + 16, &cas_be, sizeof cas_be);
  out.append(header, kHeaderSize);
}

}  // namespace

void append_noop_request(std::string& out) {
  append_noop(kRequestMagic, 0, out);
}

void append_noop_response(uint64_t bytes_applied, std::string& out) {
  append_noop(kResponseMagic, bytes_applied, out);
}

bool ResponseReader::feed(std::string_view bytes) {
  pending_.append(bytes);
  size_t pos = 0;
  while (pending_.size() - pos >= kHeaderSize) {
    Header header = decode_header(pending_.data() + pos);
    if (header.magic != kResponseMagic || header.body_length > kMaxResponseBody) return false;
    size_t frame = kHeaderSize + header.body_length;
    if (pending_.size() - pos < frame) break;
    if (header.opcode == kNoop) bytes_applied_ = std::max(bytes_applied_, header.cas);
    pos += frame;
  }
  pending_.erase(0, pos);
  return true;
}

}  // namespace lockcached::replication
