// Unit tests of locks::LockService: the named-lock service without sockets
// (../shared/specs/lock-service.md). Grants to waiters are delivered through
// WaitTicket::on_grant, called on the thread that releases the lock, so a
// single-threaded test sees them synchronously.
#include "lockcached/locks/lock_service.h"

#include "lockcached/locks/lock_change.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "spin_barrier.h"

namespace lockcached::locks {
namespace {

using lockcached::testing::spin_barrier;

// One grant seen by a ticket's on_grant: which ticket, and its token.
struct GrantRecord {
  int ticket;
  uint64_t token;
};

// Connection `id` from `address` ("IP:PORT").
net::ClientInfo client_at(uint64_t id, std::string_view address) {
  return {id, *net::parse_endpoint(address)};
}

class LockServiceTest : public ::testing::Test {
 protected:
  // A ticket of `session` for `name` whose grants are appended to grants_.
  std::shared_ptr<WaitTicket> ticket(const std::shared_ptr<Session>& session, std::string name,
                                     int number) {
    auto wait = std::make_shared<WaitTicket>();
    wait->session = session;
    wait->name = std::move(name);
    wait->on_grant = [this, number](uint64_t token) { grants_.push_back({number, token}); };
    return wait;
  }

  // What list() says about `name`, or a LockInfo with an empty name.
  LockInfo info(const std::string& name) {
    for (LockInfo& lock : service_.list(name)) {
      if (lock.name == name) return lock;
    }
    return LockInfo{};
  }

  bool holds(const std::shared_ptr<Session>& session, const std::string& name) {
    return info(name).session == session->public_id();
  }

  LockService service_;
  std::vector<GrantRecord> grants_;
};

// A session with no grace ends with its connection: a resume racing the
// detach (another connection with the id, on another thread) either comes
// first, and is refused (the session is still attached), or comes after,
// and finds no session. It never takes over a session whose locks the
// detach is letting go. Run as a race, many times.
TEST(LockServiceRace, AResumeNeverTakesOverASessionThatEndsWithoutGrace) {
  LockService service;
  for (int round = 0; round < 500; ++round) {  // the code before failed in the first few
    auto session = service.create_session();
    service.set_grace(session, 0);
    for (int i = 0; i < 16; ++i)  // a longer release, a wider window
      ASSERT_TRUE(service.try_acquire(session, "n" + std::to_string(i)).granted);
    std::atomic<int> ready{0};
    std::shared_ptr<Session> resumed;
    std::thread resumer([&] {
      spin_barrier(ready);
      while (!resumed && service.find_session(session->public_id()))
        resumed = service.resume_session(session->id);
    });
    spin_barrier(ready);
    uint64_t detachment = 0;
    EXPECT_EQ(service.detach(session, &detachment), 0);
    resumer.join();
    ASSERT_EQ(resumed, nullptr) << "round " << round << ": resumed with "
                                << service.list("").size() << " locks left";
    ASSERT_EQ(service.stats().sessions_in_grace, 0u) << "round " << round;
    ASSERT_TRUE(service.list("").empty()) << "round " << round;
  }
}

// `stats locks` (LockService::list) reads the clock once, then walks
// the 64 shards; a lock taken on another thread after that read, in a
// shard the walk reaches later, has acquired_ms > now: held_ms is negative,
// and the protocol prints it as uint64_t (18446744073709551615 and near).
TEST(LockServiceRace, ListNeverReportsANegativeHeldTime) {
  LockService service(LockLimits{0, 0, 0});
  auto many = service.create_session();
  for (int i = 0; i < 10000; ++i)
    ASSERT_TRUE(service.try_acquire(many, "held/" + std::to_string(i)).granted);
  auto churn = service.create_session();
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::thread locker([&] {
    spin_barrier(ready);
    uint64_t i = 0;
    while (!stop.load()) {
      std::string name = "fresh/" + std::to_string(i++ % 997);
      service.try_acquire(churn, name);
      service.release(churn, name);
    }
  });
  spin_barrier(ready);
  int negative = 0;
  for (int lists = 1; lists <= 30 && negative == 0; ++lists) {  // before: within 1 to 7
    for (const LockInfo& info : service.list("")) {
      if (info.held_ms < 0) {
        ++negative;
        ADD_FAILURE() << "list " << lists << ": " << info.name << " held_ms " << info.held_ms
                      << ", printed by `stats locks` as "
                      << static_cast<uint64_t>(info.held_ms);
        break;
      }
    }
  }
  stop = true;
  locker.join();
}

// The server passes its start time as the floor (docs/lock-service.md).
TEST(LockServiceTokenFloorTest, TokensStartAboveTheFloorAndGrowByOne) {
  constexpr uint64_t kFloor = 1'795'462'512'000'000;
  LockService service({}, kFloor);
  auto alice = service.create_session();
  EXPECT_EQ(service.try_acquire(alice, "a").token, kFloor + 1);
  EXPECT_EQ(service.try_acquire(alice, "b").token, kFloor + 2);
  service.release(alice, "a");
  EXPECT_EQ(service.try_acquire(alice, "a").token, kFloor + 3);
}

TEST_F(LockServiceTest, TryAcquireGrantsFreeLockAndRefusesOthers) {
  auto alice = service_.create_session();
  auto bob = service_.create_session();

  LockService::Acquired first = service_.try_acquire(alice, "a");
  EXPECT_TRUE(first.granted);
  EXPECT_GT(first.token, 0u);

  LockService::Acquired refused = service_.try_acquire(bob, "a");
  EXPECT_FALSE(refused.granted);

  // Acquiring a lock one already holds succeeds with the same grant's token.
  LockService::Acquired again = service_.try_acquire(alice, "a");
  EXPECT_TRUE(again.granted);
  EXPECT_EQ(again.token, first.token);

  ServiceStats stats = service_.stats();
  EXPECT_EQ(stats.locks, 1u);
  EXPECT_EQ(stats.grants, 1u) << "re-acquiring a held lock is not a new grant";
  EXPECT_TRUE(holds(alice, "a"));
  {
    std::lock_guard lock(alice->mutex);
    EXPECT_EQ(alice->held.count("a"), 1u);
  }
}

TEST_F(LockServiceTest, ReleaseOnlyByHolder) {
  auto alice = service_.create_session();
  auto bob = service_.create_session();
  uint64_t token = service_.try_acquire(alice, "a").token;

  EXPECT_FALSE(service_.release(bob, "a")) << "bob does not hold it";
  EXPECT_FALSE(service_.release(bob, "free")) << "nobody holds it";
  EXPECT_TRUE(holds(alice, "a"));

  EXPECT_TRUE(service_.release(alice, "a"));
  EXPECT_FALSE(service_.release(alice, "a")) << "already released";
  EXPECT_EQ(service_.stats().locks, 0u);
  EXPECT_TRUE(service_.list("").empty());
  {
    std::lock_guard lock(alice->mutex);
    EXPECT_TRUE(alice->held.empty());
  }

  LockService::Acquired bobs = service_.try_acquire(bob, "a");
  EXPECT_TRUE(bobs.granted);
  EXPECT_GT(bobs.token, token);
}

TEST_F(LockServiceTest, AcquireOrWaitGrantsFreeLockAtOnce) {
  auto alice = service_.create_session();
  auto wait = ticket(alice, "a", 1);
  LockService::Acquired acquired = service_.acquire_or_wait(wait);
  EXPECT_TRUE(acquired.granted);
  EXPECT_GT(acquired.token, 0u);
  EXPECT_FALSE(wait->queued);
  EXPECT_EQ(service_.stats().waiters, 0u);

  // The holder waiting for its own lock has it already, same token.
  auto again = ticket(alice, "a", 2);
  LockService::Acquired second = service_.acquire_or_wait(again);
  EXPECT_TRUE(second.granted);
  EXPECT_EQ(second.token, acquired.token);
  EXPECT_FALSE(again->queued);
  EXPECT_TRUE(grants_.empty()) << "on_grant is only for waits that were queued";
  EXPECT_FALSE(service_.cancel_wait(*again, true));
  EXPECT_EQ(service_.stats().timeouts, 0u);
}

TEST_F(LockServiceTest, WaitersAreGrantedInFifoOrder) {
  auto holder = service_.create_session();
  std::array<std::shared_ptr<Session>, 3> waiting = {
      service_.create_session(), service_.create_session(), service_.create_session()};
  uint64_t first_token = service_.try_acquire(holder, "q").token;

  std::vector<std::shared_ptr<WaitTicket>> tickets;
  for (int i = 0; i < 3; ++i) {
    tickets.push_back(ticket(waiting[i], "q", i + 1));
    EXPECT_FALSE(service_.acquire_or_wait(tickets.back()).granted);
    EXPECT_TRUE(tickets.back()->queued);
  }
  EXPECT_EQ(service_.stats().waiters, 3u);
  EXPECT_EQ(info("q").waiters, 3u);
  // A plain try does not jump the queue.
  auto other = service_.create_session();
  EXPECT_FALSE(service_.try_acquire(other, "q").granted);

  ASSERT_TRUE(service_.release(holder, "q"));
  ASSERT_EQ(grants_.size(), 1u);
  EXPECT_EQ(grants_[0].ticket, 1);
  EXPECT_TRUE(holds(waiting[0], "q"));
  EXPECT_FALSE(tickets[0]->queued);
  EXPECT_EQ(service_.stats().waiters, 2u);
  EXPECT_EQ(info("q").waiters, 2u);
  EXPECT_EQ(info("q").token, grants_[0].token);
  EXPECT_FALSE(service_.try_acquire(other, "q").granted) << "granted at once, never free";
  // The new holder sees its grant's token when it asks again.
  EXPECT_EQ(service_.try_acquire(waiting[0], "q").token, grants_[0].token);

  ASSERT_TRUE(service_.release(waiting[0], "q"));
  ASSERT_TRUE(service_.release(waiting[1], "q"));
  ASSERT_TRUE(service_.release(waiting[2], "q"));

  ASSERT_EQ(grants_.size(), 3u);
  EXPECT_EQ(grants_[0].ticket, 1);
  EXPECT_EQ(grants_[1].ticket, 2);
  EXPECT_EQ(grants_[2].ticket, 3);
  EXPECT_GT(grants_[0].token, first_token);
  EXPECT_GT(grants_[1].token, grants_[0].token);
  EXPECT_GT(grants_[2].token, grants_[1].token);

  ServiceStats stats = service_.stats();
  EXPECT_EQ(stats.locks, 0u);
  EXPECT_EQ(stats.waiters, 0u);
  EXPECT_EQ(stats.grants, 4u);
  EXPECT_TRUE(service_.list("").empty());
}

TEST_F(LockServiceTest, CancelWaitBeforeGrantDropsTheTicket) {
  auto holder = service_.create_session();
  auto first = service_.create_session();
  auto second = service_.create_session();
  service_.try_acquire(holder, "c");
  auto first_ticket = ticket(first, "c", 1);
  auto second_ticket = ticket(second, "c", 2);
  ASSERT_FALSE(service_.acquire_or_wait(first_ticket).granted);
  ASSERT_FALSE(service_.acquire_or_wait(second_ticket).granted);

  EXPECT_TRUE(service_.cancel_wait(*first_ticket, true));
  EXPECT_FALSE(first_ticket->queued);
  EXPECT_FALSE(service_.cancel_wait(*first_ticket, true)) << "cancelled twice";
  ServiceStats stats = service_.stats();
  EXPECT_EQ(stats.waiters, 1u);
  EXPECT_EQ(stats.timeouts, 1u);

  // A cancel that is not a timeout (a disconnect) is not counted as one.
  auto third = service_.create_session();
  auto third_ticket = ticket(third, "c", 3);
  ASSERT_FALSE(service_.acquire_or_wait(third_ticket).granted);
  EXPECT_TRUE(service_.cancel_wait(*third_ticket, false));
  EXPECT_EQ(service_.stats().timeouts, 1u);

  ASSERT_TRUE(service_.release(holder, "c"));
  ASSERT_EQ(grants_.size(), 1u);
  EXPECT_EQ(grants_[0].ticket, 2) << "the cancelled tickets are skipped";
  EXPECT_TRUE(holds(second, "c"));
  ASSERT_TRUE(service_.release(second, "c"));
  EXPECT_EQ(grants_.size(), 1u);
  EXPECT_EQ(service_.stats().locks, 0u);
  EXPECT_FALSE(holds(first, "c"));
  EXPECT_FALSE(holds(third, "c"));
}

TEST_F(LockServiceTest, CancelWaitAfterGrantReturnsFalse) {
  auto holder = service_.create_session();
  auto waiter = service_.create_session();
  service_.try_acquire(holder, "g");
  auto wait = ticket(waiter, "g", 1);
  ASSERT_FALSE(service_.acquire_or_wait(wait).granted);
  ASSERT_TRUE(service_.release(holder, "g"));
  ASSERT_EQ(grants_.size(), 1u);

  // The timer fired after the grant was decided: the grant stands.
  EXPECT_FALSE(service_.cancel_wait(*wait, true));
  EXPECT_TRUE(holds(waiter, "g"));
  ServiceStats stats = service_.stats();
  EXPECT_EQ(stats.timeouts, 0u);
  EXPECT_EQ(stats.waiters, 0u);
  EXPECT_EQ(stats.locks, 1u);
}

TEST_F(LockServiceTest, ReleaseAllPassesEachLockToItsWaiter) {
  auto holder = service_.create_session();
  auto first = service_.create_session();
  auto second = service_.create_session();
  for (const char* name : {"a", "b", "c"})
    ASSERT_TRUE(service_.try_acquire(holder, name).granted);
  auto wait_a = ticket(first, "a", 1);
  auto wait_b = ticket(second, "b", 2);
  ASSERT_FALSE(service_.acquire_or_wait(wait_a).granted);
  ASSERT_FALSE(service_.acquire_or_wait(wait_b).granted);

  service_.release_all(holder);

  ASSERT_EQ(grants_.size(), 2u);
  std::vector<int> granted = {grants_[0].ticket, grants_[1].ticket};
  std::sort(granted.begin(), granted.end());
  EXPECT_EQ(granted, (std::vector<int>{1, 2}));
  EXPECT_TRUE(holds(first, "a"));
  EXPECT_TRUE(holds(second, "b"));
  EXPECT_TRUE(info("c").name.empty()) << "c had no waiter and is free";
  {
    std::lock_guard lock(holder->mutex);
    EXPECT_TRUE(holder->held.empty());
  }
  ServiceStats stats = service_.stats();
  EXPECT_EQ(stats.locks, 2u);
  EXPECT_EQ(stats.waiters, 0u);

  // Releasing everything when nothing is held is harmless.
  service_.release_all(holder);
  EXPECT_EQ(service_.stats().locks, 2u);
}

// Each name passed on takes the next token, so a session's names go in
// name order: a cluster's members must give the same tokens, and one
// restored from a snapshot holds its names in another order than one that
// replayed the log (whose set holds them in acquisition order here).
TEST_F(LockServiceTest, ReleaseAllHandsANamesLocksOnInNameOrder) {
  auto holder = service_.create_session();
  std::vector<std::string> names;
  for (int i = 15; i >= 0; --i)
    names.push_back("n" + std::string(i < 10 ? "0" : "") + std::to_string(i));
  std::vector<std::shared_ptr<WaitTicket>> waits;
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_TRUE(service_.try_acquire(holder, names[i]).granted);
    waits.push_back(ticket(service_.create_session(), names[i], static_cast<int>(i)));
    ASSERT_FALSE(service_.acquire_or_wait(waits.back()).granted);
  }
  service_.release_all(holder);
  ASSERT_EQ(grants_.size(), names.size());
  for (size_t i = 1; i < grants_.size(); ++i) {
    EXPECT_LT(names[grants_[i - 1].ticket], names[grants_[i].ticket]);
    EXPECT_EQ(grants_[i].token, grants_[i - 1].token + 1);
  }
}

// kCancelWait from a connection that ended while it waited names the
// wait's lock. Granted to that very wait already, the lock goes back: the
// client never heard. Not a lock the holder asked for again since (it
// knows that one), nor on a wait's timeout, nor one of another connection.
TEST_F(LockServiceTest, AWaitsGrantItsClientNeverHeardOfGoesBackWithItsConnectionsCancel) {
  auto session = service_.create_session();
  auto next = service_.create_session();
  auto change = [&](ChangeKind kind, const std::string& name, uint64_t attachment) {
    Change made;
    made.kind = kind;
    made.session = session;
    made.name = name;
    made.wait_ms = kind == ChangeKind::kAcquire ? 1000 : 0;
    made.detachment = attachment;
    return made;
  };
  const uint64_t attachment = 1;  // the session's first connection
  ASSERT_EQ(service_.apply(change(ChangeKind::kAcquire, "x", attachment)).status,
            OutcomeStatus::kDone);
  auto behind = ticket(next, "x", 1);
  ASSERT_FALSE(service_.acquire_or_wait(behind).granted);

  Change timed_out = change(ChangeKind::kCancelWait, "x", attachment);
  timed_out.timed_out = true;
  EXPECT_EQ(service_.apply(timed_out).status, OutcomeStatus::kRefused);
  EXPECT_TRUE(holds(session, "x"));

  EXPECT_EQ(service_.apply(change(ChangeKind::kCancelWait, "x", attachment + 1)).status,
            OutcomeStatus::kRefused);  // not this connection's
  EXPECT_TRUE(holds(session, "x"));

  EXPECT_EQ(service_.apply(change(ChangeKind::kCancelWait, "x", attachment)).status,
            OutcomeStatus::kDone);
  EXPECT_TRUE(holds(next, "x"));  // given back, and on to the next waiter
  ASSERT_EQ(grants_.size(), 1u);

  // Asked for again by its holder (the client knows it holds it): kept.
  ASSERT_EQ(service_.apply(change(ChangeKind::kAcquire, "y", attachment)).status,
            OutcomeStatus::kDone);
  ASSERT_EQ(service_.apply(change(ChangeKind::kAcquire, "y", attachment)).status,
            OutcomeStatus::kDone);
  EXPECT_EQ(service_.apply(change(ChangeKind::kCancelWait, "y", attachment)).status,
            OutcomeStatus::kRefused);
  EXPECT_TRUE(holds(session, "y"));
}

TEST_F(LockServiceTest, DetachWithZeroGraceReleasesAtOnce) {
  auto holder = service_.create_session();
  auto waiter = service_.create_session();
  {
    std::lock_guard lock(holder->mutex);
    holder->grace_ms = 0;
  }
  service_.try_acquire(holder, "d");
  service_.try_acquire(holder, "e");
  auto wait = ticket(waiter, "d", 1);
  ASSERT_FALSE(service_.acquire_or_wait(wait).granted);
  EXPECT_EQ(service_.stats().sessions, 2u);

  uint64_t detachment = 0;
  EXPECT_EQ(service_.detach(holder, &detachment), 0);

  ASSERT_EQ(grants_.size(), 1u);
  EXPECT_TRUE(holds(waiter, "d"));
  EXPECT_TRUE(info("e").name.empty());
  ServiceStats stats = service_.stats();
  EXPECT_EQ(stats.locks, 1u);
  EXPECT_EQ(stats.sessions, 1u) << "a session without grace is gone";
  EXPECT_EQ(stats.sessions_in_grace, 0u);
  EXPECT_EQ(service_.resume_session(holder->id), nullptr);
}

TEST_F(LockServiceTest, DetachWithGraceKeepsLocksUntilExpire) {
  auto holder = service_.create_session();
  auto waiter = service_.create_session();
  {
    std::lock_guard lock(holder->mutex);
    holder->grace_ms = 500;
  }
  uint64_t token = service_.try_acquire(holder, "d").token;

  uint64_t detachment = 0;
  EXPECT_EQ(service_.detach(holder, &detachment), 500);
  EXPECT_TRUE(holds(holder, "d"));
  EXPECT_FALSE(service_.try_acquire(waiter, "d").granted);
  ServiceStats stats = service_.stats();
  EXPECT_EQ(stats.sessions, 2u);
  EXPECT_EQ(stats.sessions_in_grace, 1u);
  EXPECT_EQ(stats.locks, 1u);

  auto wait = ticket(waiter, "d", 1);
  ASSERT_FALSE(service_.acquire_or_wait(wait).granted);
  EXPECT_TRUE(grants_.empty());

  service_.expire(holder, detachment);
  ASSERT_EQ(grants_.size(), 1u);
  EXPECT_GT(grants_[0].token, token);
  EXPECT_TRUE(holds(waiter, "d"));
  stats = service_.stats();
  EXPECT_EQ(stats.sessions, 1u);
  EXPECT_EQ(stats.sessions_in_grace, 0u);
  EXPECT_EQ(service_.resume_session(holder->id), nullptr) << "expired sessions are gone";
}

TEST_F(LockServiceTest, ResumeSessionRefusesAttachedAndUnknown) {
  auto alice = service_.create_session();
  auto bob = service_.create_session();
  EXPECT_NE(alice->id, bob->id);
  EXPECT_FALSE(alice->id.empty());

  EXPECT_EQ(service_.resume_session(alice->id), nullptr) << "alice is attached";
  EXPECT_EQ(service_.resume_session("no-such-session"), nullptr);
  EXPECT_EQ(service_.resume_session(""), nullptr);
  EXPECT_TRUE(alice->attached);
  EXPECT_EQ(service_.stats().sessions_in_grace, 0u);
}

// Ids are "<serial>-<secret>" (session_id.h): distinct, with a 128-bit
// secret, and what list() shows of them is the serial alone.
TEST_F(LockServiceTest, IdsAreUniqueAndListedByTheirSerialOnly) {
  std::unordered_set<std::string> ids, serials;
  for (int i = 0; i < 10000; ++i) {
    std::shared_ptr<Session> session = service_.create_session();
    std::optional<SessionIdParts> parts = split_session_id(session->id);
    ASSERT_TRUE(parts) << session->id;
    EXPECT_EQ(parts->secret.size() / 2, kSessionSecretBytes);
    EXPECT_EQ(session->public_id(), parts->serial);
    ids.insert(session->id);
    serials.emplace(parts->serial);
  }
  EXPECT_EQ(ids.size(), 10000u);
  EXPECT_EQ(serials.size(), 10000u) << "the serial alone finds a session";

  auto holder = service_.create_session();
  service_.try_acquire(holder, "l");
  EXPECT_EQ(info("l").session, session_serial(10001));
  EXPECT_EQ(info("l").session + "-" + std::string(split_session_id(holder->id)->secret),
            holder->id);
}

// Anything but the whole id fails as an unknown id does, and leaves the
// session to its owner: the right serial with another secret (one digit
// off, or another session's), too short or long, or no id at all.
TEST_F(LockServiceTest, ResumeNeedsTheWholeSecret) {
  auto holder = service_.create_session();
  auto other = service_.create_session();
  service_.try_acquire(holder, "h");
  uint64_t detachment;
  ASSERT_GT(service_.detach(holder, &detachment), 0);
  const std::string& id = holder->id;
  std::string last_changed = id;
  last_changed.back() = last_changed.back() == 'f' ? 'e' : 'f';
  std::string first_changed = id;
  char& first = first_changed[id.find('-') + 1];
  first = first == '0' ? '1' : '0';
  std::string others_secret =
      std::string(holder->public_id()) + "-" + std::string(split_session_id(other->id)->secret);

  for (const std::string& guess :
       {last_changed, first_changed, others_secret, id.substr(0, id.size() - 1), id + "0",
        std::string(holder->public_id()), std::string(holder->public_id()) + "-", id + " ",
        std::string(), std::string("-"), std::string("garbage"), std::string(id.size(), 'x')}) {
    EXPECT_EQ(service_.resume_session(guess), nullptr) << '"' << guess << '"';
  }
  EXPECT_FALSE(holder->attached);
  EXPECT_EQ(service_.stats().sessions_in_grace, 1u);
  EXPECT_EQ(service_.resume_session(id), holder);
  EXPECT_TRUE(holds(holder, "h"));
}

TEST_F(LockServiceTest, ResumedSessionKeepsLocksAndIgnoresStaleExpire) {
  auto holder = service_.create_session();
  auto waiter = service_.create_session();
  {
    std::lock_guard lock(holder->mutex);
    holder->grace_ms = 1000;
  }
  uint64_t token = service_.try_acquire(holder, "r").token;
  auto wait = ticket(waiter, "r", 1);
  ASSERT_FALSE(service_.acquire_or_wait(wait).granted);

  uint64_t old_detachment = 0;
  ASSERT_EQ(service_.detach(holder, &old_detachment), 1000);
  EXPECT_EQ(service_.stats().sessions_in_grace, 1u);

  std::shared_ptr<Session> resumed = service_.resume_session(holder->id);
  ASSERT_EQ(resumed, holder);
  EXPECT_TRUE(resumed->attached);
  EXPECT_EQ(service_.stats().sessions_in_grace, 0u);
  EXPECT_EQ(service_.resume_session(holder->id), nullptr) << "attached again";

  // The first disconnect's grace timer fires late: nothing happens.
  service_.expire(holder, old_detachment);
  EXPECT_TRUE(holds(holder, "r"));
  EXPECT_TRUE(grants_.empty());
  EXPECT_EQ(service_.try_acquire(holder, "r").token, token);
  ServiceStats stats = service_.stats();
  EXPECT_EQ(stats.sessions, 2u);
  EXPECT_EQ(stats.sessions_in_grace, 0u);
  EXPECT_EQ(stats.waiters, 1u);

  // A second disconnect, and its own timer, do release.
  uint64_t new_detachment = 0;
  ASSERT_EQ(service_.detach(holder, &new_detachment), 1000);
  EXPECT_NE(new_detachment, old_detachment);
  service_.expire(holder, old_detachment);
  EXPECT_TRUE(holds(holder, "r")) << "still the stale detachment";
  service_.expire(holder, new_detachment);
  ASSERT_EQ(grants_.size(), 1u);
  EXPECT_TRUE(holds(waiter, "r"));
  EXPECT_EQ(service_.stats().sessions_in_grace, 0u);
}

// A connection that is gone may still speak for its session: its detach,
// its wait's end, the grant it cannot take (a cluster decides after the
// connection closed). By then the client may have resumed the session on
// another connection, whose attachment they must leave alone. Seen in a
// fault run: a stale detach, then its grace, took a lock the resumed
// client had just been granted.
TEST_F(LockServiceTest, ChangesFromAGoneConnectionLeaveAResumedSessionAlone) {
  Change open;
  open.kind = ChangeKind::kOpen;
  Outcome opened = service_.apply(open);
  std::shared_ptr<Session> session = opened.session;
  ASSERT_NE(session, nullptr);
  uint64_t first = opened.attachment;
  EXPECT_GT(first, 0u);
  Change grace;
  grace.kind = ChangeKind::kSetGrace;
  grace.session = session;
  grace.grace_ms = 1000;
  service_.apply(grace);

  Change detach;
  detach.kind = ChangeKind::kDetach;
  detach.session = session;
  detach.detachment = first;
  EXPECT_EQ(service_.apply(detach).grace_ms, 1000);

  // Resumed on a new connection (whose own session it replaces).
  Change resume;
  resume.kind = ChangeKind::kResume;
  resume.session = service_.create_session();
  resume.id = session->id;
  Outcome resumed = service_.apply(resume);
  ASSERT_EQ(resumed.session, session);
  uint64_t second = resumed.attachment;
  EXPECT_NE(second, first);
  Change acquire;
  acquire.kind = ChangeKind::kAcquire;
  acquire.session = session;
  acquire.name = "x";
  uint64_t token = service_.apply(acquire).token;
  ASSERT_GT(token, 0u);

  // The first connection's words come late: refused, all of them.
  for (ChangeKind kind : {ChangeKind::kDetach, ChangeKind::kCancelWait, ChangeKind::kRelease}) {
    Change stale;
    stale.kind = kind;
    stale.session = session;
    stale.name = "x";
    stale.detachment = first;
    EXPECT_EQ(service_.apply(stale).status, OutcomeStatus::kRefused) << static_cast<int>(kind);
  }
  EXPECT_TRUE(session->attached);
  EXPECT_TRUE(holds(session, "x"));
  EXPECT_EQ(service_.stats().sessions_in_grace, 0u);

  // The second connection's own detach still works.
  detach.detachment = second;
  EXPECT_EQ(service_.apply(detach).grace_ms, 1000);
  EXPECT_FALSE(session->attached);
  EXPECT_TRUE(holds(session, "x"));
}

TEST_F(LockServiceTest, DiscardSessionForgetsIt) {
  auto alice = service_.create_session();
  auto bob = service_.create_session();
  EXPECT_EQ(service_.stats().sessions, 2u);
  service_.discard_session(alice);
  EXPECT_EQ(service_.stats().sessions, 1u);
  uint64_t detachment = 0;
  service_.detach(bob, &detachment);
  EXPECT_NE(service_.resume_session(bob->id), nullptr);
  EXPECT_EQ(service_.resume_session(alice->id), nullptr);
}

TEST_F(LockServiceTest, TokensStrictlyIncreasePerName) {
  auto alice = service_.create_session();
  auto bob = service_.create_session();
  uint64_t last_x = 0;
  uint64_t last_y = 0;
  for (int i = 0; i < 200; ++i) {
    auto& who = i % 2 == 0 ? alice : bob;
    LockService::Acquired x = service_.try_acquire(who, "x");
    ASSERT_TRUE(x.granted);
    EXPECT_GT(x.token, last_x) << "grant " << i << " of x";
    last_x = x.token;
    LockService::Acquired y = service_.try_acquire(who, "y");
    ASSERT_TRUE(y.granted);
    EXPECT_GT(y.token, last_y) << "grant " << i << " of y";
    last_y = y.token;
    ASSERT_TRUE(service_.release(who, "x"));
    ASSERT_TRUE(service_.release(who, "y"));
  }
  // Grants to waiters too.
  service_.try_acquire(alice, "x");
  auto wait = ticket(bob, "x", 1);
  ASSERT_FALSE(service_.acquire_or_wait(wait).granted);
  service_.release(alice, "x");
  ASSERT_EQ(grants_.size(), 1u);
  EXPECT_GT(grants_[0].token, last_x);
  EXPECT_EQ(service_.stats().grants, 402u);
}

TEST_F(LockServiceTest, StatsCountLocksWaitersSessionsAndTimeouts) {
  ServiceStats empty = service_.stats();
  EXPECT_EQ(empty.locks, 0u);
  EXPECT_EQ(empty.waiters, 0u);
  EXPECT_EQ(empty.sessions, 0u);
  EXPECT_EQ(empty.sessions_in_grace, 0u);
  EXPECT_EQ(empty.grants, 0u);
  EXPECT_EQ(empty.timeouts, 0u);

  auto a = service_.create_session();
  auto b = service_.create_session();
  auto c = service_.create_session();
  service_.try_acquire(a, "one");
  service_.try_acquire(a, "two");
  service_.try_acquire(b, "three");
  auto wait_b = ticket(b, "one", 1);
  auto wait_c = ticket(c, "one", 2);
  service_.acquire_or_wait(wait_b);
  service_.acquire_or_wait(wait_c);
  service_.cancel_wait(*wait_c, true);
  {
    std::lock_guard lock(c->mutex);
    c->grace_ms = 100;
  }
  uint64_t detachment = 0;
  service_.detach(c, &detachment);

  ServiceStats stats = service_.stats();
  EXPECT_EQ(stats.locks, 3u);
  EXPECT_EQ(stats.waiters, 1u);
  EXPECT_EQ(stats.sessions, 3u);
  EXPECT_EQ(stats.sessions_in_grace, 1u);
  EXPECT_EQ(stats.grants, 3u);
  EXPECT_EQ(stats.timeouts, 1u);

  service_.release_all(a);  // "one" goes to b
  stats = service_.stats();
  EXPECT_EQ(stats.locks, 2u);
  EXPECT_EQ(stats.waiters, 0u);
  EXPECT_EQ(stats.grants, 4u);
}

TEST_F(LockServiceTest, ListReportsHeldLocksByPrefix) {
  auto a = service_.create_session();
  auto b = service_.create_session();
  uint64_t t1 = service_.try_acquire(a, "app/one").token;
  uint64_t t2 = service_.try_acquire(b, "app/two").token;
  uint64_t t3 = service_.try_acquire(a, "other").token;
  auto wait = ticket(b, "app/one", 1);
  service_.acquire_or_wait(wait);

  std::vector<LockInfo> all = service_.list("");
  EXPECT_EQ(all.size(), 3u);

  std::vector<LockInfo> app = service_.list("app/");
  std::sort(app.begin(), app.end(),
            [](const LockInfo& x, const LockInfo& y) { return x.name < y.name; });
  ASSERT_EQ(app.size(), 2u);
  EXPECT_EQ(app[0].name, "app/one");
  EXPECT_EQ(app[0].session, a->public_id());
  EXPECT_EQ(app[0].waiters, 1u);
  EXPECT_EQ(app[0].token, t1);
  EXPECT_GE(app[0].held_ms, 0);
  EXPECT_LT(app[0].held_ms, 60000);
  EXPECT_EQ(app[1].name, "app/two");
  EXPECT_EQ(app[1].session, b->public_id());
  EXPECT_EQ(app[1].waiters, 0u);
  EXPECT_EQ(app[1].token, t2);

  std::vector<LockInfo> other = service_.list("other");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].token, t3);
  EXPECT_TRUE(service_.list("app/three").empty());
  EXPECT_TRUE(service_.list("zzz").empty());
  EXPECT_TRUE(service_.list("other-and-more").empty()) << "a prefix longer than the name";
}

// `stats locks` names the holder's connection; `stats conns` counts a
// connection's locks. Both follow the session across a detach and a resume.
TEST_F(LockServiceTest, ListAndCountsFollowTheSessionsConnection) {
  auto a = service_.create_session(client_at(7, "127.0.0.1:4000"));
  auto b = service_.create_session(client_at(8, "[::1]:5000"));
  auto anonymous = service_.create_session();
  service_.try_acquire(a, "x");
  service_.try_acquire(a, "y");
  service_.try_acquire(b, "z");
  service_.try_acquire(anonymous, "w");

  LockInfo x = info("x");
  EXPECT_TRUE(x.attached);
  EXPECT_EQ(x.client.id, 7u);
  EXPECT_EQ(net::address_text(x.client.address), "127.0.0.1:4000");
  EXPECT_EQ(net::address_text(info("z").client.address), "[::1]:5000");
  EXPECT_TRUE(info("w").attached);
  EXPECT_EQ(info("w").client.id, 0u);

  std::unordered_map<uint64_t, size_t> counts = service_.locks_by_connection();
  EXPECT_EQ(counts.size(), 2u) << "a session without a connection id is left out";
  EXPECT_EQ(counts[7], 2u);
  EXPECT_EQ(counts[8], 1u);

  uint64_t detachment;
  ASSERT_GT(service_.detach(a, &detachment), 0);
  x = info("x");
  EXPECT_EQ(x.session, a->public_id()) << "still held, in the grace period";
  EXPECT_FALSE(x.attached);
  EXPECT_FALSE(x.client.address.known());
  EXPECT_EQ(service_.locks_by_connection().count(7), 0u);

  ASSERT_EQ(service_.resume_session(a->id, client_at(9, "127.0.0.1:4001")), a);
  x = info("x");
  EXPECT_TRUE(x.attached);
  EXPECT_EQ(x.client.id, 9u);
  EXPECT_EQ(net::address_text(x.client.address), "127.0.0.1:4001");
  EXPECT_EQ(service_.locks_by_connection()[9], 2u);
}

// --- limits ---------------------------------------------------------------------

TEST(LockServiceLimitsTest, DefaultsBoundSessionsAndNames) {
  LockLimits defaults;
  EXPECT_EQ(defaults.max_locks_per_session, 10000u);
  EXPECT_EQ(defaults.max_names, 1000000u);
  EXPECT_EQ(defaults.max_empty_sessions_in_grace, 10000u);
}

// A client that connects and quits over and over leaves empty sessions in
// their grace period; past the bound they end with their connection, while
// a session that holds a lock keeps its grace.
TEST(LockServiceLimitsTest, EmptySessionsInGraceAreBounded) {
  LockService service({0, 0, 2});
  uint64_t detachment = 0;
  std::vector<std::shared_ptr<Session>> empty;
  for (int i = 0; i < 3; ++i)
    empty.push_back(service.create_session());
  EXPECT_GT(service.detach(empty[0], &detachment), 0);
  EXPECT_GT(service.detach(empty[1], &detachment), 0);
  EXPECT_EQ(service.detach(empty[2], &detachment), 0) << "the third empty one is not kept";
  EXPECT_EQ(service.resume_session(empty[2]->id), nullptr);
  EXPECT_EQ(service.stats().sessions_in_grace, 2u);

  auto holder = service.create_session();
  ASSERT_TRUE(service.try_acquire(holder, "kept").granted);
  EXPECT_GT(service.detach(holder, &detachment), 0) << "a session with locks keeps its grace";
  EXPECT_EQ(service.stats().sessions_in_grace, 3u);

  // Resuming an empty one makes room for another.
  ASSERT_EQ(service.resume_session(empty[0]->id), empty[0]);
  auto another = service.create_session();
  EXPECT_GT(service.detach(another, &detachment), 0);
}

// Counts the grants delivered to `wait` in `grants`.
void count_grant(std::shared_ptr<WaitTicket>& wait, int& grants) {
  wait->on_grant = [&grants](uint64_t) { ++grants; };
}

TEST(LockServiceLimitsTest, SessionLimitCountsHeldAndWaitedForLocks) {
  LockService service({3, 0});
  auto alice = service.create_session();
  auto bob = service.create_session();
  ASSERT_TRUE(service.try_acquire(alice, "a").granted);
  uint64_t b_token = service.try_acquire(alice, "b").token;
  ASSERT_TRUE(service.try_acquire(bob, "c").granted);
  int grants = 0;
  auto wait = std::make_shared<WaitTicket>();
  wait->session = alice;
  wait->name = "c";
  count_grant(wait, grants);
  LockService::Acquired queued = service.acquire_or_wait(wait);
  ASSERT_FALSE(queued.granted);
  EXPECT_EQ(queued.limit, Limit::kNone);
  ASSERT_TRUE(wait->queued) << "two held and one wait: three";

  LockService::Acquired refused = service.try_acquire(alice, "d");
  EXPECT_FALSE(refused.granted);
  EXPECT_EQ(refused.limit, Limit::kSession);
  auto second_wait = std::make_shared<WaitTicket>();
  second_wait->session = alice;
  second_wait->name = "c";
  count_grant(second_wait, grants);
  EXPECT_EQ(service.acquire_or_wait(second_wait).limit, Limit::kSession);
  EXPECT_FALSE(second_wait->queued);
  // What the session holds already is no new lock.
  LockService::Acquired again = service.try_acquire(alice, "b");
  EXPECT_TRUE(again.granted);
  EXPECT_EQ(again.token, b_token);
  // Others are not limited by alice's count; a taken lock is still a plain 409.
  EXPECT_TRUE(service.try_acquire(bob, "d").granted);
  EXPECT_EQ(service.try_acquire(alice, "d").limit, Limit::kNone);
  EXPECT_EQ(service.stats().limit_refusals, 2u);
  EXPECT_EQ(service.stats().locks, 4u) << "a refused lock is not created";

  // The wait turns into a held lock: still three.
  ASSERT_TRUE(service.release(bob, "c"));
  EXPECT_EQ(grants, 1);
  EXPECT_EQ(service.try_acquire(alice, "e").limit, Limit::kSession);
  // Releasing one makes room for one.
  ASSERT_TRUE(service.release(alice, "a"));
  EXPECT_TRUE(service.try_acquire(alice, "e").granted);
  EXPECT_EQ(service.try_acquire(alice, "f").limit, Limit::kSession);
}

TEST(LockServiceLimitsTest, CancelledWaitFreesItsPlace) {
  LockService service({2, 0});
  auto alice = service.create_session();
  auto bob = service.create_session();
  ASSERT_TRUE(service.try_acquire(bob, "x").granted);
  ASSERT_TRUE(service.try_acquire(alice, "a").granted);
  int grants = 0;
  auto wait = std::make_shared<WaitTicket>();
  wait->session = alice;
  wait->name = "x";
  count_grant(wait, grants);
  ASSERT_FALSE(service.acquire_or_wait(wait).granted);
  ASSERT_TRUE(wait->queued);
  EXPECT_EQ(service.try_acquire(alice, "b").limit, Limit::kSession);
  ASSERT_TRUE(service.cancel_wait(*wait, true));
  EXPECT_TRUE(service.try_acquire(alice, "b").granted) << "the timed-out wait still counted";
  ASSERT_TRUE(service.release(bob, "x"));
  EXPECT_EQ(grants, 0);
}

TEST(LockServiceLimitsTest, NamesLimitIsServiceWide) {
  LockService service({0, 2});
  auto alice = service.create_session();
  auto bob = service.create_session();
  auto carol = service.create_session();
  ASSERT_TRUE(service.try_acquire(alice, "a").granted);
  ASSERT_TRUE(service.try_acquire(bob, "b").granted);

  LockService::Acquired refused = service.try_acquire(carol, "c");
  EXPECT_FALSE(refused.granted);
  EXPECT_EQ(refused.limit, Limit::kNames);
  int grants = 0;
  auto new_name = std::make_shared<WaitTicket>();
  new_name->session = carol;
  new_name->name = "c";
  count_grant(new_name, grants);
  EXPECT_EQ(service.acquire_or_wait(new_name).limit, Limit::kNames);
  // Waiting for a name that exists creates none.
  auto existing = std::make_shared<WaitTicket>();
  existing->session = carol;
  existing->name = "a";
  count_grant(existing, grants);
  LockService::Acquired queued = service.acquire_or_wait(existing);
  EXPECT_EQ(queued.limit, Limit::kNone);
  EXPECT_TRUE(existing->queued);
  // Passing a lock on keeps the count.
  ASSERT_TRUE(service.release(alice, "a"));
  EXPECT_EQ(grants, 1);
  EXPECT_EQ(service.try_acquire(alice, "c").limit, Limit::kNames);
  // A name that goes makes room.
  ASSERT_TRUE(service.release(bob, "b"));
  EXPECT_TRUE(service.try_acquire(alice, "c").granted);
  EXPECT_EQ(service.try_acquire(bob, "d").limit, Limit::kNames);
  service.release_all(alice);
  service.release_all(carol);
  EXPECT_TRUE(service.try_acquire(bob, "d").granted);
  EXPECT_TRUE(service.try_acquire(bob, "e").granted);
  EXPECT_EQ(service.stats().limit_refusals, 4u);
}

TEST(LockServiceLimitsTest, ZeroMeansNoLimit) {
  LockService service({0, 0});
  auto alice = service.create_session();
  for (int i = 0; i < 20000; ++i)
    ASSERT_TRUE(service.try_acquire(alice, "n" + std::to_string(i)).granted) << i;
  EXPECT_EQ(service.stats().locks, 20000u);
  EXPECT_EQ(service.stats().limit_refusals, 0u);
}

// Threads create distinct names at once on every shard: exactly max_names
// are granted, however the creations interleave.
TEST(LockServiceConcurrencyTest, NamesLimitHoldsUnderRaces) {
  constexpr int kThreads = 8;
  constexpr int kNamesEach = 200;
  constexpr size_t kMaxNames = 500;
  LockService service({0, kMaxNames});
  std::atomic<size_t> granted{0};
  std::atomic<size_t> refused{0};
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto session = service.create_session();
      start.arrive_and_wait();
      for (int i = 0; i < kNamesEach; ++i) {
        LockService::Acquired acquired =
            service.try_acquire(session, std::to_string(t) + "/" + std::to_string(i));
        (acquired.granted ? granted : refused).fetch_add(1);
        if (!acquired.granted && acquired.limit != Limit::kNames) ADD_FAILURE() << "not the limit";
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  EXPECT_EQ(granted.load(), kMaxNames);
  EXPECT_EQ(refused.load(), kThreads * kNamesEach - kMaxNames);
  EXPECT_EQ(service.stats().locks, kMaxNames);
  EXPECT_EQ(service.list("").size(), kMaxNames);
}

// Threads race try_acquire/release on a few names; a per-name counter of
// threads inside the critical section must never exceed one.
TEST(LockServiceConcurrencyTest, TryAcquireIsMutuallyExclusive) {
  constexpr int kThreads = 8;
  constexpr int kIterations = 2000;
  constexpr int kNames = 4;
  const std::array<std::string, kNames> names = {"n0", "n1", "n2", "n3"};

  LockService service;
  std::array<std::atomic<int>, kNames> inside{};
  std::array<uint64_t, kNames> last_token{};  // guarded by the lock itself
  std::atomic<int> overlaps{0};
  std::atomic<int> bad_tokens{0};
  std::atomic<int> failed_releases{0};
  std::atomic<uint64_t> grants{0};
  std::latch start(kThreads);

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto session = service.create_session();
      start.arrive_and_wait();
      for (int i = 0; i < kIterations; ++i) {
        int n = (i + t) % kNames;
        LockService::Acquired acquired;
        while (!(acquired = service.try_acquire(session, names[n])).granted)
          std::this_thread::yield();
        grants.fetch_add(1);
        if (inside[n].fetch_add(1) != 0) overlaps.fetch_add(1);
        if (acquired.token <= last_token[n]) bad_tokens.fetch_add(1);
        last_token[n] = acquired.token;
        inside[n].fetch_sub(1);
        if (!service.release(session, names[n])) failed_releases.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads)
    thread.join();

  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(bad_tokens.load(), 0);
  EXPECT_EQ(failed_releases.load(), 0);
  EXPECT_EQ(grants.load(), uint64_t{kThreads} * kIterations);
  ServiceStats stats = service.stats();
  EXPECT_EQ(stats.grants, uint64_t{kThreads} * kIterations);
  EXPECT_EQ(stats.locks, 0u);
  EXPECT_EQ(stats.waiters, 0u);
  EXPECT_TRUE(service.list("").empty());
}

// Threads queue with acquire_or_wait on one name and wait for their grant:
// every wait is granted (no lost wake-up) and holders never overlap.
TEST(LockServiceConcurrencyTest, QueuedWaitsAreAllGranted) {
  constexpr int kThreads = 8;
  constexpr int kIterations = 500;

  LockService service;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> lost{0};
  std::atomic<int> queued{0};
  std::latch start(kThreads);

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto session = service.create_session();
      start.arrive_and_wait();
      for (int i = 0; i < kIterations; ++i) {
        auto granted = std::make_shared<std::promise<uint64_t>>();
        auto wait = std::make_shared<WaitTicket>();
        wait->session = session;
        wait->name = "hot";
        wait->on_grant = [granted](uint64_t token) { granted->set_value(token); };
        LockService::Acquired acquired = service.acquire_or_wait(wait);
        if (!acquired.granted) {
          queued.fetch_add(1);
          std::future<uint64_t> future = granted->get_future();
          if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
            lost.fetch_add(1);
            service.cancel_wait(*wait, true);
            return;
          }
        }
        if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        inside.fetch_sub(1);
        service.release(session, "hot");
      }
    });
  }
  for (auto& thread : threads)
    thread.join();

  EXPECT_EQ(lost.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  ServiceStats stats = service.stats();
  EXPECT_EQ(stats.grants, uint64_t{kThreads} * kIterations);
  EXPECT_EQ(stats.locks, 0u);
  EXPECT_EQ(stats.waiters, 0u);
  EXPECT_EQ(stats.timeouts, 0u);
  // Not an assertion of the service, but of the test: the waits did queue.
  RecordProperty("queued_waits", queued.load());
}

}  // namespace
}  // namespace lockcached::locks
