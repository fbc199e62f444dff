// The reactor's ordering promise: a task posted from another thread runs
// after every event of the batch it woke up with, so that a task which
// frees handlers (closing every client of a worker, as a Raft step-down
// does) never frees one that a later event of that batch still names. And
// a task posted from the reactor's own turn, which wakes nothing, still
// runs before the loop sleeps.
#include <sys/epoll.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "lockcached/net/reactor.h"
#include "lockcached/net/reactor_scheduler.h"

namespace lockcached::net {
namespace {

// A pipe's reading end that logs each readiness it is told of.
class PipeReader final : public EventHandler {
 public:
  PipeReader(std::string name, std::vector<std::string>& log) : name_(std::move(name)), log_(log) {
    EXPECT_EQ(pipe(fds_), 0);
  }
  ~PipeReader() override {
    close(fds_[0]);
    close(fds_[1]);
  }
  void on_event(uint32_t) override {
    char byte;
    EXPECT_EQ(read(fds_[0], &byte, 1), 1);
    log_.push_back(name_);
  }
  void make_readable() { EXPECT_EQ(write(fds_[1], "x", 1), 1); }
  int fd() const { return fds_[0]; }

 private:
  std::string name_;
  std::vector<std::string>& log_;
  int fds_[2];
};

class ReactorTest : public ::testing::TestWithParam<IoBackend> {
 protected:
  void SetUp() override {
    std::string why;
    if (GetParam() == IoBackend::kUring && !Reactor::uring_available({}, &why)) {
      GTEST_SKIP() << "io_uring is not available to this process: " << why;
    }
  }
};

TEST_P(ReactorTest, APostedTaskRunsAfterTheEventsOfItsBatch) {
  Reactor reactor(GetParam(), {});
  std::vector<std::string> log;
  PipeReader first("first", log);
  PipeReader second("second", log);
  ASSERT_TRUE(reactor.add(first.fd(), EPOLLIN, &first));
  ASSERT_TRUE(reactor.add(second.fd(), EPOLLIN, &second));

  // The wake-up is ready before either pipe, so the poller reports it first.
  reactor.post([&log] { log.push_back("task"); });
  first.make_readable();
  second.make_readable();
  while (log.size() < 3)
    reactor.run_once(1000);

  EXPECT_EQ(log, (std::vector<std::string>{"first", "second", "task"}));
}

TEST_P(ReactorTest, APostedTaskMayFreeAHandlerWhoseEventIsInTheSameBatch) {
  Reactor reactor(GetParam(), {});
  std::vector<std::string> log;
  auto doomed = std::make_unique<PipeReader>("doomed", log);
  ASSERT_TRUE(reactor.add(doomed->fd(), EPOLLIN, doomed.get()));

  // Under AddressSanitizer, a dispatch to the freed handler is a report.
  reactor.post([&] {
    reactor.remove(doomed->fd());
    doomed.reset();
    log.push_back("freed");
  });
  doomed->make_readable();
  while (log.empty() || log.back() != "freed")
    reactor.run_once(1000);

  EXPECT_EQ(log, (std::vector<std::string>{"doomed", "freed"}));
}

// Wakes `reactor` from another thread if the test has not ended within a
// few seconds: a loop that went to sleep with a task queued (the bug this
// catches) then logs "watchdog" instead of hanging the test.
class Watchdog {
 public:
  Watchdog(Reactor& reactor, std::vector<std::string>& log)
      : thread_([this, &reactor, &log] {
          std::unique_lock lock(mutex_);
          if (!ended_.wait_for(lock, std::chrono::seconds(10), [this] { return done_; }))
            reactor.post([&log] { log.push_back("watchdog"); });
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    ended_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ended_;
  bool done_ = false;
  std::thread thread_;
};

// A post from the reactor's own turn writes no wake-up: the loop must still
// run it before it sleeps, and after what was posted before it.
TEST_P(ReactorTest, ATaskPostedFromItsOwnTurnRunsBeforeTheLoopSleeps) {
  Reactor reactor(GetParam(), {});
  std::vector<std::string> log;
  std::thread([&] { reactor.post([&log] { log.push_back("from another thread"); }); }).join();
  PipeReader reader("event", log);
  ASSERT_TRUE(reactor.add(reader.fd(), EPOLLIN, &reader));
  reader.make_readable();
  reactor.run_once(-1);  // the event, then the other thread's task
  ASSERT_EQ(log, (std::vector<std::string>{"event", "from another thread"}));

  reactor.call_soon([&] {
    reactor.post([&] {
      log.push_back("first");
      reactor.post([&log] { log.push_back("posted by a posted task"); });
    });
    reactor.post([&log] { log.push_back("second"); });
  });
  reactor.run_once(-1);  // runs the call_soon task, which posts
  Watchdog watchdog(reactor, log);
  while (log.size() < 5)
    reactor.run_once(-1);  // nothing else wakes it

  EXPECT_EQ(log, (std::vector<std::string>{"event", "from another thread", "first", "second",
                                           "posted by a posted task"}));
}

// ReactorScheduler arms and cancels a timer directly when the caller is in
// the reactor's turn. A timer set from the turn runs, and one cancelled
// there never does. The delays are real time (the reactor reads the
// monotonic clock): the cancelled timer's is long enough that only a cancel
// that failed lets it run before the last one.
TEST_P(ReactorTest, ASchedulersTimersSetAndCancelledInTheTurnRunOrNot) {
  Reactor reactor(GetParam(), {});
  ReactorScheduler timers(reactor);
  std::vector<std::string> log;
  reactor.call_soon([&] {
    timing::Scheduler::TimerId cancelled =
        timers.after(200, [&log] { log.push_back("cancelled timer"); });
    timers.after(0, [&log] { log.push_back("first timer"); });
    timers.after(300, [&log] { log.push_back("last timer"); });
    timers.cancel(cancelled);
  });
  Watchdog watchdog(reactor, log);
  while (log.empty() || (log.back() != "last timer" && log.back() != "watchdog"))
    reactor.run_once(-1);
  EXPECT_EQ(log, (std::vector<std::string>{"first timer", "last timer"}));
}

// A timer that another thread set is armed by a task posted to the
// reactor. A cancel from the turn that comes before that task runs must
// not be lost: it goes behind the arming.
TEST_P(ReactorTest, ACancelFromTheTurnFindsATimerThatIsStillBeingArmed) {
  Reactor reactor(GetParam(), {});
  ReactorScheduler timers(reactor);
  std::vector<std::string> log;
  timing::Scheduler::TimerId cancelled = 0;
  std::thread([&] {
    reactor.post([&] { timers.cancel(cancelled); });  // runs before the arming below
    cancelled = timers.after(200, [&log] { log.push_back("cancelled timer"); });
    timers.after(300, [&log] { log.push_back("last timer"); });
  }).join();
  Watchdog watchdog(reactor, log);
  while (log.empty() || (log.back() != "last timer" && log.back() != "watchdog"))
    reactor.run_once(-1);
  EXPECT_EQ(log, (std::vector<std::string>{"last timer"}));
}

INSTANTIATE_TEST_SUITE_P(Backends, ReactorTest,
                         ::testing::Values(IoBackend::kEpoll, IoBackend::kUring),
                         [](const auto& info) { return std::string(io_backend_name(info.param)); });

}  // namespace
}  // namespace lockcached::net
