// Unit tests of the size-class table (store/size_classes.h) against the
// sizes jemalloc really hands out.
#include "lockcached/store/size_classes.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "lockcached/store/item.h"

namespace lockcached::store {
namespace {

// malloc_usable_size(malloc(n)) for n from 35 to 3 MiB, every distinct
// value in order, printed by a program linked with -ljemalloc (Debian's
// jemalloc 5.3.0, 4 KiB pages).
const std::vector<size_t> kJemallocSizes = {
    48,     64,     80,      96,      112,     128,     160,     192,     224,    256,    320,
    384,    448,    512,     640,     768,     896,     1024,    1280,    1536,   1792,   2048,
    2560,   3072,   3584,    4096,    5120,    6144,    7168,    8192,    10240,  12288,  14336,
    16384,  20480,  24576,   28672,   32768,   40960,   49152,   57344,   65536,  81920,  98304,
    114688, 131072, 163840,  196608,  229376,  262144,  327680,  393216,  458752, 524288, 655360,
    786432, 917504, 1048576, 1310720, 1572864, 1835008, 2097152, 2621440, 3145728};

TEST(SizeClassesTest, ClassSizesAreJemallocsUpTo2MiB) {
  // 62 exact classes, then id 63 for everything larger.
  ASSERT_EQ(kJemallocSizes[61], kLargestExactClassSize);
  for (unsigned id = 1; id <= 62; ++id) {
    SCOPED_TRACE(id);
    EXPECT_EQ(size_class_size(id), kJemallocSizes[id - 1]);
    EXPECT_EQ(size_class_of(size_class_size(id)), id);
    EXPECT_EQ(size_class_of(size_class_size(id) + 1), id + 1);
  }
}

TEST(SizeClassesTest, EveryRequestLandsInTheSmallestClassThatHoldsIt) {
  size_t next = 0;  // index of the smallest jemalloc size >= n
  for (size_t n = Item::kHeaderSize + 3; n <= kJemallocSizes.back(); ++n) {
    while (kJemallocSizes[next] < n)
      ++next;
    ASSERT_EQ(allocation_size(n), kJemallocSizes[next]) << n;
    ASSERT_EQ(size_class_of(n), n > kLargestExactClassSize ? 63u : next + 1) << n;
  }
}

TEST(SizeClassesTest, TheSmallestItemIsInClassOne) {
  EXPECT_EQ(size_class_of(Item::kHeaderSize + 1 + 0 + 2), 1u);
  EXPECT_EQ(size_class_of(1), 1u);
  EXPECT_EQ(allocation_size(35), 48u);
}

TEST(SizeClassesTest, LargeAllocationsKeepFourSizesPerDoubling) {
  EXPECT_EQ(size_class_of(size_t{100} << 20), kLargestSizeClass);
  EXPECT_EQ(allocation_size((size_t{8} << 20) + 1), size_t{10} << 20);
  EXPECT_EQ(allocation_size(size_t{16} << 20), size_t{16} << 20);
}

}  // namespace
}  // namespace lockcached::store
