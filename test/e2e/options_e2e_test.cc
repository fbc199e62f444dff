// memcached's own command-line options and systemd's readiness protocol,
// against the real binary.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::ServerProcess;

std::string stat_text(const std::map<std::string, std::string>& stats, const std::string& name) {
  auto found = stats.find(name);
  return found == stats.end() ? "<absent>" : found->second;
}

TEST(OptionsE2e, MemcachedStyleOptionsStartAServingServer) {
  ServerProcess server;
  ASSERT_TRUE(server.start(
      {"-p", "0", "-m", "64", "-c", "100", "-t", "2", "-I", "2m", "-U", "0", "-l", "127.0.0.1"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));

  std::map<std::string, std::string> settings = client.stats("settings");
  EXPECT_EQ(stat_text(settings, "maxbytes"), "67108864");
  EXPECT_EQ(stat_text(settings, "maxconns"), "100");
  EXPECT_EQ(stat_text(settings, "num_threads"), "2");
  EXPECT_EQ(stat_text(settings, "item_size_max"), "2097152");
  EXPECT_EQ(stat_text(settings, "udpport"), "0");
  EXPECT_EQ(stat_text(settings, "inter"), "127.0.0.1");
  EXPECT_EQ(stat_text(settings, "tcpport"), std::to_string(server.port()));
  std::map<std::string, std::string> stats = client.stats();
  EXPECT_EQ(stat_text(stats, "limit_maxbytes"), "67108864");
  EXPECT_EQ(stat_text(stats, "threads"), "2");
  EXPECT_EQ(stat_text(stats, "max_connections"), "100");

  // -I 2m is in force: a value over the default 1 MB is stored, one over
  // 2 MB is refused.
  std::string big(1536 * 1024, 'x');
  ASSERT_EQ(client.store("set", "big", big), "STORED");
  EXPECT_EQ(client.get("big"), big);
  EXPECT_EQ(client.store("set", "huge", std::string((2 << 20) + 1, 'y')),
            "SERVER_ERROR object too large for cache");
}

TEST(OptionsE2e, JoinedAndBundledForms) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-p0", "-m32", "-c50", "-t1", "-I512k", "-l127.0.0.1", "-vv"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  std::map<std::string, std::string> settings = client.stats("settings");
  EXPECT_EQ(stat_text(settings, "maxbytes"), std::to_string(32 << 20));
  EXPECT_EQ(stat_text(settings, "maxconns"), "50");
  EXPECT_EQ(stat_text(settings, "num_threads"), "1");
  EXPECT_EQ(stat_text(settings, "item_size_max"), "524288");
  EXPECT_EQ(client.store("set", "k", "v"), "STORED");
}

TEST(OptionsE2e, MemcachedLongOptions) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--memory-limit=16", "--conn-limit", "20", "--max-item-size=1m",
                            "--udp-port=0", "--threads=1", "--listen=127.0.0.1", "--port=0"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  std::map<std::string, std::string> settings = client.stats("settings");
  EXPECT_EQ(stat_text(settings, "maxbytes"), std::to_string(16 << 20));
  EXPECT_EQ(stat_text(settings, "maxconns"), "20");
  EXPECT_EQ(stat_text(settings, "num_threads"), "1");
  EXPECT_EQ(stat_text(settings, "item_size_max"), "1048576");
}

// What -v and -vv log, as memcached's: connections opening and closing, and
// with -vv every request, control characters escaped so that a client cannot
// forge log lines.
std::string log_of_one_session(const std::vector<std::string>& flags) {
  ServerProcess server;
  EXPECT_TRUE(server.start(flags));
  {
    Client client;
    EXPECT_TRUE(client.connect(server.port()));
    EXPECT_EQ(client.store("set", "greeting", "hello"), "STORED");
    EXPECT_EQ(client.request(std::string("get a\x01") + "b"), "END");
  }
  EXPECT_TRUE(server.stop().has_value());
  EXPECT_TRUE(server.wait_for_output_end(5s));
  return server.log();
}

TEST(OptionsE2e, VeryVerboseLogsConnectionsAndRequests) {
  std::string log = log_of_one_session({"-vv"});
  EXPECT_NE(log.find(" new cache connection"), std::string::npos) << log;
  EXPECT_NE(log.find(" set greeting 0 0 5"), std::string::npos) << log;
  EXPECT_NE(log.find(" get a\\x01b"), std::string::npos) << log;
  EXPECT_NE(log.find(" connection closed"), std::string::npos) << log;
}

TEST(OptionsE2e, VerboseLogsConnectionsOnly) {
  std::string log = log_of_one_session({"-v"});
  EXPECT_NE(log.find(" new cache connection"), std::string::npos) << log;
  EXPECT_NE(log.find(" connection closed"), std::string::npos) << log;
  EXPECT_EQ(log.find("greeting"), std::string::npos) << log;
}

TEST(OptionsE2e, QuietByDefault) {
  std::string log = log_of_one_session({});
  EXPECT_EQ(log.find(" new cache connection"), std::string::npos) << log;
  EXPECT_EQ(log.find("greeting"), std::string::npos) << log;
}

TEST(OptionsE2e, UdpPortIsAcceptedWithAWarning) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-U", "11211"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  EXPECT_EQ(client.request("version").rfind("VERSION ", 0), 0u);
  EXPECT_EQ(stat_text(client.stats("settings"), "udpport"), "0");
  EXPECT_NE(server.log().find("-U 11211 ignored: lockcached serves TCP only"), std::string::npos);
}

// Both styles are one command line: the later of two settings wins, and a
// flagfile still works beside memcached's options.
TEST(OptionsE2e, MixesWithGflagsFormsAndFlagfile) {
  std::string flagfile = ::testing::TempDir() + "options_e2e_" + std::to_string(getpid()) + ".conf";
  {
    std::ofstream out(flagfile);
    out << "# test flagfile\n--max_connections=77\n--memory_limit_mb=8\n";
  }
  ServerProcess server;
  ASSERT_TRUE(server.start({"--flagfile=" + flagfile, "-m", "64", "--threads=3", "-t", "1"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  std::map<std::string, std::string> settings = client.stats("settings");
  EXPECT_EQ(stat_text(settings, "maxconns"), "77");
  EXPECT_EQ(stat_text(settings, "maxbytes"), std::to_string(64 << 20));
  EXPECT_EQ(stat_text(settings, "num_threads"), "1");
  std::filesystem::remove(flagfile);
}

// Starts the server with `args`, expects it to exit at once with EX_USAGE
// (64) and to have said `message`.
void expect_usage_error(const std::vector<std::string>& args, const std::string& message) {
  ServerProcess server;
  EXPECT_FALSE(server.start(args));
  std::optional<int> status = server.wait_for_exit(5s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 64)
      << e2e::describe_wait_status(status);
  EXPECT_TRUE(server.wait_for_output_end(5s));
  EXPECT_NE(server.log().find(message), std::string::npos) << server.log();
}

TEST(OptionsE2e, UnknownAndUnsupportedOptionsAreRefused) {
  expect_usage_error({"-x"}, "lockcached: unknown option -x");
  expect_usage_error({"-M"}, "memcached's option -M (--disable-evictions) is not supported");
  expect_usage_error({"-p", "eleven"}, "-p eleven: expected a whole number");
  expect_usage_error({"-l", "127.0.0.1:11211"}, "a port per address is not supported");
}

// A unix datagram socket standing in for systemd's notification socket.
class NotifySocket {
 public:
  NotifySocket() {
    path_ = ::testing::TempDir() + "notify_" + std::to_string(getpid()) + ".sock";
    unlink(path_.c_str());
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path_.copy(address.sun_path, sizeof address.sun_path - 1);
    bound_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~NotifySocket() {
    unsetenv("NOTIFY_SOCKET");
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  // The next datagram, or "" when none comes within `timeout`.
  std::string receive(std::chrono::milliseconds timeout = e2e::kReplyTimeout) {
    pollfd poll_fd{fd_, POLLIN, 0};
    if (poll(&poll_fd, 1, static_cast<int>(timeout.count())) != 1) return "";
    char buffer[4096];
    ssize_t n = recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(OptionsE2e, NotifiesSystemdWhenReadyAndWhenStopping) {
  NotifySocket notify;
  ASSERT_TRUE(notify.bound());
  ServerProcess server;
  ASSERT_TRUE(server.start({"--lock_port=-1"}));
  // A server built without libsystemd says so instead of notifying.
  std::string ready;
  bool without_libsystemd = false;
  e2e::eventually(
      [&] {
        ready = notify.receive(100ms);
        without_libsystemd = server.log().find("built without libsystemd") != std::string::npos;
        return !ready.empty() || without_libsystemd;
      },
      e2e::kReplyTimeout, 0ms);
  if (ready.empty() && without_libsystemd) {
    GTEST_SKIP() << "this lockcached was built without libsystemd (libsystemd-dev)";
  }
  EXPECT_NE(ready.find("READY=1"), std::string::npos) << ready;
  EXPECT_NE(ready.find("STATUS=memcached protocols on port " + std::to_string(server.port())),
            std::string::npos)
      << ready;
  // READY=1 comes after every listener is bound: both ports answer now.
  std::optional<uint16_t> lock_port = server.lock_port();
  ASSERT_TRUE(lock_port);
  Client cache, locks;
  ASSERT_TRUE(cache.connect(server.port()));
  ASSERT_TRUE(locks.connect(*lock_port));
  EXPECT_EQ(cache.request("version").rfind("VERSION ", 0), 0u);

  std::optional<int> status = server.stop(SIGTERM);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << e2e::describe_wait_status(status);
  EXPECT_EQ(notify.receive(), "STOPPING=1");
}

}  // namespace
