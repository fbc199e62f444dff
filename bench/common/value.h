// The value the load generator stores under a key, shared with the floor
// server so that the floor's fake hits pass the load generator's checks.
//
// A value starts with the key itself (as much of it as fits) and goes on with
// a fixed filler that depends only on the position, so that a reply is
// checked byte for byte without any table of what was stored, and a value
// returned for the wrong key does not pass.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace bench {

inline char filler_byte(size_t position) {
  return static_cast<char>('a' + position % 26);
}

// The filler for a value of `size` bytes; value_for copies from it.
inline std::string make_filler(size_t size) {
  std::string filler(size, '\0');
  for (size_t i = 0; i < size; ++i)
    filler[i] = filler_byte(i);
  return filler;
}

// Writes the value of `key` (filler.size() bytes) to `out`.
inline void value_for(std::string_view key, std::string_view filler, char* out) {
  const size_t stamp = std::min(key.size(), filler.size());
  std::memcpy(out, key.data(), stamp);
  std::memcpy(out + stamp, filler.data() + stamp, filler.size() - stamp);
}

// True when `data` (filler.size() bytes) is the value of `key`.
inline bool is_value_of(std::string_view key, std::string_view filler, const char* data) {
  const size_t stamp = std::min(key.size(), filler.size());
  return std::memcmp(data, key.data(), stamp) == 0 &&
         std::memcmp(data + stamp, filler.data() + stamp, filler.size() - stamp) == 0;
}

}  // namespace bench
