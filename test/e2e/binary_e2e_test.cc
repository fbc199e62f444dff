// End-to-end tests of the memcached binary protocol: the real lockcached
// binary, spoken to over TCP on 127.0.0.1 with hand-built packets (24-byte
// header, magic 0x80 for requests and 0x81 for replies, big-endian fields).
//
// Expected replies follow memcached's protocol_binary.h and, where the binary
// protocol document is silent, what memcached 1.6.18 answers to the same
// bytes (its error texts, GetK misses carrying the key, Touch answering the
// flags, a too-large Set dropping the old value, ...).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "binary_client.h"
#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::ServerProcess;

// op::, st::, the codec and BinClient: binary_client.h.
using namespace e2e::binary;

uint64_t rss_kb(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream words(line.substr(field.size() + 1));
      uint64_t kb = 0;
      words >> kb;
      return kb;
    }
  }
  ADD_FAILURE() << "no " << field << " in /proc/" << pid << "/status";
  return 0;
}

class BinaryE2e : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start({"--threads=2"})); }
  uint16_t port() const { return server_.port(); }

  ServerProcess server_;
};

// ---------------------------------------------------------------------------
// Get, GetQ, GetK, GetKQ

TEST_F(BinaryE2e, GetFamilyAnswersHitsAndMisses) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  uint64_t cas = c.set("k", "value", 0xdeadbeef);
  ASSERT_NE(cas, 0u);

  Response get = c.call(op::kGet, "k");
  EXPECT_EQ(get.status, st::kSuccess);
  EXPECT_EQ(get.extras, be32(0xdeadbeef));
  EXPECT_EQ(get.key, "");
  EXPECT_EQ(get.value, "value");
  EXPECT_EQ(get.cas, cas);

  Response getk = c.call(op::kGetK, "k");
  EXPECT_EQ(getk.status, st::kSuccess);
  EXPECT_EQ(getk.extras, be32(0xdeadbeef));
  EXPECT_EQ(getk.key, "k");
  EXPECT_EQ(getk.value, "value");
  EXPECT_EQ(getk.cas, cas);

  // Misses: Get says "Not found"; GetK carries the key instead (memcached).
  Response miss = c.call(op::kGet, "missing");
  EXPECT_EQ(miss.status, st::kNotFound);
  EXPECT_EQ(miss.extras, "");
  EXPECT_EQ(miss.value, "Not found");
  EXPECT_EQ(miss.cas, 0u);
  Response missk = c.call(op::kGetK, "missing");
  EXPECT_EQ(missk.status, st::kNotFound);
  EXPECT_EQ(missk.extras, "");
  EXPECT_EQ(missk.key, "missing");
  EXPECT_EQ(missk.value, "");

  // Quiet: hits answered, misses silent; the classic pipelined multi-get.
  c.send(op::kGetQ, "missing");
  c.send(op::kGetKQ, "missing2");
  uint32_t hit_q = c.send(op::kGetQ, "k");
  uint32_t hit_kq = c.send(op::kGetKQ, "k");
  Response q = c.expect_reply(op::kGetQ, hit_q);
  EXPECT_EQ(q.status, st::kSuccess);
  EXPECT_EQ(q.key, "");
  EXPECT_EQ(q.value, "value");
  EXPECT_EQ(q.extras, be32(0xdeadbeef));
  Response kq = c.expect_reply(op::kGetKQ, hit_kq);
  EXPECT_EQ(kq.status, st::kSuccess);
  EXPECT_EQ(kq.key, "k");
  EXPECT_EQ(kq.value, "value");
  EXPECT_TRUE(c.noop_is_next());
}

TEST_F(BinaryE2e, ValuesAreBinarySafeAndLarge) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  std::string all_bytes;
  for (int i = 0; i < 256; ++i)
    all_bytes += static_cast<char>(i);
  std::string big;
  for (size_t i = 0; i < 700 * 1024; ++i)
    big += static_cast<char>((i * 7919) >> 3);
  c.set("bytes", all_bytes);
  c.set("big", big, 1);
  c.set("empty", "");
  EXPECT_EQ(c.call(op::kGet, "bytes").value, all_bytes);
  Response r = c.call(op::kGet, "big");
  EXPECT_EQ(r.value.size(), big.size());
  EXPECT_TRUE(r.value == big);
  Response e = c.call(op::kGet, "empty");
  EXPECT_EQ(e.status, st::kSuccess);
  EXPECT_EQ(e.value, "");
  // A 250-byte key is the longest allowed.
  std::string key250(250, 'x');
  c.set(key250, "long key");
  EXPECT_EQ(c.call(op::kGetK, key250).key, key250);
}

// ---------------------------------------------------------------------------
// Set, Add, Replace and their quiet forms

TEST_F(BinaryE2e, SetAddReplaceFollowMemcachedRules) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  Response set1 = c.call(op::kSet, "k", store_extras(1, 0), "v1");
  EXPECT_EQ(set1.status, st::kSuccess);
  EXPECT_NE(set1.cas, 0u);
  EXPECT_EQ(set1.extras, "");
  EXPECT_EQ(set1.value, "");
  Response set2 = c.call(op::kSet, "k", store_extras(2, 0), "v2");
  EXPECT_EQ(set2.status, st::kSuccess);
  EXPECT_NE(set2.cas, set1.cas);
  EXPECT_EQ(c.call(op::kGet, "k").cas, set2.cas);

  // Add: only missing keys.
  Response add_existing = c.call(op::kAdd, "k", store_extras(0, 0), "x");
  EXPECT_EQ(add_existing.status, st::kExists);
  EXPECT_EQ(add_existing.value, "Data exists for key.");
  Response add_new = c.call(op::kAdd, "new", store_extras(3, 0), "n");
  EXPECT_EQ(add_new.status, st::kSuccess);
  EXPECT_NE(add_new.cas, 0u);

  // Replace: only existing keys.
  Response replace_missing = c.call(op::kReplace, "nope", store_extras(0, 0), "x");
  EXPECT_EQ(replace_missing.status, st::kNotFound);
  EXPECT_EQ(replace_missing.value, "Not found");
  Response replace = c.call(op::kReplace, "k", store_extras(4, 0), "v3");
  EXPECT_EQ(replace.status, st::kSuccess);
  Response after = c.call(op::kGet, "k");
  EXPECT_EQ(after.value, "v3");
  EXPECT_EQ(after.extras, be32(4));
  EXPECT_EQ(after.cas, replace.cas);

  // A CAS in the header makes any of them a compare-and-swap.
  Response wrong_cas = c.call(op::kSet, "k", store_extras(0, 0), "bad", replace.cas + 1000);
  EXPECT_EQ(wrong_cas.status, st::kExists);
  EXPECT_EQ(c.call(op::kGet, "k").value, "v3");
  Response right_cas = c.call(op::kSet, "k", store_extras(0, 0), "v4", replace.cas);
  EXPECT_EQ(right_cas.status, st::kSuccess);
  EXPECT_NE(right_cas.cas, replace.cas);
  EXPECT_EQ(c.call(op::kReplace, "k", store_extras(0, 0), "bad", replace.cas).status, st::kExists);
  EXPECT_EQ(c.call(op::kSet, "nope", store_extras(0, 0), "x", 12345).status, st::kNotFound);
  EXPECT_EQ(c.call(op::kGet, "k").value, "v4");

  // Quiet forms: silent on success, failures still answered.
  c.send(op::kSetQ, "q1", store_extras(0, 0), "a");
  c.send(op::kAddQ, "q2", store_extras(0, 0), "b");
  c.send(op::kReplaceQ, "q1", store_extras(0, 0), "c");
  EXPECT_TRUE(c.noop_is_next());
  uint32_t addq = c.send(op::kAddQ, "q1", store_extras(0, 0), "x");
  uint32_t replaceq = c.send(op::kReplaceQ, "nope", store_extras(0, 0), "x");
  uint32_t setq = c.send(op::kSetQ, "q1", store_extras(0, 0), "x", 999999);
  EXPECT_EQ(c.expect_reply(op::kAddQ, addq).status, st::kExists);
  EXPECT_EQ(c.expect_reply(op::kReplaceQ, replaceq).status, st::kNotFound);
  EXPECT_EQ(c.expect_reply(op::kSetQ, setq).status, st::kExists);
  EXPECT_TRUE(c.noop_is_next());
  EXPECT_EQ(c.call(op::kGet, "q1").value, "c");
  EXPECT_EQ(c.call(op::kGet, "q2").value, "b");
}

// ---------------------------------------------------------------------------
// Append, Prepend

TEST_F(BinaryE2e, AppendAndPrependNeedAnExistingItem) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  Response missing = c.call(op::kAppend, "nope", {}, "x");
  EXPECT_EQ(missing.status, st::kNotStored);
  EXPECT_EQ(missing.value, "Not stored.");
  EXPECT_EQ(c.call(op::kPrepend, "nope", {}, "x").status, st::kNotStored);
  EXPECT_EQ(c.call(op::kGet, "nope").status, st::kNotFound);

  c.set("k", "mid", 77);
  Response append = c.call(op::kAppend, "k", {}, "-end");
  EXPECT_EQ(append.status, st::kSuccess);
  EXPECT_NE(append.cas, 0u);
  EXPECT_EQ(c.call(op::kPrepend, "k", {}, "start-").status, st::kSuccess);
  Response got = c.call(op::kGet, "k");
  EXPECT_EQ(got.value, "start-mid-end");
  EXPECT_EQ(got.extras, be32(77));  // flags kept

  c.send(op::kAppendQ, "k", {}, ">");
  c.send(op::kPrependQ, "k", {}, "<");
  EXPECT_TRUE(c.noop_is_next());
  uint32_t appendq = c.send(op::kAppendQ, "nope", {}, "x");
  uint32_t prependq = c.send(op::kPrependQ, "nope", {}, "x");
  EXPECT_EQ(c.expect_reply(op::kAppendQ, appendq).status, st::kNotStored);
  EXPECT_EQ(c.expect_reply(op::kPrependQ, prependq).status, st::kNotStored);
  EXPECT_TRUE(c.noop_is_next());
  EXPECT_EQ(c.call(op::kGet, "k").value, "<start-mid-end>");
}

// ---------------------------------------------------------------------------
// Delete

TEST_F(BinaryE2e, DeleteWithAndWithoutCas) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  c.set("a", "1");
  Response del = c.call(op::kDelete, "a");
  EXPECT_EQ(del.status, st::kSuccess);
  EXPECT_EQ(del.value, "");
  EXPECT_EQ(c.call(op::kGet, "a").status, st::kNotFound);
  EXPECT_EQ(c.call(op::kDelete, "a").status, st::kNotFound);

  uint64_t cas = c.set("b", "2");
  EXPECT_EQ(c.call(op::kDelete, "b", {}, {}, cas + 1).status, st::kExists);
  EXPECT_EQ(c.call(op::kGet, "b").value, "2");
  EXPECT_EQ(c.call(op::kDelete, "b", {}, {}, cas).status, st::kSuccess);
  EXPECT_EQ(c.call(op::kGet, "b").status, st::kNotFound);

  c.set("c", "3");
  c.send(op::kDeleteQ, "c");
  EXPECT_TRUE(c.noop_is_next());
  EXPECT_EQ(c.call(op::kGet, "c").status, st::kNotFound);
  uint32_t miss = c.send(op::kDeleteQ, "c");
  EXPECT_EQ(c.expect_reply(op::kDeleteQ, miss).status, st::kNotFound);
  EXPECT_TRUE(c.noop_is_next());
}

// ---------------------------------------------------------------------------
// Increment, Decrement

TEST_F(BinaryE2e, IncrementAndDecrement) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  // 0xffffffff as exptime: do not create.
  Response no_create = c.call(op::kIncrement, "n", arith_extras(1, 10, kNoAutoCreate));
  EXPECT_EQ(no_create.status, st::kNotFound);
  EXPECT_EQ(c.call(op::kDecrement, "n", arith_extras(1, 10, kNoAutoCreate)).status, st::kNotFound);
  EXPECT_EQ(c.call(op::kGet, "n").status, st::kNotFound);

  // Any other exptime creates the item with the initial value.
  Response created = c.call(op::kIncrement, "n", arith_extras(5, 10, 0));
  EXPECT_EQ(created.status, st::kSuccess);
  EXPECT_EQ(created.value, be64(10));
  EXPECT_EQ(created.extras, "");
  EXPECT_NE(created.cas, 0u);
  Response as_text = c.call(op::kGet, "n");
  EXPECT_EQ(as_text.value, "10");
  EXPECT_EQ(as_text.cas, created.cas);

  Response incr = c.call(op::kIncrement, "n", arith_extras(5, 0, 0));
  EXPECT_EQ(incr.value, be64(15));
  EXPECT_NE(incr.cas, created.cas);
  EXPECT_EQ(c.call(op::kDecrement, "n", arith_extras(3, 0, 0)).value, be64(12));
  EXPECT_EQ(c.call(op::kDecrement, "n", arith_extras(100, 0, 0)).value, be64(0));  // floors at 0
  Response created_d = c.call(op::kDecrement, "d", arith_extras(1, 7, 0));
  EXPECT_EQ(created_d.status, st::kSuccess);
  EXPECT_EQ(created_d.value, be64(7));  // a created item gets the initial value as is

  // 64-bit wrap on increment.
  c.set("big", "18446744073709551615");
  EXPECT_EQ(c.call(op::kIncrement, "big", arith_extras(2, 0, 0)).value, be64(1));

  // A CAS must match.
  uint64_t cas = c.call(op::kGet, "n").cas;
  EXPECT_EQ(c.call(op::kIncrement, "n", arith_extras(1, 0, 0), {}, cas + 1).status, st::kExists);
  EXPECT_EQ(c.call(op::kIncrement, "n", arith_extras(1, 0, 0), {}, cas).status, st::kSuccess);

  // Not a number.
  c.set("text", "abc");
  Response bad = c.call(op::kIncrement, "text", arith_extras(1, 0, 0));
  EXPECT_EQ(bad.status, st::kNonNumeric);
  EXPECT_EQ(bad.value, "Non-numeric server-side value for incr or decr");
  EXPECT_EQ(c.call(op::kDecrement, "text", arith_extras(1, 0, 0)).status, st::kNonNumeric);
  EXPECT_EQ(c.call(op::kGet, "text").value, "abc");

  // An empty value is no number, whatever the CAS says (memcached looks at
  // the value first).
  uint64_t empty_cas = c.set("empty", "");
  EXPECT_EQ(c.call(op::kDecrement, "empty", arith_extras(1, 0, 0), {}, empty_cas + 1).status,
            st::kNonNumeric);
  EXPECT_EQ(c.call(op::kIncrement, "empty", arith_extras(1, 0, 0)).status, st::kNonNumeric);

  // Quiet forms: silent on success, errors answered.
  c.send(op::kIncrementQ, "n", arith_extras(10, 0, 0));
  c.send(op::kDecrementQ, "n", arith_extras(1, 0, 0));
  c.send(op::kIncrementQ, "q", arith_extras(1, 42, 0));  // creates
  EXPECT_TRUE(c.noop_is_next());
  EXPECT_EQ(c.call(op::kGet, "n").value, "10");  // 1 + 10 - 1
  EXPECT_EQ(c.call(op::kGet, "q").value, "42");
  uint32_t miss = c.send(op::kIncrementQ, "none", arith_extras(1, 0, kNoAutoCreate));
  uint32_t nonnum = c.send(op::kDecrementQ, "text", arith_extras(1, 0, 0));
  EXPECT_EQ(c.expect_reply(op::kIncrementQ, miss).status, st::kNotFound);
  EXPECT_EQ(c.expect_reply(op::kDecrementQ, nonnum).status, st::kNonNumeric);
  EXPECT_TRUE(c.noop_is_next());
}

// ---------------------------------------------------------------------------
// Quit, Flush, Noop, Version, Stat, Verbosity

TEST_F(BinaryE2e, QuitAnswersThenCloses) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  c.set("k", "v");
  uint32_t quit = c.send(op::kQuit);
  Response r = c.expect_reply(op::kQuit, quit);
  EXPECT_EQ(r.status, st::kSuccess);
  EXPECT_EQ(r.value, "");
  EXPECT_TRUE(c.raw().wait_for_close()) << c.raw().last_error();
  EXPECT_EQ(c.raw().buffered(), "");
}

TEST_F(BinaryE2e, QuitQClosesSilently) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  EXPECT_TRUE(c.noop_is_next());
  c.send(op::kQuitQ);
  // A request behind it is never answered.
  c.raw().send(encode_request(op::kNoop));
  EXPECT_TRUE(c.raw().wait_for_close()) << c.raw().last_error();
  EXPECT_EQ(c.raw().buffered(), "");
}

TEST_F(BinaryE2e, FlushInvalidatesEverything) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  c.set("a", "1");
  Response flush = c.call(op::kFlush);
  EXPECT_EQ(flush.status, st::kSuccess);
  EXPECT_EQ(flush.value, "");
  EXPECT_EQ(c.call(op::kGet, "a").status, st::kNotFound);

  c.set("b", "2");
  c.send(op::kFlushQ);
  EXPECT_TRUE(c.noop_is_next());
  EXPECT_EQ(c.call(op::kGet, "b").status, st::kNotFound);
  // Items stored after the flush live.
  c.set("c", "3");
  EXPECT_EQ(c.call(op::kGet, "c").value, "3");
}

TEST_F(BinaryE2e, FlushWithDelayInvalidatesLater) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  c.set("a", "1");
  Response flush = c.call(op::kFlush, {}, be32(2));
  EXPECT_EQ(flush.status, st::kSuccess);
  EXPECT_EQ(c.call(op::kGet, "a").value, "1");  // not yet
  EXPECT_TRUE(e2e::eventually([&] { return c.call(op::kGet, "a").status == st::kNotFound; }, 10s));
}

// A delayed flush invalidates what was stored before its moment, not what is
// stored after it (memcached 1.6.18: "flush_all 1", 2.5 s later "set k",
// "get k" hits). The cache is empty until then, so that nothing looks at an
// item when the moment passes.
TEST_F(BinaryE2e, FlushWithDelaySparesItemsStoredAfterItsMoment) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  auto flushed = std::chrono::steady_clock::now();
  EXPECT_EQ(c.call(op::kFlush, {}, be32(1)).status, st::kSuccess);
  ASSERT_TRUE(e2e::eventually([&] { return std::chrono::steady_clock::now() - flushed >= 2500ms; },
                              10s, 50ms));
  uint64_t cas = c.set("after", "stored after the flush");
  Response r = c.call(op::kGet, "after");
  EXPECT_EQ(r.status, st::kSuccess) << ::testing::PrintToString(r);
  EXPECT_EQ(r.value, "stored after the flush");
  EXPECT_EQ(r.cas, cas);
  EXPECT_EQ(c.call(op::kGet, "after").status, st::kSuccess);
}

// memcached's rule for the time: over 30 days it is an absolute unix time
// (the server's own `time`, so that a clock apart from the test's counts).
TEST_F(BinaryE2e, FlushWithAnAbsoluteTimeInvalidatesThen) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  c.set("a", "1");
  uint32_t now = static_cast<uint32_t>(std::stoul(c.stats()["time"]));
  EXPECT_EQ(c.call(op::kFlush, {}, be32(now + 2)).status, st::kSuccess);
  c.set("b", "2");                              // before the moment: flushed with the rest
  EXPECT_EQ(c.call(op::kGet, "a").value, "1");  // not yet
  EXPECT_TRUE(e2e::eventually([&] { return c.call(op::kGet, "a").status == st::kNotFound; }, 10s));
  EXPECT_EQ(c.call(op::kGet, "b").status, st::kNotFound);
  // One already past flushes at once.
  c.set("c", "3");
  EXPECT_EQ(c.call(op::kFlush, {}, be32(now - 60)).status, st::kSuccess);
  EXPECT_EQ(c.call(op::kGet, "c").status, st::kNotFound);
}

TEST_F(BinaryE2e, FlushQWithDelayIsSilentAndInvalidatesLater) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  c.set("a", "1");
  c.send(op::kFlushQ, {}, be32(2));
  EXPECT_TRUE(c.noop_is_next());
  EXPECT_EQ(c.call(op::kGet, "a").value, "1");
  EXPECT_TRUE(e2e::eventually([&] { return c.call(op::kGet, "a").status == st::kNotFound; }, 10s));
}

TEST_F(BinaryE2e, NoopAndVersion) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  Response noop = c.call(op::kNoop);
  EXPECT_EQ(noop.status, st::kSuccess);
  EXPECT_EQ(noop.extras + noop.key + noop.value, "");
  EXPECT_EQ(noop.cas, 0u);
  Response version = c.call(op::kVersion);
  EXPECT_EQ(version.status, st::kSuccess);
  EXPECT_TRUE(version.value.starts_with("1.6")) << version.value;
  EXPECT_EQ(version.key, "");
}

TEST_F(BinaryE2e, StatListsPairsThenAnEmptyTerminator) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  c.set("k", "v");
  std::map<std::string, std::string> general = c.stats();
  EXPECT_GT(general.size(), 20u);
  for (const char* name :
       {"pid", "uptime", "curr_connections", "cmd_get", "cmd_set", "curr_items", "cmd_lock",
        "lock_hits", "lock_misses", "lock_contended", "curr_locks"}) {
    EXPECT_TRUE(general.count(name)) << name;
  }
  EXPECT_EQ(general["pid"], std::to_string(server_.pid()));
  EXPECT_EQ(general["curr_items"], "1");

  std::map<std::string, std::string> settings = c.stats("settings");
  EXPECT_EQ(settings["maxconns"], "4096");
  EXPECT_EQ(settings["item_size_max"], "1048576");
  EXPECT_FALSE(settings.count("pid"));

  Response unknown = c.call(op::kStat, "no_such_group");
  EXPECT_EQ(unknown.status, st::kNotFound);
  EXPECT_TRUE(c.noop_is_next());  // one reply only, and the connection lives
}

// memcached answers these groups in binary too (for "items" with no items,
// only the terminator), as lockcached's text protocol does ("END").
TEST_F(BinaryE2e, StatGroupsOfMemcachedAreAnswered) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  for (const char* group : {"items", "slabs", "sizes"}) {
    SCOPED_TRACE(group);
    uint32_t opaque = c.send(op::kStat, group);
    for (int replies = 0; replies < 1000; ++replies) {
      Response r = c.expect_reply(op::kStat, opaque);
      ASSERT_EQ(r.status, st::kSuccess) << ::testing::PrintToString(r);
      if (r.key.empty() && r.value.empty()) break;
    }
    EXPECT_TRUE(c.noop_is_next());
  }
}

// memcached's binary "detail on|off|dump": on and off answer the end
// alone, dump the text command's whole reply as one statistic.
TEST_F(BinaryE2e, StatDetailTurnsPrefixCountersOnAndDumpsThem) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  Response on = c.call(op::kStat, "detail on");
  EXPECT_EQ(on.status, st::kSuccess);
  EXPECT_EQ(on.key + on.value, "");
  EXPECT_EQ(c.stats("settings")["detail_enabled"], "yes");
  c.set("p:k", "v");
  EXPECT_EQ(c.call(op::kGet, "p:k").status, st::kSuccess);
  uint32_t opaque = c.send(op::kStat, "detail dump");
  Response dump = c.expect_reply(op::kStat, opaque);
  EXPECT_EQ(dump.status, st::kSuccess);
  EXPECT_EQ(dump.key, "detailed");
  EXPECT_EQ(dump.value, "PREFIX p get 1 hit 1 set 1 del 0\r\nEND\r\n");
  Response end = c.expect_reply(op::kStat, opaque);
  EXPECT_EQ(end.key + end.value, "");
  EXPECT_EQ(c.call(op::kStat, "detail off").status, st::kSuccess);
  EXPECT_EQ(c.stats("settings")["detail_enabled"], "no");
  EXPECT_EQ(c.call(op::kStat, "detail bogus").status, st::kNotFound);
  EXPECT_EQ(c.call(op::kStat, "detail").status, st::kNotFound);
  EXPECT_TRUE(c.noop_is_next());
}

TEST_F(BinaryE2e, StatResetZeroesTheCounters) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  c.call(op::kGet, "missing");
  EXPECT_GE(std::stoull(c.stats()["cmd_get"]), 1u);
  uint32_t opaque = c.send(op::kStat, "reset");
  Response r = c.expect_reply(op::kStat, opaque);
  EXPECT_EQ(r.status, st::kSuccess);
  EXPECT_EQ(r.key + r.value, "");  // the terminator only
  EXPECT_TRUE(c.noop_is_next());
  EXPECT_EQ(c.stats()["cmd_get"], "0");
}

TEST_F(BinaryE2e, VerbosityIsAccepted) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  Response r = c.call(op::kVerbosity, {}, be32(1));
  EXPECT_EQ(r.status, st::kSuccess);
  EXPECT_EQ(r.extras + r.key + r.value, "");
}

// As memcached: a verbosity without its 4-byte level is an unknown command,
// and the connection goes on.
TEST_F(BinaryE2e, MalformedVerbosityIsUnknownAndTheConnectionStays) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  Response r = c.call(op::kVerbosity);
  EXPECT_EQ(r.status, st::kUnknownCommand);
  EXPECT_EQ(r.value, "Unknown command");
  EXPECT_EQ(c.call(op::kVerbosity, "key", be32(1)).status, st::kUnknownCommand);
  EXPECT_EQ(c.status(op::kNoop), st::kSuccess);
}

// ---------------------------------------------------------------------------
// Touch, GaT, GaTQ, GaTK, GaTKQ

TEST_F(BinaryE2e, TouchSetsTheExpiry) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  uint64_t cas = c.set("k", "v", 9);
  Response touch = c.call(op::kTouch, "k", be32(0));
  EXPECT_EQ(touch.status, st::kSuccess);
  EXPECT_EQ(touch.extras, be32(9));  // memcached answers the flags, no value
  EXPECT_EQ(touch.value, "");
  EXPECT_EQ(touch.cas, cas);
  EXPECT_EQ(c.call(op::kTouch, "missing", be32(0)).status, st::kNotFound);
  // An absolute time in the past expires it at once.
  EXPECT_EQ(c.call(op::kTouch, "k", be32(kPastAbsolute)).status, st::kSuccess);
  EXPECT_EQ(c.call(op::kGet, "k").status, st::kNotFound);
}

TEST_F(BinaryE2e, GatFamilyReturnsAndTouches) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  uint64_t cas = c.set("k", "value", 5);
  Response gat = c.call(op::kGat, "k", be32(0));
  EXPECT_EQ(gat.status, st::kSuccess);
  EXPECT_EQ(gat.extras, be32(5));
  EXPECT_EQ(gat.key, "");
  EXPECT_EQ(gat.value, "value");
  EXPECT_EQ(gat.cas, cas);
  Response gatk = c.call(op::kGatK, "k", be32(0));
  EXPECT_EQ(gatk.status, st::kSuccess);
  EXPECT_EQ(gatk.key, "k");
  EXPECT_EQ(gatk.value, "value");

  EXPECT_EQ(c.call(op::kGat, "missing", be32(0)).status, st::kNotFound);
  Response gatk_miss = c.call(op::kGatK, "missing", be32(0));
  EXPECT_EQ(gatk_miss.status, st::kNotFound);
  EXPECT_EQ(gatk_miss.key, "missing");

  c.send(op::kGatQ, "missing", be32(0));
  c.send(op::kGatKQ, "missing", be32(0));
  uint32_t q = c.send(op::kGatQ, "k", be32(0));
  uint32_t kq = c.send(op::kGatKQ, "k", be32(0));
  Response gatq = c.expect_reply(op::kGatQ, q);
  EXPECT_EQ(gatq.value, "value");
  EXPECT_EQ(gatq.key, "");
  Response gatkq = c.expect_reply(op::kGatKQ, kq);
  EXPECT_EQ(gatkq.value, "value");
  EXPECT_EQ(gatkq.key, "k");
  EXPECT_TRUE(c.noop_is_next());

  // Each form sets the expiry: past absolute times expire the item.
  c.set("a", "1");
  c.set("b", "2");
  c.set("d", "3");
  EXPECT_EQ(c.call(op::kGat, "a", be32(kPastAbsolute)).value, "1");
  EXPECT_EQ(c.call(op::kGatK, "b", be32(kPastAbsolute)).value, "2");
  uint32_t expire = c.send(op::kGatKQ, "d", be32(kPastAbsolute));
  EXPECT_EQ(c.expect_reply(op::kGatKQ, expire).value, "3");
  for (const char* key : {"a", "b", "d"})
    EXPECT_EQ(c.call(op::kGet, key).status, st::kNotFound) << key;
}

// ---------------------------------------------------------------------------
// Opaque, pipelining

TEST_F(BinaryE2e, OpaqueIsEchoedByteForByte) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  std::string batch;
  const uint32_t opaques[] = {0, 1, 0x80000000u, 0xffffffffu, 0x01020304u};
  for (uint32_t opaque : opaques)
    batch += encode_request(op::kGet, "missing", {}, {}, 0, opaque);
  for (uint32_t opaque : opaques)
    batch += encode_request(op::kSet, "k", store_extras(0, 0), "v", 0, opaque);
  ASSERT_TRUE(c.raw().send(batch));
  for (uint8_t opcode : {op::kGet, op::kSet}) {
    for (uint32_t opaque : opaques) {
      std::optional<Response> r = read_response(c.raw());
      ASSERT_TRUE(r) << c.raw().last_error();
      EXPECT_EQ(r->opcode, opcode);
      EXPECT_EQ(r->opaque, opaque);
    }
  }
}

// Requests arrive in pieces as TCP pleases: here one byte per segment.
TEST_F(BinaryE2e, RequestsSplitAtEveryByteAreAnsweredAlike) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  std::string value(3000, 'v');
  std::string batch = encode_request(op::kSet, "k", store_extras(3, 0), value, 0, 1) +
                      encode_request(op::kGetK, "k", {}, {}, 0, 2) +
                      encode_request(op::kIncrement, "n", arith_extras(2, 40, 0), {}, 0, 3) +
                      encode_request(op::kAppendQ, "k", {}, "+", 0, 4) +
                      encode_request(op::kGet, "k", {}, {}, 0, 5) +
                      encode_request(op::kDelete, "k", {}, {}, 0, 6) +
                      encode_request(op::kNoop, {}, {}, {}, 0, 7);
  for (char byte : batch)
    ASSERT_TRUE(c.raw().send(std::string_view(&byte, 1))) << c.raw().last_error();
  std::vector<Response> replies;
  for (int i = 0; i < 6; ++i) {
    std::optional<Response> r = read_response(c.raw());
    ASSERT_TRUE(r) << c.raw().last_error();
    replies.push_back(*r);
  }
  EXPECT_EQ(replies[0].opaque, 1u);
  EXPECT_EQ(replies[0].status, st::kSuccess);
  EXPECT_EQ(replies[1].opaque, 2u);
  EXPECT_EQ(replies[1].key, "k");
  EXPECT_TRUE(replies[1].value == value);
  EXPECT_EQ(replies[2].opaque, 3u);
  EXPECT_EQ(replies[2].value, be64(40));
  EXPECT_EQ(replies[3].opaque, 5u);  // AppendQ was silent
  EXPECT_TRUE(replies[3].value == value + "+");
  EXPECT_EQ(replies[4].opaque, 6u);
  EXPECT_EQ(replies[4].status, st::kSuccess);
  EXPECT_EQ(replies[5].opcode, op::kNoop);
  EXPECT_EQ(replies[5].opaque, 7u);
}

// The gets of a pipeline are looked ahead of (ReadAhead): more of them than
// it notes, in one write, with keys that a request before them in the same
// bytes stores or deletes. Every get must see exactly the changes before it.
TEST_F(BinaryE2e, PipelinedGetsInOneWriteSeeEveryChangeBeforeThem) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  c.set("old", "1");
  constexpr uint32_t kKeys = 40;
  std::string batch = encode_request(op::kGetK, "old", {}, {}, 0, 1) +
                      encode_request(op::kDelete, "old", {}, {}, 0, 2) +
                      encode_request(op::kGetK, "old", {}, {}, 0, 3);
  for (uint32_t i = 0; i < kKeys; ++i) {
    std::string key = "k" + std::to_string(i);
    batch += encode_request(op::kGetKQ, key, {}, {}, 0, 100 + 3 * i) +  // a silent miss
             encode_request(op::kSetQ, key, store_extras(i, 0), "v" + std::to_string(i), 0,
                            101 + 3 * i) +
             encode_request(op::kGetK, key, {}, {}, 0, 102 + 3 * i);
  }
  batch += encode_request(op::kNoop, {}, {}, {}, 0, 7);
  ASSERT_TRUE(c.raw().send(batch)) << c.raw().last_error();
  std::vector<Response> replies;
  for (uint32_t i = 0; i < 3 + kKeys + 1; ++i) {
    std::optional<Response> r = read_response(c.raw());
    ASSERT_TRUE(r) << c.raw().last_error();
    replies.push_back(*r);
  }
  EXPECT_EQ(replies[0].opaque, 1u);
  EXPECT_EQ(replies[0].value, "1");
  EXPECT_EQ(replies[1].opaque, 2u);
  EXPECT_EQ(replies[1].status, st::kSuccess);
  EXPECT_EQ(replies[2].opaque, 3u);
  EXPECT_EQ(replies[2].status, st::kNotFound);
  for (uint32_t i = 0; i < kKeys; ++i) {
    const Response& r = replies[3 + i];
    EXPECT_EQ(r.opaque, 102 + 3 * i);
    EXPECT_EQ(r.status, st::kSuccess);
    EXPECT_EQ(r.key, "k" + std::to_string(i));
    EXPECT_EQ(r.value, "v" + std::to_string(i));
    EXPECT_EQ(r.extras, be32(i));
  }
  EXPECT_EQ(replies.back().opcode, op::kNoop);
  EXPECT_EQ(replies.back().opaque, 7u);
}

// ---------------------------------------------------------------------------
// Malformed requests

TEST_F(BinaryE2e, WrongExtrasLengthIsInvalidAndCloses) {
  struct Case {
    const char* what;
    std::string packet;
  };
  const Case cases[] = {
      {"Get with extras", encode_request(op::kGet, "k", be32(0))},
      {"Set without extras", encode_request(op::kSet, "k", {}, "value")},
      {"Set with 4-byte extras", encode_request(op::kSet, "k", be32(0), "value")},
      {"Increment with 8-byte extras", encode_request(op::kIncrement, "k", be64(1))},
      {"Noop with a key", encode_request(op::kNoop, "k")},
      {"Get without a key", encode_request(op::kGet)},
      {"Flush with 8-byte extras", encode_request(op::kFlush, {}, be64(0))},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.what);
    BinClient c;
    ASSERT_TRUE(c.connect(port()));
    EXPECT_TRUE(c.noop_is_next());
    ASSERT_TRUE(c.raw().send(test.packet + encode_request(op::kNoop)));
    std::optional<Response> r = read_response(c.raw());
    ASSERT_TRUE(r) << c.raw().last_error();
    EXPECT_EQ(r->status, st::kInvalid);
    EXPECT_EQ(r->opcode, static_cast<uint8_t>(test.packet[1]));
    // The Noop behind it is not answered: the server hangs up.
    EXPECT_TRUE(c.raw().wait_for_close()) << c.raw().last_error();
    EXPECT_EQ(c.raw().buffered(), "");
  }
}

TEST_F(BinaryE2e, KeyLongerThan250IsInvalidAndCloses) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  std::string key251(251, 'k');
  uint32_t opaque = c.send(op::kGet, key251);
  Response r = c.expect_reply(op::kGet, opaque);
  EXPECT_EQ(r.status, st::kInvalid);
  EXPECT_TRUE(c.raw().wait_for_close()) << c.raw().last_error();

  BinClient s;
  ASSERT_TRUE(s.connect(port()));
  opaque = s.send(op::kSet, key251, store_extras(0, 0), "v");
  EXPECT_EQ(s.expect_reply(op::kSet, opaque).status, st::kInvalid);
  EXPECT_TRUE(s.raw().wait_for_close()) << s.raw().last_error();

  BinClient check;
  ASSERT_TRUE(check.connect(port()));
  EXPECT_EQ(check.call(op::kGet, std::string(250, 'k')).status, st::kNotFound);
}

TEST_F(BinaryE2e, UnknownOpcodeSkipsItsBody) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  // The body of the unknown command holds what would be a Set and a Flush;
  // none of it may be taken for a request.
  std::string inner =
      encode_request(op::kSet, "k", store_extras(0, 0), "evil") + encode_request(op::kFlush);
  std::string body;
  while (body.size() < (1 << 20))
    body += inner;
  c.set("keep", "me");
  std::string packet = raw_header(0x80, 0x7f, 0, 0, static_cast<uint32_t>(body.size()), 0x55, 0);
  ASSERT_TRUE(c.raw().send(packet + body));
  std::optional<Response> r = read_response(c.raw());
  ASSERT_TRUE(r) << c.raw().last_error();
  EXPECT_EQ(r->opcode, 0x7f);
  EXPECT_EQ(r->status, st::kUnknownCommand);
  EXPECT_EQ(r->opaque, 0x55u);
  EXPECT_EQ(r->value, "Unknown command");
  EXPECT_TRUE(c.noop_is_next());
  EXPECT_EQ(c.call(op::kGet, "keep").value, "me");
  EXPECT_EQ(c.call(op::kGet, "k").status, st::kNotFound);
}

// Without --auth_file the SASL opcodes are unknown, as in memcached without
// -S, however long their message: skipped, and the connection stays (a
// message over 4 KiB closed it, as a malformed SASL request).
TEST_F(BinaryE2e, SaslWithoutAnAuthFileIsUnknownWhateverItsLength) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  for (size_t length : {10u, 5000u}) {
    SCOPED_TRACE(length);
    std::string message(length, 'x');
    ASSERT_TRUE(c.raw().send(raw_header(0x80, 0x21, 5, 0, static_cast<uint32_t>(5 + length),
                                        0x77, 0) +
                             "PLAIN" + message));
    std::optional<Response> r = read_response(c.raw());
    ASSERT_TRUE(r) << c.raw().last_error();
    EXPECT_EQ(r->status, st::kUnknownCommand);
    EXPECT_EQ(r->opaque, 0x77u);
    EXPECT_TRUE(c.noop_is_next());
  }
}

TEST_F(BinaryE2e, FourGigabyteSetIsTooLargeAndNotBuffered) {
  {
    // Warm up: let every thread allocate what it normally does.
    BinClient warm;
    ASSERT_TRUE(warm.connect(port()));
    warm.set("w", std::string(100000, 'w'));
    warm.call(op::kGet, "w");
  }
  uint64_t rss_before = rss_kb(server_.pid(), "VmRSS");
  uint64_t size_before = rss_kb(server_.pid(), "VmSize");

  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  std::string header = raw_header(0x80, op::kSet, 1, 8, 0xffffffffu, 0x4242, 0);
  ASSERT_TRUE(c.raw().send(header + store_extras(0, 0) + "k" + std::string(4096, 'x')));
  std::optional<Response> r = read_response(c.raw());
  ASSERT_TRUE(r) << c.raw().last_error();
  EXPECT_EQ(r->opcode, op::kSet);
  EXPECT_EQ(r->status, st::kTooLarge);
  EXPECT_EQ(r->opaque, 0x4242u);
  EXPECT_EQ(r->value, "Too large.");
  c.raw().close();

  BinClient after;
  ASSERT_TRUE(after.connect(port()));
  EXPECT_TRUE(after.noop_is_next());
  EXPECT_EQ(after.call(op::kGet, "k").status, st::kNotFound);
  uint64_t rss_after = rss_kb(server_.pid(), "VmRSS");
  uint64_t size_after = rss_kb(server_.pid(), "VmSize");
  EXPECT_LT(rss_after, rss_before + 32 * 1024) << "RSS grew from " << rss_before << " kB";
  // Not even reserved: 4 GiB of address space would show here.
  EXPECT_LT(size_after, size_before + 1024 * 1024) << "VmSize grew from " << size_before << " kB";
  EXPECT_FALSE(server_.wait_for_exit(0ms).has_value());
}

TEST_F(BinaryE2e, BadMagicCloses) {
  for (uint8_t magic : {uint8_t{0x81}, uint8_t{0x00}, uint8_t{'g'}}) {
    SCOPED_TRACE(static_cast<int>(magic));
    BinClient c;
    ASSERT_TRUE(c.connect(port()));
    EXPECT_TRUE(c.noop_is_next());  // the connection speaks binary from here on
    ASSERT_TRUE(
        c.raw().send(raw_header(magic, op::kNoop, 0, 0, 0, 0, 0) + encode_request(op::kNoop)));
    EXPECT_TRUE(c.raw().wait_for_close()) << c.raw().last_error();
    EXPECT_EQ(c.raw().buffered(), "");
  }
}

// ---------------------------------------------------------------------------
// --max_item_size

class BinarySmallItemsE2e : public BinaryE2e {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start({"--threads=2", "--max_item_size=2048"})); }
};

TEST_F(BinarySmallItemsE2e, ValueOverMaxItemSizeIsTooLargeAndSwallowed) {
  BinClient c;
  ASSERT_TRUE(c.connect(port()));
  c.set("k", "old");
  c.set("other", "stays");
  EXPECT_EQ(c.call(op::kSet, "fits", store_extras(0, 0), std::string(2048, 'f')).status,
            st::kSuccess);

  // The value is made of Flush requests: if any byte of it were read as a
  // request, "other" would be gone and the Noop reply would not come next.
  std::string value;
  while (value.size() < 4096)
    value += encode_request(op::kFlush);
  Response too_large = c.call(op::kSet, "k", store_extras(0, 0), value);
  EXPECT_EQ(too_large.status, st::kTooLarge);
  EXPECT_TRUE(c.noop_is_next());
  EXPECT_EQ(c.call(op::kGet, "other").value, "stays");
  // As memcached: a failed Set does not leave the old value behind.
  EXPECT_EQ(c.call(op::kGet, "k").status, st::kNotFound);

  // Quiet and the other storage commands alike; an Add that fails keeps it.
  uint32_t setq = c.send(op::kSetQ, "big", store_extras(0, 0), value);
  EXPECT_EQ(c.expect_reply(op::kSetQ, setq).status, st::kTooLarge);
  EXPECT_EQ(c.call(op::kAdd, "other", store_extras(0, 0), value).status, st::kTooLarge);
  EXPECT_EQ(c.call(op::kAppend, "other", {}, value).status, st::kTooLarge);
  EXPECT_TRUE(c.noop_is_next());
  EXPECT_EQ(c.call(op::kGet, "other").value, "stays");
  EXPECT_EQ(c.call(op::kGet, "fits").value.size(), 2048u);
}

// ---------------------------------------------------------------------------
// Binary and text connections share one cache

TEST_F(BinaryE2e, BinaryAndTextShareData) {
  BinClient b;
  ASSERT_TRUE(b.connect(port()));
  Client t;
  ASSERT_TRUE(t.connect(port()));

  uint64_t cas = b.set("from_binary", "bin\r\nvalue", 42);
  ASSERT_TRUE(t.send("gets from_binary\r\n"));
  std::optional<std::vector<e2e::Value>> values = t.read_values();
  ASSERT_TRUE(values) << t.last_error();
  EXPECT_EQ(*values, (std::vector<e2e::Value>{{"from_binary", 42, "bin\r\nvalue", cas}}));

  EXPECT_EQ(t.store("set", "from_text", "txt", 7), "STORED");
  Response r = b.call(op::kGetK, "from_text");
  EXPECT_EQ(r.status, st::kSuccess);
  EXPECT_EQ(r.value, "txt");
  EXPECT_EQ(r.extras, be32(7));
  ASSERT_TRUE(t.send("gets from_text\r\n"));
  values = t.read_values();
  ASSERT_TRUE(values && values->size() == 1) << t.last_error();
  EXPECT_EQ((*values)[0].cas, r.cas);

  // Changes made by one protocol are seen by the other.
  EXPECT_EQ(t.request("incr from_binary 1"),
            "CLIENT_ERROR cannot increment or decrement non-numeric value");
  EXPECT_EQ(b.call(op::kIncrement, "counter", arith_extras(1, 100, 0)).value, be64(100));
  EXPECT_EQ(t.request("incr counter 5"), "105");
  EXPECT_EQ(b.call(op::kGet, "counter").value, "105");
  EXPECT_EQ(b.call(op::kDelete, "from_text").status, st::kSuccess);
  EXPECT_EQ(t.get("from_text"), std::nullopt);
}

}  // namespace
