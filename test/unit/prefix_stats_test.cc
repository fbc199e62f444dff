#include "lockcached/core/prefix_stats.h"

#include <string>

#include <gtest/gtest.h>

namespace lockcached::core {
namespace {

TEST(PrefixStatsTest, CountsNothingWhileOff) {
  PrefixStats stats;
  stats.record_get("user:1", true);
  stats.record_set("user:1");
  EXPECT_TRUE(stats.dump().empty());
}

TEST(PrefixStatsTest, CountsByTheTextBeforeTheFirstDelimiter) {
  PrefixStats stats;
  stats.set_enabled(true);
  stats.record_get("user:1", true);
  stats.record_get("user:2:x", false);
  stats.record_set("page:home");
  stats.record_delete("user:1");
  stats.record_set("plain");  // no delimiter: not counted
  stats.record_get(":empty", true);  // an empty prefix is a prefix
  std::vector<PrefixLine> lines = stats.dump();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].prefix, "user");
  EXPECT_EQ(lines[0].counts.gets, 2u);
  EXPECT_EQ(lines[0].counts.hits, 1u);
  EXPECT_EQ(lines[0].counts.sets, 0u);
  EXPECT_EQ(lines[0].counts.deletes, 1u);
  EXPECT_EQ(lines[1].prefix, "page");
  EXPECT_EQ(lines[1].counts.sets, 1u);
  EXPECT_EQ(lines[2].prefix, "");

  stats.set_enabled(false);
  stats.record_set("user:3");
  EXPECT_EQ(stats.dump()[0].counts.sets, 0u);  // off stops counting, keeps the counts
  stats.clear();
  EXPECT_TRUE(stats.dump().empty());
}

// memcached's -D: another delimiter, and counting from the start.
TEST(PrefixStatsTest, AnotherDelimiterOnFromTheStart) {
  PrefixStats stats('/', true);
  EXPECT_EQ(stats.delimiter(), '/');
  stats.record_set("user/1");
  stats.record_set("user:1");  // ':' is no delimiter now
  std::vector<PrefixLine> lines = stats.dump();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].prefix, "user");
  EXPECT_EQ(lines[0].counts.sets, 1u);
}

TEST(PrefixStatsTest, StopsAddingPrefixesAtTheBound) {
  PrefixStats stats;
  stats.set_enabled(true);
  for (size_t i = 0; i < PrefixStats::kMaxPrefixes + 10; ++i)
    stats.record_set(std::to_string(i) + ":k");
  EXPECT_EQ(stats.dump().size(), PrefixStats::kMaxPrefixes);
  // Known prefixes are still counted.
  stats.record_set("0:k");
  EXPECT_EQ(stats.dump()[0].counts.sets, 2u);
}

}  // namespace
}  // namespace lockcached::core
