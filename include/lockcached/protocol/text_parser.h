// Pure helpers of the text protocol: splitting a request line into words and
// reading numbers exactly as memcached accepts them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace lockcached::protocol {

// memcached looks at no more than the first 23 words of a line; a command
// that takes a fixed number of words fails when there are more.
constexpr size_t kMaxWords = 23;

struct Words {
  // Plain pointer and length, so that a Words is not zeroed (384 bytes) on
  // every request: only the first `count` are ever read.
  struct Span {
    const char* data;
    size_t size;
  };
  std::array<Span, kMaxWords + 1> word;
  size_t count = 0;  // kMaxWords + 1 means "more than kMaxWords"
  // The whole line: a get's keys may be many more than kMaxWords words.
  std::string_view line;

  std::string_view operator[](size_t i) const { return {word[i].data, word[i].size}; }
  std::string_view last() const { return (*this)[count - 1]; }
};

// Splits on spaces (only spaces, as memcached).
Words split_words(std::string_view line);

// Calls visit(word) for each space-separated word of `text`. memchr finds
// the end of a word: keys are most of a request line, and it scans them
// many bytes per instruction.
template <typename Visit>
void for_each_word(std::string_view text, Visit visit) {
  const char* at = text.data();
  const char* end = at + text.size();
  while (at < end) {
    if (*at == ' ') {
      ++at;
      continue;
    }
    const void* space = std::memchr(at, ' ', static_cast<size_t>(end - at));
    const char* stop = space ? static_cast<const char*>(space) : end;
    visit(std::string_view(at, static_cast<size_t>(stop - at)));
    at = stop;
  }
}

// Where the keys of a `get` or `gets` line start; 0 for any other line.
inline size_t get_keys_start(std::string_view line) {
  if (line.size() > 4 && line.starts_with("get ")) return 4;
  if (line.size() > 5 && line.starts_with("gets ")) return 5;
  return 0;
}

// Calls on_get(offset, length, key) for each `get` or `gets` line among the
// first `max_lines` complete lines of `lines`, offset being where the line
// starts, length its length without the '\n', and key what follows the
// command (a pipelined get has one key; a line of several keys gives them
// all, as one). The lines of a data block are looked at too. A wrong key
// only costs a prefetch in vain (protocol::ReadAhead, its one user).
template <typename OnGet>
void for_each_get_line(std::string_view lines, size_t max_lines, OnGet&& on_get) {
  const char* begin = lines.data();
  const char* end = begin + lines.size();
  const char* line = begin;
  for (size_t count = 0; count < max_lines; ++count) {
    const void* found = std::memchr(line, '\n', static_cast<size_t>(end - line));
    if (found == nullptr) return;  // an incomplete line does not run yet
    const char* newline = static_cast<const char*>(found);
    size_t length = static_cast<size_t>(newline - line);
    if (size_t key = get_keys_start({line, length}); key > 0) {
      size_t key_end = length - (line[length - 1] == '\r' ? 1 : 0);
      if (key_end > key)
        on_get(static_cast<size_t>(line - begin), length,
               std::string_view(line + key, key_end - key));
    }
    line = newline + 1;
  }
}

// Decimal numbers as memcached reads them (store/decimal.h): a sign,
// whitespace before, and whitespace or a NUL after the digits are taken;
// an unsigned one refuses a minus only where it makes the number negative.
// The 32-bit ones accept any 64-bit number and truncate it, exactly as
// memcached does.
bool parse_u32(std::string_view word, uint32_t* value);
bool parse_i32(std::string_view word, int32_t* value);
bool parse_u64(std::string_view word, uint64_t* value);
// A decimal fraction ("0.1", "2", "1e3"), as memcached's strtod reads one.
bool parse_double(std::string_view word, double* value);

// A text-protocol key: 1 to 250 bytes; spaces cannot occur since they
// separate words. protocol.txt also forbids control characters, but
// memcached does not check, and clients rely on that (memcaslap's keys
// carry 0x10 bytes): a drop-in replacement takes what memcached takes.
bool valid_key(std::string_view key);
// A valid key without control characters (0x00-0x1f, 0x7f): safe to print
// raw in a reply line (`keys`) and the rule for lock-service names.
bool printable_key(std::string_view key);
// Whether a key listing (`keys`, `stats cachelocks`) can print `key` as it
// is: printable and without a space. Any other key (stored through the
// binary protocol, or a base64 meta key) is listed base64-encoded, marked
// " b" as the meta protocol marks such keys.
inline bool listable_as_is(std::string_view key) {
  return printable_key(key) && key.find(' ') == std::string_view::npos;
}
// `bytes` for a log line: control characters and bytes over 0x7e as \xNN, so
// that a client cannot forge log lines with the keys it sends.
std::string escape_for_log(std::string_view bytes);

}  // namespace lockcached::protocol
