// The key hash: picks the shard (high bits) and the bucket (low bits).
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

}  // namespace lockcached::store
