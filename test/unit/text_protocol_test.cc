// Unit tests of protocol::TextProtocol: bytes in, replies out, against a real
// Store and CommandCore. Expected replies are memcached 1.6.18's, checked
// against the real server where the protocol documentation is unclear.
#include "lockcached/protocol/text_protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockcached/core/command_core.h"
#include "lockcached/core/size_class_stats.h"
#include "lockcached/core/stats.h"
#include "lockcached/protocol/output_queue.h"
#include "lockcached/protocol/read_ahead.h"
#include "lockcached/protocol/text_parser.h"
#include "lockcached/store/clock.h"
#include "lockcached/store/store.h"
#include "lockcached/version.h"
#include "text_connection.h"

namespace lockcached::protocol {
namespace {

using store::StoreConfig;

constexpr store::OwnerId kConnectionId = 1;
constexpr store::OwnerId kOtherConnectionId = 2;

// What `stats` reports: a few entries derived from the store, so the test
// can check the formatting without a whole server behind it.
class FakeStatsSource : public core::StatsSource {
 public:
  explicit FakeStatsSource(const store::Store& store) : store_(store) {}

  void collect(core::StatsGroup group, core::StatList& out) const override {
    if (group == core::StatsGroup::kGeneral) {
      out.emplace_back("pid", "4242");
      out.emplace_back("curr_items", std::to_string(store_.stats().curr_items));
      out.emplace_back("resets", std::to_string(resets_));
    } else if (group == core::StatsGroup::kItems || group == core::StatsGroup::kSlabs ||
               group == core::StatsGroup::kSizes) {
      core::collect_size_classes(group, store_.class_stats(), out);
    } else {
      out.emplace_back("maxbytes", std::to_string(store_.stats().limit_bytes));
      out.emplace_back("evictions", "on");
    }
  }
  void reset() override { ++resets_; }
  int resets() const { return resets_; }

 private:
  const store::Store& store_;
  int resets_ = 0;
};

using Connection = TextConnection;

// A store, a stats source and one connection: everything a script needs.
struct Server {
  static StoreConfig default_config() {
    StoreConfig config;
    config.memory_limit = size_t{64} << 20;
    config.max_item_size = 4096;
    config.shard_count = 4;
    return config;
  }

  explicit Server(const StoreConfig& config = default_config())
      : store(config, clock), stats_source(store), connection(store, stats_source, kConnectionId) {}

  std::string feed(std::string_view bytes) { return connection.feed(bytes); }

  store::ManualClock clock;
  store::Store store;
  FakeStatsSource stats_source;
  Connection connection;
};

std::string value_reply(std::string_view key, uint32_t flags, std::string_view value) {
  return "VALUE " + std::string(key) + " " + std::to_string(flags) + " " +
         std::to_string(value.size()) + "\r\n" + std::string(value) + "\r\n";
}

std::string value_reply_cas(std::string_view key, uint32_t flags, std::string_view value,
                            uint64_t cas) {
  return "VALUE " + std::string(key) + " " + std::to_string(flags) + " " +
         std::to_string(value.size()) + " " + std::to_string(cas) + "\r\n" + std::string(value) +
         "\r\n";
}

std::string set_command(std::string_view key, std::string_view value, std::string_view extra = "",
                        std::string_view command = "set", uint32_t flags = 0, int exptime = 0) {
  std::string line = std::string(command) + " " + std::string(key) + " " + std::to_string(flags) +
                     " " + std::to_string(exptime) + " " + std::to_string(value.size());
  if (!extra.empty()) line += " " + std::string(extra);
  return line + "\r\n" + std::string(value) + "\r\n";
}

class TextProtocolTest : public ::testing::Test {
 protected:
  std::string feed(std::string_view bytes) { return server_.feed(bytes); }
  bool closed() const { return server_.connection.protocol.wants_close(); }
  uint64_t cas_of(std::string_view key) {
    store::ItemRef item = server_.store.get(key);
    return item ? item->cas : 0;
  }
  std::string get(std::string_view key) { return feed("get " + std::string(key) + "\r\n"); }

  Server server_;
};

const std::string kBadFormat = "CLIENT_ERROR bad command line format\r\n";
const std::string kBadExptime = "CLIENT_ERROR invalid exptime argument\r\n";
const std::string kBadDelta = "CLIENT_ERROR invalid numeric delta argument\r\n";
const std::string kNonNumeric = "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
const std::string kDeleteUsage =
    "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";
const std::string kTooLarge = "SERVER_ERROR object too large for cache\r\n";

// ---------------------------------------------------------------- retrieval

TEST_F(TextProtocolTest, GetHitAndMiss) {
  EXPECT_EQ(feed("get k\r\n"), "END\r\n");
  EXPECT_EQ(feed(set_command("k", "hello", "", "set", 5)), "STORED\r\n");
  EXPECT_EQ(feed("get k\r\n"), value_reply("k", 5, "hello") + "END\r\n");
}

TEST_F(TextProtocolTest, GetsAddsTheCas) {
  ASSERT_EQ(feed(set_command("k", "v", "", "set", 3)), "STORED\r\n");
  uint64_t cas = cas_of("k");
  ASSERT_NE(cas, 0u);
  EXPECT_EQ(feed("gets k\r\n"), value_reply_cas("k", 3, "v", cas) + "END\r\n");
  EXPECT_EQ(feed("gets missing\r\n"), "END\r\n");
}

TEST_F(TextProtocolTest, BgetIsGet) {
  ASSERT_EQ(feed(set_command("k", "v")), "STORED\r\n");
  EXPECT_EQ(feed("bget k\r\n"), feed("get k\r\n"));
  EXPECT_EQ(feed("bget k nothing\r\n"), value_reply("k", 0, "v") + "END\r\n");
}

TEST_F(TextProtocolTest, MultiGetAnswersHitsInOrder) {
  ASSERT_EQ(feed(set_command("a", "1") + set_command("c", "333")), "STORED\r\nSTORED\r\n");
  EXPECT_EQ(feed("get a b c a\r\n"), value_reply("a", 0, "1") + value_reply("c", 0, "333") +
                                         value_reply("a", 0, "1") + "END\r\n");
  // Extra spaces between and around keys, and before the command.
  EXPECT_EQ(feed("  get  a   c \r\n"),
            value_reply("a", 0, "1") + value_reply("c", 0, "333") + "END\r\n");
}

TEST_F(TextProtocolTest, MultiGetBeyondTheWordLimit) {
  std::string line = "get";
  std::string expected;
  for (int i = 0; i < 100; ++i) {
    std::string key = "key" + std::to_string(i);
    line += " " + key;
    if (i % 3 == 0) {
      ASSERT_EQ(feed(set_command(key, std::to_string(i))), "STORED\r\n");
      expected += value_reply(key, 0, std::to_string(i));
    }
  }
  EXPECT_EQ(feed(line + "\r\n"), expected + "END\r\n");
}

// Up to kKeysNoted keys are answered from the keys noted while checked, in
// one call to the store; one more takes the walk over the line.
TEST_F(TextProtocolTest, MultiGetOnEitherSideOfTheNotedKeys) {
  for (size_t count : {kKeysNoted, kKeysNoted + 1}) {
    std::string line = "gets";
    std::string expected;
    for (size_t i = 0; i < count; ++i) {
      std::string key = "n" + std::to_string(count) + "-" + std::to_string(i);
      line += " " + key;
      if (i % 2 == 1) {
        ASSERT_EQ(feed(set_command(key, std::to_string(i))), "STORED\r\n");
        expected += value_reply_cas(key, 0, std::to_string(i), cas_of(key));
      }
    }
    EXPECT_EQ(feed(line + "\r\n"), expected + "END\r\n") << count << " keys";
  }
}

TEST_F(TextProtocolTest, LargeValuesAreSentWhole) {
  std::string value(3000, 'x');
  for (size_t i = 0; i < value.size(); ++i)
    value[i] = static_cast<char>('a' + i % 26);
  ASSERT_EQ(feed(set_command("big", value)), "STORED\r\n");
  EXPECT_EQ(feed("get big big\r\n"),
            value_reply("big", 0, value) + value_reply("big", 0, value) + "END\r\n");
}

TEST_F(TextProtocolTest, ValueMayContainCrLf) {
  std::string value = "line1\r\nline2\r\n";
  ASSERT_EQ(feed(set_command("k", value)), "STORED\r\n");
  EXPECT_EQ(feed("get k\r\n"), value_reply("k", 0, value) + "END\r\n");
}

TEST_F(TextProtocolTest, EmptyValue) {
  EXPECT_EQ(feed("set k 0 0 0\r\n\r\n"), "STORED\r\n");
  EXPECT_EQ(feed("get k\r\n"), "VALUE k 0 0\r\n\r\nEND\r\n");
}

TEST_F(TextProtocolTest, RetrievalWithoutKeysIsAnError) {
  EXPECT_EQ(feed("get\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("gets\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("bget\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("gat\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("gats\r\n"), "ERROR\r\n");
  // memcached 1.6.18: an exptime and no keys is an empty answer.
  EXPECT_EQ(feed("gat 10\r\n"), "END\r\n");
  EXPECT_EQ(feed("gats 10\r\n"), "END\r\n");
}

TEST_F(TextProtocolTest, GetHasNoNoreply) {
  ASSERT_EQ(feed(set_command("noreply", "v")), "STORED\r\n");
  // "noreply" is just another key to get.
  EXPECT_EQ(feed("get noreply\r\n"), value_reply("noreply", 0, "v") + "END\r\n");
  EXPECT_EQ(feed("get missing noreply\r\n"), value_reply("noreply", 0, "v") + "END\r\n");
}

TEST_F(TextProtocolTest, GatTouchesAndReturns) {
  ASSERT_EQ(feed(set_command("k", "v", "", "set", 9, 10)), "STORED\r\n");
  EXPECT_EQ(feed("gat 100 k missing\r\n"), value_reply("k", 9, "v") + "END\r\n");
  server_.clock.advance(99);
  EXPECT_EQ(get("k"), value_reply("k", 9, "v") + "END\r\n");
  server_.clock.advance(1);
  EXPECT_EQ(get("k"), "END\r\n");
}

TEST_F(TextProtocolTest, GatsReturnsTheUnchangedCas) {
  ASSERT_EQ(feed(set_command("k", "v", "", "set", 0, 10)), "STORED\r\n");
  uint64_t cas = cas_of("k");
  EXPECT_EQ(feed("gats 0 k\r\n"), value_reply_cas("k", 0, "v", cas) + "END\r\n");
  // exptime 0: never expires now.
  server_.clock.advance(1000);
  EXPECT_EQ(feed("gets k\r\n"), value_reply_cas("k", 0, "v", cas) + "END\r\n");
}

TEST_F(TextProtocolTest, GatWithNegativeExptimeExpiresTheItem) {
  ASSERT_EQ(feed(set_command("k", "v")), "STORED\r\n");
  // memcached 1.6.18 returns the item once, then it is gone.
  EXPECT_EQ(feed("gat -1 k\r\n"), value_reply("k", 0, "v") + "END\r\n");
  EXPECT_EQ(get("k"), "END\r\n");
}

TEST_F(TextProtocolTest, GatWithBadExptime) {
  ASSERT_EQ(feed(set_command("k", "v")), "STORED\r\n");
  EXPECT_EQ(feed("gat abc k\r\n"), kBadExptime);
  EXPECT_EQ(feed("gats 1x k\r\n"), kBadExptime);
}

// ------------------------------------------------------------------- keys

TEST_F(TextProtocolTest, KeyOf250BytesWorksEverywhere) {
  std::string key(store::kMaxKeyLength, 'k');
  EXPECT_EQ(feed(set_command(key, "1")), "STORED\r\n");
  EXPECT_EQ(get(key), value_reply(key, 0, "1") + "END\r\n");
  EXPECT_EQ(feed("gets " + key + "\r\n"), value_reply_cas(key, 0, "1", cas_of(key)) + "END\r\n");
  EXPECT_EQ(feed("gat 0 " + key + "\r\n"), value_reply(key, 0, "1") + "END\r\n");
  EXPECT_EQ(feed("incr " + key + " 1\r\n"), "2\r\n");
  EXPECT_EQ(feed("touch " + key + " 0\r\n"), "TOUCHED\r\n");
  EXPECT_EQ(feed("delete " + key + "\r\n"), "DELETED\r\n");
}

TEST_F(TextProtocolTest, KeyOf251BytesIsRefusedEverywhere) {
  std::string key(store::kMaxKeyLength + 1, 'k');
  // memcached 1.6.18 does not swallow the data: it becomes a command line.
  EXPECT_EQ(feed(set_command(key, "x")), kBadFormat + "ERROR\r\n");
  EXPECT_EQ(feed(set_command(key, "x", "", "add")), kBadFormat + "ERROR\r\n");
  EXPECT_EQ(feed("cas " + key + " 0 0 1 1\r\nx\r\n"), kBadFormat + "ERROR\r\n");
  EXPECT_EQ(feed("get " + key + "\r\n"), kBadFormat);
  EXPECT_EQ(feed("gets " + key + "\r\n"), kBadFormat);
  EXPECT_EQ(feed("gat 10 " + key + "\r\n"), kBadFormat);
  EXPECT_EQ(feed("delete " + key + "\r\n"), kBadFormat);
  EXPECT_EQ(feed("delete " + key + " 0\r\n"), kBadFormat);
  EXPECT_EQ(feed("incr " + key + " 1\r\n"), kBadFormat);
  EXPECT_EQ(feed("decr " + key + " 1\r\n"), kBadFormat);
  EXPECT_EQ(feed("touch " + key + " 1\r\n"), kBadFormat);
  EXPECT_EQ(server_.store.stats().curr_items, 0u);
}

TEST_F(TextProtocolTest, OneBadKeyInAMultiGetAnswersOnlyTheError) {
  ASSERT_EQ(feed(set_command("a", "1")), "STORED\r\n");
  std::string long_key(store::kMaxKeyLength + 1, 'k');
  EXPECT_EQ(feed("get a " + long_key + " a\r\n"), kBadFormat);
  EXPECT_EQ(feed("get a " + long_key + "\r\n"), kBadFormat);
}

// protocol.txt says keys must not include control characters, but memcached
// 1.6.18 takes them and clients send them (memcaslap): so does lockcached.
TEST_F(TextProtocolTest, ControlCharactersInKeysAreTakenAsMemcachedTakesThem) {
  for (std::string key : {std::string("a\x01") + "b", std::string("a\tb"), std::string("a\x7f"),
                          std::string("\x1f") + "x", std::string("a\rb")}) {
    SCOPED_TRACE(testing::PrintToString(key));
    EXPECT_EQ(feed(set_command(key, "7")), "STORED\r\n");
    EXPECT_EQ(get(key), value_reply(key, 0, "7") + "END\r\n");
    EXPECT_EQ(feed("incr " + key + " 1\r\n"), "8\r\n");
    EXPECT_EQ(feed("touch " + key + " 1\r\n"), "TOUCHED\r\n");
    EXPECT_EQ(feed("delete " + key + "\r\n"), "DELETED\r\n");
  }
  EXPECT_EQ(server_.store.stats().curr_items, 0u);
  std::string utf8 = "caf\xc3\xa9";
  EXPECT_EQ(feed(set_command(utf8, "x")), "STORED\r\n");
  EXPECT_EQ(get(utf8), value_reply(utf8, 0, "x") + "END\r\n");
}

// ---------------------------------------------------------------- storage

TEST_F(TextProtocolTest, SetStoresFlagsAndOverwrites) {
  EXPECT_EQ(feed(set_command("k", "one", "", "set", 4294967295u)), "STORED\r\n");
  EXPECT_EQ(get("k"), value_reply("k", 4294967295u, "one") + "END\r\n");
  EXPECT_EQ(feed(set_command("k", "two")), "STORED\r\n");
  EXPECT_EQ(get("k"), value_reply("k", 0, "two") + "END\r\n");
}

TEST_F(TextProtocolTest, NumbersMayHaveAPlusSign) {
  // memcached 1.6.18: "set a +3 0 +1" stores flags 3.
  EXPECT_EQ(feed("set k +3 +0 +1\r\nx\r\n"), "STORED\r\n");
  EXPECT_EQ(get("k"), value_reply("k", 3, "x") + "END\r\n");
}

TEST_F(TextProtocolTest, Add) {
  EXPECT_EQ(feed(set_command("k", "1", "", "add")), "STORED\r\n");
  EXPECT_EQ(feed(set_command("k", "2", "", "add")), "NOT_STORED\r\n");
  EXPECT_EQ(get("k"), value_reply("k", 0, "1") + "END\r\n");
}

TEST_F(TextProtocolTest, Replace) {
  EXPECT_EQ(feed(set_command("k", "1", "", "replace")), "NOT_STORED\r\n");
  EXPECT_EQ(get("k"), "END\r\n");
  ASSERT_EQ(feed(set_command("k", "1")), "STORED\r\n");
  EXPECT_EQ(feed(set_command("k", "2", "", "replace", 6)), "STORED\r\n");
  EXPECT_EQ(get("k"), value_reply("k", 6, "2") + "END\r\n");
}

TEST_F(TextProtocolTest, AppendAndPrepend) {
  EXPECT_EQ(feed(set_command("k", "x", "", "append")), "NOT_STORED\r\n");
  EXPECT_EQ(feed(set_command("k", "x", "", "prepend")), "NOT_STORED\r\n");
  ASSERT_EQ(feed(set_command("k", "x", "", "set", 7)), "STORED\r\n");
  EXPECT_EQ(feed(set_command("k", "yz", "", "append", 9)), "STORED\r\n");
  EXPECT_EQ(feed(set_command("k", "w", "", "prepend", 9)), "STORED\r\n");
  // memcached: the old flags stay.
  EXPECT_EQ(get("k"), value_reply("k", 7, "wxyz") + "END\r\n");
}

TEST_F(TextProtocolTest, Cas) {
  EXPECT_EQ(feed("cas k 0 0 1 1\r\nx\r\n"), "NOT_FOUND\r\n");
  ASSERT_EQ(feed(set_command("k", "old")), "STORED\r\n");
  uint64_t cas = cas_of("k");
  std::string wrong = std::to_string(cas + 1);
  EXPECT_EQ(feed("cas k 0 0 3 " + wrong + "\r\nnew\r\n"), "EXISTS\r\n");
  EXPECT_EQ(feed("cas k 0 0 3 0\r\nnew\r\n"), "EXISTS\r\n");
  EXPECT_EQ(get("k"), value_reply("k", 0, "old") + "END\r\n");
  EXPECT_EQ(feed("cas k 5 0 3 " + std::to_string(cas) + "\r\nnew\r\n"), "STORED\r\n");
  EXPECT_EQ(get("k"), value_reply("k", 5, "new") + "END\r\n");
  EXPECT_EQ(feed("cas k 5 0 3 " + std::to_string(cas) + "\r\nnew\r\n"), "EXISTS\r\n");
}

TEST_F(TextProtocolTest, StorageCommandWordCount) {
  EXPECT_EQ(feed("set k 0 0\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("set k 0 0 1 2 3\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("set k 0 0 1 noreply x\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("cas k 0 0 1\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("cas k 0 0 1 1 noreply x\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("add\r\n"), "ERROR\r\n");
  // memcached: a sixth word that is not "noreply" is ignored.
  EXPECT_EQ(feed("set k 0 0 2 garbage\r\nzz\r\n"), "STORED\r\n");
  EXPECT_EQ(get("k"), value_reply("k", 0, "zz") + "END\r\n");
}

TEST_F(TextProtocolTest, StorageCommandBadNumbers) {
  // memcached 1.6.18 answers the error and reads the data as a command.
  EXPECT_EQ(feed("set k x 0 1\r\nz\r\n"), kBadFormat + "ERROR\r\n");
  EXPECT_EQ(feed("set k -1 0 1\r\nz\r\n"), kBadFormat + "ERROR\r\n");
  EXPECT_EQ(feed("set k 0 x 1\r\nz\r\n"), kBadFormat + "ERROR\r\n");
  EXPECT_EQ(feed("set k 0 0 x\r\n"), kBadFormat);
  EXPECT_EQ(feed("set k 0 0 -1\r\n"), kBadFormat);
  EXPECT_EQ(feed("set k 0 0 1x\r\n"), kBadFormat);
  EXPECT_EQ(feed("cas k 0 0 1 x\r\nz\r\n"), kBadFormat + "ERROR\r\n");
  EXPECT_EQ(feed("cas k 0 0 1 -1\r\nz\r\n"), kBadFormat + "ERROR\r\n");
  EXPECT_EQ(get("k"), "END\r\n");
  EXPECT_EQ(feed("version\r\n"), "VERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
}

// memcached 1.6.18 refuses a length above INT_MAX - 2 as a bad command line
// (it adds 2 for the CRLF) and does not swallow anything:
//   "set a 0 0 2147483647\r\nget a\r\n" -> "CLIENT_ERROR bad command line format\r\nEND\r\n"
TEST(TextProtocolLengthTest, LengthNearIntMaxIsABadCommandLine) {
  for (std::string length : {"2147483647", "2147483646"}) {
    SCOPED_TRACE(length);
    Server server;
    EXPECT_EQ(server.feed("set k 0 0 " + length + "\r\nget k\r\n"), kBadFormat + "END\r\n");
    EXPECT_FALSE(server.connection.protocol.wants_close());
  }
}

TEST_F(TextProtocolTest, BadDataChunk) {
  ASSERT_EQ(feed(set_command("k", "zz")), "STORED\r\n");
  // Three bytes where one and CRLF were announced; the CRLF left over is an
  // empty command line.
  EXPECT_EQ(feed("set k 0 0 1\r\nxyz\r\n"), "CLIENT_ERROR bad data chunk\r\nERROR\r\n");
  EXPECT_EQ(get("k"), value_reply("k", 0, "zz") + "END\r\n");
  // A bare LF does not end the data: "x\ng" is the block, "et k" a command.
  EXPECT_EQ(feed("set k 0 0 1\r\nx\nget k\r\n"), "CLIENT_ERROR bad data chunk\r\nERROR\r\n");
  EXPECT_EQ(feed("set k 0 0 3\r\nabcde\r\n"), "CLIENT_ERROR bad data chunk\r\nERROR\r\n");
  EXPECT_EQ(get("k"), value_reply("k", 0, "zz") + "END\r\n");
}

TEST_F(TextProtocolTest, ObjectTooLargeIsSwallowed) {
  size_t too_big = server_.store.max_item_size() + 1;
  std::string value(too_big, 'v');
  // The value contains what would be a command if it were not swallowed.
  value.replace(10, 9, "\r\nquit\r\n\n");
  EXPECT_EQ(feed(set_command("big", value) + "get big\r\nversion\r\n"),
            kTooLarge + "END\r\nVERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
  EXPECT_FALSE(closed());
  // The largest value allowed is stored.
  std::string largest(server_.store.max_item_size(), 'w');
  EXPECT_EQ(feed(set_command("big", largest)), "STORED\r\n");
  EXPECT_EQ(get("big"), value_reply("big", 0, largest) + "END\r\n");
}

TEST_F(TextProtocolTest, ObjectTooLargeArrivingInPieces) {
  std::string value(server_.store.max_item_size() * 3, 'v');
  std::string bytes = set_command("big", value) + "version\r\n";
  std::string replies;
  for (size_t i = 0; i < bytes.size(); i += 100)
    replies += feed(bytes.substr(i, 100));
  EXPECT_EQ(replies, kTooLarge + "VERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
}

// memcached 1.6.18: a set too large to store removes the old value (clients
// would read stale data); add, replace, append and cas leave it.
TEST_F(TextProtocolTest, FailedSetDropsTheStaleValue) {
  std::string too_big(server_.store.max_item_size() + 1, 'v');
  for (std::string command : {"add", "replace", "append", "prepend"}) {
    SCOPED_TRACE(command);
    ASSERT_EQ(feed(set_command("k", "old")), "STORED\r\n");
    EXPECT_EQ(feed(set_command("k", too_big, "", command)), kTooLarge);
    EXPECT_EQ(get("k"), value_reply("k", 0, "old") + "END\r\n");
  }
  EXPECT_EQ(feed("cas k 0 0 " + std::to_string(too_big.size()) + " " + std::to_string(cas_of("k")) +
                 "\r\n" + too_big + "\r\n"),
            kTooLarge);
  EXPECT_EQ(get("k"), value_reply("k", 0, "old") + "END\r\n");
  EXPECT_EQ(feed(set_command("k", too_big)), kTooLarge);
  EXPECT_EQ(get("k"), "END\r\n");
}

// A store too small for the value: the store refuses it at link time.
TEST(TextProtocolMemoryTest, OutOfMemoryStoringObject) {
  StoreConfig config;
  config.memory_limit = 1024;
  config.max_item_size = 4096;
  config.shard_count = 1;
  Server server(config);
  EXPECT_EQ(server.feed(set_command("k", "small")), "STORED\r\n");
  std::string value(2000, 'v');
  EXPECT_EQ(server.feed(set_command("other", value)),
            "SERVER_ERROR out of memory storing object\r\n");
  EXPECT_EQ(server.feed("get other\r\n"), "END\r\n");
  EXPECT_EQ(server.feed(set_command("other", value, "noreply")), "");
  EXPECT_EQ(server.feed("version\r\n"), "VERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
}

// memcached answers an incr/decr that cannot allocate its result with
// "SERVER_ERROR out of memory".
TEST(TextProtocolMemoryTest, IncrOutOfMemory) {
  StoreConfig config;
  config.max_item_size = 4096;
  config.shard_count = 1;
  // Room for exactly one item with key "n" and a 2-byte value.
  config.memory_limit = store::Item::kHeaderSize + 1 + 2 + 2;
  Server server(config);
  ASSERT_EQ(server.feed(set_command("n", "99")), "STORED\r\n");
  EXPECT_EQ(server.feed("decr n 1\r\n"), "98\r\n");  // same length: fits
  // "100" needs one byte more than there is.
  EXPECT_EQ(server.feed("incr n 2\r\n"), "SERVER_ERROR out of memory\r\n");
  EXPECT_EQ(server.feed("incr n 2 noreply\r\n"), "");
  EXPECT_EQ(server.feed("get n\r\n"), value_reply("n", 0, "98") + "END\r\n");
}

// command_core.h: "A set that cannot be stored (too large, no memory) must
// not leave the old value behind: clients would read stale data (memcached
// does the same)."
TEST(TextProtocolMemoryTest, SetOutOfMemoryDropsTheStaleValue) {
  StoreConfig config;
  config.memory_limit = 1024;
  config.max_item_size = 4096;
  config.shard_count = 1;
  Server server(config);
  ASSERT_EQ(server.feed(set_command("k", "small")), "STORED\r\n");
  EXPECT_EQ(server.feed(set_command("k", std::string(2000, 'v'))),
            "SERVER_ERROR out of memory storing object\r\n");
  EXPECT_EQ(server.feed("get k\r\n"), "END\r\n");
}

// ------------------------------------------------------------------ delete

TEST_F(TextProtocolTest, Delete) {
  EXPECT_EQ(feed("delete k\r\n"), "NOT_FOUND\r\n");
  ASSERT_EQ(feed(set_command("k", "v")), "STORED\r\n");
  EXPECT_EQ(feed("delete k\r\n"), "DELETED\r\n");
  EXPECT_EQ(get("k"), "END\r\n");
  EXPECT_EQ(feed("delete k\r\n"), "NOT_FOUND\r\n");
}

TEST_F(TextProtocolTest, DeleteWithZeroHoldTime) {
  ASSERT_EQ(feed(set_command("k", "v")), "STORED\r\n");
  EXPECT_EQ(feed("delete k 0\r\n"), "DELETED\r\n");
  EXPECT_EQ(get("k"), "END\r\n");
  ASSERT_EQ(feed(set_command("k", "v")), "STORED\r\n");
  EXPECT_EQ(feed("delete k 0 noreply\r\n"), "");
  EXPECT_EQ(get("k"), "END\r\n");
}

TEST_F(TextProtocolTest, DeleteUsageError) {
  ASSERT_EQ(feed(set_command("k", "v")), "STORED\r\n");
  EXPECT_EQ(feed("delete k 1\r\n"), kDeleteUsage);
  EXPECT_EQ(feed("delete k b\r\n"), kDeleteUsage);
  EXPECT_EQ(feed("delete k 0 x\r\n"), kDeleteUsage);
  // "noreply" counts only as the last word.
  EXPECT_EQ(feed("delete k noreply x\r\n"), kDeleteUsage);
  EXPECT_EQ(get("k"), value_reply("k", 0, "v") + "END\r\n");
  EXPECT_EQ(feed("delete\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("delete k 0 noreply x\r\n"), "ERROR\r\n");
  EXPECT_EQ(get("k"), value_reply("k", 0, "v") + "END\r\n");
}

// -------------------------------------------------------------- incr/decr

TEST_F(TextProtocolTest, IncrAndDecr) {
  EXPECT_EQ(feed("incr n 1\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(feed("decr n 1\r\n"), "NOT_FOUND\r\n");
  ASSERT_EQ(feed(set_command("n", "10", "", "set", 3)), "STORED\r\n");
  EXPECT_EQ(feed("incr n 5\r\n"), "15\r\n");
  EXPECT_EQ(feed("decr n 6\r\n"), "9\r\n");
  // memcached pads a shorter number with spaces to the old length.
  EXPECT_EQ(get("n"), value_reply("n", 3, "9 ") + "END\r\n");
  EXPECT_EQ(feed("incr n +91\r\n"), "100\r\n");
  EXPECT_EQ(get("n"), value_reply("n", 3, "100") + "END\r\n");
  EXPECT_EQ(feed("decr n 1000\r\n"), "0\r\n");
  EXPECT_EQ(get("n"), value_reply("n", 3, "0  ") + "END\r\n");
}

TEST_F(TextProtocolTest, IncrWrapsAt2To64) {
  ASSERT_EQ(feed(set_command("n", "18446744073709551615")), "STORED\r\n");
  EXPECT_EQ(feed("incr n 2\r\n"), "1\r\n");
  EXPECT_EQ(feed("incr n 18446744073709551615\r\n"), "0\r\n");
}

TEST_F(TextProtocolTest, IncrBadDelta) {
  ASSERT_EQ(feed(set_command("n", "10")), "STORED\r\n");
  EXPECT_EQ(feed("incr n x\r\n"), kBadDelta);
  EXPECT_EQ(feed("incr n -1\r\n"), kBadDelta);
  EXPECT_EQ(feed("decr n 1x\r\n"), kBadDelta);
  EXPECT_EQ(feed("incr n 18446744073709551616\r\n"), kBadDelta);
  EXPECT_EQ(feed("incr missing x\r\n"), kBadDelta);
  EXPECT_EQ(get("n"), value_reply("n", 0, "10") + "END\r\n");
}

TEST_F(TextProtocolTest, IncrNonNumeric) {
  for (std::string value : {"ab", "", "-5", "18446744073709551616", "1x"}) {
    SCOPED_TRACE(value);
    ASSERT_EQ(feed(set_command("t", value)), "STORED\r\n");
    EXPECT_EQ(feed("incr t 1\r\n"), kNonNumeric);
    EXPECT_EQ(feed("decr t 1\r\n"), kNonNumeric);
  }
}

TEST_F(TextProtocolTest, IncrWordCount) {
  EXPECT_EQ(feed("incr n\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("decr\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("incr n 1 2 3\r\n"), "ERROR\r\n");
  // memcached: a fourth word that is not "noreply" is ignored.
  EXPECT_EQ(feed("incr n 1 x\r\n"), "NOT_FOUND\r\n");
}

// memcached 1.6.18 reads the number with strtoull and accepts whatever
// follows whitespace: "12 abc" incr 1 -> "13", stored as "13    ".
TEST_F(TextProtocolTest, IncrIgnoresTextAfterWhitespaceLikeMemcached) {
  ASSERT_EQ(feed(set_command("n", "12 abc")), "STORED\r\n");
  EXPECT_EQ(feed("incr n 1\r\n"), "13\r\n");
  EXPECT_EQ(get("n"), value_reply("n", 0, "13    ") + "END\r\n");
}

// ------------------------------------------------------------------- touch

TEST_F(TextProtocolTest, Touch) {
  EXPECT_EQ(feed("touch k 10\r\n"), "NOT_FOUND\r\n");
  ASSERT_EQ(feed(set_command("k", "v", "", "set", 0, 5)), "STORED\r\n");
  EXPECT_EQ(feed("touch k 100\r\n"), "TOUCHED\r\n");
  server_.clock.advance(99);
  EXPECT_EQ(get("k"), value_reply("k", 0, "v") + "END\r\n");
  server_.clock.advance(1);
  EXPECT_EQ(get("k"), "END\r\n");
}

TEST_F(TextProtocolTest, TouchWithNegativeExptimeExpires) {
  ASSERT_EQ(feed(set_command("k", "v")), "STORED\r\n");
  EXPECT_EQ(feed("touch k -1\r\n"), "TOUCHED\r\n");
  EXPECT_EQ(get("k"), "END\r\n");
}

TEST_F(TextProtocolTest, TouchErrors) {
  EXPECT_EQ(feed("touch k\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("touch k 1 2 3\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("touch k x\r\n"), kBadExptime);
  EXPECT_EQ(feed("touch k 10 x\r\n"), "NOT_FOUND\r\n");
}

// --------------------------------------------------------------- flush_all

TEST_F(TextProtocolTest, FlushAll) {
  ASSERT_EQ(feed(set_command("a", "1") + set_command("b", "2")), "STORED\r\nSTORED\r\n");
  EXPECT_EQ(feed("flush_all\r\n"), "OK\r\n");
  EXPECT_EQ(feed("get a b\r\n"), "END\r\n");
  ASSERT_EQ(feed(set_command("a", "3")), "STORED\r\n");
  EXPECT_EQ(get("a"), value_reply("a", 0, "3") + "END\r\n");
  EXPECT_EQ(feed("flush_all 0\r\n"), "OK\r\n");
  EXPECT_EQ(get("a"), "END\r\n");
  ASSERT_EQ(feed(set_command("a", "4")), "STORED\r\n");
  EXPECT_EQ(feed("flush_all -1\r\n"), "OK\r\n");
  EXPECT_EQ(get("a"), "END\r\n");
}

TEST_F(TextProtocolTest, FlushAllWithDelay) {
  ASSERT_EQ(feed(set_command("a", "1")), "STORED\r\n");
  EXPECT_EQ(feed("flush_all 10\r\n"), "OK\r\n");
  server_.clock.advance(9);
  EXPECT_EQ(get("a"), value_reply("a", 0, "1") + "END\r\n");
  server_.clock.advance(2);
  EXPECT_EQ(get("a"), "END\r\n");
  ASSERT_EQ(feed(set_command("a", "2")), "STORED\r\n");
  EXPECT_EQ(get("a"), value_reply("a", 0, "2") + "END\r\n");
}

TEST_F(TextProtocolTest, FlushAllArguments) {
  EXPECT_EQ(feed("flush_all x\r\n"), kBadExptime);
  EXPECT_EQ(feed("flush_all x y\r\n"), kBadExptime);
  EXPECT_EQ(feed("flush_all 1 2 3\r\n"), "ERROR\r\n");
  ASSERT_EQ(feed(set_command("a", "1")), "STORED\r\n");
  // memcached: a second word that is not "noreply" is ignored.
  EXPECT_EQ(feed("flush_all 0 x\r\n"), "OK\r\n");
  EXPECT_EQ(get("a"), "END\r\n");
}

// ------------------------------------------------------------------- stats

TEST_F(TextProtocolTest, Stats) {
  ASSERT_EQ(feed(set_command("a", "1")), "STORED\r\n");
  core::StatList list;
  server_.stats_source.collect(core::StatsGroup::kGeneral, list);
  std::string expected;
  for (const auto& [name, value] : list)
    expected += "STAT " + name + " " + value + "\r\n";
  EXPECT_EQ(feed("stats\r\n"), expected + "END\r\n");
  EXPECT_NE(expected.find("STAT curr_items 1\r\n"), std::string::npos);
}

TEST_F(TextProtocolTest, StatsSettings) {
  core::StatList list;
  server_.stats_source.collect(core::StatsGroup::kSettings, list);
  std::string expected;
  for (const auto& [name, value] : list)
    expected += "STAT " + name + " " + value + "\r\n";
  EXPECT_EQ(feed("stats settings\r\n"), expected + "END\r\n");
}

TEST_F(TextProtocolTest, StatsReset) {
  EXPECT_EQ(feed("stats reset\r\n"), "RESET\r\n");
  EXPECT_EQ(server_.stats_source.resets(), 1);
  EXPECT_EQ(feed("stats reset\r\n"), "RESET\r\n");
  EXPECT_EQ(server_.stats_source.resets(), 2);
}

TEST_F(TextProtocolTest, StatsUnknownGroup) {
  EXPECT_EQ(feed("stats foo\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("stats noreply\r\n"), "ERROR\r\n");
  // memcached 1.6.18 with an empty cache.
  EXPECT_EQ(feed("stats items\r\n"), "END\r\n");
  EXPECT_EQ(feed("stats slabs\r\n"), "STAT active_slabs 0\r\nSTAT total_malloced 0\r\nEND\r\n");
}

TEST_F(TextProtocolTest, CommandsFeedTheThreadCounters) {
  const core::ThreadStats& stats = server_.connection.stats;
  feed(set_command("a", "1"));
  feed("get a missing\r\n");
  feed("delete a\r\ndelete a\r\n");
  feed("touch a 1\r\n");
  EXPECT_EQ(stats.cmd_set.load(), 1u);
  EXPECT_EQ(stats.cmd_get.load(), 2u);
  EXPECT_EQ(stats.get_hits.load(), 1u);
  EXPECT_EQ(stats.get_misses.load(), 1u);
  EXPECT_EQ(stats.delete_hits.load(), 1u);
  EXPECT_EQ(stats.delete_misses.load(), 1u);
  EXPECT_EQ(stats.touch_misses.load(), 1u);
}

// ------------------------------------------------------- other commands

TEST_F(TextProtocolTest, Version) {
  std::string reply = feed("version\r\n");
  EXPECT_EQ(reply, "VERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
  // Clients gate features on memcached's version.
  EXPECT_EQ(reply.rfind("VERSION 1.6.18", 0), 0u);
  EXPECT_EQ(feed("version extra\r\n"), reply);
}

TEST_F(TextProtocolTest, Verbosity) {
  EXPECT_EQ(feed("verbosity 1\r\n"), "OK\r\n");
  EXPECT_EQ(feed("verbosity 1 2\r\n"), "OK\r\n");
  EXPECT_EQ(feed("verbosity\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("verbosity 1 2 3\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("verbosity x\r\n"), kBadFormat);
}

TEST_F(TextProtocolTest, CacheMemlimit) {
  EXPECT_EQ(feed("cache_memlimit 64\r\n"), "OK\r\n");
  EXPECT_EQ(server_.store.stats().limit_bytes, size_t{64} << 20);
  EXPECT_EQ(feed("cache_memlimit 100 x\r\n"), "OK\r\n");
  EXPECT_EQ(server_.store.stats().limit_bytes, size_t{100} << 20);
  EXPECT_EQ(feed("cache_memlimit 7\r\n"),
            "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n");
  EXPECT_EQ(server_.store.stats().limit_bytes, size_t{100} << 20);
  EXPECT_EQ(feed("cache_memlimit\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("cache_memlimit x\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("cache_memlimit -1\r\n"), "ERROR\r\n");
  EXPECT_EQ(server_.store.stats().limit_bytes, size_t{100} << 20);
}

TEST_F(TextProtocolTest, Shutdown) {
  EXPECT_EQ(feed("shutdown\r\n"), "ERROR: shutdown not enabled\r\n");
  EXPECT_FALSE(closed());
}

TEST_F(TextProtocolTest, Quit) {
  std::string bytes = "version\r\nquit\r\nversion\r\n";
  Connection& connection = server_.connection;
  size_t consumed = connection.protocol.consume(bytes, connection.out);
  EXPECT_EQ(consumed, bytes.size());
  EXPECT_TRUE(closed());
  // Nothing after quit is executed.
  EXPECT_EQ(connection.out.take_all(), "VERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
}

TEST_F(TextProtocolTest, QuitWithExtraWords) {
  EXPECT_EQ(feed("quit noreply\r\n"), "");
  EXPECT_TRUE(closed());
}

TEST_F(TextProtocolTest, HttpRequestClosesTheConnection) {
  EXPECT_EQ(feed("GET / HTTP/1.1\r\nversion\r\n"), "");
  EXPECT_TRUE(closed());
}

TEST_F(TextProtocolTest, UnknownCommandsAndEmptyLines) {
  EXPECT_EQ(feed("foo\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("GET k\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("g\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("\n"), "ERROR\r\n");
  EXPECT_EQ(feed("   \r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("gets_x k\r\n"), "ERROR\r\n");
  EXPECT_FALSE(closed());
}

TEST_F(TextProtocolTest, BareLineFeedEndsALine) {
  EXPECT_EQ(feed("set k 0 0 1\nx\r\nget k\n"), "STORED\r\n" + value_reply("k", 0, "x") + "END\r\n");
}

TEST_F(TextProtocolTest, LockedItemsRefuseOtherConnections) {
  Connection other(server_.store, server_.stats_source, kOtherConnectionId);
  ASSERT_EQ(feed(set_command("k", "5")), "STORED\r\n");
  ASSERT_EQ(other.feed("lock k\r\n"), "OK\r\n");

  EXPECT_EQ(feed(set_command("k", "x")), "LOCKED\r\n");
  EXPECT_EQ(feed(set_command("k", "x", "", "append")), "LOCKED\r\n");
  EXPECT_EQ(feed("cas k 0 0 1 " + std::to_string(cas_of("k")) + "\r\nx\r\n"), "LOCKED\r\n");
  EXPECT_EQ(feed("delete k\r\n"), "LOCKED\r\n");
  EXPECT_EQ(feed("incr k 1\r\n"), "LOCKED\r\n");
  EXPECT_EQ(feed("decr k 1\r\n"), "LOCKED\r\n");
  EXPECT_EQ(feed(set_command("k", "x", "noreply")), "");
  // Reads are not refused.
  EXPECT_EQ(get("k"), value_reply("k", 0, "5") + "END\r\n");

  EXPECT_EQ(other.feed("incr k 1\r\n"), "6\r\n");
  EXPECT_EQ(other.feed(set_command("k", "7")), "STORED\r\n");
  EXPECT_EQ(other.feed("delete k\r\n"), "DELETED\r\n");
  EXPECT_EQ(feed(set_command("k", "mine")), "STORED\r\n");
}

// ------------------------------------------------------------------ locks

const std::string kNotLocked = "CLIENT_ERROR object is not locked or not found\r\n";

// The walk-through of docs/locking.md.
TEST_F(TextProtocolTest, LockingExampleFromTheDocs) {
  Connection second(server_.store, server_.stats_source, kOtherConnectionId);
  EXPECT_EQ(feed("set account 0 0 3\r\n100\r\n"), "STORED\r\n");
  EXPECT_EQ(feed("lock account\r\n"), "OK\r\n");
  EXPECT_EQ(second.feed("get account\r\n"), value_reply("account", 0, "100") + "END\r\n");
  EXPECT_EQ(second.feed("set account 0 0 1\r\n0\r\n"), "LOCKED\r\n");
  EXPECT_EQ(feed("set account 0 0 2\r\n90\r\n"), "STORED\r\n");
  EXPECT_EQ(feed("unlock account\r\n"), "OK\r\n");
  EXPECT_EQ(second.feed("lock account\r\n"), "OK\r\n");
  EXPECT_EQ(second.feed("get account\r\n"), value_reply("account", 0, "90") + "END\r\n");
}

TEST_F(TextProtocolTest, LockAndUnlock) {
  Connection other(server_.store, server_.stats_source, kOtherConnectionId);
  EXPECT_EQ(feed("lock k\r\n"), "NOT_FOUND\r\n");
  ASSERT_EQ(feed(set_command("k", "v")), "STORED\r\n");
  EXPECT_EQ(feed("unlock k\r\n"), kNotLocked);
  EXPECT_EQ(feed("lock k\r\n"), "OK\r\n");
  EXPECT_EQ(feed("lock k\r\n"), "LOCKED\r\n");  // not re-entrant
  EXPECT_EQ(other.feed("lock k\r\n"), "LOCKED\r\n");
  EXPECT_EQ(other.feed("unlock k\r\n"), kNotLocked);
  EXPECT_EQ(other.feed("unlock missing\r\n"), kNotLocked);
  EXPECT_EQ(feed("unlock k\r\n"), "OK\r\n");
  EXPECT_EQ(feed("unlock k\r\n"), kNotLocked);
  EXPECT_EQ(other.feed("lock k\r\n"), "OK\r\n");
  EXPECT_EQ(server_.store.stats().locked_items, 1u);
}

TEST_F(TextProtocolTest, LockSyntax) {
  std::string long_key(store::kMaxKeyLength + 1, 'k');
  EXPECT_EQ(feed("lock\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("unlock\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("lock a b\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("unlock a b\r\n"), "ERROR\r\n");
  // No noreply for lock and unlock (as yrmcds): it is a second word.
  EXPECT_EQ(feed("lock a noreply\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("unlock a noreply\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("lock " + long_key + "\r\n"), kBadFormat);
  EXPECT_EQ(feed("unlock " + long_key + "\r\n"), kBadFormat);
  // A control character is part of a key, as in every other command.
  EXPECT_EQ(feed("lock a\x01\r\n"), "NOT_FOUND\r\n");
}

TEST_F(TextProtocolTest, UnlockAllReleasesOnlyThisConnectionsLocks) {
  Connection other(server_.store, server_.stats_source, kOtherConnectionId);
  EXPECT_EQ(feed("unlock_all\r\n"), "OK\r\n");
  ASSERT_EQ(feed(set_command("a", "1") + set_command("b", "2") + set_command("c", "3")),
            "STORED\r\nSTORED\r\nSTORED\r\n");
  EXPECT_EQ(feed("lock a\r\nlock b\r\n"), "OK\r\nOK\r\n");
  EXPECT_EQ(other.feed("lock c\r\n"), "OK\r\n");
  EXPECT_EQ(server_.connection.core.held_locks(), 2u);
  EXPECT_EQ(feed("unlock_all\r\n"), "OK\r\n");
  EXPECT_EQ(server_.connection.core.held_locks(), 0u);
  EXPECT_EQ(server_.store.stats().locked_items, 1u);
  EXPECT_EQ(other.feed(set_command("a", "x") + set_command("b", "y")), "STORED\r\nSTORED\r\n");
  EXPECT_EQ(feed(set_command("c", "z")), "LOCKED\r\n");
  EXPECT_EQ(other.feed("unlock_all\r\n"), "OK\r\n");
  EXPECT_EQ(feed(set_command("c", "z")), "STORED\r\n");
  EXPECT_EQ(server_.store.stats().locked_items, 0u);
}

TEST_F(TextProtocolTest, HolderMayModifyAndKeepsTheLock) {
  Connection other(server_.store, server_.stats_source, kOtherConnectionId);
  ASSERT_EQ(feed(set_command("n", "1")), "STORED\r\n");
  ASSERT_EQ(feed("lock n\r\n"), "OK\r\n");
  EXPECT_EQ(feed("incr n 9\r\n"), "10\r\n");
  EXPECT_EQ(feed(set_command("n", "!", "", "append")), "STORED\r\n");
  EXPECT_EQ(feed("touch n 100\r\n"), "TOUCHED\r\n");
  EXPECT_EQ(other.feed("incr n 1\r\n"), "LOCKED\r\n");
  EXPECT_EQ(other.feed(set_command("n", "x", "", "prepend")), "LOCKED\r\n");
  EXPECT_EQ(other.feed(set_command("n", "x", "", "replace")), "LOCKED\r\n");
  EXPECT_EQ(other.feed(set_command("n", "x", "", "add")), "LOCKED\r\n");
  EXPECT_EQ(other.feed("delete n 0\r\n"), "LOCKED\r\n");
  EXPECT_EQ(other.feed("delete n noreply\r\n"), "");
  EXPECT_EQ(other.feed("incr n 1 noreply\r\n"), "");
  EXPECT_EQ(get("n"), value_reply("n", 0, "10!") + "END\r\n");
  // A delete by the holder ends the lock with the object.
  EXPECT_EQ(feed("delete n\r\n"), "DELETED\r\n");
  EXPECT_EQ(server_.connection.core.held_locks(), 0u);
  EXPECT_EQ(other.feed(set_command("n", "2")), "STORED\r\n");
  EXPECT_EQ(other.feed("lock n\r\n"), "OK\r\n");
}

TEST_F(TextProtocolTest, LockedItemSurvivesExpiryAndFlushAll) {
  ASSERT_EQ(feed(set_command("k", "v", "", "set", 0, 10)), "STORED\r\n");
  ASSERT_EQ(feed(set_command("plain", "v")), "STORED\r\n");
  ASSERT_EQ(feed("lock k\r\n"), "OK\r\n");
  EXPECT_EQ(feed("flush_all\r\n"), "OK\r\n");
  server_.clock.advance(100);
  EXPECT_EQ(feed("get k plain\r\n"), value_reply("k", 0, "v") + "END\r\n");
  ASSERT_EQ(feed("unlock k\r\n"), "OK\r\n");
  // Its exptime passed while it was locked: it goes now.
  EXPECT_EQ(get("k"), "END\r\n");
}

TEST_F(TextProtocolTest, LockCounters) {
  Connection other(server_.store, server_.stats_source, kOtherConnectionId);
  ASSERT_EQ(feed(set_command("k", "v")), "STORED\r\n");
  feed("lock k\r\nlock missing\r\n");
  other.feed("lock k\r\n");
  const core::ThreadStats& stats = server_.connection.stats;
  EXPECT_EQ(stats.cmd_lock.load(), 2u);
  EXPECT_EQ(stats.lock_hits.load(), 1u);
  EXPECT_EQ(stats.lock_misses.load(), 1u);
  EXPECT_EQ(other.stats.lock_contended.load(), 1u);
}

// ------------------------------------------------------------------- keys

std::vector<std::string> listed_keys(std::string_view reply) {
  std::vector<std::string> keys;
  while (reply.substr(0, 6) == "VALUE ") {
    size_t end = reply.find("\r\n");
    keys.emplace_back(reply.substr(6, end - 6));
    reply.remove_prefix(end + 2);
  }
  EXPECT_EQ(reply, "END\r\n");
  std::sort(keys.begin(), keys.end());
  return keys;
}

TEST_F(TextProtocolTest, KeysListsLiveKeys) {
  EXPECT_EQ(feed("keys\r\n"), "END\r\n");
  for (std::string key : {"apple", "apricot", "banana", "expiring", "ap"}) {
    ASSERT_EQ(feed(set_command(key, "v", "", "set", 0, key == "expiring" ? 5 : 0)), "STORED\r\n");
  }
  using Keys = std::vector<std::string>;
  EXPECT_EQ(listed_keys(feed("keys\r\n")), (Keys{"ap", "apple", "apricot", "banana", "expiring"}));
  EXPECT_EQ(listed_keys(feed("keys ap\r\n")), (Keys{"ap", "apple", "apricot"}));
  EXPECT_EQ(listed_keys(feed("keys apr\r\n")), (Keys{"apricot"}));
  EXPECT_EQ(listed_keys(feed("keys zzz\r\n")), Keys{});
  server_.clock.advance(5);
  EXPECT_EQ(listed_keys(feed("keys\r\n")), (Keys{"ap", "apple", "apricot", "banana"}));
  ASSERT_EQ(feed("lock banana\r\nflush_all\r\n"), "OK\r\nOK\r\n");
  EXPECT_EQ(listed_keys(feed("keys\r\n")), Keys{"banana"});
}

TEST_F(TextProtocolTest, KeysSyntax) {
  EXPECT_EQ(feed("keys a b\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("keys " + std::string(store::kMaxKeyLength + 1, 'k') + "\r\n"), kBadFormat);
}

TEST_F(TextProtocolTest, KeysOverManyItemsIsAnsweredInStepsBeforeTheNextRequest) {
  std::vector<std::string> expected;
  for (int i = 0; i < 5000; ++i) {
    std::string key = "key-" + std::to_string(i);
    ASSERT_EQ(feed(set_command(key, "v")), "STORED\r\n");
    expected.push_back(key);
  }
  std::sort(expected.begin(), expected.end());
  // The requests behind the walk wait for it.
  Connection& connection = server_.connection;
  std::string bytes = "keys\r\nversion\r\n";
  size_t consumed = connection.protocol.consume(bytes, connection.out);
  EXPECT_EQ(bytes.substr(consumed), "version\r\n");
  EXPECT_TRUE(connection.protocol.has_unfinished_work());
  int steps = 0;
  while (connection.protocol.has_unfinished_work()) {
    connection.protocol.continue_work(connection.out);
    ++steps;
  }
  EXPECT_GT(steps, 1);
  std::string walk = connection.out.take_all();
  EXPECT_EQ(listed_keys(walk), expected);
  EXPECT_EQ(feed(bytes.substr(consumed)), "VERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
}

// ---------------------------------------------- size classes and item dumps
// Item sizes (store/size_classes.h): 30-byte header + key + value + 2.
// "a" with "hello" is 38 bytes (class 1, 48 B); "b" with 200 bytes is 233
// (class 10, 256 B).

TEST_F(TextProtocolTest, StatsSlabsAndSizesReportTheNonEmptyClasses) {
  ASSERT_EQ(feed(set_command("a", "hello")), "STORED\r\n");
  ASSERT_EQ(feed(set_command("b", std::string(200, 'x'))), "STORED\r\n");
  EXPECT_EQ(feed("stats slabs\r\n"),
            "STAT 1:chunk_size 48\r\n"
            "STAT 1:chunks_per_page 21845\r\n"
            "STAT 1:total_pages 1\r\n"
            "STAT 1:total_chunks 1\r\n"
            "STAT 1:used_chunks 1\r\n"
            "STAT 1:free_chunks 0\r\n"
            "STAT 1:free_chunks_end 0\r\n"
            "STAT 10:chunk_size 256\r\n"
            "STAT 10:chunks_per_page 4096\r\n"
            "STAT 10:total_pages 1\r\n"
            "STAT 10:total_chunks 1\r\n"
            "STAT 10:used_chunks 1\r\n"
            "STAT 10:free_chunks 0\r\n"
            "STAT 10:free_chunks_end 0\r\n"
            "STAT active_slabs 2\r\n"
            "STAT total_malloced 304\r\n"
            "END\r\n");
  EXPECT_EQ(feed("stats sizes\r\n"), "STAT 48 1\r\nSTAT 256 1\r\nEND\r\n");
  EXPECT_EQ(feed("stats sizes_enable\r\n"), "STAT sizes_status enabled\r\n");
  ASSERT_EQ(feed("delete a\r\n"), "DELETED\r\n");
  EXPECT_EQ(feed("stats sizes\r\n"), "STAT 256 1\r\nEND\r\n");
}

TEST_F(TextProtocolTest, StatsItemsNamesMemcachedsFieldsInItsOrder) {
  ASSERT_EQ(feed(set_command("a", "hello", "", "set", 0, 100)), "STORED\r\n");
  EXPECT_EQ(feed("stats items\r\n"),
            "STAT items:1:number 1\r\n"
            "STAT items:1:age 0\r\n"
            "STAT items:1:mem_requested 38\r\n"
            "STAT items:1:evicted 0\r\n"
            "STAT items:1:evicted_nonzero 0\r\n"
            "STAT items:1:evicted_time 0\r\n"
            "STAT items:1:outofmemory 0\r\n"
            "STAT items:1:reclaimed 0\r\n"
            "STAT items:1:expired_unfetched 0\r\n"
            "STAT items:1:evicted_unfetched 0\r\n"
            "STAT items:1:crawler_reclaimed 0\r\n"
            "STAT items:1:crawler_items_checked 0\r\n"
            "END\r\n");
  server_.clock.advance(200);
  ASSERT_EQ(get("a"), "END\r\n");  // expired: reclaimed, and the class is empty
  EXPECT_EQ(feed("stats items\r\n"), "END\r\n");
}

TEST_F(TextProtocolTest, CachedumpListsOneClassWithValueBytesAndUnixExptime) {
  int64_t zero = server_.clock.unix_epoch_of_zero();
  store::RelTime now = server_.clock.now();
  ASSERT_EQ(feed(set_command("a", "hello", "", "set", 0, 100)), "STORED\r\n");
  ASSERT_EQ(feed(set_command("c", "hey")), "STORED\r\n");
  ASSERT_EQ(feed(set_command("b", std::string(200, 'x'))), "STORED\r\n");
  ASSERT_EQ(feed("ms Zm9vIGJhcg== 2 b\r\nhi\r\n"), "HD\r\n");  // "foo bar", class 1
  std::string a_line = "ITEM a [5 b; " + std::to_string(zero + now + 100) + " s]\r\n";
  std::string c_line = "ITEM c [3 b; 0 s]\r\n";
  // memcached leaves out keys stored in base64 form.
  std::string dump = feed("stats cachedump 1 0\r\n");
  EXPECT_TRUE(dump == a_line + c_line + "END\r\n" || dump == c_line + a_line + "END\r\n") << dump;
  EXPECT_EQ(feed("stats cachedump 10 0\r\n"), "ITEM b [200 b; 0 s]\r\nEND\r\n");
  std::string one = feed("stats cachedump 1 1\r\n");
  EXPECT_TRUE(one == a_line + "END\r\n" || one == c_line + "END\r\n") << one;
  EXPECT_EQ(feed("stats cachedump 2 0\r\n"), "END\r\n");
  EXPECT_EQ(feed("stats cachedump 0 0\r\n"), "END\r\n");
  EXPECT_EQ(feed("stats cachedump 63 0\r\n"), "END\r\n");
  EXPECT_EQ(feed("stats cachedump 10 0 extra\r\n"), "ITEM b [200 b; 0 s]\r\nEND\r\n");
  // Expired items are never listed.
  server_.clock.advance(200);
  EXPECT_EQ(feed("stats cachedump 1 0\r\n"), c_line + "END\r\n");
}

TEST_F(TextProtocolTest, CachedumpErrorsAreMemcacheds) {
  EXPECT_EQ(feed("stats cachedump 64 0\r\n"), "CLIENT_ERROR Illegal slab id\r\n");
  EXPECT_EQ(feed("stats cachedump -1 0\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(feed("stats cachedump 1 x\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(feed("stats cachedump 1\r\n"), "CLIENT_ERROR bad command line\r\n");
  EXPECT_EQ(feed("stats cachedump\r\n"), "CLIENT_ERROR bad command line\r\n");
}

TEST_F(TextProtocolTest, MetadumpIsMemcachedsLinePerLiveItem) {
  int64_t zero = server_.clock.unix_epoch_of_zero();
  store::RelTime stored = server_.clock.now();
  ASSERT_EQ(feed(set_command("a/b%c", "hello", "", "set", 0, 100)), "STORED\r\n");
  ASSERT_EQ(feed("ms Zm9vIGJhcg== 2 b\r\nhi\r\n"), "HD\r\n");
  server_.clock.advance(3);
  ASSERT_EQ(get("a/b%c"), value_reply("a/b%c", 0, "hello") + "END\r\n");
  uint64_t cas_a = cas_of("a/b%c");
  uint64_t cas_foo = server_.connection.core.peek("foo bar").item->cas;  // no access
  std::string a_line = "key=a%2Fb%25c exp=" + std::to_string(zero + stored + 100) +
                       " la=" + std::to_string(zero + stored + 3) +
                       " cas=" + std::to_string(cas_a) + " fetch=yes cls=1 size=42\n";
  // A base64 key's bytes, %-encoded as memcached does.
  std::string foo_line = "key=foo%20bar exp=-1 la=" + std::to_string(zero + stored) +
                         " cas=" + std::to_string(cas_foo) + " fetch=no cls=1 size=41\n";
  std::string all = feed("lru_crawler metadump all\r\n");
  EXPECT_TRUE(all == a_line + foo_line + "END\r\n" || all == foo_line + a_line + "END\r\n") << all;
  EXPECT_EQ(feed("lru_crawler metadump hash\r\n").size(), all.size());
  EXPECT_EQ(feed("lru_crawler metadump 1\r\n").size(), all.size());
  EXPECT_EQ(feed("lru_crawler metadump 2,3,,63\r\n"), "END\r\n");
  // Flushed items are never listed.
  ASSERT_EQ(feed("flush_all\r\n"), "OK\r\n");
  EXPECT_EQ(feed("lru_crawler metadump all\r\n"), "END\r\n");
}

TEST_F(TextProtocolTest, MetadumpEncodesEveryByteButLettersDigitsAndFour) {
  std::string key = "k!\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~\x7f\x01\xff";
  ASSERT_EQ(feed(set_command(key, "z")), "STORED\r\n");
  std::string dump = feed("lru_crawler metadump all\r\n");
  // What memcached 1.6.18 printed for the same key.
  EXPECT_EQ(dump.substr(0, dump.find(' ')),
            "key=k%21%22%23%24%26%27%28%29%2A%2B%2C-.%2F%3A%3B%3C%3D%3E%3F%40%5B%5C%5D%5E_%60%7B%7C"
            "%7D~%7F%01%FF");
}

TEST_F(TextProtocolTest, LruCrawlerErrorsAreMemcacheds) {
  const std::string kBadClass = "BADCLASS invalid class id\r\n";
  for (std::string ids : {"64", "0", "1,x", "-1"})
    EXPECT_EQ(feed("lru_crawler metadump " + ids + "\r\n"), kBadClass) << ids;
  for (std::string line : {"lru_crawler metadump", "lru_crawler metadump all extra", "lru_crawler",
                           "lru_crawler sleep", "lru_crawler crawl all 1"}) {
    EXPECT_EQ(feed(line + "\r\n"), "ERROR\r\n") << line;
  }
  // memcached's other subcommands; a server without a crawler (this test's)
  // cannot start one.
  EXPECT_EQ(feed("lru_crawler sleep 100\r\nlru_crawler crawl all\r\n"), "OK\r\nOK\r\n");
  EXPECT_EQ(feed("lru_crawler enable\r\n"), "ERROR failed to start lru crawler thread\r\n");
}

TEST_F(TextProtocolTest, LockedItemsAreDumpedLikeAnyOther) {
  ASSERT_EQ(feed(set_command("a", "hello")), "STORED\r\n");
  ASSERT_EQ(feed("lock a\r\nflush_all\r\n"), "OK\r\nOK\r\n");
  EXPECT_EQ(feed("stats cachedump 1 0\r\n"), "ITEM a [5 b; 0 s]\r\nEND\r\n");
  EXPECT_EQ(feed("stats sizes\r\n"), "STAT 48 1\r\nEND\r\n");
}

TEST_F(TextProtocolTest, DumpsOverManyItemsAreAnsweredInStepsBeforeTheNextRequest) {
  for (int i = 0; i < 5000; ++i)
    ASSERT_EQ(feed(set_command("key-" + std::to_string(i), "v")), "STORED\r\n");
  Connection& connection = server_.connection;
  for (std::string request : {"lru_crawler metadump all\r\n", "stats cachedump 1 0\r\n"}) {
    SCOPED_TRACE(request);
    std::string bytes = request + "version\r\n";
    size_t consumed = connection.protocol.consume(bytes, connection.out);
    EXPECT_EQ(bytes.substr(consumed), "version\r\n");
    int steps = 0;
    while (connection.protocol.has_unfinished_work()) {
      connection.protocol.continue_work(connection.out);
      ++steps;
    }
    EXPECT_GT(steps, 1);
    std::string dump = connection.out.take_all();
    size_t lines = 0;
    for (size_t at = 0; (at = dump.find('\n', at)) != std::string::npos; ++at)
      ++lines;
    EXPECT_EQ(lines, 5000u + 1);  // every item, then END
    EXPECT_EQ(dump.substr(dump.size() - 5), "END\r\n");
    EXPECT_EQ(feed(bytes.substr(consumed)), "VERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
  }
}

// ----------------------------------------------------------------- noreply

TEST_F(TextProtocolTest, NoreplySilencesEveryCommandThatTakesIt) {
  EXPECT_EQ(feed(set_command("k", "1", "noreply")), "");
  EXPECT_EQ(feed(set_command("k", "2", "noreply", "add")), "");
  EXPECT_EQ(feed(set_command("new", "2", "noreply", "add")), "");
  EXPECT_EQ(feed(set_command("k", "3", "noreply", "replace")), "");
  EXPECT_EQ(feed(set_command("missing", "3", "noreply", "replace")), "");
  EXPECT_EQ(feed(set_command("k", "4", "noreply", "append")), "");
  EXPECT_EQ(feed(set_command("k", "0", "noreply", "prepend")), "");
  EXPECT_EQ(get("k"), value_reply("k", 0, "034") + "END\r\n");
  EXPECT_EQ(get("new"), value_reply("new", 0, "2") + "END\r\n");
  EXPECT_EQ(get("missing"), "END\r\n");

  EXPECT_EQ(feed("cas k 0 0 1 1 noreply\r\nx\r\n"), "");
  EXPECT_EQ(feed("cas k 0 0 2 " + std::to_string(cas_of("k")) + " noreply\r\n40\r\n"), "");
  EXPECT_EQ(feed("cas nothing 0 0 1 1 noreply\r\nx\r\n"), "");
  EXPECT_EQ(get("k"), value_reply("k", 0, "40") + "END\r\n");

  EXPECT_EQ(feed("incr k 2 noreply\r\n"), "");
  EXPECT_EQ(feed("decr k 1 noreply\r\n"), "");
  EXPECT_EQ(feed("incr nothing 1 noreply\r\n"), "");
  EXPECT_EQ(get("k"), value_reply("k", 0, "41") + "END\r\n");

  EXPECT_EQ(feed("touch k 10 noreply\r\n"), "");
  EXPECT_EQ(feed("touch nothing 10 noreply\r\n"), "");
  EXPECT_EQ(feed("delete new noreply\r\n"), "");
  EXPECT_EQ(feed("delete nothing noreply\r\n"), "");
  EXPECT_EQ(get("new"), "END\r\n");
  EXPECT_EQ(feed("verbosity 1 noreply\r\n"), "");
  EXPECT_EQ(feed("cache_memlimit 100 noreply\r\n"), "");
  EXPECT_EQ(server_.store.stats().limit_bytes, size_t{100} << 20);
  EXPECT_EQ(feed("cache_memlimit 7 noreply\r\n"), "");

  server_.clock.advance(10);
  EXPECT_EQ(get("k"), "END\r\n");  // the silent touch took effect

  ASSERT_EQ(feed(set_command("a", "1")), "STORED\r\n");
  EXPECT_EQ(feed("flush_all noreply\r\n"), "");
  EXPECT_EQ(get("a"), "END\r\n");
  ASSERT_EQ(feed(set_command("a", "1")), "STORED\r\n");
  EXPECT_EQ(feed("flush_all 0 noreply\r\n"), "");
  EXPECT_EQ(get("a"), "END\r\n");
  // The next command replies again.
  EXPECT_EQ(feed("version\r\n"), "VERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
}

// memcached 1.6.18 quirk: noreply also silences the error of its command.
TEST_F(TextProtocolTest, NoreplySilencesClientErrorsToo) {
  std::string long_key(store::kMaxKeyLength + 1, 'k');
  ASSERT_EQ(feed(set_command("t", "text") + set_command("n", "10")), "STORED\r\nSTORED\r\n");
  // The data line that follows is still a command line of its own.
  EXPECT_EQ(feed("set k x 0 1 noreply\r\nz\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("set " + long_key + " 0 0 1 noreply\r\nx\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("set k 0 0 -1 noreply\r\n"), "");
  EXPECT_EQ(feed("add k 0 0 -1 noreply\r\nversion\r\n"),
            "VERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
  EXPECT_EQ(feed("cas k 0 0 1 x noreply\r\nz\r\n"), "ERROR\r\n");
  EXPECT_EQ(feed("set k 0 0 1 noreply\r\nxyz\r\n"), "ERROR\r\n");  // bad data chunk
  EXPECT_EQ(feed("incr n x noreply\r\n"), "");
  EXPECT_EQ(feed("incr t 1 noreply\r\n"), "");
  EXPECT_EQ(feed("incr " + long_key + " 1 noreply\r\n"), "");
  EXPECT_EQ(feed("touch t x noreply\r\n"), "");
  EXPECT_EQ(feed("touch " + long_key + " 1 noreply\r\n"), "");
  EXPECT_EQ(feed("delete t 1 noreply\r\n"), "");
  EXPECT_EQ(feed("delete t x noreply\r\n"), "");
  EXPECT_EQ(feed("delete " + long_key + " noreply\r\n"), "");
  EXPECT_EQ(feed("flush_all x noreply\r\n"), "");
  EXPECT_EQ(feed("verbosity x noreply\r\n"), "");
  EXPECT_EQ(feed("verbosity noreply\r\n"), "");
  std::string too_big(server_.store.max_item_size() + 1, 'v');
  EXPECT_EQ(feed(set_command("t", too_big, "noreply")), "");
  // None of it changed anything but the too large set, which drops "t".
  EXPECT_EQ(feed("get k t n\r\n"), value_reply("n", 0, "10") + "END\r\n");
}

// ---------------------------------------------------------- line lengths

// memcached 1.6.18 hangs up on a line past 2048 bytes without a newline
// unless it is a multi-get (it hangs up without a word).
TEST_F(TextProtocolTest, LineTooLongClosesTheConnection) {
  std::string partial(kMaxLineLength + 1, 'x');
  Connection& connection = server_.connection;
  size_t consumed = connection.protocol.consume(partial, connection.out);
  EXPECT_EQ(consumed, partial.size());
  EXPECT_TRUE(closed());
  EXPECT_EQ(connection.out.take_all(), "CLIENT_ERROR line too long\r\n");
}

TEST_F(TextProtocolTest, LongLineGrowingInPiecesIsCaughtOnceTooLong) {
  std::string reply = feed(std::string(1000, 'x'));
  EXPECT_EQ(reply, "");
  EXPECT_FALSE(closed());
  reply += feed(std::string(1000, 'y'));
  EXPECT_FALSE(closed());
  reply += feed(std::string(1000, 'z'));
  EXPECT_TRUE(closed());
  EXPECT_EQ(reply, "CLIENT_ERROR line too long\r\n");
}

TEST_F(TextProtocolTest, LineOfExactlyTheLimitIsWaitedFor) {
  std::string line(kMaxLineLength, 'x');
  EXPECT_EQ(feed(line), "");
  EXPECT_FALSE(closed());
  EXPECT_EQ(feed("\r\nversion\r\n"), "ERROR\r\nVERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
}

TEST_F(TextProtocolTest, LongLineThatArrivesWholeIsExecuted) {
  // memcached 1.6.18: a 3000-byte line read in one go gets ERROR.
  EXPECT_EQ(feed(std::string(3000, 'x') + "\r\nversion\r\n"),
            "ERROR\r\nVERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
  EXPECT_FALSE(closed());
}

TEST_F(TextProtocolTest, LongMultiGetIsAccepted) {
  std::string line = "get";
  std::string expected;
  for (int i = 0; line.size() < 3 * kMaxLineLength; ++i) {
    std::string key = "some-longer-key-name-" + std::to_string(i);
    line += " " + key;
    if (i % 50 == 0) {
      ASSERT_EQ(feed(set_command(key, "v" + std::to_string(i))), "STORED\r\n");
      expected += value_reply(key, 0, "v" + std::to_string(i));
    }
  }
  line += "\r\n";
  ASSERT_GT(line.size(), kMaxLineLength);
  // In pieces, so that the protocol sees a long line without a newline.
  std::string reply;
  for (size_t i = 0; i < line.size(); i += 1000)
    reply += feed(line.substr(i, 1000));
  EXPECT_FALSE(closed());
  EXPECT_EQ(reply, expected + "END\r\n");
  // Leading spaces and gets are fine too.
  std::string gets = "  gets" + line.substr(3);
  reply.clear();
  for (size_t i = 0; i < gets.size(); i += 1000)
    reply += feed(gets.substr(i, 1000));
  EXPECT_FALSE(closed());
  EXPECT_EQ(reply.substr(reply.size() - 5), "END\r\n");
}

TEST_F(TextProtocolTest, EndlessMultiGetIsCutOff) {
  std::string piece = " " + std::string(200, 'k');
  std::string reply = feed("get");
  while (!closed() && server_.connection.pending.size() <= kMaxGetLineLength + piece.size()) {
    reply += feed(piece);
  }
  EXPECT_TRUE(closed());
  EXPECT_EQ(reply, "CLIENT_ERROR line too long\r\n");
}

// ----------------------------------------------------- feeding in pieces

TEST_F(TextProtocolTest, PartialLineIsNotConsumed) {
  Connection& connection = server_.connection;
  EXPECT_EQ(connection.protocol.consume("get k", connection.out), 0u);
  EXPECT_EQ(connection.protocol.consume("get k\r", connection.out), 0u);
  EXPECT_TRUE(connection.out.empty());
  EXPECT_EQ(connection.protocol.consume("get k\r\nget", connection.out), 7u);
  EXPECT_EQ(connection.out.take_all(), "END\r\n");
  // A partial value is consumed: the protocol copies it into the item.
  EXPECT_EQ(connection.protocol.consume("set k 0 0 10\r\n01234", connection.out), 19u);
  EXPECT_TRUE(connection.out.empty());
  EXPECT_EQ(connection.protocol.consume("56789\r", connection.out), 6u);
  EXPECT_EQ(connection.protocol.consume("\n", connection.out), 1u);
  EXPECT_EQ(connection.out.take_all(), "STORED\r\n");
}

// A script of mixed requests, fed in every possible way.
std::string mixed_script(size_t max_item_size) {
  std::string large(600, 'L');  // sent by reference from the item
  for (size_t i = 0; i < large.size(); ++i)
    large[i] = static_cast<char>('A' + i % 26);
  std::string too_big(max_item_size + 1, 'T');
  std::string s;
  s += set_command("a", "alpha", "", "set", 1);
  s += set_command("large", large, "", "set", 2);
  s += "get a large missing\r\n";
  s += "gets a\r\n";
  s += "bget large\r\n";
  s += set_command("a", "x", "", "add");
  s += set_command("b", "beta", "", "add");
  s += set_command("c", "x", "", "replace");
  s += set_command("b", "BETA", "", "replace");
  s += set_command("b", "++", "", "append");
  s += set_command("b", "--", "", "prepend");
  s += "cas b 0 0 1 1\r\nz\r\n";
  s += "cas b 0 0 1 8\r\nz\r\n";  // matches in a fresh server, or not: same either way
  s += "cas nothing 0 0 1 1\r\nz\r\n";
  s += set_command("large", large + "\r\nget a\r\n", "", "append");
  s += "get b large\r\n";
  s += set_command("n", "10");
  s += "incr n 5\r\ndecr n 7\r\nget n\r\nincr n x\r\nincr a 1\r\ndecr missing 1\r\n";
  s += "touch a 100\r\ntouch missing 1\r\ngat 50 a b\r\ngats 0 n\r\n";
  s += "delete b\r\ndelete b\r\ndelete a 0\r\ndelete n 1\r\n";
  s += set_command("big", too_big) + "get big\r\n";
  s += set_command("q", "quiet", "noreply") + "incr q 1 noreply\r\nget q\r\n";
  s += "set k 0 0 1\r\nxyz\r\n";  // bad data chunk
  s += "set k x 0 1\r\nz\r\n";
  s += "\r\n\n   \r\nfoo bar\r\n";
  s += "get " + std::string(store::kMaxKeyLength + 1, 'k') + "\r\n";
  s += "stats\r\nstats settings\r\nstats foo\r\n";
  s += "version\r\nverbosity 1\r\nverbosity 1 noreply\r\ncache_memlimit 7\r\n";
  s += "flush_all 100\r\nflush_all x\r\nget large\r\nflush_all\r\nget large\r\n";
  s += "shutdown\r\n";
  s += set_command("locked", "L") + "lock locked\r\nlock locked\r\nlock nothing\r\n";
  s += "keys\r\nkeys lo\r\nunlock locked\r\nunlock locked\r\nunlock_all\r\n";
  s += "set last 0 0 15\nline-feeds only\r\nget last\n";
  s += "quit\r\nget last\r\n";
  return s;
}

// Feeds `chunks` one after the other, keeping the unconsumed tail.
std::string feed_chunks(const std::vector<std::string_view>& chunks, bool* closed) {
  Server server;
  std::string replies;
  for (std::string_view chunk : chunks)
    replies += server.feed(chunk);
  *closed = server.connection.protocol.wants_close();
  return replies;
}

TEST(TextProtocolSplitTest, EverySplitPointGivesTheSameReplies) {
  const std::string script = mixed_script(Server::default_config().max_item_size);
  bool closed = false;
  const std::string expected = feed_chunks({script}, &closed);
  ASSERT_TRUE(closed);
  // Sanity: the script exercised what it meant to.
  EXPECT_NE(expected.find("VALUE large 2 600\r\n"), std::string::npos);
  EXPECT_NE(expected.find("SERVER_ERROR object too large for cache"), std::string::npos);
  EXPECT_NE(expected.find("CLIENT_ERROR bad data chunk"), std::string::npos);
  EXPECT_NE(expected.find("VALUE q 0 5\r\nquiet\r\n"), std::string::npos);
  EXPECT_NE(expected.find("VALUE last 0 15\r\nline-feeds only\r\n"), std::string::npos);

  for (size_t i = 0; i <= script.size(); ++i) {
    std::string_view all(script);
    bool split_closed = false;
    std::string replies = feed_chunks({all.substr(0, i), all.substr(i)}, &split_closed);
    ASSERT_EQ(replies, expected) << "split at " << i;
    ASSERT_TRUE(split_closed) << "split at " << i;
  }
}

TEST(TextProtocolSplitTest, ByteByByteGivesTheSameReplies) {
  const std::string script = mixed_script(Server::default_config().max_item_size);
  bool closed = false;
  const std::string expected = feed_chunks({script}, &closed);
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < script.size(); ++i)
    bytes.push_back(std::string_view(script).substr(i, 1));
  bool bytes_closed = false;
  EXPECT_EQ(feed_chunks(bytes, &bytes_closed), expected);
  EXPECT_TRUE(bytes_closed);
}

TEST(TextProtocolSplitTest, FixedSizeChunksGiveTheSameReplies) {
  const std::string script = mixed_script(Server::default_config().max_item_size);
  bool closed = false;
  const std::string expected = feed_chunks({script}, &closed);
  std::string_view all(script);
  // Irregular chunk sizes, including ones larger than the script.
  for (size_t size : {2u, 3u, 7u, 13u, 64u, 511u, 512u, 513u, 4096u, 100000u}) {
    std::vector<std::string_view> chunks;
    for (size_t i = 0; i < all.size(); i += size)
      chunks.push_back(all.substr(i, size));
    bool chunk_closed = false;
    EXPECT_EQ(feed_chunks(chunks, &chunk_closed), expected) << "chunks of " << size;
  }
}

TEST(TextProtocolPipelineTest, ThousandPipelinedRequestsInOneBuffer) {
  constexpr int kRequests = 1000;
  std::string requests;
  std::string expected;
  for (int i = 0; i < kRequests; ++i) {
    std::string key = "key:" + std::to_string(i);
    std::string value = "value-" + std::to_string(i * 31);
    requests += set_command(key, value, "", "set", static_cast<uint32_t>(i));
    expected += "STORED\r\n";
  }
  for (int i = 0; i < kRequests; ++i) {
    std::string key = "key:" + std::to_string(i);
    requests += (i % 2 ? "get " : "gets ") + key + "\r\n";
  }
  Server server;
  Connection& connection = server.connection;
  size_t consumed = connection.protocol.consume(requests, connection.out);
  EXPECT_EQ(consumed, requests.size());
  for (int i = 0; i < kRequests; ++i) {
    std::string key = "key:" + std::to_string(i);
    std::string value = "value-" + std::to_string(i * 31);
    uint64_t cas = server.store.get(key)->cas;
    expected +=
        (i % 2 ? value_reply(key, i, value) : value_reply_cas(key, i, value, cas)) + "END\r\n";
  }
  EXPECT_EQ(connection.out.take_all(), expected);
  EXPECT_EQ(server.store.stats().curr_items, static_cast<uint64_t>(kRequests));
}

TEST(TextProtocolPipelineTest, PipelinedNoreplyIncrements) {
  Server server;
  ASSERT_EQ(server.feed(set_command("n", "0")), "STORED\r\n");
  std::string requests;
  for (int i = 1; i <= 1000; ++i)
    requests += "incr n " + std::to_string(i) + " noreply\r\n";
  requests += "get n\r\n";
  // 1 + 2 + ... + 1000.
  std::string sum = std::to_string(1000 * 1001 / 2);
  EXPECT_EQ(server.feed(requests), value_reply("n", 0, sum) + "END\r\n");
}

// The gets of a pipeline are looked ahead of (ReadAhead): more of them than
// it notes, data blocks that read like gets, and keys that a request before
// them in the same bytes stores or deletes. Every get must see exactly the
// changes made before it.
TEST(TextProtocolPipelineTest, PipelinedGetsSeeEveryChangeBeforeThem) {
  Server server;
  ASSERT_EQ(server.feed(set_command("old", "1")), "STORED\r\n");
  std::string requests = "get old\r\n" + set_command("new", "get old") + "get new\r\n" +
                         "delete old\r\n" + "get old\r\n" + "gets new\r\n";
  std::string expected = value_reply("old", 0, "1") + "END\r\nSTORED\r\n";
  for (size_t i = 0; i < 2 * ReadAhead::kMaxGets; ++i) {
    std::string key = "k" + std::to_string(i);
    requests += "get " + key + "\r\n";  // a miss
    requests += set_command(key, "v" + std::to_string(i));
    requests += "get " + key + " old\r\n";  // a hit, and a miss
  }
  size_t consumed = server.connection.protocol.consume(requests, server.connection.out);
  EXPECT_EQ(consumed, requests.size());
  store::ItemRef stored = server.store.get("new");
  ASSERT_TRUE(stored);
  uint64_t cas = stored->cas;
  expected += value_reply("new", 0, "get old") + "END\r\nDELETED\r\nEND\r\n" +
              value_reply_cas("new", 0, "get old", cas) + "END\r\n";
  for (size_t i = 0; i < 2 * ReadAhead::kMaxGets; ++i) {
    std::string key = "k" + std::to_string(i);
    expected += "END\r\nSTORED\r\n" + value_reply(key, 0, "v" + std::to_string(i)) + "END\r\n";
  }
  EXPECT_EQ(server.connection.out.take_all(), expected);
}

// A noted get hands its key's hash to the lookup (ReadAhead::running), but
// only the line's own key: one the look-ahead read differently (a trailing
// or a doubled space, several keys) is hashed as the get reads it.
TEST(TextProtocolPipelineTest, APipelinedGetIsLookedUpByTheKeyItReads) {
  Server server;
  ASSERT_EQ(server.feed(set_command("a", "1") + set_command("b", "2")), "STORED\r\nSTORED\r\n");
  std::string a = value_reply("a", 0, "1");
  std::string b = value_reply("b", 0, "2");
  EXPECT_EQ(server.feed("get b\r\nget a \r\nget  a\r\nget a b\r\nget a\r\ngets\r\nget b\r\n"),
            b + "END\r\n" + a + "END\r\n" + a + "END\r\n" + a + b + "END\r\n" + a +
                "END\r\nERROR\r\n" + b + "END\r\n");
}

TEST(GetLinesTest, FindsTheKeysOfEachGetLineWhereItsLineStarts) {
  std::string_view lines =
      "get a\r\nset b 0 0 1\r\nx\r\ngets c d\r\nget\r\nget \r\nGET e\r\nget f\nget g";
  std::vector<std::pair<size_t, std::string>> found;
  for_each_get_line(lines, 100, [&](size_t offset, size_t length, std::string_view key) {
    found.emplace_back(offset, std::string(key));
    EXPECT_EQ(lines.substr(offset + length, 1), "\n") << key;  // where the line ends
    EXPECT_EQ(lines.substr(offset, length).find('\n'), std::string_view::npos) << key;
  });
  // "get" and "get " have no key; "GET" is no command; "get g" is incomplete.
  // Several keys come as one (ReadAhead's pipelined gets have one each).
  std::vector<std::pair<size_t, std::string>> expected = {
      {0, "a"}, {lines.find("gets c"), "c d"}, {lines.find("get f"), "f"}};
  EXPECT_EQ(found, expected);
}

TEST(GetLinesTest, LooksAtNoMoreLinesThanAsked) {
  std::vector<std::string> keys;
  for_each_get_line("get a\r\nget b\r\nget c\r\n", 2,
                    [&](size_t, size_t, std::string_view key) { keys.emplace_back(key); });
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "b"}));
}

TEST(EscapeForLogTest, ControlAndHighBytesAndBackslashBecomeHex) {
  EXPECT_EQ(escape_for_log("get plain-key_1"), "get plain-key_1");
  EXPECT_EQ(escape_for_log(std::string_view("a\nb\rc\0d", 7)), "a\\x0ab\\x0dc\\x00d");
  EXPECT_EQ(escape_for_log("\x7f\xff\\"), "\\x7f\\xff\\x5c");
}

}  // namespace
}  // namespace lockcached::protocol
