// Keys in the hash table: the hash picks the shard (high bits) and the
// bucket (low bits); same_key compares a key with a candidate's.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace lockcached::store {

// A seeded multiply-rotate hash over 8-byte words with a splitmix64 finish.
// The seed is random per process so that clients cannot precompute keys that
// all land in one bucket.
inline uint64_t hash_key(std::string_view key, uint64_t seed) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ULL;
  uint64_t h = seed ^ (key.size() * kMul);
  const char* p = key.data();
  size_t n = key.size();
  auto mix = [&h](uint64_t word) {
    h ^= word;
    h = ((h << 29) | (h >> 35)) * 0xbf58476d1ce4e5b9ULL;
  };
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    mix(word);
  }
  if (n > 0) {
    uint64_t word = 0;
    std::memcpy(&word, p, n);
    mix(word);
  }
  h ^= h >> 31;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 29;
  return h;
}

// Keys are short: comparing them a word at a time inline costs less than a
// call to memcmp, which the lookup of every request made.
inline bool same_key(const char* a, const char* b, size_t n) {
  auto word = [](const char* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  };
  if (n < 8) return std::memcmp(a, b, n) == 0;
  for (size_t i = 0; i + 8 < n; i += 8) {
    if (word(a + i) != word(b + i)) return false;
  }
  return word(a + n - 8) == word(b + n - 8);  // the last word may overlap
}

}  // namespace lockcached::store
