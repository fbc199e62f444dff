// memcached's uriencode, which its key dumps and log streams print keys
// with: letters, digits and "-._~" as they are, every other byte as %XX.
#pragma once

#include <string_view>

namespace lockcached::core {

// Writes the encoding of `bytes` at `out`, which must have room for
// 3 * bytes.size() characters; returns the end of what it wrote.
inline char* uri_encode(std::string_view bytes, char* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char c : bytes) {
    auto byte = static_cast<unsigned char>(c);
    bool plain = (byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z') ||
                 (byte >= '0' && byte <= '9') || byte == '-' || byte == '.' || byte == '_' ||
                 byte == '~';
    if (plain) {
      *out++ = c;
    } else {
      *out++ = '%';
      *out++ = kHex[byte >> 4];
      *out++ = kHex[byte & 0xf];
    }
  }
  return out;
}

}  // namespace lockcached::core
