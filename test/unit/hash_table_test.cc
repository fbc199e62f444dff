// Unit tests of store::HashTable: lookups, overflow buckets, growth, erase
// while walking a bucket, and a random run against std::unordered_map.
#include "lockcached/store/hash_table.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "lockcached/store/hash.h"
#include "lockcached/store/item.h"

namespace lockcached::store {
namespace {

constexpr uint64_t kSeed = 0x1234567;

class HashTableTest : public ::testing::Test {
 protected:
  ~HashTableTest() override {
    for (Item* item : items_)
      item_release(item);
  }

  Item* make(const std::string& key) {
    Item* item = item_allocate(key, 0, 0, 0);
    items_.push_back(item);
    return item;
  }
  static uint64_t hash(const std::string& key) { return hash_key(key, kSeed); }

  // Keys whose hashes agree in the low `bits` bits: they share a bucket in
  // any table of up to 2^bits buckets.
  static std::vector<std::string> keys_in_one_bucket(size_t count, unsigned bits) {
    std::vector<std::string> keys;
    for (int i = 0; keys.size() < count; ++i) {
      std::string key = "k" + std::to_string(i);
      if ((hash(key) & ((uint64_t{1} << bits) - 1)) == 0) keys.push_back(key);
    }
    return keys;
  }

  std::vector<Item*> items_;
};

TEST_F(HashTableTest, FindsWhatWasInsertedAndNothingElse) {
  HashTable table(kSeed, 64);
  Item* a = make("alpha");
  Item* b = make("beta");
  table.insert(hash("alpha"), a);
  table.insert(hash("beta"), b);
  EXPECT_EQ(table.find(hash("alpha"), "alpha"), a);
  EXPECT_EQ(table.find(hash("beta"), "beta"), b);
  EXPECT_EQ(table.find(hash("gamma"), "gamma"), nullptr);
  EXPECT_EQ(table.size(), 2u);

  table.erase(hash("alpha"), a);
  EXPECT_EQ(table.find(hash("alpha"), "alpha"), nullptr);
  EXPECT_EQ(table.find(hash("beta"), "beta"), b);
  EXPECT_EQ(table.size(), 1u);
}

TEST_F(HashTableTest, EqualHashesAreToldApartByTheKey) {
  // The same hash means the same bucket and the same tag: only the key
  // comparison can tell the items apart.
  HashTable table(kSeed, 1024);
  const uint64_t h = 0xabcdef0123456789ULL;
  Item* a = make("same-hash-a");
  Item* b = make("same-hash-b");
  table.insert(h, a);
  table.insert(h, b);
  EXPECT_EQ(table.find(h, "same-hash-a"), a);
  EXPECT_EQ(table.find(h, "same-hash-b"), b);
  EXPECT_EQ(table.find(h, "same-hash-c"), nullptr);
  // A key of another length with the same hash.
  EXPECT_EQ(table.find(h, "same-hash-"), nullptr);
}

TEST_F(HashTableTest, OverflowBucketsHoldMoreThanSevenItems) {
  HashTable table(kSeed, 2);
  std::vector<std::string> keys = keys_in_one_bucket(40, 8);
  for (const std::string& key : keys)
    table.insert(hash(key), make(key));
  EXPECT_GT(table.bucket_count(), 2u);  // it grew on the way
  ASSERT_EQ(table.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(table.find(hash(keys[i]), keys[i]), items_[i]) << keys[i];

  // Erase from the front, the middle and the end of the chain.
  for (size_t i : {size_t{0}, size_t{17}, size_t{39}, size_t{8}})
    table.erase(hash(keys[i]), items_[i]);
  for (size_t i = 0; i < keys.size(); ++i) {
    bool erased = i == 0 || i == 17 || i == 39 || i == 8;
    EXPECT_EQ(table.find(hash(keys[i]), keys[i]), erased ? nullptr : items_[i]) << keys[i];
  }
  EXPECT_EQ(table.size(), keys.size() - 4);
}

TEST_F(HashTableTest, GrowthKeepsEveryItemAndReportsItself) {
  HashTable table(kSeed, 1);
  size_t doublings = 0;
  for (int i = 0; i < 10000; ++i) {
    std::string key = "key:" + std::to_string(i);
    size_t before = table.bucket_count();
    if (table.insert(hash(key), make(key))) {
      ++doublings;
      EXPECT_EQ(table.bucket_count(), 2 * before);
    }
  }
  EXPECT_EQ(table.bucket_count(), size_t{1} << doublings);
  EXPECT_LE(table.size(), HashTable::kMaxLoad * table.bucket_count());
  for (int i = 0; i < 10000; ++i) {
    std::string key = "key:" + std::to_string(i);
    ASSERT_EQ(table.find(hash(key), key), items_[i]) << key;
  }
}

TEST_F(HashTableTest, ABucketSplitsIntoItselfAndItsTwin) {
  // What the cursors rely on: after a doubling, what was in bucket b is in
  // b or b + old size.
  HashTable table(kSeed, 16);
  std::map<std::string, size_t> bucket_before;
  int i = 0;
  while (table.size() < HashTable::kMaxLoad * table.bucket_count()) {
    std::string key = "split:" + std::to_string(i++);
    table.insert(hash(key), make(key));
    bucket_before[key] = table.bucket_of(hash(key));
  }
  size_t old_count = table.bucket_count();
  ASSERT_TRUE(table.insert(hash("trigger"), make("trigger")));
  for (size_t b = 0; b < table.bucket_count(); ++b) {
    table.for_each_in_bucket(b, [&](Item* item) {
      std::string key(item->key());
      if (key == "trigger") return;
      EXPECT_EQ(b % old_count, bucket_before.at(key)) << key;
    });
  }
}

TEST_F(HashTableTest, VisitMayEraseTheItemItIsGiven) {
  HashTable table(kSeed, 2);
  std::vector<std::string> keys = keys_in_one_bucket(30, 8);
  for (const std::string& key : keys)
    table.insert(hash(key), make(key));
  size_t bucket = table.bucket_of(hash(keys[0]));

  // Erase every other item visited: each is still visited exactly once.
  std::map<const Item*, int> visits;
  bool erase = true;
  table.for_each_in_bucket(bucket, [&](Item* item) {
    ++visits[item];
    if (erase) table.erase(hash(std::string(item->key())), item);
    erase = !erase;
  });
  EXPECT_EQ(visits.size(), keys.size());
  for (const auto& [item, count] : visits)
    EXPECT_EQ(count, 1) << item->key();
  EXPECT_EQ(table.size(), keys.size() / 2);

  // Then erase all that remain in one walk.
  size_t remaining = 0;
  table.for_each_in_bucket(bucket, [&](Item* item) {
    ++remaining;
    table.erase(hash(std::string(item->key())), item);
  });
  EXPECT_EQ(remaining, keys.size() / 2);
  EXPECT_EQ(table.size(), 0u);
  for (const std::string& key : keys)
    EXPECT_EQ(table.find(hash(key), key), nullptr);
}

TEST_F(HashTableTest, RandomOperationsAgreeWithAMap) {
  HashTable table(kSeed, 1);
  std::unordered_map<std::string, Item*> model;
  std::mt19937 random(42);
  for (int step = 0; step < 50000; ++step) {
    std::string key = "r" + std::to_string(random() % 3000);
    auto it = model.find(key);
    Item* found = table.find(hash(key), key);
    ASSERT_EQ(found, it == model.end() ? nullptr : it->second) << "step " << step;
    if (it == model.end()) {
      Item* item = make(key);
      table.insert(hash(key), item);
      model.emplace(key, item);
    } else if (random() % 2 == 0) {
      table.erase(hash(key), it->second);
      model.erase(it);
    }
    ASSERT_EQ(table.size(), model.size());
  }
  size_t walked = 0;
  for (size_t b = 0; b < table.bucket_count(); ++b) {
    table.for_each_in_bucket(b, [&](Item* item) {
      ++walked;
      EXPECT_EQ(model.at(std::string(item->key())), item);
    });
  }
  EXPECT_EQ(walked, model.size());
}

}  // namespace
}  // namespace lockcached::store
