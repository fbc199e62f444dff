// End-to-end tests of the size-class statistics and the item dumps: `stats
// items`, `stats slabs`, `stats sizes`, `stats cachedump` and `lru_crawler
// metadump` (store/size_classes.h, core/size_class_stats.cc), against the
// real binary. Item sizes: a 32-byte header + key + value + 2 bytes, in
// jemalloc's class: a 2-byte key and 5 bytes are 41 bytes (class 1, 48 B),
// with 200 bytes 236 (class 10, 256 B).
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "server_process.h"

namespace {

using e2e::Client;
using e2e::kItemHeaderBytes;
using e2e::ServerProcess;
using e2e::stat_u64;

class StatsFamiliesE2e : public ::testing::Test {
 protected:
  void start(std::vector<std::string> flags = {}) {
    flags.push_back("--threads=2");
    ASSERT_TRUE(server_.start(flags));
    ASSERT_TRUE(client_.connect(server_.port()));
  }

  // Stores `count` items named PREFIX0, PREFIX1, ... with `bytes` of value,
  // pipelined, and checks every reply.
  void fill(std::string_view prefix, int count, size_t bytes, int64_t exptime = 0) {
    std::string batch;
    std::string value(bytes, 'v');
    for (int i = 0; i < count; ++i) {
      batch += "set " + std::string(prefix) + std::to_string(i) + " 0 " + std::to_string(exptime) +
               " " + std::to_string(bytes) + " noreply\r\n" + value + "\r\n";
      if (batch.size() > (1 << 20) || i + 1 == count) {
        ASSERT_TRUE(client_.send(batch));
        batch.clear();
      }
    }
    ASSERT_EQ(client_.request("version").substr(0, 8), "VERSION ");
  }

  // The lines of a multi-line reply up to END (END left out); `raw`, when
  // given, gets the reply as it came.
  std::vector<std::string> lines_until_end(std::string_view request, std::string* raw = nullptr) {
    EXPECT_TRUE(client_.send(std::string(request) + "\r\n"));
    std::optional<std::string> reply = client_.read_until("END\r\n");
    EXPECT_TRUE(reply) << client_.last_error();
    if (raw && reply) *raw = *reply;
    std::vector<std::string> lines;
    std::string_view rest = reply ? std::string_view(*reply) : std::string_view();
    // A metadump line ends with a bare LF, as memcached's.
    while (!rest.empty() && rest != "END\r\n") {
      size_t end = rest.find('\n');
      std::string_view line = rest.substr(0, end);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      lines.emplace_back(line);
      rest.remove_prefix(end + 1);
    }
    return lines;
  }

  ServerProcess server_;
  Client client_;
};

TEST_F(StatsFamiliesE2e, ItemsSlabsAndSizesReportEachNonEmptyClass) {
  start({"--max_item_size=4194304"});
  fill("s", 10, 5);   // 2-byte keys: header + 9 bytes, class 1
  fill("m", 5, 200);  // header + 204 bytes, class 10
  ASSERT_EQ(client_.store("set", "big", std::string(3 << 20, 'b')), "STORED");  // class 63

  std::map<std::string, std::string> items = client_.stats("items");
  EXPECT_EQ(stat_u64(items, "items:1:number"), 10u);
  EXPECT_EQ(stat_u64(items, "items:1:mem_requested"), 10u * (kItemHeaderBytes + 2 + 5 + 2));
  EXPECT_EQ(stat_u64(items, "items:10:number"), 5u);
  EXPECT_EQ(stat_u64(items, "items:10:mem_requested"), 5u * (kItemHeaderBytes + 2 + 200 + 2));
  EXPECT_EQ(stat_u64(items, "items:63:number"), 1u);
  EXPECT_EQ(stat_u64(items, "items:63:mem_requested"), kItemHeaderBytes + 3 + (3u << 20) + 2);
  for (std::string field :
       {"age", "evicted", "evicted_nonzero", "evicted_time", "outofmemory", "reclaimed",
        "expired_unfetched", "evicted_unfetched", "crawler_reclaimed", "crawler_items_checked"}) {
    EXPECT_TRUE(items.count("items:1:" + field)) << field;
  }
  // What needs a segmented LRU or slab pages is left out, not faked.
  for (std::string field : {"number_hot", "number_cold", "age_hot", "moves_to_cold", "tailrepairs",
                            "hits_to_hot", "direct_reclaims"}) {
    EXPECT_FALSE(items.count("items:1:" + field)) << field;
  }
  EXPECT_FALSE(items.count("items:2:number"));
  EXPECT_EQ(items.size(), 3u * 12);

  std::map<std::string, std::string> slabs = client_.stats("slabs");
  EXPECT_EQ(stat_u64(slabs, "1:chunk_size"), 48u);
  EXPECT_EQ(stat_u64(slabs, "1:chunks_per_page"), (1u << 20) / 48);
  EXPECT_EQ(stat_u64(slabs, "1:total_pages"), 1u);
  EXPECT_EQ(stat_u64(slabs, "1:total_chunks"), 10u);
  EXPECT_EQ(stat_u64(slabs, "1:used_chunks"), 10u);
  EXPECT_EQ(stat_u64(slabs, "1:free_chunks"), 0u);
  EXPECT_EQ(stat_u64(slabs, "1:free_chunks_end"), 0u);
  EXPECT_EQ(stat_u64(slabs, "10:chunk_size"), 256u);
  EXPECT_EQ(stat_u64(slabs, "10:used_chunks"), 5u);
  // The last class: the largest item the server takes, one per page.
  EXPECT_EQ(stat_u64(slabs, "63:chunk_size"), kItemHeaderBytes + 250 + (4u << 20) + 2);
  EXPECT_EQ(stat_u64(slabs, "63:chunks_per_page"), 1u);
  EXPECT_EQ(stat_u64(slabs, "63:total_pages"), 1u);
  EXPECT_EQ(stat_u64(slabs, "active_slabs"), 3u);
  // jemalloc gives a 3 MiB + 37 B request 3.5 MiB.
  EXPECT_EQ(stat_u64(slabs, "total_malloced"), 10u * 48 + 5u * 256 + (7u << 19));

  std::map<std::string, std::string> sizes = client_.stats("sizes");
  EXPECT_EQ(sizes, (std::map<std::string, std::string>{
                       {"48", "10"},
                       {"256", "5"},
                       {std::to_string(kItemHeaderBytes + 250 + (4 << 20) + 2), "1"}}));
}

TEST_F(StatsFamiliesE2e, EvictionsAreCountedPerClassAndResetKeepsTheContents) {
  start({"--memory_limit_mb=8"});
  fill("evict-", 12000, 1000);  // 1,040-1,044 bytes: class 19 (1,280 B)
  std::map<std::string, std::string> items = client_.stats("items");
  uint64_t evicted = stat_u64(items, "items:19:evicted");
  EXPECT_GT(evicted, 0u);
  EXPECT_EQ(stat_u64(items, "items:19:evicted_unfetched"), evicted);
  EXPECT_EQ(stat_u64(items, "items:19:evicted_nonzero"), 0u);
  std::map<std::string, std::string> general = client_.stats();
  EXPECT_EQ(stat_u64(general, "evictions"), evicted);
  uint64_t number = stat_u64(items, "items:19:number");
  EXPECT_EQ(number, stat_u64(general, "curr_items"));
  EXPECT_EQ(number + evicted, 12000u);

  ASSERT_EQ(client_.request("stats reset"), "RESET");
  items = client_.stats("items");
  EXPECT_EQ(stat_u64(items, "items:19:evicted"), 0u);
  EXPECT_EQ(stat_u64(items, "items:19:evicted_unfetched"), 0u);
  EXPECT_EQ(stat_u64(items, "items:19:number"), number);
}

TEST_F(StatsFamiliesE2e, CachedumpListsEveryKeyOfTheClass) {
  start();
  fill("c", 3000, 5, 1000);  // class 1, with an exptime
  fill("m", 4, 200);         // class 10
  // The server's clock is the monotonic one, set against time() once at
  // start: each side truncates to whole seconds, so the server's "now" may
  // be a second ahead of this process's time().
  int64_t after = static_cast<int64_t>(::time(nullptr)) + 1000 + 1;
  std::vector<std::string> lines = lines_until_end("stats cachedump 1 0");
  ASSERT_EQ(lines.size(), 3000u);
  std::set<std::string> keys;
  for (const std::string& line : lines) {
    // ITEM c123 [5 b; 1700000000 s]
    size_t space = line.find(' ', 5);
    ASSERT_EQ(line.substr(0, 5), "ITEM ") << line;
    keys.insert(line.substr(5, space - 5));
    EXPECT_EQ(line.substr(space, 6), " [5 b;") << line;
    int64_t exptime = std::stoll(line.substr(space + 7));
    EXPECT_LE(exptime, after) << line;
    EXPECT_GE(exptime, after - 11) << line;
  }
  EXPECT_EQ(keys.size(), 3000u);
  EXPECT_TRUE(keys.count("c0") && keys.count("c2999"));
  EXPECT_EQ(lines_until_end("stats cachedump 10 0").size(), 4u);
  EXPECT_EQ(lines_until_end("stats cachedump 1 7").size(), 7u);
  EXPECT_EQ(lines_until_end("stats cachedump 2 0").size(), 0u);
  EXPECT_EQ(client_.request("stats cachedump 64 0"), "CLIENT_ERROR Illegal slab id");
  EXPECT_EQ(client_.request("stats cachedump 1"), "CLIENT_ERROR bad command line");
}

TEST_F(StatsFamiliesE2e, MetadumpListsEveryLiveItemAndTheNextRequestFollows) {
  start();
  fill("k", 2000, 5);
  ASSERT_EQ(client_.store("set", "a/b%c", std::string(200, 'x'), 0, 100), "STORED");
  ASSERT_EQ(client_.store("set", "gone", "x", 0, -1), "STORED");  // expired at once
  int64_t now = static_cast<int64_t>(::time(nullptr));
  // Pipelined behind the dump, a request is answered after its END.
  std::string raw;
  std::vector<std::string> lines = lines_until_end("lru_crawler metadump all\r\nversion", &raw);
  EXPECT_EQ(client_.read_line().substr(0, 8), "VERSION ");
  EXPECT_EQ(raw.find('\r'), raw.size() - 2);  // lines end with a bare LF, as memcached's
  EXPECT_EQ(lines.size(), 2001u);             // "gone" is not listed
  std::vector<std::string> class_10 = lines_until_end("lru_crawler metadump 10");
  ASSERT_EQ(class_10.size(), 1u);
  const std::string& line = class_10[0];
  EXPECT_TRUE(line.starts_with("key=a%2Fb%25c exp=")) << line;
  int64_t exp = std::stoll(line.substr(line.find(" exp=") + 5));
  EXPECT_GE(exp, now + 100 - 2) << line;
  EXPECT_LE(exp, now + 100 + 2) << line;
  EXPECT_TRUE(
      line.ends_with(" fetch=no cls=10 size=" + std::to_string(kItemHeaderBytes + 5 + 200 + 2)))
      << line;
  EXPECT_EQ(client_.request("lru_crawler metadump 64"), "BADCLASS invalid class id");
}

// The crawler passes while the store holds items, expiring or not: it is
// what measures each class's age. Its first pass may begin while the items
// are still being stored (and the next is a minute later), so it has seen
// some of them, not necessarily all.
TEST_F(StatsFamiliesE2e, CrawlerChecksItemsWithoutExptimes) {
  start();
  fill("k", 100, 5);
  EXPECT_TRUE(e2e::eventually(
      [&] { return stat_u64(client_.stats("items"), "items:1:crawler_items_checked") >= 1; }));
  EXPECT_LT(stat_u64(client_.stats("items"), "items:1:age"), 3600u);
}

}  // namespace
