#include "lockcached/protocol/binary_wire.h"

#include <endian.h>

#include <cstring>

namespace lockcached::protocol {
namespace binary {

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
