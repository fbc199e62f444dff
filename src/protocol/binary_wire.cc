#include "lockcached/protocol/binary_wire.h"

#include <endian.h>

#include <cstring>

namespace lockcached::protocol {
namespace binary {

Header decode_header(const char* bytes) {
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

void encode_header(const Header& header, char* bytes) {
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

void append_header(const Header& header, std::string& out) {
  size_t at = out.size();
  out.resize(at + kHeaderSize);
  encode_header(header, out.data() + at);
}

void append_u16(uint16_t value, std::string& out) {
  uint16_t big = htobe16(value);
  out.append(reinterpret_cast<const char*>(&big), sizeof big);
}

void append_u32(uint32_t value, std::string& out) {
  uint32_t big = htobe32(value);
  out.append(reinterpret_cast<const char*>(&big), sizeof big);
}

void append_u64(uint64_t value, std::string& out) {
  uint64_t big = htobe64(value);
  out.append(reinterpret_cast<const char*>(&big), sizeof big);
}

uint32_t u32_at(const char* bytes) {
  uint32_t big;
  std::memcpy(&big, bytes, sizeof big);
  return be32toh(big);
}

uint64_t u64_at(const char* bytes) {
  uint64_t big;
  std::memcpy(&big, bytes, sizeof big);
  return be64toh(big);
}

}  // namespace binary

}  // namespace lockcached::protocol
