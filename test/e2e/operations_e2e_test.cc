// Operational flags against the real binary: --idle_timeout and --user.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::ServerProcess;

// Connects `client`, stores a value of `size` bytes and sends `gets` gets of
// it, then `after`, in one write; reads nothing.
void ask_for_large_values(const ServerProcess& server, Client& client, size_t size, int gets,
                          const std::string& after) {
  ASSERT_TRUE(client.connect(server.port()));
  ASSERT_EQ(client.store("set", "big", std::string(size, 'v')), "STORED");
  std::string requests;
  for (int i = 0; i < gets; ++i)
    requests += "get big\r\n";
  ASSERT_TRUE(client.send(requests + after));
}

TEST(OperationsE2e, IdleTimeoutClosesIdleConnectionsOnly) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--idle_timeout=1", "--lock_port=-1"}));
  std::optional<uint16_t> lock_port = server.lock_port();
  ASSERT_TRUE(lock_port);

  Client idle, busy, holder, waiter;
  ASSERT_TRUE(idle.connect(server.port()));
  ASSERT_TRUE(busy.connect(server.port()));
  ASSERT_TRUE(holder.connect(*lock_port));
  ASSERT_TRUE(waiter.connect(*lock_port));
  ASSERT_EQ(idle.request("version").rfind("VERSION", 0), 0u);
  ASSERT_EQ(holder.request("lock quiet").rfind("200 Acquired", 0), 0u);
  // A lock wait is quiet by nature: it must outlive the idle timeout.
  ASSERT_TRUE(waiter.send("lock quiet 10\r\n"));

  // The idle client is closed within a few seconds; the busy one, which
  // keeps talking, is not.
  auto deadline = std::chrono::steady_clock::now() + 6s;
  bool idle_closed = false;
  while (!idle_closed && std::chrono::steady_clock::now() < deadline) {
    ASSERT_EQ(busy.request("version").rfind("VERSION", 0), 0u);
    ASSERT_EQ(holder.request("conn_id").rfind("200 ", 0), 0u);
    idle_closed = idle.wait_for_close(200ms);
  }
  EXPECT_TRUE(idle_closed);
  EXPECT_EQ(busy.request("version").rfind("VERSION", 0), 0u);

  // The waiter is still there and gets the lock when it is released.
  ASSERT_EQ(holder.request("unlock quiet"), "200 Released");
  EXPECT_EQ(waiter.read_line().rfind("200 Acquired", 0), 0u);
}

// A waiter sends nothing while it waits, and a wait is not idle; once the
// lock is granted, its idle time starts then, not at its `lock` line. It
// started there before, and the next sweep closed the connection, and
// released the lock just granted (lockcached-cli run lost it so, its pings
// notwithstanding). Checked through `stats conns`, which shows the same
// clock: right after the grant, 0 seconds since the waiter's last command.
TEST(OperationsE2e, IdleTimeCountsFromTheEndOfALockWait) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--idle_timeout=1", "--threads=1", "--lock_port=-1"}));
  std::optional<uint16_t> lock_port = server.lock_port();
  ASSERT_TRUE(lock_port);
  Client holder, waiter, idle, observer;
  ASSERT_TRUE(holder.connect(*lock_port));
  ASSERT_TRUE(waiter.connect(*lock_port));
  ASSERT_EQ(holder.request("lock x").rfind("200 Acquired", 0), 0u);
  ASSERT_TRUE(waiter.send("lock x 30\r\n"));
  ASSERT_TRUE(idle.connect(server.port()));
  // A sweep has closed a connection opened after the wait began: the
  // waiter has waited longer than the timeout. The holder keeps talking.
  bool idle_closed = false;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       !idle_closed && std::chrono::steady_clock::now() < deadline;) {
    ASSERT_EQ(holder.request("conn_id").rfind("200 ", 0), 0u);
    idle_closed = idle.wait_for_close(200ms);
  }
  ASSERT_TRUE(idle_closed);
  ASSERT_EQ(holder.request("unlock x"), "200 Released");
  ASSERT_EQ(waiter.read_line().rfind("200 Acquired", 0), 0u);
  ASSERT_TRUE(observer.connect(server.port()));
  std::map<std::string, std::string> conns = observer.stats("conns");
  std::string waiter_id;
  for (const auto& [name, value] : conns) {
    if (value == "tcp:" + waiter.local_address()) waiter_id = name.substr(0, name.find(':'));
  }
  ASSERT_FALSE(waiter_id.empty()) << "the waiter is not in stats conns";
  EXPECT_EQ(conns[waiter_id + ":secs_since_last_cmd"], "0");
  EXPECT_EQ(waiter.request("conn_id").rfind("200 ", 0), 0u) << "the waiter was closed";
}

// A client that reads a long reply sends nothing meanwhile: it is not idle,
// as memcached's idle_timeout counts only connections waiting for a
// request. The reader asks for 10 MB of replies and reads nothing until an
// idle client on the same thread has been closed (the sweep ran); then it
// reads every reply. It was cut off mid-reply before.
TEST(OperationsE2e, IdleTimeoutSparesAClientReadingALongReply) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--idle_timeout=1", "--threads=1"}));
  Client reader;
  constexpr int kGets = 100;
  ASSERT_NO_FATAL_FAILURE(ask_for_large_values(server, reader, 100 * 1000, kGets, ""));
  Client idle;
  ASSERT_TRUE(idle.connect(server.port()));
  ASSERT_TRUE(idle.wait_for_close(10s)) << "the server never closed an idle connection";
  for (int i = 0; i < kGets; ++i) {
    auto values = reader.read_values(10s);
    ASSERT_TRUE(values.has_value()) << "reply " << i << ": " << reader.last_error();
    ASSERT_EQ(values->size(), 1u);
  }
}

// A client that pipelines requests and reads nothing gets no more than
// about 4 MiB of replies queued (protocol::kMaxQueuedOutput), whatever one
// read of its requests asks for: here 60 gets of a 900 KB value, 54 MB,
// sent in one write. Before, every request of a read ran, and the replies
// (and the items they refer to) piled up without bound: 12 MB a
// connection for `stats`, beyond --memory_limit_mb for large values. Once
// the client reads, every reply comes, in order.
TEST(OperationsE2e, AClientThatReadsNothingGetsAFewMegabytesQueuedAtMost) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--threads=1"}));
  Client hog;
  constexpr int kGets = 60;
  ASSERT_NO_FATAL_FAILURE(ask_for_large_values(server, hog, 900 * 1000, kGets, "version\r\n"));
  Client observer;
  ASSERT_TRUE(observer.connect(server.port()));
  uint64_t hits = 0;
  ASSERT_TRUE(e2e::eventually([&] {
    hits = e2e::stat_u64(observer.stats(), "get_hits");
    return hits >= 4;
  }));
  // The gets run in one read's turn, or a few megabytes' worth at a time.
  EXPECT_LT(e2e::stat_u64(observer.stats(), "get_hits"), 20u);
  for (int i = 0; i < kGets; ++i) {
    auto values = hog.read_values(10s);
    ASSERT_TRUE(values.has_value()) << "reply " << i << ": " << hog.last_error();
    ASSERT_EQ(values->size(), 1u);
  }
  EXPECT_EQ(hog.read_line().rfind("VERSION ", 0), 0u);
}

// As root, --user drops to that user after binding; as anyone else the
// switch is impossible and the server must refuse to start rather than run
// as someone it was not asked to be.
TEST(OperationsE2e, UserDropsPrivilegesAfterBinding) {
  ServerProcess server;
  if (geteuid() == 0) {
    ASSERT_TRUE(server.start({"--user=nobody"}));
    EXPECT_TRUE(e2e::eventually([&] { return server.log().find("ready") != std::string::npos; }));
    EXPECT_NE(e2e::uid_of(server.pid()), 0u);
    Client client;
    ASSERT_TRUE(client.connect(server.port()));
    EXPECT_EQ(client.store("set", "k", "v"), "STORED");
    EXPECT_EQ(client.get("k"), "v");
  } else {
    ASSERT_TRUE(server.start({"--user=root"}));
    std::optional<int> status = server.wait_for_exit(5s);
    ASSERT_TRUE(status);
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) != 0);
  }
}

}  // namespace
