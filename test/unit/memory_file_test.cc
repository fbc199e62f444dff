// Unit tests of the warm restart's file (replication/memory_file.h): a
// store saved, then loaded into a new store whose clock says how long the
// server was down, as a restart would.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "lockcached/protocol/binary_wire.h"
#include "lockcached/replication/memory_file.h"
#include "lockcached/store/clock.h"
#include "lockcached/store/store.h"

namespace lockcached::replication {
namespace {

namespace fs = std::filesystem;
using store::ItemRef;
using store::RelTime;
using store::Store;
using store::StoreCommand;
using store::StoreConfig;
using store::StoreStatus;

constexpr int64_t kUnixStart = 1'700'000'000;

// A ManualClock that says `now` at the unix time `unix_now`: one per
// process life.
class LifeClock : public store::ManualClock {
 public:
  explicit LifeClock(int64_t unix_now, RelTime now = 2) {
    advance(now - this->now());
    unix_zero_ = unix_now - now;
  }
  int64_t unix_now() const { return unix_zero_ + now(); }
};

// The real clock starts far from 0 (clock.cc), so that last accesses from
// before a restart fit; the second life's clocks do too.
constexpr RelTime kSecondStart = 1000;

StoreConfig config(size_t memory = size_t{16} << 20, size_t max_item = size_t{64} << 10) {
  StoreConfig config;
  config.memory_limit = memory;
  config.max_item_size = max_item;
  config.shard_count = 4;
  return config;
}

uint64_t put(Store& store, std::string_view key, std::string_view value, uint32_t flags = 0,
             RelTime exptime = 0) {
  ItemRef item = store.allocate(key, flags, exptime, value.size());
  std::memcpy(item->value(), value.data(), value.size());
  store::StoreResult result = store.store(StoreCommand::kSet, item, 0, store::kNoOwner);
  EXPECT_EQ(result.status, StoreStatus::kStored);
  return result.cas;
}

class MemoryFileTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = testing::TempDir() + "lockcached_memory_file_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    directory_ = pattern;
    path_ = (directory_ / "cache").string();
  }
  void TearDown() override { fs::remove_all(directory_); }

  // The store of the first life, saved.
  void save() {
    MemoryFileSaved saved = save_memory_file(path_, before_, before_.stats().limit_bytes);
    ASSERT_TRUE(saved.ok) << saved.error;
    EXPECT_EQ(saved.bytes, fs::file_size(path_));
  }
  MemoryFileLoaded load(Store& store) { return load_memory_file(path_, store); }
  // The second life's clock, started `down` seconds after the first's now.
  LifeClock clock_after(int64_t down) { return LifeClock(first_.unix_now() + down, kSecondStart); }

  std::string bytes() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void write(const std::string& bytes) const {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  }

  fs::path directory_;
  std::string path_;
  LifeClock first_{kUnixStart};
  Store before_{config(), first_};
};

TEST_F(MemoryFileTest, KeysValuesFlagsAndCasComeBack) {
  std::string binary("a\0b\r\nc", 6);
  uint64_t cas_a = put(before_, "a", binary, 7);
  uint64_t cas_b = put(before_, "b", "", 0xffffffff);
  save();
  LifeClock second = clock_after(5);
  Store after(config(), second);
  MemoryFileLoaded loaded = load(after);
  ASSERT_EQ(loaded.outcome, MemoryFileLoaded::kLoaded) << loaded.why;
  EXPECT_EQ(loaded.restored, 2u);
  EXPECT_EQ(loaded.dropped, 0u);
  EXPECT_EQ(loaded.seconds_down, 5);
  ItemRef a = after.get("a");
  ItemRef b = after.get("b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->value_view(), binary);
  EXPECT_EQ(a->flags, 7u);
  EXPECT_EQ(a->cas, cas_a);
  EXPECT_EQ(b->value_view(), "");
  EXPECT_EQ(b->flags, 0xffffffffu);
  EXPECT_EQ(b->cas, cas_b);
  EXPECT_FALSE(fs::exists(path_)) << "a loaded file must not be loaded again after a crash";
}

TEST_F(MemoryFileTest, CasCounterGoesOnFromWhereItWas) {
  put(before_, "kept", "1");
  uint64_t deleted_cas = put(before_, "gone", "2");
  before_.remove("gone", 0, store::kNoOwner);
  save();
  LifeClock second = clock_after(1);
  Store after(config(), second);
  ASSERT_EQ(load(after).outcome, MemoryFileLoaded::kLoaded);
  // A client that read "gone" before the stop must not match a new item.
  EXPECT_GT(put(after, "gone", "3"), deleted_cas);
}

TEST_F(MemoryFileTest, ExpiryIsAUnixTimeAndWhatPassedWhileDownIsGone) {
  first_.advance(10);
  put(before_, "short", "x", 0, first_.now() + 20);
  put(before_, "long", "y", 0, first_.now() + 500);
  put(before_, "never", "z");
  save();
  LifeClock second = clock_after(30);  // "short" expired 10 s before the start
  Store after(config(), second);
  MemoryFileLoaded loaded = load(after);
  ASSERT_EQ(loaded.outcome, MemoryFileLoaded::kLoaded) << loaded.why;
  EXPECT_EQ(loaded.restored, 2u);
  EXPECT_EQ(loaded.dropped, 1u);
  EXPECT_FALSE(after.get("short"));
  ItemRef long_lived = after.get("long");
  ASSERT_TRUE(long_lived);
  EXPECT_EQ(long_lived->exptime, second.now() + 500 - 30);
  EXPECT_EQ(after.get("never")->exptime, 0u);
  EXPECT_EQ(after.stats().curr_items, 2u);
}

TEST_F(MemoryFileTest, MetaStateAndLastAccessAreKept) {
  put(before_, "stale", "s");
  ASSERT_EQ(before_.invalidate("stale", 0, store::kNoOwner, nullptr), store::DeleteStatus::kDeleted);
  ItemRef binary_key = before_.allocate("bin", 0, 0, 1);
  binary_key->value()[0] = 'b';
  binary_key->key_binary = true;
  ASSERT_EQ(before_.store(StoreCommand::kSet, binary_key, 0, store::kNoOwner).status,
            StoreStatus::kStored);
  put(before_, "read", "r");
  first_.advance(3);
  ASSERT_TRUE(before_.get("read"));  // fetched, last access now
  first_.advance(7);
  save();
  LifeClock second = clock_after(20);
  Store after(config(), second);
  ASSERT_EQ(load(after).outcome, MemoryFileLoaded::kLoaded);
  second.advance(100);
  store::MetaGetRequest peek;
  peek.bump = false;
  store::MetaGetResult stale = after.meta_get("stale", peek);
  EXPECT_TRUE(stale.stale);
  store::MetaGetResult read = after.meta_get("read", peek);
  EXPECT_TRUE(read.fetched_before);
  // 7 s idle before the stop, 20 s down, 100 s since the start.
  EXPECT_EQ(read.last_access, 127u);
  EXPECT_TRUE(after.meta_get("bin", peek).key_binary);
  EXPECT_FALSE(after.meta_get("stale", peek).fetched_before);
}

TEST_F(MemoryFileTest, TheClockBitIsKept) {
  put(before_, "cold", "c");
  put(before_, "hot", "h");
  // A store that must evict clears every bit it passes; here: clear them
  // through a walk that evicts nothing, by hand.
  uint64_t cursor = 0;
  while (cursor != Store::kScanDone) {
    cursor = before_.walk_items(cursor, 64, [](const store::Item& item) {
      const_cast<store::Item&>(item).accessed = false;
    });
  }
  ASSERT_TRUE(before_.get("hot"));
  save();
  LifeClock second = clock_after(1);
  Store after(config(), second);
  ASSERT_EQ(load(after).outcome, MemoryFileLoaded::kLoaded);
  std::map<std::string, bool> accessed;
  cursor = 0;
  while (cursor != Store::kScanDone) {
    cursor = after.walk_items(cursor, 64, [&](const store::Item& item) {
      accessed[std::string(item.key())] = item.accessed;
    });
  }
  EXPECT_EQ(accessed, (std::map<std::string, bool>{{"cold", false}, {"hot", true}}));
}

TEST_F(MemoryFileTest, LocksEndWithTheProcess) {
  put(before_, "locked", "l");
  ASSERT_EQ(before_.lock("locked", 42), store::LockStatus::kOk);
  save();
  LifeClock second = clock_after(1);
  Store after(config(), second);
  ASSERT_EQ(load(after).outcome, MemoryFileLoaded::kLoaded);
  ASSERT_TRUE(after.get("locked"));
  EXPECT_EQ(after.lock_owner("locked"), store::kNoOwner);
  EXPECT_EQ(after.stats().locked_items, 0u);
}

TEST_F(MemoryFileTest, ADelayedFlushStillComesAtItsMoment) {
  put(before_, "a", "1");
  before_.flush_all(60);
  save();
  // Down 30 s: the flush is 30 s ahead of the start.
  LifeClock second = clock_after(30);
  Store after(config(), second);
  ASSERT_EQ(load(after).outcome, MemoryFileLoaded::kLoaded);
  ASSERT_TRUE(after.get("a"));
  second.advance(31);
  EXPECT_FALSE(after.get("a"));
}

TEST_F(MemoryFileTest, AFlushWhoseMomentPassedWhileDownDropsEverything) {
  put(before_, "a", "1");
  put(before_, "b", "2");
  before_.flush_all(10);
  save();
  LifeClock second = clock_after(30);
  Store after(config(), second);
  MemoryFileLoaded loaded = load(after);
  ASSERT_EQ(loaded.outcome, MemoryFileLoaded::kLoaded);
  EXPECT_EQ(loaded.restored, 0u);
  EXPECT_EQ(loaded.dropped, 2u);
  EXPECT_FALSE(after.get("a"));
  // What comes after the start is not flushed.
  put(after, "new", "3");
  EXPECT_TRUE(after.get("new"));
}

TEST_F(MemoryFileTest, NoFileIsACleanColdStart) {
  Store after(config(), first_);
  MemoryFileLoaded loaded = load(after);
  EXPECT_EQ(loaded.outcome, MemoryFileLoaded::kNoFile);
  EXPECT_EQ(after.stats().curr_items, 0u);
}

// Every byte of the file, flipped one at a time (header, frames, footer,
// digest): never an item from it, and the file goes.
TEST_F(MemoryFileTest, ADamagedFileLoadsNothing) {
  put(before_, "key", std::string(100, 'v'), 3, 0);
  put(before_, "other", "w");
  save();
  std::string good = bytes();
  for (size_t i = 0; i < good.size(); ++i) {
    std::string damaged = good;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x10);
    write(damaged);
    Store after(config(), first_);
    MemoryFileLoaded loaded = load(after);
    ASSERT_EQ(loaded.outcome, MemoryFileLoaded::kRefused) << "byte " << i;
    EXPECT_EQ(after.stats().curr_items, 0u) << "byte " << i;
    EXPECT_FALSE(after.get("key")) << "byte " << i;
    EXPECT_FALSE(fs::exists(path_)) << "byte " << i;
  }
}

TEST_F(MemoryFileTest, ATruncatedFileLoadsNothing) {
  put(before_, "key", "value");
  save();
  std::string good = bytes();
  for (size_t length : {size_t{0}, size_t{7}, size_t{80}, good.size() / 2, good.size() - 1}) {
    write(good.substr(0, length));
    Store after(config(), first_);
    MemoryFileLoaded loaded = load(after);
    EXPECT_EQ(loaded.outcome, MemoryFileLoaded::kRefused) << length;
    EXPECT_EQ(after.stats().curr_items, 0u) << length;
  }
}

TEST_F(MemoryFileTest, DamageIsNamed) {
  put(before_, "key", "value");
  save();
  std::string good = bytes();
  std::string other_format = good;
  other_format[11] = 2;  // the format's low byte, after the 8-byte magic
  write(other_format);
  Store after(config(), first_);
  EXPECT_EQ(load(after).why, "format 2, this lockcached reads format 1");
  std::string damaged = good;
  damaged[good.size() / 2] ^= 1;
  write(damaged);
  EXPECT_EQ(load(after).why, "damaged (its checksum does not match)");
  write("memcached");
  EXPECT_EQ(load(after).why, "not a lockcached memory file");
}

// A file's SHA-256, as its footer ends with it.
std::string sha256(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

// A count far beyond what the body holds, under a checksum that matches (a
// writer's bug): refused before the count sizes the store's tables, which
// would have asked for memory without bound.
TEST_F(MemoryFileTest, AnItemCountTheBodyCannotHoldLoadsNothing) {
  put(before_, "key", "value");
  save();
  std::string file = bytes();
  constexpr size_t kDigest = 32;
  std::string count;  // the footer: magic, items, body bytes, digest
  protocol::binary::append_u64(uint64_t{1} << 61, count);
  file.replace(file.size() - kDigest - 16, 8, count);
  file.replace(file.size() - kDigest, kDigest, sha256(file.substr(0, file.size() - kDigest)));
  write(file);
  Store after(config(), first_);
  MemoryFileLoaded loaded = load(after);
  EXPECT_EQ(loaded.outcome, MemoryFileLoaded::kRefused);
  EXPECT_EQ(loaded.why, "damaged (its item count)");
  EXPECT_EQ(after.stats().curr_items, 0u);
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(MemoryFileTest, AnotherMemoryLimitOrItemSizeStartsCold) {
  put(before_, "key", "value");
  for (StoreConfig other : {config(size_t{32} << 20), config(size_t{16} << 20, size_t{32} << 10)}) {
    save();
    Store after(other, first_);
    MemoryFileLoaded loaded = load(after);
    EXPECT_EQ(loaded.outcome, MemoryFileLoaded::kRefused);
    EXPECT_NE(loaded.why.find("--memory_limit_mb and --max_item_size"), std::string::npos)
        << loaded.why;
    EXPECT_FALSE(after.get("key"));
    EXPECT_FALSE(fs::exists(path_));
  }
}

TEST_F(MemoryFileTest, AFailedSaveLeavesNothingBehind) {
  put(before_, "key", "value");
  std::string nowhere = (directory_ / "missing" / "cache").string();
  MemoryFileSaved saved = save_memory_file(nowhere, before_, before_.stats().limit_bytes);
  EXPECT_FALSE(saved.ok);
  EXPECT_NE(saved.error.find("No such file or directory"), std::string::npos) << saved.error;
  EXPECT_TRUE(fs::is_empty(directory_));
}

TEST_F(MemoryFileTest, ALeftoverTemporaryFileGoesAndIsNeverLoaded) {
  put(before_, "key", "value");
  save();
  fs::rename(path_, path_ + ".tmp");  // as a save killed before its rename leaves it
  Store after(config(), first_);
  EXPECT_EQ(load(after).outcome, MemoryFileLoaded::kNoFile);
  EXPECT_FALSE(after.get("key"));
  EXPECT_TRUE(fs::is_empty(directory_));
}

TEST_F(MemoryFileTest, ASaveReplacesTheLastOne) {
  put(before_, "first", "1");
  save();
  put(before_, "second", "2");
  save();
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
  LifeClock second = clock_after(1);
  Store after(config(), second);
  EXPECT_EQ(load(after).restored, 2u);
}

}  // namespace
}  // namespace lockcached::replication
