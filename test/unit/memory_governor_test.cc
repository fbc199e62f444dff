// The governor's control law alone: given what the items take and what the
// allocator holds, where eviction should start next.
#include <gtest/gtest.h>

#include "lockcached/store/memory_governor.h"

namespace lockcached::store {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kLimit = 64 * kMiB;
// What the heap may hold for a 64 MiB limit before the governor acts.
const size_t kAllowed = allowed_heap(kLimit);

TEST(MemoryGovernor, LeavesTheTargetAtTheLimitWhileTheHeapIsWithinBounds) {
  EXPECT_EQ(next_eviction_target({kLimit, 60 * kMiB, kLimit, 70 * kMiB}), kLimit);
  EXPECT_EQ(next_eviction_target({kLimit, 64 * kMiB, kLimit, kAllowed}), kLimit);
}

TEST(MemoryGovernor, LowersTheTargetByTheExcessBelowWhatTheItemsTake) {
  // 10 MiB over: the items must shrink by 10 MiB from what they take now.
  EXPECT_EQ(next_eviction_target({kLimit, 60 * kMiB, kLimit, kAllowed + 10 * kMiB}), 50 * kMiB);
}

TEST(MemoryGovernor, TheSameExcessDoesNotLowerTheTargetTwice) {
  // Evictions have not happened yet: the next reading sees the same items
  // and the same heap, and must not ask for another 10 MiB.
  size_t first = next_eviction_target({kLimit, 60 * kMiB, kLimit, kAllowed + 10 * kMiB});
  size_t second = next_eviction_target({kLimit, 60 * kMiB, first, kAllowed + 10 * kMiB});
  EXPECT_EQ(second, first);
}

TEST(MemoryGovernor, NeverGoesBelowAnEighthOfTheLimit) {
  EXPECT_EQ(next_eviction_target({kLimit, 20 * kMiB, 20 * kMiB, kAllowed + 60 * kMiB}), kLimit / 8);
}

TEST(MemoryGovernor, RaisesTheTargetAsTheHeapComesDown) {
  size_t target = kLimit / 8;
  // The heap is well under its bound: the target comes back by half the room.
  size_t next = next_eviction_target({kLimit, target, target, 40 * kMiB});
  EXPECT_EQ(next, target + (kAllowed - 40 * kMiB) / 2);
  // And never beyond the limit.
  EXPECT_EQ(next_eviction_target({kLimit, 60 * kMiB, 60 * kMiB, 10 * kMiB}), kLimit);
}

TEST(MemoryGovernor, HoldsTheTargetInsideTheDeadBand) {
  // A little room (under limit/16) is not worth a change.
  size_t target = 50 * kMiB;
  EXPECT_EQ(next_eviction_target({kLimit, target, target, kAllowed - kMiB}), target);
}

}  // namespace
}  // namespace lockcached::store
