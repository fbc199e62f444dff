// `stats items`, `stats slabs` and `stats sizes`: memcached's per-slab-class
// groups, filled from the store's size classes (store/size_classes.h).
#pragma once

#include <vector>

#include "lockcached/core/stats.h"
#include "lockcached/store/store.h"

namespace lockcached::core {

// memcached's page: `stats slabs` reports chunks per 1 MiB page.
constexpr size_t kSlabPageSize = size_t{1} << 20;

// Appends `group` (kItems, kSlabs or kSizes) for the non-empty classes, in
// memcached's names and order. Fields that mean nothing without a slab
// allocator and segmented LRU (number_hot, moves_to_cold, ...) are left out.
void collect_size_classes(StatsGroup group, const std::vector<store::SizeClassStats>& classes,
                          StatList& out);

}  // namespace lockcached::core
