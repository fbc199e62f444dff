// memcached's general stats, `stats detail` and `verbosity` against the real
// binary. (The per-class families and the key dumps have their own file;
// test/peers/stats_names_test.py checks every family's names against
// memcached 1.6.18 side by side.)
#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::ServerProcess;
using e2e::stat_u64;

class StatsE2e : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start()); }
  Client connect() {
    Client client;
    EXPECT_TRUE(client.connect(server_.port()));
    return client;
  }

  ServerProcess server_;
};

// Sends `command`; the whole reply up to and including END.
std::string until_end(Client& client, const std::string& command) {
  if (!client.send(command + "\r\n")) return "<send failed>";
  return client.read_until("END\r\n").value_or("<no END>");
}

std::string set_command(const std::string& key, size_t length) {
  return "set " + key + " 0 0 " + std::to_string(length) + "\r\n" + std::string(length, 'v');
}

TEST_F(StatsE2e, DetailCountsPerPrefixAsMemcached) {
  Client c = connect();
  EXPECT_EQ(c.request("stats detail"), "CLIENT_ERROR usage: stats detail on|off|dump");
  EXPECT_EQ(c.request("stats detail sideways"), "CLIENT_ERROR usage: stats detail on|off|dump");
  EXPECT_EQ(c.request("stats detail dump"), "END");
  EXPECT_EQ(c.stats("settings")["detail_enabled"], "no");

  // Off: nothing is counted.
  EXPECT_EQ(c.request(set_command("user:0", 1)), "STORED");
  EXPECT_EQ(c.request("stats detail dump"), "END");

  EXPECT_EQ(c.request("stats detail on"), "OK");
  EXPECT_EQ(c.stats("settings")["detail_enabled"], "yes");
  EXPECT_EQ(c.request(set_command("user:1", 3)), "STORED");
  EXPECT_EQ(c.request(set_command("user:2", 3)), "STORED");
  EXPECT_EQ(c.request(set_command("nocolon", 3)), "STORED");  // no prefix: not counted
  EXPECT_EQ(until_end(c, "get user:1 user:3 a:b:c"), "VALUE user:1 0 3\r\nvvv\r\nEND\r\n");
  EXPECT_EQ(c.request("delete user:2"), "DELETED");
  EXPECT_EQ(c.request("delete user:9"), "NOT_FOUND");
  // Lines in the order the prefixes were first seen, then END.
  EXPECT_EQ(until_end(c, "stats detail dump"),
            "PREFIX user get 2 hit 1 set 2 del 2\r\n"
            "PREFIX a get 1 hit 0 set 0 del 0\r\n"
            "END\r\n");

  // Off keeps what was counted (as memcached); stats reset clears it.
  EXPECT_EQ(c.request("stats detail off"), "OK");
  EXPECT_EQ(until_end(c, "get user:1"), "VALUE user:1 0 3\r\nvvv\r\nEND\r\n");
  EXPECT_EQ(until_end(c, "stats detail dump"),
            "PREFIX user get 2 hit 1 set 2 del 2\r\n"
            "PREFIX a get 1 hit 0 set 0 del 0\r\n"
            "END\r\n");
  EXPECT_EQ(c.request("stats reset"), "RESET");
  EXPECT_EQ(c.request("stats detail dump"), "END");
}

TEST_F(StatsE2e, GeneralStatsCountRefusedStoresAndYields) {
  Client c = connect();
  const size_t too_large = 2 * 1024 * 1024;  // over the 1 MB default item limit
  EXPECT_EQ(c.request(set_command("big", too_large)), "SERVER_ERROR object too large for cache");
  // A get of more keys than one step answers lets other connections in
  // between: each pause is a yield.
  std::string keys = "get";
  for (int i = 0; i < 3000; ++i)
    keys += " k" + std::to_string(i);
  EXPECT_EQ(c.request(keys), "END");

  auto stats = c.stats();
  EXPECT_EQ(stat_u64(stats, "store_too_large"), 1u);
  EXPECT_EQ(stat_u64(stats, "store_no_memory"), 0u);
  // memcached counts a set once an item was allocated for it.
  EXPECT_EQ(stat_u64(stats, "cmd_set"), 0u);
  EXPECT_GE(stat_u64(stats, "conn_yields"), 2u);
  EXPECT_EQ(stat_u64(stats, "get_misses"), 3000u);
  EXPECT_EQ(stats["accepting_conns"], "1");
  EXPECT_EQ(stat_u64(stats, "connection_structures"), stat_u64(stats, "curr_connections"));
  EXPECT_GT(stat_u64(stats, "hash_bytes"), 0u);

  // me is what memcached 1.6.18 counts in cmd_meta.
  EXPECT_EQ(c.request("me nothing"), "EN");
  EXPECT_EQ(c.request("mg nothing"), "EN");
  EXPECT_EQ(stat_u64(c.stats(), "cmd_meta"), 1u);
}

// memcached's get_expired and get_flushed count the lookups, by any
// command, that found their item expired or flushed. The crawler is off, so
// that only lookups take the items out.
TEST_F(StatsE2e, LookupsThatFindExpiredOrFlushedItemsAreCounted) {
  Client c = connect();
  EXPECT_EQ(c.request("lru_crawler disable"), "OK");
  const std::string expired = " 0 2592001 1\r\nv";  // an absolute time long past
  EXPECT_EQ(c.request("set gone1" + expired), "STORED");
  EXPECT_EQ(c.request("set gone2" + expired), "STORED");
  EXPECT_EQ(c.request("get gone1"), "END");
  EXPECT_EQ(c.request("delete gone2"), "NOT_FOUND");
  EXPECT_EQ(c.request(set_command("a", 1)), "STORED");
  EXPECT_EQ(c.request(set_command("b", 1)), "STORED");
  EXPECT_EQ(c.request("flush_all"), "OK");
  EXPECT_EQ(c.request("get a"), "END");
  EXPECT_EQ(c.request(set_command("b", 1)), "STORED");  // its lookup finds the old b flushed
  auto stats = c.stats();
  EXPECT_EQ(stat_u64(stats, "get_expired"), 2u);
  EXPECT_EQ(stat_u64(stats, "get_flushed"), 2u);
  EXPECT_EQ(stats.count("idle_kicks"), 0u);  // as memcached: only with an idle timeout
  EXPECT_EQ(c.request("stats reset"), "RESET");
  EXPECT_EQ(stat_u64(c.stats(), "get_flushed"), 0u);
}

// memcached's idle_kicks: connections closed for sitting idle longer than
// the idle timeout.
TEST(StatsIdleE2e, IdleKicksCountConnectionsClosedForIdling) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--idle_timeout=1"}));
  Client idle;
  ASSERT_TRUE(idle.connect(server.port()));
  EXPECT_TRUE(idle.wait_for_close());
  Client c;  // connected only now, so that it is not idle yet
  ASSERT_TRUE(c.connect(server.port()));
  EXPECT_EQ(stat_u64(c.stats(), "idle_kicks"), 1u);
}

// memcached's lrutail_reflocked counts the times eviction found the item
// it looked at in use; here, locked, so passed over.
TEST(StatsEvictionE2e, EvictionPassingOverALockedItemIsCounted) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--memory_limit_mb=1", "--max_item_size=1024"}));
  Client c;
  ASSERT_TRUE(c.connect(server.port()));
  EXPECT_EQ(c.request(set_command("held", 900)), "STORED");
  EXPECT_EQ(c.request("lock held"), "OK");
  EXPECT_EQ(stat_u64(c.stats(), "lrutail_reflocked"), 0u);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_EQ(c.request(set_command("item" + std::to_string(i), 900)), "STORED") << i;
  }
  auto stats = c.stats();
  EXPECT_GT(stat_u64(stats, "evictions"), 0u);
  EXPECT_GT(stat_u64(stats, "lrutail_reflocked"), 0u);
  EXPECT_EQ(until_end(c, "get held"),
            "VALUE held 0 900\r\n" + std::string(900, 'v') + "\r\nEND\r\n");
}

bool logged(const ServerProcess& server, const std::string& text) {
  return e2e::eventually([&] { return server.log().find(text) != std::string::npos; }, 10s, 10ms);
}

TEST_F(StatsE2e, VerbosityChangesWhatTheServerLogs) {
  Client c = connect();
  EXPECT_EQ(c.request("verbosity invalid"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(c.stats("settings")["verbosity"], "0");
  EXPECT_EQ(c.request("get before-verbosity"), "END");

  EXPECT_EQ(c.request("verbosity 2"), "OK");
  EXPECT_EQ(c.stats("settings")["verbosity"], "2");
  EXPECT_EQ(c.request("get after-verbosity"), "END");
  EXPECT_TRUE(logged(server_, "get after-verbosity")) << server_.log();
  EXPECT_EQ(server_.log().find("get before-verbosity"), std::string::npos);

  // Back to 0: requests are not logged any more. The marker request that
  // follows is logged only at level 2, so its absence after a reply to a
  // logged one proves the quiet request was not logged either.
  EXPECT_EQ(c.request("verbosity 0"), "OK");
  EXPECT_EQ(c.request("get when-quiet"), "END");
  EXPECT_EQ(c.request("verbosity 2"), "OK");
  EXPECT_EQ(c.request("get marker"), "END");
  EXPECT_TRUE(logged(server_, "get marker")) << server_.log();
  EXPECT_EQ(server_.log().find("get when-quiet"), std::string::npos);
}

}  // namespace
