// End-to-end tests of `watch` (memcached's log streams, and our `locks`):
// a watcher connection sees what other clients do, with memcached 1.6.18's
// field names, and a watcher that stops reading loses lines, never the
// server's time.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>

#include "binary_client.h"
#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::ServerProcess;
using e2e::stat_u64;

// "a=1 b=2" -> {a: 1, b: 2}; a word without '=' maps to "".
std::map<std::string, std::string> fields(std::string_view line) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < line.size()) {
    size_t end = std::min(line.find(' ', start), line.size());
    std::string_view word = line.substr(start, end - start);
    size_t equals = word.find('=');
    out[std::string(word.substr(0, equals))] =
        equals == std::string_view::npos ? "" : std::string(word.substr(equals + 1));
    start = end + 1;
  }
  return out;
}

uint16_t local_port(const Client& client) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  getsockname(client.fd(), reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

// A connection that sent `watch ...` and reads the stream line by line.
class Watcher {
 public:
  ::testing::AssertionResult start(uint16_t port, std::string_view command) {
    if (auto connected = client_.connect(port); !connected) return connected;
    std::string reply = client_.request(command);
    if (reply != "OK") return ::testing::AssertionFailure() << command << ": " << reply;
    return ::testing::AssertionSuccess();
  }

  // The next line, without its "\n" (the stream ends lines as memcached
  // does, without "\r").
  std::string next() {
    std::optional<std::string> line = client_.read_until("\n");
    if (!line) return "<no line: " + client_.last_error() + ">";
    line->pop_back();
    return *line;
  }

  // The next line with all of `parts`; the lines before it are skipped.
  std::string next_with(std::initializer_list<std::string_view> parts) {
    for (;;) {
      std::string line = next();
      if (line.rfind("<no line", 0) == 0) return line;
      bool all = true;
      for (std::string_view part : parts)
        all = all && line.find(part) != std::string::npos;
      if (all) return line;
    }
  }

  Client& client() { return client_; }

 private:
  Client client_;
};

class WatchE2e : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start({"--threads=2"})); }

  Client connect() {
    Client client;
    EXPECT_TRUE(client.connect(server_.port()));
    return client;
  }

  ServerProcess server_;
};

TEST_F(WatchE2e, UnknownStreamsAreErrorsAndTheConnectionGoesOn) {
  Client c = connect();
  EXPECT_EQ(c.request("watch foo"), "ERROR");
  EXPECT_EQ(c.request("watch fetchers bogus"), "ERROR");
  // memcached 1.6.18 has no deletions stream.
  EXPECT_EQ(c.request("watch deletions"), "ERROR");
  EXPECT_EQ(c.store("set", "k", "v"), "STORED");
}

TEST_F(WatchE2e, WatchAloneStreamsFetchers) {
  Watcher watcher;
  ASSERT_TRUE(watcher.start(server_.port(), "watch"));
  Client c = connect();
  ASSERT_EQ(c.store("set", "foo", "bar"), "STORED");  // a mutation: not shown
  ASSERT_EQ(c.get("foo"), "bar");
  ASSERT_EQ(c.get("nope"), std::nullopt);

  std::string line = watcher.next();
  EXPECT_EQ(line.rfind("ts=", 0), 0u) << line;
  auto hit = fields(line);
  EXPECT_EQ(hit["type"], "item_get") << line;
  EXPECT_EQ(hit["key"], "foo");
  EXPECT_EQ(hit["status"], "found");
  EXPECT_EQ(hit["clsid"], "1");  // 30 + 3 + 3 + 2 bytes: jemalloc's 48-byte class
  EXPECT_EQ(hit["size"], "3");
  EXPECT_FALSE(hit["cfd"].empty());
  EXPECT_FALSE(hit["gid"].empty());
  auto miss = fields(watcher.next());
  EXPECT_EQ(miss["key"], "nope");
  EXPECT_EQ(miss["status"], "not_found");
  EXPECT_EQ(miss["clsid"], "0");
  EXPECT_EQ(miss["size"], "0");
  EXPECT_EQ(std::stoull(miss["gid"]), std::stoull(hit["gid"]) + 1);
}

TEST_F(WatchE2e, FetchersCoverGetsGatMetaAndBinaryWithKeysUriEncoded) {
  Watcher watcher;
  ASSERT_TRUE(watcher.start(server_.port(), "watch fetchers"));
  Client c = connect();
  ASSERT_EQ(c.store("set", "a:b%c", "12345"), "STORED");
  ASSERT_TRUE(c.send("gets a:b%c\r\n"));
  ASSERT_TRUE(c.read_values());
  ASSERT_TRUE(c.send("gat 100 a:b%c\r\n"));
  ASSERT_TRUE(c.read_values());
  EXPECT_EQ(c.request("mg a:b%c v"), "VA 5");
  EXPECT_EQ(c.read_line(), "12345");
  e2e::binary::BinClient binary;
  ASSERT_TRUE(binary.connect(server_.port()));
  EXPECT_EQ(binary.status(e2e::binary::op::kGet, "a:b%c"), e2e::binary::st::kSuccess);

  for (int i = 0; i < 4; ++i) {
    auto line = fields(watcher.next());
    EXPECT_EQ(line["type"], "item_get");
    EXPECT_EQ(line["key"], "a%3Ab%25c");
    EXPECT_EQ(line["status"], "found");
    EXPECT_EQ(line["size"], "5");
  }
}

TEST_F(WatchE2e, MutationsShowEachStorageCommandsOutcome) {
  Watcher watcher;
  ASSERT_TRUE(watcher.start(server_.port(), "watch mutations"));
  Client c = connect();
  ASSERT_EQ(c.store("set", "foo", "bar"), "STORED");
  ASSERT_EQ(c.store("add", "foo", "x"), "NOT_STORED");
  ASSERT_EQ(c.store("replace", "nokey", "x", 0, 1000), "NOT_STORED");
  ASSERT_EQ(c.store("append", "foo", "x"), "STORED");
  ASSERT_EQ(c.store("prepend", "foo", "y"), "STORED");
  ASSERT_EQ(c.store("cas", "foo", "z", 0, 0, "1"), "EXISTS");
  ASSERT_EQ(c.store("cas", "nokey", "z", 0, 0, "1"), "NOT_FOUND");
  ASSERT_TRUE(c.send("ms metakey 2\r\nhi\r\n"));
  ASSERT_EQ(c.read_line(), "HD");

  struct Expected {
    const char* key;
    const char* status;
    const char* cmd;
    const char* size;
  };
  for (const Expected& expected : {Expected{"foo", "stored", "set", "3"},
                                   Expected{"foo", "not_stored", "add", "1"},
                                   Expected{"nokey", "not_stored", "replace", "1"},
                                   Expected{"foo", "stored", "append", "1"},
                                   Expected{"foo", "stored", "prepend", "1"},
                                   Expected{"foo", "exists", "cas", "1"},
                                   Expected{"nokey", "not_found", "cas", "1"},
                                   Expected{"metakey", "stored", "set", "2"}}) {
    std::string line = watcher.next();
    auto f = fields(line);
    EXPECT_EQ(f["type"], "item_store") << line;
    EXPECT_EQ(f["key"], expected.key) << line;
    EXPECT_EQ(f["status"], expected.status) << line;
    EXPECT_EQ(f["cmd"], expected.cmd) << line;
    EXPECT_EQ(f["size"], expected.size) << line;
    EXPECT_EQ(f["clsid"], "1") << line;
    if (std::string_view(expected.key) == "nokey" && std::string_view(expected.cmd) == "replace") {
      // Seconds left; the clock may tick between the request and the line.
      EXPECT_TRUE(f["ttl"] == "1000" || f["ttl"] == "999") << line;
    } else {
      EXPECT_EQ(f["ttl"], "0") << line;
    }
  }
}

TEST_F(WatchE2e, ConneventsShowClientsComingAndGoing) {
  Watcher watcher;
  ASSERT_TRUE(watcher.start(server_.port(), "watch connevents"));
  Client polite = connect();
  const std::string polite_port = std::to_string(local_port(polite));
  auto opened = fields(watcher.next_with({"type=conn_new", "rport=" + polite_port}));
  EXPECT_EQ(opened["rip"], "127.0.0.1");
  EXPECT_EQ(opened["transport"], "tcp");
  ASSERT_FALSE(opened["cfd"].empty());
  ASSERT_TRUE(polite.send("quit\r\n"));
  auto closed = fields(watcher.next_with({"type=conn_close", "rport=" + polite_port}));
  EXPECT_EQ(closed["rip"], "127.0.0.1");
  EXPECT_EQ(closed["transport"], "tcp");
  EXPECT_EQ(closed["reason"], "normal");
  EXPECT_EQ(closed["cfd"], opened["cfd"]);

  Client rude = connect();
  const std::string rude_port = std::to_string(local_port(rude));
  watcher.next_with({"type=conn_new", "rport=" + rude_port});
  rude.abort();  // a reset
  auto reset = fields(watcher.next_with({"type=conn_close", "rport=" + rude_port}));
  EXPECT_EQ(reset["reason"], "error");

  // memcached hangs up on an HTTP request line, and logs that as an error.
  Client probe = connect();
  const std::string probe_port = std::to_string(local_port(probe));
  ASSERT_TRUE(probe.send("GET / HTTP/1.1\r\n"));
  EXPECT_TRUE(probe.wait_for_close());
  auto hung_up = fields(watcher.next_with({"type=conn_close", "rport=" + probe_port}));
  EXPECT_EQ(hung_up["reason"], "error");
}

// -A: the connection that asks for the stop closes as memcached logs it.
TEST(WatchShutdownE2e, TheConnectionThatAsksForShutdownClosesWithReasonShutdown) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-A"}));
  Watcher watcher;
  ASSERT_TRUE(watcher.start(server.port(), "watch connevents"));
  Client asking;
  ASSERT_TRUE(asking.connect(server.port()));
  const std::string asking_port = std::to_string(local_port(asking));
  watcher.next_with({"type=conn_new", "rport=" + asking_port});
  ASSERT_TRUE(asking.send("shutdown\r\n"));
  auto closed = fields(watcher.next_with({"type=conn_close", "rport=" + asking_port}));
  EXPECT_EQ(closed["reason"], "shutdown");
}

// One number names a client everywhere, as in memcached: the streams' cfd=
// and `stats conns`.
TEST_F(WatchE2e, StreamsAndStatsConnsNameAClientAlike) {
  Watcher watcher;
  ASSERT_TRUE(watcher.start(server_.port(), "watch fetchers"));
  Client c = connect();
  ASSERT_EQ(c.get("whose"), std::nullopt);
  auto fetched = fields(watcher.next_with({"key=whose "}));
  ASSERT_FALSE(fetched["cfd"].empty());
  std::map<std::string, std::string> conns = c.stats("conns");
  EXPECT_EQ(conns[fetched["cfd"] + ":addr"], "tcp:" + c.local_address());
  EXPECT_EQ(conns[fetched["cfd"] + ":state"], "conn_parse_cmd");  // the one asking
}

TEST_F(WatchE2e, RepliesPipelinedBeforeWatchComeFirst) {
  Client c = connect();
  ASSERT_TRUE(c.send("get x\r\nwatch\r\nget y\r\n"));
  EXPECT_EQ(c.read_line(), "END");
  EXPECT_EQ(c.read_line(), "OK");  // and "get y" is ignored
  Client other = connect();
  ASSERT_EQ(other.get("z"), std::nullopt);
  std::optional<std::string> line = c.read_until("\n");
  ASSERT_TRUE(line);
  EXPECT_NE(line->find("key=z "), std::string::npos) << *line;
}

TEST_F(WatchE2e, AWatcherIgnoresWhatItSendsAndIsCountedInStats) {
  Watcher watcher;
  ASSERT_TRUE(watcher.start(server_.port(), "watch fetchers"));
  ASSERT_TRUE(watcher.client().send("get mine\r\nversion\r\n"));  // ignored, as memcached does
  Client c = connect();
  EXPECT_EQ(stat_u64(c.stats(), "log_watchers"), 1u);
  ASSERT_EQ(c.get("theirs"), std::nullopt);
  std::string line = watcher.next();
  EXPECT_NE(line.find("key=theirs "), std::string::npos) << line;
  auto stats = c.stats();
  EXPECT_GE(stat_u64(stats, "log_watcher_sent"), 1u);
  EXPECT_EQ(stat_u64(stats, "log_watcher_skipped"), 0u);
  // memcached's state for it, and `stats reset` starts its counters again.
  std::map<std::string, std::string> conns = c.stats("conns");
  EXPECT_EQ(std::count_if(conns.begin(), conns.end(),
                          [](const auto& field) { return field.second == "conn_watch"; }),
            1)
      << ::testing::PrintToString(conns);
  EXPECT_EQ(c.request("stats reset"), "RESET");
  stats = c.stats();
  EXPECT_EQ(stat_u64(stats, "log_watcher_sent"), 0u);
  EXPECT_EQ(stat_u64(stats, "log_watchers"), 1u);
  watcher.client().close();
  EXPECT_TRUE(e2e::eventually([&] { return stat_u64(c.stats(), "log_watchers") == 0; }));
}

TEST(WatchEvictionsE2e, EvictionsShowWhatTheClockHandTakes) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--memory_limit_mb=1", "--max_item_size=1024"}));
  Watcher watcher;
  ASSERT_TRUE(watcher.start(server.port(), "watch evictions"));
  Client writer;
  ASSERT_TRUE(writer.connect(server.port()));
  const std::string value(900, 'v');
  for (int i = 0; i < 3000; ++i)
    ASSERT_EQ(writer.store("set", "item" + std::to_string(i), value), "STORED") << i;
  ASSERT_GT(stat_u64(writer.stats(), "evictions"), 0u);

  std::string line = watcher.next();
  auto f = fields(line);
  EXPECT_EQ(f["type"], "eviction") << line;
  EXPECT_EQ(f["key"].rfind("item", 0), 0u) << line;
  EXPECT_EQ(f["fetch"], "no") << line;
  EXPECT_EQ(f["ttl"], "-1") << line;
  EXPECT_FALSE(f["la"].empty()) << line;
  EXPECT_EQ(f["clsid"], "18") << line;  // ~940 bytes: jemalloc's 1024-byte class
  EXPECT_EQ(f["size"], "900") << line;
}

TEST_F(WatchE2e, LocksShowACacheLockAndItsReleaseOnDisconnect) {
  Watcher watcher;
  ASSERT_TRUE(watcher.start(server_.port(), "watch locks"));
  Client holder = connect();
  Client other = connect();
  const std::string holder_port = std::to_string(local_port(holder));
  ASSERT_EQ(holder.store("set", "k", "v"), "STORED");
  ASSERT_EQ(holder.request("lock k"), "OK");
  ASSERT_EQ(other.request("lock k"), "LOCKED");

  std::string line = watcher.next();
  auto granted = fields(line);
  EXPECT_EQ(granted["type"], "item_lock") << line;
  EXPECT_EQ(granted["key"], "k");
  EXPECT_EQ(granted["status"], "granted");
  EXPECT_EQ(granted["rip"], "127.0.0.1");
  EXPECT_EQ(granted["rport"], holder_port);
  ASSERT_FALSE(granted["conn"].empty());
  auto refused = fields(watcher.next());
  EXPECT_EQ(refused["type"], "item_lock");
  EXPECT_EQ(refused["status"], "locked");
  EXPECT_NE(refused["conn"], granted["conn"]);
  EXPECT_EQ(refused["rport"], std::to_string(local_port(other)));

  holder.close();
  line = watcher.next();
  auto released = fields(line);
  EXPECT_EQ(released["type"], "item_unlock") << line;
  EXPECT_EQ(released["key"], "k");
  EXPECT_EQ(released["status"], "released");
  EXPECT_EQ(released["reason"], "disconnect");
  EXPECT_EQ(released["conn"], granted["conn"]);
  EXPECT_EQ(released["rip"], "127.0.0.1");
  EXPECT_EQ(released["rport"], holder_port);
  EXPECT_EQ(other.request("lock k"), "OK");
}

// A lock ends in other ways too, each named: its holder's delete, and a
// binary Quit (a disconnect, as a text `quit` is).
TEST_F(WatchE2e, LocksShowALockEndedByDeleteAndByABinaryQuit) {
  Watcher watcher;
  ASSERT_TRUE(watcher.start(server_.port(), "watch locks"));
  Client holder = connect();
  ASSERT_EQ(holder.store("set", "d", "v"), "STORED");
  ASSERT_EQ(holder.request("lock d"), "OK");
  EXPECT_EQ(fields(watcher.next())["status"], "granted");
  ASSERT_EQ(holder.request("delete d"), "DELETED");
  auto deleted = fields(watcher.next_with({"type=item_unlock"}));
  EXPECT_EQ(deleted["key"], "d");
  EXPECT_EQ(deleted["reason"], "delete");

  e2e::binary::BinClient binary;
  ASSERT_TRUE(binary.connect(server_.port()));
  ASSERT_EQ(holder.store("set", "q", "v"), "STORED");
  ASSERT_EQ(binary.status(e2e::binary::op::kLock, "q"), 0);
  EXPECT_EQ(fields(watcher.next_with({"type=item_lock"}))["key"], "q");
  EXPECT_EQ(binary.status(e2e::binary::op::kQuit), 0);
  auto quit = fields(watcher.next_with({"type=item_unlock"}));
  EXPECT_EQ(quit["key"], "q");
  EXPECT_EQ(quit["reason"], "disconnect");
}

TEST(WatchLockServiceE2e, LocksShowTheLockServicesGrantsWaitsAndReleases) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--lock_port=-1"}));
  std::optional<uint16_t> lock_port = server.lock_port();
  ASSERT_TRUE(lock_port);
  Watcher watcher;
  ASSERT_TRUE(watcher.start(server.port(), "watch locks"));
  Client first, second;
  ASSERT_TRUE(first.connect(*lock_port));
  ASSERT_TRUE(second.connect(*lock_port));
  const std::string first_port = std::to_string(local_port(first));
  ASSERT_EQ(first.request("set_timeout 0"), "200 Timeout set");
  const std::string first_id = first.request("conn_id").substr(4);
  std::string acquired = first.request("lock job");
  ASSERT_EQ(acquired.rfind("200 Acquired ", 0), 0u) << acquired;
  ASSERT_TRUE(second.send("lock job 30\r\n"));

  auto grant = fields(watcher.next());
  EXPECT_EQ(grant["type"], "lock_grant");
  EXPECT_EQ(grant["name"], "job");
  EXPECT_EQ(grant["token"], acquired.substr(13));
  EXPECT_EQ(grant["rip"], "127.0.0.1");
  EXPECT_EQ(grant["rport"], first_port);
  // Its public part only: a watcher must not learn what resumes the session.
  EXPECT_EQ(grant["session"], e2e::session_serial(first_id)) << first_id;
  EXPECT_NE(grant["session"], first_id);
  EXPECT_FALSE(grant["session"].empty());
  auto wait = fields(watcher.next());
  EXPECT_EQ(wait["type"], "lock_wait");
  EXPECT_EQ(wait["name"], "job");
  EXPECT_EQ(wait["timeout_ms"], "30000");
  EXPECT_EQ(wait["rport"], std::to_string(local_port(second)));

  first.close();
  std::string granted_second = second.read_line();
  ASSERT_EQ(granted_second.rfind("200 Acquired ", 0), 0u) << granted_second;
  auto release = fields(watcher.next());
  EXPECT_EQ(release["type"], "lock_release");
  EXPECT_EQ(release["name"], "job");
  EXPECT_EQ(release["reason"], "disconnect");
  EXPECT_EQ(release["session"], grant["session"]);
  EXPECT_EQ(release["rport"], first_port);
  auto handed_over = fields(watcher.next());
  EXPECT_EQ(handed_over["type"], "lock_grant");
  EXPECT_EQ(handed_over["token"], granted_second.substr(13));
  EXPECT_EQ(handed_over["session"], wait["session"]);
}

// Everything a socket receives, read on a thread of its own.
class Collector {
 public:
  explicit Collector(int fd) : fd_(fd), thread_([this] { run(); }) {}
  // Owns `fd` from now on.
  ~Collector() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  // Waits until the text read so far contains `part`; its position or npos.
  size_t wait_for(std::string_view part, std::chrono::milliseconds timeout = e2e::kReplyTimeout) {
    std::unique_lock lock(mutex_);
    size_t at = std::string::npos;
    changed_.wait_for(lock, timeout, [&] {
      at = text_.find(part);
      return at != std::string::npos || ended_;
    });
    return at;
  }
  std::string text() const {
    std::lock_guard lock(mutex_);
    return text_;
  }

 private:
  void run() {
    char buffer[65536];
    for (;;) {
      ssize_t received = ::recv(fd_, buffer, sizeof buffer, 0);
      std::lock_guard lock(mutex_);
      if (received <= 0) {
        ended_ = true;
        changed_.notify_all();
        return;
      }
      text_.append(buffer, static_cast<size_t>(received));
      changed_.notify_all();
    }
  }

  int fd_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string text_;
  bool ended_ = false;
  std::thread thread_;
};

TEST_F(WatchE2e, AStalledWatcherLosesLinesWhileOthersKeepWorking) {
  // A watcher with a tiny receive buffer that stops reading after "OK".
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  int tiny = 4096;
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &tiny, sizeof tiny), 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server_.port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  std::string_view command = "watch fetchers mutations\r\n";
  ASSERT_EQ(::send(fd, command.data(), command.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(command.size()));
  char ok[4];
  ASSERT_EQ(::recv(fd, ok, sizeof ok, MSG_WAITALL), 4);
  ASSERT_EQ(std::string_view(ok, 4), "OK\r\n");

  // Others go on, round trip after round trip, until the watcher's buffer
  // overflowed: each round trip is two lines for it.
  Client c = connect();
  uint64_t round_trips = 0;
  uint64_t skipped = 0;
  while (skipped == 0 && round_trips < 400000) {
    for (int i = 0; i < 2000; ++i, ++round_trips) {
      std::string key = "key" + std::to_string(round_trips % 500);
      std::string value = "value" + std::to_string(round_trips);
      ASSERT_EQ(c.store("set", key, value), "STORED") << round_trips;
      ASSERT_EQ(c.get(key), value) << round_trips;
    }
    auto stats = c.stats();
    skipped = stat_u64(stats, "log_watcher_skipped");
    ASSERT_EQ(stat_u64(stats, "log_watchers"), 1u);  // still there, just slow
  }
  ASSERT_GT(skipped, 0u) << "the watcher never fell behind in " << round_trips << " round trips";

  // It reads again: a line that gets through after the drops comes after
  // memcached's "skipped=N". A marker dropped because the buffer had not
  // been taken yet is counted as skipped; then the next one is tried.
  // The server's socket holds megabytes by now. Read through the tiny
  // buffer, they take ~800 reads, each a wake-up of the reading thread: on
  // a loaded 2-CPU machine (a CI stage of sanitized servers) that ran past
  // all the markers. A normal buffer takes them in ~60.
  int normal = 1 << 20;
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &normal, sizeof normal), 0);
  Collector collector(fd);
  size_t marker_at = std::string::npos;
  std::string marker;
  for (int i = 0; i < 100000 && marker_at == std::string::npos; ++i) {
    uint64_t before = stat_u64(c.stats(), "log_watcher_skipped");
    marker = "marker" + std::to_string(i);
    ASSERT_EQ(c.get(marker), std::nullopt);
    if (stat_u64(c.stats(), "log_watcher_skipped") == before) {
      marker_at = collector.wait_for("key=" + marker + " ");
      ASSERT_NE(marker_at, std::string::npos) << marker << " never arrived";
    }
  }
  if (marker_at == std::string::npos) {
    // What the server and the watcher saw, for whoever reads the failure.
    std::string states;
    for (const auto& [name, value] : c.stats("conns")) states += name + "=" + value + " ";
    FAIL() << "every marker was dropped; the watcher read " << collector.text().size()
           << " bytes; skipped " << stat_u64(c.stats(), "log_watcher_skipped") << "; " << states;
  }
  std::string text = collector.text();
  size_t skipped_at = text.rfind("\nskipped=", marker_at);
  ASSERT_NE(skipped_at, std::string::npos) << e2e::escape(text.substr(0, 400));
  uint64_t reported = std::stoull(text.substr(skipped_at + 9));
  EXPECT_GT(reported, 0u);
  // Whole lines only, each a stamp or a skipped count.
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) break;
    std::string_view line(text.data() + start, end - start);
    EXPECT_TRUE(line.rfind("ts=", 0) == 0 || line.rfind("skipped=", 0) == 0) << line;
    start = end + 1;
  }
}

}  // namespace
