#include "binary_client.h"

#include <cstdio>
#include <ios>

namespace e2e::binary {

std::string be16(uint16_t v) {
  return {static_cast<char>(v >> 8), static_cast<char>(v)};
}
std::string be32(uint32_t v) {
  return be16(static_cast<uint16_t>(v >> 16)) + be16(static_cast<uint16_t>(v));
}
std::string be64(uint64_t v) {
  return be32(static_cast<uint32_t>(v >> 32)) + be32(static_cast<uint32_t>(v));
}
uint64_t read_be(std::string_view bytes, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v = v << 8 | static_cast<uint8_t>(bytes[at + i]);
  return v;
}

std::string store_extras(uint32_t flags, uint32_t exptime) {
  return be32(flags) + be32(exptime);
}
std::string arith_extras(uint64_t delta, uint64_t initial, uint32_t exptime) {
  return be64(delta) + be64(initial) + be32(exptime);
}

std::string raw_header(uint8_t magic, uint8_t opcode, uint16_t key_length, uint8_t extras_length,
                       uint32_t body_length, uint32_t opaque, uint64_t cas) {
  std::string h;
  h += static_cast<char>(magic);
  h += static_cast<char>(opcode);
  h += be16(key_length);
  h += static_cast<char>(extras_length);
  h += '\0';     // data type
  h += be16(0);  // vbucket
  h += be32(body_length);
  h += be32(opaque);
  h += be64(cas);
  return h;
}

std::string encode_request(uint8_t opcode, std::string_view key, std::string_view extras,
                           std::string_view value, uint64_t cas, uint32_t opaque) {
  std::string packet = raw_header(
      kRequestMagic, opcode, static_cast<uint16_t>(key.size()), static_cast<uint8_t>(extras.size()),
      static_cast<uint32_t>(extras.size() + key.size() + value.size()), opaque, cas);
  packet += extras;
  packet += key;
  packet += value;
  return packet;
}

void PrintTo(const Response& r, std::ostream* os) {
  char head[96];
  std::snprintf(head, sizeof head, "{magic=0x%02x op=0x%02x status=0x%04x opaque=0x%08x cas=%llu",
                r.magic, r.opcode, r.status, r.opaque, static_cast<unsigned long long>(r.cas));
  *os << head << " extras=\"" << escape(r.extras) << "\" key=\"" << escape(r.key) << "\" value=\""
      << escape(r.value) << "\"}";
}

std::optional<Response> read_response(Client& c, std::chrono::milliseconds timeout) {
  std::optional<std::string> header = c.read_exactly(kHeaderSize, timeout);
  if (!header) return std::nullopt;
  Response r;
  r.magic = static_cast<uint8_t>((*header)[0]);
  r.opcode = static_cast<uint8_t>((*header)[1]);
  size_t key_length = read_be(*header, 2, 2);
  size_t extras_length = static_cast<uint8_t>((*header)[4]);
  r.data_type = static_cast<uint8_t>((*header)[5]);
  r.status = static_cast<uint16_t>(read_be(*header, 6, 2));
  size_t body_length = read_be(*header, 8, 4);
  r.opaque = static_cast<uint32_t>(read_be(*header, 12, 4));
  r.cas = read_be(*header, 16, 8);
  if (extras_length + key_length > body_length) {
    ADD_FAILURE() << "reply header with extras+key over its body length: " << escape(*header);
    return std::nullopt;
  }
  std::optional<std::string> body = c.read_exactly(body_length, timeout);
  if (!body) return std::nullopt;
  r.extras = body->substr(0, extras_length);
  r.key = body->substr(extras_length, key_length);
  r.value = body->substr(extras_length + key_length);
  return r;
}

::testing::AssertionResult BinClient::connect(uint16_t port) {
  ::testing::AssertionResult ok = c_.connect(port);
  if (ok) c_.set_nodelay();
  return ok;
}

uint32_t BinClient::send(uint8_t opcode, std::string_view key, std::string_view extras,
                         std::string_view value, uint64_t cas) {
  uint32_t opaque = next_opaque_++;
  EXPECT_TRUE(c_.send(encode_request(opcode, key, extras, value, cas, opaque))) << c_.last_error();
  return opaque;
}

Response BinClient::expect_reply(uint8_t opcode, uint32_t opaque) {
  std::optional<Response> r = read_response(c_);
  if (!r) {
    ADD_FAILURE() << "no reply to opcode 0x" << std::hex << int{opcode} << ": " << c_.last_error();
    return {};
  }
  EXPECT_EQ(r->magic, kResponseMagic) << ::testing::PrintToString(*r);
  EXPECT_EQ(r->opcode, opcode) << ::testing::PrintToString(*r);
  EXPECT_EQ(r->opaque, opaque) << ::testing::PrintToString(*r);
  return *r;
}

Response BinClient::call(uint8_t opcode, std::string_view key, std::string_view extras,
                         std::string_view value, uint64_t cas) {
  uint32_t opaque = send(opcode, key, extras, value, cas);
  return expect_reply(opcode, opaque);
}

::testing::AssertionResult BinClient::noop_is_next() {
  uint32_t opaque = send(op::kNoop);
  std::optional<Response> r = read_response(c_);
  if (!r) return ::testing::AssertionFailure() << "no Noop reply: " << c_.last_error();
  if (r->opcode != op::kNoop || r->opaque != opaque || r->status != st::kSuccess) {
    return ::testing::AssertionFailure()
           << "expected the Noop reply, got " << ::testing::PrintToString(*r);
  }
  return ::testing::AssertionSuccess();
}

uint64_t BinClient::set(std::string_view key, std::string_view value, uint32_t flags,
                        uint32_t exptime) {
  Response r = call(op::kSet, key, store_extras(flags, exptime), value);
  EXPECT_EQ(r.status, st::kSuccess) << "set " << key << ": " << ::testing::PrintToString(r);
  return r.cas;
}

std::map<std::string, std::string> BinClient::stats(std::string_view group) {
  uint32_t opaque = send(op::kStat, group);
  std::map<std::string, std::string> stats;
  while (true) {
    Response r = expect_reply(op::kStat, opaque);
    if (r.status != st::kSuccess) {
      ADD_FAILURE() << "Stat " << group << ": " << ::testing::PrintToString(r);
      return stats;
    }
    if (r.key.empty() && r.value.empty()) return stats;
    stats[r.key] = r.value;
  }
}

}  // namespace e2e::binary
