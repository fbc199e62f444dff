// The lock-service protocol's parts that depend on where the node stands: a
// service the node no longer serves (after a role change) confirms nothing,
// a cluster member's `cluster` commands; and how a wait ends with its
// connection, on a single server and in a cluster.
#include "lockcached/protocol/lock_service_protocol.h"

#include "lockcached/net/reactor_scheduler.h"

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "manual_scheduler.h"

namespace lockcached::protocol {
namespace {

// Offers `bytes` to `protocol` after what it left unconsumed in `pending`,
// and returns the replies it queued.
std::string feed(LockServiceProtocol& protocol, std::string& pending, OutputQueue& out,
                 std::string_view bytes) {
  pending.append(bytes);
  pending.erase(0, protocol.consume(pending, out));
  return out.take_all();
}

// A protocol fed by hand, its reactor run by hand.
class ProtocolTest : public ::testing::Test {
 protected:
  virtual LockServiceProtocol& protocol() = 0;

  // Offers `bytes` (after what was left unconsumed) and returns the replies.
  std::string feed(std::string_view bytes) {
    return protocol::feed(protocol(), pending_, out_, bytes);
  }
  // Runs what was posted to the connection's reactor (an answer that came
  // later hops there) and returns the replies it queued. Once per test: a
  // reactor stops for good.
  std::string run_posted() {
    reactor_.post([this] { reactor_.stop(); });
    reactor_.run();
    return out_.take_all();
  }

  std::shared_ptr<locks::LockService> service_ = std::make_shared<locks::LockService>();
  net::Reactor reactor_;
  net::ReactorScheduler timers_{reactor_};
  OutputQueue out_;
  std::string pending_;
};

class RetiredServiceTest : public ProtocolTest {
 protected:
  LockServiceProtocol& protocol() override { return protocol_; }

  LockServiceProtocol protocol_{LockServiceContext{
      std::make_shared<locks::LocalCoordinator>(service_, timers_), reactor_, out_, [] {}}};
};

// After a role change the node serves another service: a connection still
// on the old one is closed at its next request, unanswered.
TEST_F(RetiredServiceTest, ARetiredServiceConfirmsNothing) {
  service_->retire();
  EXPECT_EQ(feed("lock a\r\n"), "");
  EXPECT_TRUE(protocol_.wants_close());
  EXPECT_TRUE(service_->list("").empty());
}

// `cluster add|remove|transfer`: parsed here, made by whatever the server
// gives the protocol (a cluster member's RaftNode), answered when it ends.
class ClusterCommandsTest : public ProtocolTest {
 protected:
  LockServiceProtocol& protocol() override { return protocol_; }

  std::vector<consensus::MembershipChange> asked_;
  std::function<void(consensus::MembershipResult)> done_;
  LockServiceProtocol protocol_{LockServiceContext{
      std::make_shared<locks::LocalCoordinator>(service_, timers_), reactor_, out_, [] {}, nullptr,
      nullptr, nullptr, nullptr,
      [this](const consensus::MembershipChange& change, const net::Endpoint&, auto done) {
        asked_.push_back(change);
        done_ = std::move(done);
      }}};
};

TEST_F(ClusterCommandsTest, BadShapesAreRefusedAndNothingIsAsked) {
  EXPECT_EQ(feed("cluster\r\n").substr(0, 10), "400 Usage:");
  EXPECT_EQ(feed("cluster add 4\r\n").substr(0, 10), "400 Usage:");
  EXPECT_EQ(feed("cluster remove\r\n").substr(0, 10), "400 Usage:");
  EXPECT_EQ(feed("cluster transfer 1 2\r\n").substr(0, 10), "400 Usage:");
  EXPECT_EQ(feed("cluster grow 4\r\n").substr(0, 10), "400 Usage:");
  EXPECT_EQ(feed("cluster remove 0\r\n"), "400 A node id is a number from 1\r\n");
  EXPECT_EQ(feed("cluster remove x\r\n"), "400 A node id is a number from 1\r\n");
  // As --cluster takes a member's address: no name service decides.
  EXPECT_EQ(feed("cluster add 6 localhost:1\r\n"), "400 The address must be IPV4:PORT\r\n");
  EXPECT_EQ(feed("cluster add 6 192.0.2.16\r\n"), "400 The address must be IPV4:PORT\r\n");
  EXPECT_TRUE(asked_.empty());
  EXPECT_FALSE(protocol_.wants_close());
}

TEST_F(ClusterCommandsTest, AnAddIsAnsweredWhenTheClusterMadeItAndTheConnectionStays) {
  EXPECT_EQ(feed("cluster add 4 192.0.2.14:11500\r\nstats\r\n"), "");
  EXPECT_TRUE(protocol_.blocked());  // the stats waits behind it
  ASSERT_EQ(asked_.size(), 1u);
  EXPECT_EQ(asked_[0].kind, consensus::MembershipChange::Kind::kAdd);
  EXPECT_EQ(asked_[0].id, 4u);
  EXPECT_EQ(asked_[0].address, "192.0.2.14:11500");
  done_({consensus::MembershipResult::Status::kDone, ""});
  EXPECT_EQ(run_posted(), "200 Added\r\n");
  EXPECT_FALSE(protocol_.blocked());
  EXPECT_FALSE(protocol_.wants_close());
}

// Leadership may have gone with it: the reply, then the connection closes.
TEST_F(ClusterCommandsTest, ATransferDoneIsAnsweredThenTheConnectionCloses) {
  EXPECT_EQ(feed("cluster transfer\r\n"), "");
  ASSERT_EQ(asked_.size(), 1u);
  EXPECT_EQ(asked_[0].kind, consensus::MembershipChange::Kind::kTransfer);
  EXPECT_EQ(asked_[0].id, 0u);
  EXPECT_TRUE(protocol_.awaits_cluster_change());
  done_({consensus::MembershipResult::Status::kDone, ""});
  EXPECT_EQ(run_posted(), "200 Transferred\r\n");
  EXPECT_FALSE(protocol_.awaits_cluster_change());
  EXPECT_TRUE(protocol_.wants_close());
}

// A transfer that was not made changed nothing: the connection stays, and
// the client may ask again on it (the CLI does after "election").
TEST_F(ClusterCommandsTest, ATransferNotMadeIsAnsweredAndTheConnectionStays) {
  EXPECT_EQ(feed("cluster transfer 3\r\n"), "");
  ASSERT_EQ(asked_.size(), 1u);
  done_({consensus::MembershipResult::Status::kNotLeader, ""});
  EXPECT_EQ(run_posted(), "503 not leader: election\r\n");
  EXPECT_FALSE(protocol_.wants_close());
  EXPECT_EQ(feed("cluster remove 3\r\n"), "");
  ASSERT_EQ(asked_.size(), 2u);
  EXPECT_EQ(asked_[1].kind, consensus::MembershipChange::Kind::kRemove);
}

// A member that does not lead refuses every change, naming the leader's
// lock addresses as cluster::LockMachine does.
class FollowerCoordinator final : public locks::Coordinator {
 public:
  using Coordinator::Coordinator;
  locks::Outcome submit(locks::Change&&, locks::Answer) override {
    locks::Outcome refused;
    refused.status = locks::OutcomeStatus::kNotLeader;
    refused.leader = leader;
    refused.leader_tls = leader_tls;
    return refused;
  }
  bool answers_at_once() const override { return true; }

  std::string leader = "192.0.2.11:11400";
  std::string leader_tls = "192.0.2.11:11401";
};

// A client that came over TLS can speak nothing else: a 503 sends it to the
// leader's TLS port, a plain client to the plain one.
TEST(NotLeaderTest, A503NamesTheLeadersPortThatSpeaksTheConnectionsProtocol) {
  auto coordinator = std::make_shared<FollowerCoordinator>(std::make_shared<locks::LockService>());
  net::Reactor reactor;
  for (bool over_tls : {false, true}) {
    OutputQueue out;
    std::function<void(consensus::MembershipResult)> done;
    LockServiceProtocol protocol{LockServiceContext{
        coordinator, reactor, out, [] {}, nullptr, nullptr, nullptr, nullptr,
        [&](const consensus::MembershipChange&, const net::Endpoint&, auto answer) {
          done = std::move(answer);
        },
        over_tls}};
    std::string pending;
    std::string named = over_tls ? "192.0.2.11:11401" : "192.0.2.11:11400";
    EXPECT_EQ(feed(protocol, pending, out, "lock a\r\n"), "503 not leader: " + named + "\r\n");
    EXPECT_EQ(feed(protocol, pending, out, "cluster transfer\r\n"), "");
    ASSERT_TRUE(done);
    done({consensus::MembershipResult::Status::kNotLeader, "192.0.2.11:11400", "192.0.2.11:11401"});
    reactor.run_once(0);  // the answer hops to the connection's reactor
    EXPECT_EQ(out.take_all(), "503 not leader: " + named + "\r\n") << "over TLS: " << over_tls;
  }
}

// A leader with no TLS lock port (or older than its naming one) is named by
// its plain address all the same: the failed handshake says what is wrong.
TEST(NotLeaderTest, ALeaderWithoutATlsPortIsNamedByItsPlainOne) {
  auto coordinator = std::make_shared<FollowerCoordinator>(std::make_shared<locks::LockService>());
  coordinator->leader_tls.clear();
  net::Reactor reactor;
  OutputQueue out;
  LockServiceProtocol protocol{LockServiceContext{coordinator, reactor, out, [] {}, nullptr,
                                                  nullptr, nullptr, nullptr, {}, true}};
  std::string pending;
  EXPECT_EQ(feed(protocol, pending, out, "lock a\r\n"), "503 not leader: 192.0.2.11:11400\r\n");
  coordinator->leader.clear();
  LockServiceProtocol in_election{LockServiceContext{coordinator, reactor, out, [] {}, nullptr,
                                                     nullptr, nullptr, nullptr, {}, true}};
  EXPECT_EQ(feed(in_election, pending, out, "lock a\r\n"), "503 not leader: election\r\n");
}

TEST(ClusterCommandsSingleServerTest, ASingleServerHasNoMembers) {
  auto service = std::make_shared<locks::LockService>();
  net::Reactor reactor;
  net::ReactorScheduler timers{reactor};
  OutputQueue out;
  LockServiceProtocol protocol{LockServiceContext{
      std::make_shared<locks::LocalCoordinator>(service, timers), reactor, out, [] {}}};
  std::string input = "cluster remove 2\r\n";
  protocol.consume(input, out);
  EXPECT_EQ(out.take_all(), "400 Not a cluster member\r\n");
}


// ---------------------------------------------------------------------------
// A wait ends with its connection, and its timeout ends that wait only.

// One connection's protocol, fed by hand, and its replies.
struct Connection {
  Connection(std::shared_ptr<locks::Coordinator> coordinator, net::Reactor& reactor)
      : protocol(LockServiceContext{std::move(coordinator), reactor, out, [] {}}) {}
  std::string send(std::string_view request) { return feed(protocol, input, out, request); }
  std::string replies() { return out.take_all(); }

  OutputQueue out;  // before the protocol, whose context names it
  LockServiceProtocol protocol;
  std::string input;
};

// Changes made as a cluster member makes them (cluster::LockMachine):
// submit() only logs them; commit() makes them in the log's order and
// answers each, a queued wait first with kQueued and then with its grant.
class LoggedCoordinator final : public locks::Coordinator {
 public:
  using Coordinator::Coordinator;
  locks::Outcome submit(locks::Change&& change, locks::Answer answer) override {
    log_.emplace_back(std::move(change), std::move(answer));
    locks::Outcome later;
    later.status = locks::OutcomeStatus::kLater;
    return later;
  }
  bool answers_at_once() const override { return false; }
  void commit() {
    while (!log_.empty()) {
      locks::Change change = std::move(log_.front().first);
      locks::Answer answer = std::move(log_.front().second);
      log_.pop_front();
      locks::Outcome outcome = service_->apply(change, [answer](uint64_t token) {
        locks::Outcome granted;
        granted.token = token;
        answer(granted);
      });
      if (answer) answer(outcome);
    }
  }

 private:
  std::deque<std::pair<locks::Change, locks::Answer>> log_;
};

class WaitEndTest : public ::testing::Test {
 protected:
  // What was posted to the connections' reactor: answers that hop there.
  void run_posted() {
    for (int turn = 0; turn < 3; ++turn)
      reactor_.run_once(0);
  }
  std::vector<locks::LockInfo> locks() { return service_->list(""); }
  // A cluster's changes made, in log order, and their answers delivered.
  void commit(LoggedCoordinator& coordinator) {
    coordinator.commit();
    run_posted();
  }
  // A connection whose session has a minute's grace asks `lock x 30` and is
  // gone before the cluster makes the wait. Returns the session's id.
  std::string wait_for_x_and_go(const std::shared_ptr<LoggedCoordinator>& coordinator) {
    auto waiter = std::make_unique<Connection>(coordinator, reactor_);
    commit(*coordinator);
    std::string id = waiter->send("conn_id\r\n");
    EXPECT_EQ(id.substr(0, 4), "200 ");
    id = id.substr(4, id.size() - 6);
    waiter->send("set_timeout 60000\r\n");
    commit(*coordinator);
    EXPECT_EQ(waiter->replies(), "200 Timeout set\r\n");
    EXPECT_EQ(waiter->send("lock x 30\r\n"), "");
    waiter.reset();
    commit(*coordinator);
    return id;
  }
  // Session `id` resumed on a new connection.
  std::unique_ptr<Connection> resume(const std::shared_ptr<LoggedCoordinator>& coordinator,
                                     const std::string& id) {
    auto resumed = std::make_unique<Connection>(coordinator, reactor_);
    commit(*coordinator);
    resumed->send("conn_id " + id + "\r\n");
    commit(*coordinator);
    EXPECT_EQ(resumed->replies(), "200 Resumed\r\n");
    return resumed;
  }

  testing::ManualScheduler timers_;
  std::shared_ptr<locks::LockService> service_ =
      std::make_shared<locks::LockService>(locks::LockLimits{}, 0, timers_);
  net::Reactor reactor_;
};

// A cluster makes a wait after its connection asked for it: the connection
// may be gone by then. Its client resumed the session elsewhere, and must
// not be handed a lock it no longer waits for when the holder lets go
// (raft_faults caught a resumed session answered a token from before).
TEST_F(WaitEndTest, AClusterWaitWhoseConnectionWentBeforeItWasMadeIsNeverGranted) {
  auto coordinator = std::make_shared<LoggedCoordinator>(service_);
  Connection holder(coordinator, reactor_);
  commit(*coordinator);
  holder.send("lock x\r\n");
  commit(*coordinator);
  ASSERT_EQ(holder.replies().substr(0, 13), "200 Acquired ");
  std::string id = wait_for_x_and_go(coordinator);
  auto resumed = resume(coordinator, id);

  holder.send("unlock x\r\n");
  commit(*coordinator);
  ASSERT_EQ(holder.replies(), "200 Released\r\n");
  EXPECT_TRUE(locks().empty()) << "x went to " << locks()[0].session;
  EXPECT_EQ(service_->stats().waiters, 0u);
}

// A wait made after its connection went (a cluster makes it later) and
// granted at once, x being free: its client never heard of the grant, and
// the lock goes back with the connection's cancel, in the log before any
// resume, so the resumed session holds nothing it was not told of.
TEST_F(WaitEndTest, AClusterWaitGrantedAfterItsConnectionWentIsGivenBack) {
  auto coordinator = std::make_shared<LoggedCoordinator>(service_);
  std::string id = wait_for_x_and_go(coordinator);
  EXPECT_TRUE(locks().empty()) << "x kept by " << locks()[0].session;
  auto resumed = resume(coordinator, id);
  EXPECT_TRUE(locks().empty());
}

// On a single server a release grants a queued wait and posts the answer
// to the waiter's reactor: the connection may end before it gets there.
// Its client never heard, so the lock goes back and on to the next waiter,
// not into the session's grace.
TEST_F(WaitEndTest, AWaitGrantedWhileItsAnswerWasOnItsWayGoesBackWhenItsConnectionEnds) {
  auto coordinator = std::make_shared<locks::LocalCoordinator>(service_, timers_);
  Connection holder(coordinator, reactor_);
  auto waiter = std::make_unique<Connection>(coordinator, reactor_);
  Connection next(coordinator, reactor_);
  ASSERT_EQ(holder.send("lock x\r\n").substr(0, 13), "200 Acquired ");
  ASSERT_EQ(waiter->send("set_timeout 60000\r\n"), "200 Timeout set\r\n");
  EXPECT_EQ(waiter->send("lock x 30\r\n"), "");  // queued
  EXPECT_EQ(next.send("lock x 30\r\n"), "");     // behind it
  ASSERT_EQ(holder.send("unlock x\r\n"), "200 Released\r\n");  // the waiter's answer is posted
  waiter.reset();
  run_posted();
  EXPECT_EQ(next.replies().substr(0, 13), "200 Acquired ");
}

// A connection that waited is gone, its session resumed on another, which
// waits for the same lock: the first wait's timeout leaves the second
// alone, which is granted when the holder lets go.
TEST_F(WaitEndTest, AWaitsTimeoutEndsNoWaitOfTheSessionOnALaterConnection) {
  auto coordinator = std::make_shared<locks::LocalCoordinator>(service_, timers_);
  Connection holder(coordinator, reactor_);
  auto waiter = std::make_unique<Connection>(coordinator, reactor_);
  ASSERT_EQ(holder.send("lock x\r\n").substr(0, 13), "200 Acquired ");
  std::string id = waiter->send("conn_id\r\n");
  id = id.substr(4, id.size() - 6);
  ASSERT_EQ(waiter->send("set_timeout 60000\r\n"), "200 Timeout set\r\n");
  EXPECT_EQ(waiter->send("lock x 0.5\r\n"), "");  // queued
  waiter.reset();
  Connection resumed(coordinator, reactor_);
  ASSERT_EQ(resumed.send("conn_id " + id + "\r\n"), "200 Resumed\r\n");
  EXPECT_EQ(resumed.send("lock x 5\r\n"), "");  // queued

  timers_.advance(500);  // the first wait's timeout
  run_posted();
  EXPECT_EQ(resumed.replies(), "");
  ASSERT_EQ(holder.send("unlock x\r\n"), "200 Released\r\n");
  run_posted();
  EXPECT_EQ(resumed.replies().substr(0, 13), "200 Acquired ");
}

}  // namespace
}  // namespace lockcached::protocol
