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

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  std::string bytes;
  bytes.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int padding = 0;
    uint32_t chunk = 0;
    for (size_t j = 0; j < 4; ++j) {
      char c = text[i + j];
      if (c == '=' && last && j >= 2 && (j == 3 || text[i + 3] == '=')) {
        ++padding;
        chunk <<= 6;
        continue;
      }
      int8_t value = kReverse[static_cast<unsigned char>(c)];
      if (value < 0 || padding > 0) return std::nullopt;
      chunk = (chunk << 6) | uint32_t(value);
    }
    bytes.push_back(char(chunk >> 16));
    if (padding < 2) bytes.push_back(char((chunk >> 8) & 0xff));
    if (padding < 1) bytes.push_back(char(chunk & 0xff));
  }
  return bytes;
}

}  // namespace lockcached::protocol
