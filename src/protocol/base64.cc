#include "lockcached/protocol/base64.h"

#include <array>
#include <cstdint>

namespace lockcached::protocol {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> make_reverse() {
  std::array<int8_t, 256> reverse{};
  for (auto& entry : reverse)
    entry = -1;
  for (int i = 0; i < 64; ++i)
    reverse[static_cast<unsigned char>(kAlphabet[i])] = int8_t(i);
  return reverse;
}
constexpr std::array<int8_t, 256> kReverse = make_reverse();

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string text;
  text.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = uint32_t(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) chunk |= uint32_t(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) chunk |= static_cast<unsigned char>(bytes[i + 2]);
    text.push_back(kAlphabet[(chunk >> 18) & 63]);
    text.push_back(kAlphabet[(chunk >> 12) & 63]);
    text.push_back(i + 1 < bytes.size() ? kAlphabet[(chunk >> 6) & 63] : '=');
    text.push_back(i + 2 < bytes.size() ? kAlphabet[chunk & 63] : '=');
  }
  return text;
}

// memcached's decoder (base64.c), letter for letter, since clients rely on
// what it takes: a character outside the alphabet is skipped; what is left
// must come in groups of four; the first group with a '=' ends the text, one
// or two of them trimming its output (more is an error). Its '=' counts as
// the value 0, wherever it stands in the group.
std::optional<std::string> base64_decode(std::string_view text) {
  size_t count = 0;
  for (char c : text) {
    if (c == '=' || kReverse[static_cast<unsigned char>(c)] >= 0) ++count;
  }
  if (count == 0 || count % 4 != 0) return std::nullopt;
  std::string bytes;
  bytes.reserve(count / 4 * 3);
  uint32_t chunk = 0;
  size_t in_chunk = 0;
  size_t padding = 0;
  for (char c : text) {
    int8_t value = c == '=' ? 0 : kReverse[static_cast<unsigned char>(c)];
    if (value < 0) continue;
    if (c == '=') ++padding;
    chunk = (chunk << 6) | uint32_t(value);
    if (++in_chunk < 4) continue;
    bytes.push_back(char(chunk >> 16));
    bytes.push_back(char((chunk >> 8) & 0xff));
    bytes.push_back(char(chunk & 0xff));
    if (padding > 2) return std::nullopt;
    if (padding > 0) {
      bytes.resize(bytes.size() - padding);
      break;
    }
    chunk = 0;
    in_chunk = 0;
  }
  return bytes;
}

}  // namespace lockcached::protocol
