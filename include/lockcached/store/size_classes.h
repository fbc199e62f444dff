// The allocator's size classes, as `stats items`, `stats slabs`, `stats
// sizes`, `stats cachedump` and `lru_crawler metadump` report them.
//
// lockcached has no slab allocator: an item is one malloc of
// Item::total_size() bytes, and jemalloc rounds that up to one of its size
// classes. Class ids 1..62 are jemalloc's exact classes from 48 bytes (the
// smallest item, a 1-byte key and an empty value, is 33 bytes) to 2 MiB:
// 48, 64, 80, 96, 112, 128, then four per doubling, spaced by a quarter of
// the power of two below (160, 192, 224, 256, 320, ..., 1.75 MiB, 2 MiB).
// Id 63 holds everything larger. Ids stay at most 63 because memcached's
// tools (memcdump) ask for slab ids 0..63 only.
//
// Checked against jemalloc 5.3.0 (Debian's libjemalloc2, 4 KiB pages):
// malloc_usable_size(malloc(n)) for every n from 35 to 3 MiB gives exactly
// these sizes, and allocation_size() below (size_classes_test.cc holds the
// list that program printed).
#pragma once

#include <cstddef>

namespace lockcached::store {

constexpr unsigned kSizeClassCount = 63;  // ids 1..63
constexpr unsigned kLargestSizeClass = 63;
constexpr size_t kSmallestClassSize = 48;
constexpr size_t kLargestExactClassSize = size_t{2} << 20;

// The class an allocation of `bytes` occupies: 1..62, or 63 above 2 MiB.
// Requests under 48 bytes fall in class 1 (no item is that small).
unsigned size_class_of(size_t bytes);
// The bytes an allocation of class `id` (1..62) occupies.
size_t size_class_size(unsigned id);
// What jemalloc really hands out for `bytes` (at least 48): the class size,
// or above 2 MiB the same rule continued (four sizes per doubling).
size_t allocation_size(size_t bytes);

}  // namespace lockcached::store
