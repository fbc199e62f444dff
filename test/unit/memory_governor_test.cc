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

// The target alone, for a reading with no cut before it.
size_t target_for(size_t item_bytes, size_t target, size_t heap) {
  return next_eviction_target({kLimit, item_bytes, target, heap}).target;
}

TEST(MemoryGovernor, LeavesTheTargetAtTheLimitWhileTheHeapIsWithinBounds) {
  EXPECT_EQ(target_for(60 * kMiB, kLimit, 70 * kMiB), kLimit);
  EXPECT_EQ(target_for(64 * kMiB, kLimit, kAllowed), kLimit);
}

TEST(MemoryGovernor, LowersTheTargetByTheExcessBelowWhatTheItemsTake) {
  // 10 MiB over: the items must shrink by 10 MiB from what they take now.
  EvictionTarget cut = next_eviction_target({kLimit, 60 * kMiB, kLimit, kAllowed + 10 * kMiB});
  EXPECT_EQ(cut.target, 50 * kMiB);
  EXPECT_EQ(cut.heap_at_cut, kAllowed + 10 * kMiB);
}

TEST(MemoryGovernor, TheSameExcessDoesNotLowerTheTargetTwice) {
  // Evictions have not happened yet: the next reading sees the same items
  // and the same heap, and must not ask for another 10 MiB.
  EvictionTarget first = next_eviction_target({kLimit, 60 * kMiB, kLimit, kAllowed + 10 * kMiB});
  EvictionTarget second = next_eviction_target(
      {kLimit, 60 * kMiB, first.target, kAllowed + 10 * kMiB, first.heap_at_cut});
  EXPECT_EQ(second.target, first.target);
}

// Small items evicted from all over the allocator's pages free holes, not
// pages: the items shrink, the heap holds still. Before, every reading cut
// the target by the same excess again, down to its floor (a 32 MB cache of
// 100-byte values held 4 MB). Only a heap grown since the cut lowers it
// again, by four times the growth (memory_governor.cc, kGrowthCut).
TEST(MemoryGovernor, AHeapThatHoldsStillAfterACutLowersNothingMore) {
  EvictionTarget cut = next_eviction_target({kLimit, 60 * kMiB, kLimit, kAllowed + 10 * kMiB});
  EvictionTarget later = next_eviction_target(
      {kLimit, 50 * kMiB, cut.target, kAllowed + 10 * kMiB, cut.heap_at_cut});
  EXPECT_EQ(later.target, cut.target);
  // Grown 3 MiB since: the target comes down by four times that.
  EvictionTarget grown = next_eviction_target(
      {kLimit, 50 * kMiB, cut.target, kAllowed + 13 * kMiB, later.heap_at_cut});
  EXPECT_EQ(grown.target, 38 * kMiB);
  EXPECT_EQ(grown.heap_at_cut, kAllowed + 13 * kMiB);
  // Holding at the new level: nothing more.
  EXPECT_EQ(next_eviction_target({kLimit, 38 * kMiB, grown.target, kAllowed + 13 * kMiB,
                                  grown.heap_at_cut})
                .target,
            38 * kMiB);
}

TEST(MemoryGovernor, GrowthCountsFromTheLowestHeapSinceTheCut) {
  EvictionTarget cut = next_eviction_target({kLimit, 60 * kMiB, kLimit, kAllowed + 10 * kMiB});
  EvictionTarget fell = next_eviction_target(
      {kLimit, 50 * kMiB, cut.target, kAllowed + 6 * kMiB, cut.heap_at_cut});
  EXPECT_EQ(fell.target, cut.target);
  EXPECT_EQ(fell.heap_at_cut, kAllowed + 6 * kMiB);
  EvictionTarget regrown = next_eviction_target(
      {kLimit, 50 * kMiB, fell.target, kAllowed + 8 * kMiB, fell.heap_at_cut});
  EXPECT_EQ(regrown.target, cut.target - 4 * 2 * kMiB);
}

TEST(MemoryGovernor, NeverGoesBelowAnEighthOfTheLimit) {
  EXPECT_EQ(target_for(20 * kMiB, 20 * kMiB, kAllowed + 60 * kMiB), kLimit / 8);
}

TEST(MemoryGovernor, RaisesTheTargetAsTheHeapComesDown) {
  size_t target = kLimit / 8;
  // The heap is well under its bound: the target comes back by half the room.
  EvictionTarget next = next_eviction_target({kLimit, target, target, 40 * kMiB, kAllowed + kMiB});
  EXPECT_EQ(next.target, target + (kAllowed - 40 * kMiB) / 2);
  EXPECT_EQ(next.heap_at_cut, 0u);  // within bounds: the next excess is new
  // And never beyond the limit.
  EXPECT_EQ(target_for(60 * kMiB, 60 * kMiB, 10 * kMiB), kLimit);
}

TEST(MemoryGovernor, HoldsTheTargetInsideTheDeadBand) {
  // A little room (under limit/16) is not worth a change.
  size_t target = 50 * kMiB;
  EXPECT_EQ(target_for(target, target, kAllowed - kMiB), target);
}

}  // namespace
}  // namespace lockcached::store
