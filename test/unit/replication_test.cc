// Unit tests of the replication library layer: the store's change hook, the
// frames of the stream, the replica's applier and the snapshot, joined as a
// master Store -> ReplicaBuffer -> bytes -> Applier -> replica Store, without
// sockets.
#include <endian.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "lockcached/replication/applier.h"
#include "lockcached/replication/encoder.h"
#include "lockcached/replication/heartbeat.h"
#include "lockcached/replication/replica_buffer.h"
#include "lockcached/replication/snapshot.h"
#include "lockcached/store/change_listener.h"
#include "lockcached/store/clock.h"
#include "lockcached/store/store.h"

namespace lockcached::replication {
namespace {

using store::ItemRef;
using store::ManualClock;
using store::RelTime;
using store::Store;
using store::StoreCommand;
using store::StoreConfig;
using store::StoreStatus;

constexpr size_t kBufferLimit = size_t{64} << 20;

StoreConfig config(unsigned shards = 4, size_t memory = size_t{16} << 20,
                   size_t max_item = size_t{64} << 10) {
  StoreConfig config;
  config.memory_limit = memory;
  config.max_item_size = max_item;
  config.shard_count = shards;
  return config;
}

// What a replica must agree on: value, flags, exptime (both stores in a
// test share one clock, so RelTimes compare directly).
struct Entry {
  std::string value;
  uint32_t flags;
  RelTime exptime;
  bool operator==(const Entry&) const = default;
};
std::ostream& operator<<(std::ostream& out, const Entry& entry) {
  return out << "{" << testing::PrintToString(entry.value) << " flags " << entry.flags
             << " exptime " << entry.exptime << "}";
}
using Contents = std::map<std::string, Entry>;

// The live items, read without side effects (no reclaim, no access bits).
Contents contents(Store& store) {
  Contents all;
  uint64_t cursor = 0;
  while (cursor != Store::kScanDone) {
    cursor = store.walk_items(cursor, 64, [&all](const store::Item& item) {
      all[std::string(item.key())] = {std::string(item.value_view()), item.flags, item.exptime};
    });
  }
  return all;
}

StoreStatus put(Store& store, StoreCommand command, std::string_view key, std::string_view value,
                uint32_t flags = 0, RelTime exptime = 0, uint64_t compare_cas = 0) {
  ItemRef item = store.allocate(key, flags, exptime, value.size());
  if (!item) return StoreStatus::kNoMemory;
  std::memcpy(item->value(), value.data(), value.size());
  return store.store(command, item, compare_cas, store::kNoOwner).status;
}

// A listener that writes down what it is told, for the hook's tests.
class RecordingListener final : public store::ChangeListener {
 public:
  void on_store(const store::Item& item) override {
    events.push_back("store " + std::string(item.key()) + "=" + std::string(item.value_view()) +
                     " exp " + std::to_string(item.exptime));
  }
  void on_delete(std::string_view key) override { events.push_back("delete " + std::string(key)); }
  void on_flush(RelTime moment) override { events.push_back("flush " + std::to_string(moment)); }
  std::vector<std::string> events;
};

// ---- The store's hook ----

class ReplicationHookTest : public ::testing::Test {
 protected:
  ReplicationHookTest() : store_(config(), clock_) { store_.set_change_listener(&listener_); }
  ~ReplicationHookTest() override { store_.set_change_listener(nullptr); }

  std::vector<std::string> take() { return std::exchange(listener_.events, {}); }

  ManualClock clock_;
  Store store_;
  RecordingListener listener_;
};

TEST_F(ReplicationHookTest, StorageCommandsReportTheStoredItem) {
  ASSERT_EQ(put(store_, StoreCommand::kSet, "k", "a"), StoreStatus::kStored);
  ASSERT_EQ(put(store_, StoreCommand::kAppend, "k", "b"), StoreStatus::kStored);
  ASSERT_EQ(put(store_, StoreCommand::kPrepend, "k", "c"), StoreStatus::kStored);
  EXPECT_EQ(take(), (std::vector<std::string>{"store k=a exp 0", "store k=ab exp 0",
                                              "store k=cab exp 0"}));
  // Refused commands change nothing and report nothing.
  EXPECT_EQ(put(store_, StoreCommand::kAdd, "k", "x"), StoreStatus::kNotStored);
  EXPECT_EQ(put(store_, StoreCommand::kReplace, "missing", "x"), StoreStatus::kNotStored);
  EXPECT_EQ(put(store_, StoreCommand::kCas, "k", "x", 0, 0, 12345), StoreStatus::kExists);
  EXPECT_TRUE(take().empty());
}

TEST_F(ReplicationHookTest, ArithmeticReportsTheNewValue) {
  ASSERT_EQ(put(store_, StoreCommand::kSet, "n", "10"), StoreStatus::kStored);
  take();
  store::ArithRequest request;
  request.delta = 5;
  ASSERT_EQ(store_.arith("n", request, store::kNoOwner).status, store::ArithStatus::kOk);
  request.increment = false;
  request.delta = 7;
  ASSERT_EQ(store_.arith("n", request, store::kNoOwner).status, store::ArithStatus::kOk);
  EXPECT_EQ(take(), (std::vector<std::string>{"store n=15 exp 0", "store n=8  exp 0"}));
}

TEST_F(ReplicationHookTest, TouchReportsTheNewExptime) {
  ASSERT_EQ(put(store_, StoreCommand::kSet, "k", "v"), StoreStatus::kStored);
  take();
  ASSERT_TRUE(store_.touch("k", 50));
  EXPECT_EQ(take(), std::vector<std::string>{"store k=v exp 50"});
  EXPECT_FALSE(store_.touch("missing", 50));
  EXPECT_TRUE(take().empty());
}

TEST_F(ReplicationHookTest, DeleteExpiryAndFlushAreReported) {
  ASSERT_EQ(put(store_, StoreCommand::kSet, "a", "1"), StoreStatus::kStored);
  ASSERT_EQ(put(store_, StoreCommand::kSet, "b", "2", 0, clock_.now() + 5), StoreStatus::kStored);
  take();
  EXPECT_EQ(store_.remove("a", 0, store::kNoOwner), store::DeleteStatus::kDeleted);
  clock_.advance(10);
  EXPECT_FALSE(store_.get("b"));  // a lookup reclaims the expired item
  store_.flush_all(0);
  store_.flush_all(30);
  EXPECT_EQ(take(), (std::vector<std::string>{"delete a", "delete b", "flush 0",
                                              "flush " + std::to_string(clock_.now() + 30)}));
}

TEST_F(ReplicationHookTest, EvictionIsReportedAsADelete) {
  // One shard of 8 KiB: the fourth 2 KiB item evicts the first.
  Store small(config(1, 8 << 10, 2 << 10), clock_);
  RecordingListener listener;
  small.set_change_listener(&listener);
  std::string value(1900, 'x');
  for (const char* key : {"k1", "k2", "k3", "k4", "k5"})
    ASSERT_EQ(put(small, StoreCommand::kSet, key, value), StoreStatus::kStored);
  small.set_change_listener(nullptr);
  ASSERT_GT(small.stats().evictions, 0u);
  size_t deletes = 0;
  for (const std::string& event : listener.events)
    deletes += event.starts_with("delete ");
  EXPECT_EQ(deletes, small.stats().evictions);
}

TEST_F(ReplicationHookTest, NoReportsAfterTheListenerIsRemoved) {
  store_.set_change_listener(nullptr);
  ASSERT_EQ(put(store_, StoreCommand::kSet, "k", "v"), StoreStatus::kStored);
  store_.flush_all(0);
  EXPECT_TRUE(take().empty());
}

// ---- Frames ----

uint32_t u32_at(std::string_view bytes, size_t at) {
  uint32_t big;
  std::memcpy(&big, bytes.data() + at, 4);
  return be32toh(big);
}

TEST(ReplicationEncoderTest, SetQCarriesFlagsAbsoluteExptimeKeyAndBareValue) {
  ManualClock clock;
  Store store(config(), clock);
  ASSERT_EQ(put(store, StoreCommand::kSet, "key", "val", 0xdeadbeef, clock.now() + 100),
            StoreStatus::kStored);
  ItemRef item = store.get("key");
  std::string frame;
  Encoder(clock).append_set(*item, frame);
  ASSERT_EQ(frame.size(), 24u + 8 + 3 + 3);
  EXPECT_EQ(static_cast<uint8_t>(frame[0]), 0x80);
  EXPECT_EQ(static_cast<uint8_t>(frame[1]), 0x11);
  EXPECT_EQ(frame.substr(2, 2), std::string("\0\3", 2));  // key length
  EXPECT_EQ(frame[4], 8);                                 // extras
  EXPECT_EQ(frame.substr(5, 3), std::string(3, '\0'));    // data type, vbucket
  EXPECT_EQ(u32_at(frame, 8), 14u);                       // body
  EXPECT_EQ(u32_at(frame, 12), 2u);  // opaque: the meta bits, fetched (by the get above)
  EXPECT_EQ(frame.substr(16, 8), std::string(8, '\0'));  // CAS
  EXPECT_EQ(u32_at(frame, 24), 0xdeadbeefu);
  EXPECT_EQ(u32_at(frame, 28), clock.unix_epoch_of_zero() + clock.now() + 100);
  EXPECT_EQ(frame.substr(32), "keyval");  // no "\r\n"
}

TEST(ReplicationEncoderTest, NeverIsZeroOnTheWire) {
  ManualClock clock;
  Encoder encoder(clock);
  EXPECT_EQ(encoder.wire_time(0), 0u);
  EXPECT_EQ(encoder.wire_time(1), clock.unix_epoch_of_zero() + 1);  // already expired
}

TEST(ReplicationEncoderTest, DeleteQAndFlushQ) {
  ManualClock clock;
  Encoder encoder(clock);
  std::string frame;
  encoder.append_delete("gone", frame);
  ASSERT_EQ(frame.size(), 28u);
  EXPECT_EQ(static_cast<uint8_t>(frame[1]), 0x14);
  EXPECT_EQ(frame[4], 0);
  EXPECT_EQ(u32_at(frame, 8), 4u);
  EXPECT_EQ(frame.substr(24), "gone");

  frame.clear();
  encoder.append_flush(0, frame);
  ASSERT_EQ(frame.size(), 28u);
  EXPECT_EQ(static_cast<uint8_t>(frame[1]), 0x18);
  EXPECT_EQ(frame[4], 4);
  EXPECT_EQ(u32_at(frame, 24), 0u);
  frame.clear();
  encoder.append_flush(clock.now() + 60, frame);
  EXPECT_EQ(u32_at(frame, 24), clock.unix_epoch_of_zero() + clock.now() + 60);
}

// ---- The applier ----

class ReplicationApplierTest : public ::testing::Test {
 protected:
  ReplicationApplierTest()
      : master_(config(), clock_), replica_(config(), clock_), encoder_(clock_) {}

  // The SetQ frame of a master item.
  std::string set_frame(std::string_view key, std::string_view value, uint32_t flags = 0,
                        RelTime exptime = 0) {
    EXPECT_EQ(put(master_, StoreCommand::kSet, key, value, flags, exptime), StoreStatus::kStored);
    std::string frame;
    encoder_.append_set(*master_.get(key), frame);
    return frame;
  }

  // A header with the given fields, followed by `body`.
  static std::string frame(uint8_t opcode, uint16_t key_length, uint8_t extras_length,
                           std::string_view body, uint8_t magic = 0x80) {
    std::string bytes(24, '\0');
    bytes[0] = static_cast<char>(magic);
    bytes[1] = static_cast<char>(opcode);
    uint16_t key_big = htobe16(key_length);
    std::memcpy(&bytes[2], &key_big, 2);
    bytes[4] = static_cast<char>(extras_length);
    uint32_t body_big = htobe32(static_cast<uint32_t>(body.size()));
    std::memcpy(&bytes[8], &body_big, 4);
    return bytes + std::string(body);
  }

  ManualClock clock_;
  Store master_;
  Store replica_;
  Encoder encoder_;
};

TEST_F(ReplicationApplierTest, RoundTripKeepsBinaryValuesFlagsAndExptime) {
  std::string binary("a\0b\r\nc\x80\xff", 8);
  std::string stream = set_frame("bin", binary, 7) + set_frame("empty", "", 0xffffffff) +
                       set_frame("ttl", "v", 1, clock_.now() + 30);
  Applier applier(replica_);
  ASSERT_TRUE(applier.feed(stream)) << applier.error();
  EXPECT_EQ(applier.frames_applied(), 3u);
  EXPECT_EQ(contents(replica_), contents(master_));
  EXPECT_EQ(contents(replica_)["bin"].value, binary);
  EXPECT_EQ(contents(replica_)["empty"].flags, 0xffffffffu);
  clock_.advance(31);
  EXPECT_FALSE(replica_.get("ttl"));  // the absolute exptime expired it
  EXPECT_TRUE(replica_.get("bin"));
}

// A SetQ with the master's CAS (to a replica that takes it) gives the item
// that CAS: a client's `gets` on the master stays true after a failover,
// and a CAS read there never names a newer version here. One below the
// store's counter gives a larger one, never a smaller.
TEST_F(ReplicationApplierTest, ASetQsCasBecomesTheItemsAndNeverGoesBack) {
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(put(master_, StoreCommand::kSet, "z", "w"), StoreStatus::kStored);
  ASSERT_EQ(put(master_, StoreCommand::kSet, "y", "original"), StoreStatus::kStored);
  uint64_t master_cas = master_.get("y")->cas;
  ASSERT_GT(master_cas, 100u);
  std::string stream;
  encoder_.append_set_with_cas(*master_.get("y"), stream);
  EXPECT_EQ(be64toh(*reinterpret_cast<const uint64_t*>(stream.data() + 16)), master_cas);
  Applier applier(replica_);
  ASSERT_TRUE(applier.feed(stream)) << applier.error();
  EXPECT_EQ(replica_.get("y")->cas, master_cas);
  EXPECT_EQ(contents(replica_)["y"].value, "original");
  EXPECT_GE(replica_.cas_counter(), master_cas);

  // The next version: the master's next CAS, not the replica's.
  ASSERT_EQ(put(master_, StoreCommand::kSet, "y", "newer"), StoreStatus::kStored);
  stream.clear();
  encoder_.append_set_with_cas(*master_.get("y"), stream);
  ASSERT_TRUE(applier.feed(stream)) << applier.error();
  EXPECT_EQ(replica_.get("y")->cas, master_.get("y")->cas);
  EXPECT_NE(replica_.get("y")->cas, master_cas);  // the stale one matches nothing

  // A frame whose CAS is below what the store counted: a larger one.
  Store low(config(), clock_);
  ASSERT_EQ(put(low, StoreCommand::kSet, "x", "v"), StoreStatus::kStored);
  stream.clear();
  encoder_.append_set_with_cas(*low.get("x"), stream);
  uint64_t counted = replica_.cas_counter();
  ASSERT_TRUE(applier.feed(stream)) << applier.error();
  EXPECT_GT(replica_.get("x")->cas, counted);
}

// The meta protocol's state travels with the item (t18_md_invalidate: an
// `md KEY I` on the master left the replica, and after a failover the new
// master, serving the item as fresh, so no client was told to recache it):
// stale and whether the win token went out, fetched, the base64 key.
TEST_F(ReplicationApplierTest, TheMetaStateTravelsWithTheItem) {
  ASSERT_EQ(put(master_, StoreCommand::kSet, "price", "100"), StoreStatus::kStored);
  ASSERT_EQ(master_.invalidate("price", 0, store::kNoOwner, nullptr),
            store::DeleteStatus::kDeleted);
  ItemRef binary = master_.allocate(std::string("b\0k", 3), 0, 0, 1);
  binary->value()[0] = 'v';
  binary->key_binary = true;
  ASSERT_EQ(master_.store(StoreCommand::kSet, binary, 0, store::kNoOwner).status,
            StoreStatus::kStored);
  ASSERT_EQ(put(master_, StoreCommand::kSet, "plain", "v"), StoreStatus::kStored);
  // The frames as the stream sends them: from the store's walk, which
  // touches nothing (a get would set fetched).
  std::string stream;
  uint64_t cursor = 0;
  while (cursor != Store::kScanDone) {
    cursor = master_.walk_items(cursor, 64, [&](const store::Item& item) {
      encoder_.append_set(item, stream);
    });
  }
  Applier applier(replica_);
  ASSERT_TRUE(applier.feed(stream)) << applier.error();
  ItemRef price = replica_.get("price");
  ASSERT_TRUE(price);
  EXPECT_TRUE(price->stale);
  EXPECT_FALSE(price->token_sent);
  EXPECT_FALSE(price->key_binary);
  ItemRef copied = replica_.get(std::string("b\0k", 3));
  ASSERT_TRUE(copied);
  EXPECT_TRUE(copied->key_binary);
  EXPECT_FALSE(copied->stale);
  // fetched: whether the master's clients read the item (an unfetched
  // eviction's counter, `mg h`).
  auto fetched_here = [&](std::string_view key) {
    bool fetched = false;
    uint64_t at = 0;
    while (at != Store::kScanDone) {
      at = replica_.walk_items(at, 64, [&](const store::Item& item) {
        if (item.key() == key) fetched = item.fetched;
      });
    }
    return fetched;
  };
  EXPECT_FALSE(fetched_here("plain"));
  std::string read_there;
  encoder_.append_set(*master_.get("plain"), read_there);  // the get sets it
  ASSERT_TRUE(applier.feed(read_there)) << applier.error();
  EXPECT_TRUE(fetched_here("plain"));

  // What the replica's readers see: the first is told to recache (won).
  store::MetaGetRequest request;
  EXPECT_TRUE(replica_.meta_get("price", request).won);
  EXPECT_FALSE(replica_.meta_get("price", request).won);
}

TEST_F(ReplicationApplierTest, LargestItemPassesOneMoreByteIsRefused) {
  std::string largest(replica_.max_item_size(), 'L');
  Applier applier(replica_);
  ASSERT_TRUE(applier.feed(set_frame("big", largest))) << applier.error();
  EXPECT_EQ(contents(replica_)["big"].value, largest);

  std::string extras(8, '\0');
  std::string too_big = frame(0x11, 1, 8, extras + "k" + largest + "!");
  Applier second(replica_);
  EXPECT_FALSE(second.feed(too_big));
  EXPECT_FALSE(second.error().empty());
}

TEST_F(ReplicationApplierTest, EverySplitPointAppliesTheSameStream) {
  std::string stream = set_frame("a", "1") + set_frame("b", std::string("\0\0", 2), 9);
  encoder_.append_delete("a", stream);
  encoder_.append_flush(0, stream);
  stream += set_frame("c", "x\r\ny", 3, clock_.now() + 100) + set_frame("d", "");
  stream += frame(0x0a, 0, 0, "");  // Noop
  encoder_.append_delete("d", stream);
  stream += set_frame("e", "last");
  const Contents expected = {{"c", {"x\r\ny", 3, clock_.now() + 100}}, {"e", {"last", 0, 0}}};

  for (size_t split = 0; split <= stream.size(); ++split) {
    Store replica(config(), clock_);
    Applier applier(replica);
    ASSERT_TRUE(applier.feed(std::string_view(stream).substr(0, split))) << split;
    ASSERT_TRUE(applier.feed(std::string_view(stream).substr(split))) << split;
    EXPECT_EQ(applier.buffered(), 0u);
    EXPECT_EQ(applier.frames_applied(), 9u) << split;
    // The master's Noop is a keep-alive beside the stream, not in it.
    EXPECT_EQ(applier.bytes_applied(), stream.size() - 24) << split;
    EXPECT_EQ(contents(replica), expected) << "split at " << split;
  }
  Store replica(config(), clock_);
  Applier applier(replica);
  for (char byte : stream)
    ASSERT_TRUE(applier.feed(std::string_view(&byte, 1)));
  EXPECT_EQ(contents(replica), expected);
}

TEST_F(ReplicationApplierTest, MalformedFramesAreRefusedAndStayRefused) {
  std::string extras(8, '\0');
  std::string cas_frame = frame(0x14, 1, 0, "k");  // a SetQ's is the master's CAS
  cas_frame[23] = 1;
  std::string typed_frame = frame(0x11, 1, 8, extras + "kv");
  typed_frame[5] = 1;
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"response magic", frame(0x11, 1, 8, extras + "kv", 0x81)},
      {"text", std::string("set k 0 0 1\r\nv\r\n") + std::string(10, ' ')},
      {"get is not replicated", frame(0x00, 1, 0, "k")},
      {"SetQ without extras", frame(0x11, 1, 0, "kv")},
      {"SetQ without key", frame(0x11, 0, 8, extras + "v")},
      {"key longer than 250", frame(0x11, 251, 8, extras + std::string(251, 'k'))},
      {"key beyond body", frame(0x11, 200, 8, extras + "k")},
      {"DeleteQ with a value", frame(0x14, 1, 0, "kv")},
      {"FlushQ with a key", frame(0x18, 1, 4, std::string(4, '\0') + "k")},
      {"FlushQ with odd extras", frame(0x18, 0, 2, std::string(2, '\0'))},
      {"a CAS in a DeleteQ", cas_frame},
      {"data type", typed_frame},
  };
  for (const auto& [name, bytes] : cases) {
    Store replica(config(), clock_);
    Applier applier(replica);
    EXPECT_FALSE(applier.feed(bytes)) << name;
    EXPECT_FALSE(applier.error().empty()) << name;
    EXPECT_FALSE(applier.feed(set_frame("k", "v"))) << name << ": must stay refused";
    EXPECT_TRUE(contents(replica).empty()) << name;
  }
}

// A master older than issue 30 also streamed its lock service (opcodes
// 0xe0..0xe4): a replica skips those frames, keeps the cache around them,
// and counts them in the position it acks, as that master does.
TEST_F(ReplicationApplierTest, AnOlderMastersLockFramesAreSkipped) {
  std::string token(8, '\0');
  token[7] = 9;
  std::string grant = frame(0xe2, 4, 8, token + "door" + "1-secret");
  std::string session_end = frame(0xe1, 8, 0, "1-secret");
  std::string stream = set_frame("a", "1") + grant + set_frame("b", "2") + session_end;
  Applier applier(replica_);
  ASSERT_TRUE(applier.feed(stream)) << applier.error();
  EXPECT_EQ(contents(replica_), contents(master_));
  EXPECT_EQ(applier.bytes_applied(), stream.size());

  std::string too_long = frame(0xe2, 250, 8, token + std::string(250, 'n') + std::string(251, 's'));
  Applier refusing(replica_);
  EXPECT_FALSE(refusing.feed(too_long));
  EXPECT_FALSE(refusing.error().empty());
}

// The master marks its snapshot's end in the stream, as a delete any
// replica can apply; a keep-alive Noop says nothing of the kind.
TEST_F(ReplicationApplierTest, TheSnapshotsEndIsMarkedInTheStream) {
  std::string keepalive;
  append_noop_request(keepalive);
  std::string end;
  append_snapshot_end(end);
  std::string snapshot = set_frame("a", "1") + keepalive + set_frame("b", "2");
  Applier applier(replica_);
  ASSERT_TRUE(applier.feed(snapshot)) << applier.error();
  EXPECT_FALSE(applier.snapshot_received());
  ASSERT_TRUE(applier.feed(end + set_frame("c", "3"))) << applier.error();
  EXPECT_TRUE(applier.snapshot_received());
  EXPECT_EQ(applier.bytes_applied(), snapshot.size() - keepalive.size() + end.size() +
                                         set_frame("c", "3").size());
  EXPECT_EQ(contents(replica_), contents(master_));  // the mark stored nothing
}

TEST_F(ReplicationApplierTest, HugeBodyIsRefusedFromTheHeaderAlone) {
  std::string header = frame(0x11, 1, 8, "");
  uint32_t huge = htobe32(0x7fffffff);
  std::memcpy(&header[8], &huge, 4);
  Applier applier(replica_);
  ASSERT_TRUE(applier.feed(header.substr(0, 10)));  // not a whole header yet
  EXPECT_FALSE(applier.feed(header.substr(10)));
  EXPECT_LE(applier.buffered(), 24u);
}

TEST_F(ReplicationApplierTest, DelayedFlushKeepsItsMoment) {
  std::string stream = set_frame("a", "1");
  encoder_.append_flush(clock_.now() + 10, stream);
  Applier applier(replica_);
  ASSERT_TRUE(applier.feed(stream));
  clock_.advance(9);
  EXPECT_TRUE(replica_.get("a"));
  clock_.advance(2);
  EXPECT_FALSE(replica_.get("a"));
}

std::string snapshot_begin() {
  std::string mark;
  append_snapshot_begin(mark);
  return mark;
}

std::string snapshot_end() {
  std::string mark;
  append_snapshot_end(mark);
  return mark;
}

// A lockcached master marks its snapshot's beginning: the replica keeps
// what it held beside the snapshot, and drops at the snapshot's end what
// the snapshot did not bring again. A master that dies half-way leaves the
// replica its data.
TEST_F(ReplicationApplierTest, AMarkedSnapshotComesBesideTheOldItemsWhichGoAtItsEnd) {
  ASSERT_EQ(put(replica_, StoreCommand::kSet, "both", "old"), StoreStatus::kStored);
  ASSERT_EQ(put(replica_, StoreCommand::kSet, "old only", "old"), StoreStatus::kStored);
  Applier applier(replica_);
  ASSERT_TRUE(applier.feed(snapshot_begin() + set_frame("both", "new") + set_frame("new", "1")))
      << applier.error();
  EXPECT_TRUE(applier.snapshot_started());
  EXPECT_FALSE(applier.store_emptied());
  EXPECT_EQ(contents(replica_)["old only"].value, "old");  // kept while it comes
  EXPECT_EQ(contents(replica_)["both"].value, "new");

  ASSERT_TRUE(applier.feed(snapshot_end() + set_frame("after", "2"))) << applier.error();
  EXPECT_TRUE(applier.snapshot_received());
  EXPECT_FALSE(replica_.get("old only"));
  EXPECT_EQ(contents(replica_), contents(master_));
  EXPECT_EQ(contents(replica_).size(), 3u);  // both, new, after
}

// A client's delete of a key with the end mark's very bytes (a binary or
// base64 key may hold them) goes out with opaque 0: in a marked stream it
// is a delete, not the snapshot's end, which would drop the old items the
// snapshot has not sent again yet. An older master's stream, unmarked,
// still ends at that key alone.
TEST_F(ReplicationApplierTest, AClientsDeleteOfTheEndMarksKeyDoesNotEndAMarkedSnapshot) {
  ASSERT_EQ(put(replica_, StoreCommand::kSet, "old", "old"), StoreStatus::kStored);
  std::string client_delete;
  encoder_.append_delete(kSnapshotEndKey, client_delete);
  Applier applier(replica_);
  ASSERT_TRUE(applier.feed(snapshot_begin() + set_frame("new", "1") + client_delete))
      << applier.error();
  EXPECT_FALSE(applier.snapshot_received());
  EXPECT_TRUE(replica_.get("old"));
  ASSERT_TRUE(applier.feed(snapshot_end())) << applier.error();
  EXPECT_TRUE(applier.snapshot_received());
  EXPECT_FALSE(replica_.get("old"));

  Store other_replica(config(), clock_);
  Applier older_masters(other_replica);
  ASSERT_TRUE(older_masters.feed(set_frame("x", "1") + client_delete)) << older_masters.error();
  EXPECT_TRUE(older_masters.snapshot_received());
}

// An older master (or another kind) marks nothing: the store is emptied
// before its first frame, as the snapshot's rule requires. A Noop, sent
// beside the stream, is not that frame.
TEST_F(ReplicationApplierTest, AnUnmarkedStreamEmptiesTheStoreAtItsFirstFrame) {
  ASSERT_EQ(put(replica_, StoreCommand::kSet, "old", "old"), StoreStatus::kStored);
  std::string keepalive;
  append_noop_request(keepalive);
  Applier applier(replica_);
  ASSERT_TRUE(applier.feed(keepalive)) << applier.error();
  EXPECT_FALSE(applier.snapshot_started());
  EXPECT_TRUE(replica_.get("old"));
  ASSERT_TRUE(applier.feed(set_frame("new", "1"))) << applier.error();
  EXPECT_TRUE(applier.snapshot_started());
  EXPECT_TRUE(applier.store_emptied());
  EXPECT_FALSE(replica_.get("old"));
  EXPECT_EQ(contents(replica_), contents(master_));
}

// A delayed flush_all the old stream left pending would take the new
// master's items at its moment: the store is emptied instead, marked
// snapshot or not, and the new items outlive that moment.
TEST_F(ReplicationApplierTest, ADelayedFlushPendingEmptiesTheStoreForAMarkedSnapshotToo) {
  ASSERT_EQ(put(replica_, StoreCommand::kSet, "old", "old"), StoreStatus::kStored);
  replica_.flush_all(10);
  Applier applier(replica_);
  ASSERT_TRUE(applier.feed(snapshot_begin() + set_frame("new", "1"))) << applier.error();
  EXPECT_TRUE(applier.store_emptied());
  EXPECT_FALSE(replica_.get("old"));
  clock_.advance(11);
  EXPECT_TRUE(replica_.get("new"));
}

// ---- Master -> stream -> replica ----

// Random changes of every kind the stream carries, on a small key space so
// that they collide.
class RandomChanges {
 public:
  RandomChanges(Store& store, uint32_t seed, size_t keys) : store_(store), rng_(seed), keys_(keys) {}

  // One change; `clock` (may be null) lets time pass and delayed flushes in.
  void step(ManualClock* clock) {
    std::string key = "key" + std::to_string(pick(keys_));
    switch (pick(clock ? 15 : 13)) {
      case 0:
      case 1:
        put_drawn(StoreCommand::kSet, key);
        break;
      case 2:
        put_drawn(StoreCommand::kAdd, key);
        break;
      case 3:
        put_drawn(StoreCommand::kReplace, key);
        break;
      case 4:
        put(store_, StoreCommand::kAppend, key, value());
        break;
      case 5:
        put(store_, StoreCommand::kPrepend, key, value());
        break;
      case 6:
        cas(key);
        break;
      case 7:
        arith(key);
        break;
      case 8:
        store_.touch(key, exptime());
        break;
      case 9:
        store_.remove(key, 0, store::kNoOwner);
        break;
      case 10:
        locked_write(key);
        break;
      case 11:
        store_.get(key);  // may reclaim an expired item
        break;
      case 12:
        if (pick(40) == 0) store_.flush_all(0);
        break;
      case 13:
        if (pick(40) == 0) store_.flush_all(1 + pick(20));
        break;
      default:
        clock->advance(1 + pick(5));
        break;
    }
  }

 private:
  uint32_t pick(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng_); }

  // Numbers (for incr/decr), binary bytes, or nothing.
  std::string value() {
    switch (pick(3)) {
      case 0:
        return std::to_string(pick(1000));
      case 1: {
        std::string bytes(pick(40), '\0');
        for (char& byte : bytes)
          byte = static_cast<char>(pick(256));
        return bytes;
      }
      default:
        return "";
    }
  }

  RelTime exptime() { return pick(3) == 0 ? store_.now() + 1 + pick(30) : 0; }

  // A store with random value, flags and exptime, drawn one after the other:
  // as arguments of one call their order would be unspecified, and GCC and
  // clang drew different histories from the same seed.
  void put_drawn(StoreCommand command, const std::string& key) {
    RelTime expires = exptime();
    uint32_t flags = pick(4);
    std::string data = value();
    put(store_, command, key, data, flags, expires);
  }

  void cas(const std::string& key) {
    ItemRef item = store_.get(key);
    uint64_t cas = item ? item->cas + pick(2) : 1;  // right or stale
    uint32_t flags = pick(4);  // drawn in a fixed order, as in put_drawn
    std::string data = value();
    put(store_, StoreCommand::kCas, key, data, flags, 0, cas);
  }

  void arith(const std::string& key) {
    store::ArithRequest request;
    request.increment = pick(2) == 0;
    request.delta = pick(100);
    request.create = pick(4) == 0;  // binary incr with an initial value
    request.initial = pick(50);
    request.exptime = exptime();
    store_.arith(key, request, store::kNoOwner);
  }

  // The locking extension: lock with a new TTL, then replace-and-unlock or
  // unlock.
  void locked_write(const std::string& key) {
    constexpr store::OwnerId kOwner = 99;
    RelTime ttl = exptime();
    store::LockStatus status;
    if (!store_.lock_and_get(key, kOwner, &ttl, &status)) return;
    std::string bytes = value();
    ItemRef item = store_.allocate(key, 5, 0, bytes.size());
    std::memcpy(item->value(), bytes.data(), bytes.size());
    if (pick(2) == 0 && store_.replace_and_unlock(item, 0, kOwner).status == StoreStatus::kStored)
      return;
    store_.unlock(key, kOwner);
  }

  Store& store_;
  std::mt19937 rng_;
  const uint32_t keys_;
};

// Moves what the buffer holds into the applier.
void deliver(ReplicaBuffer& buffer, Applier& applier) {
  std::string bytes;
  ASSERT_TRUE(buffer.take(bytes)) << "replica buffer overflowed";
  ASSERT_TRUE(applier.feed(bytes)) << applier.error();
}

class ReplicationStreamTest : public ::testing::TestWithParam<uint32_t> {
 protected:
  ReplicationStreamTest()
      : master_(config(), clock_), replica_(config(), clock_), buffer_(clock_, kBufferLimit),
        applier_(replica_) {}
  ~ReplicationStreamTest() override { master_.set_change_listener(nullptr); }

  ManualClock clock_;
  Store master_;
  Store replica_;
  ReplicaBuffer buffer_;
  Applier applier_;
};

TEST_P(ReplicationStreamTest, ReplicaFollowsEveryKindOfChange) {
  master_.set_change_listener(&buffer_);
  RandomChanges changes(master_, GetParam(), 30);
  for (int i = 0; i < 4000; ++i) {
    changes.step(&clock_);
    deliver(buffer_, applier_);
    if (i % 100 == 99) {
      ASSERT_EQ(contents(replica_), contents(master_)) << "after " << i + 1;
    }
  }
  EXPECT_EQ(contents(replica_), contents(master_));
  EXPECT_FALSE(contents(master_).empty());  // the comparison compared something
}

// A master with a few thousand items: random history, then known keys.
void fill(Store& master, RandomChanges& changes) {
  for (int i = 0; i < 2000; ++i)
    changes.step(nullptr);
  for (int i = 0; i < 1400; ++i)
    put(master, StoreCommand::kSet, "key" + std::to_string(i), "old");
}

TEST_P(ReplicationStreamTest, SnapshotInterleavedWithChangesYieldsTheMaster) {
  // Two shards, enough keys that a table doubles during the walk.
  Store master(config(2), clock_);
  RandomChanges changes(master, GetParam(), 3000);
  fill(master, changes);
  master.set_change_listener(&buffer_);  // the rule: before the first piece
  Snapshot snapshot(master, buffer_);
  int pieces = 0;
  while (snapshot.send_piece(7)) {
    ++pieces;
    for (int i = 0; i < 5; ++i)
      changes.step(nullptr);
    if (pieces % 10 == 0) deliver(buffer_, applier_);  // the replica lags
  }
  for (int i = 0; i < 200; ++i)
    changes.step(nullptr);
  deliver(buffer_, applier_);
  master.set_change_listener(nullptr);
  EXPECT_GT(pieces, 100);
  EXPECT_GT(snapshot.items_sent(), 200u) << "flushes during the walk leave little to send";
  EXPECT_EQ(contents(replica_), contents(master));
}

// The same while time passes (expiry, delayed flushes). A lagging replica
// applies a SetQ stored just before a delayed flush's moment after it, and
// keeps the item the master dropped, until the master's crawler reclaims
// that item and sends the delete: equal once the crawler has passed.
TEST_P(ReplicationStreamTest, LaggingReplicaConvergesOnceTheCrawlerPassed) {
  Store master(config(2), clock_);
  RandomChanges changes(master, GetParam(), 3000);
  fill(master, changes);
  master.set_change_listener(&buffer_);
  Snapshot snapshot(master, buffer_);
  int pieces = 0;
  while (snapshot.send_piece(7)) {
    for (int i = 0; i < 5; ++i)
      changes.step(&clock_);
    if (++pieces % 10 == 0) deliver(buffer_, applier_);
  }
  for (int i = 0; i < 200; ++i)
    changes.step(&clock_);
  for (uint64_t cursor = 0; cursor != Store::kScanDone;)
    cursor = master.crawl(cursor, 64);
  deliver(buffer_, applier_);
  master.set_change_listener(nullptr);
  EXPECT_GT(snapshot.items_sent(), 200u);
  EXPECT_EQ(contents(replica_), contents(master));
}

// The negative of the rule: a snapshot alone, with no stream while it runs,
// misses what changed behind the walk. Shows the comparison can fail.
TEST_P(ReplicationStreamTest, SnapshotWithoutTheStreamMissesChanges) {
  Store master(config(2), clock_);
  RandomChanges changes(master, GetParam(), 3000);
  fill(master, changes);
  Snapshot snapshot(master, buffer_);
  while (snapshot.send_piece(7)) {
    for (int i = 0; i < 5; ++i)
      changes.step(nullptr);
  }
  deliver(buffer_, applier_);
  EXPECT_NE(contents(replica_), contents(master));
}

// A replica that held other data (an earlier master's) follows a new
// master's marked snapshot while the master changes things: equal once the
// snapshot's end came. (Until then the old items stay, unless the master
// flushed meanwhile: AMarkedSnapshotComesBesideTheOldItemsWhichGoAtItsEnd.)
TEST_P(ReplicationStreamTest, AMarkedSnapshotOverOldDataYieldsTheMaster) {
  Store master(config(2), clock_);
  RandomChanges changes(master, GetParam(), 3000);
  fill(master, changes);
  RandomChanges history(replica_, GetParam() + 1000, 6000);  // other keys too
  for (int i = 0; i < 4000; ++i)
    history.step(nullptr);
  for (int i = 0; i < 500; ++i)
    put(replica_, StoreCommand::kSet, "old" + std::to_string(i), "gone at the end");
  ASSERT_GT(contents(replica_).size(), 500u);  // some of the history survived its flushes
  buffer_.on_snapshot_begin();
  master.set_change_listener(&buffer_);
  Snapshot snapshot(master, buffer_);
  int pieces = 0;
  while (snapshot.send_piece(7)) {
    for (int i = 0; i < 5; ++i)
      changes.step(nullptr);
    if (++pieces % 10 == 0) deliver(buffer_, applier_);
  }
  deliver(buffer_, applier_);
  EXPECT_FALSE(applier_.store_emptied());
  buffer_.on_snapshot_end();
  for (int i = 0; i < 200; ++i)
    changes.step(nullptr);
  deliver(buffer_, applier_);
  master.set_change_listener(nullptr);
  EXPECT_TRUE(applier_.snapshot_received());
  EXPECT_EQ(contents(replica_), contents(master));
}

INSTANTIATE_TEST_SUITE_P(Replication, ReplicationStreamTest, ::testing::Values(1u, 2u, 3u, 42u));

TEST(ReplicationRemovalTest, CrawlerExpiryReachesAReplicaWhoseClockLags) {
  ManualClock master_clock;
  ManualClock replica_clock;  // never advances: only the stream can expire
  Store master(config(), master_clock);
  Store replica(config(), replica_clock);
  ReplicaBuffer buffer(master_clock, kBufferLimit);
  Applier applier(replica);
  master.set_change_listener(&buffer);
  for (int i = 0; i < 100; ++i) {
    std::string key = "k" + std::to_string(i);
    RelTime exptime = i % 2 ? master_clock.now() + 100 : 0;
    ASSERT_EQ(put(master, StoreCommand::kSet, key, "v", 0, exptime), StoreStatus::kStored);
  }
  deliver(buffer, applier);
  ASSERT_EQ(contents(replica).size(), 100u);
  master_clock.advance(200);
  for (uint64_t cursor = 0; cursor != Store::kScanDone;)
    cursor = master.crawl(cursor, 16);
  deliver(buffer, applier);
  master.set_change_listener(nullptr);
  EXPECT_EQ(master.stats().crawler_reclaimed, 50u);
  EXPECT_EQ(contents(replica).size(), 50u);
  EXPECT_FALSE(replica.get("k1"));
  EXPECT_TRUE(replica.get("k2"));
}

TEST(ReplicationRemovalTest, EvictionsReachTheReplica) {
  ManualClock clock;
  Store master(config(1, 64 << 10, 4 << 10), clock);  // holds ~100 of these
  Store replica(config(), clock);
  ReplicaBuffer buffer(clock, kBufferLimit);
  Applier applier(replica);
  master.set_change_listener(&buffer);
  for (int i = 0; i < 1000; ++i) {
    std::string key = "k" + std::to_string(i);
    ASSERT_EQ(put(master, StoreCommand::kSet, key, std::string(500, 'v')), StoreStatus::kStored);
    if (i % 7 == 0) master.get("k" + std::to_string(i / 2));  // some get a second chance
  }
  deliver(buffer, applier);
  master.set_change_listener(nullptr);
  ASSERT_GT(master.stats().evictions, 800u);
  EXPECT_EQ(contents(replica), contents(master));
  EXPECT_EQ(replica.stats().curr_items, master.stats().curr_items);
}

TEST(ReplicationBufferTest, OverflowDropsTheBytesAndSaysSo) {
  ManualClock clock;
  Store master(config(), clock);
  ReplicaBuffer buffer(clock, 1000);
  master.set_change_listener(&buffer);
  ASSERT_EQ(put(master, StoreCommand::kSet, "a", std::string(500, 'x')), StoreStatus::kStored);
  EXPECT_FALSE(buffer.overflowed());
  EXPECT_GT(buffer.size(), 500u);
  ASSERT_EQ(put(master, StoreCommand::kSet, "b", std::string(500, 'x')), StoreStatus::kStored);
  master.set_change_listener(nullptr);
  EXPECT_TRUE(buffer.overflowed());
  EXPECT_EQ(buffer.size(), 0u);
  std::string bytes = "old";
  EXPECT_FALSE(buffer.take(bytes));
  EXPECT_TRUE(bytes.empty());
}

// A second thread changes the master while the snapshot runs and the
// replica applies what arrives: the case the shard-lock rule is for (and
// the one TSan checks).
TEST(ReplicationConcurrentTest, SnapshotWhileAnotherThreadWrites) {
  ManualClock clock;
  Store master(config(), clock);
  Store replica(config(), clock);
  ReplicaBuffer buffer(clock, kBufferLimit);
  Applier applier(replica);
  RandomChanges before(master, 7, 2000);
  for (int i = 0; i < 3000; ++i)
    before.step(nullptr);

  master.set_change_listener(&buffer);
  std::atomic<bool> snapshot_done{false};
  std::thread writer([&master, &snapshot_done] {
    RandomChanges changes(master, 8, 2000);
    int steps = 0;
    while (!snapshot_done.load() || steps < 20000) {
      changes.step(nullptr);
      ++steps;
    }
  });
  Snapshot snapshot(master, buffer);
  while (snapshot.send_piece(16)) {
    deliver(buffer, applier);
    std::this_thread::yield();
  }
  snapshot_done = true;
  writer.join();
  deliver(buffer, applier);
  master.set_change_listener(nullptr);
  EXPECT_GT(snapshot.items_sent(), 0u);
  EXPECT_EQ(contents(replica), contents(master));
}

}  // namespace
}  // namespace lockcached::replication
