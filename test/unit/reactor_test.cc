// The reactor's ordering promise: a task posted from another thread runs
// after every event of the batch it woke up with, so that a task which
// frees handlers (closing every client of a worker, as a Raft step-down
// does) never frees one that a later event of that batch still names.
#include <sys/epoll.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lockcached/net/reactor.h"

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

INSTANTIATE_TEST_SUITE_P(Backends, ReactorTest,
                         ::testing::Values(IoBackend::kEpoll, IoBackend::kUring),
                         [](const auto& info) { return std::string(io_backend_name(info.param)); });

}  // namespace
}  // namespace lockcached::net
