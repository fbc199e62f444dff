// consensus::RaftNode: three real libraft members in this process, on
// loopback ports, each with a data directory of its own. They elect a
// leader, apply what it proposes in one order on every member, elect
// another when it stops, keep what was committed across a restart, and
// never let in a peer without the cluster's secret. Every wait is for an
// event a member reports (an apply, a role), with a deadline.
#include "lockcached/consensus/raft_node.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "free_ports.h"

namespace {

namespace fs = std::filesystem;
using lockcached::consensus::Member;
using lockcached::consensus::member_after;
using lockcached::consensus::RaftNode;
using lockcached::consensus::RaftSettings;
using lockcached::consensus::RaftStatus;
using lockcached::consensus::Role;
using namespace std::chrono_literals;
using test_ports::free_ports;

constexpr auto kDeadline = 20s;

// What the members report, for a test to wait on: every recorder
// notifies it.
struct Events {
  std::mutex mutex;
  std::condition_variable changed;
  bool wait(const std::function<bool()>& done) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, kDeadline, done);
  }
  void notify() {
    { std::lock_guard lock(mutex); }
    changed.notify_all();
  }
};

// Records what it is told.
class Recorder : public lockcached::consensus::StateMachine {
 public:
  explicit Recorder(Events& events) : events_(events) {}

  void apply(uint64_t index, uint64_t stamp_ms,
             std::span<const std::string_view> commands) override {
    EXPECT_GT(stamp_ms, 0u);
    {
      std::lock_guard lock(mutex_);
      for (std::string_view command : commands)
        applied_.push_back(std::to_string(index) + ":" + std::string(command));
    }
    events_.notify();  // not under mutex_: a waiting test takes it to look
  }
  std::string snapshot() override {
    std::lock_guard lock(mutex_);
    std::string data;
    for (const std::string& entry : applied_)
      data += entry + "\n";
    return data;
  }
  bool restore(std::string_view data) override {
    std::vector<std::string> restored;
    while (!data.empty()) {
      size_t newline = data.find('\n');
      if (newline == std::string_view::npos) return false;
      restored.emplace_back(data.substr(0, newline));
      data.remove_prefix(newline + 1);
    }
    {
      std::lock_guard lock(mutex_);
      applied_ = std::move(restored);
      ++restores_;
    }
    events_.notify();
    return true;
  }
  void on_status(const RaftStatus&) override { events_.notify(); }

  std::vector<std::string> applied() const {
    std::lock_guard lock(mutex_);
    return applied_;
  }
  int restores() const {
    std::lock_guard lock(mutex_);
    return restores_;
  }

 private:
  Events& events_;
  mutable std::mutex mutex_;
  std::vector<std::string> applied_;
  int restores_ = 0;
};

class RaftNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // As lockcached's main: libuv writes to a peer that went away with
    // write(2), which raises SIGPIPE (raft_node.h); and with TZ named, the
    // members' threads logging at once do not each re-read the zone (a
    // race in glibc that ThreadSanitizer reports; main.cc says more).
    signal(SIGPIPE, SIG_IGN);
    setenv("TZ", ":/etc/localtime", /*overwrite=*/0);
    root_ = fs::temp_directory_path() / ("raft_node_test." + std::to_string(getpid()));
    fs::remove_all(root_);
    std::vector<uint16_t> ports = free_ports(3);  // three different ones
    for (uint64_t id = 1; id <= 3; ++id) {
      members_.push_back({id, "127.0.0.1:" + std::to_string(ports[id - 1])});
      fs::create_directories(dir(id));
      recorders_.push_back(std::make_unique<Recorder>(events_));
    }
    nodes_.resize(3);
  }
  void TearDown() override {
    for (auto& node : nodes_)
      node.reset();
    fs::remove_all(root_);
  }

  fs::path dir(uint64_t id) const { return root_ / std::to_string(id); }

  void start(uint64_t id, const std::string& secret = "members only") {
    RaftSettings settings = settings_;
    settings.id = id;
    settings.members = members_;
    settings.data_dir = dir(id);
    settings.secret = secret;
    settings.election_timeout_ms = 300;
    settings.heartbeat_ms = 50;
    nodes_[id - 1] = std::make_unique<RaftNode>(settings, *recorders_[id - 1]);
    std::string error;
    ASSERT_TRUE(nodes_[id - 1]->start(&error)) << error;
  }

  // Starts the three members; returns the one that leads (0: none).
  uint64_t start_all() {
    for (uint64_t id = 1; id <= 3; ++id) {
      start(id);
      if (::testing::Test::HasFatalFailure()) return 0;
    }
    return leader();
  }

  // The member that leads, once one does among `among` (1-based ids).
  uint64_t leader(std::vector<uint64_t> among = {1, 2, 3}) {
    uint64_t found = 0;
    events_.wait([&] {
      for (uint64_t id : among) {
        if (nodes_[id - 1] && nodes_[id - 1]->status().role == Role::kLeader) found = id;
      }
      return found != 0;
    });
    EXPECT_NE(found, 0u) << "no leader elected";
    return found;
  }

  bool applied(uint64_t id, size_t count) {
    return events_.wait([&] { return recorders_[id - 1]->applied().size() >= count; });
  }

  Events events_;
  RaftSettings settings_;  // what start() begins with
  fs::path root_;
  std::vector<Member> members_;
  std::vector<std::unique_ptr<Recorder>> recorders_;
  std::vector<std::unique_ptr<RaftNode>> nodes_;
};

TEST(ParseMembers, TakesIdAtIpv4AndPortAndRefusesTheRest) {
  std::string error;
  std::vector<Member> members =
      lockcached::consensus::parse_members("1@192.0.2.1:11500,2@192.0.2.2:11500", &error);
  ASSERT_EQ(members.size(), 2u) << error;
  EXPECT_EQ(members[1], (Member{2, "192.0.2.2:11500"}));
  for (const char* bad : {"", "1@host.example:1", "0@192.0.2.1:1", "1@192.0.2.1", "1@192.0.2.1:0",
                          "x@192.0.2.1:1", "1@192.0.2.1:1,1@192.0.2.2:1",
                          "1@192.0.2.1:1,2@192.0.2.1:1", "1@192.0.2.1:1,", ",1@192.0.2.1:1",
                          "1@192.0.2.1:1,,2@192.0.2.2:1"}) {
    error.clear();
    EXPECT_TRUE(lockcached::consensus::parse_members(bad, &error).empty()) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

// A leader whose cache is cold asks the members in turn (Server::
// cache_may_lead): with 2 and 3 restarted cold and 1 holding the data,
// 2 asks 3, and 3 asks 1, rather than each asking the other again.
TEST(MemberAfter, GoesRoundTheOtherMembersInTheOrderOfIds) {
  std::vector<Member> members = {{3, "192.0.2.3:11500"}, {1, "192.0.2.1:11500"},
                                 {2, "192.0.2.2:11500"}};
  EXPECT_EQ(member_after(members, 2, 2), 3u);
  EXPECT_EQ(member_after(members, 3, 3), 1u);
  EXPECT_EQ(member_after(members, 1, 1), 2u);
  // Asked before, by the member that leads again: the next one after it.
  EXPECT_EQ(member_after(members, 3, 2), 1u);
  EXPECT_EQ(member_after(members, 1, 2), 3u);
  // Ids with gaps (members removed and added).
  std::vector<Member> sparse = {{2, "192.0.2.2:11500"}, {7, "192.0.2.7:11500"},
                                {4, "192.0.2.4:11500"}};
  EXPECT_EQ(member_after(sparse, 4, 4), 7u);
  EXPECT_EQ(member_after(sparse, 7, 7), 2u);
  EXPECT_EQ(member_after(sparse, 7, 4), 2u);
  // Nobody else.
  EXPECT_EQ(member_after({{5, "192.0.2.5:11500"}}, 5, 5), 0u);
  EXPECT_EQ(member_after({}, 1, 1), 0u);
}

TEST_F(RaftNodeTest, EveryMemberAppliesTheLeadersCommandsInOneOrder) {
  uint64_t first = start_all();
  ASSERT_NE(first, 0u);
  for (int i = 0; i < 100; ++i)
    ASSERT_TRUE(nodes_[first - 1]->propose("c" + std::to_string(i)));
  for (uint64_t id = 1; id <= 3; ++id)
    ASSERT_TRUE(applied(id, 100)) << "node " << id;
  std::vector<std::string> reference = recorders_[first - 1]->applied();
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(reference[i].substr(reference[i].find(':') + 1), "c" + std::to_string(i));
  for (uint64_t id = 1; id <= 3; ++id)
    EXPECT_EQ(recorders_[id - 1]->applied(), reference) << "node " << id;
  // Only the leader takes commands.
  for (uint64_t id = 1; id <= 3; ++id)
    if (id != first) {
      EXPECT_FALSE(nodes_[id - 1]->propose("refused"));
    }
}

// A server stops its node while connections still close on other threads
// and propose their detach: proposals during and after the stop are
// refused, never sent to a closed handle.
TEST_F(RaftNodeTest, ALeaderStoppingRefusesWhatIsProposedMeanwhile) {
  uint64_t first = start_all();
  ASSERT_NE(first, 0u);
  RaftNode& node = *nodes_[first - 1];
  std::atomic<bool> stopped{false};
  std::atomic<int> accepted{0};
  std::thread proposer([&] {
    while (!stopped.load()) {
      if (node.propose("closing")) accepted.fetch_add(1);
    }
  });
  while (accepted.load() == 0)
    std::this_thread::yield();
  node.stop();
  stopped.store(true);
  proposer.join();
  EXPECT_FALSE(node.propose("after the stop"));
}

// A stop waits for the entries in flight to end before it closes libraft:
// here they never commit (the other members are gone), and the stop ends
// all the same, without applying them.
TEST_F(RaftNodeTest, ALeaderWithEntriesThatCannotCommitStillStops) {
  uint64_t first = start_all();
  ASSERT_NE(first, 0u);
  ASSERT_TRUE(nodes_[first - 1]->propose("committed"));
  ASSERT_TRUE(applied(first, 1));
  for (uint64_t id = 1; id <= 3; ++id)
    if (id != first) nodes_[id - 1].reset();
  bool proposed = nodes_[first - 1]->propose("stranded");
  nodes_[first - 1]->stop();
  EXPECT_FALSE(nodes_[first - 1]->propose("after the stop"));
  std::vector<std::string> applied = recorders_[first - 1]->applied();
  ASSERT_EQ(applied.size(), 1u) << "proposed the stranded one: " << proposed;
  EXPECT_EQ(applied[0].substr(applied[0].find(':') + 1), "committed");
}

// libraft refuses entries while the leader hands leadership over. One
// proposed then waits, and is committed when the transfer fails (here its
// target is down) and this node still leads: dropping it lost a restarted
// cluster's leader announcement (ClusterE2e's every-node restart).
TEST_F(RaftNodeTest, WhatIsProposedDuringAFailedTransferIsCommittedAfterIt) {
  uint64_t first = start_all();
  ASSERT_NE(first, 0u);
  uint64_t target = first == 3 ? 2 : 3;
  // The target has the whole log, so libraft sends it the transfer's
  // message at once (to a member that is behind it would wait).
  ASSERT_TRUE(nodes_[first - 1]->propose("before"));
  for (uint64_t id = 1; id <= 3; ++id)
    ASSERT_TRUE(applied(id, 1));
  nodes_[target - 1].reset();
  std::mutex mutex;
  std::optional<std::string> transfer_error;
  nodes_[first - 1]->change_members(
      {lockcached::consensus::MembershipChange::Kind::kTransfer, target, ""},
      [&](const std::string& error) {
        {
          std::lock_guard lock(mutex);
          transfer_error = error;
        }
        events_.notify();
      });
  // Queued after the transfer's task: the loop starts the transfer first.
  ASSERT_TRUE(nodes_[first - 1]->propose("during the transfer"));
  ASSERT_TRUE(events_.wait([&] {
    std::lock_guard lock(mutex);
    return transfer_error.has_value();
  }));
  {
    std::lock_guard lock(mutex);
    EXPECT_NE(*transfer_error, "") << "the transfer to a stopped member succeeded";
  }
  ASSERT_EQ(nodes_[first - 1]->status().role, Role::kLeader);
  ASSERT_TRUE(applied(first, 2)) << "the entry proposed during the transfer was lost";
  std::vector<std::string> applied = recorders_[first - 1]->applied();
  EXPECT_EQ(applied[1].substr(applied[1].find(':') + 1), "during the transfer");
  // The member comes back to a leader that still leads, and catches up.
  recorders_[target - 1] = std::make_unique<Recorder>(events_);
  start(target);
  bool proposed = false;
  EXPECT_TRUE(events_.wait([&] {
    for (auto& node : nodes_)
      if (!proposed && node->status().role == Role::kLeader)
        proposed = node->propose("after the member is back");
    return recorders_[target - 1]->applied().size() >= 3;
  }));
}

TEST_F(RaftNodeTest, AnotherLeaderTakesOverAndCommittedCommandsSurviveARestart) {
  uint64_t first = start_all();
  ASSERT_NE(first, 0u);
  ASSERT_TRUE(nodes_[first - 1]->propose("before"));
  for (uint64_t id = 1; id <= 3; ++id)
    ASSERT_TRUE(applied(id, 1));
  nodes_[first - 1].reset();
  std::vector<uint64_t> others;
  for (uint64_t id = 1; id <= 3; ++id)
    if (id != first) others.push_back(id);
  uint64_t second = leader(others);
  ASSERT_NE(second, 0u);
  ASSERT_TRUE(nodes_[second - 1]->propose("after"));
  for (uint64_t id : others)
    ASSERT_TRUE(applied(id, 2));
  // The stopped member comes back from its disk and catches up.
  recorders_[first - 1] = std::make_unique<Recorder>(events_);
  start(first);
  ASSERT_TRUE(applied(first, 2));
  EXPECT_EQ(recorders_[first - 1]->applied(), recorders_[second - 1]->applied());
}

// A member that was away while the log moved past what the leader keeps
// behind its snapshot gets the snapshot, then the rest of the log.
TEST_F(RaftNodeTest, ASnapshotBringsBackAMemberThatWasAway) {
  settings_.snapshot_threshold = 16;
  settings_.snapshot_trailing = 4;
  uint64_t first = start_all();
  ASSERT_NE(first, 0u);
  uint64_t away = first == 3 ? 2 : 3;
  nodes_[away - 1].reset();
  // One entry each (group commit would pack commands proposed together).
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(nodes_[first - 1]->propose("c" + std::to_string(i)));
    ASSERT_TRUE(applied(first, static_cast<size_t>(i) + 1));
  }
  recorders_[away - 1] = std::make_unique<Recorder>(events_);
  start(away);
  ASSERT_TRUE(applied(away, 40));
  ASSERT_TRUE(events_.wait(
      [&] { return recorders_[away - 1]->applied() == recorders_[first - 1]->applied(); }));
  EXPECT_GE(recorders_[away - 1]->restores(), 1);
}

TEST_F(RaftNodeTest, AMemberWithoutTheSecretIsKeptOut) {
  start(1);
  start(2);
  start(3, "a guess");
  uint64_t first = leader({1, 2});
  ASSERT_NE(first, 0u);
  ASSERT_TRUE(nodes_[first - 1]->propose("members"));
  ASSERT_TRUE(applied(1, 1));
  ASSERT_TRUE(applied(2, 1));
  // The leader's heartbeats reach node 3 as often as they reach node 2,
  // which has long applied the entry: node 3 has nothing, and never led.
  ASSERT_TRUE(nodes_[first - 1]->propose("more"));
  ASSERT_TRUE(applied(1, 2));
  ASSERT_TRUE(applied(2, 2));
  EXPECT_TRUE(recorders_[2]->applied().empty());
  EXPECT_NE(nodes_[2]->status().role, Role::kLeader);
  EXPECT_EQ(nodes_[2]->status().leader_id, 0u);
}

}  // namespace
