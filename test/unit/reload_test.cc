// SIGHUP's re-read of the flagfile (config::reloaded): what changed, and
// nothing at all after a mistake.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "lockcached/config/configuration.h"
#include "lockcached/config/flags.h"
#include "lockcached/core/verbosity.h"

namespace lockcached::config {
namespace {

class ReloadTest : public testing::Test {
 protected:
  ~ReloadTest() override {
    std::remove(path_.c_str());
    core::log_verbosity.store(verbosity_);
  }

  std::optional<server::RunTimeChanges> reload(const std::string& flagfile) {
    std::ofstream(path_, std::ios::trunc) << flagfile;
    return reloaded({"lockcached", "--flagfile=" + path_}, ParsedFlags{});
  }

  gflags::FlagSaver saver_;  // the flags as they were, after each test
  int verbosity_ = core::log_verbosity.load();
  std::string path_ = testing::TempDir() + "reload_test.conf." + std::to_string(getpid());
};

TEST_F(ReloadTest, OnlyWhatChangedAndMayChangeWhileServing) {
  FLAGS_memory_limit_mb = 64;
  FLAGS_idle_timeout = 5;
  core::log_verbosity.store(0);
  std::optional<server::RunTimeChanges> changes =
      reload("--memory_limit_mb=64\n--memory_limit_mb=32\n--idle_timeout=5\n--port=1\n--v=1\n");
  ASSERT_TRUE(changes);
  EXPECT_EQ(changes->memory_limit, size_t{32} << 20);  // the last setting wins
  EXPECT_FALSE(changes->idle_timeout_seconds);
  EXPECT_EQ(changes->verbosity, 1);
  EXPECT_EQ(FLAGS_memory_limit_mb, 32);
  EXPECT_EQ(FLAGS_port, 11211);  // read at start only
}

// The verbosity command changes the level in force; a flagfile's --v
// sets it back.
TEST_F(ReloadTest, VerbosityAgainstTheLevelInForce) {
  core::log_verbosity.store(2);
  std::optional<server::RunTimeChanges> changes = reload("--v=0\n");
  ASSERT_TRUE(changes);
  EXPECT_EQ(changes->verbosity, 0);
}

TEST_F(ReloadTest, AMistakeAnywhereChangesNothing) {
  FLAGS_memory_limit_mb = 64;
  EXPECT_FALSE(reload("--memory_limit_mb=32\n--memory_limt=16\n"));
  EXPECT_FALSE(reload("--memory_limit_mb=0\n"));
  EXPECT_FALSE(reload("--memory_limit_mb=lots\n"));
  EXPECT_FALSE(reload("--idle_timeout=-1\n"));
  EXPECT_FALSE(reload("--v=99999999999\n"));
  EXPECT_EQ(FLAGS_memory_limit_mb, 64);
}

// A flag SIGHUP does not apply has its value checked as the start checks
// it: the next start would refuse the file.
TEST_F(ReloadTest, AValueTheStartWouldRefuseOfAnyFlagChangesNothing) {
  FLAGS_memory_limit_mb = 64;
  EXPECT_FALSE(reload("--memory_limit_mb=32\n--max_item_size=abc\n"));
  EXPECT_FALSE(reload("--memory_limit_mb=32\n--tls=bogus\n"));
  EXPECT_FALSE(reload("--memory_limit_mb=32\n--port=70000\n"));
  EXPECT_FALSE(reload("--memory_limit_mb=32\n--listen=127.0.0.1:x\n"));
  EXPECT_FALSE(reload("--memory_limit_mb=32\n--cluster=nonsense\n"));
  EXPECT_FALSE(reload("--memory_limit_mb=32\n--minloglevel=x\n"));
  // Refused even where a later setting would have won: so is the start.
  EXPECT_FALSE(reload("--memory_limit_mb=32\n--port=-1\n--port=1\n"));
  EXPECT_EQ(FLAGS_memory_limit_mb, 64);
  EXPECT_EQ(FLAGS_port, 11211);
  EXPECT_EQ(FLAGS_max_item_size, 1 << 20);
  std::optional<server::RunTimeChanges> changes =
      reload("--memory_limit_mb=32\n--max_item_size=2097152\n--tls=false\n--port=0x10\n");
  ASSERT_TRUE(changes);
  EXPECT_EQ(changes->memory_limit, size_t{32} << 20);
  EXPECT_EQ(FLAGS_max_item_size, 1 << 20);  // read at start only
}

// The rules between flags, as at start: no item of --max_item_size would
// fit in half of 2 MB.
TEST_F(ReloadTest, WhatTheStartWouldRefuseChangesNothing) {
  FLAGS_memory_limit_mb = 64;
  FLAGS_max_item_size = 4 << 20;
  EXPECT_FALSE(reload("--memory_limit_mb=2\n--idle_timeout=9\n"));
  EXPECT_EQ(FLAGS_memory_limit_mb, 64);
  EXPECT_EQ(FLAGS_idle_timeout, 0);
  std::optional<server::RunTimeChanges> changes = reload("--memory_limit_mb=8\n");
  ASSERT_TRUE(changes);
  EXPECT_EQ(changes->memory_limit, size_t{8} << 20);
}

}  // namespace
}  // namespace lockcached::config
