// End-to-end tests of memory management (docs/architecture.md, "Memory and
// eviction"): the real lockcached binary, its resident set size read from
// /proc/PID/status, fed far more than its memory limit over TCP.
//
// What is proved here: a cache stays near its limit while its item sizes
// shift (CLOCK eviction, jemalloc giving freed pages back), the newest items
// stay and the oldest go, locked items are never evicted nor flushed, a store
// whose every item is locked answers "out of memory" and stays up, the
// crawler reclaims expired items nobody reads, and one large value goes to
// slow readers without a copy per reader and without stalling other clients.
//
// Every test starts its own server and keeps its memory modest (at most about
// 150 MB for server and test together), so that ctest -j2 can run two at once.
// Replies are always awaited; eventually() only waits for what happens in the
// background (expiry, the crawler, a closed connection's locks).
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "binary_client.h"
#include "sanitizer.h"
#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using e2e::Client;
using e2e::kItemHeaderBytes;
using e2e::latency_bound_ms;
using e2e::rss_bound;
using e2e::ServerProcess;
using e2e::stat_u64;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;

constexpr std::string_view kOutOfMemory = "SERVER_ERROR out of memory storing object";

// VmRSS of `pid` in bytes; 0 (and a test failure) when it cannot be read.
uint64_t rss_bytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      std::istringstream words(line.substr(6));
      uint64_t kb = 0;
      words >> kb;
      return kb * kKiB;
    }
  }
  ADD_FAILURE() << "no VmRSS in /proc/" << pid << "/status";
  return 0;
}

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / kMiB);
  return text;
}

// PREFIX followed by `index` in eight digits: every key of a feed is as long.
std::string key_of(std::string_view prefix, size_t index) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%08zu", index);
  return std::string(prefix) + digits;
}

// A value that names its key, so that a value read back under the wrong key
// or cut short shows.
std::string value_for(std::string_view key, size_t size) {
  std::string value;
  value.reserve(size);
  while (value.size() < size) {
    value.append(key);
    value.push_back('.');
  }
  value.resize(size);
  return value;
}

uint64_t fnv1a(uint64_t hash, const char* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    hash ^= static_cast<unsigned char>(data[i]);
    hash *= 1099511628211ull;
  }
  return hash;
}
constexpr uint64_t kFnvBasis = 14695981039346656037ull;

// Every byte value, "\r\n" and "END" included, from a fixed seed.
std::string random_bytes(size_t size, uint64_t seed) {
  std::string bytes(size, '\0');
  uint64_t state = seed;
  for (size_t i = 0; i < size; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    bytes[i] = static_cast<char>(state >> 24);
  }
  return bytes;
}

// Stores `count` items KEY_OF(prefix, first..first+count) of `value_size`
// bytes with text "set", pipelined: up to 1000 commands or about 1 MiB are
// sent at once, then every reply is awaited (small batches, so that neither
// side ever blocks on a full socket). `after_batch` runs after each batch.
::testing::AssertionResult feed(Client& client, std::string_view prefix, size_t first, size_t count,
                                size_t value_size, int64_t exptime = 0,
                                const std::function<void()>& after_batch = nullptr) {
  constexpr size_t kBatchCommands = 1000;
  constexpr size_t kBatchBytes = kMiB;
  std::string batch;
  std::vector<std::string> keys;
  const std::string tail = " 0 " + std::to_string(exptime) + " " + std::to_string(value_size);
  size_t end = first + count;
  for (size_t next = first; next < end;) {
    batch.clear();
    keys.clear();
    while (next < end && keys.size() < kBatchCommands && batch.size() < kBatchBytes) {
      keys.push_back(key_of(prefix, next++));
      batch += "set " + keys.back() + tail + "\r\n";
      batch += value_for(keys.back(), value_size);
      batch += "\r\n";
    }
    if (!client.send(batch)) return ::testing::AssertionFailure() << client.last_error();
    for (const std::string& key : keys) {
      std::string reply = client.read_line();
      if (reply != "STORED") {
        return ::testing::AssertionFailure()
               << "set " << key << " (" << value_size << " bytes) answered " << reply;
      }
    }
    if (after_batch) after_batch();
  }
  return ::testing::AssertionSuccess();
}

// Sends one text command per key at once and returns the reply lines.
std::vector<std::string> pipeline(Client& client, std::string_view command,
                                  const std::vector<std::string>& keys) {
  std::vector<std::string> replies;
  for (size_t begin = 0; begin < keys.size(); begin += 1000) {
    size_t end = std::min(keys.size(), begin + 1000);
    std::string batch;
    for (size_t i = begin; i < end; ++i)
      batch += std::string(command) + " " + keys[i] + "\r\n";
    if (!client.send(batch)) {
      ADD_FAILURE() << command << ": " << client.last_error();
      return replies;
    }
    for (size_t i = begin; i < end; ++i)
      replies.push_back(client.read_line());
  }
  return replies;
}

ServerProcess* start_server(std::unique_ptr<ServerProcess>& server,
                            const std::vector<std::string>& flags) {
  server = std::make_unique<ServerProcess>();
  ::testing::AssertionResult started = server->start(flags);
  EXPECT_TRUE(started);
  return started ? server.get() : nullptr;
}

// ---------------------------------------------------------------------------
// Eviction: 240 MB of 10 KB values into a 64 MB cache.

TEST(MemoryE2e, EvictionKeepsRssBoundedNewestItemsAndLockedItems) {
  std::unique_ptr<ServerProcess> server;
  ASSERT_TRUE(start_server(server, {"--memory_limit_mb=64"}));
  pid_t pid = server->pid();
  Client writer, locker;
  ASSERT_TRUE(writer.connect(server->port()));
  ASSERT_TRUE(locker.connect(server->port()));

  constexpr size_t kValueSize = 10 * 1000;
  constexpr size_t kItems = 24000;  // 240 MB
  const std::string locked_value = value_for("locked", kValueSize);
  ASSERT_EQ(writer.store("set", "locked", locked_value), "STORED");
  ASSERT_EQ(locker.request("lock locked"), "OK");  // held while `locker` stays open

  uint64_t peak = 0;
  ASSERT_TRUE(feed(writer, "old-", 0, kItems, kValueSize, 0,
                   [&] { peak = std::max(peak, rss_bytes(pid)); }));
  uint64_t after = rss_bytes(pid);
  std::printf("[ MEMORY   ] 64 MB cache fed 240 MB of 10 KB values: RSS peak %s, after %s\n",
              mib(peak).c_str(), mib(after).c_str());
  EXPECT_LT(peak, rss_bound(100 * kMiB)) << "RSS peak " << mib(peak);
  EXPECT_LT(after, rss_bound(100 * kMiB)) << "RSS " << mib(after);

  auto stats = writer.stats();
  EXPECT_LE(stat_u64(stats, "bytes"), stat_u64(stats, "limit_maxbytes"));
  EXPECT_EQ(stat_u64(stats, "limit_maxbytes"), 64 * kMiB);
  EXPECT_GT(stat_u64(stats, "evictions"), kItems / 2);
  EXPECT_EQ(stat_u64(stats, "curr_locks"), 1u);

  // About 6500 items fit. A new item keeps its `accessed` bit until the hand
  // first reaches its bucket and can go one full turn later at the earliest,
  // when thousands of newer items have been stored: the newest 1000 must all
  // be there. The oldest 1000, read by nobody, were pushed out long ago.
  std::vector<std::string> newest, oldest;
  for (size_t i = 0; i < 1000; ++i) {
    newest.push_back(key_of("old-", kItems - 1000 + i));
    oldest.push_back(key_of("old-", i));
  }
  size_t newest_missing = 0, oldest_present = 0;
  std::string missing_ages;  // how many items were stored after each missing one
  for (size_t i = newest.size(); i-- > 0;) {
    const std::string& key = newest[i];
    std::optional<std::string> value = writer.get(key);
    if (!value) {
      if (++newest_missing <= 10) missing_ages += " " + std::to_string(newest.size() - 1 - i);
    } else {
      EXPECT_EQ(*value, value_for(key, kValueSize)) << key;
    }
  }
  for (const std::string& key : oldest)
    oldest_present += writer.get(key).has_value();
  EXPECT_EQ(newest_missing, 0u) << "of the newest 1000 items (of about 6500 that fit) were "
                                   "evicted; items stored after the youngest of them:"
                                << missing_ages;
  EXPECT_EQ(oldest_present, 0u) << "of the oldest 1000 items";

  // The locked item, the oldest of all, survived every turn of the hand.
  EXPECT_EQ(writer.get("locked"), locked_value);
  EXPECT_EQ(writer.store("set", "locked", "x"), "LOCKED");
  EXPECT_EQ(locker.request("unlock locked"), "OK");
}

// ---------------------------------------------------------------------------
// Item sizes shifting over time: 100 B, 1 KB, 20 KB, 200 KB, then 100 B again.
// Each phase feeds at least three times the limit in item bytes, so that the
// cache ends it holding that phase's items only (the 100-byte phases feed
// 128 MB of values, 194 MB of items, to keep the test within a few seconds).
//
// Asserted at the end of each phase, as the issue asks: RSS within the
// limit * 1.15 plus a fixed base. The peak within a phase, while pages of the
// old size class are still partly in use, may pass that by a little more
// (the memory governor reads the heap every 20 ms, later when the CPUs are
// busy with other tests): 16 MiB. Without the governor it reached 154 MiB
// here.
//
// Under a sanitizer the server runs the sanitizer's allocator, which keeps
// the pages of every size class it has used (ASan: and a quarantine of freed
// blocks), so the bound grows with each phase; and the instrumented client
// is some 30 times slower, so the whole test runs at an eighth of the scale
// (an 8 MB cache, an eighth of the bytes per phase).

TEST(MemoryE2e, ShiftingItemSizesKeepRssNearTheLimit) {
  const bool sanitized = e2e::server_sanitizer() != e2e::Sanitizer::kNone;
  const size_t scale = sanitized ? 8 : 1;
  const uint64_t limit_mb = 64 / scale;
  std::unique_ptr<ServerProcess> server;
  ASSERT_TRUE(start_server(server, {"--memory_limit_mb=" + std::to_string(limit_mb)}));
  pid_t pid = server->pid();
  const uint64_t empty = rss_bytes(pid);
  const uint64_t base = empty + 16 * kMiB;
  const uint64_t bound = base + limit_mb * kMiB * 115 / 100;
  Client writer;
  ASSERT_TRUE(writer.connect(server->port()));
  const uint64_t limit = stat_u64(writer.stats(), "limit_maxbytes");
  ASSERT_EQ(limit, limit_mb * kMiB);

  struct Phase {
    const char* prefix;
    size_t value_size;
    size_t bytes;  // fed in this phase
  };
  const Phase phases[] = {
      {"a-", 100, 128 * kMiB},    {"b-", 1000, 200 * kMiB}, {"c-", 20000, 200 * kMiB},
      {"d-", 200000, 200 * kMiB}, {"e-", 100, 128 * kMiB},
  };
  std::printf("[ MEMORY   ] empty server RSS %s; bound %s (%s)\n", mib(empty).c_str(),
              mib(bound).c_str(), e2e::sanitizer_name());
  uint64_t phase_bound = sanitized ? base : bound;
  for (const Phase& phase : phases) {
    SCOPED_TRACE(std::to_string(phase.value_size) + "-byte values");
    size_t count = phase.bytes / scale / phase.value_size;
    if (sanitized) phase_bound += limit * 115 / 100;  // one more size class kept
    uint64_t peak = 0, max_bytes = 0;
    Clock::time_point started = Clock::now();
    ASSERT_TRUE(feed(writer, phase.prefix, 0, count, phase.value_size, 0, [&] {
      peak = std::max(peak, rss_bytes(pid));
      max_bytes = std::max(max_bytes, stat_u64(writer.stats(), "bytes"));
    }));
    double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    uint64_t after = rss_bytes(pid);
    // Freed pages go back at once (decay 0); allow a moment all the same.
    uint64_t settled = after;
    e2e::eventually([&] { return (settled = rss_bytes(pid)) <= rss_bound(phase_bound); }, 3s);
    auto stats = writer.stats();
    max_bytes = std::max(max_bytes, stat_u64(stats, "bytes"));
    std::printf(
        "[ MEMORY   ] %6zu-byte values: %7zu sets in %.1f s, RSS peak %s, after %s "
        "(settled %s); bytes %s, curr_items %llu\n",
        phase.value_size, count, seconds, mib(peak).c_str(), mib(after).c_str(),
        mib(settled).c_str(), mib(stat_u64(stats, "bytes")).c_str(),
        static_cast<unsigned long long>(stat_u64(stats, "curr_items")));
    EXPECT_LE(settled, rss_bound(phase_bound))
        << "RSS " << mib(settled) << " over " << mib(rss_bound(phase_bound));
    if (!sanitized) {
      EXPECT_LE(peak, bound + 16 * kMiB) << "RSS peak " << mib(peak) << " during the phase";
    }
    EXPECT_LE(max_bytes, limit);
    // The newest item of the phase is there.
    std::string last = key_of(phase.prefix, count - 1);
    EXPECT_EQ(writer.get(last), value_for(last, phase.value_size));
  }
}

// ---------------------------------------------------------------------------
// The crawler: expired items go without anybody asking for them.

TEST(MemoryE2e, CrawlerReclaimsExpiredItemsNobodyReads) {
  std::unique_ptr<ServerProcess> server;
  ASSERT_TRUE(start_server(server, {"--memory_limit_mb=64"}));
  Client client;
  ASSERT_TRUE(client.connect(server->port()));
  ASSERT_TRUE(feed(client, "keep-", 0, 10, 100));
  ASSERT_TRUE(feed(client, "brief-", 0, 5000, 100, /*exptime=*/1));
  EXPECT_EQ(stat_u64(client.stats(), "total_items"), 5010u);

  // Stats only: a get would reclaim what it meets and prove nothing.
  Clock::time_point started = Clock::now();
  std::map<std::string, std::string> stats;
  bool gone = e2e::eventually(
      [&] {
        stats = client.stats();
        return stat_u64(stats, "curr_items") == 10;
      },
      15s, 200ms);
  double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  std::printf("[ MEMORY   ] 5000 expired items reclaimed %.1f s after the last was stored\n",
              seconds);
  ASSERT_TRUE(gone) << "curr_items " << stat_u64(stats, "curr_items") << " after 15 s";
  EXPECT_EQ(stat_u64(stats, "expired_unfetched"), 5000u);
  EXPECT_EQ(stat_u64(stats, "crawler_reclaimed"), 5000u);
  EXPECT_EQ(stat_u64(stats, "reclaimed"), 5000u);
  EXPECT_EQ(stat_u64(stats, "evictions"), 0u);
  // Per item: the header, "keep-" + 8 digits, the value and "\r\n".
  EXPECT_EQ(stat_u64(stats, "bytes"), 10 * (kItemHeaderBytes + 13 + 100 + 2u));
  for (size_t i = 0; i < 10; ++i) {
    std::string key = key_of("keep-", i);
    EXPECT_EQ(client.get(key), value_for(key, 100));
  }
}

// ---------------------------------------------------------------------------
// Out of memory: every item locked, nothing can be evicted.

// A binary Set of `key` (no extras beyond flags and exptime, no CAS); returns
// the reply's status, or nullopt when no well-formed reply came.
std::optional<uint16_t> binary_set(Client& client, std::string_view key, std::string_view value,
                                   uint32_t opaque, std::string* reply_body) {
  namespace bin = e2e::binary;
  if (!client.send(
          bin::encode_request(bin::op::kSet, key, bin::store_extras(0, 0), value, 0, opaque))) {
    return std::nullopt;
  }
  std::optional<bin::Response> reply = bin::read_response(client);
  if (!reply || reply->magic != bin::kResponseMagic || reply->opcode != bin::op::kSet ||
      reply->opaque != opaque) {
    return std::nullopt;
  }
  *reply_body = reply->extras + reply->key + reply->value;
  return reply->status;
}

TEST(MemoryE2e, EverythingLockedAnswersOutOfMemoryAndStaysUp) {
  std::unique_ptr<ServerProcess> server;
  // The smallest cache the server accepts.
  ASSERT_TRUE(start_server(server, {"--memory_limit_mb=1", "--max_item_size=1024"}));
  Client writer, locker, other;
  ASSERT_TRUE(writer.connect(server->port()));
  ASSERT_TRUE(locker.connect(server->port()));
  ASSERT_TRUE(other.connect(server->port()));

  // About 1100 items of 950 bytes fit; 4000 make every shard evict, which
  // leaves each with less room than one more such item.
  constexpr size_t kValueSize = 900;
  constexpr size_t kItems = 4000;
  ASSERT_TRUE(feed(writer, "fill-", 0, kItems, kValueSize));
  auto stats = writer.stats();
  const uint64_t present = stat_u64(stats, "curr_items");
  ASSERT_GT(stat_u64(stats, "evictions"), 0u);

  std::vector<std::string> keys;
  for (size_t i = 0; i < kItems; ++i)
    keys.push_back(key_of("fill-", i));
  std::vector<std::string> replies = pipeline(locker, "lock", keys);
  ASSERT_EQ(replies.size(), keys.size());
  std::vector<std::string> locked;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (replies[i] == "OK") {
      locked.push_back(keys[i]);
    } else {
      EXPECT_EQ(replies[i], "NOT_FOUND") << keys[i];
    }
  }
  ASSERT_EQ(locked.size(), present);
  // About 1100 fit, fewer when the fill's pipelined input briefly took the
  // heap past its bound (4 MiB beside so small a cache), which the memory
  // governor answers by evicting: 255 once on io_uring in a busy local run
  // of the CI stages.
  ASSERT_GT(locked.size(), 100u);
  // Eviction takes a whole bucket at a time, so a shard may still have room
  // for an item or two: store and lock until 3000 sets in a row find none
  // (with 64 shards, the chance that one was never tried is below 1e-18).
  constexpr size_t kRefusals = 3000;
  size_t refused_in_a_row = 0;
  for (size_t i = 0; refused_in_a_row < kRefusals && i < 20000; ++i) {
    std::string key = key_of("pad--", i);
    std::string reply = writer.store("set", key, value_for(key, kValueSize));
    if (reply == "STORED") {
      ASSERT_EQ(locker.request("lock " + key), "OK");
      locked.push_back(key);
      refused_in_a_row = 0;
    } else {
      ASSERT_EQ(reply, kOutOfMemory) << key;
      ++refused_in_a_row;
    }
  }
  ASSERT_EQ(refused_in_a_row, kRefusals);
  const uint64_t all_locked = locked.size();
  std::printf("[ MEMORY   ] 1 MB cache: %zu items of %zu bytes, all locked\n", locked.size(),
              kValueSize);
  EXPECT_EQ(stat_u64(writer.stats(), "curr_locks"), all_locked);

  // New items of the same size, from another connection: no room anywhere.
  for (size_t i = 0; i < 20; ++i) {
    std::string key = key_of("new--", i);  // as long as the fill keys
    EXPECT_EQ(other.store("set", key, value_for(key, kValueSize)), kOutOfMemory) << key;
  }
  EXPECT_EQ(other.store("set", "big", std::string(1024, 'b')), kOutOfMemory);
  Client binary;  // a connection speaks the protocol of its first byte
  ASSERT_TRUE(binary.connect(server->port()));
  std::string body;
  std::optional<uint16_t> status =
      binary_set(binary, key_of("bin--", 0), std::string(kValueSize, 'y'), 0x1234, &body);
  ASSERT_TRUE(status) << binary.last_error();
  EXPECT_EQ(*status, e2e::binary::st::kOutOfMemory) << body;
  EXPECT_EQ(body, "Out of memory");
  // A locked item answers LOCKED to others, not out of memory.
  EXPECT_EQ(other.store("set", locked.front(), "x"), "LOCKED");

  // Still up, nothing lost, nothing half-stored.
  EXPECT_FALSE(server->wait_for_exit(0ms).has_value());
  EXPECT_EQ(other.request("version").rfind("VERSION ", 0), 0u);
  stats = other.stats();
  EXPECT_EQ(stat_u64(stats, "curr_items"), all_locked);
  EXPECT_EQ(stat_u64(stats, "curr_locks"), all_locked);
  EXPECT_LE(stat_u64(stats, "bytes"), stat_u64(stats, "limit_maxbytes"));
  EXPECT_EQ(other.get(key_of("new--", 0)), std::nullopt);
  size_t intact = 0;
  for (const std::string& key : locked)
    intact += other.get(key) == value_for(key, kValueSize);
  EXPECT_EQ(intact, locked.size());

  // The locks go with their connection; then there is room again.
  locker.close();
  EXPECT_TRUE(e2e::eventually([&] { return stat_u64(other.stats(), "curr_locks") == 0; }));
  std::string key = key_of("new--", 0);
  EXPECT_EQ(other.store("set", key, value_for(key, kValueSize)), "STORED");
  EXPECT_EQ(other.get(key), value_for(key, kValueSize));
}

// ---------------------------------------------------------------------------
// flush_all, delayed and immediate, around a locked item.

TEST(MemoryE2e, FlushAllWithDelaySparesLaterAndLockedItems) {
  std::unique_ptr<ServerProcess> server;
  ASSERT_TRUE(start_server(server, {"--memory_limit_mb=64"}));
  Client client, locker;
  ASSERT_TRUE(client.connect(server->port()));
  ASSERT_TRUE(locker.connect(server->port()));
  ASSERT_TRUE(feed(client, "before-", 0, 100, 200));
  ASSERT_EQ(client.store("set", "locked", "held"), "STORED");
  ASSERT_EQ(locker.request("lock locked"), "OK");

  ASSERT_EQ(client.request("flush_all 2"), "OK");
  Clock::time_point flushed_at = Clock::now();
  // The moment is one to two seconds away: everything is still there.
  EXPECT_EQ(client.get(key_of("before-", 0)), value_for(key_of("before-", 0), 200));
  // Stored before the moment: goes too, as in memcached.
  ASSERT_TRUE(feed(client, "during-", 0, 10, 200));
  ASSERT_LT(Clock::now() - flushed_at, 1s) << "too slow to see the state before the moment";

  ASSERT_TRUE(e2e::eventually([&] { return !client.get(key_of("before-", 99)); }, 5s, 50ms));
  double seconds = std::chrono::duration<double>(Clock::now() - flushed_at).count();
  EXPECT_GE(seconds, 0.9) << "flush_all 2 took effect early";
  ASSERT_TRUE(feed(client, "after-", 0, 100, 200));

  std::vector<std::string> gone_keys, kept_keys;
  for (size_t i = 0; i < 100; ++i) {
    gone_keys.push_back(key_of("before-", i));
    kept_keys.push_back(key_of("after-", i));
  }
  for (size_t i = 0; i < 10; ++i)
    gone_keys.push_back(key_of("during-", i));
  auto count_present = [&](const std::vector<std::string>& keys) {
    size_t present = 0;
    for (const std::string& key : keys) {
      std::optional<std::string> value = client.get(key);
      if (value) {
        ++present;
        EXPECT_EQ(*value, value_for(key, 200));
      }
    }
    return present;
  };
  EXPECT_EQ(count_present(gone_keys), 0u);
  EXPECT_EQ(count_present(kept_keys), 100u);
  EXPECT_EQ(client.get("locked"), "held");
  // The flush is done with: items stored after it stay, a second later too.
  std::this_thread::sleep_for(1100ms);
  EXPECT_EQ(count_present(kept_keys), 100u);
  EXPECT_EQ(stat_u64(client.stats(), "curr_items"), 101u);

  // An immediate flush_all: all gone but the locked item, which stays after
  // its unlock too.
  EXPECT_EQ(client.request("flush_all"), "OK");
  EXPECT_EQ(count_present(kept_keys), 0u);
  EXPECT_EQ(client.get("locked"), "held");
  EXPECT_EQ(locker.request("unlock locked"), "OK");
  EXPECT_EQ(client.get("locked"), "held");
  EXPECT_EQ(client.store("set", "locked", "free"), "STORED");
  EXPECT_EQ(client.get("locked"), "free");
}

// ---------------------------------------------------------------------------
// A 32 MiB value (--max_item_size up to 64 MiB) read by slow readers.

struct SlowRead {
  std::string error;  // empty: the whole reply came, well-formed
  uint64_t checksum = 0;
  size_t value_bytes = 0;
  double seconds = 0;
};

// "get KEY" on a connection with a small receive buffer, read `chunk` bytes
// at a time with `pause` between reads, the value hashed as it streams by.
SlowRead slow_get(uint16_t port, const std::string& key, size_t value_size, size_t chunk,
                  std::chrono::milliseconds pause, std::atomic<bool>* first_bytes) {
  SlowRead result;
  Clock::time_point started = Clock::now();
  Client client;
  if (!client.connect(port)) return {"cannot connect"};
  int buffer = static_cast<int>(chunk);
  setsockopt(client.fd(), SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
  if (!client.send("get " + key + "\r\n")) return {client.last_error()};

  const std::string header = "VALUE " + key + " 0 " + std::to_string(value_size) + "\r\n";
  const std::string trailer = "\r\nEND\r\n";
  std::string head, tail;
  uint64_t hash = kFnvBasis;
  std::vector<char> bytes(chunk);
  Clock::time_point deadline = started + 60s;
  while (tail.size() < trailer.size()) {
    if (Clock::now() > deadline) return {"timed out after " + std::to_string(result.value_bytes)};
    pollfd poll_fd{client.fd(), POLLIN, 0};
    if (poll(&poll_fd, 1, 1000) <= 0) continue;
    ssize_t n = recv(client.fd(), bytes.data(), bytes.size(), 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return {"connection closed after " + std::to_string(result.value_bytes) + " value bytes"};
    }
    first_bytes->store(true);
    std::string_view piece(bytes.data(), static_cast<size_t>(n));
    if (head.size() < header.size()) {
      size_t take = std::min(piece.size(), header.size() - head.size());
      head.append(piece.substr(0, take));
      piece.remove_prefix(take);
      if (head.size() == header.size() && head != header) return {"header " + e2e::escape(head)};
    }
    size_t take = std::min(piece.size(), value_size - result.value_bytes);
    hash = fnv1a(hash, piece.data(), take);
    result.value_bytes += take;
    piece.remove_prefix(take);
    tail.append(piece);
    if (tail.size() > trailer.size()) return {"extra bytes: " + e2e::escape(tail)};
    std::this_thread::sleep_for(pause);
  }
  if (tail != trailer) return {"trailer " + e2e::escape(tail)};
  result.checksum = hash;
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

TEST(MemoryE2e, LargeValueGoesToSlowReadersWithoutCopiesOrStalls) {
  std::unique_ptr<ServerProcess> server;
  ASSERT_TRUE(start_server(server, {"--max_item_size=67108864", "--memory_limit_mb=256"}));
  pid_t pid = server->pid();
  const uint64_t base = rss_bytes(pid);
  constexpr size_t kSize = 32 * kMiB;
  uint64_t checksum = 0;
  {
    std::string value = random_bytes(kSize, 0x9e3779b97f4a7c15ull);
    checksum = fnv1a(kFnvBasis, value.data(), value.size());
    Client writer;
    ASSERT_TRUE(writer.connect(server->port()));
    ASSERT_EQ(writer.store("set", "big", value), "STORED");
  }
  const uint64_t stored = rss_bytes(pid);

  // Two readers at once: a copy of the value per reader would show as a
  // third 32 MiB in RSS.
  constexpr int kReaders = 2;
  std::atomic<int> done{0};
  std::atomic<bool> reading[kReaders] = {false, false};
  SlowRead results[kReaders];
  std::vector<std::thread> readers;
  uint16_t port = server->port();
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&, i] {
      results[i] = slow_get(port, "big", kSize, 64 * kKiB, 2ms, &reading[i]);
      done.fetch_add(1);
    });
  }

  // Meanwhile another client sets and gets, and is answered at once.
  Client other;
  ASSERT_TRUE(other.connect(server->port()));
  uint64_t peak = stored;
  size_t ops_while_reading = 0;
  Clock::duration slowest{};
  const std::string small = value_for("small", 1000);
  while (done.load() < kReaders) {
    Clock::time_point sent = Clock::now();
    EXPECT_EQ(other.store("set", "small", small), "STORED");
    EXPECT_EQ(other.get("small"), small);
    Clock::duration took = Clock::now() - sent;
    if (done.load() == 0 && reading[0].load() && reading[1].load()) {
      ++ops_while_reading;
      slowest = std::max(slowest, took);
    }
    peak = std::max(peak, rss_bytes(pid));
    std::this_thread::sleep_for(10ms);
  }
  for (std::thread& reader : readers)
    reader.join();

  auto slowest_ms = std::chrono::duration_cast<std::chrono::milliseconds>(slowest).count();
  std::printf(
      "[ MEMORY   ] 32 MiB value: RSS empty %s, stored %s, peak while 2 slow readers read %s; "
      "reads took %.2f s and %.2f s; %zu set+get meanwhile, slowest %lld ms\n",
      mib(base).c_str(), mib(stored).c_str(), mib(peak).c_str(), results[0].seconds,
      results[1].seconds, ops_while_reading, static_cast<long long>(slowest_ms));
  for (int i = 0; i < kReaders; ++i) {
    SCOPED_TRACE("reader " + std::to_string(i));
    EXPECT_EQ(results[i].error, "");
    EXPECT_EQ(results[i].value_bytes, kSize);
    EXPECT_EQ(results[i].checksum, checksum);
  }
  EXPECT_GE(ops_while_reading, 10u) << "the readers were not slow enough to test anything";
  EXPECT_LT(slowest_ms, latency_bound_ms(500)) << "a set+get waited on the slow readers";
  EXPECT_LT(peak, base + rss_bound(2 * kSize))
      << "RSS peak " << mib(peak) << ", empty " << mib(base);
}

}  // namespace
