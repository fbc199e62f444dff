#include "lockcached/protocol/text_parser.h"

#include <charconv>
#include <limits>

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
  for_each_word(line, [&words](std::string_view word) {
    if (words.count <= kMaxWords) words.word[words.count++] = word;
  });
  return words;
}

bool parse_u32(std::string_view word, uint32_t* value) {
  if (!word.empty() && word[0] == '-') return false;
  return parse_whole(word, value);
}

bool parse_i32(std::string_view word, int32_t* value) {
  return parse_whole(word, value);
}

bool parse_u64(std::string_view word, uint64_t* value) {
  if (!word.empty() && word[0] == '-') return false;
  return parse_whole(word, value);
}

bool valid_key(std::string_view key) {
  if (key.empty() || key.size() > store::kMaxKeyLength) return false;
  for (unsigned char c : key) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace lockcached::protocol
