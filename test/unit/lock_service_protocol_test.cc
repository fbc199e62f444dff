// The lock-service protocol's parts that depend on where the node stands: a
// service the node no longer serves (after a role change) confirms nothing,
// and a cluster member's `cluster` commands.
#include "lockcached/protocol/lock_service_protocol.h"

#include "lockcached/net/reactor_scheduler.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lockcached::protocol {
namespace {

// A protocol fed by hand, its reactor run by hand.
class ProtocolTest : public ::testing::Test {
 protected:
  virtual LockServiceProtocol& protocol() = 0;

  // Offers `bytes` (after what was left unconsumed) and returns the replies.
  std::string feed(std::string_view bytes) {
    pending_.append(bytes);
    pending_.erase(0, protocol().consume(pending_, out_));
    return out_.take_all();
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

}  // namespace
}  // namespace lockcached::protocol
