#include "lockcached/replication/encoder.h"

#include <endian.h>

#include <algorithm>
#include <cstring>

namespace lockcached::replication {

using protocol::binary::append_u32;

// Data type raw, vbucket 0. The opaque goes out big-endian: the header
// carries it in wire order (the applier reads it back with be32toh).
void wire::append_request_header(uint8_t opcode, size_t key_length, uint8_t extras_length,
                                 size_t body_length, std::string& out, uint64_t cas,
                                 uint32_t opaque) {
  append_header({.magic = kRequestMagic,
                 .opcode = opcode,
                 .key_length = static_cast<uint16_t>(key_length),
                 .extras_length = extras_length,
                 .data_type = 0,
                 .status = 0,
                 .body_length = static_cast<uint32_t>(body_length),
                 .opaque = htobe32(opaque),
                 .cas = cas},
                out);
}

void Encoder::append_set(const store::Item& item, std::string& out) const {
  append_set(item, 0, SavedState::meta_of(item).opaque(), out);
}

void Encoder::append_set_with_cas(const store::Item& item, std::string& out) const {
  append_set(item, item.cas, SavedState::meta_of(item).opaque(), out);
}

void Encoder::append_saved(const store::Item& item, store::RelTime now, std::string& out) const {
  append_set(item, item.cas, SavedState::of(item, now).opaque(), out);
}

void Encoder::append_set(const store::Item& item, uint64_t cas, uint32_t opaque,
                         std::string& out) const {
  out.reserve(out.size() + set_size(item));
  wire::append_request_header(wire::kSetQ, item.key_len, wire::kSetExtras,
                              wire::kSetExtras + item.key_len + item.value_len, out, cas, opaque);
  append_u32(item.flags, out);
  append_u32(wire_time(item.exptime), out);
  out.append(item.key());
  out.append(item.value_view());
}

namespace {
constexpr uint32_t kAccessed = 1 << 0;
constexpr uint32_t kFetched = 1 << 1;
constexpr uint32_t kStale = 1 << 2;
constexpr uint32_t kTokenSent = 1 << 3;
constexpr uint32_t kKeyBinary = 1 << 4;
constexpr int kIdleShift = 8;
constexpr uint32_t kMaxIdle = (uint32_t{1} << (32 - kIdleShift)) - 1;
}  // namespace

SavedState SavedState::of(const store::Item& item, store::RelTime now) {
  return {item.accessed, item.fetched, item.stale, item.token_sent, item.key_binary,
          std::min(now > item.atime ? now - item.atime : 0, kMaxIdle)};
}

SavedState SavedState::meta_of(const store::Item& item) {
  return {false, item.fetched, item.stale, item.token_sent, item.key_binary, 0};
}

SavedState SavedState::from_opaque(uint32_t opaque) {
  return {(opaque & kAccessed) != 0, (opaque & kFetched) != 0,   (opaque & kStale) != 0,
          (opaque & kTokenSent) != 0, (opaque & kKeyBinary) != 0, opaque >> kIdleShift};
}

uint32_t SavedState::opaque() const {
  return (accessed ? kAccessed : 0) | (fetched ? kFetched : 0) | (stale ? kStale : 0) |
         (token_sent ? kTokenSent : 0) | (key_binary ? kKeyBinary : 0) |
         std::min(idle_seconds, kMaxIdle) << kIdleShift;
}

void SavedState::apply_to(store::Item& item) const {
  item.fetched = fetched;
  item.stale = stale;
  item.token_sent = token_sent;
  item.key_binary = key_binary;
}

void Encoder::append_delete(std::string_view key, std::string& out) const {
  wire::append_request_header(wire::kDeleteQ, key.size(), 0, key.size(), out);
  out.append(key);
}

void Encoder::append_flush(store::RelTime moment, std::string& out) const {
  wire::append_request_header(wire::kFlushQ, 0, wire::kFlushExtras, wire::kFlushExtras, out);
  append_u32(wire_time(moment), out);
}

uint32_t Encoder::wire_time(store::RelTime time) const {
  if (time == 0) return 0;
  int64_t unix_time = clock_.unix_epoch_of_zero() + time;
  // RelTime 1 means "already expired": a unix time in the past says so too.
  return static_cast<uint32_t>(std::clamp<int64_t>(unix_time, 1, UINT32_MAX));
}

}  // namespace lockcached::replication
