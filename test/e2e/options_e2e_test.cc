// memcached's own command-line options and systemd's readiness protocol,
// against the real binary.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "binary_client.h"
#include "sanitizer.h"
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

// memcached 1.6.18 starts with --verbose=2 as with -v: the value of its
// optional argument is ignored.
TEST(OptionsE2e, VerboseWithAValueIsOneV) {
  std::string log = log_of_one_session({"--verbose=2"});
  EXPECT_NE(log.find(" new cache connection"), std::string::npos) << log;
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
  std::string output = e2e::output_of_refused_start(args);
  EXPECT_NE(output.find(message), std::string::npos) << output;
}

TEST(OptionsE2e, UnknownAndUnsupportedOptionsAreRefused) {
  expect_usage_error({"-x"}, "lockcached: unknown option -x");
  expect_usage_error({"-p", "eleven"}, "-p eleven: expected a whole number");
  expect_usage_error({"-l", "127.0.0.1:11211x"}, "-l 127.0.0.1:11211x: the port must be");
  expect_usage_error({"-o", "hashpower=8"}, "-o hashpower=8: expected a whole number from 12 to 32");
  expect_usage_error({"-B", "text"}, "-B text: expected ascii, binary or auto");
  expect_usage_error({"--protocol=text"}, "--protocol: must be auto, ascii or binary");
  expect_usage_error({"--stats_prefix_delimiter=::"}, "--stats_prefix_delimiter: must be one "
                                                      "character");
}

// The settings memcached's switches give, in `stats settings` (memcached's
// names where it has them).
void expect_switched_settings(const std::map<std::string, std::string>& settings) {
  for (auto [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"cas_enabled", "no"},
                                                        {"flush_enabled", "no"},
                                                        {"dump_enabled", "no"},
                                                        {"watch_enabled", "no"},
                                                        {"shutdown_command", "yes"},
                                                        {"evictions", "off"},
                                                        {"tcp_backlog", "64"},
                                                        {"reqs_per_event", "5"},
                                                        {"binding_protocol", "ascii"},
                                                        {"stat_key_prefix", "/"},
                                                        {"detail_enabled", "yes"},
                                                        {"idle_timeout", "30"},
                                                        {"lru_crawler", "no"},
                                                        {"watcher_logbuf_size", "65536"}}) {
    EXPECT_EQ(stat_text(settings, name), value) << name;
  }
}

TEST(OptionsE2e, MemcachedSwitchesShowInStatsSettings) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-C", "-F", "-X", "-W", "-A", "-M", "-b", "64", "-R", "5", "-B",
                            "ascii", "-D", "/", "-o",
                            "idle_timeout=30,watcher_logbuf_size=64,no_lru_crawler"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  expect_switched_settings(client.stats("settings"));
  // And none of them warns: each has its meaning here.
  EXPECT_EQ(server.log().find("warning"), std::string::npos) << server.log();
}

// Each has a flag of its own, so that the flagfile can set it too.
TEST(OptionsE2e, TheSwitchesFlagsInAFlagfile) {
  std::string flagfile = ::testing::TempDir() + "switches_" + std::to_string(getpid()) + ".conf";
  {
    std::ofstream out(flagfile);
    out << "--disable_cas\n--disable_flush_all\n--disable_dumping\n--disable_watch\n"
           "--enable_shutdown\n--disable_evictions\n--listen_backlog=64\n"
           "--max_reqs_per_event=5\n--protocol=ascii\n--stats_prefix_delimiter=/\n"
           "--stats_detail\n--idle_timeout=30\n--watch_buffer_kb=64\n--lru_crawler=false\n";
  }
  ServerProcess server;
  ASSERT_TRUE(server.start({"--flagfile=" + flagfile}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  expect_switched_settings(client.stats("settings"));
  std::filesystem::remove(flagfile);
}

// -C: CAS 0 everywhere, and no CAS ever matches.
TEST(OptionsE2e, DisableCas) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-C"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  ASSERT_EQ(client.store("set", "k", "a"), "STORED");
  ASSERT_EQ(client.request("gets k"), "VALUE k 0 1 0");
  EXPECT_EQ(client.read_line(), "a");
  EXPECT_EQ(client.read_line(), "END");
  EXPECT_EQ(client.store("cas", "k", "b", 0, 0, "0"), "EXISTS");
  EXPECT_EQ(client.request("mg k c"), "HD c0");
  e2e::binary::BinClient binary;
  ASSERT_TRUE(binary.connect(server.port()));
  e2e::binary::Response got = binary.call(e2e::binary::op::kGet, "k");
  EXPECT_EQ(got.status, e2e::binary::st::kSuccess);
  EXPECT_EQ(got.cas, 0u);
  EXPECT_EQ(binary.status(e2e::binary::op::kDelete, "k", {}, {}, 1), e2e::binary::st::kExists);
}

// -F, -W and -X, which covers lockcached's own key listing too, in both
// protocols.
TEST(OptionsE2e, DisableFlushAllWatchAndDumping) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-F", "-W", "-X"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  ASSERT_EQ(client.store("set", "k", "a"), "STORED");
  EXPECT_EQ(client.request("flush_all"), "CLIENT_ERROR flush_all not allowed");
  EXPECT_EQ(client.request("watch"), "CLIENT_ERROR watch commands not allowed");
  EXPECT_EQ(client.request("keys"), "CLIENT_ERROR keys not allowed");
  EXPECT_EQ(client.request("stats cachedump 1 0"), "CLIENT_ERROR stats cachedump not allowed");
  EXPECT_EQ(client.request("lru_crawler metadump all"), "ERROR metadump not allowed");
  e2e::binary::BinClient binary;
  ASSERT_TRUE(binary.connect(server.port()));
  EXPECT_EQ(binary.status(e2e::binary::op::kFlush), 0x20);  // memcached's "Auth failure."
  EXPECT_EQ(binary.status(e2e::binary::op::kKeys), 0x20);   // as a refused flush
  EXPECT_EQ(client.get("k"), "a");
}

// -M: a full cache refuses the store rather than evict.
TEST(OptionsE2e, DisableEvictionsRefusesInsteadOfEvicting) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-M", "-m", "2"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  std::string value(100000, 'x');
  std::string reply;
  int stored = 0;
  while (stored < 100 && (reply = client.store("set", "k" + std::to_string(stored), value)) ==
                             "STORED") {
    ++stored;
  }
  EXPECT_EQ(reply, "SERVER_ERROR out of memory storing object");
  EXPECT_GT(stored, 5);
  EXPECT_EQ(client.get("k0"), value);
  auto stats = client.stats();
  EXPECT_EQ(e2e::stat_u64(stats, "evictions"), 0u);
  // As memcached counts a store that finds no room: not a set.
  EXPECT_EQ(e2e::stat_u64(stats, "store_no_memory"), 1u);
  EXPECT_EQ(e2e::stat_u64(stats, "cmd_set"), static_cast<uint64_t>(stored));
}

// -A: `shutdown` stops the server as SIGINT does, `shutdown graceful` as
// SIGUSR1; the asking connection closes without a reply.
TEST(OptionsE2e, EnableShutdown) {
  for (std::string command : {"shutdown", "shutdown graceful"}) {
    ServerProcess server;
    ASSERT_TRUE(server.start({"-A"}));
    Client client;
    ASSERT_TRUE(client.connect(server.port()));
    EXPECT_EQ(client.request("shutdown now"), "CLIENT_ERROR invalid shutdown mode");
    ASSERT_TRUE(client.send(command + "\r\n"));
    EXPECT_TRUE(client.wait_for_close());
    EXPECT_EQ(client.buffered(), "");
    std::optional<int> status = server.wait_for_exit(10s);
    EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << e2e::describe_wait_status(status);
    EXPECT_TRUE(server.wait_for_output_end(5s));
    EXPECT_NE(server.log().find(command == "shutdown" ? "Got Interrupt" : "graceful shutdown"),
              std::string::npos)
        << server.log();
  }
}

TEST(OptionsE2e, ShutdownIsRefusedWithoutEnableShutdown) {
  ServerProcess server;
  ASSERT_TRUE(server.start());
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  EXPECT_EQ(client.request("shutdown"), "ERROR: shutdown not enabled");
  EXPECT_EQ(client.request("version").rfind("VERSION ", 0), 0u);
}

// -R: a client that pipelines without end cannot keep another on the same
// thread waiting; each yields after that many requests.
void expect_no_starvation(const std::string& io) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-t", "1", "-R", "1", "--io=" + io}));
  Client flood, other;
  ASSERT_TRUE(flood.connect(server.port()));
  ASSERT_TRUE(other.connect(server.port()));
  ASSERT_EQ(flood.store("set", "counter", "0"), "STORED");
  // A sanitizer's server takes each loop turn (one per request, with -R 1)
  // some ten times slower: a tenth of the flood lasts as long.
  const int kRequests = e2e::server_sanitizer() == e2e::Sanitizer::kNone ? 100000 : 10000;
  std::string batch;
  for (int i = 0; i < 1000; ++i)
    batch += "incr counter 1\r\n";
  // The flood's replies are read as they come, so that it is never held
  // back by its own unread replies.
  std::atomic<int> answered{0};
  std::thread reader([&] {
    while (answered < kRequests && flood.read_line(30s).rfind('<', 0) != 0) ++answered;
  });
  // Straight to the socket: the reader thread owns the Client.
  std::thread writer([&, fd = flood.fd()] {
    for (int sent = 0; sent < kRequests; sent += 1000) {
      for (size_t off = 0; off < batch.size();) {
        ssize_t n = ::send(fd, batch.data() + off, batch.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return;
        off += static_cast<size_t>(n);
      }
    }
  });
  bool flooding = e2e::eventually([&] { return answered > 0; }, 10s, 1ms);
  // Answered while the flood is still at it.
  std::string value = flooding ? other.get("counter").value_or("") : "";
  int seen = answered;
  writer.join();
  reader.join();
  ASSERT_TRUE(flooding);
  EXPECT_EQ(answered, kRequests);
  ASSERT_FALSE(value.empty());
  EXPECT_LT(std::stoi(value), kRequests);
  EXPECT_LT(seen, kRequests);
  EXPECT_GT(e2e::stat_u64(other.stats(), "conn_yields"), 0u);
}

TEST(OptionsE2e, APipeliningClientCannotStarveAnother) {
  expect_no_starvation("epoll");
}

// Where the kernel refuses io_uring the server falls back to epoll.
TEST(OptionsE2e, APipeliningClientCannotStarveAnotherOnIoUring) {
  expect_no_starvation("uring");
}

// Options of memcached's own machinery: accepted, one warning line each.
TEST(OptionsE2e, OptionsWithoutEffectStartWithOneWarningEach) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-f", "1.25", "-n", "48", "-L", "-o",
                            "hashpower=16,slab_reassign,slab_automove=1,lru_maintainer",
                            "-o", "maxconns_fast,modern,track_sizes"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  EXPECT_EQ(client.store("set", "k", "v"), "STORED");
  std::string log = server.log();
  for (const char* shown : {"-f 1.25", "-n 48", "-L", "-o hashpower=16", "-o slab_reassign",
                            "-o slab_automove=1", "-o lru_maintainer"}) {
    std::string line = std::string("lockcached: warning: ") + shown + " ignored: ";
    size_t at = log.find(line);
    EXPECT_NE(at, std::string::npos) << line << "\n" << log;
    EXPECT_EQ(log.find(line, at + 1), std::string::npos) << line;
  }
  // What lockcached always does: not a word.
  size_t warnings = 0;
  for (size_t at = log.find("lockcached: warning: "); at != std::string::npos;
       at = log.find("lockcached: warning: ", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 7u) << log;
  for (const char* silent : {"maxconns_fast", "modern", "track_sizes"})
    EXPECT_EQ(log.find(std::string("-o ") + silent + " ignored"), std::string::npos) << silent;
}

TEST(OptionsE2e, LicensePrintsAndExits) {
  ServerProcess server;
  EXPECT_FALSE(server.start({"-i"}, 5s));
  std::optional<int> status = server.wait_for_exit(5s);
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << e2e::describe_wait_status(status);
  EXPECT_TRUE(server.wait_for_output_end(5s));
  EXPECT_EQ(server.log().rfind("lockcached ", 0), 0u) << server.log();
  EXPECT_NE(server.log().find("BSD 2-Clause License"), std::string::npos) << server.log();
}

// /proc/PID/status's `field` in kB, or -1.
long status_kb(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// -k: locked where the process may lock without bound, else a warning and
// a server that runs unlocked, as memcached does.
TEST(OptionsE2e, LockMemory) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-k"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  std::string locked = stat_text(client.stats("settings"), "lock_memory");
  if (geteuid() == 0) {
    EXPECT_EQ(locked, "yes");
  }
  if (locked == "yes") {
    // The sanitizers' runtimes (ASan's, TSan's) make mlockall a no-op.
    if (e2e::server_sanitizer() == e2e::Sanitizer::kNone) {
      EXPECT_GT(status_kb(server.pid(), "VmLck"), 0);
    }
  } else {
    EXPECT_NE(server.log().find("--lock_memory (-k): memory not locked"), std::string::npos)
        << server.log();
    EXPECT_EQ(status_kb(server.pid(), "VmLck"), 0);
  }
}

// -r: the core-file limit as high as the hard limit allows.
TEST(OptionsE2e, EnableCoredumps) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-r"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  EXPECT_EQ(stat_text(client.stats("settings"), "enable_coredumps"), "yes");
  std::ifstream limits("/proc/" + std::to_string(server.pid()) + "/limits");
  std::string line;
  while (std::getline(limits, line) && line.rfind("Max core file size", 0) != 0) {
  }
  std::istringstream fields(line.substr(std::string("Max core file size").size()));
  std::string soft, hard;
  fields >> soft >> hard;
  EXPECT_EQ(soft, hard) << line;
  EXPECT_NE(soft, "0") << line;
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
