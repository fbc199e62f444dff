// The memcached binary protocol for the end-to-end tests: hand-built packets
// (24-byte header, magic 0x80 for requests and 0x81 for replies, big-endian
// fields, after memcached's protocol_binary.h and lockcached's locking
// opcodes in docs/locking.md), read and written over an e2e::Client.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "server_process.h"

namespace e2e::binary {

// Opcodes.
namespace op {
constexpr uint8_t kGet = 0x00, kSet = 0x01, kAdd = 0x02, kReplace = 0x03, kDelete = 0x04,
                  kIncrement = 0x05, kDecrement = 0x06, kQuit = 0x07, kFlush = 0x08, kGetQ = 0x09,
                  kNoop = 0x0a, kVersion = 0x0b, kGetK = 0x0c, kGetKQ = 0x0d, kAppend = 0x0e,
                  kPrepend = 0x0f, kStat = 0x10, kSetQ = 0x11, kAddQ = 0x12, kReplaceQ = 0x13,
                  kDeleteQ = 0x14, kIncrementQ = 0x15, kDecrementQ = 0x16, kQuitQ = 0x17,
                  kFlushQ = 0x18, kAppendQ = 0x19, kPrependQ = 0x1a, kVerbosity = 0x1b,
                  kTouch = 0x1c, kGat = 0x1d, kGatQ = 0x1e, kGatK = 0x23, kGatKQ = 0x24;
// Locking (lock, unlock, unlock all, lock and get, replace and unlock) and
// the key listing.
constexpr uint8_t kLock = 0x40, kLockQ = 0x41, kUnlock = 0x42, kUnlockQ = 0x43, kUnlockAll = 0x44,
                  kUnlockAllQ = 0x45, kLaG = 0x46, kLaGQ = 0x47, kLaGK = 0x48, kLaGKQ = 0x49,
                  kRaU = 0x4a, kRaUQ = 0x4b, kKeys = 0x50;
}  // namespace op

// Reply statuses.
namespace st {
constexpr uint16_t kSuccess = 0x00, kNotFound = 0x01, kExists = 0x02, kTooLarge = 0x03,
                   kInvalid = 0x04, kNotStored = 0x05, kNonNumeric = 0x06, kLocked = 0x10,
                   kNotLocked = 0x11, kUnknownCommand = 0x81, kOutOfMemory = 0x82;
}  // namespace st

constexpr uint8_t kRequestMagic = 0x80;
constexpr uint8_t kResponseMagic = 0x81;
constexpr size_t kHeaderSize = 24;

// The exptime of Increment/Decrement that forbids creating a missing item.
constexpr uint32_t kNoAutoCreate = 0xffffffff;
// An absolute unix time (over 30 days, so not relative) long past: memcached
// treats it as already expired.
constexpr uint32_t kPastAbsolute = 60 * 60 * 24 * 30 + 1;

// Big-endian fields.
std::string be16(uint16_t v);
std::string be32(uint32_t v);
std::string be64(uint64_t v);
// The `n`-byte big-endian number at `at` in `bytes`.
uint64_t read_be(std::string_view bytes, size_t at, size_t n);

// Flags and exptime: the extras of Set/Add/Replace (and RaU).
std::string store_extras(uint32_t flags, uint32_t exptime);
// Delta, initial value, exptime: the extras of Increment/Decrement.
std::string arith_extras(uint64_t delta, uint64_t initial, uint32_t exptime);

// A header with every field given, for well-formed and malformed packets.
std::string raw_header(uint8_t magic, uint8_t opcode, uint16_t key_length, uint8_t extras_length,
                       uint32_t body_length, uint32_t opaque, uint64_t cas);

// A whole request packet: header (magic 0x80), extras, key, value.
std::string encode_request(uint8_t opcode, std::string_view key = {}, std::string_view extras = {},
                           std::string_view value = {}, uint64_t cas = 0, uint32_t opaque = 0);

// One reply packet, its body split into extras, key and value.
struct Response {
  uint8_t magic = 0;
  uint8_t opcode = 0;
  uint8_t data_type = 0;
  uint16_t status = 0xffff;
  uint32_t opaque = 0;
  uint64_t cas = 0;
  std::string extras;
  std::string key;
  std::string value;
};

void PrintTo(const Response& r, std::ostream* os);

// Reads one reply packet; nullopt (and c.last_error()) when none comes. A
// header whose extras and key overrun its body fails the current test.
std::optional<Response> read_response(Client& c, std::chrono::milliseconds timeout = kReplyTimeout);

// A binary-protocol connection: every request gets a distinct opaque, and
// every reply is checked for magic 0x81, the request's opcode and opaque.
class BinClient {
 public:
  ::testing::AssertionResult connect(uint16_t port);
  Client& raw() { return c_; }

  // Sends a request without waiting; returns the opaque it carries.
  uint32_t send(uint8_t opcode, std::string_view key = {}, std::string_view extras = {},
                std::string_view value = {}, uint64_t cas = 0);

  // The next reply, which must answer (opcode, opaque).
  Response expect_reply(uint8_t opcode, uint32_t opaque);

  // One request, one reply.
  Response call(uint8_t opcode, std::string_view key = {}, std::string_view extras = {},
                std::string_view value = {}, uint64_t cas = 0);
  // One request, one reply: its status.
  uint16_t status(uint8_t opcode, std::string_view key = {}, std::string_view extras = {},
                  std::string_view value = {}, uint64_t cas = 0) {
    return call(opcode, key, extras, value, cas).status;
  }

  // Sends a Noop and requires its reply to be the next packet: whatever was
  // sent before it has been answered or was silent.
  ::testing::AssertionResult noop_is_next();

  // Set with flags and exptime, which must succeed; returns the new CAS.
  uint64_t set(std::string_view key, std::string_view value, uint32_t flags = 0,
               uint32_t exptime = 0);

  // Stat as name -> value, checking the empty terminator.
  std::map<std::string, std::string> stats(std::string_view group = {});

 private:
  Client c_;
  uint32_t next_opaque_ = 0xA1B2C301;
};

}  // namespace e2e::binary
