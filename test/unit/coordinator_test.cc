// locks::LocalCoordinator, a single server's: changes are made at once,
// and it owns the lock service's timers (a wait's timeout, a detached
// session's grace) on a scheduler the test drives, so no test here waits
// on the real clock. And LockService::apply's kTermStart, a cluster
// leader's first change.
#include "lockcached/locks/coordinator.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "manual_scheduler.h"
#include "spin_barrier.h"

namespace lockcached::locks {
namespace {

class LocalCoordinatorTest : public ::testing::Test {
 protected:
  std::shared_ptr<Session> open() {
    Change change;
    change.kind = ChangeKind::kOpen;
    Outcome outcome = coordinator_.submit(std::move(change), nullptr);
    EXPECT_NE(outcome.session, nullptr);
    return outcome.session;
  }
  Outcome acquire(const std::shared_ptr<Session>& session, const std::string& name,
                  int64_t wait_ms = 0, Answer answer = nullptr) {
    Change change;
    change.kind = ChangeKind::kAcquire;
    change.session = session;
    change.name = name;
    change.wait_ms = wait_ms;
    Outcome outcome = coordinator_.submit(std::move(change), std::move(answer));
    EXPECT_NE(outcome.status, OutcomeStatus::kLater);  // a single server answers at once
    return outcome;
  }
  Outcome change(ChangeKind kind, const std::shared_ptr<Session>& session, Answer answer = nullptr) {
    Change change;
    change.kind = kind;
    change.session = session;
    Outcome outcome = coordinator_.submit(std::move(change), std::move(answer));
    EXPECT_NE(outcome.status, OutcomeStatus::kLater);
    return outcome;
  }

  testing::ManualScheduler timers_;
  std::shared_ptr<LockService> service_ = std::make_shared<LockService>(LockLimits{}, 0, timers_);
  LocalCoordinator coordinator_{service_, timers_};
};

TEST_F(LocalCoordinatorTest, AWaitEndsWithItsTimeoutOnTheSchedulersClock) {
  auto holder = open();
  auto waiter = open();
  ASSERT_EQ(acquire(holder, "n").status, OutcomeStatus::kDone);
  std::vector<Outcome> ends;
  Outcome queued = acquire(waiter, "n", 500, [&](const Outcome& end) { ends.push_back(end); });
  EXPECT_EQ(queued.status, OutcomeStatus::kQueued);
  timers_.advance(499);
  EXPECT_TRUE(ends.empty());
  timers_.advance(1);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].status, OutcomeStatus::kBusy);
  EXPECT_EQ(service_->stats().timeouts, 1u);
  EXPECT_EQ(service_->stats().waiters, 0u);
}

TEST_F(LocalCoordinatorTest, AGrantEndsTheWaitAndItsTimerGoes) {
  auto holder = open();
  auto waiter = open();
  Outcome first = acquire(holder, "n");
  std::vector<Outcome> ends;
  acquire(waiter, "n", 60000, [&](const Outcome& end) { ends.push_back(end); });
  EXPECT_EQ(timers_.pending(), 1u);
  EXPECT_EQ(change(ChangeKind::kReleaseAll, holder).status, OutcomeStatus::kDone);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].status, OutcomeStatus::kDone);
  EXPECT_GT(ends[0].token, first.token);
  EXPECT_EQ(timers_.pending(), 0u);
  timers_.advance(60000);
  EXPECT_EQ(ends.size(), 1u);  // the timeout never comes
}

TEST_F(LocalCoordinatorTest, ADetachedSessionsLocksEndWithItsGraceUnlessResumed) {
  auto gone = open();
  ASSERT_EQ(acquire(gone, "a").status, OutcomeStatus::kDone);
  std::vector<Outcome> expired;
  Outcome detached = change(ChangeKind::kDetach, gone, [&](const Outcome& o) { expired.push_back(o); });
  EXPECT_EQ(detached.grace_ms, kDefaultGraceMs);
  timers_.advance(kDefaultGraceMs - 1);
  EXPECT_EQ(service_->list("").size(), 1u);
  EXPECT_TRUE(expired.empty());
  timers_.advance(1);
  EXPECT_TRUE(service_->list("").empty());
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].released, std::vector<std::string>{"a"});

  // Resumed in time: the grace timer finds nothing to end.
  auto kept = open();
  ASSERT_EQ(acquire(kept, "b").status, OutcomeStatus::kDone);
  std::string id = kept->id;
  change(ChangeKind::kDetach, kept, [&](const Outcome& o) { expired.push_back(o); });
  auto replacement = open();
  Change resume;
  resume.kind = ChangeKind::kResume;
  resume.session = replacement;
  resume.id = id;
  Outcome resumed = coordinator_.submit(std::move(resume), nullptr);
  EXPECT_EQ(resumed.status, OutcomeStatus::kDone);
  EXPECT_EQ(resumed.session, kept);
  timers_.advance(kDefaultGraceMs);
  EXPECT_EQ(service_->list("").size(), 1u);
  EXPECT_EQ(expired.size(), 1u);
}

// A scheduler whose timers the test runs by hand, on a thread of its own
// choosing: a timer that is already running when the grant tries to cancel
// it, as a reactor thread's timer may be.
class HandScheduler final : public timing::Scheduler {
 public:
  int64_t now_ms() const override { return 0; }
  TimerId after(int64_t, Task task) override {
    std::lock_guard lock(mutex_);
    timers_.emplace(next_id_, std::move(task));
    return next_id_++;
  }
  void cancel(TimerId id) override {
    std::lock_guard lock(mutex_);
    timers_.erase(id);
  }
  // The oldest timer not yet run or cancelled, taken out (so the grant's
  // cancel cannot stop it any more).
  Task take_oldest() {
    std::lock_guard lock(mutex_);
    Task task = std::move(timers_.begin()->second);
    timers_.erase(timers_.begin());
    return task;
  }
  bool empty() {
    std::lock_guard lock(mutex_);
    return timers_.empty();
  }
  void clear() {
    std::map<TimerId, Task> dropped;  // destroyed after the lock is let go
    std::lock_guard lock(mutex_);
    dropped.swap(timers_);
  }

 private:
  std::mutex mutex_;
  TimerId next_id_ = 1;
  std::map<TimerId, Task> timers_;
};

using lockcached::testing::spin_barrier;

// Runs `task` on a thread of its own, released together with the caller's:
// what the caller does next races it. `ready` outlives the thread.
std::thread race(timing::Scheduler::Task task, std::atomic<int>& ready) {
  std::thread racer([task = std::move(task), &ready] {
    spin_barrier(ready);
    task();
  });
  spin_barrier(ready);
  return racer;
}

// A wait's timer that runs while the wait is granted must not end the
// session's next wait, which the client starts as soon as it hears of the
// grant. Run as a race, many times: the timer on a thread of its own, the
// release that grants the wait on this one, and the grant's answer starting
// the next wait at once.
TEST(LocalCoordinatorRace, ALateTimeoutNeverEndsTheWaitAfterTheGrant) {
  HandScheduler timers;
  auto service = std::make_shared<LockService>(LockLimits{}, 0, timers);
  LocalCoordinator coordinator(service, timers);
  auto submit = [&](ChangeKind kind, const std::shared_ptr<Session>& session,
                    const std::string& name = "", int64_t wait_ms = 0, Answer answer = nullptr) {
    Change change;
    change.kind = kind;
    change.session = session;
    change.name = name;
    change.wait_ms = wait_ms;
    return coordinator.submit(std::move(change), std::move(answer));
  };
  int granted_first = 0;
  for (int round = 0; round < 2000; ++round) {
    auto holder = submit(ChangeKind::kOpen, nullptr).session;
    auto waiter = submit(ChangeKind::kOpen, nullptr).session;
    ASSERT_EQ(submit(ChangeKind::kAcquire, holder, "n").status, OutcomeStatus::kDone);
    ASSERT_EQ(submit(ChangeKind::kAcquire, holder, "m").status, OutcomeStatus::kDone);
    std::atomic<int> first{0};  // 1: granted, 2: timed out
    std::atomic<int> first_answers{0};
    std::atomic<bool> next_ended{false};
    Answer on_next = [&](const Outcome&) { next_ended = true; };
    Outcome queued = submit(ChangeKind::kAcquire, waiter, "n", 60000, [&](const Outcome& end) {
      first_answers.fetch_add(1);
      if (end.status != OutcomeStatus::kDone) {
        first = 2;
        return;
      }
      first = 1;
      submit(ChangeKind::kAcquire, waiter, "m", 60000, on_next);
    });
    ASSERT_EQ(queued.status, OutcomeStatus::kQueued);
    std::atomic<int> ready{0};
    std::thread timer_thread = race(timers.take_oldest(), ready);
    Change release;
    release.kind = ChangeKind::kRelease;
    release.session = holder;
    release.name = "n";
    coordinator.submit(std::move(release), nullptr);
    timer_thread.join();
    ASSERT_EQ(first_answers.load(), 1) << "round " << round;
    if (first.load() == 1) {
      ++granted_first;
      EXPECT_FALSE(next_ended.load()) << "round " << round << ": the next wait was answered";
      ASSERT_EQ(service->stats().waiters, 1u) << "round " << round << ": the next wait was ended";
    }
    submit(ChangeKind::kReleaseAll, holder);
    submit(ChangeKind::kReleaseAll, waiter);
  }
  EXPECT_GT(granted_first, 0);
}

// Connection A (worker 1) waits for "n"; its timeout fires on the
// timer thread (worker 0). The timer's kCancelWait checks that A is still
// attached (still_attached) and then, in a second lock scope, cancels
// "whatever wait the session has queued" (cancel_session_wait). Between
// the two, A's client drops (A cancels its own wait and detaches), the
// client reconnects as C, resumes the session and waits for "m". The late
// timer then cancels C's wait: C is never answered (its own timer later
// finds no wait and says nothing), so its client hangs.
TEST(LocalCoordinatorRace, AStaleWaitTimeoutNeverEndsTheResumedSessionsWait) {
  HandScheduler timers;
  auto service = std::make_shared<LockService>(LockLimits{}, 0, timers);
  LocalCoordinator coordinator(service, timers);
  auto submit = [&](Change change, Answer answer = nullptr) {
    return coordinator.submit(std::move(change), std::move(answer));
  };
  auto open = [&] {
    Change change;
    change.kind = ChangeKind::kOpen;
    return submit(change);
  };
  auto acquire = [&](const std::shared_ptr<Session>& session, uint64_t attachment,
                     const std::string& name, int64_t wait_ms, Answer answer = nullptr) {
    Change change;
    change.kind = ChangeKind::kAcquire;
    change.session = session;
    change.name = name;
    change.wait_ms = wait_ms;
    change.detachment = attachment;
    return submit(change, std::move(answer));
  };
  int lost = 0;
  for (int round = 0; round < 5000; ++round) {
    auto holder = open().session;
    ASSERT_EQ(acquire(holder, 0, "n", 0).status, OutcomeStatus::kDone);
    ASSERT_EQ(acquire(holder, 0, "m", 0).status, OutcomeStatus::kDone);
    Outcome a = open();
    std::shared_ptr<Session> session = a.session;
    uint64_t att_a = a.attachment;
    ASSERT_EQ(acquire(session, att_a, "n", 1000, [](const Outcome&) {}).status,
              OutcomeStatus::kQueued);
    std::atomic<int> ready{0};
    std::thread timer_thread = race(timers.take_oldest(), ready);  // A's wait timer
    // A's connection ends (LockServiceProtocol::connection_closed): its
    // wait's cancel, then its detach; grace is the default 30 s.
    Change cancel;
    cancel.kind = ChangeKind::kCancelWait;
    cancel.session = session;
    cancel.name = "n";
    cancel.detachment = att_a;
    submit(cancel);
    Change detach;
    detach.kind = ChangeKind::kDetach;
    detach.session = session;
    detach.detachment = att_a;
    ASSERT_GT(submit(detach).grace_ms, 0);
    // The client reconnects (C), resumes, and waits for "m".
    Outcome c = open();
    Change resume;
    resume.kind = ChangeKind::kResume;
    resume.session = c.session;
    resume.id = session->id;
    Outcome resumed = submit(resume);
    ASSERT_EQ(resumed.status, OutcomeStatus::kDone);
    std::atomic<int> c_answers{0};
    ASSERT_EQ(acquire(session, resumed.attachment, "m", 60000,
                      [&](const Outcome&) { c_answers.fetch_add(1); })
                  .status,
              OutcomeStatus::kQueued);
    timer_thread.join();
    // C's wait is still queued (or was answered): never silently gone.
    if (service->stats().waiters != 1u && c_answers.load() == 0) {
      ++lost;
      // Every timer left runs (A's grace: a no-op, resumed; C's own wait
      // timeout: finds no wait, kRefused, says nothing): C stays unanswered.
      while (!timers.empty())
        timers.take_oldest()();
      ADD_FAILURE() << "round " << round << ": C's wait was ended by A's stale timeout; C got "
                    << c_answers.load() << " answers after every timer ran, and "
                    << service->stats().timeouts << " timeouts are counted";
      if (lost >= 3) break;
    }
    timers.clear();
    Change all;
    all.kind = ChangeKind::kReleaseAll;
    all.session = holder;
    submit(all);
    all.session = session;
    submit(all);
    Change end;
    end.kind = ChangeKind::kCancelWait;
    end.session = session;
    submit(end);
    timers.clear();
  }
}

// A new leader (kTermStart): every session detaches, those in their grace
// start it again, every wait ends, and each grace is listed for the
// leader's timers; a grace of 0 ends its session at once.
TEST(LockServiceTermStart, DetachesEverySessionAndEndsEveryWait) {
  LockService service;
  auto holder = service.create_session();
  auto waiter = service.create_session();
  auto in_grace = service.create_session();
  auto no_grace = service.create_session();
  service.set_grace(no_grace, 0);
  ASSERT_TRUE(service.try_acquire(holder, "n").granted);
  ASSERT_TRUE(service.try_acquire(in_grace, "g").granted);
  ASSERT_TRUE(service.try_acquire(no_grace, "z").granted);
  Change wait;
  wait.kind = ChangeKind::kAcquire;
  wait.session = waiter;
  wait.name = "n";
  wait.wait_ms = 1000;
  bool granted = false;
  ASSERT_EQ(service.apply(wait, [&](uint64_t) { granted = true; }).status, OutcomeStatus::kQueued);
  uint64_t earlier;
  service.detach(in_grace, &earlier);

  Change start;
  start.kind = ChangeKind::kTermStart;
  Outcome outcome = service.apply(start);
  EXPECT_EQ(service.stats().waiters, 0u);
  EXPECT_FALSE(granted);
  ASSERT_EQ(outcome.in_grace.size(), 3u);  // holder, waiter, in_grace; no_grace ended
  for (const LockService::Adopted& adopted : outcome.in_grace) {
    EXPECT_NE(adopted.session, no_grace);
    EXPECT_FALSE(adopted.session->attached);
    if (adopted.session == in_grace) {
      EXPECT_GT(adopted.detachment, earlier);
    }
  }
  std::vector<LockInfo> held = service.list("");
  ASSERT_EQ(held.size(), 2u);  // n and g kept through the grace; z released
  // The old grace's timer no longer ends it: only the new one does.
  service.expire(in_grace, earlier);
  EXPECT_EQ(service.list("").size(), 2u);
}

// A session with no grace ends at a new term and lets its locks go. The
// waits of every session end first: a lock released before its waiter's
// wait ended went to a session that no longer waits for it, and whether it
// did depended on the order of the members' maps. Twenty pairs make a
// holder met before its waiter all but certain in any one order.
TEST(LockServiceTermStart, ALockANoGraceSessionLetsGoGoesToNoWaiter) {
  LockService service;
  std::vector<std::shared_ptr<Session>> waiters;
  for (int i = 0; i < 20; ++i) {
    std::string name = "n" + std::to_string(i);
    auto holder = service.create_session();
    service.set_grace(holder, 0);
    ASSERT_TRUE(service.try_acquire(holder, name).granted);
    auto waiter = service.create_session();
    Change wait;
    wait.kind = ChangeKind::kAcquire;
    wait.session = waiter;
    wait.name = name;
    wait.wait_ms = 1000;
    ASSERT_EQ(service.apply(wait, [](uint64_t) {}).status, OutcomeStatus::kQueued);
    waiters.push_back(waiter);
  }
  Change start;
  start.kind = ChangeKind::kTermStart;
  Outcome outcome = service.apply(start);
  EXPECT_EQ(outcome.in_grace.size(), 20u);  // the waiters; the holders ended
  EXPECT_EQ(service.stats().waiters, 0u);
  EXPECT_TRUE(service.list("").empty());
  for (const auto& waiter : waiters) {
    std::lock_guard lock(waiter->mutex);
    EXPECT_TRUE(waiter->held.empty());
  }
}

// The old leader may still answer a session's client until it finds it lost
// its majority. So at a new term a session that holds locks keeps them for
// the term's grace floor at least, also with no grace of its own
// (lockcached-cli's run); its own setting stays, and an empty one still
// ends at once.
TEST(LockServiceTermStart, ASessionThatHoldsLocksKeepsThemForTheTermsGraceFloor) {
  LockService service;
  auto holder = service.create_session();
  service.set_grace(holder, 0);
  ASSERT_TRUE(service.try_acquire(holder, "x").granted);
  auto empty = service.create_session();
  service.set_grace(empty, 0);
  Change start;
  start.kind = ChangeKind::kTermStart;
  start.grace_floor_ms = 1500;
  Outcome outcome = service.apply(start);
  ASSERT_EQ(outcome.in_grace.size(), 1u);  // the holder; the empty one ended
  EXPECT_EQ(outcome.in_grace[0].session, holder);
  EXPECT_EQ(outcome.in_grace[0].grace_ms, 1500);
  EXPECT_EQ(service.list("").size(), 1u);
  {
    std::lock_guard lock(holder->mutex);
    EXPECT_EQ(holder->grace_ms, 0);
  }
  service.expire(holder, outcome.in_grace[0].detachment);
  EXPECT_TRUE(service.list("").empty());
}

}  // namespace
}  // namespace lockcached::locks
