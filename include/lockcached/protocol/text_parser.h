// Pure helpers of the text protocol: splitting a request line into words and
// reading numbers exactly as memcached accepts them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lockcached::protocol {

// memcached looks at no more than the first 23 words of a line; a command
// that takes a fixed number of words fails when there are more.
constexpr size_t kMaxWords = 23;

struct Words {
  std::array<std::string_view, kMaxWords + 1> word;
  size_t count = 0;  // kMaxWords + 1 means "more than kMaxWords"

  std::string_view operator[](size_t i) const { return word[i]; }
  std::string_view last() const { return word[count - 1]; }
};

// Splits on spaces (only spaces, as memcached).
Words split_words(std::string_view line);

// Calls visit(word) for each space-separated word of `text`.
template <typename Visit>
void for_each_word(std::string_view text, Visit visit) {
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ')
      ++i;
    size_t start = i;
    while (i < text.size() && text[i] != ' ')
      ++i;
    if (i > start) visit(text.substr(start, i - start));
  }
}

// Decimal numbers, optionally signed where a sign makes sense. The whole
// word must be the number. The 32-bit ones accept any 64-bit number and
// truncate it, exactly as memcached does.
bool parse_u32(std::string_view word, uint32_t* value);
bool parse_i32(std::string_view word, int32_t* value);
bool parse_u64(std::string_view word, uint64_t* value);

// A text-protocol key: 1 to 250 bytes, no control characters (protocol.txt);
// spaces cannot occur since they separate words.
bool valid_key(std::string_view key);

}  // namespace lockcached::protocol
