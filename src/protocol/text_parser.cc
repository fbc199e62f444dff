#include "lockcached/protocol/text_parser.h"

#include <charconv>
#include <limits>

#include "lockcached/store/decimal.h"
#include "lockcached/store/store.h"

namespace lockcached::protocol {
namespace {

template <typename T>
bool parse_whole(std::string_view word, T* value) {
  if (!word.empty() && word[0] == '+') word.remove_prefix(1);
  if (word.empty()) return false;
  auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), *value);
  return error == std::errc() && end == word.data() + word.size();
}

}  // namespace

Words split_words(std::string_view line) {
  Words words;
  words.line = line;
  for_each_word(line, [&words](std::string_view word) {
    if (words.count <= kMaxWords) words.word[words.count++] = {word.data(), word.size()};
  });
  return words;
}

// memcached reads these with strtoul/strtol into 64-bit longs and then
// stores them in 32 bits: anything that fits in 64 bits is accepted and cut
// down (flags 2^32 become 0, exptime 2^31 becomes negative). Clients depend
// on identical behaviour, so we cut the same way.
bool parse_u32(std::string_view word, uint32_t* value) {
  uint64_t wide;
  if (!parse_u64(word, &wide)) return false;
  *value = static_cast<uint32_t>(wide);
  return true;
}

bool parse_i32(std::string_view word, int32_t* value) {
  int64_t wide;
  if (!store::read_signed_decimal(word, &wide)) return false;
  *value = static_cast<int32_t>(wide);
  return true;
}

bool parse_u64(std::string_view word, uint64_t* value) {
  return store::read_unsigned_decimal(word, value);
}

bool parse_double(std::string_view word, double* value) {
  return parse_whole(word, value);
}

bool valid_key(std::string_view key) {
  return !key.empty() && key.size() <= store::kMaxKeyLength;
}

bool printable_key(std::string_view key) {
  if (!valid_key(key)) return false;
  for (unsigned char c : key) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

std::string escape_for_log(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string escaped;
  escaped.reserve(bytes.size());
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      escaped += static_cast<char>(c);
    } else {
      escaped += "\\x";
      escaped += kHex[c >> 4];
      escaped += kHex[c & 0xf];
    }
  }
  return escaped;
}

}  // namespace lockcached::protocol
