// Unit tests of store::Store: cache semantics with a clock that only moves
// when the test says so.
#include "lockcached/store/store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockcached/store/clock.h"
#include "lockcached/store/hash.h"
#include "lockcached/store/item.h"

namespace lockcached::store {
namespace {

constexpr OwnerId kOwner = 7;
constexpr OwnerId kOther = 8;
constexpr int64_t kThirtyDays = 60 * 60 * 24 * 30;

class StoreTest : public ::testing::Test {
 protected:
  static StoreConfig small_config() {
    StoreConfig config;
    config.memory_limit = size_t{16} << 20;
    config.max_item_size = size_t{64} << 10;
    config.shard_count = 4;
    return config;
  }

  StoreTest() : store_(small_config(), clock_) {}

  // An unlinked item holding `value`; exptime as a client sends it.
  ItemRef make(std::string_view key, std::string_view value, uint32_t flags = 0,
               int64_t exptime = 0) {
    ItemRef item = store_.allocate(key, flags, to_rel_time(exptime, clock_), value.size());
    EXPECT_TRUE(item);
    if (item) std::memcpy(item->value(), value.data(), value.size());
    return item;
  }

  StoreResult put(StoreCommand command, std::string_view key, std::string_view value,
                  uint64_t compare_cas = 0, OwnerId owner = kNoOwner, uint32_t flags = 0,
                  int64_t exptime = 0) {
    return store_.store(command, make(key, value, flags, exptime), compare_cas, owner);
  }

  StoreStatus set(std::string_view key, std::string_view value, int64_t exptime = 0) {
    return put(StoreCommand::kSet, key, value, 0, kNoOwner, 0, exptime).status;
  }

  std::optional<std::string> value_of(std::string_view key) {
    ItemRef item = store_.get(key);
    if (!item) return std::nullopt;
    return std::string(item->value_view());
  }

  uint64_t cas_of(std::string_view key) {
    ItemRef item = store_.get(key);
    return item ? item->cas : 0;
  }

  void lock(std::string_view key, OwnerId owner) {
    ASSERT_EQ(store_.lock(key, owner), LockStatus::kOk);
  }

  ArithResult arith(std::string_view key, bool increment, uint64_t delta,
                    OwnerId owner = kNoOwner) {
    ArithRequest request;
    request.increment = increment;
    request.delta = delta;
    return store_.arith(key, request, owner);
  }

  ManualClock clock_;
  Store store_;
};

TEST_F(StoreTest, SetThenGetReturnsValueFlagsAndCas) {
  StoreResult result = put(StoreCommand::kSet, "key", "hello", 0, kNoOwner, 42);
  ASSERT_EQ(result.status, StoreStatus::kStored);
  EXPECT_NE(result.cas, 0u);

  ItemRef item = store_.get("key");
  ASSERT_TRUE(item);
  EXPECT_EQ(item->key(), "key");
  EXPECT_EQ(item->value_view(), "hello");
  EXPECT_EQ(item->flags, 42u);
  EXPECT_EQ(item->cas, result.cas);
  EXPECT_TRUE(item->linked);
  // The trailing CRLF the text protocol sends with the value.
  EXPECT_EQ(std::string_view(item->value() + item->value_len, 2), "\r\n");
}

TEST_F(StoreTest, GetOfMissingKeyIsEmpty) {
  EXPECT_FALSE(store_.get("nothing"));
  ASSERT_EQ(set("nothing-else", "x"), StoreStatus::kStored);
  EXPECT_FALSE(store_.get("nothing"));
  EXPECT_FALSE(store_.get("nothing-els"));
}

TEST_F(StoreTest, ReadCallsTheReaderWithTheLiveItemOnly) {
  ASSERT_EQ(set("key", "hello"), StoreStatus::kStored);
  std::string seen;
  EXPECT_TRUE(store_.read("key", [&seen](Item& item) { seen = item.value_view(); }));
  EXPECT_EQ(seen, "hello");

  int calls = 0;
  EXPECT_FALSE(store_.read("missing", [&calls](Item&) { ++calls; }));
  ASSERT_EQ(set("short-lived", "x", 1), StoreStatus::kStored);
  clock_.advance(2);
  EXPECT_FALSE(store_.read("short-lived", [&calls](Item&) { ++calls; }));
  EXPECT_EQ(calls, 0);
}

TEST_F(StoreTest, ReadEachCallsTheReaderForEachLiveKeyInOrder) {
  ASSERT_EQ(set("a", "1"), StoreStatus::kStored);
  ASSERT_EQ(set("short-lived", "x", 1), StoreStatus::kStored);
  ASSERT_EQ(set("c", "3"), StoreStatus::kStored);
  clock_.advance(2);
  const std::vector<std::string_view> keys{"c", "missing", "short-lived", "a", "c"};
  std::vector<std::pair<size_t, std::string>> seen;
  store_.read_each(
      keys.size(), [&keys](size_t i) { return keys[i]; },
      [&seen](size_t i, Item& item) { seen.emplace_back(i, item.value_view()); });
  const std::vector<std::pair<size_t, std::string>> expected{{0, "3"}, {3, "1"}, {4, "3"}};
  EXPECT_EQ(seen, expected);
}

TEST_F(StoreTest, ReadEachAppliesADueFlushFirst) {
  ASSERT_EQ(set("a", "1"), StoreStatus::kStored);
  store_.flush_all(2);  // in two seconds
  clock_.advance(2);
  int calls = 0;
  store_.read_each(
      1, [](size_t) { return std::string_view("a"); }, [&calls](size_t, Item&) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST_F(StoreTest, ReaderMayKeepTheItemByTakingAReference) {
  ASSERT_EQ(set("key", "kept"), StoreStatus::kStored);
  ItemRef kept;
  ASSERT_TRUE(store_.read("key", [&kept](Item& item) { kept = ItemRef::share(&item); }));
  ASSERT_EQ(store_.remove("key", 0, kNoOwner), DeleteStatus::kDeleted);
  EXPECT_EQ(kept->value_view(), "kept");
  EXPECT_FALSE(kept->linked);
}

TEST(SameKeyTest, ComparesEveryByteAtEveryLength) {
  std::string a(40, 'k');
  for (size_t length = 0; length <= a.size(); ++length) {
    std::string b = a;
    EXPECT_TRUE(same_key(a.data(), b.data(), length)) << length;
    for (size_t at = 0; at < length; ++at) {
      b[at] = 'x';
      EXPECT_FALSE(same_key(a.data(), b.data(), length)) << length << " " << at;
      b[at] = 'k';
    }
  }
}

TEST_F(StoreTest, SetOverwritesAndGivesANewCas) {
  StoreResult first = put(StoreCommand::kSet, "k", "one");
  StoreResult second = put(StoreCommand::kSet, "k", "two");
  ASSERT_EQ(first.status, StoreStatus::kStored);
  ASSERT_EQ(second.status, StoreStatus::kStored);
  EXPECT_NE(first.cas, second.cas);
  EXPECT_EQ(value_of("k"), "two");
  EXPECT_EQ(cas_of("k"), second.cas);
  EXPECT_EQ(store_.stats().curr_items, 1u);
}

TEST_F(StoreTest, EmptyValueIsStored) {
  ASSERT_EQ(set("empty", ""), StoreStatus::kStored);
  EXPECT_EQ(value_of("empty"), "");
}

TEST_F(StoreTest, AddStoresOnlyWhenMissing) {
  EXPECT_EQ(put(StoreCommand::kAdd, "k", "first").status, StoreStatus::kStored);
  EXPECT_EQ(put(StoreCommand::kAdd, "k", "second").status, StoreStatus::kNotStored);
  EXPECT_EQ(value_of("k"), "first");
}

TEST_F(StoreTest, ReplaceStoresOnlyWhenPresent) {
  EXPECT_EQ(put(StoreCommand::kReplace, "k", "first").status, StoreStatus::kNotStored);
  EXPECT_FALSE(value_of("k"));
  ASSERT_EQ(set("k", "old"), StoreStatus::kStored);
  EXPECT_EQ(put(StoreCommand::kReplace, "k", "new", 0, kNoOwner, 5).status, StoreStatus::kStored);
  ItemRef item = store_.get("k");
  ASSERT_TRUE(item);
  EXPECT_EQ(item->value_view(), "new");
  EXPECT_EQ(item->flags, 5u);
}

TEST_F(StoreTest, AppendAndPrependNeedAnItemAndKeepItsFlags) {
  EXPECT_EQ(put(StoreCommand::kAppend, "k", "x").status, StoreStatus::kNotStored);
  EXPECT_EQ(put(StoreCommand::kPrepend, "k", "x").status, StoreStatus::kNotStored);
  EXPECT_FALSE(value_of("k"));

  ASSERT_EQ(put(StoreCommand::kSet, "k", "middle", 0, kNoOwner, 7).status, StoreStatus::kStored);
  uint64_t before = cas_of("k");
  StoreResult appended = put(StoreCommand::kAppend, "k", "-end", 0, kNoOwner, 99);
  ASSERT_EQ(appended.status, StoreStatus::kStored);
  EXPECT_NE(appended.cas, before);
  ASSERT_EQ(put(StoreCommand::kPrepend, "k", "start-", 0, kNoOwner, 99).status,
            StoreStatus::kStored);
  ItemRef item = store_.get("k");
  ASSERT_TRUE(item);
  EXPECT_EQ(item->value_view(), "start-middle-end");
  // memcached: append/prepend keep the old item's flags ("VALUE a 7 2").
  EXPECT_EQ(item->flags, 7u);
  EXPECT_EQ(store_.stats().curr_items, 1u);
}

TEST_F(StoreTest, AppendKeepsTheOldExptime) {
  ASSERT_EQ(set("k", "a", 10), StoreStatus::kStored);
  ASSERT_EQ(put(StoreCommand::kAppend, "k", "b").status, StoreStatus::kStored);
  clock_.advance(9);
  EXPECT_EQ(value_of("k"), "ab");
  clock_.advance(1);
  EXPECT_FALSE(value_of("k"));
}

TEST_F(StoreTest, AppendWithCompareCasChecksIt) {
  ASSERT_EQ(set("k", "a"), StoreStatus::kStored);
  uint64_t cas = cas_of("k");
  EXPECT_EQ(put(StoreCommand::kAppend, "k", "b", cas + 1000).status, StoreStatus::kExists);
  EXPECT_EQ(put(StoreCommand::kReplace, "k", "b", cas + 1000).status, StoreStatus::kExists);
  EXPECT_EQ(value_of("k"), "a");
  EXPECT_EQ(put(StoreCommand::kAppend, "k", "b", cas).status, StoreStatus::kStored);
  EXPECT_EQ(value_of("k"), "ab");
}

// store.h: compare_cas applies to kCas and kReplace/kAppend/kPrepend; a
// plain kSet stores whatever the CAS (protocols map set-with-CAS to kCas).
TEST_F(StoreTest, SetIgnoresCompareCasReplaceChecksIt) {
  ASSERT_EQ(set("k", "a"), StoreStatus::kStored);
  uint64_t cas = cas_of("k");
  EXPECT_EQ(put(StoreCommand::kSet, "k", "b", cas + 1000).status, StoreStatus::kStored);
  EXPECT_EQ(value_of("k"), "b");
  cas = cas_of("k");
  EXPECT_EQ(put(StoreCommand::kReplace, "k", "c", cas + 1000).status, StoreStatus::kExists);
  EXPECT_EQ(value_of("k"), "b");
  EXPECT_EQ(put(StoreCommand::kReplace, "k", "c", cas).status, StoreStatus::kStored);
  EXPECT_EQ(value_of("k"), "c");
}

TEST_F(StoreTest, CasStoresOnMatchOnly) {
  EXPECT_EQ(put(StoreCommand::kCas, "k", "v", 1).status, StoreStatus::kNotFound);
  EXPECT_FALSE(value_of("k"));

  ASSERT_EQ(set("k", "v1"), StoreStatus::kStored);
  uint64_t cas = cas_of("k");
  EXPECT_EQ(put(StoreCommand::kCas, "k", "v2", cas + 1).status, StoreStatus::kExists);
  EXPECT_EQ(put(StoreCommand::kCas, "k", "v2", 0).status, StoreStatus::kExists);
  EXPECT_EQ(value_of("k"), "v1");

  StoreResult stored = put(StoreCommand::kCas, "k", "v3", cas);
  ASSERT_EQ(stored.status, StoreStatus::kStored);
  EXPECT_NE(stored.cas, cas);
  EXPECT_EQ(value_of("k"), "v3");
  // The old cas is stale now.
  EXPECT_EQ(put(StoreCommand::kCas, "k", "v4", cas).status, StoreStatus::kExists);
  EXPECT_EQ(value_of("k"), "v3");
}

// memcached's -C: clients see a CAS of 0 and never match one; the other
// stores ignore theirs.
TEST_F(StoreTest, WithoutCasNoCasIsShownOrMatched) {
  StoreConfig no_cas = small_config();
  no_cas.cas_enabled = false;
  Store store(no_cas, clock_);
  auto put_in = [&](StoreCommand command, std::string_view key, uint64_t compare_cas) {
    ItemRef item = store.allocate(key, 0, 0, 1);
    item->value()[0] = 'v';
    return store.store(command, item, compare_cas, kNoOwner);
  };
  StoreResult stored = put_in(StoreCommand::kSet, "k", 0);
  ASSERT_EQ(stored.status, StoreStatus::kStored);
  EXPECT_EQ(stored.cas, 0u);
  EXPECT_EQ(store.client_cas(*store.get("k")), 0u);
  EXPECT_EQ(put_in(StoreCommand::kCas, "k", 0).status, StoreStatus::kExists);
  EXPECT_EQ(put_in(StoreCommand::kCas, "k", store.get("k")->cas).status, StoreStatus::kExists);
  EXPECT_EQ(put_in(StoreCommand::kCas, "missing", 1).status, StoreStatus::kNotFound);
  EXPECT_EQ(put_in(StoreCommand::kAppend, "k", 12345).status, StoreStatus::kStored);
  EXPECT_EQ(put_in(StoreCommand::kReplace, "k", 12345).status, StoreStatus::kStored);
  EXPECT_EQ(store.remove("k", 1, kNoOwner), DeleteStatus::kExists);
  EXPECT_EQ(store.remove("k", 0, kNoOwner), DeleteStatus::kDeleted);
  // flush_all still works: it goes by the CAS kept inside.
  ASSERT_EQ(put_in(StoreCommand::kSet, "k", 0).status, StoreStatus::kStored);
  store.flush_all(0);
  EXPECT_FALSE(store.get("k"));
  ASSERT_EQ(put_in(StoreCommand::kSet, "k", 0).status, StoreStatus::kStored);
  EXPECT_TRUE(store.get("k"));
}

TEST_F(StoreTest, RemoveWithoutCompareCas) {
  EXPECT_EQ(store_.remove("k", 0, kNoOwner), DeleteStatus::kNotFound);
  ASSERT_EQ(set("k", "v"), StoreStatus::kStored);
  EXPECT_EQ(store_.remove("k", 0, kNoOwner), DeleteStatus::kDeleted);
  EXPECT_FALSE(value_of("k"));
  EXPECT_EQ(store_.remove("k", 0, kNoOwner), DeleteStatus::kNotFound);
  EXPECT_EQ(store_.stats().curr_items, 0u);
  EXPECT_EQ(store_.stats().bytes, 0u);
}

TEST_F(StoreTest, RemoveWithCompareCas) {
  ASSERT_EQ(set("k", "v"), StoreStatus::kStored);
  uint64_t cas = cas_of("k");
  EXPECT_EQ(store_.remove("k", cas + 1, kNoOwner), DeleteStatus::kExists);
  EXPECT_EQ(value_of("k"), "v");
  EXPECT_EQ(store_.remove("k", cas, kNoOwner), DeleteStatus::kDeleted);
  EXPECT_FALSE(value_of("k"));
}

TEST_F(StoreTest, ReaderKeepsItemAliveAfterRemove) {
  ASSERT_EQ(set("k", "still here"), StoreStatus::kStored);
  ItemRef reader = store_.get("k");
  ASSERT_TRUE(reader);
  ASSERT_EQ(store_.remove("k", 0, kNoOwner), DeleteStatus::kDeleted);
  EXPECT_FALSE(reader->linked);
  EXPECT_EQ(reader->refs.load(), 1u);
  EXPECT_EQ(reader->value_view(), "still here");
}

TEST_F(StoreTest, IncrementAndDecrement) {
  ASSERT_EQ(set("n", "10"), StoreStatus::kStored);
  ArithResult up = arith("n", true, 5);
  ASSERT_EQ(up.status, ArithStatus::kOk);
  EXPECT_EQ(up.value, 15u);
  EXPECT_EQ(value_of("n"), "15");
  EXPECT_EQ(up.cas, cas_of("n"));

  ArithResult down = arith("n", false, 3);
  ASSERT_EQ(down.status, ArithStatus::kOk);
  EXPECT_EQ(down.value, 12u);
  EXPECT_EQ(value_of("n"), "12");
  EXPECT_NE(down.cas, up.cas);
}

TEST_F(StoreTest, ArithKeepsFlags) {
  ASSERT_EQ(put(StoreCommand::kSet, "n", "1", 0, kNoOwner, 77).status, StoreStatus::kStored);
  ASSERT_EQ(arith("n", true, 1).status, ArithStatus::kOk);
  ItemRef item = store_.get("n");
  ASSERT_TRUE(item);
  EXPECT_EQ(item->flags, 77u);
}

TEST_F(StoreTest, IncrementWrapsAt2To64) {
  ASSERT_EQ(set("n", "18446744073709551615"), StoreStatus::kStored);
  ArithResult result = arith("n", true, 2);
  ASSERT_EQ(result.status, ArithStatus::kOk);
  EXPECT_EQ(result.value, 1u);
  // memcached 1.6.18: "VALUE n 0 20\r\n1                   \r\n".
  EXPECT_EQ(value_of("n"), "1" + std::string(19, ' '));
}

TEST_F(StoreTest, DecrementFloorsAtZero) {
  ASSERT_EQ(set("n", "100"), StoreStatus::kStored);
  ArithResult result = arith("n", false, 1000);
  ASSERT_EQ(result.status, ArithStatus::kOk);
  EXPECT_EQ(result.value, 0u);
  EXPECT_EQ(value_of("n"), "0  ");
  result = arith("n", false, 1);
  EXPECT_EQ(result.value, 0u);
}

TEST_F(StoreTest, ShorterResultIsPaddedToTheOldLength) {
  ASSERT_EQ(set("n", "10"), StoreStatus::kStored);
  ArithResult result = arith("n", false, 1);
  ASSERT_EQ(result.status, ArithStatus::kOk);
  EXPECT_EQ(result.value, 9u);
  EXPECT_EQ(value_of("n"), "9 ");
  // The padded value is still a number.
  result = arith("n", true, 1);
  ASSERT_EQ(result.status, ArithStatus::kOk);
  EXPECT_EQ(result.value, 10u);
  EXPECT_EQ(value_of("n"), "10");
}

TEST_F(StoreTest, LongerResultGrowsTheValue) {
  ASSERT_EQ(set("n", "99"), StoreStatus::kStored);
  ArithResult result = arith("n", true, 1);
  ASSERT_EQ(result.status, ArithStatus::kOk);
  EXPECT_EQ(result.value, 100u);
  EXPECT_EQ(value_of("n"), "100");
}

TEST_F(StoreTest, ArithAcceptsSurroundingWhitespace) {
  // memcached 1.6.18: " 5" incr 1 -> "6 ", "5\t" incr 1 -> "6 ".
  ASSERT_EQ(set("a", " 5"), StoreStatus::kStored);
  EXPECT_EQ(arith("a", true, 1).value, 6u);
  EXPECT_EQ(value_of("a"), "6 ");
  ASSERT_EQ(set("b", "5\t"), StoreStatus::kStored);
  EXPECT_EQ(arith("b", true, 1).value, 6u);
  EXPECT_EQ(value_of("b"), "6 ");
}

// memcached 1.6.18 reads the value with strtoull: a sign, and a NUL that
// ends the number, are taken ("+5", "-0", "5\0"); a minus that makes a
// negative number is not ("-5", refused below), one that does not is
// ("-9223372036854775809" is 2^64 - 9223372036854775809). Each value
// checked against memcached 1.6.18's `incr`.
TEST_F(StoreTest, ArithReadsTheValueAsStrtoullDoes) {
  const std::pair<std::string_view, uint64_t> cases[] = {
      {"+5", 6},
      {"-0", 1},
      {std::string_view("5\0", 2), 6},
      {" +5", 6},
      {"-9223372036854775809", 9223372036854775808u},
      {"-18446744073709551615", 2},
  };
  for (const auto& [value, incremented] : cases) {
    SCOPED_TRACE(std::string(value));
    ASSERT_EQ(set("n", value), StoreStatus::kStored);
    ArithResult result = arith("n", true, 1);
    EXPECT_EQ(result.status, ArithStatus::kOk);
    EXPECT_EQ(result.value, incremented);
  }
}

TEST_F(StoreTest, ArithOnNonNumericValue) {
  for (std::string_view value : {"abc", "", "-5", "12abc", "0x10", "18446744073709551616", "  ",
                                 "+", "+-5", "--5", "-1"}) {
    SCOPED_TRACE(std::string(value));
    ASSERT_EQ(set("n", value), StoreStatus::kStored);
    EXPECT_EQ(arith("n", true, 1).status, ArithStatus::kNonNumeric);
    EXPECT_EQ(arith("n", false, 1).status, ArithStatus::kNonNumeric);
    EXPECT_EQ(value_of("n"), std::string(value));
  }
}

TEST_F(StoreTest, ArithOnMissingKey) {
  EXPECT_EQ(arith("n", true, 1).status, ArithStatus::kNotFound);
  EXPECT_EQ(arith("n", false, 1).status, ArithStatus::kNotFound);
  EXPECT_FALSE(value_of("n"));
}

TEST_F(StoreTest, ArithCreatesOnMissWhenAsked) {
  ArithRequest request;
  request.delta = 5;
  request.create = true;
  request.initial = 42;
  request.exptime = to_rel_time(10, clock_);
  ArithResult created = store_.arith("n", request, kNoOwner);
  ASSERT_EQ(created.status, ArithStatus::kOk);
  EXPECT_EQ(created.value, request.initial);
  EXPECT_EQ(value_of("n"), std::to_string(request.initial));
  EXPECT_EQ(created.cas, cas_of("n"));

  // Present now: the delta applies.
  ArithResult next = store_.arith("n", request, kNoOwner);
  ASSERT_EQ(next.status, ArithStatus::kOk);
  EXPECT_EQ(next.value, request.initial + request.delta);

  // The created item got the requested exptime.
  clock_.advance(10);
  EXPECT_FALSE(value_of("n"));
}

TEST_F(StoreTest, ArithWithCompareCas) {
  ASSERT_EQ(set("n", "1"), StoreStatus::kStored);
  ArithRequest request;
  request.delta = 1;
  request.compare_cas = cas_of("n") + 1;
  EXPECT_EQ(store_.arith("n", request, kNoOwner).status, ArithStatus::kExists);
  EXPECT_EQ(value_of("n"), "1");
  request.compare_cas = cas_of("n");
  EXPECT_EQ(store_.arith("n", request, kNoOwner).status, ArithStatus::kOk);
  EXPECT_EQ(value_of("n"), "2");
}

// Two processes on one machine (a master and its replica) start at
// different phases of a second; the offset realtime - monotonic is the
// same for both. Each must map a moment to the same unix second, else an
// absolute exptime, or a delayed flush_all, means different moments.
TEST(ClockTest, EveryProcessMapsAMomentToTheSameUnixSecond) {
  constexpr int64_t kSecond = 1'000'000'000;
  constexpr int64_t kOffset = 1'700'000'000 * kSecond + 700'000'000;  // realtime - monotonic
  auto started_at = [](int64_t monotonic_ns) {
    return Clock(ClockReadings{monotonic_ns + kOffset, monotonic_ns});
  };
  // Unix start times 1700000005.9 and 1700000006.2: different whole seconds
  // of both clocks.
  const Clock master = started_at(5 * kSecond + 200'000'000);
  const Clock replica = started_at(5 * kSecond + 500'000'000);
  for (int64_t later : {int64_t{0}, 250'000'000 * int64_t{1}, 400'000'000 * int64_t{1},
                        650'000'000 * int64_t{1}, 90 * kSecond + 123'456'789}) {
    int64_t monotonic = 5 * kSecond + 600'000'000 + later;
    int64_t unix_now = (monotonic + kOffset) / kSecond;  // what time() says then
    SCOPED_TRACE(monotonic);
    EXPECT_EQ(master.unix_epoch_of_zero() + master.at_monotonic(monotonic), unix_now);
    EXPECT_EQ(replica.unix_epoch_of_zero() + replica.at_monotonic(monotonic), unix_now);
    // An absolute exptime 100 s ahead leaves both 100 s.
    EXPECT_EQ(to_rel_time(unix_now + 100, master) - master.at_monotonic(monotonic), 100u);
    EXPECT_EQ(to_rel_time(unix_now + 100, replica) - replica.at_monotonic(monotonic), 100u);
  }
}

TEST(ClockTest, SystemClockAgreesWithTime) {
  const Clock clock;
  int64_t before = static_cast<int64_t>(::time(nullptr));
  int64_t unix_now = clock.unix_epoch_of_zero() + clock.now();
  int64_t after = static_cast<int64_t>(::time(nullptr));
  // The coarse clocks trail time() by at most a tick.
  EXPECT_GE(unix_now, before - 1);
  EXPECT_LE(unix_now, after);
}

TEST_F(StoreTest, ToRelTimeFollowsMemcachedRules) {
  RelTime now = clock_.now();
  EXPECT_EQ(to_rel_time(0, clock_), 0u);
  EXPECT_EQ(to_rel_time(10, clock_), now + 10);
  EXPECT_EQ(to_rel_time(kThirtyDays, clock_), now + kThirtyDays);
  EXPECT_EQ(to_rel_time(-1, clock_), 1u);
  EXPECT_LT(to_rel_time(-1, clock_), now);
  int64_t unix_now = clock_.unix_epoch_of_zero() + now;
  EXPECT_EQ(to_rel_time(unix_now + 100, clock_), now + 100);
  EXPECT_EQ(to_rel_time(kThirtyDays + 1, clock_), 1u);  // absolute, in 1970
}

TEST_F(StoreTest, RelativeExptime) {
  ASSERT_EQ(set("k", "v", 10), StoreStatus::kStored);
  clock_.advance(9);
  EXPECT_EQ(value_of("k"), "v");
  clock_.advance(1);
  EXPECT_FALSE(value_of("k"));
  EXPECT_EQ(store_.stats().curr_items, 0u);
}

TEST_F(StoreTest, ZeroExptimeNeverExpires) {
  ASSERT_EQ(set("k", "v", 0), StoreStatus::kStored);
  clock_.advance(10u * 365 * 24 * 3600);
  EXPECT_EQ(value_of("k"), "v");
}

TEST_F(StoreTest, NegativeExptimeHasAlreadyExpired) {
  ASSERT_EQ(set("k", "old"), StoreStatus::kStored);
  ASSERT_EQ(set("k", "v", -1), StoreStatus::kStored);
  EXPECT_FALSE(value_of("k"));
}

TEST_F(StoreTest, ThirtyDaysIsStillRelative) {
  ASSERT_EQ(set("k", "v", kThirtyDays), StoreStatus::kStored);
  clock_.advance(kThirtyDays - 1);
  EXPECT_EQ(value_of("k"), "v");
  clock_.advance(1);
  EXPECT_FALSE(value_of("k"));
}

TEST_F(StoreTest, AbsoluteExptime) {
  int64_t unix_now = clock_.unix_epoch_of_zero() + clock_.now();
  ASSERT_GT(unix_now + 100, kThirtyDays);
  ASSERT_EQ(set("k", "v", unix_now + 100), StoreStatus::kStored);
  clock_.advance(99);
  EXPECT_EQ(value_of("k"), "v");
  clock_.advance(1);
  EXPECT_FALSE(value_of("k"));
}

TEST_F(StoreTest, AbsoluteExptimeInThePast) {
  int64_t unix_now = clock_.unix_epoch_of_zero() + clock_.now();
  ASSERT_EQ(set("past", "v", unix_now - 10), StoreStatus::kStored);
  EXPECT_FALSE(value_of("past"));
  ASSERT_EQ(set("1970", "v", kThirtyDays + 1), StoreStatus::kStored);
  EXPECT_FALSE(value_of("1970"));
}

TEST_F(StoreTest, ExpiredItemsCountAsMissing) {
  ASSERT_EQ(set("k", "v", 5), StoreStatus::kStored);
  clock_.advance(5);
  EXPECT_EQ(put(StoreCommand::kReplace, "k", "x").status, StoreStatus::kNotStored);
  EXPECT_EQ(put(StoreCommand::kAppend, "k", "x").status, StoreStatus::kNotStored);
  EXPECT_EQ(put(StoreCommand::kCas, "k", "x", 1).status, StoreStatus::kNotFound);
  EXPECT_EQ(arith("k", true, 1).status, ArithStatus::kNotFound);
  EXPECT_EQ(store_.remove("k", 0, kNoOwner), DeleteStatus::kNotFound);
  EXPECT_FALSE(store_.touch("k", 0));
  EXPECT_EQ(put(StoreCommand::kAdd, "k", "new").status, StoreStatus::kStored);
  EXPECT_EQ(value_of("k"), "new");
}

TEST_F(StoreTest, ReclaimedCountsExpiredItemsFound) {
  ASSERT_EQ(set("k", "v", 5), StoreStatus::kStored);
  uint64_t before = store_.stats().reclaimed;
  clock_.advance(5);
  EXPECT_FALSE(value_of("k"));
  EXPECT_EQ(store_.stats().reclaimed, before + 1);
  EXPECT_EQ(store_.stats().curr_items, 0u);
}

TEST_F(StoreTest, TouchSetsANewExptime) {
  EXPECT_FALSE(store_.touch("k", to_rel_time(10, clock_)));
  ASSERT_EQ(set("k", "v", 5), StoreStatus::kStored);
  uint64_t cas = cas_of("k");
  ItemRef touched = store_.touch("k", to_rel_time(100, clock_));
  ASSERT_TRUE(touched);
  EXPECT_EQ(touched->value_view(), "v");
  EXPECT_EQ(touched->cas, cas);  // touch does not change the cas
  touched = ItemRef();
  clock_.advance(99);
  EXPECT_EQ(value_of("k"), "v");
  clock_.advance(1);
  EXPECT_FALSE(value_of("k"));
}

TEST_F(StoreTest, TouchCanMakeAnItemPermanentOrExpireIt) {
  ASSERT_EQ(set("forever", "v", 5), StoreStatus::kStored);
  ASSERT_EQ(set("gone", "v"), StoreStatus::kStored);
  EXPECT_TRUE(store_.touch("forever", to_rel_time(0, clock_)));
  EXPECT_TRUE(store_.touch("gone", to_rel_time(-1, clock_)));
  EXPECT_FALSE(value_of("gone"));
  clock_.advance(1000);
  EXPECT_EQ(value_of("forever"), "v");
}

TEST_F(StoreTest, FlushAllNowInvalidatesEverythingStoredBefore) {
  ASSERT_EQ(set("a", "1"), StoreStatus::kStored);
  ASSERT_EQ(set("b", "2"), StoreStatus::kStored);
  store_.flush_all(0);
  EXPECT_FALSE(value_of("a"));
  EXPECT_FALSE(value_of("b"));
  // Items stored after the flush, even within the same second, stay.
  ASSERT_EQ(set("c", "3"), StoreStatus::kStored);
  EXPECT_EQ(value_of("c"), "3");
  EXPECT_EQ(put(StoreCommand::kAdd, "a", "new").status, StoreStatus::kStored);
  EXPECT_EQ(value_of("a"), "new");
  clock_.advance(100);
  EXPECT_EQ(value_of("c"), "3");
  EXPECT_EQ(value_of("a"), "new");
}

TEST_F(StoreTest, NegativeFlushDelayFlushesNow) {
  ASSERT_EQ(set("a", "1"), StoreStatus::kStored);
  store_.flush_all(-5);
  EXPECT_FALSE(value_of("a"));
}

TEST_F(StoreTest, DelayedFlushAll) {
  ASSERT_EQ(set("before", "1"), StoreStatus::kStored);
  store_.flush_all(10);
  EXPECT_EQ(value_of("before"), "1");
  clock_.advance(5);
  // Stored between the command and the flush moment: flushed as well.
  ASSERT_EQ(set("between", "2"), StoreStatus::kStored);
  clock_.advance(4);
  EXPECT_EQ(value_of("before"), "1");
  EXPECT_EQ(value_of("between"), "2");
  clock_.advance(2);  // past the flush moment
  EXPECT_FALSE(value_of("before"));
  EXPECT_FALSE(value_of("between"));
  // Stored after the flush moment: stays.
  ASSERT_EQ(set("after", "3"), StoreStatus::kStored);
  clock_.advance(100);
  EXPECT_EQ(value_of("after"), "3");
}

TEST_F(StoreTest, LockNeedsAnExistingItemAndIsNotReentrant) {
  EXPECT_EQ(store_.lock("k", kOwner), LockStatus::kNotFound);
  ASSERT_EQ(set("k", "1"), StoreStatus::kStored);
  EXPECT_EQ(store_.lock("k", kOwner), LockStatus::kOk);
  EXPECT_EQ(store_.lock_owner("k"), kOwner);
  EXPECT_EQ(store_.lock("k", kOther), LockStatus::kLocked);
  EXPECT_EQ(store_.lock("k", kOwner), LockStatus::kLocked);  // as yrmcds
  EXPECT_EQ(store_.stats().locked_items, 1u);
}

TEST_F(StoreTest, UnlockOnlyByTheHolder) {
  EXPECT_EQ(store_.unlock("k", kOwner), LockStatus::kNotFound);
  ASSERT_EQ(set("k", "1"), StoreStatus::kStored);
  EXPECT_EQ(store_.unlock("k", kOwner), LockStatus::kNotLocked);
  lock("k", kOwner);
  EXPECT_EQ(store_.unlock("k", kOther), LockStatus::kNotLocked);
  EXPECT_EQ(store_.unlock("k", kNoOwner), LockStatus::kNotLocked);
  EXPECT_EQ(store_.lock_owner("k"), kOwner);
  EXPECT_EQ(store_.unlock("k", kOwner), LockStatus::kOk);
  EXPECT_FALSE(store_.get("k")->is_locked());
  EXPECT_EQ(store_.stats().locked_items, 0u);
  EXPECT_EQ(store_.unlock("k", kOwner), LockStatus::kNotLocked);
  // Anybody may change it now.
  EXPECT_EQ(put(StoreCommand::kSet, "k", "2", 0, kOther).status, StoreStatus::kStored);
  EXPECT_EQ(value_of("k"), "2");
}

TEST_F(StoreTest, LockedItemRefusesOtherOwners) {
  ASSERT_EQ(set("k", "1"), StoreStatus::kStored);
  lock("k", kOwner);
  uint64_t cas = cas_of("k");

  for (StoreCommand command : {StoreCommand::kSet, StoreCommand::kAdd, StoreCommand::kReplace,
                               StoreCommand::kAppend, StoreCommand::kPrepend}) {
    SCOPED_TRACE(static_cast<int>(command));
    EXPECT_EQ(put(command, "k", "x", 0, kOther).status, StoreStatus::kLocked);
    EXPECT_EQ(put(command, "k", "x", 0, kNoOwner).status, StoreStatus::kLocked);
  }
  EXPECT_EQ(put(StoreCommand::kCas, "k", "x", cas, kOther).status, StoreStatus::kLocked);
  EXPECT_EQ(store_.remove("k", 0, kOther), DeleteStatus::kLocked);
  EXPECT_EQ(store_.remove("k", 0, kNoOwner), DeleteStatus::kLocked);
  EXPECT_EQ(arith("k", true, 1, kOther).status, ArithStatus::kLocked);
  EXPECT_EQ(arith("k", false, 1, kOther).status, ArithStatus::kLocked);
  EXPECT_EQ(value_of("k"), "1");
  EXPECT_EQ(cas_of("k"), cas);
  EXPECT_EQ(store_.lock_owner("k"), kOwner);
}

TEST_F(StoreTest, LockedItemCanStillBeReadAndTouched) {
  ASSERT_EQ(set("k", "1", 10), StoreStatus::kStored);
  lock("k", kOwner);
  EXPECT_EQ(value_of("k"), "1");
  EXPECT_TRUE(store_.touch("k", to_rel_time(100, clock_)));
}

TEST_F(StoreTest, LockedItemAcceptsItsOwnerAndKeepsTheLock) {
  ASSERT_EQ(set("k", "1"), StoreStatus::kStored);
  lock("k", kOwner);

  ASSERT_EQ(put(StoreCommand::kSet, "k", "2", 0, kOwner).status, StoreStatus::kStored);
  EXPECT_EQ(value_of("k"), "2");
  EXPECT_EQ(store_.lock_owner("k"), kOwner);
  EXPECT_EQ(put(StoreCommand::kSet, "k", "x", 0, kOther).status, StoreStatus::kLocked);

  ASSERT_EQ(put(StoreCommand::kAppend, "k", "0", 0, kOwner).status, StoreStatus::kStored);
  EXPECT_EQ(value_of("k"), "20");
  EXPECT_EQ(store_.lock_owner("k"), kOwner);

  ArithResult result = arith("k", true, 1, kOwner);
  ASSERT_EQ(result.status, ArithStatus::kOk);
  EXPECT_EQ(result.value, 21u);
  EXPECT_EQ(store_.lock_owner("k"), kOwner);
  EXPECT_EQ(arith("k", true, 1, kOther).status, ArithStatus::kLocked);

  ASSERT_EQ(put(StoreCommand::kCas, "k", "30", cas_of("k"), kOwner).status, StoreStatus::kStored);
  EXPECT_EQ(store_.lock_owner("k"), kOwner);
  EXPECT_EQ(store_.stats().locked_items, 1u);
  EXPECT_EQ(store_.stats().curr_items, 1u);

  // A delete by the holder removes the object and with it the lock.
  EXPECT_EQ(store_.remove("k", 0, kOwner), DeleteStatus::kDeleted);
  EXPECT_FALSE(value_of("k"));
  EXPECT_EQ(store_.stats().locked_items, 0u);
  EXPECT_EQ(put(StoreCommand::kSet, "k", "free", 0, kOther).status, StoreStatus::kStored);
  EXPECT_FALSE(store_.get("k")->is_locked());
}

// `stats cachelocks` reads this: every locked key with its owner and the
// moment it was locked, which a holder's own write keeps.
TEST_F(StoreTest, LockedItemsListsOwnersAndLockTimes) {
  for (const char* key : {"a:1", "a:2", "b:1", "free"})
    ASSERT_EQ(set(key, "v"), StoreStatus::kStored);
  EXPECT_TRUE(store_.locked_items("").empty());
  clock_.advance(5);
  RelTime first = clock_.now();
  lock("a:1", kOwner);
  clock_.advance(3);
  lock("a:2", kOther);
  lock("b:1", kOwner);
  ASSERT_EQ(put(StoreCommand::kSet, "a:1", "new", 0, kOwner).status, StoreStatus::kStored);

  auto sorted = [this](std::string_view prefix) {
    std::vector<LockedItem> items = store_.locked_items(prefix);
    std::sort(items.begin(), items.end(),
              [](const LockedItem& x, const LockedItem& y) { return x.key < y.key; });
    return items;
  };
  std::vector<LockedItem> all = sorted("");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].key, "a:1");
  EXPECT_EQ(all[0].owner, kOwner);
  EXPECT_EQ(all[0].since, first);  // the holder's set kept the lock and its age
  EXPECT_EQ(all[1].key, "a:2");
  EXPECT_EQ(all[1].owner, kOther);
  EXPECT_EQ(all[1].since, first + 3);
  EXPECT_EQ(all[2].key, "b:1");

  std::vector<LockedItem> a = sorted("a:");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1].key, "a:2");
  EXPECT_TRUE(sorted("free").empty());

  ASSERT_EQ(store_.unlock("a:2", kOther), LockStatus::kOk);
  ASSERT_EQ(store_.remove("b:1", 0, kOwner), DeleteStatus::kDeleted);
  all = sorted("");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].key, "a:1");
}

// A demoted master's clients' locks all go at once (replication::Node):
// the items stay, unlocked, for anyone to change, and their old holders'
// unlocks find nothing to release.
TEST_F(StoreTest, ReleaseAllLocksFreesEveryHoldersItems) {
  for (const char* key : {"a", "b", "c"})
    ASSERT_EQ(set(key, "v"), StoreStatus::kStored);
  lock("a", kOwner);
  lock("b", kOther);
  EXPECT_EQ(store_.release_all_locks(), 2u);
  EXPECT_TRUE(store_.locked_items("").empty());
  EXPECT_EQ(put(StoreCommand::kSet, "a", "new", 0, kOther).status, StoreStatus::kStored);
  EXPECT_EQ(value_of("a"), "new");
  EXPECT_EQ(store_.unlock("b", kOther), LockStatus::kNotLocked);
  EXPECT_EQ(value_of("b"), "v");
  EXPECT_EQ(store_.release_all_locks(), 0u);
}

TEST_F(StoreTest, LockedItemSurvivesExpiry) {
  ASSERT_EQ(set("k", "v", 10), StoreStatus::kStored);
  lock("k", kOwner);
  clock_.advance(1000);
  EXPECT_EQ(value_of("k"), "v");
  EXPECT_EQ(put(StoreCommand::kAdd, "k", "x", 0, kOther).status, StoreStatus::kLocked);
  // docs/locking.md: once unlocked, an exptime that passed takes effect.
  ASSERT_EQ(store_.unlock("k", kOwner), LockStatus::kOk);
  EXPECT_FALSE(value_of("k"));
}

TEST_F(StoreTest, LockedItemSurvivesFlushAll) {
  ASSERT_EQ(set("locked", "v"), StoreStatus::kStored);
  ASSERT_EQ(set("plain", "v"), StoreStatus::kStored);
  lock("locked", kOwner);
  uint64_t cas = cas_of("locked");
  store_.flush_all(0);
  EXPECT_EQ(value_of("locked"), "v");
  EXPECT_FALSE(value_of("plain"));

  ASSERT_EQ(set("plain", "v"), StoreStatus::kStored);
  store_.flush_all(5);
  clock_.advance(6);
  EXPECT_EQ(value_of("locked"), "v");
  EXPECT_FALSE(value_of("plain"));

  // docs/locking.md: the spared object stays after the unlock, with a new CAS.
  ASSERT_EQ(store_.unlock("locked", kOwner), LockStatus::kOk);
  EXPECT_EQ(value_of("locked"), "v");
  EXPECT_NE(cas_of("locked"), cas);
  clock_.advance(100);
  EXPECT_EQ(value_of("locked"), "v");
}

TEST_F(StoreTest, LockAndGetRenewsTheExptime) {
  ASSERT_EQ(set("k", "v", 10), StoreStatus::kStored);
  RelTime exptime = to_rel_time(100, clock_);
  LockStatus status;
  ItemRef item = store_.lock_and_get("k", kOwner, &exptime, &status);
  ASSERT_EQ(status, LockStatus::kOk);
  ASSERT_TRUE(item);
  EXPECT_EQ(item->value_view(), "v");
  EXPECT_EQ(item->exptime, exptime);
  EXPECT_FALSE(store_.lock_and_get("k", kOther, nullptr, &status));
  EXPECT_EQ(status, LockStatus::kLocked);
  EXPECT_FALSE(store_.lock_and_get("missing", kOther, nullptr, &status));
  EXPECT_EQ(status, LockStatus::kNotFound);
  ASSERT_EQ(store_.unlock("k", kOwner), LockStatus::kOk);
  clock_.advance(99);
  EXPECT_EQ(value_of("k"), "v");
  clock_.advance(1);
  EXPECT_FALSE(value_of("k"));
}

TEST_F(StoreTest, ReplaceAndUnlock) {
  EXPECT_EQ(store_.replace_and_unlock(make("k", "x"), 0, kOwner).status, StoreStatus::kNotFound);
  ASSERT_EQ(set("k", "old"), StoreStatus::kStored);
  EXPECT_EQ(store_.replace_and_unlock(make("k", "x"), 0, kOwner).status, StoreStatus::kNotLocked);
  lock("k", kOwner);
  uint64_t cas = cas_of("k");
  EXPECT_EQ(store_.replace_and_unlock(make("k", "x"), 0, kOther).status, StoreStatus::kNotLocked);
  EXPECT_EQ(store_.replace_and_unlock(make("k", "x"), cas + 1, kOwner).status,
            StoreStatus::kExists);
  EXPECT_EQ(value_of("k"), "old");
  EXPECT_EQ(store_.lock_owner("k"), kOwner);

  StoreResult result = store_.replace_and_unlock(make("k", "new", 3), cas, kOwner);
  ASSERT_EQ(result.status, StoreStatus::kStored);
  EXPECT_NE(result.cas, cas);
  ItemRef item = store_.get("k");
  ASSERT_TRUE(item);
  EXPECT_EQ(item->value_view(), "new");
  EXPECT_EQ(item->flags, 3u);
  EXPECT_EQ(item->cas, result.cas);
  EXPECT_FALSE(item->is_locked());
  EXPECT_EQ(store_.stats().locked_items, 0u);
  EXPECT_EQ(put(StoreCommand::kSet, "k", "other", 0, kOther).status, StoreStatus::kStored);
}

TEST_F(StoreTest, AllocateRefusesOversizedValuesAndKeys) {
  EXPECT_TRUE(store_.allocate("k", 0, 0, store_.max_item_size()));
  EXPECT_FALSE(store_.allocate("k", 0, 0, store_.max_item_size() + 1));
  EXPECT_TRUE(store_.allocate(std::string(kMaxKeyLength, 'k'), 0, 0, 1));
  EXPECT_FALSE(store_.allocate(std::string(kMaxKeyLength + 1, 'k'), 0, 0, 1));
  ItemRef item = store_.allocate("key", 3, 4, 5);
  ASSERT_TRUE(item);
  EXPECT_FALSE(item->linked);
  EXPECT_EQ(item->refs.load(), 1u);
  EXPECT_EQ(item->key(), "key");
  EXPECT_EQ(item->flags, 3u);
  EXPECT_EQ(item->exptime, 4u);
  EXPECT_EQ(item->value_len, 5u);
}

TEST_F(StoreTest, StoreHoldsItsOwnReference) {
  ItemRef item = make("k", "v");
  ASSERT_EQ(store_.store(StoreCommand::kSet, item, 0, kNoOwner).status, StoreStatus::kStored);
  EXPECT_TRUE(item->linked);
  EXPECT_EQ(item->refs.load(), 2u);
  ASSERT_EQ(set("k", "replacement"), StoreStatus::kStored);
  EXPECT_FALSE(item->linked);
  EXPECT_EQ(item->refs.load(), 1u);
}

TEST_F(StoreTest, ManyItemsSurviveTableGrowth) {
  constexpr int kCount = 5000;
  for (int i = 0; i < kCount; ++i) {
    ASSERT_EQ(set("key-" + std::to_string(i), std::to_string(i * 7)), StoreStatus::kStored);
  }
  EXPECT_EQ(store_.stats().curr_items, static_cast<uint64_t>(kCount));
  for (int i = 0; i < kCount; ++i) {
    ASSERT_EQ(value_of("key-" + std::to_string(i)), std::to_string(i * 7)) << i;
  }
  for (int i = 0; i < kCount; i += 2) {
    ASSERT_EQ(store_.remove("key-" + std::to_string(i), 0, kNoOwner), DeleteStatus::kDeleted);
  }
  EXPECT_EQ(store_.stats().curr_items, static_cast<uint64_t>(kCount / 2));
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(value_of("key-" + std::to_string(i)).has_value(), i % 2 == 1) << i;
  }
}

TEST_F(StoreTest, StatsCountItemsAndBytes) {
  StoreStats empty = store_.stats();
  EXPECT_EQ(empty.curr_items, 0u);
  EXPECT_EQ(empty.bytes, 0u);
  EXPECT_EQ(empty.shards, small_config().shard_count);
  EXPECT_EQ(empty.limit_bytes, small_config().memory_limit);

  ASSERT_EQ(set("a", "12345"), StoreStatus::kStored);
  ASSERT_EQ(set("bb", "1234567890"), StoreStatus::kStored);
  size_t expected_bytes = store_.get("a")->total_size() + store_.get("bb")->total_size();
  StoreStats stats = store_.stats();
  EXPECT_EQ(stats.curr_items, 2u);
  EXPECT_EQ(stats.total_items, 2u);
  EXPECT_EQ(stats.bytes, expected_bytes);

  ASSERT_EQ(set("a", "x"), StoreStatus::kStored);  // replacement: same count
  stats = store_.stats();
  EXPECT_EQ(stats.curr_items, 2u);
  EXPECT_EQ(stats.total_items, 3u);
  EXPECT_EQ(stats.bytes, store_.get("a")->total_size() + store_.get("bb")->total_size());

  ASSERT_EQ(store_.remove("bb", 0, kNoOwner), DeleteStatus::kDeleted);
  stats = store_.stats();
  EXPECT_EQ(stats.curr_items, 1u);
  EXPECT_EQ(stats.total_items, 3u);
  EXPECT_EQ(stats.bytes, store_.get("a")->total_size());

  store_.reset_stats();
  stats = store_.stats();
  EXPECT_EQ(stats.total_items, 0u);
  EXPECT_EQ(stats.curr_items, 1u);  // a gauge, not a counter
}

// memcached counts in total_items the items it links, not the ones it
// changes in place: an incr whose number still fits, and md's invalidation.
// Here both make a copy, which was counted (6 for a set and five incrs).
TEST_F(StoreTest, WhatMemcachedChangesInPlaceIsNoNewItem) {
  ASSERT_EQ(set("n", "10"), StoreStatus::kStored);
  ASSERT_EQ(arith("n", true, 1).status, ArithStatus::kOk);   // 11
  ASSERT_EQ(arith("n", false, 5).status, ArithStatus::kOk);  // 6, padded
  EXPECT_EQ(store_.stats().total_items, 1u);
  ASSERT_EQ(arith("n", true, 1000).status, ArithStatus::kOk);  // 1006: a new item
  EXPECT_EQ(store_.stats().total_items, 2u);
  ASSERT_EQ(store_.invalidate("n", 0, kNoOwner, nullptr), DeleteStatus::kDeleted);
  EXPECT_EQ(store_.stats().total_items, 2u);
}

TEST_F(StoreTest, SetMemoryLimit) {
  store_.set_memory_limit(size_t{8} << 20);
  EXPECT_EQ(store_.stats().limit_bytes, size_t{8} << 20);
}

// memcached's get_expired and get_flushed: lookups by any command that
// found their item gone, flushed first when both.
TEST_F(StoreTest, LookupsCountTheExpiredAndFlushedItemsTheyFind) {
  ASSERT_EQ(set("a", "v", 10), StoreStatus::kStored);
  ASSERT_EQ(set("b", "v", 10), StoreStatus::kStored);
  ASSERT_EQ(set("c", "v"), StoreStatus::kStored);
  clock_.advance(20);
  EXPECT_FALSE(store_.get("a"));
  EXPECT_EQ(set("b", "w"), StoreStatus::kStored);  // its lookup found the old b
  store_.flush_all(0);
  EXPECT_EQ(store_.remove("c", 0, kNoOwner), DeleteStatus::kNotFound);
  EXPECT_FALSE(store_.get("missing"));
  StoreStats stats = store_.stats();
  EXPECT_EQ(stats.found_expired, 2u);
  EXPECT_EQ(stats.found_flushed, 1u);
  store_.reset_stats();
  EXPECT_EQ(store_.stats().found_expired, 0u);
}

// "ms ... I" with an older CAS stores the value as stale, keeping the TTL
// and the sent win token of the item it replaces (memcached 1.6.18).
TEST_F(StoreTest, StaleStoreKeepsTheTtlAndTheSentToken) {
  ASSERT_EQ(set("k", "old", 100), StoreStatus::kStored);
  uint64_t old_cas = cas_of("k");
  RelTime thirty = to_rel_time(30, clock_);
  ASSERT_EQ(store_.invalidate("k", 0, kNoOwner, &thirty), DeleteStatus::kDeleted);
  MetaGetRequest read;
  ASSERT_TRUE(store_.meta_get("k", read).won);  // the token goes out
  StoreResult stale = store_.store(StoreCommand::kCas, make("k", "new", 0, 90), old_cas, kNoOwner,
                                   /*mark_stale=*/true);
  ASSERT_EQ(stale.status, StoreStatus::kStored);
  MetaGetResult after = store_.meta_get("k", read);
  EXPECT_EQ(std::string(after.item->value_view()), "new");
  EXPECT_EQ(after.exptime, thirty);
  EXPECT_TRUE(after.stale);
  EXPECT_TRUE(after.token_was_sent);
  EXPECT_FALSE(after.won);
  // A CAS of 0 is none, never an older one.
  EXPECT_EQ(store_.store(StoreCommand::kCas, make("k", "zero"), 0, kNoOwner, true).status,
            StoreStatus::kExists);
  // kUnmatchableCas, meta's C0, matches nothing.
  EXPECT_EQ(store_.remove("k", kUnmatchableCas, kNoOwner), DeleteStatus::kExists);
}

// mg's T, N, R and t act in the client's order, as in memcached.
TEST_F(StoreTest, MetaGetAppliesItsStepsInOrder) {
  using Step = MetaGetRequest::Step;
  MetaGetRequest vivify;
  vivify.vivify = true;
  vivify.add(Step::kReadTtl);  // before N: the placeholder has none yet
  vivify.add(Step::kTouch, to_rel_time(60, clock_));
  vivify.add(Step::kVivifyTtl, to_rel_time(30, clock_));
  MetaGetResult created = store_.meta_get("new", vivify);
  EXPECT_TRUE(created.created);
  EXPECT_TRUE(created.won);
  EXPECT_EQ(created.exptime_read, 0u);
  EXPECT_EQ(created.exptime, to_rel_time(30, clock_));

  ASSERT_EQ(set("k", "v", 100), StoreStatus::kStored);
  MetaGetRequest recache_first;
  recache_first.add(Step::kRecache, to_rel_time(30, clock_));
  recache_first.add(Step::kTouch, to_rel_time(10, clock_));
  recache_first.add(Step::kReadTtl);
  MetaGetResult no_win = store_.meta_get("k", recache_first);
  EXPECT_FALSE(no_win.won);
  EXPECT_EQ(no_win.exptime_read, to_rel_time(10, clock_));
  EXPECT_TRUE(recache_first.touches());

  ASSERT_EQ(set("k", "v", 100), StoreStatus::kStored);
  MetaGetRequest touch_first;
  touch_first.add(Step::kTouch, to_rel_time(10, clock_));
  touch_first.add(Step::kRecache, to_rel_time(30, clock_));
  EXPECT_TRUE(store_.meta_get("k", touch_first).won);
}

// memcached looks at an empty value before the CAS: non-numeric.
TEST_F(StoreTest, ArithOnAnEmptyValueIsNonNumericWhateverTheCas) {
  ASSERT_EQ(set("e", ""), StoreStatus::kStored);
  ArithRequest request;
  request.compare_cas = cas_of("e") + 1;
  EXPECT_EQ(store_.arith("e", request, kNoOwner).status, ArithStatus::kNonNumeric);
}

// A single shard with room for exactly kSlots equally sized items.
// The crawler walks the store only while something in it can expire or a
// flush_all has come since its last look.
TEST_F(StoreTest, CrawlIsNeededOnlyWhileSomethingCanExpire) {
  uint64_t flush_seen = 0;
  EXPECT_FALSE(store_.crawl_needed(&flush_seen));
  ASSERT_EQ(set("forever", "v"), StoreStatus::kStored);
  EXPECT_FALSE(store_.crawl_needed(&flush_seen));

  ASSERT_EQ(set("brief", "v", 100), StoreStatus::kStored);
  EXPECT_TRUE(store_.crawl_needed(&flush_seen));
  ASSERT_EQ(set("brief", "v"), StoreStatus::kStored);  // replaced without a TTL
  EXPECT_FALSE(store_.crawl_needed(&flush_seen));

  // touch gives an exptime and takes it away.
  ASSERT_TRUE(store_.touch("forever", to_rel_time(100, clock_)));
  EXPECT_TRUE(store_.crawl_needed(&flush_seen));
  ASSERT_TRUE(store_.touch("forever", 0));
  EXPECT_FALSE(store_.crawl_needed(&flush_seen));

  // An item with a TTL that goes away takes the need with it.
  ASSERT_EQ(set("brief", "v", 100), StoreStatus::kStored);
  EXPECT_EQ(store_.remove("brief", 0, kNoOwner), DeleteStatus::kDeleted);
  EXPECT_FALSE(store_.crawl_needed(&flush_seen));

  // A flush_all is worth one crawl (its items are reclaimable), not more.
  store_.flush_all(0);
  EXPECT_TRUE(store_.crawl_needed(&flush_seen));
  EXPECT_FALSE(store_.crawl_needed(&flush_seen));
  // A delayed one keeps asking until it has taken effect.
  store_.flush_all(10);
  EXPECT_TRUE(store_.crawl_needed(&flush_seen));
  EXPECT_TRUE(store_.crawl_needed(&flush_seen));
}

class EvictionTest : public ::testing::Test {
 protected:
  static constexpr size_t kSlots = 5;
  static constexpr size_t kValueSize = 100;

  static size_t item_size() {
    // Keys "k00".."k99" all have the same length.
    return Item::kHeaderSize + 3 + kValueSize + 2;
  }

  static StoreConfig config() {
    StoreConfig config;
    config.memory_limit = kSlots * item_size();
    config.max_item_size = 4 * kValueSize;
    config.shard_count = 1;
    return config;
  }

  EvictionTest() : store_(config(), clock_) {}

  static std::string key(size_t i) { return (i < 10 ? "k0" : "k") + std::to_string(i); }

  StoreStatus set(std::string_view key, size_t size = kValueSize, OwnerId owner = kNoOwner) {
    ItemRef item = store_.allocate(key, 0, 0, size);
    EXPECT_TRUE(item);
    std::memset(item->value(), 'v', size);
    return store_.store(StoreCommand::kSet, item, 0, owner).status;
  }

  // Whether the key is there, without marking it as read.
  bool present(std::string_view key) {
    ItemRef item = store_.get(key);
    if (item) item->accessed = false;
    return static_cast<bool>(item);
  }

  ManualClock clock_;
  Store store_;
};

TEST_F(EvictionTest, ItemSizeAsTheLimitCountsIt) {
  ASSERT_EQ(set(key(0)), StoreStatus::kStored);
  EXPECT_EQ(store_.get(key(0))->total_size(), item_size());
}

TEST_F(EvictionTest, FillsUpWithoutEvicting) {
  for (size_t i = 0; i < kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  StoreStats stats = store_.stats();
  EXPECT_EQ(stats.curr_items, kSlots);
  EXPECT_EQ(stats.bytes, kSlots * item_size());
  EXPECT_EQ(stats.evictions, 0u);
  for (size_t i = 0; i < kSlots; ++i)
    EXPECT_TRUE(present(key(i))) << i;
}

// CLOCK (store.cc): a new item starts with its `accessed` bit set, so the
// newest items outlive the older ones that nobody read.
TEST_F(EvictionTest, EvictsUnusedOlderItemsAndKeepsTheNewest) {
  for (size_t i = 0; i < kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  ASSERT_EQ(set(key(kSlots)), StoreStatus::kStored);
  ASSERT_EQ(set(key(kSlots + 1)), StoreStatus::kStored);
  StoreStats stats = store_.stats();
  EXPECT_EQ(stats.evictions, 2u);
  EXPECT_EQ(stats.curr_items, kSlots);
  EXPECT_EQ(stats.total_items, kSlots + 2);
  EXPECT_LE(stats.bytes, config().memory_limit);
  EXPECT_TRUE(present(key(kSlots)));
  EXPECT_TRUE(present(key(kSlots + 1)));
  size_t old_left = 0;
  for (size_t i = 0; i < kSlots; ++i)
    old_left += present(key(i)) ? 1 : 0;
  EXPECT_EQ(old_left, kSlots - 2);
}

TEST_F(EvictionTest, ReadItemGetsASecondChance) {
  for (size_t i = 0; i < kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  for (size_t i = 0; i < kSlots; ++i)
    ASSERT_TRUE(present(key(i)));   // clears every bit
  ASSERT_TRUE(store_.get(key(0)));  // read: k0 alone has its bit set
  // As many new items as there are unread ones: exactly those go.
  for (size_t i = kSlots; i < 2 * kSlots - 1; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  EXPECT_EQ(store_.stats().evictions, kSlots - 1);
  EXPECT_TRUE(present(key(0)));
  for (size_t i = 1; i < kSlots; ++i)
    EXPECT_FALSE(present(key(i))) << i;
  for (size_t i = kSlots; i < 2 * kSlots - 1; ++i)
    EXPECT_TRUE(present(key(i))) << i;
}

// A replica applying a new master's snapshot beside its old items
// (replication::Applier), while its readers still read the old ones: no
// item of the snapshot may be evicted while an old one is left. Without
// the mark, each read gives an old item another chance, and the hand
// takes the snapshot's items instead.
size_t new_items_evicted_while_old_ones_remain(bool marked) {
  constexpr size_t kItems = 64;
  constexpr size_t kValue = 100;
  StoreConfig config;
  config.memory_limit = kItems * Item::size_for(5, kValue);  // keys "old0".."new63"
  config.max_item_size = 4 * kValue;
  config.shard_count = 1;
  ManualClock clock;
  Store store(config, clock);
  auto set = [&store](const std::string& key) {
    ItemRef item = store.allocate(key, 0, 0, kValue);
    std::memset(item->value(), 'v', kValue);
    return store.store(StoreCommand::kSet, item, 0, kNoOwner).status;
  };
  auto key = [](const char* kind, size_t i) { return kind + std::to_string(i); };
  // Which items are there, by kind, without touching their bits.
  auto count = [&store](std::string_view kind) {
    size_t found = 0;
    for (uint64_t cursor = 0; cursor != Store::kScanDone;) {
      cursor = store.walk_items(cursor, 1024, [&](const Item& item) {
        found += item.key().substr(0, 3) == kind ? 1 : 0;
      });
    }
    return found;
  };
  for (size_t i = 0; i < kItems; ++i)
    EXPECT_EQ(set(key("old", i)), StoreStatus::kStored);
  if (marked) store.evict_first_stored_before(store.cas_counter() + 1);
  size_t wrongly_evicted = 0;
  for (size_t i = 0; i < kItems; ++i) {
    EXPECT_EQ(set(key("new", i)), StoreStatus::kStored);
    if (count("old") > 0) wrongly_evicted = std::max(wrongly_evicted, i + 1 - count("new"));
    for (size_t j = 0; j < kItems; ++j)
      store.get(key("old", j));  // readers still read what is left of them
  }
  EXPECT_GT(store.stats().evictions, 0u);
  return wrongly_evicted;
}

TEST(EvictionMarkTest, ItemsStoredBeforeTheMarkAreEvictedFirst) {
  EXPECT_EQ(new_items_evicted_while_old_ones_remain(true), 0u);
  EXPECT_GT(new_items_evicted_while_old_ones_remain(false), 0u);  // what the mark prevents
}

TEST_F(EvictionTest, SecondChanceIsUsedUp) {
  for (size_t i = 0; i < kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  ASSERT_TRUE(store_.get(key(0)));
  // Enough new items to go round the whole cache: k0's bit was cleared when
  // it got its second chance, so it goes with the rest.
  for (size_t i = kSlots; i < 3 * kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  EXPECT_FALSE(present(key(0)));
  EXPECT_EQ(store_.stats().curr_items, kSlots);
}

TEST_F(EvictionTest, LockedItemsAreNeverEvicted) {
  ASSERT_EQ(set(key(0)), StoreStatus::kStored);
  ASSERT_EQ(store_.lock(key(0), kOwner), LockStatus::kOk);
  for (size_t i = 1; i < 3 * kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  EXPECT_TRUE(present(key(0)));
  EXPECT_EQ(store_.stats().curr_items, kSlots);
}

TEST_F(EvictionTest, HolderWriteKeepsTheItemSafeFromEviction) {
  ASSERT_EQ(set(key(0)), StoreStatus::kStored);
  ASSERT_EQ(store_.lock(key(0), kOwner), LockStatus::kOk);
  ASSERT_EQ(set(key(0), kValueSize, kOwner), StoreStatus::kStored);
  for (size_t i = 1; i < 3 * kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  EXPECT_TRUE(present(key(0)));
  EXPECT_EQ(store_.lock_owner(key(0)), kOwner);
}

TEST_F(EvictionTest, UnlockedItemCanBeEvictedAgain) {
  ASSERT_EQ(set(key(0)), StoreStatus::kStored);
  ASSERT_EQ(store_.lock(key(0), kOwner), LockStatus::kOk);
  for (size_t i = 1; i < 2 * kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  ASSERT_EQ(store_.unlock(key(0), kOwner), LockStatus::kOk);
  for (size_t i = 2 * kSlots; i < 4 * kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  EXPECT_FALSE(present(key(0)));
  EXPECT_EQ(store_.stats().curr_items, kSlots);
}

// A lower limit evicts down to it at once, never a locked item, and counts
// each pass over a locked item (lrutail_reflocked).
TEST_F(EvictionTest, LoweringTheLimitEvictsAtOnceButNotLockedItems) {
  for (size_t i = 0; i < kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  ASSERT_EQ(store_.lock(key(0), kOwner), LockStatus::kOk);
  ASSERT_EQ(store_.lock(key(1), kOwner), LockStatus::kOk);
  store_.set_memory_limit(2 * item_size());
  StoreStats stats = store_.stats();
  EXPECT_EQ(stats.curr_items, 2u);
  EXPECT_EQ(stats.evictions, kSlots - 2);
  EXPECT_LE(stats.bytes, 2 * item_size());
  EXPECT_GT(stats.evict_passed_locked, 0u);
  EXPECT_TRUE(present(key(0)));
  EXPECT_TRUE(present(key(1)));
  // Locked items alone over the limit stay.
  store_.set_memory_limit(item_size());
  EXPECT_EQ(store_.stats().curr_items, 2u);
  EXPECT_EQ(store_.stats().limit_bytes, item_size());
}

// Locked items keep a shard over a lowered limit. Their holder may still
// write a value no larger than the one it replaces (it takes no room), and
// a larger one that finds no room fails leaving the item and the lock, as a
// holder's failed set does in yrmcds; before, both deleted the locked item
// and ended the lock.
TEST_F(EvictionTest, AHoldersWritesOverALoweredLimitKeepTheItemAndTheLock) {
  ASSERT_EQ(set(key(0), 3 * kValueSize), StoreStatus::kStored);
  ASSERT_EQ(store_.lock(key(0), kOwner), LockStatus::kOk);
  store_.set_memory_limit(item_size());  // below what the locked item takes
  ASSERT_TRUE(present(key(0)));

  EXPECT_EQ(set(key(0), kValueSize, kOwner), StoreStatus::kStored);  // smaller
  EXPECT_EQ(store_.lock_owner(key(0)), kOwner);
  EXPECT_EQ(set(key(0), 2 * kValueSize, kOwner), StoreStatus::kNoMemory);  // larger, no room
  EXPECT_TRUE(present(key(0)));
  EXPECT_EQ(store_.lock_owner(key(0)), kOwner);
  EXPECT_EQ(set(key(0), kValueSize, kOther), StoreStatus::kLocked);
}

TEST_F(EvictionTest, NoMemoryWhenEverythingIsLocked) {
  for (size_t i = 0; i < kSlots; ++i) {
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
    ASSERT_EQ(store_.lock(key(i), kOwner), LockStatus::kOk);
  }
  EXPECT_EQ(set(key(kSlots)), StoreStatus::kNoMemory);
  EXPECT_FALSE(present(key(kSlots)));
  for (size_t i = 0; i < kSlots; ++i)
    EXPECT_TRUE(present(key(i))) << i;
  EXPECT_EQ(store_.stats().evictions, 0u);
}

TEST_F(EvictionTest, ItemLargerThanTheShardIsRefused) {
  // An item that may be allocated but cannot fit in the memory limit.
  StoreConfig roomy = config();
  roomy.max_item_size = roomy.memory_limit;
  Store store(roomy, clock_);
  ItemRef item = store.allocate("big", 0, 0, roomy.memory_limit);
  ASSERT_TRUE(item);
  EXPECT_EQ(store.store(StoreCommand::kSet, item, 0, kNoOwner).status, StoreStatus::kNoMemory);
  EXPECT_FALSE(store.get("big"));
  EXPECT_EQ(store.stats().curr_items, 0u);
}

TEST_F(EvictionTest, ReplacingAnItemReusesItsSpace) {
  for (size_t i = 0; i < kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  // Same size: the old version's bytes are enough, nobody is evicted.
  ASSERT_EQ(set(key(2)), StoreStatus::kStored);
  EXPECT_EQ(store_.stats().evictions, 0u);
  for (size_t i = 0; i < kSlots; ++i)
    EXPECT_TRUE(present(key(i))) << i;
}

TEST_F(EvictionTest, ExpiredItemsAtTheTailAreReclaimedNotEvicted) {
  ItemRef item = store_.allocate(key(0), 0, to_rel_time(5, clock_), kValueSize);
  ASSERT_TRUE(item);
  std::memset(item->value(), 'v', kValueSize);
  ASSERT_EQ(store_.store(StoreCommand::kSet, item, 0, kNoOwner).status, StoreStatus::kStored);
  item = ItemRef();
  for (size_t i = 1; i < kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  clock_.advance(10);
  ASSERT_EQ(set(key(kSlots)), StoreStatus::kStored);
  StoreStats stats = store_.stats();
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_EQ(stats.reclaimed, 1u);
  EXPECT_EQ(stats.curr_items, kSlots);
}

// memcached's -M: a full store refuses rather than evict; an expired item
// still makes room.
TEST_F(EvictionTest, WithoutEvictionsAFullStoreRefuses) {
  StoreConfig no_evictions = config();
  no_evictions.evictions = false;
  Store store(no_evictions, clock_);
  auto set_in = [&](std::string_view key, int64_t exptime = 0) {
    ItemRef item = store.allocate(key, 0, to_rel_time(exptime, clock_), kValueSize);
    EXPECT_TRUE(item);
    std::memset(item->value(), 'v', kValueSize);
    return store.store(StoreCommand::kSet, item, 0, kNoOwner).status;
  };
  ASSERT_EQ(set_in(key(0), 5), StoreStatus::kStored);
  for (size_t i = 1; i < kSlots; ++i)
    ASSERT_EQ(set_in(key(i)), StoreStatus::kStored);
  EXPECT_EQ(set_in(key(kSlots)), StoreStatus::kNoMemory);
  clock_.advance(10);  // key 0 expires: its room can be taken
  EXPECT_EQ(set_in(key(kSlots)), StoreStatus::kStored);
  EXPECT_EQ(set_in(key(kSlots + 1)), StoreStatus::kNoMemory);
  EXPECT_EQ(store.stats().evictions, 0u);
  for (size_t i = 1; i <= kSlots; ++i)
    EXPECT_TRUE(store.get(key(i))) << i;
}

TEST_F(EvictionTest, ResetStatsClearsEvictions) {
  for (size_t i = 0; i <= kSlots; ++i)
    ASSERT_EQ(set(key(i)), StoreStatus::kStored);
  ASSERT_EQ(store_.stats().evictions, 1u);
  store_.reset_stats();
  EXPECT_EQ(store_.stats().evictions, 0u);
  EXPECT_EQ(store_.stats().curr_items, kSlots);
}

}  // namespace
}  // namespace lockcached::store
