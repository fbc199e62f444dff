// End-to-end tests of the warm restart (memcached's -e, --memory_file;
// docs/reliability.md): the real binary stopped with SIGUSR1 and started
// again on the same file serves what it held; any other stop, a damaged
// file or other settings start it cold, with one log line.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace {

namespace fs = std::filesystem;
using e2e::Client;
using e2e::ServerProcess;
using namespace std::chrono_literals;

// How many lines of `log` mention `text`.
size_t lines_with(const std::string& log, const std::string& text) {
  size_t count = 0;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    if (log.substr(start, end - start).find(text) != std::string::npos) ++count;
    start = end + 1;
  }
  return count;
}

// The TTL `mg KEY t` reports (-1: never expires); -2 on a miss.
long ttl_of(Client& client, const std::string& key) {
  std::string reply = client.request("mg " + key + " t");
  if (reply == "EN") return -2;
  EXPECT_EQ(reply.rfind("HD t", 0), 0u) << reply;
  return std::stol(reply.substr(4));
}

class WarmRestartE2e : public testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = testing::TempDir() + "lockcached_warm_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    directory_ = pattern;
    path_ = (directory_ / "cache").string();
  }
  void TearDown() override { fs::remove_all(directory_); }

  // A server on the file, with `flags` after it.
  ::testing::AssertionResult start(ServerProcess& server, std::vector<std::string> flags = {}) {
    flags.insert(flags.begin(), "--memory_file=" + path_);
    return server.start(flags);
  }

  // Stops `server` with `signal`, expecting a clean exit, and its whole log.
  std::string stop(ServerProcess& server, int signal) {
    std::optional<int> status = server.stop(signal, 20s);
    EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << e2e::describe_wait_status(status);
    EXPECT_TRUE(server.wait_for_output_end(5s));
    return server.log();
  }

  // A server on the file that holds `key`, stopped with `signal` after
  // `meanwhile` ran.
  void fill_and_stop(int signal, std::vector<std::string> flags = {},
                     const std::function<void(ServerProcess&, Client&)>& meanwhile = {}) {
    ServerProcess server;
    ASSERT_TRUE(start(server, flags));
    Client client;
    ASSERT_TRUE(client.connect(server.port()));
    ASSERT_EQ(client.store("set", "key", "value"), "STORED");
    if (meanwhile) meanwhile(server, client);
    stop(server, signal);
  }

  // Starts a server on the file and expects it warm: `key` came back.
  void expect_warm_start(std::vector<std::string> flags = {}) {
    ServerProcess server;
    ASSERT_TRUE(start(server, flags));
    Client client;
    ASSERT_TRUE(client.connect(server.port()));
    EXPECT_EQ(client.get("key"), "value");
    EXPECT_TRUE(logged(server, "1 items restored"));
  }

  // Starts a server on the file and expects it cold, its log saying
  // `why` in the one line that names the file.
  void expect_cold_start(const std::string& why, std::vector<std::string> flags = {}) {
    ServerProcess server;
    ASSERT_TRUE(start(server, flags));
    Client client;
    ASSERT_TRUE(client.connect(server.port()));
    EXPECT_EQ(client.get("key"), std::nullopt);
    EXPECT_EQ(e2e::stat_u64(client.stats(), "curr_items"), 0u);
    EXPECT_TRUE(logged(server, why));
    EXPECT_EQ(lines_with(server.log(), "--memory_file"), 1u) << server.log();
    EXPECT_FALSE(fs::exists(path_));
  }

  // Starting with `flags` fails with exit status 64 and one line with `line`.
  static void expect_start_refused(const std::vector<std::string>& flags, const std::string& line) {
    std::string output = e2e::output_of_refused_start(flags);
    EXPECT_EQ(lines_with(output, line), 1u) << output;
  }

  // Whether `server` logs one line with `text`; its output reaches log()
  // through a pipe, a moment after the server wrote it.
  static ::testing::AssertionResult logged(const ServerProcess& server, const std::string& text) {
    if (e2e::eventually([&] { return lines_with(server.log(), text) == 1; })) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "no line with \"" << text << "\" in\n"
                                         << server.log();
  }

  std::string file_bytes() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  fs::path directory_;
  std::string path_;
};

TEST_F(WarmRestartE2e, SigusrOneKeepsKeysValuesFlagsCasAndTtls) {
  ServerProcess before;
  ASSERT_TRUE(start(before));
  Client client;
  ASSERT_TRUE(client.connect(before.port()));
  std::string binary("bin\0ary\r\nvalue", 14);
  ASSERT_EQ(client.store("set", "plain", binary, 42), "STORED");
  ASSERT_EQ(client.store("set", "hour", "h", 7, 3600), "STORED");
  // Unix times, which the file keeps as they are: each server's clock
  // turns one into its whole seconds within a second either way, and
  // `now` is up to a second behind. So "soon" lives at least a second after
  // its set, and is gone 4 s after `now`; "later" lives until at least 7 s
  // after `now`, time for a slow (sanitized) server to restart.
  int64_t now = std::time(nullptr);
  ASSERT_EQ(client.store("set", "soon", "s", 0, now + 3), "STORED");   // gone while down
  ASSERT_EQ(client.store("set", "later", "l", 0, now + 8), "STORED");  // gone after the start
  ASSERT_TRUE(client.send("gets plain hour\r\n"));
  std::optional<std::vector<e2e::Value>> saved = client.read_values();
  ASSERT_TRUE(saved && saved->size() == 2);
  std::string log = stop(before, SIGUSR1);
  EXPECT_EQ(lines_with(log, "4 items saved"), 1u) << log;
  EXPECT_TRUE(fs::exists(path_));

  std::this_thread::sleep_until(std::chrono::system_clock::from_time_t(now + 4) + 200ms);
  ServerProcess after;
  ASSERT_TRUE(start(after));
  ASSERT_TRUE(client.connect(after.port()));
  ASSERT_TRUE(client.send("gets plain hour\r\n"));
  EXPECT_EQ(client.read_values(), saved);
  // Answered only once loaded, and the file went before that.
  EXPECT_FALSE(fs::exists(path_)) << "a loaded file must not be loaded again after a crash";
  EXPECT_TRUE(logged(after, "3 items restored (1 expired while down"));
  EXPECT_EQ(client.get("soon"), std::nullopt);
  EXPECT_EQ(client.get("later"), "l");
  long hour = ttl_of(client, "hour");
  EXPECT_GE(hour, 3590);
  EXPECT_LE(hour, 3600);
  EXPECT_EQ(ttl_of(client, "plain"), -1);
  EXPECT_TRUE(e2e::eventually([&] { return !client.get("later"); }, 10s));
  // A CAS read before the stop never names a later item.
  ASSERT_EQ(client.store("set", "plain", "new"), "STORED");
  ASSERT_TRUE(client.send("gets plain\r\n"));
  std::optional<std::vector<e2e::Value>> renewed = client.read_values();
  ASSERT_TRUE(renewed && renewed->size() == 1);
  EXPECT_GT(renewed->front().cas, std::max(*(*saved)[0].cas, *(*saved)[1].cas));
}

TEST_F(WarmRestartE2e, MemcachedsSpellingAndStatsSettings) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-e", path_}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  EXPECT_EQ(client.stats("settings")["memory_file"], path_);
  ASSERT_EQ(client.store("set", "key", "value"), "STORED");
  stop(server, SIGUSR1);
  ServerProcess again;
  ASSERT_TRUE(again.start({"--memory-file=" + path_}));
  ASSERT_TRUE(client.connect(again.port()));
  EXPECT_EQ(client.get("key"), "value");
}

TEST_F(WarmRestartE2e, WithoutTheFlagNothingIsWritten) {
  ServerProcess server;
  ASSERT_TRUE(server.start());
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  EXPECT_EQ(client.stats("settings")["memory_file"], "(null)");  // as memcached
  stop(server, SIGUSR1);
  EXPECT_TRUE(fs::is_empty(directory_));
}

// memcached's rule: after a start that loaded the file, a crash (SIGKILL)
// then a start is cold: the file went when it was loaded.
TEST_F(WarmRestartE2e, ACrashAfterAWarmStartStartsCold) {
  fill_and_stop(SIGUSR1);
  {
    ServerProcess warm;
    ASSERT_TRUE(start(warm));
    Client client;
    ASSERT_TRUE(client.connect(warm.port()));
    ASSERT_EQ(client.get("key"), "value");
    std::optional<int> status = warm.stop(SIGKILL);
    ASSERT_TRUE(status && WIFSIGNALED(*status));
  }
  expect_cold_start("no file (the last stop was not a graceful one, SIGUSR1)");
}

TEST_F(WarmRestartE2e, SigtermStopsWithoutWritingTheFile) {
  ServerProcess server;
  ASSERT_TRUE(start(server));
  std::string log = stop(server, SIGTERM);
  EXPECT_EQ(lines_with(log, "not written: only SIGUSR1 keeps the cache"), 1u) << log;
  EXPECT_TRUE(fs::is_empty(directory_));
  expect_cold_start("no file");
}

TEST_F(WarmRestartE2e, ADamagedFileStartsCold) {
  fill_and_stop(SIGUSR1);
  std::string bytes = file_bytes();
  ASSERT_GT(bytes.size(), 100u);
  size_t value_at = bytes.find("value");
  ASSERT_NE(value_at, std::string::npos);
  bytes[value_at] = 'V';  // still a well-formed frame: only the checksum can tell
  std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  expect_cold_start("damaged (its checksum does not match); removed, starting with an empty cache");
}

TEST_F(WarmRestartE2e, AnotherMemoryLimitStartsCold) {
  fill_and_stop(SIGUSR1, {"-m", "64"});
  expect_cold_start("written with a memory limit of 64 MB", {"-m", "65"});
}

// cache_memlimit lasts until the next start: the file records
// --memory_limit_mb, so the next start with the same flags loads it.
TEST_F(WarmRestartE2e, CacheMemlimitAtRunTimeStillStartsWarm) {
  fill_and_stop(SIGUSR1, {"-m", "64"}, [](ServerProcess&, Client& client) {
    ASSERT_EQ(client.request("cache_memlimit 128"), "OK");
    ASSERT_EQ(e2e::stat_u64(client.stats(), "limit_maxbytes"), uint64_t{128} << 20);
  });
  expect_warm_start({"-m", "64"});
}

// SIGHUP's --memory_limit_mb is the configured one from then on: the file
// records it, for a start with the flagfile as it is now.
TEST_F(WarmRestartE2e, AMemoryLimitThatSighupChangedIsTheOneRecorded) {
  std::string flagfile = (directory_ / "lockcached.conf").string();
  std::ofstream(flagfile) << "--memory_limit_mb=64\n";
  fill_and_stop(SIGUSR1, {"--flagfile=" + flagfile}, [&](ServerProcess& server, Client&) {
    std::ofstream(flagfile) << "--memory_limit_mb=65\n";
    ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
    ASSERT_TRUE(logged(server, "SIGHUP: --memory_limit_mb 64 -> 65"));
  });
  expect_warm_start({"-m", "65"});
}

TEST_F(WarmRestartE2e, AnotherItemSizeStartsCold) {
  fill_and_stop(SIGUSR1, {"-I", "1m"});
  expect_cold_start("items up to 1048576 bytes, this server has", {"-I", "2m"});
}

// Locks end with their connections, as on any restart: neither a cache
// object's lock nor a named lock comes back.
TEST_F(WarmRestartE2e, LocksAreNotRestored) {
  ServerProcess before;
  ASSERT_TRUE(start(before, {"--lock_port=-1"}));
  std::optional<uint16_t> lock_port = before.lock_port();
  ASSERT_TRUE(lock_port);
  Client cache;
  ASSERT_TRUE(cache.connect(before.port()));
  ASSERT_EQ(cache.store("set", "locked", "v"), "STORED");
  ASSERT_EQ(cache.request("lock locked"), "OK");
  Client named;
  ASSERT_TRUE(named.connect(*lock_port));
  ASSERT_EQ(named.request("lock deploy").rfind("200 Acquired ", 0), 0u);
  stop(before, SIGUSR1);

  ServerProcess after;
  ASSERT_TRUE(start(after, {"--lock_port=-1"}));
  lock_port = after.lock_port();
  ASSERT_TRUE(lock_port);
  Client other;
  ASSERT_TRUE(other.connect(after.port()));
  EXPECT_EQ(other.get("locked"), "v");
  EXPECT_EQ(e2e::stat_u64(other.stats(), "curr_locks"), 0u);
  EXPECT_EQ(other.store("set", "locked", "w"), "STORED");
  Client other_named;
  ASSERT_TRUE(other_named.connect(*lock_port));
  EXPECT_EQ(other_named.request("lock deploy").rfind("200 Acquired ", 0), 0u);
}

// A pid file that cannot be written stops the start before the memory
// file is loaded, and so removed: the next start, put right, is warm.
TEST_F(WarmRestartE2e, APidFileThatCannotBeWrittenLeavesTheFileForTheNextStart) {
  fill_and_stop(SIGUSR1);
  for (const std::string& bad : {(directory_ / "missing" / "pid").string(), directory_.string()}) {
    expect_start_refused({"--memory_file=" + path_, "-P", bad}, "lockcached: --pid_file: ");
    EXPECT_TRUE(fs::exists(path_)) << bad;
  }
  expect_warm_start({"-P", (directory_ / "pid").string()});
}

// A start that fails after the file was loaded (and so removed) writes it
// back: here a cluster port another process holds (exit 1, which systemd
// retries), found only once the cache is restored.
TEST_F(WarmRestartE2e, AStartThatFailsAfterLoadingTheFileWritesItBack) {
  fill_and_stop(SIGUSR1);
  ServerProcess holder;  // its cache port is the cluster port taken
  ASSERT_TRUE(holder.start());
  std::string secret = (directory_ / "secret").string();
  std::ofstream(secret) << "sixteen bytes or more\n";
  fs::create_directory(directory_ / "data");
  std::vector<uint16_t> others = e2e::free_ports(1);
  ServerProcess failing;  // it may say where it listens before it fails: no verdict
  (void)start(failing, {"--lock_port=-1",
                        "--cluster=1@127.0.0.1:" + std::to_string(holder.port()) +
                            ",2@127.0.0.1:" + std::to_string(others[0]),
                        "--node_id=1", "--data_dir=" + (directory_ / "data").string(),
                        "--cluster_secret_file=" + secret});
  std::optional<int> status = failing.wait_for_exit(20s);
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 1)
      << e2e::describe_wait_status(status) << "\n" << failing.log();
  EXPECT_TRUE(failing.wait_for_output_end(5s));
  EXPECT_EQ(lines_with(failing.log(), "1 items restored"), 1u) << failing.log();
  EXPECT_EQ(lines_with(failing.log(), "writing it back"), 1u) << failing.log();
  expect_warm_start();
}

TEST_F(WarmRestartE2e, ADirectoryThatCannotTakeTheFileStopsTheStart) {
  for (const std::string& bad : {(directory_ / "missing" / "cache").string(), directory_.string()})
    expect_start_refused({"-e", bad}, "lockcached: --memory_file: ");
}

// A FIFO (or a device) is no file to load: opening one would hang the start.
TEST_F(WarmRestartE2e, AFileThatIsNoRegularFileStopsTheStart) {
  std::string fifo = (directory_ / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  expect_start_refused({"-e", fifo},
                       "lockcached: --memory_file: must name a regular file: " + fifo + " is not one");
}

}  // namespace
