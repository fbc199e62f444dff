// memcached's binary protocol on the wire: magics, opcodes (with the
// locking extension of ../shared/specs/locking.md), statuses and the
// 24-byte header. Plain data and no dependencies, so that both the client
// protocol (binary_protocol.h) and the replication stream, which frames its
// changes as binary requests (replication/encoder.h), speak it from one
// definition.
#pragma once

#include <endian.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace lockcached::protocol {

namespace binary {

constexpr uint8_t kRequestMagic = 0x80;
constexpr uint8_t kResponseMagic = 0x81;
constexpr size_t kHeaderSize = 24;

enum Opcode : uint8_t {
  kGet = 0x00,
  kSet = 0x01,
  kAdd = 0x02,
  kReplace = 0x03,
  kDelete = 0x04,
  kIncrement = 0x05,
  kDecrement = 0x06,
  kQuit = 0x07,
  kFlush = 0x08,
  kGetQ = 0x09,
  kNoop = 0x0a,
  kVersion = 0x0b,
  kGetK = 0x0c,
  kGetKQ = 0x0d,
  kAppend = 0x0e,
  kPrepend = 0x0f,
  kStat = 0x10,
  kSetQ = 0x11,
  kAddQ = 0x12,
  kReplaceQ = 0x13,
  kDeleteQ = 0x14,
  kIncrementQ = 0x15,
  kDecrementQ = 0x16,
  kQuitQ = 0x17,
  kFlushQ = 0x18,
  kAppendQ = 0x19,
  kPrependQ = 0x1a,
  kVerbosity = 0x1b,
  kTouch = 0x1c,
  kGat = 0x1d,
  kGatQ = 0x1e,
  // SASL (memcached's -S); only PLAIN, checked against --auth_file.
  kSaslListMechs = 0x20,
  kSaslAuth = 0x21,
  kSaslStep = 0x22,
  kGatK = 0x23,
  kGatKQ = 0x24,
  // The locking extension.
  kLock = 0x40,
  kLockQ = 0x41,
  kUnlock = 0x42,
  kUnlockQ = 0x43,
  kUnlockAll = 0x44,
  kUnlockAllQ = 0x45,
  kLaG = 0x46,
  kLaGQ = 0x47,
  kLaGK = 0x48,
  kLaGKQ = 0x49,
  kRaU = 0x4a,
  kRaUQ = 0x4b,
  // yrmcds's key dump: one reply per key, then an empty one.
  kKeys = 0x50,
};

enum Status : uint16_t {
  kSuccess = 0x00,
  kNotFound = 0x01,
  kExists = 0x02,
  kTooLarge = 0x03,
  kInvalid = 0x04,
  kNotStored = 0x05,
  kNonNumeric = 0x06,
  kLocked = 0x10,
  kNotLocked = 0x11,
  kAuthError = 0x20,  // refused credentials, or a request before authenticating
  kUnknownCommand = 0x81,
  kOutOfMemory = 0x82,
  kTemporaryFailure = 0x86,  // a read-only replica refusing a write
};

struct Header {
  uint8_t magic;
  uint8_t opcode;
  uint16_t key_length;
  uint8_t extras_length;
  uint8_t data_type;  // 0: raw bytes, the only type memcached defines
  uint16_t status;    // a response's; a request's vbucket, always 0 here
  uint32_t body_length;
  uint32_t opaque;  // echoed as received, byte order untouched
  uint64_t cas;
};

// The 24 bytes at `bytes`, read and written; encode_header writes exactly
// what decode_header reads back. Inline: every binary request and reply
// passes through them.
inline Header decode_header(const char* bytes) {
  Header header;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  header.magic = static_cast<uint8_t>(bytes[0]);
  header.opcode = static_cast<uint8_t>(bytes[1]);
  std::memcpy(&u16, bytes + 2, 2);
  header.key_length = be16toh(u16);
  header.extras_length = static_cast<uint8_t>(bytes[4]);
  header.data_type = static_cast<uint8_t>(bytes[5]);
  std::memcpy(&u16, bytes + 6, 2);
  header.status = be16toh(u16);
  std::memcpy(&u32, bytes + 8, 4);
  header.body_length = be32toh(u32);
  std::memcpy(&header.opaque, bytes + 12, 4);
  std::memcpy(&u64, bytes + 16, 8);
  header.cas = be64toh(u64);
  return header;
}

inline void encode_header(const Header& header, char* bytes) {
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  bytes[0] = static_cast<char>(header.magic);
  bytes[1] = static_cast<char>(header.opcode);
  u16 = htobe16(header.key_length);
  std::memcpy(bytes + 2, &u16, 2);
  bytes[4] = static_cast<char>(header.extras_length);
  bytes[5] = static_cast<char>(header.data_type);
  u16 = htobe16(header.status);
  std::memcpy(bytes + 6, &u16, 2);
  u32 = htobe32(header.body_length);
  std::memcpy(bytes + 8, &u32, 4);
  std::memcpy(bytes + 12, &header.opaque, 4);
  u64 = htobe64(header.cas);
  std::memcpy(bytes + 16, &u64, 8);
}

void append_header(const Header& header, std::string& out);

// Integers in the wire's byte order (big-endian), appended or read.
void append_u16(uint16_t value, std::string& out);
void append_u32(uint32_t value, std::string& out);
void append_u64(uint64_t value, std::string& out);
uint32_t u32_at(const char* bytes);
uint64_t u64_at(const char* bytes);

}  // namespace binary

}  // namespace lockcached::protocol
