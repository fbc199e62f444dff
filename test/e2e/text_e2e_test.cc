// End-to-end tests of the memcached text protocol: the real lockcached binary,
// spoken to over TCP on 127.0.0.1. Every test starts its own server on a port
// the kernel picks, so that ctest may run them in parallel.
//
// Expected replies follow memcached 1.6's protocol.txt and, where it is silent,
// what memcached 1.6.18 answers to the same bytes.
#include <sys/wait.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <latch>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::ServerProcess;
using e2e::stat_u64;
using e2e::Value;

constexpr uint64_t kU64Max = UINT64_MAX;

uint64_t fnv1a(std::string_view bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// Every byte value, "\r\n" included, from a fixed seed.
std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string bytes(n, '\0');
  for (char& c : bytes)
    c = static_cast<char>(byte(generator));
  return bytes;
}

std::string repeat(std::string_view text, size_t times) {
  std::string out;
  out.reserve(text.size() * times);
  for (size_t i = 0; i < times; ++i)
    out += text;
  return out;
}

std::string store_bytes(std::string_view command, std::string_view key, std::string_view data,
                        uint32_t flags = 0, int64_t exptime = 0, std::string_view extra = "") {
  std::string bytes = std::string(command) + " " + std::string(key) + " " + std::to_string(flags) +
                      " " + std::to_string(exptime) + " " + std::to_string(data.size());
  if (!extra.empty()) bytes += " " + std::string(extra);
  return bytes + "\r\n" + std::string(data) + "\r\n";
}

// A server with default flags (two reactor threads) for each test.
class TextE2e : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start({"--threads=2"})); }
  uint16_t port() const { return server_.port(); }

  ServerProcess server_;
};

// ---------------------------------------------------------------------------
// Basic behaviour of each command.

TEST_F(TextE2e, VersionAnswersVersionLine) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  std::string line = c.request("version");
  EXPECT_TRUE(line.starts_with("VERSION 1.6")) << line;
}

TEST_F(TextE2e, SetThenGetReturnsExactBytes) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  ASSERT_TRUE(c.send("set foo 5 0 3\r\nbar\r\n"));
  EXPECT_EQ(c.read_line(), "STORED");
  ASSERT_TRUE(c.send("get foo\r\n"));
  EXPECT_EQ(c.read_until("END\r\n"), "VALUE foo 5 3\r\nbar\r\nEND\r\n");

  // Values are binary-safe: CRLF and NUL inside the data block; flags use
  // all 32 bits.
  std::string binary("a\r\nb\0c\r\n\xff", 9);
  EXPECT_EQ(c.store("set", "bin", binary, 4294967295u), "STORED");
  ASSERT_TRUE(c.send("get bin\r\n"));
  EXPECT_EQ(c.read_values(), (std::vector<Value>{{"bin", 4294967295u, binary, std::nullopt}}));

  // An empty value is a value.
  EXPECT_EQ(c.store("set", "empty", ""), "STORED");
  EXPECT_EQ(c.get("empty"), "");
}

TEST_F(TextE2e, GetOfMissingKeyAnswersEnd) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  ASSERT_TRUE(c.send("get no_such_key\r\n"));
  EXPECT_EQ(c.read_line(), "END");
}

TEST_F(TextE2e, MultiGetAnswersHitsInRequestOrder) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("set", "a", "1", 1), "STORED");
  EXPECT_EQ(c.store("set", "b", "22", 2), "STORED");
  // Misses are left out; a repeated key is answered twice (as memcached).
  ASSERT_TRUE(c.send("get b missing a b\r\n"));
  EXPECT_EQ(c.read_values(), (std::vector<Value>{{"b", 2, "22", std::nullopt},
                                                 {"a", 1, "1", std::nullopt},
                                                 {"b", 2, "22", std::nullopt}}));
}

TEST_F(TextE2e, GetsReturnsCasThatChangesOnEveryUpdate) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("set", "k", "v1"), "STORED");
  ASSERT_TRUE(c.send("gets k\r\n"));
  std::optional<std::vector<Value>> first = c.read_values();
  ASSERT_TRUE(first && first->size() == 1) << c.last_error();
  ASSERT_TRUE((*first)[0].cas.has_value());
  EXPECT_EQ((*first)[0].data, "v1");

  // Reading does not change it.
  ASSERT_TRUE(c.send("gets k\r\n"));
  std::optional<std::vector<Value>> again = c.read_values();
  ASSERT_TRUE(again && again->size() == 1) << c.last_error();
  EXPECT_EQ((*again)[0].cas, (*first)[0].cas);

  EXPECT_EQ(c.store("set", "k", "v2"), "STORED");
  ASSERT_TRUE(c.send("gets k\r\n"));
  std::optional<std::vector<Value>> second = c.read_values();
  ASSERT_TRUE(second && second->size() == 1) << c.last_error();
  ASSERT_TRUE((*second)[0].cas.has_value());
  EXPECT_NE(*(*second)[0].cas, *(*first)[0].cas);
  EXPECT_EQ((*second)[0].data, "v2");
}

TEST_F(TextE2e, CasStoresOnlyWithTheCurrentCasValue) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("cas", "absent", "x", 0, 0, "1"), "NOT_FOUND");
  EXPECT_EQ(c.get("absent"), std::nullopt);

  EXPECT_EQ(c.store("set", "k", "old"), "STORED");
  ASSERT_TRUE(c.send("gets k\r\n"));
  std::optional<std::vector<Value>> values = c.read_values();
  ASSERT_TRUE(values && values->size() == 1 && (*values)[0].cas) << c.last_error();
  uint64_t cas = *(*values)[0].cas;

  EXPECT_EQ(c.store("cas", "k", "wrong", 0, 0, std::to_string(cas + 1)), "EXISTS");
  EXPECT_EQ(c.get("k"), "old");
  EXPECT_EQ(c.store("cas", "k", "new", 9, 0, std::to_string(cas)), "STORED");
  ASSERT_TRUE(c.send("gets k\r\n"));
  values = c.read_values();
  ASSERT_TRUE(values && values->size() == 1 && (*values)[0].cas) << c.last_error();
  EXPECT_EQ((*values)[0].data, "new");
  EXPECT_EQ((*values)[0].flags, 9u);
  EXPECT_NE(*(*values)[0].cas, cas);
  // The old cas value is spent.
  EXPECT_EQ(c.store("cas", "k", "again", 0, 0, std::to_string(cas)), "EXISTS");
  EXPECT_EQ(c.get("k"), "new");
}

TEST_F(TextE2e, AddStoresOnlyMissingKeys) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("add", "k", "first"), "STORED");
  EXPECT_EQ(c.store("add", "k", "second"), "NOT_STORED");
  EXPECT_EQ(c.get("k"), "first");
}

TEST_F(TextE2e, ReplaceStoresOnlyExistingKeys) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("replace", "k", "nothing"), "NOT_STORED");
  EXPECT_EQ(c.get("k"), std::nullopt);
  EXPECT_EQ(c.store("set", "k", "old", 1), "STORED");
  EXPECT_EQ(c.store("replace", "k", "new", 2), "STORED");
  ASSERT_TRUE(c.send("get k\r\n"));
  EXPECT_EQ(c.read_values(), (std::vector<Value>{{"k", 2, "new", std::nullopt}}));
}

TEST_F(TextE2e, AppendAndPrependExtendExistingValuesAndKeepFlags) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("append", "k", "x"), "NOT_STORED");
  EXPECT_EQ(c.store("prepend", "k", "x"), "NOT_STORED");
  EXPECT_EQ(c.get("k"), std::nullopt);

  EXPECT_EQ(c.store("set", "k", "mid", 7), "STORED");
  // The flags and exptime of append/prepend are ignored (protocol.txt).
  EXPECT_EQ(c.store("append", "k", "_end", 99), "STORED");
  EXPECT_EQ(c.store("prepend", "k", "start_", 98), "STORED");
  ASSERT_TRUE(c.send("get k\r\n"));
  EXPECT_EQ(c.read_values(), (std::vector<Value>{{"k", 7, "start_mid_end", std::nullopt}}));
}

TEST_F(TextE2e, DeleteRemovesTheItem) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("set", "k", "v"), "STORED");
  EXPECT_EQ(c.request("delete k"), "DELETED");
  EXPECT_EQ(c.get("k"), std::nullopt);
  EXPECT_EQ(c.request("delete k"), "NOT_FOUND");

  // "delete KEY 0" survives from the old hold time; other times are refused.
  EXPECT_EQ(c.store("set", "k", "v"), "STORED");
  EXPECT_EQ(c.request("delete k 5"),
            "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]");
  EXPECT_EQ(c.get("k"), "v");
  EXPECT_EQ(c.request("delete k 0"), "DELETED");
  EXPECT_EQ(c.get("k"), std::nullopt);
}

TEST_F(TextE2e, IncrAndDecrDoUnsigned64BitArithmetic) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.request("incr counter 1"), "NOT_FOUND");
  EXPECT_EQ(c.request("decr counter 1"), "NOT_FOUND");

  EXPECT_EQ(c.store("set", "counter", "10", 5), "STORED");
  EXPECT_EQ(c.request("incr counter 5"), "15");
  EXPECT_EQ(c.request("decr counter 6"), "9");
  // memcached rewrites a shorter number in place, padded with spaces.
  EXPECT_EQ(c.get("counter"), "9 ");
  EXPECT_EQ(c.request("incr counter 91"), "100");
  ASSERT_TRUE(c.send("get counter\r\n"));
  EXPECT_EQ(c.read_values(), (std::vector<Value>{{"counter", 5, "100", std::nullopt}}));

  // decr stops at 0; incr wraps at 2^64.
  EXPECT_EQ(c.request("decr counter 1000"), "0");
  EXPECT_EQ(c.request("incr counter " + std::to_string(kU64Max)), std::to_string(kU64Max));
  EXPECT_EQ(c.request("incr counter 2"), "1");

  EXPECT_EQ(c.store("set", "text", "abc"), "STORED");
  EXPECT_EQ(c.request("incr text 1"),
            "CLIENT_ERROR cannot increment or decrement non-numeric value");
  EXPECT_EQ(c.request("incr counter -1"), "CLIENT_ERROR invalid numeric delta argument");
  EXPECT_EQ(c.request("decr counter abc"), "CLIENT_ERROR invalid numeric delta argument");
  EXPECT_EQ(c.get("text"), "abc");
}

TEST_F(TextE2e, TouchSetsANewExpiry) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.request("touch missing 0"), "NOT_FOUND");
  EXPECT_EQ(c.store("set", "k", "v"), "STORED");
  EXPECT_EQ(c.request("touch k 100"), "TOUCHED");
  EXPECT_EQ(c.get("k"), "v");
  EXPECT_EQ(c.request("touch k abc"), "CLIENT_ERROR invalid exptime argument");
  // A negative exptime has already passed.
  EXPECT_EQ(c.request("touch k -1"), "TOUCHED");
  EXPECT_EQ(c.get("k"), std::nullopt);
}

TEST_F(TextE2e, GatAndGatsReturnTheValueAndTouchIt) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("set", "g", "val", 3), "STORED");
  EXPECT_EQ(c.store("set", "h", "other", 4), "STORED");
  ASSERT_TRUE(c.send("gets g\r\n"));
  std::optional<std::vector<Value>> values = c.read_values();
  ASSERT_TRUE(values && values->size() == 1 && (*values)[0].cas) << c.last_error();
  uint64_t cas = *(*values)[0].cas;

  ASSERT_TRUE(c.send("gat 100 g missing h\r\n"));
  EXPECT_EQ(c.read_values(),
            (std::vector<Value>{{"g", 3, "val", std::nullopt}, {"h", 4, "other", std::nullopt}}));
  ASSERT_TRUE(c.send("gats 100 g\r\n"));
  EXPECT_EQ(c.read_values(), (std::vector<Value>{{"g", 3, "val", cas}}));
  ASSERT_TRUE(c.send("gat 0 missing\r\n"));
  EXPECT_EQ(c.read_values(), std::vector<Value>{});
  EXPECT_EQ(c.request("gat abc g"), "CLIENT_ERROR invalid exptime argument");

  // gat with a past exptime answers the value, then it is gone.
  ASSERT_TRUE(c.send("gat -1 g\r\n"));
  EXPECT_EQ(c.read_values(), (std::vector<Value>{{"g", 3, "val", std::nullopt}}));
  EXPECT_EQ(c.get("g"), std::nullopt);
  EXPECT_EQ(c.get("h"), "other");
}

TEST_F(TextE2e, TouchAndGatMakeItemsExpire) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("set", "touched", "1"), "STORED");
  EXPECT_EQ(c.store("set", "gatted", "2"), "STORED");
  EXPECT_EQ(c.store("set", "kept", "3"), "STORED");
  EXPECT_EQ(c.request("touch touched 1"), "TOUCHED");
  ASSERT_TRUE(c.send("gat 1 gatted\r\n"));
  EXPECT_EQ(c.read_values(), (std::vector<Value>{{"gatted", 0, "2", std::nullopt}}));

  EXPECT_TRUE(e2e::eventually([&] { return !c.get("touched") && !c.get("gatted"); }));
  EXPECT_EQ(c.get("kept"), "3");
}

TEST_F(TextE2e, FlushAllInvalidatesEverythingStoredBefore) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("set", "a", "1"), "STORED");
  EXPECT_EQ(c.store("set", "b", "2"), "STORED");
  EXPECT_EQ(c.request("flush_all"), "OK");
  EXPECT_EQ(c.get("a"), std::nullopt);
  EXPECT_EQ(c.get("b"), std::nullopt);
  // Items stored after the flush, even within the same second, survive it.
  EXPECT_EQ(c.store("set", "c", "3"), "STORED");
  EXPECT_EQ(c.get("c"), "3");

  EXPECT_EQ(c.request("flush_all 0"), "OK");
  EXPECT_EQ(c.get("c"), std::nullopt);
  EXPECT_EQ(c.request("flush_all abc"), "CLIENT_ERROR invalid exptime argument");
}

TEST_F(TextE2e, FlushAllWithDelayInvalidatesLater) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("set", "k", "v"), "STORED");
  EXPECT_EQ(c.request("flush_all 3"), "OK");
  // Still there until the delay has passed (3 s is far more than a round trip).
  EXPECT_EQ(c.get("k"), "v");
  EXPECT_TRUE(e2e::eventually([&] { return !c.get("k"); }, 10s));
}

// memcached's rule for flush_all's time, as for an exptime: over 30 days it
// is an absolute unix time (the server's own `time`, so that a clock apart
// from the test's counts), not a delay.
TEST_F(TextE2e, FlushAllWithAnAbsoluteTimeInvalidatesThen) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("set", "k", "v"), "STORED");
  uint64_t now = stat_u64(c.stats(), "time");
  EXPECT_EQ(c.request("flush_all " + std::to_string(now + 2)), "OK");
  EXPECT_EQ(c.store("set", "later", "w"), "STORED");  // before the moment: goes too
  EXPECT_EQ(c.get("k"), "v");                         // not yet
  EXPECT_TRUE(e2e::eventually([&] { return !c.get("k"); }, 10s));
  EXPECT_EQ(c.get("later"), std::nullopt);
  // A time already past flushes at once.
  EXPECT_EQ(c.store("set", "k", "v"), "STORED");
  EXPECT_EQ(c.request("flush_all " + std::to_string(now - 60)), "OK");
  EXPECT_EQ(c.get("k"), std::nullopt);
}

TEST_F(TextE2e, StatsReportsTheServer) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  std::map<std::string, std::string> stats = c.stats();
  EXPECT_EQ(stat_u64(stats, "pid"), static_cast<uint64_t>(server_.pid()));
  EXPECT_TRUE(stats["version"].starts_with("1.6")) << stats["version"];
  EXPECT_EQ(stat_u64(stats, "threads"), 2u);
  for (const char* name :
       {"uptime", "time", "curr_connections", "total_connections", "cmd_get", "cmd_set", "get_hits",
        "get_misses", "curr_items", "total_items", "bytes", "limit_maxbytes", "evictions"}) {
    stat_u64(stats, name);  // present and numeric
  }
  EXPECT_GE(stat_u64(stats, "curr_connections"), 1u);
  uint64_t now = static_cast<uint64_t>(::time(nullptr));
  EXPECT_LE(stat_u64(stats, "time"), now + 1);
  EXPECT_GE(stat_u64(stats, "time") + 60, now);
}

TEST(TextStandaloneE2e, StatsSettingsReflectTheFlags) {
  ServerProcess server;
  ASSERT_TRUE(server.start(
      {"--threads=3", "--max_connections=77", "--max_item_size=4096", "--memory_limit_mb=64"}));
  Client c;
  ASSERT_TRUE(c.connect(server.port()));
  std::map<std::string, std::string> settings = c.stats("settings");
  EXPECT_EQ(stat_u64(settings, "maxconns"), 77u);
  EXPECT_EQ(stat_u64(settings, "tcpport"), server.port());
  EXPECT_EQ(stat_u64(settings, "num_threads"), 3u);
  EXPECT_EQ(stat_u64(settings, "item_size_max"), 4096u);
  EXPECT_EQ(stat_u64(settings, "maxbytes"), 64u << 20);
  EXPECT_EQ(settings["cas_enabled"], "yes");

  std::map<std::string, std::string> stats = c.stats();
  EXPECT_EQ(stat_u64(stats, "threads"), 3u);
  EXPECT_EQ(stat_u64(stats, "max_connections"), 77u);
  EXPECT_EQ(stat_u64(stats, "limit_maxbytes"), 64u << 20);
}

TEST_F(TextE2e, StatsResetZeroesTheCounters) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.get("x"), std::nullopt);
  EXPECT_EQ(c.get("y"), std::nullopt);
  EXPECT_GE(stat_u64(c.stats(), "get_misses"), 2u);
  EXPECT_EQ(c.request("stats reset"), "RESET");
  std::map<std::string, std::string> stats = c.stats();
  EXPECT_EQ(stat_u64(stats, "get_misses"), 0u);
  EXPECT_EQ(stat_u64(stats, "cmd_get"), 0u);
  EXPECT_EQ(c.get("x"), std::nullopt);
  EXPECT_EQ(stat_u64(c.stats(), "get_misses"), 1u);
  // The per-class groups answer (test/e2e/stats_families_e2e_test.cc).
  c.stats("items");
  c.stats("slabs");
  EXPECT_EQ(c.request("version").substr(0, 8), "VERSION ");
}

TEST_F(TextE2e, VerbosityIsAccepted) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.request("verbosity 1"), "OK");
  EXPECT_EQ(c.request("verbosity 0"), "OK");
  EXPECT_EQ(c.request("verbosity"), "ERROR");
  // noreply: the next reply is the version's.
  EXPECT_TRUE(c.request("verbosity 1 noreply\r\nversion").starts_with("VERSION "));
}

TEST_F(TextE2e, QuitClosesOnlyThatConnection) {
  Client quitter;
  Client other;
  ASSERT_TRUE(quitter.connect(port()));
  ASSERT_TRUE(other.connect(port()));
  EXPECT_EQ(quitter.store("set", "k", "v"), "STORED");
  ASSERT_TRUE(quitter.send("get k\r\nquit\r\nget k\r\n"));
  EXPECT_EQ(quitter.read_values(), (std::vector<Value>{{"k", 0, "v", std::nullopt}}));
  EXPECT_TRUE(quitter.wait_for_close());
  EXPECT_EQ(quitter.buffered(), "");  // nothing after quit is answered
  EXPECT_EQ(other.get("k"), "v");
}

// Replies to requests before quit are all delivered, even when they are far
// larger than the socket buffers (memcached 1.6.18 sends every byte).
TEST_F(TextE2e, QuitDeliversEveryEarlierReplyBeforeClosing) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  const std::string data = random_bytes(512 * 1024, 4242);
  EXPECT_EQ(c.store("set", "big", data), "STORED");
  constexpr int kGets = 40;  // 20 MiB of replies
  ASSERT_TRUE(c.send(repeat("get big\r\n", kGets) + "quit\r\n"));
  for (int i = 0; i < kGets; ++i) {
    std::optional<std::vector<Value>> values = c.read_values(30s);
    ASSERT_TRUE(values.has_value()) << "reply #" << i << " of " << kGets << ": " << c.last_error();
    ASSERT_EQ(values->size(), 1u);
    ASSERT_EQ(fnv1a((*values)[0].data), fnv1a(data)) << "reply #" << i;
  }
  EXPECT_TRUE(c.wait_for_close());
  EXPECT_EQ(c.buffered(), "");
}

// A client may end its side of the connection once it has sent its requests
// (shutdown(SHUT_WR)) and still expect every reply, as memcached 1.6.18 gives.
TEST_F(TextE2e, HalfClosedClientStillReceivesEveryLargeReply) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  const std::string data = random_bytes(512 * 1024, 2424);
  EXPECT_EQ(c.store("set", "big", data), "STORED");
  constexpr int kGets = 40;  // 20 MiB of replies
  ASSERT_TRUE(c.send(repeat("get big\r\n", kGets)));
  ASSERT_TRUE(c.shutdown_send());
  for (int i = 0; i < kGets; ++i) {
    std::optional<std::vector<Value>> values = c.read_values(30s);
    ASSERT_TRUE(values.has_value()) << "reply #" << i << " of " << kGets << ": " << c.last_error();
    ASSERT_EQ(values->size(), 1u);
    ASSERT_EQ(fnv1a((*values)[0].data), fnv1a(data)) << "reply #" << i;
  }
  EXPECT_TRUE(c.wait_for_close());
  EXPECT_EQ(c.buffered(), "");
}

// The common case of the above: small replies (printf 'get k\r\n' | nc -N).
TEST_F(TextE2e, HalfClosedClientReceivesSmallReplies) {
  Client small;
  ASSERT_TRUE(small.connect(port()));
  ASSERT_TRUE(small.send("set s 0 0 2\r\nhi\r\nget s\r\n"));
  ASSERT_TRUE(small.shutdown_send());
  EXPECT_EQ(small.read_line(), "STORED");
  EXPECT_EQ(small.read_values(), (std::vector<Value>{{"s", 0, "hi", std::nullopt}}));
  EXPECT_TRUE(small.wait_for_close());
}

// Requests held back (here by -R, the requests a connection runs per turn)
// when the client's end arrives are still answered: the io_uring backend
// took its receive's end of stream as "close once sent" and dropped them
// (5 of 2,000 answered).
TEST_F(TextE2e, HalfClosedClientGetsRepliesToRequestsHeldBack) {
  ServerProcess limited;
  ASSERT_TRUE(limited.start({"-R", "5"}));
  Client c;
  ASSERT_TRUE(c.connect(limited.port()));
  ASSERT_EQ(c.store("set", "s", "abc"), "STORED");
  constexpr int kGets = 2000;
  ASSERT_TRUE(c.send(repeat("get s\r\n", kGets) + "version\r\n"));
  ASSERT_TRUE(c.shutdown_send());
  for (int i = 0; i < kGets; ++i) {
    std::optional<std::vector<Value>> values = c.read_values();
    ASSERT_TRUE(values.has_value()) << "reply #" << i << ": " << c.last_error();
    ASSERT_EQ(values->size(), 1u);
  }
  EXPECT_EQ(c.read_line().rfind("VERSION ", 0), 0u);
  EXPECT_TRUE(c.wait_for_close());
}

TEST_F(TextE2e, UnknownAndMalformedCommandsAnswerErrorAndKeepTheConnection) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.request("bogus"), "ERROR");
  EXPECT_EQ(c.request(""), "ERROR");
  EXPECT_EQ(c.request("get"), "ERROR");
  EXPECT_EQ(c.request("set k 0 0"), "ERROR");
  EXPECT_EQ(c.request("incr k"), "ERROR");
  EXPECT_EQ(c.request("touch k"), "ERROR");
  EXPECT_EQ(c.request("stats bogus"), "ERROR");
  EXPECT_EQ(c.request("shutdown"), "ERROR: shutdown not enabled");
  EXPECT_EQ(c.request("cache_memlimit 2"),
            "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m");
  EXPECT_EQ(c.request("cache_memlimit 100"), "OK");
  EXPECT_TRUE(c.request("version").starts_with("VERSION "));
}

// memcached lowers its memory limit at run time and frees down to it; so do
// we, at once, except for locked items.
TEST(TextStandaloneE2e, CacheMemlimitEvictsDownToTheNewLimitButKeepsLockedItems) {
  ServerProcess server;
  // 32 MB: 8 shards of 4 MB at the start, so that 8 MB still gives each
  // shard room for a 1 MB item (Store::smallest_memory_limit).
  ASSERT_TRUE(server.start({"--memory_limit_mb=32"}));
  Client c;
  ASSERT_TRUE(c.connect(server.port()));
  const std::string value(10000, 'v');
  EXPECT_EQ(c.store("set", "keep", value), "STORED");
  EXPECT_EQ(c.request("lock keep"), "OK");
  constexpr int kItems = 2000;  // about 20 MB
  std::string sets;
  for (int i = 0; i < kItems; ++i)
    sets += store_bytes("set", "item" + std::to_string(i), value, 0, 0, "noreply");
  ASSERT_TRUE(c.send(sets));
  EXPECT_EQ(stat_u64(c.stats(), "curr_items"), kItems + 1u);
  EXPECT_EQ(stat_u64(c.stats(), "evictions"), 0u);

  EXPECT_EQ(c.request("cache_memlimit 8"), "OK");
  std::map<std::string, std::string> stats = c.stats();
  EXPECT_EQ(stat_u64(stats, "limit_maxbytes"), 8u << 20);
  EXPECT_LE(stat_u64(stats, "bytes"), 8u << 20);
  EXPECT_GT(stat_u64(stats, "evictions"), 0u);
  EXPECT_LT(stat_u64(stats, "curr_items"), 1000u);
  EXPECT_EQ(stat_u64(c.stats("settings"), "maxbytes"), 8u << 20);
  EXPECT_EQ(c.get("keep"), value);

  EXPECT_EQ(c.request("cache_memlimit 1000000001"),
            "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes");
  EXPECT_EQ(c.request("cache_memlimit 64"), "OK");
  EXPECT_EQ(stat_u64(c.stats(), "limit_maxbytes"), 64u << 20);
}

// The shards are counted at the start, each to hold a few of the largest
// items; a limit set later is shared among them. One so low that a shard's
// share is less than a largest item is refused: before, it was taken, and
// every set of a large value then failed "out of memory" on an empty cache
// (memcached stores them). 64 MB makes 16 shards: 16 MB is the least.
TEST(TextStandaloneE2e, CacheMemlimitRefusesALimitTooLowForTheLargestItems) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--memory_limit_mb=64"}));
  Client c;
  ASSERT_TRUE(c.connect(server.port()));
  EXPECT_EQ(c.request("cache_memlimit 15"),
            "MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust");
  EXPECT_EQ(stat_u64(c.stats(), "limit_maxbytes"), 64u << 20);
  EXPECT_EQ(c.request("cache_memlimit 16"), "OK");
  const std::string large(1000 * 1000, 'L');
  EXPECT_EQ(c.store("set", "large", large), "STORED");
  EXPECT_EQ(c.get("large"), large);
}

// memcached 1.6.18's replies, word for word; enable and disable pause and
// resume the expiry crawler.
TEST_F(TextE2e, LruCrawlerCommandsAnswerAsMemcached) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.request("lru_crawler crawl all"), "OK");
  EXPECT_EQ(c.request("lru_crawler crawl 1,,63"), "OK");
  for (const char* bad : {"0", "64", "x", "1,x"}) {
    EXPECT_EQ(c.request(std::string("lru_crawler crawl ") + bad), "BADCLASS invalid class id");
  }
  EXPECT_EQ(c.request("lru_crawler crawl ,"), "NOTSTARTED no items to crawl");
  EXPECT_EQ(c.request("lru_crawler crawl hash"), "ERROR an unknown error happened");
  EXPECT_EQ(c.request("lru_crawler sleep 100"), "OK");
  EXPECT_EQ(c.request("lru_crawler sleep 2000000"),
            "CLIENT_ERROR sleep must be one second or less");
  EXPECT_EQ(c.request("lru_crawler sleep x"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(c.request("lru_crawler tocrawl 10"), "OK");
  EXPECT_EQ(c.request("lru_crawler tocrawl -1"), "CLIENT_ERROR bad command line format");
  for (const char* error : {"lru_crawler", "lru_crawler crawl", "lru_crawler bogus",
                            "lru_crawler crawl all extra", "lru_crawler sleep 100 noreply"}) {
    EXPECT_EQ(c.request(error), "ERROR") << error;
  }
  EXPECT_EQ(c.request("lru_crawler enable"), "ERROR failed to start lru crawler thread");
  EXPECT_EQ(c.request("lru_crawler disable"), "OK");
  EXPECT_EQ(c.request("lru_crawler disable"), "OK");
  EXPECT_EQ(c.stats("settings")["lru_crawler"], "no");
  EXPECT_EQ(c.request("lru_crawler crawl all"), "CLIENT_ERROR lru crawler disabled");
  EXPECT_EQ(c.request("lru_crawler metadump all"), "CLIENT_ERROR lru crawler disabled");
  EXPECT_EQ(c.request("lru_crawler enable"), "OK");
  EXPECT_EQ(c.stats("settings")["lru_crawler"], "yes");
  EXPECT_EQ(c.request("lru_crawler metadump ,"), "NOTSTARTED no items to crawl");
  EXPECT_EQ(c.request("lru_crawler metadump all"), "END");
}

// Disabled, the crawler leaves expired items to lookups; enabled again, it
// takes them out without one.
TEST_F(TextE2e, LruCrawlerEnableResumesReclaimingExpiredItems) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.request("lru_crawler disable"), "OK");
  for (const char* key : {"a", "b", "c"}) {
    // An absolute time long past: expired from the start.
    EXPECT_EQ(c.store("set", key, "v", 0, 60 * 60 * 24 * 30 + 1), "STORED");
  }
  EXPECT_EQ(stat_u64(c.stats(), "curr_items"), 3u);
  EXPECT_EQ(c.request("lru_crawler enable"), "OK");
  EXPECT_TRUE(e2e::eventually([&] { return stat_u64(c.stats(), "curr_items") == 0; }, 10s));
  EXPECT_EQ(stat_u64(c.stats(), "crawler_reclaimed"), 3u);
  EXPECT_EQ(stat_u64(c.stats(), "get_expired"), 0u);  // no lookup found them
}

// memcached's `lru`: its segmented LRU's settings, checked as memcached
// checks them; accepted ones change nothing here (one CLOCK hand per shard).
TEST_F(TextE2e, LruCommandsAnswerAsMemcached) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.request("lru mode flat"), "OK");
  EXPECT_EQ(c.request("lru mode segmented"), "OK");
  EXPECT_EQ(c.request("lru mode sideways"), "ERROR");
  EXPECT_EQ(c.request("lru tune 10 20 0.1 2.0"), "OK");
  EXPECT_EQ(c.request("lru tune 50 40 0.1 2.0"), "ERROR hot and warm pcts must not exceed 80");
  EXPECT_EQ(c.request("lru tune 10 20 0 2.0"), "ERROR hot/warm age factors must be greater than 0");
  EXPECT_EQ(c.request("lru tune 10 20 x 2.0"), "ERROR");
  EXPECT_EQ(c.request("lru tune 10 20 0.1"), "ERROR");
  EXPECT_EQ(c.request("lru temp_ttl 60"), "OK");
  EXPECT_EQ(c.request("lru temp_ttl -1"), "OK");
  EXPECT_EQ(c.request("lru temp_ttl x"), "ERROR");
  EXPECT_EQ(c.request("lru target_asyncq 5"), "ERROR");  // extstore's, not in Debian's build
  EXPECT_EQ(c.request("lru"), "ERROR");
  ASSERT_TRUE(c.send("lru mode flat noreply\r\n"));
  EXPECT_TRUE(c.request("version").starts_with("VERSION "));
}

TEST_F(TextE2e, KeysLongerThan250BytesAreRejected) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  std::string longest(250, 'k');
  EXPECT_EQ(c.store("set", longest, "ok"), "STORED");
  EXPECT_EQ(c.get(longest), "ok");

  std::string too_long(251, 'k');
  EXPECT_EQ(c.request("get " + too_long), "CLIENT_ERROR bad command line format");
  // The command line is refused; its data line is then read as a command.
  ASSERT_TRUE(c.send(store_bytes("set", too_long, "x")));
  EXPECT_EQ(c.read_line(), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(c.read_line(), "ERROR");
  EXPECT_TRUE(c.request("version").starts_with("VERSION "));
}

TEST_F(TextE2e, MalformedStorageCommandsAreRejected) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.request("set k 0 0 -1"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(c.request("set k abc 0 1"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(c.request("set k 0 abc 1"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(c.request("set k 0 0 abc"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(c.request("cas k 0 0 1 abc"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(c.get("k"), std::nullopt);

  // A data block longer than announced.
  ASSERT_TRUE(c.send("set k 0 0 3\r\nabcde\r\n"));
  EXPECT_EQ(c.read_line(), "CLIENT_ERROR bad data chunk");
  EXPECT_EQ(c.read_line(), "ERROR");  // the leftover "\r\n" is an empty command
  EXPECT_EQ(c.get("k"), std::nullopt);
  EXPECT_EQ(c.store("set", "k", "fine"), "STORED");
  EXPECT_EQ(c.get("k"), "fine");
}

TEST_F(TextE2e, HttpRequestLineClosesTheConnection) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nversion\r\n"));
  EXPECT_TRUE(c.wait_for_close());
  EXPECT_EQ(c.buffered(), "");
}

// ---------------------------------------------------------------------------
// noreply, pipelining, fragmentation.

TEST_F(TextE2e, NoreplySuppressesEveryReply) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  std::string bytes = store_bytes("set", "n", "1", 0, 0, "noreply") +
                      store_bytes("add", "n", "2", 0, 0, "noreply") +      // not stored
                      store_bytes("replace", "n", "3", 0, 0, "noreply") +  // "3"
                      store_bytes("append", "n", "4", 0, 0, "noreply") +   // "34"
                      store_bytes("prepend", "n", "5", 0, 0, "noreply") +  // "534"
                      "incr n 2 noreply\r\n"                               // "536"
                      "decr n 1 noreply\r\n"                               // "535"
                      "touch n 0 noreply\r\n" +
                      store_bytes("cas", "n", "x", 0, 0, "1 noreply") +  // EXISTS, silent
                      "verbosity 1 noreply\r\n"
                      "get n\r\n";
  ASSERT_TRUE(c.send(bytes));
  EXPECT_EQ(c.read_values(), (std::vector<Value>{{"n", 0, "535", std::nullopt}}));

  ASSERT_TRUE(c.send("delete n noreply\r\ndelete n 0 noreply\r\nget n\r\n"));
  EXPECT_EQ(c.read_line(), "END");
  EXPECT_EQ(c.store("set", "m", "v"), "STORED");
  ASSERT_TRUE(c.send("flush_all noreply\r\nget m\r\n"));
  EXPECT_EQ(c.read_line(), "END");
  EXPECT_TRUE(c.request("version").starts_with("VERSION "));
  EXPECT_EQ(c.buffered(), "");
}

TEST_F(TextE2e, ThousandPipelinedRequestsInOneWriteAreAnsweredInOrder) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("set", "seq", "0"), "STORED");
  // 250 rounds of set / get / incr / delete: 1000 requests, one send().
  std::string requests;
  std::string expected;
  for (int i = 0; i < 250; ++i) {
    std::string key = "pipe_" + std::to_string(i);
    std::string value = "value_" + std::to_string(i * 7);
    requests += store_bytes("set", key, value, static_cast<uint32_t>(i));
    expected += "STORED\r\n";
    requests += "get " + key + "\r\n";
    expected += "VALUE " + key + " " + std::to_string(i) + " " + std::to_string(value.size()) +
                "\r\n" + value + "\r\nEND\r\n";
    requests += "incr seq 1\r\n";
    expected += std::to_string(i + 1) + "\r\n";
    requests += "delete " + key + "\r\n";
    expected += "DELETED\r\n";
  }
  ASSERT_TRUE(c.send(requests));
  std::optional<std::string> replies = c.read_exactly(expected.size());
  ASSERT_TRUE(replies.has_value()) << c.last_error();
  if (*replies != expected) {
    size_t at =
        std::mismatch(replies->begin(), replies->end(), expected.begin()).first - replies->begin();
    ADD_FAILURE() << "replies differ at byte " << at << ": got \""
                  << e2e::escape(replies->substr(at > 40 ? at - 40 : 0), 120) << "\", expected \""
                  << e2e::escape(expected.substr(at > 40 ? at - 40 : 0), 120) << "\"";
  }
  EXPECT_EQ(c.get("seq"), "250");
  EXPECT_EQ(c.buffered(), "");
}

TEST_F(TextE2e, ThousandPipelinedGetsAreAnsweredInOrder) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  std::string sets;
  for (int i = 0; i < 1000; ++i) {
    sets += store_bytes("set", "k" + std::to_string(i), std::to_string(i * i));
  }
  ASSERT_TRUE(c.send(sets));
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(c.read_line(), "STORED") << "set #" << i;

  std::string gets;
  for (int i = 0; i < 1000; ++i)
    gets += "get k" + std::to_string(i) + "\r\n";
  ASSERT_TRUE(c.send(gets));
  for (int i = 0; i < 1000; ++i) {
    std::string key = "k" + std::to_string(i);
    ASSERT_EQ(c.read_values(), (std::vector<Value>{{key, 0, std::to_string(i * i), std::nullopt}}))
        << "get #" << i << ": " << c.last_error();
  }
}

TEST_F(TextE2e, RequestSentOneBytePerSendIsAnswered) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  c.set_nodelay();
  std::string bytes =
      "set slow 42 0 10\r\nhello\r\nyou\r\nget slow\r\nincr n 1\r\ngets slow nothing\r\n";
  for (char byte : bytes)
    ASSERT_TRUE(c.send(std::string_view(&byte, 1))) << c.last_error();
  EXPECT_EQ(c.read_line(), "STORED");
  EXPECT_EQ(c.read_values(), (std::vector<Value>{{"slow", 42, "hello\r\nyou", std::nullopt}}));
  EXPECT_EQ(c.read_line(), "NOT_FOUND");
  std::optional<std::vector<Value>> values = c.read_values();
  ASSERT_TRUE(values && values->size() == 1) << c.last_error();
  EXPECT_EQ((*values)[0].data, "hello\r\nyou");
  EXPECT_TRUE((*values)[0].cas.has_value());
}

// ---------------------------------------------------------------------------
// Sizes and limits.

TEST(TextStandaloneE2e, OneMebibyteValueRoundTripsIntact) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--threads=2", "--max_item_size=2097152"}));
  Client writer;
  Client reader;
  ASSERT_TRUE(writer.connect(server.port()));
  ASSERT_TRUE(reader.connect(server.port()));
  const std::string data = random_bytes(1 << 20, 12345);
  EXPECT_EQ(writer.store("set", "big", data, 77), "STORED");

  // Twice in one request, on another connection.
  ASSERT_TRUE(reader.send("get big big\r\n"));
  std::optional<std::vector<Value>> values = reader.read_values(30s);
  ASSERT_TRUE(values.has_value()) << reader.last_error();
  ASSERT_EQ(values->size(), 2u);
  for (const Value& value : *values) {
    EXPECT_EQ(value.key, "big");
    EXPECT_EQ(value.flags, 77u);
    EXPECT_EQ(value.data.size(), data.size());
    EXPECT_EQ(fnv1a(value.data), fnv1a(data));
    EXPECT_TRUE(value.data == data) << "1 MiB value differs from what was stored";
  }
}

TEST(TextStandaloneE2e, LargeRepliesToPipelinedGetsArriveIntact) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--threads=2"}));
  Client c;
  ASSERT_TRUE(c.connect(server.port()));
  const std::string data = random_bytes(512 * 1024, 777);
  EXPECT_EQ(c.store("set", "half", data), "STORED");
  // 64 x 512 KiB of replies: far more than socket buffers and the server's
  // cap on queued output, so it must pause and resume this connection.
  ASSERT_TRUE(c.send(repeat("get half\r\n", 64) + "version\r\n"));
  for (int i = 0; i < 64; ++i) {
    std::optional<std::vector<Value>> values = c.read_values(30s);
    ASSERT_TRUE(values.has_value()) << "reply #" << i << ": " << c.last_error();
    ASSERT_EQ(values->size(), 1u);
    ASSERT_EQ(fnv1a((*values)[0].data), fnv1a(data)) << "reply #" << i;
  }
  EXPECT_TRUE(c.read_line().starts_with("VERSION "));
}

TEST(TextStandaloneE2e, ValueOverMaxItemSizeIsRefusedAndItsDataSwallowed) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--threads=2", "--max_item_size=1024"}));
  Client c;
  ASSERT_TRUE(c.connect(server.port()));
  EXPECT_EQ(c.store("set", "big", "small"), "STORED");

  // The refused data consists of commands: were it parsed rather than
  // skipped, they would be answered.
  std::string data = repeat("version\r\n", 500);
  ASSERT_GT(data.size(), 1024u);
  ASSERT_TRUE(c.send(store_bytes("set", "big", data) + "get big\r\n"));
  EXPECT_EQ(c.read_line(), "SERVER_ERROR object too large for cache");
  // A failed set also drops the old value (as memcached: no stale data).
  EXPECT_EQ(c.read_line(), "END");
  EXPECT_TRUE(c.request("version").starts_with("VERSION "));

  // The same with a 2 MB block arriving over many reads. (The reply may come
  // before or after the block; memcached sends it after.)
  std::string huge = repeat("version\r\n", 2'000'000 / 9);
  c.set_nodelay();
  ASSERT_TRUE(c.send("set huge 0 0 " + std::to_string(huge.size()) + "\r\n"));
  ASSERT_TRUE(c.send(huge.substr(0, 1000)));
  ASSERT_TRUE(c.send(huge.substr(1000) + "\r\n"));
  EXPECT_EQ(c.read_line(), "SERVER_ERROR object too large for cache");
  EXPECT_EQ(c.get("huge"), std::nullopt);
  EXPECT_EQ(c.store("set", "after", "ok"), "STORED");
  EXPECT_EQ(c.get("after"), "ok");

  // noreply: refused silently, still swallowed.
  ASSERT_TRUE(c.send(store_bytes("set", "quiet", data, 0, 0, "noreply") + "get quiet\r\n"));
  EXPECT_EQ(c.read_line(), "END");

  // Other storage commands are refused alike, and leave the old value alone
  // (memcached 1.6.18 does the same).
  EXPECT_EQ(c.store("set", "kept", "old"), "STORED");
  EXPECT_EQ(c.store("append", "kept", data), "SERVER_ERROR object too large for cache");
  EXPECT_EQ(c.store("add", "kept", data), "SERVER_ERROR object too large for cache");
  EXPECT_EQ(c.get("kept"), "old");
  // An append whose result would be too large is not stored.
  EXPECT_EQ(c.store("set", "grow", std::string(900, 'g')), "STORED");
  EXPECT_EQ(c.store("append", "grow", std::string(200, 'h')), "NOT_STORED");
  EXPECT_EQ(c.get("grow"), std::string(900, 'g'));
  EXPECT_EQ(c.buffered(), "");
}

TEST_F(TextE2e, LongLineWithoutNewlineIsRefusedAndClosed) {
  Client c;
  Client other;
  ASSERT_TRUE(c.connect(port()));
  ASSERT_TRUE(other.connect(port()));
  ASSERT_TRUE(c.send("set " + std::string(3000, 'a')));
  EXPECT_EQ(c.read_line(), "CLIENT_ERROR line too long");
  EXPECT_TRUE(c.wait_for_close());
  EXPECT_TRUE(other.request("version").starts_with("VERSION "));
}

TEST_F(TextE2e, HundredKeyMultiGetLongerThanTheLineLimitWorks) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  c.set_nodelay();
  std::vector<std::string> keys;
  std::string sets;
  for (int i = 0; i < 100; ++i) {
    keys.push_back("multiget_key_number_" + std::to_string(1000 + i));
    sets += store_bytes("set", keys.back(), "value_" + std::to_string(i), static_cast<uint32_t>(i));
  }
  ASSERT_TRUE(c.send(sets));
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(c.read_line(), "STORED");

  std::string line = "get";
  std::vector<Value> expected;
  for (int i = 0; i < 100; ++i) {
    line += " " + keys[i];
    expected.push_back({keys[i], static_cast<uint32_t>(i), "value_" + std::to_string(i), {}});
  }
  ASSERT_GT(line.size(), 2048u);
  // Whole, then with the newline in a later packet (the server sees an
  // over-long line without newline first, which is fine for a get).
  ASSERT_TRUE(c.send(line + "\r\n"));
  EXPECT_EQ(c.read_values(), expected);
  ASSERT_TRUE(c.send(line));
  ASSERT_TRUE(c.send("\r\n"));
  EXPECT_EQ(c.read_values(), expected);

  std::string gets_line = "gets" + line.substr(3);
  ASSERT_TRUE(c.send(gets_line + "\r\n"));
  std::optional<std::vector<Value>> with_cas = c.read_values();
  ASSERT_TRUE(with_cas.has_value()) << c.last_error();
  EXPECT_EQ(with_cas->size(), 100u);
  EXPECT_TRUE(c.request("version").starts_with("VERSION "));
}

// ---------------------------------------------------------------------------
// Expiry.

TEST_F(TextE2e, ItemWithOneSecondExptimeDisappears) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("set", "short", "lived", 0, 1), "STORED");
  EXPECT_EQ(c.store("set", "long", "lived", 0, 0), "STORED");
  EXPECT_TRUE(e2e::eventually([&] { return !c.get("short"); }, 5s, 100ms));
  EXPECT_EQ(c.get("long"), "lived");
}

TEST_F(TextE2e, NegativeOrPastExptimeIsNeverVisible) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_EQ(c.store("set", "neg", "v", 0, -1), "STORED");
  EXPECT_EQ(c.get("neg"), std::nullopt);

  // Overwriting with a negative exptime removes the old value too.
  EXPECT_EQ(c.store("set", "old", "v"), "STORED");
  EXPECT_EQ(c.store("set", "old", "w", 0, -1), "STORED");
  EXPECT_EQ(c.get("old"), std::nullopt);

  // An expired item does not block add.
  EXPECT_EQ(c.store("add", "added", "v", 0, -1), "STORED");
  EXPECT_EQ(c.get("added"), std::nullopt);
  EXPECT_EQ(c.store("add", "added", "w"), "STORED");
  EXPECT_EQ(c.get("added"), "w");

  // More than 30 days is an absolute unix time.
  int64_t now = static_cast<int64_t>(::time(nullptr));
  EXPECT_EQ(c.store("set", "past", "v", 0, now - 100), "STORED");
  EXPECT_EQ(c.get("past"), std::nullopt);
  EXPECT_EQ(c.store("set", "future", "v", 0, now + 3600), "STORED");
  EXPECT_EQ(c.get("future"), "v");
  // Exactly 30 days is still relative.
  EXPECT_EQ(c.store("set", "month", "v", 0, 60 * 60 * 24 * 30), "STORED");
  EXPECT_EQ(c.get("month"), "v");
}

// ---------------------------------------------------------------------------
// Connections.

TEST(TextStandaloneE2e, ConnectionsPastMaxConnectionsAreRefused) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--threads=2", "--max_connections=3"}));
  std::vector<Client> clients(3);
  for (Client& c : clients) {
    ASSERT_TRUE(c.connect(server.port()));
    // A reply proves the server accepted (and counted) it.
    ASSERT_TRUE(c.request("version").starts_with("VERSION ")) << c.last_error();
  }
  std::map<std::string, std::string> before = clients[1].stats();
  uint64_t connections = stat_u64(before, "curr_connections");
  EXPECT_EQ(connections, 3u);

  Client fourth;
  ASSERT_TRUE(fourth.connect(server.port()));
  EXPECT_EQ(fourth.read_line(), "ERROR Too many open connections");
  EXPECT_TRUE(fourth.wait_for_close());
  std::map<std::string, std::string> after = clients[1].stats();
  EXPECT_EQ(stat_u64(after, "rejected_connections"), stat_u64(before, "rejected_connections") + 1);
  EXPECT_EQ(stat_u64(after, "curr_connections"), connections);

  for (Client& c : clients)
    EXPECT_TRUE(c.request("version").starts_with("VERSION "));

  // Once the server has seen one go, a new one is welcome.
  clients[0].close();
  EXPECT_TRUE(e2e::eventually(
      [&] { return stat_u64(clients[1].stats(), "curr_connections") == connections - 1; }));
  Client fifth;
  ASSERT_TRUE(fifth.connect(server.port()));
  EXPECT_TRUE(fifth.request("version").starts_with("VERSION ")) << fifth.last_error();
  EXPECT_EQ(fifth.store("set", "k", "v"), "STORED");
  EXPECT_EQ(clients[2].get("k"), "v");
}

TEST(TextStandaloneE2e, StatsCountConnectionsCommandsAndItems) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--threads=3"}));
  Client observer;
  ASSERT_TRUE(observer.connect(server.port()));
  std::map<std::string, std::string> s0 = observer.stats();
  EXPECT_EQ(stat_u64(s0, "threads"), 3u);

  Client worker;
  ASSERT_TRUE(worker.connect(server.port()));
  ASSERT_TRUE(worker.request("version").starts_with("VERSION "));
  std::map<std::string, std::string> s1 = observer.stats();
  EXPECT_EQ(stat_u64(s1, "curr_connections"), stat_u64(s0, "curr_connections") + 1);
  EXPECT_EQ(stat_u64(s1, "total_connections"), stat_u64(s0, "total_connections") + 1);

  EXPECT_EQ(worker.store("set", "k1", "v1"), "STORED");
  EXPECT_EQ(worker.store("set", "k2", "v2"), "STORED");
  EXPECT_EQ(worker.get("k1"), "v1");                   // 1 hit
  EXPECT_EQ(worker.get("nothing"), std::nullopt);      // 1 miss
  ASSERT_TRUE(worker.send("get k1 k2 nothing2\r\n"));  // 2 hits, 1 miss
  std::optional<std::vector<Value>> values = worker.read_values();
  ASSERT_TRUE(values.has_value()) << worker.last_error();
  EXPECT_EQ(values->size(), 2u);
  std::map<std::string, std::string> s2 = observer.stats();
  EXPECT_EQ(stat_u64(s2, "cmd_get"), stat_u64(s1, "cmd_get") + 5);
  EXPECT_EQ(stat_u64(s2, "get_hits"), stat_u64(s1, "get_hits") + 3);
  EXPECT_EQ(stat_u64(s2, "get_misses"), stat_u64(s1, "get_misses") + 2);
  EXPECT_EQ(stat_u64(s2, "cmd_set"), stat_u64(s1, "cmd_set") + 2);
  EXPECT_EQ(stat_u64(s2, "curr_items"), stat_u64(s1, "curr_items") + 2);
  EXPECT_EQ(stat_u64(s2, "total_items"), stat_u64(s1, "total_items") + 2);

  EXPECT_EQ(worker.request("delete k2"), "DELETED");
  EXPECT_EQ(worker.request("delete k2"), "NOT_FOUND");
  EXPECT_EQ(worker.request("incr k1 1"),
            "CLIENT_ERROR cannot increment or decrement non-numeric value");
  EXPECT_EQ(worker.request("incr none 1"), "NOT_FOUND");
  EXPECT_EQ(worker.request("touch k1 0"), "TOUCHED");
  std::map<std::string, std::string> s3 = observer.stats();
  EXPECT_EQ(stat_u64(s3, "curr_items"), stat_u64(s1, "curr_items") + 1);
  EXPECT_EQ(stat_u64(s3, "delete_hits"), stat_u64(s2, "delete_hits") + 1);
  EXPECT_EQ(stat_u64(s3, "delete_misses"), stat_u64(s2, "delete_misses") + 1);
  EXPECT_EQ(stat_u64(s3, "incr_misses"), stat_u64(s2, "incr_misses") + 1);
  EXPECT_EQ(stat_u64(s3, "touch_hits"), stat_u64(s2, "touch_hits") + 1);
  EXPECT_EQ(stat_u64(s3, "cmd_touch"), stat_u64(s2, "cmd_touch") + 1);

  worker.close();
  EXPECT_TRUE(e2e::eventually([&] {
    return stat_u64(observer.stats(), "curr_connections") == stat_u64(s0, "curr_connections");
  }));
  EXPECT_EQ(stat_u64(observer.stats(), "total_connections"), stat_u64(s0, "total_connections") + 1);
}

TEST(TextStandaloneE2e, WritesAreVisibleOnEveryConnectionAcrossThreads) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--threads=4"}));
  constexpr int kConnections = 16;
  std::vector<Client> clients(kConnections);
  for (Client& c : clients)
    ASSERT_TRUE(c.connect(server.port()));

  // Each write is read back at once on the next connection.
  for (int i = 0; i < kConnections; ++i) {
    std::string key = "shared_" + std::to_string(i);
    std::string value = "written_by_" + std::to_string(i);
    ASSERT_EQ(clients[i].store("set", key, value, static_cast<uint32_t>(i)), "STORED");
    EXPECT_EQ(clients[(i + 1) % kConnections].get(key), value) << key;
  }
  std::string line = "get";
  std::vector<Value> expected;
  for (int i = 0; i < kConnections; ++i) {
    line += " shared_" + std::to_string(i);
    expected.push_back({"shared_" + std::to_string(i), static_cast<uint32_t>(i),
                        "written_by_" + std::to_string(i), std::nullopt});
  }
  for (Client& c : clients) {
    ASSERT_TRUE(c.send(line + "\r\n"));
    EXPECT_EQ(c.read_values(), expected) << c.last_error();
  }
  // Updates and deletes too.
  EXPECT_EQ(clients[3].store("append", "shared_0", "+3"), "STORED");
  EXPECT_EQ(clients[9].get("shared_0"), "written_by_0+3");
  EXPECT_EQ(clients[5].request("delete shared_1"), "DELETED");
  EXPECT_EQ(clients[12].get("shared_1"), std::nullopt);
}

TEST(TextStandaloneE2e, ConcurrentIncrementsFromManyConnectionsAreAtomic) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--threads=4"}));
  constexpr int kThreads = 8;
  constexpr int kIncrements = 500;
  Client setup;
  ASSERT_TRUE(setup.connect(server.port()));
  ASSERT_EQ(setup.store("set", "counter", "0"), "STORED");

  std::vector<Client> clients(kThreads);
  for (Client& c : clients)
    ASSERT_TRUE(c.connect(server.port()));
  std::vector<std::vector<uint64_t>> results(kThreads);
  std::vector<std::string> errors(kThreads);
  std::latch go(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      go.arrive_and_wait();
      for (int i = 0; i < kIncrements; ++i) {
        std::string reply = clients[t].request("incr counter 1");
        uint64_t value = 0;
        auto [end, error] = std::from_chars(reply.data(), reply.data() + reply.size(), value);
        if (error != std::errc() || end != reply.data() + reply.size()) {
          errors[t] = "incr #" + std::to_string(i) + " answered \"" + reply + "\"";
          return;
        }
        results[t].push_back(value);
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (const std::string& error : errors)
    EXPECT_EQ(error, "");

  // Every increment saw a distinct value: exactly 1..4000 between them.
  std::vector<uint64_t> all;
  for (const auto& r : results)
    all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end());
  std::vector<uint64_t> expected(kThreads * kIncrements);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_TRUE(all == expected) << all.size() << " results, " << (all.empty() ? 0 : all.back())
                               << " the largest";
  std::optional<std::string> final_value = setup.get("counter");
  ASSERT_TRUE(final_value.has_value());
  EXPECT_EQ(*final_value, std::to_string(kThreads * kIncrements));
}

TEST(TextStandaloneE2e, ConcurrentAppendsLoseNothing) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--threads=4"}));
  constexpr int kThreads = 8;
  constexpr int kAppends = 100;
  Client setup;
  ASSERT_TRUE(setup.connect(server.port()));
  ASSERT_EQ(setup.store("set", "log", ""), "STORED");

  std::vector<Client> clients(kThreads);
  for (Client& c : clients)
    ASSERT_TRUE(c.connect(server.port()));
  std::vector<std::string> errors(kThreads);
  std::latch go(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      go.arrive_and_wait();
      for (int i = 0; i < kAppends; ++i) {
        // Fixed-width records: "t:iii;".
        char record[32];  // roomy: GCC checks the format against int ranges
        std::snprintf(record, sizeof record, "%d:%03d;", t, i);
        std::string reply = clients[t].store(i % 2 == 0 ? "append" : "prepend", "log", record);
        if (reply != "STORED") {
          errors[t] = "record " + std::string(record) + " answered \"" + reply + "\"";
          return;
        }
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (const std::string& error : errors)
    EXPECT_EQ(error, "");

  std::optional<std::string> log = setup.get("log");
  ASSERT_TRUE(log.has_value());
  ASSERT_EQ(log->size(), size_t{kThreads * kAppends * 6});
  std::vector<std::string> records;
  for (size_t at = 0; at < log->size(); at += 6)
    records.push_back(log->substr(at, 6));
  std::sort(records.begin(), records.end());
  std::vector<std::string> expected;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kAppends; ++i) {
      char record[32];
      std::snprintf(record, sizeof record, "%d:%03d;", t, i);
      expected.push_back(record);
    }
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_TRUE(records == expected) << "records lost, torn or duplicated: " << e2e::escape(*log);
}

// Readers racing with writers of large values see one whole value or another,
// never a mix.
TEST(TextStandaloneE2e, ConcurrentOverwritesNeverShowTornValues) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--threads=4"}));
  constexpr int kWriters = 4;
  constexpr int kReaders = 4;
  constexpr int kRounds = 100;
  constexpr size_t kSize = 64 * 1024;
  Client setup;
  ASSERT_TRUE(setup.connect(server.port()));
  ASSERT_EQ(setup.store("set", "shared", std::string(kSize, 'a')), "STORED");

  std::vector<Client> clients(kWriters + kReaders);
  for (Client& c : clients)
    ASSERT_TRUE(c.connect(server.port()));
  std::vector<std::string> errors(clients.size());
  std::latch go(static_cast<std::ptrdiff_t>(clients.size()));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < clients.size(); ++t) {
    threads.emplace_back([&, t] {
      go.arrive_and_wait();
      for (int i = 0; i < kRounds && errors[t].empty(); ++i) {
        if (t < kWriters) {
          char fill = static_cast<char>('b' + (t * kRounds + i) % 24);
          std::string reply = clients[t].store("set", "shared", std::string(kSize, fill));
          if (reply != "STORED") errors[t] = "set answered \"" + reply + "\"";
          continue;
        }
        if (!clients[t].send("get shared\r\n")) {
          errors[t] = clients[t].last_error();
          continue;
        }
        std::optional<std::vector<Value>> values = clients[t].read_values();
        if (!values || values->size() != 1) {
          errors[t] = "get: " + clients[t].last_error();
          continue;
        }
        const std::string& data = (*values)[0].data;
        if (data.size() != kSize || data.find_first_not_of(data[0]) != std::string::npos) {
          errors[t] = "torn value: " + e2e::escape(data, 60);
        }
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (const std::string& error : errors)
    EXPECT_EQ(error, "");
}

// ---------------------------------------------------------------------------
// Shutdown and misbehaving clients.

class SignalShutdownE2e : public ::testing::TestWithParam<int> {};

TEST_P(SignalShutdownE2e, ExitsZeroPromptlyWithIdleClientsConnected) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--threads=2"}));
  std::vector<Client> clients(4);
  for (Client& c : clients) {
    ASSERT_TRUE(c.connect(server.port()));
    ASSERT_TRUE(c.request("version").starts_with("VERSION ")) << c.last_error();
  }
  EXPECT_EQ(clients[0].store("set", "k", "v"), "STORED");
  // One client is half-way through a command.
  ASSERT_TRUE(clients[3].send("set partial 0 0 10\r\nabc"));
  ASSERT_TRUE(clients[3].send("de"));
  // One has asked for 32 MiB of replies and reads none of them.
  EXPECT_EQ(clients[1].store("set", "big", std::string(512 * 1024, 'b')), "STORED");
  ASSERT_TRUE(clients[2].send(repeat("get big\r\n", 64)));
  EXPECT_EQ(clients[0].get("k"), "v");  // the server has moved on since

  std::optional<int> status = server.stop(GetParam(), 5s);
  ASSERT_TRUE(status.has_value()) << "still running 5 s after " << strsignal(GetParam());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << e2e::describe_wait_status(status);
  for (Client& c : clients)
    EXPECT_TRUE(c.wait_for_close());
}

INSTANTIATE_TEST_SUITE_P(Signals, SignalShutdownE2e, ::testing::Values(SIGTERM, SIGINT),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == SIGTERM ? "SIGTERM" : "SIGINT");
                         });

TEST_F(TextE2e, ClientsLeavingMidRequestDoNotDisturbOthers) {
  Client observer;
  ASSERT_TRUE(observer.connect(port()));
  uint64_t baseline = stat_u64(observer.stats(), "curr_connections");

  // Orderly close half-way through a data block.
  Client half_value;
  ASSERT_TRUE(half_value.connect(port()));
  ASSERT_TRUE(half_value.send("set torn 0 0 100\r\n" + std::string(50, 'x')));
  // Reset half-way through a data block.
  Client reset_value;
  ASSERT_TRUE(reset_value.connect(port()));
  ASSERT_TRUE(reset_value.send("set torn2 0 0 100\r\n" + std::string(50, 'y')));
  // Reset half-way through a command line.
  Client half_line;
  ASSERT_TRUE(half_line.connect(port()));
  ASSERT_TRUE(half_line.send("get torn torn2 whatev"));
  // Each leaves right after sending: the server may see the bytes and the
  // end of the stream in one read or in two, and must drop the torn request.
  half_value.close();
  reset_value.abort();
  half_line.abort();

  EXPECT_TRUE(observer.request("version").starts_with("VERSION "));
  EXPECT_EQ(observer.get("torn"), std::nullopt);
  EXPECT_EQ(observer.get("torn2"), std::nullopt);
  EXPECT_EQ(observer.store("set", "after", "ok"), "STORED");
  EXPECT_EQ(observer.get("after"), "ok");
  EXPECT_TRUE(
      e2e::eventually([&] { return stat_u64(observer.stats(), "curr_connections") == baseline; }));

  Client fresh;
  ASSERT_TRUE(fresh.connect(port()));
  EXPECT_EQ(fresh.get("after"), "ok");
}

TEST_F(TextE2e, ClientThatStopsReadingAndLeavesDoesNotDisturbOthers) {
  Client observer;
  ASSERT_TRUE(observer.connect(port()));
  const std::string data = random_bytes(512 * 1024, 99);
  EXPECT_EQ(observer.store("set", "big", data), "STORED");
  uint64_t baseline = stat_u64(observer.stats(), "curr_connections");

  // 32 MiB of replies that are never read, then a reset.
  Client hog;
  ASSERT_TRUE(hog.connect(port()));
  ASSERT_TRUE(hog.send(repeat("get big\r\n", 64)));
  // The server is busy with hog's output; others must still be served.
  EXPECT_TRUE(observer.request("version").starts_with("VERSION "));
  EXPECT_EQ(observer.store("set", "small", "v"), "STORED");
  EXPECT_EQ(observer.get("small"), "v");
  hog.abort();

  std::optional<std::string> value = observer.get("big");
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(fnv1a(*value), fnv1a(data));
  EXPECT_TRUE(
      e2e::eventually([&] { return stat_u64(observer.stats(), "curr_connections") == baseline; }));
}

TEST(TextStandaloneE2e, InvalidFlagsMakeTheServerExitWithUsageError) {
  ServerProcess server;
  EXPECT_FALSE(server.start({"--threads=-1"}));
  std::optional<int> status = server.wait_for_exit(0ms);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 64)
      << e2e::describe_wait_status(status);
  EXPECT_NE(server.log().find("--threads"), std::string::npos) << server.log();
}

}  // namespace
