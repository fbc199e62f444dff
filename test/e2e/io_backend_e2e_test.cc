// End-to-end tests of the I/O backends (--io=auto|epoll|uring): which one
// runs (`stats settings`, and the log line of --io=auto), where the kernel
// allows io_uring and where it refuses it (a seccomp filter,
// test/tools/without_io_uring.cc); and on the io_uring backend the paths its
// completions take that ordinary request-reply traffic does not: a client
// that stops reading while it keeps sending (receiving paused, then
// resumed), more connections delivering in one turn than the thread has
// receive buffers, and replies of many pieces sent in several goes; and
// --uring_sqpoll. The rest of the suite runs with the default, --io=auto:
// on io_uring in CI stage 10, and with io_uring refused, so on epoll, in
// stage 22 (LOCKCACHED_TEST_IO=refused).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::ServerProcess;

std::string io_of(Client& client) {
  return client.stats("settings")["io"];
}

// The backend `server` runs on, from `stats settings`.
std::string io_of(const ServerProcess& server) {
  Client client;
  if (!client.connect(server.port())) return "(cannot connect: " + client.last_error() + ")";
  return io_of(client);
}

// The line of `log` that holds `text`; empty if none does.
std::string line_with(const std::string& log, std::string_view text) {
  size_t at = log.find(text);
  if (at == std::string::npos) return "";
  size_t start = log.rfind('\n', at);
  start = start == std::string::npos ? 0 : start + 1;
  return log.substr(start, log.find('\n', at) - start);
}

// Whether glog wrote a warning (a line "W<date> ...") about the I/O backend
// into `log`.
bool warns_of_io(const std::string& log) {
  for (size_t start = 0; start < log.size();) {
    size_t end = std::min(log.find('\n', start), log.size());
    std::string_view line(log.data() + start, end - start);
    if (line.size() > 1 && line[0] == 'W' && std::isdigit(line[1]) &&
        (line.find("--io") != line.npos || line.find("io_uring") != line.npos)) {
      return true;
    }
    start = end + 1;
  }
  return false;
}

// The server's log once it said it is ready (the --io=auto line comes just
// before, after the "Listening" line start() waits for).
std::string log_when_ready(const ServerProcess& server) {
  e2e::eventually([&] { return server.log().find(" ready\n") != std::string::npos; });
  return server.log();
}

constexpr std::string_view kAutoTookUring = "--io=auto: io_uring, which the kernel allows";
constexpr std::string_view kAutoTookEpoll =
    "--io=auto: epoll, because the kernel refuses io_uring (";

// The default, --io=auto, takes io_uring where the kernel allows it (this
// machine's and CI's kernels do), and says so in one line.
TEST(IoBackendE2e, TheDefaultTakesIoUringWhereTheKernelAllowsIt) {
  ServerProcess server;
  ASSERT_TRUE(server.start());
  EXPECT_EQ(io_of(server), e2e::uring_or_refused()) << server.log();
  std::string log = log_when_ready(server);
  EXPECT_FALSE(line_with(log, e2e::io_uring_refused() ? kAutoTookEpoll : kAutoTookUring).empty())
      << log;
  EXPECT_TRUE(line_with(log, e2e::io_uring_refused() ? kAutoTookUring : kAutoTookEpoll).empty())
      << log;
}

// Where the kernel refuses io_uring (as a container's seccomp profile does),
// --io=auto takes epoll, says why in one line that is no warning, and serves.
TEST(IoBackendE2e, TheDefaultTakesEpollWhereTheKernelRefusesIoUring) {
  ServerProcess server;
  server.refuse_io_uring();
  ASSERT_TRUE(server.start());
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  EXPECT_EQ(io_of(client), "epoll") << server.log();
  EXPECT_EQ(client.store("set", "k", "v"), "STORED");
  EXPECT_EQ(client.get("k"), "v");
  std::string log = log_when_ready(server);
  std::string line = line_with(log, kAutoTookEpoll);
  ASSERT_FALSE(line.empty()) << log;
  EXPECT_NE(line.find("Operation not permitted"), std::string::npos) << line;
  EXPECT_FALSE(warns_of_io(log)) << log;
}

// --io=uring where the kernel refuses io_uring: epoll, with a warning.
TEST(IoBackendE2e, IoUringAskedByNameFallsBackToEpollWithAWarning) {
  ServerProcess server;
  server.refuse_io_uring();
  ASSERT_TRUE(server.start({"--io=uring"}));
  EXPECT_EQ(io_of(server), "epoll") << server.log();
  std::string warning = line_with(server.log(), "--io=uring: ");
  ASSERT_FALSE(warning.empty()) << server.log();
  EXPECT_EQ(warning[0], 'W') << warning;
  EXPECT_NE(warning.find("; using epoll"), std::string::npos) << warning;
}

TEST(IoBackendE2e, SettingsNameTheBackendAndTheLastFlagWins) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--io=uring", "--io=epoll"}));
  EXPECT_EQ(io_of(server), "epoll");
  EXPECT_EQ(server.log().find("--io=auto"), std::string::npos) << server.log();

  ServerProcess uring;
  ASSERT_TRUE(uring.start({"--io=epoll", "--io=uring"}));
  // This kernel (the CI machine's, too) allows io_uring: no silent fallback.
  EXPECT_EQ(io_of(uring), e2e::uring_or_refused()) << uring.log();
}

// --uring_sqpoll: a kernel thread takes the submissions. Clients come and
// go, some with replies in flight: a closing connection's descriptor must
// not be closed before that thread took what names it.
TEST(IoBackendE2e, SqpollServesClientsThatComeAndGo) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--io=uring", "--uring_sqpoll", "--threads=2"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  auto settings = client.stats("settings");
  EXPECT_EQ(settings["io"], e2e::uring_or_refused()) << server.log();
  EXPECT_EQ(settings["uring_sqpoll"], e2e::io_uring_refused() ? "no" : "yes") << server.log();
  const std::string value(200 * 1000, 's');
  ASSERT_EQ(client.store("set", "v", value), "STORED");
  for (int round = 0; round < 30; ++round) {
    std::vector<Client> batch(10);
    for (Client& one : batch) {
      ASSERT_TRUE(one.connect(server.port()));
      ASSERT_TRUE(one.send("get v\r\nget v\r\n"));
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (i % 2 == 0) {
        batch[i].abort();  // gone with replies in flight
        continue;
      }
      for (int reply = 0; reply < 2; ++reply) {
        auto values = batch[i].read_values();
        ASSERT_TRUE(values.has_value()) << batch[i].last_error();
        ASSERT_EQ(values->size(), 1u);
        ASSERT_EQ((*values)[0].data, value);
      }
    }
  }
  EXPECT_EQ(client.get("v"), value);
  EXPECT_TRUE(e2e::eventually([&] {
    return e2e::stat_u64(client.stats(), "curr_connections") <=
           2;  // ours, and the listener's count
  })) << client.stats()["curr_connections"];
}

class UringE2e : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start({"--io=uring", "--threads=1"})); }

  ServerProcess server_;
};

// 200 gets of a 100 KB value (20 MB of replies, past the 4 MiB the server
// buffers for one client) go out before the client reads a byte; once the
// first reply is in, more requests follow. The server stops receiving while
// so much waits, and takes the rest once the client has read enough. Every
// reply arrives, whole and in order.
TEST_F(UringE2e, AClientThatSendsWithoutReadingGetsEveryReplyOnceItReads) {
  Client client;
  ASSERT_TRUE(client.connect(server_.port()));
  const std::string value(100 * 1000, 'v');
  ASSERT_EQ(client.store("set", "big", value), "STORED");
  constexpr int kGets = 200;
  constexpr int kLaterGets = 10;
  std::string requests;
  for (int i = 0; i < kGets; ++i)
    requests += "get big\r\n";
  ASSERT_TRUE(client.send(requests)) << client.last_error();
  for (int i = 0; i < kGets + kLaterGets; ++i) {
    auto values = client.read_values(10s);
    ASSERT_TRUE(values.has_value()) << "reply " << i << ": " << client.last_error();
    ASSERT_EQ(values->size(), 1u);
    ASSERT_EQ((*values)[0].data, value) << "reply " << i;
    if (i == 0) {
      std::string later;
      for (int j = 0; j < kLaterGets; ++j)
        later += "get big\r\n";
      ASSERT_TRUE(client.send(later + "version\r\n")) << client.last_error();
    }
  }
  EXPECT_EQ(client.read_line().rfind("VERSION ", 0), 0u);
}

// More connections than the thread's 128 receive buffers send at once; a
// receive that finds none free is armed again, and every client is answered.
TEST_F(UringE2e, MoreSendersThanReceiveBuffersAreAllAnswered) {
  constexpr int kClients = 400;
  std::vector<Client> clients(kClients);
  for (Client& client : clients)
    ASSERT_TRUE(client.connect(server_.port()));
  const std::string value(2000, 'x');
  for (int i = 0; i < kClients; ++i) {
    std::string key = "k" + std::to_string(i);
    ASSERT_TRUE(
        clients[i].send("set " + key + " 0 0 2000\r\n" + value + "\r\nget " + key + "\r\n"));
  }
  for (int i = 0; i < kClients; ++i) {
    ASSERT_EQ(clients[i].read_line(), "STORED") << "client " << i;
    auto values = clients[i].read_values();
    ASSERT_TRUE(values.has_value()) << "client " << i << ": " << clients[i].last_error();
    ASSERT_EQ(values->size(), 1u);
    EXPECT_EQ((*values)[0].data, value);
  }
}

// A multi-get of 300 values of 600 bytes (each sent from the item, not
// copied): more pieces than one send takes, so the reply goes in several.
TEST_F(UringE2e, AReplyOfManyPiecesArrivesWhole) {
  Client client;
  ASSERT_TRUE(client.connect(server_.port()));
  std::string command = "get";
  for (int i = 0; i < 300; ++i) {
    std::string key = "piece" + std::to_string(i);
    ASSERT_EQ(client.store("set", key, std::string(600, static_cast<char>('a' + i % 26))),
              "STORED");
    command += " " + key;
  }
  ASSERT_TRUE(client.send(command + "\r\n"));
  auto values = client.read_values();
  ASSERT_TRUE(values.has_value()) << client.last_error();
  ASSERT_EQ(values->size(), 300u);
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ((*values)[i].key, "piece" + std::to_string(i));
    EXPECT_EQ((*values)[i].data, std::string(600, static_cast<char>('a' + i % 26)));
  }
}

// The server's CPU time so far, in seconds (`stats` rusage_user and
// rusage_system).
double cpu_seconds(Client& client) {
  std::map<std::string, std::string> stats = client.stats();
  return std::stod(stats["rusage_user"]) + std::stod(stats["rusage_system"]);
}

// A client that half-closes with megabytes of replies owed and reads
// nothing for a while. io_uring answers a send to such a socket -EAGAIN at
// once (its wait for room wakes on the FIN), and sending again at once kept
// a core busy (0.8 s of CPU a second) for as long as the client did not
// read. The server waits for room instead; every reply arrives once the
// client reads. The bound is loose: this is no timing test, only "not a
// busy loop".
TEST_F(UringE2e, AHalfClosedClientThatReadsNothingCostsNoCpu) {
  Client client;
  ASSERT_TRUE(client.connect(server_.port()));
  const std::string value(500 * 1000, 'h');
  ASSERT_EQ(client.store("set", "big", value), "STORED");
  std::string gets;
  for (int i = 0; i < 40; ++i)
    gets += "get big\r\n";
  ASSERT_TRUE(client.send(gets));
  ASSERT_TRUE(client.shutdown_send());
  Client observer;
  ASSERT_TRUE(observer.connect(server_.port()));
  // Once the server answered enough to fill the socket: 4 MB of replies.
  ASSERT_TRUE(e2e::eventually([&] { return e2e::stat_u64(observer.stats(), "get_hits") >= 8; }));
  double before = cpu_seconds(observer);
  std::this_thread::sleep_for(1s);  // the stretch in which nothing may happen
  double spent = cpu_seconds(observer) - before;
  EXPECT_LT(spent, 0.3) << "CPU seconds in one second of waiting for the client";
  for (int i = 0; i < 40; ++i) {
    auto values = client.read_values(10s);
    ASSERT_TRUE(values.has_value()) << "reply " << i << ": " << client.last_error();
    ASSERT_EQ(values->size(), 1u);
  }
  EXPECT_TRUE(client.wait_for_close());
}

// A client that hangs up with a send in flight and requests unread: the
// connection is closed and freed, the server serves the next client.
TEST_F(UringE2e, AClientGoneMidReplyLeavesTheServerServing) {
  for (int round = 0; round < 20; ++round) {
    Client client;
    ASSERT_TRUE(client.connect(server_.port()));
    ASSERT_EQ(client.store("set", "v", std::string(500 * 1000, 'z')), "STORED");
    std::string gets;
    for (int i = 0; i < 50; ++i)
      gets += "get v\r\n";
    ASSERT_TRUE(client.send(gets));
    client.abort();
  }
  Client last;
  ASSERT_TRUE(last.connect(server_.port()));
  EXPECT_EQ(last.get("v"), std::string(500 * 1000, 'z'));
  EXPECT_TRUE(e2e::eventually([&] {
    return e2e::stat_u64(last.stats(), "curr_connections") <= 2;  // ours, and the listener's count
  })) << last.stats()["curr_connections"];
}

}  // namespace
