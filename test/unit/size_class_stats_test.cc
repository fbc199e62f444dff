// Unit tests of the store's per-size-class counters (Store::class_stats):
// what `stats items`, `stats slabs` and `stats sizes` report.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "lockcached/store/clock.h"
#include "lockcached/store/item.h"
#include "lockcached/store/size_classes.h"
#include "lockcached/store/store.h"

namespace lockcached::store {
namespace {

constexpr OwnerId kOwner = 7;

// Item sizes: a 1-byte key and `value` bytes take kOneByteKeyItem + value
// bytes (the header, the key and the CRLF).
constexpr size_t kOneByteKeyItem = Item::kHeaderSize + 1 + 2;
constexpr size_t kSmallValue = 5;     // class 1 (48)
constexpr size_t kMediumValue = 200;  // class 10 (256)
constexpr unsigned kSmallClass = 1;
constexpr unsigned kMediumClass = 10;

class SizeClassStatsTest : public ::testing::Test {
 protected:
  static StoreConfig config(size_t limit = size_t{16} << 20) {
    StoreConfig config;
    config.memory_limit = limit;
    config.max_item_size = size_t{4} << 20;
    config.shard_count = 4;
    return config;
  }

  explicit SizeClassStatsTest(size_t limit = size_t{16} << 20) : store_(config(limit), clock_) {}

  StoreStatus set(Store& store, std::string_view key, size_t value_len, RelTime exptime = 0,
                  OwnerId owner = kNoOwner) {
    ItemRef item = store.allocate(key, 0, exptime, value_len);
    EXPECT_TRUE(item);
    if (!item) return StoreStatus::kNoMemory;
    std::memset(item->value(), 'v', value_len);
    return store.store(StoreCommand::kSet, item, 0, owner).status;
  }
  StoreStatus set(std::string_view key, size_t value_len, RelTime exptime = 0) {
    return set(store_, key, value_len, exptime);
  }

  SizeClassStats of(unsigned id) { return store_.class_stats().at(id - 1); }

  // One whole pass of the crawler.
  void crawl_all() {
    uint64_t cursor = 0;
    while (cursor != Store::kScanDone)
      cursor = store_.crawl(cursor, 3);
  }

  ManualClock clock_;
  Store store_;
};

TEST_F(SizeClassStatsTest, EveryClassIsListedInOrderWithItsSize) {
  std::vector<SizeClassStats> classes = store_.class_stats();
  ASSERT_EQ(classes.size(), kSizeClassCount);
  for (unsigned id = 1; id <= kSizeClassCount; ++id) {
    EXPECT_EQ(classes[id - 1].id, id);
    EXPECT_EQ(classes[id - 1].number, 0u);
  }
  EXPECT_EQ(classes[0].chunk_size, 48u);
  EXPECT_EQ(classes[61].chunk_size, size_t{2} << 20);
  // The last class: the largest item the store takes, header included.
  EXPECT_EQ(classes[62].chunk_size, Item::kHeaderSize + kMaxKeyLength + (size_t{4} << 20) + 2);
}

TEST_F(SizeClassStatsTest, SetCountsTheItemInTheClassItsAllocationOccupies) {
  ASSERT_EQ(set("a", kSmallValue), StoreStatus::kStored);
  ASSERT_EQ(set("b", kSmallValue), StoreStatus::kStored);
  ASSERT_EQ(set("c", kMediumValue), StoreStatus::kStored);
  SizeClassStats small = of(kSmallClass);
  EXPECT_EQ(small.number, 2u);
  EXPECT_EQ(small.requested, 2 * (kOneByteKeyItem + kSmallValue));
  EXPECT_EQ(small.allocated, 2 * 48u);
  SizeClassStats medium = of(kMediumClass);
  EXPECT_EQ(medium.number, 1u);
  EXPECT_EQ(medium.requested, kOneByteKeyItem + kMediumValue);
  EXPECT_EQ(medium.allocated, 256u);
  EXPECT_EQ(of(2).number, 0u);
}

TEST_F(SizeClassStatsTest, OverwriteMovesTheItemAndDeleteRemovesIt) {
  ASSERT_EQ(set("a", kSmallValue), StoreStatus::kStored);
  ASSERT_EQ(set("a", kMediumValue), StoreStatus::kStored);
  EXPECT_EQ(of(kSmallClass).number, 0u);
  EXPECT_EQ(of(kSmallClass).requested, 0u);
  EXPECT_EQ(of(kMediumClass).number, 1u);
  ASSERT_EQ(store_.remove("a", 0, kNoOwner), DeleteStatus::kDeleted);
  EXPECT_EQ(of(kMediumClass).number, 0u);
  EXPECT_EQ(of(kMediumClass).requested, 0u);
  EXPECT_EQ(of(kMediumClass).allocated, 0u);
  // A delete is neither an eviction nor a reclaim.
  EXPECT_EQ(of(kMediumClass).evicted, 0u);
  EXPECT_EQ(of(kMediumClass).reclaimed, 0u);
}

TEST_F(SizeClassStatsTest, ItemsOver2MiBAreInTheLastClass) {
  size_t value = (size_t{2} << 20) + 1000;
  ASSERT_EQ(set("b", value), StoreStatus::kStored);
  SizeClassStats big = of(kLargestSizeClass);
  EXPECT_EQ(big.number, 1u);
  EXPECT_EQ(big.requested, kOneByteKeyItem + value);
  EXPECT_EQ(big.allocated, allocation_size(kOneByteKeyItem + value));
  EXPECT_EQ(big.allocated, size_t{5} << 19);  // 2.5 MiB
}

TEST_F(SizeClassStatsTest, ExpiredItemIsReclaimedInItsClass) {
  ASSERT_EQ(set("a", kSmallValue, clock_.now() + 5), StoreStatus::kStored);
  ASSERT_EQ(set("b", kSmallValue, clock_.now() + 5), StoreStatus::kStored);
  ASSERT_TRUE(store_.get("b"));
  clock_.advance(10);
  EXPECT_FALSE(store_.get("a"));
  EXPECT_FALSE(store_.get("b"));
  SizeClassStats small = of(kSmallClass);
  EXPECT_EQ(small.number, 0u);
  EXPECT_EQ(small.reclaimed, 2u);
  EXPECT_EQ(small.expired_unfetched, 1u);  // "a" was never read
  EXPECT_EQ(small.crawler_reclaimed, 0u);
  EXPECT_EQ(store_.stats().reclaimed, 2u);
}

TEST_F(SizeClassStatsTest, CrawlerReclaimsFlushedItemsAndCountsWhatItChecked) {
  ASSERT_EQ(set("a", kSmallValue), StoreStatus::kStored);
  ASSERT_EQ(set("b", kMediumValue), StoreStatus::kStored);
  ASSERT_EQ(set("c", kMediumValue), StoreStatus::kStored);
  crawl_all();
  EXPECT_EQ(of(kSmallClass).crawler_items_checked, 1u);
  EXPECT_EQ(of(kMediumClass).crawler_items_checked, 2u);
  EXPECT_EQ(of(kMediumClass).crawler_reclaimed, 0u);
  store_.flush_all(0);
  crawl_all();
  SizeClassStats medium = of(kMediumClass);
  EXPECT_EQ(medium.number, 0u);
  EXPECT_EQ(medium.crawler_items_checked, 4u);
  EXPECT_EQ(medium.crawler_reclaimed, 2u);
  EXPECT_EQ(medium.reclaimed, 2u);
  EXPECT_EQ(of(kSmallClass).crawler_reclaimed, 1u);
  EXPECT_EQ(store_.stats().crawler_reclaimed, 3u);
}

// age: the crawler's last complete pass noted the oldest last access of
// each class; class_stats reports now minus that.
TEST_F(SizeClassStatsTest, AgeIsTheOldestLastAccessTheLastCrawlSaw) {
  ASSERT_EQ(set("old", kSmallValue), StoreStatus::kStored);
  clock_.advance(10);
  ASSERT_EQ(set("new", kSmallValue), StoreStatus::kStored);
  ASSERT_EQ(set("read", kMediumValue), StoreStatus::kStored);
  EXPECT_EQ(of(kSmallClass).age, 0u);  // not measured yet
  clock_.advance(20);
  ASSERT_TRUE(store_.get("read"));
  crawl_all();
  EXPECT_EQ(of(kSmallClass).age, 30u);
  EXPECT_EQ(of(kMediumClass).age, 0u);  // read just now
  clock_.advance(5);
  EXPECT_EQ(of(kSmallClass).age, 35u);  // as of that pass, on today's clock
  // Once the old item is gone, the next pass finds the next oldest.
  ASSERT_EQ(store_.remove("old", 0, kNoOwner), DeleteStatus::kDeleted);
  crawl_all();
  EXPECT_EQ(of(kSmallClass).age, 25u);
  // An empty class has no age.
  ASSERT_EQ(store_.remove("read", 0, kNoOwner), DeleteStatus::kDeleted);
  EXPECT_EQ(of(kMediumClass).age, 0u);
}

TEST_F(SizeClassStatsTest, ResetZeroesTheCountersButNotTheContents) {
  ASSERT_EQ(set("a", kSmallValue, clock_.now() + 5), StoreStatus::kStored);
  ASSERT_EQ(set("b", kSmallValue), StoreStatus::kStored);
  clock_.advance(10);
  crawl_all();
  SizeClassStats before = of(kSmallClass);
  ASSERT_EQ(before.crawler_reclaimed, 1u);
  ASSERT_EQ(before.age, 10u);
  store_.reset_stats();
  SizeClassStats after = of(kSmallClass);
  EXPECT_EQ(after.crawler_reclaimed, 0u);
  EXPECT_EQ(after.reclaimed, 0u);
  EXPECT_EQ(after.expired_unfetched, 0u);
  EXPECT_EQ(after.crawler_items_checked, 0u);
  EXPECT_EQ(after.number, 1u);
  EXPECT_EQ(after.requested, kOneByteKeyItem + kSmallValue);
  EXPECT_EQ(after.allocated, 48u);
  EXPECT_EQ(after.age, 10u);
}

// A store of one shard with room for kSlots medium items.
class SizeClassEvictionTest : public SizeClassStatsTest {
 protected:
  static constexpr size_t kSlots = 4;
  static constexpr size_t kLimit = kSlots * (kOneByteKeyItem + 1 + kMediumValue);  // 2-byte keys
  SizeClassEvictionTest() : SizeClassStatsTest(kLimit), store_(one_shard(), clock_) {}
  static StoreConfig one_shard() {
    StoreConfig one = config(kLimit);
    one.shard_count = 1;
    one.max_item_size = 1024;
    return one;
  }
  static std::string key(size_t i) { return "k" + std::to_string(i); }
  SizeClassStats of(unsigned id) { return store_.class_stats().at(id - 1); }
  Store store_;
};

TEST_F(SizeClassEvictionTest, EvictionIsCountedInTheEvictedItemsClass) {
  ASSERT_EQ(set(store_, key(0), kMediumValue, clock_.now() + 1000), StoreStatus::kStored);
  for (size_t i = 1; i < kSlots; ++i)
    ASSERT_EQ(set(store_, key(i), kMediumValue), StoreStatus::kStored);
  clock_.advance(7);
  // Every slot is taken: each new item evicts one unread older item.
  for (size_t i = kSlots; i < kSlots + 3; ++i)
    ASSERT_EQ(set(store_, key(i), kMediumValue), StoreStatus::kStored);
  SizeClassStats medium = of(kMediumClass);
  EXPECT_EQ(medium.evicted, 3u);
  EXPECT_EQ(medium.evicted_nonzero, 1u);  // k0 had an exptime
  EXPECT_EQ(medium.evicted_unfetched, 3u);
  EXPECT_EQ(medium.evicted_time, 7u);  // last accessed 7 seconds before
  EXPECT_EQ(medium.number, kSlots);
  EXPECT_EQ(store_.stats().evictions, 3u);
  EXPECT_EQ(store_.stats().evicted_unfetched, 3u);
  store_.reset_stats();
  EXPECT_EQ(of(kMediumClass).evicted, 0u);
  EXPECT_EQ(of(kMediumClass).evicted_time, 0u);
}

TEST_F(SizeClassEvictionTest, RefusedStoreCountsOutOfMemoryInTheNewItemsClass) {
  for (size_t i = 0; i < kSlots; ++i) {
    ASSERT_EQ(set(store_, key(i), kMediumValue), StoreStatus::kStored);
    ASSERT_EQ(store_.lock(key(i), kOwner), LockStatus::kOk);
  }
  EXPECT_EQ(set(store_, "x", kSmallValue), StoreStatus::kNoMemory);
  EXPECT_EQ(of(kSmallClass).outofmemory, 1u);
  EXPECT_EQ(of(kMediumClass).outofmemory, 0u);
  EXPECT_EQ(of(kMediumClass).evicted, 0u);
  // Locked items count like any item.
  EXPECT_EQ(of(kMediumClass).number, kSlots);
}

}  // namespace
}  // namespace lockcached::store
