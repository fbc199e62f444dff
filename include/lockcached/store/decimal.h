// Decimal numbers as memcached reads them (util.c's safe_strtoull, _strtoul
// and _strtol, all strtoull's or strtol's reading): the protocols read
// their numbers with them, and the store the counters incr and decr change.
// Clients depend on memcached's exact acceptance: a number it takes here
// and this server refuses leaves the request's data block to be read as a
// command.
#pragma once

#include <charconv>
#include <cstdint>
#include <string_view>

namespace lockcached::store {

// Leading whitespace, an optional sign, decimal digits, then the text's end
// or a whitespace or NUL character (whatever follows that is ignored).
// Sets the sign and the digits' value; false without digits, or when they
// overflow 64 bits.
inline bool read_decimal(std::string_view text, bool* negative, uint64_t* magnitude) {
  *negative = false;
  const char* end = text.data() + text.size();
  // The usual number, digits alone, read once (a set reads three).
  auto [whole, failed] = std::from_chars(text.data(), end, *magnitude);
  if (failed == std::errc() && whole == end) return true;
  auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  size_t at = 0;
  while (at < text.size() && is_space(text[at]))
    ++at;
  *negative = at < text.size() && text[at] == '-';
  if (at < text.size() && (text[at] == '+' || text[at] == '-')) ++at;
  auto [stop, error] = std::from_chars(text.data() + at, end, *magnitude);
  return error == std::errc() && (stop == end || is_space(*stop) || *stop == '\0');
}

// safe_strtoull: a minus negates, as strtoull does, and is refused only
// where the result is negative as a signed number ("-0" is 0, "-1" is
// refused, "-18446744073709551615" is 1).
inline bool read_unsigned_decimal(std::string_view text, uint64_t* value) {
  bool negative;
  if (!read_decimal(text, &negative, value)) return false;
  if (negative) *value = 0 - *value;
  return !negative || static_cast<int64_t>(*value) >= 0;
}

// safe_strtol: a signed number within 64 bits.
inline bool read_signed_decimal(std::string_view text, int64_t* value) {
  bool negative;
  uint64_t magnitude;
  constexpr uint64_t kLargest = uint64_t{INT64_MAX};
  if (!read_decimal(text, &negative, &magnitude) || magnitude > kLargest + (negative ? 1 : 0)) {
    return false;
  }
  *value = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

}  // namespace lockcached::store
