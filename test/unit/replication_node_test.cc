// replication::Node as a Raft member's cache uses it (NodeSettings::locate
// says where the master is): whether its store holds the data, which
// decides whether it may become the master (Server::cache_may_lead). The
// masters are loopback sockets this test plays, sending what a master
// would.
#include "lockcached/replication/node.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "lockcached/replication/encoder.h"
#include "lockcached/replication/heartbeat.h"
#include "lockcached/store/clock.h"
#include "lockcached/store/store.h"
#include "free_ports.h"
#include "played_master.h"

namespace lockcached::replication {
namespace {

using namespace std::chrono_literals;
using test_peers::PlayedMaster;

bool eventually(const std::function<bool()>& condition) {
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

class ReplicationNodeTest : public ::testing::Test {
 protected:
  ReplicationNodeTest() : store_(config(), clock_) {}

  static store::StoreConfig config() {
    store::StoreConfig config;
    config.memory_limit = size_t{16} << 20;
    config.max_item_size = size_t{64} << 10;
    config.shard_count = 2;
    return config;
  }

  // A node whose master is wherever master_at() says.
  void start_node() {
    NodeSettings settings;
    settings.locate = [this] {
      std::lock_guard lock(mutex_);
      if (master_port_ == 0) return MasterPlace{MasterPlace::kHere, "127.0.0.1", 0};
      return MasterPlace{MasterPlace::kElsewhere, "127.0.0.1", master_port_};
    };
    settings.listen_host = "127.0.0.1";
    settings.repl_port = test_ports::free_port();  // where it listens while it is the master
    settings.tick_ms = 20;
    node_ = std::make_unique<Node>(settings, store_, read_only_, Node::Hooks{[] {}, {}});
    std::string error;
    ASSERT_TRUE(node_->start(&error)) << error;
  }
  void master_at(uint16_t port) {
    std::lock_guard lock(mutex_);
    master_port_ = port;
  }
  // Starts the node as a replica of `master`, which sends `frames` and its
  // snapshot's end: the node then holds the data.
  void start_with_data(PlayedMaster& master, const std::string& frames) {
    master_at(master.port());
    start_node();
    ASSERT_TRUE(master.accept_replica());
    std::string end;
    append_snapshot_end(end);
    ASSERT_TRUE(master.send(frames + end));
    ASSERT_TRUE(eventually([&] { return node_->holds_data(); }));
  }

  // A real master of `store`, where replicas connect (master_at its
  // port makes this node one of them).
  std::unique_ptr<Node> start_master(store::Store& store, std::atomic<bool>& read_only) {
    NodeSettings settings;
    settings.locate = [] { return MasterPlace{MasterPlace::kHere, "127.0.0.1", 0}; };
    settings.listen_host = "127.0.0.1";
    settings.repl_port = test_ports::free_port();
    settings.tick_ms = 20;
    auto master = std::make_unique<Node>(settings, store, read_only, Node::Hooks{[] {}, {}});
    std::string error;
    EXPECT_TRUE(master->start(&error)) << error;
    master_at(settings.repl_port);
    return master;
  }

  // A master's SetQ of `key`, never expiring.
  std::string set_frame(const std::string& key, const std::string& value) {
    store::ManualClock clock;
    store::Store source(config(), clock);
    store::ItemRef item = source.allocate(key, 0, 0, value.size());
    std::memcpy(item->value(), value.data(), value.size());
    std::string frame;
    Encoder(clock).append_set(*item, frame);
    return frame;
  }
  // The value the store holds for `key`; "" when none.
  std::string value_of(const std::string& key) {
    store::ItemRef item = store_.get(key);
    return item ? std::string(item->value_view()) : "";
  }

  // A key stored with `value`, as a client of this node wrote it.
  void put(const std::string& key, const std::string& value) {
    store::ItemRef item = store_.allocate(key, 0, 0, value.size());
    std::memcpy(item->value(), value.data(), value.size());
    std::memcpy(item->value() + value.size(), "\r\n", 2);
    ASSERT_EQ(store_.store(store::StoreCommand::kSet, item, 0, store::kNoOwner).status,
              store::StoreStatus::kStored);
  }

  store::ManualClock clock_;
  store::Store store_;
  std::atomic<bool> read_only_{true};
  std::mutex mutex_;
  uint16_t master_port_ = 0;
  std::unique_ptr<Node> node_;
};

// A master's snapshot begins with a mark, then comes beside what the
// store holds. While it comes the node holds a part: made the Raft leader,
// it must first hand leadership on, to a member that may have all of that
// master's writes. Once whole, the store has the data. A later master that
// dies half-way through its snapshot leaves the node the data it had, with
// what came of the new one beside it.
TEST_F(ReplicationNodeTest, AMasterThatDiesHalfWayThroughItsSnapshotLeavesTheDataItHad) {
  PlayedMaster first;
  master_at(first.port());
  start_node();
  EXPECT_FALSE(node_->holds_data());  // it never had a master
  EXPECT_FALSE(node_->holds_part());
  ASSERT_TRUE(first.accept_replica());
  std::string begin;
  append_snapshot_begin(begin);
  ASSERT_TRUE(first.send(begin + set_frame("a", "1")));
  EXPECT_TRUE(eventually([&] { return node_->holds_part(); }));
  EXPECT_FALSE(node_->holds_data());
  std::string end;
  append_snapshot_end(end);
  ASSERT_TRUE(first.send(set_frame("b", "1") + end));
  ASSERT_TRUE(eventually([&] { return node_->holds_data(); }));
  EXPECT_FALSE(node_->holds_part());

  EXPECT_EQ(node_->times_data_came(), 1u);

  // The leader moves; the new master goes before its snapshot's end.
  PlayedMaster second;
  master_at(second.port());
  ASSERT_TRUE(second.accept_replica());
  ASSERT_TRUE(second.send(begin + set_frame("a", "2") + set_frame("c", "2")));
  EXPECT_TRUE(eventually([&] { return value_of("c") == "2"; }));
  second.hang_up();
  ASSERT_TRUE(second.accept_replica());  // the node saw the hang-up and asks again
  EXPECT_FALSE(node_->holds_data());
  EXPECT_TRUE(node_->holds_part());
  EXPECT_EQ(value_of("a"), "2");
  EXPECT_EQ(value_of("b"), "1");  // not sent again, and kept

  // A later master's whole snapshot replaces all of it.
  PlayedMaster third;
  master_at(third.port());
  ASSERT_TRUE(third.accept_replica());
  ASSERT_TRUE(third.send(begin + set_frame("d", "3") + end));
  EXPECT_TRUE(eventually([&] { return !store_.get("b"); }));
  EXPECT_EQ(value_of("d"), "3");
  EXPECT_FALSE(store_.get("a"));
  EXPECT_FALSE(store_.get("c"));
  EXPECT_TRUE(eventually([&] { return node_->holds_data(); }));  // at the node's next tick
  EXPECT_FALSE(node_->holds_part());
  // Had, lost, had again: a Raft leader's hand-overs count from here.
  EXPECT_EQ(node_->times_data_came(), 2u);
  node_->stop();
}

// An older master marks no beginning: the store is emptied at its first
// frame, so a master that goes before its snapshot is whole leaves a part,
// whatever the node held before.
TEST_F(ReplicationNodeTest, AnUnmarkedSnapshotThatNeverCameWholeLeavesAPart) {
  PlayedMaster first;
  start_with_data(first, set_frame("a", "1"));

  PlayedMaster second;
  master_at(second.port());
  ASSERT_TRUE(second.accept_replica());
  ASSERT_TRUE(second.send(set_frame("b", "2")));
  second.hang_up();
  EXPECT_TRUE(eventually([&] { return node_->holds_part(); }));
  EXPECT_FALSE(node_->holds_data());
  EXPECT_FALSE(store_.get("a"));
  EXPECT_EQ(value_of("b"), "2");
  node_->stop();
}

// A stream that goes bad after its snapshot began (a frame the node
// refuses: here not a binary request) has begun it all the same, in the
// very read that ended the link: the node holds a part from then on, not
// the data it had.
TEST_F(ReplicationNodeTest, AStreamThatGoesBadAfterItsSnapshotBeganLeavesAPart) {
  PlayedMaster first;
  start_with_data(first, set_frame("a", "1"));

  PlayedMaster second;
  master_at(second.port());
  ASSERT_TRUE(second.accept_replica());
  std::string begin;
  append_snapshot_begin(begin);
  std::string not_a_request(24, '\xff');
  ASSERT_TRUE(second.send(begin + set_frame("b", "2") + not_a_request));
  ASSERT_TRUE(second.accept_replica());  // the node dropped the stream and asks again
  EXPECT_TRUE(eventually([&] { return node_->holds_part(); }));
  EXPECT_FALSE(node_->holds_data());
  EXPECT_EQ(value_of("a"), "1");  // beside the part that came
  EXPECT_EQ(value_of("b"), "2");
  node_->stop();
}

// A master demoted while a client holds a cache lock: the lock belonged to
// the master this node was, and goes at once, not when the posted close
// of its connection runs. Had it stayed, the new master's snapshot could
// not replace the locked item, and the unlock after the snapshot's end
// would have kept the old value for good.
TEST_F(ReplicationNodeTest, ADemotedMastersCacheLocksGiveWayToTheNewMastersData) {
  start_node();  // master: no other yet
  EXPECT_TRUE(eventually([&] { return node_->status().role == Role::kMaster; }));
  put("k", "old");
  ASSERT_EQ(store_.lock("k", 7), store::LockStatus::kOk);

  PlayedMaster next;
  master_at(next.port());
  ASSERT_TRUE(next.accept_replica());
  std::string begin, end;
  append_snapshot_begin(begin);
  append_snapshot_end(end);
  ASSERT_TRUE(next.send(begin + set_frame("k", "new") + end));
  EXPECT_TRUE(eventually([&] { return value_of("k") == "new"; }));
  EXPECT_EQ(store_.unlock("k", 7), store::LockStatus::kNotLocked);  // the late close's unlock
  EXPECT_EQ(value_of("k"), "new");
  node_->stop();
}

// A master that goes before it sent anything (killed just after the
// replicas connected) takes nothing with it: a replica changes its store
// only when the master's stream starts to come, so it keeps the data it
// had. A leader-changes run lost 4,201 acknowledged writes when replicas
// emptied themselves on connecting (docs/high-availability.md).
TEST_F(ReplicationNodeTest, AMasterThatGoesBeforeSendingAnythingLeavesTheDataWhole) {
  PlayedMaster first;
  start_with_data(first, "");
  store::ItemRef item = store_.allocate("kept", 0, 0, 1);  // as if the snapshot brought it
  item->value()[0] = 'v';
  std::memcpy(item->value() + 1, "\r\n", 2);
  ASSERT_EQ(store_.store(store::StoreCommand::kSet, item, 0, store::kNoOwner).status,
            store::StoreStatus::kStored);

  PlayedMaster second;
  master_at(second.port());
  ASSERT_TRUE(second.accept_replica());
  second.hang_up();
  ASSERT_TRUE(second.accept_replica());  // the node saw the hang-up and asks again

  EXPECT_TRUE(node_->holds_data());
  EXPECT_FALSE(node_->holds_part());
  EXPECT_TRUE(store_.get("kept"));
  node_->stop();
}

// A lockcached master and replica: the replica's acks say it takes each
// item's CAS, so every item it holds has the master's CAS (t2_stale_cas:
// the replica gave each item a CAS of its own, and a client's CAS from the
// master matched a newer version on it after a failover, so `cas`
// overwrote that version).
TEST_F(ReplicationNodeTest, AReplicaKeepsTheMastersCas) {
  store::ManualClock clock;
  store::Store master_store(config(), clock);
  auto master_put = [&](const std::string& key, const std::string& value) {
    store::ItemRef item = master_store.allocate(key, 0, 0, value.size());
    std::memcpy(item->value(), value.data(), value.size());
    std::memcpy(item->value() + value.size(), "\r\n", 2);
    ASSERT_EQ(master_store.store(store::StoreCommand::kSet, item, 0, store::kNoOwner).status,
              store::StoreStatus::kStored);
  };
  for (int i = 0; i < 100; ++i)
    master_put("z", "w" + std::to_string(i));  // the master's counter moves ahead
  master_put("y", "original");
  const uint64_t read_by_a_client = master_store.get("y")->cas;

  std::atomic<bool> master_read_only{false};
  std::unique_ptr<Node> master = start_master(master_store, master_read_only);
  start_node();
  ASSERT_TRUE(eventually([&] { return node_->holds_data(); }));
  ASSERT_TRUE(eventually([&] { return value_of("y") == "original"; }));
  EXPECT_EQ(store_.get("y")->cas, read_by_a_client);
  EXPECT_EQ(store_.get("z")->cas, master_store.get("z")->cas);

  // A change after the snapshot: the master's next CAS too.
  master_put("y", "newer");
  ASSERT_TRUE(eventually([&] { return value_of("y") == "newer"; }));
  EXPECT_EQ(store_.get("y")->cas, master_store.get("y")->cas);
  EXPECT_NE(store_.get("y")->cas, read_by_a_client);
  node_->stop();
  master->stop();
}

// An idle replica that applied everything is 0 bytes behind (lag_bytes:
// sent + pending - acked), however many keep-alives go by (t17_lag_bytes:
// it never reached 0 and grew 24 B a second, one Noop per tick, which the
// master counted as sent and the replica, rightly, not as applied).
TEST_F(ReplicationNodeTest, AnIdleReplicaThatAppliedEverythingIsNoBytesBehind) {
  store::ManualClock clock;
  store::Store master_store(config(), clock);
  store::ItemRef item = master_store.allocate("k", 0, 0, 1);
  std::memcpy(item->value(), "v\r\n", 3);
  ASSERT_EQ(master_store.store(store::StoreCommand::kSet, item, 0, store::kNoOwner).status,
            store::StoreStatus::kStored);
  std::atomic<bool> master_read_only{false};
  std::unique_ptr<Node> master = start_master(master_store, master_read_only);
  start_node();
  ASSERT_TRUE(eventually([&] { return node_->holds_data(); }));
  auto caught_up = [&] {
    std::vector<FollowerStatus> replicas = master->status().replicas;
    if (replicas.size() != 1) return false;
    const FollowerStatus& replica = replicas[0];
    return replica.bytes_sent > 0 && replica.bytes_pending == 0 &&
           replica.bytes_acked == replica.bytes_sent && replica.lag_ms == 0;
  };
  ASSERT_TRUE(eventually(caught_up));
  // Ten ticks: ten keep-alives each way.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(caught_up());
  EXPECT_EQ(master->status().replicas[0].bytes_acked, node_->status().link.bytes_applied);
  node_->stop();
  master->stop();
}

}  // namespace
}  // namespace lockcached::replication
