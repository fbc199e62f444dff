#include "lockcached/replication/lock_stream.h"

#include <endian.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace lockcached::replication {
namespace {

void append_u64(uint64_t value, std::string& out) {
  uint64_t big = htobe64(value);
  out.append(reinterpret_cast<const char*>(&big), sizeof big);
}

uint64_t u64_at(std::string_view bytes) {
  uint64_t big;
  std::memcpy(&big, bytes.data(), sizeof big);
  return be64toh(big);
}

// A frame with optional 8-byte extras, a key and a value.
void append_frame(uint8_t opcode, const uint64_t* extras, std::string_view key,
                  std::string_view value, std::string& out) {
  uint8_t extras_length = extras ? wire::kLockExtras : 0;
  wire::append_request_header(opcode, key.size(), extras_length,
                              extras_length + key.size() + value.size(), out);
  if (extras) append_u64(*extras, out);
  out.append(key);
  out.append(value);
}

bool is_id(size_t length) {
  return length >= 1 && length <= store::kMaxKeyLength;
}

}  // namespace

void LockStreamEncoder::append_session(std::string_view id, int64_t grace_ms, std::string& out) {
  uint64_t grace = static_cast<uint64_t>(std::max<int64_t>(grace_ms, 0));
  append_frame(wire::kLockSession, &grace, id, {}, out);
}

void LockStreamEncoder::append_session_end(std::string_view id, std::string& out) {
  append_frame(wire::kLockSessionEnd, nullptr, id, {}, out);
}

void LockStreamEncoder::append_grant(std::string_view name, std::string_view session_id,
                                     uint64_t token, std::string& out) {
  append_frame(wire::kLockGrant, &token, name, session_id, out);
}

void LockStreamEncoder::append_release(std::string_view name, std::string_view session_id,
                                       std::string& out) {
  append_frame(wire::kLockRelease, nullptr, name, session_id, out);
}

void LockStreamEncoder::append_token_floor(uint64_t token, std::string& out) {
  append_frame(wire::kLockTokenFloor, &token, {}, {}, out);
}

// Each opcode has exactly one shape; the lengths alone tell it.
const char* check_lock_header(const protocol::binary::Header& h) {
  size_t value = size_t{h.body_length} - h.extras_length - h.key_length;
  bool extras = h.extras_length == wire::kLockExtras;
  bool no_extras = h.extras_length == 0;
  bool key = is_id(h.key_length);
  switch (h.opcode) {
    case wire::kLockSession:
      return extras && key && value == 0 ? nullptr : "malformed lock session frame";
    case wire::kLockSessionEnd:
      return no_extras && key && value == 0 ? nullptr : "malformed lock session end frame";
    case wire::kLockGrant:
      return extras && key && is_id(value) ? nullptr : "malformed lock grant frame";
    case wire::kLockRelease:
      return no_extras && key && is_id(value) ? nullptr : "malformed lock release frame";
    case wire::kLockTokenFloor:
      return extras && h.key_length == 0 && value == 0 ? nullptr : "malformed token floor frame";
    default:
      return "opcode not in a lock stream";
  }
}

const char* apply_lock_frame(const protocol::binary::Header& h, std::string_view extras,
                             std::string_view key, std::string_view value,
                             locks::LockChangeListener& out) {
  uint64_t number = extras.empty() ? 0 : u64_at(extras);
  switch (h.opcode) {
    case wire::kLockSession:
      if (number > uint64_t{std::numeric_limits<int64_t>::max()}) return "negative grace period";
      out.on_session(key, static_cast<int64_t>(number));
      break;
    case wire::kLockSessionEnd:
      out.on_session_end(key);
      break;
    case wire::kLockGrant:
      if (number == 0) return "a grant without a token";  // tokens start at 1
      out.on_grant(key, value, number);
      break;
    case wire::kLockRelease:
      out.on_release(key, value);
      break;
    default:  // kLockTokenFloor
      out.on_token_floor(number);
      break;
  }
  return nullptr;
}

}  // namespace lockcached::replication
