// jemalloc's size classes, as the stats and the watch streams number them:
// 1..6 are 48, 64, 80, 96, 112 and 128 bytes, then four classes per
// doubling up to 2 MiB (class 62); 63 is everything larger. An item's
// class is that of Item::total_size().
#pragma once

#include <cstddef>

namespace lockcached::store {

constexpr unsigned kLargestSizeClass = 63;

constexpr unsigned size_class_of(size_t total_bytes) {
  if (total_bytes <= 48) return 1;
  if (total_bytes <= 128) return static_cast<unsigned>((total_bytes + 15) / 16 - 2);
  if (total_bytes > (size_t{2} << 20)) return kLargestSizeClass;
  // 2^power < total_bytes <= 2^(power + 1), power >= 7; four steps above 2^power.
  unsigned power = 7;
  while ((size_t{2} << power) < total_bytes)
    ++power;
  size_t step = (size_t{1} << power) / 4;
  size_t quarter = ((total_bytes - (size_t{1} << power)) + step - 1) / step;  // 1..4
  return 6 + (power - 7) * 4 + static_cast<unsigned>(quarter);
}

}  // namespace lockcached::store
