// End-to-end tests of lockcached-cli (docs/cli.md): the real client binary,
// run as a subprocess against the real server on ports the kernel picks.
//
// Commands run under `lockcached-cli run` talk back through files and fifos:
// a job appends to a log file, and a job that must stay inside its lock
// blocks reading a fifo until the test writes to it. Where the test needs a
// job to be queued on a lock, it asks the lock service (`stats locks`) instead
// of sleeping.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "server_process.h"


namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::eventually;
using e2e::ServerProcess;
namespace fs = std::filesystem;

// How long a CLI run may take before the test gives up on it; only reached
// when the test is failing anyway.
constexpr auto kRunTimeout = 30s;

constexpr int kExitNo = 1;
constexpr int kExitUsage = 64;
constexpr int kExitUnavailable = 69;
constexpr int kExitTempFail = 75;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return {};
  return value;
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

// The pointers execve() wants: one per string, then a null.
std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& string : strings)
    pointers.push_back(string.data());
  pointers.push_back(nullptr);
  return pointers;
}

// The environment a lockcached-cli under test gets: this process's (PATH for
// the commands `run` starts, sanitizer settings...) without any LOCKCACHED_*
// variable, so that one left in the shell that runs the tests cannot point
// the CLI elsewhere, plus `variables` ("NAME=value").
std::vector<std::string> cli_environment(const std::vector<std::string>& variables) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!std::string_view(*entry).starts_with("LOCKCACHED_")) entries.emplace_back(*entry);
  }
  entries.insert(entries.end(), variables.begin(), variables.end());
  return entries;
}

// One lockcached-cli process in a process group of its own (so that the
// command it runs can be cleaned up with it), its stdin read from a file and
// its stdout and stderr written to files in `dir`, its environment
// cli_environment(variables). With `sigchld_ignored`, it starts with SIGCHLD
// ignored, as a daemon that ignores it passes it on.
class CliProcess {
 public:
  CliProcess(const fs::path& dir, const std::string& tag, const std::vector<std::string>& args,
             std::string_view input = "", const std::vector<std::string>& variables = {},
             bool sigchld_ignored = false)
      : out_(dir / (tag + ".out")), err_(dir / (tag + ".err")) {
    fs::path in = dir / (tag + ".in");
    write_file(in, input);
    std::vector<std::string> words = {e2e::cli_binary()};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv = pointers_to(words);
    // Built before fork(): the child may only make async-signal-safe calls.
    std::vector<std::string> environment = cli_environment(variables);
    std::vector<char*> envp = pointers_to(environment);
    int in_fd = open(in.c_str(), O_RDONLY | O_CLOEXEC);
    int out_fd = open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err_fd = open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      dup2(in_fd, STDIN_FILENO);
      dup2(out_fd, STDOUT_FILENO);
      dup2(err_fd, STDERR_FILENO);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      signal(SIGPIPE, SIG_DFL);
      if (sigchld_ignored) signal(SIGCHLD, SIG_IGN);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    // Both sides set the group, so that it exists before anyone signals it.
    if (pid_ > 0) setpgid(pid_, pid_);
    close(in_fd);
    close(out_fd);
    close(err_fd);
    pidfd_ = pid_ > 0 ? open_pidfd(pid_) : -1;
  }

  // Kills what is left of the group: the CLI and any command it started.
  ~CliProcess() {
    if (pid_ <= 0) return;
    kill(-pid_, SIGKILL);
    if (!status_) waitpid(pid_, nullptr, 0);
    if (pidfd_ >= 0) close(pidfd_);
  }

  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // The exit status as a shell reports it (128+N for signal N); nullopt if
  // it is still running after `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout = kRunTimeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!status_) {
      int status = 0;
      pid_t reaped = waitpid(pid_, &status, WNOHANG);
      if (reaped == pid_) {
        status_ = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        break;
      }
      if (reaped < 0 && errno != EINTR) break;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left <= 0ms) break;
      if (pidfd_ >= 0) {
        pollfd poll_fd{pidfd_, POLLIN, 0};
        poll(&poll_fd, 1, static_cast<int>(left.count()));
      } else {
        std::this_thread::sleep_for(10ms);
      }
    }
    return status_;
  }

  std::string out() const { return read_file(out_); }
  std::string err() const { return read_file(err_); }

 private:
  fs::path out_;
  fs::path err_;
  pid_t pid_ = -1;
  int pidfd_ = -1;
  std::optional<int> status_;
};

// A port on 127.0.0.1 where connecting is refused: a bound socket that does
// not listen, for as long as this object lives.
class RefusingPort {
 public:
  RefusingPort() = default;
  ~RefusingPort() {
    if (fd_ >= 0) close(fd_);
  }
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;

  ::testing::AssertionResult open() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return ::testing::AssertionFailure() << "socket: " << std::strerror(errno);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      return ::testing::AssertionFailure() << "bind: " << std::strerror(errno);
    }
    port_ = std::to_string(ntohs(address.sin_port));
    return ::testing::AssertionSuccess();
  }

  const std::string& port() const { return port_; }

 private:
  int fd_ = -1;
  std::string port_;
};

// A lock service that plays a cluster member by a script, one step per
// connection: the first line a connection sends is answered with the step's
// line, or the connection is reset (kReset: as a member resets its
// lock-service connections once a leader is elected, or as it stops
// leading, one opened a moment before included). Past the script it serves
// as a leader would: every change answered 200, lock with token 42. Counts
// the connections it took.
class ScriptedLockService {
 public:
  static constexpr std::string_view kReset = "";
  // A step that answers every request but a lock "200 OK", and resets the
  // connection `ms` after a `lock`: a leader that closes its connections
  // (a failover) while its client waits.
  static std::string reset_while_waiting(int ms) { return "\x01" + std::to_string(ms); }
  // A step that answers every request but a lock "200 OK", and a `lock`
  // with `reply`.
  static std::string answer_lock_with(const std::string& reply) { return "\x02" + reply; }
  // A step that answers every request with `reply`: a follower, which
  // answers every change (`set_timeout` too) "503 not leader: ...".
  static std::string answer_all_with(const std::string& reply) { return "\x03" + reply; }

  explicit ScriptedLockService(std::vector<std::string> script) : script_(std::move(script)) {}
  ~ScriptedLockService() {
    stop();
    if (fd_ >= 0) close(fd_);
  }
  ScriptedLockService(const ScriptedLockService&) = delete;
  ScriptedLockService& operator=(const ScriptedLockService&) = delete;

  ::testing::AssertionResult start() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        listen(fd_, 8) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      return ::testing::AssertionFailure() << "listening: " << std::strerror(errno);
    }
    port_ = std::to_string(ntohs(address.sin_port));
    thread_ = std::thread([this] { serve(); });
    return ::testing::AssertionSuccess();
  }

  const std::string& port() const { return port_; }

  // Stops serving; returns how many connections it took.
  int stop() {
    if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);  // ends the accept loop
    if (thread_.joinable()) thread_.join();
    return connections_;
  }

 private:
  void serve() {
    for (int client; (client = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; close(client)) {
      size_t step = static_cast<size_t>(connections_++);
      std::string line = read_line(client);
      if (step < script_.size() && script_[step].starts_with('\x01')) {
        for (; !line.empty() && !line.starts_with("lock "); line = read_line(client))
          reply(client, "200 OK");
        std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(script_[step].substr(1))));
        linger reset = {1, 0};
        setsockopt(client, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
      } else if (step < script_.size() && script_[step].starts_with('\x02')) {
        for (; !line.empty() && !line.starts_with("lock "); line = read_line(client))
          reply(client, "200 OK");
        reply(client, script_[step].substr(1));
        for (line = read_line(client); !line.empty(); line = read_line(client))
          reply(client, "200 OK");
      } else if (step < script_.size() && script_[step].starts_with('\x03')) {
        for (; !line.empty(); line = read_line(client))
          reply(client, script_[step].substr(1));
      } else if (step < script_.size() && script_[step] != kReset) {
        reply(client, script_[step]);
      } else if (step < script_.size()) {
        linger reset = {1, 0};  // close with a reset, as a member does
        setsockopt(client, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
      } else {
        for (; !line.empty(); line = read_line(client)) {
          reply(client, line.starts_with("lock ") ? "200 Acquired 42" : "200 OK");
        }
      }
    }
  }

  static std::string read_line(int client) {
    std::string line;
    for (char c; recv(client, &c, 1, 0) == 1 && c != '\n';) {
      if (c != '\r') line += c;
    }
    return line;
  }

  static void reply(int client, const std::string& line) {
    std::string bytes = line + "\r\n";
    ssize_t ignored = send(client, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    (void)ignored;
  }

  const std::vector<std::string> script_;
  int fd_ = -1;
  std::string port_;
  std::thread thread_;
  int connections_ = 0;  // the serving thread's until stop() joins it
};

struct CliResult {
  int status = -1;  // -1: did not end in time
  std::string out;
  std::string err;
};

void PrintTo(const CliResult& r, std::ostream* os) {
  *os << "{status=" << r.status << " out=\"" << e2e::escape(r.out) << "\" err=\""
      << e2e::escape(r.err) << "\"}";
}

// One "LOCK <name> <session> <held_ms> <waiters> <token> <client>" line of the lock
// service's `stats locks`.
struct LockLine {
  std::string session;
  uint64_t waiters = 0;
  uint64_t token = 0;
};

class CliE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/lockcached-cli-test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr) << std::strerror(errno);
    dir_ = pattern;
    ASSERT_TRUE(server_.start({"--lock_port=-1", "--threads=2"}));
    std::optional<uint16_t> lock_port = server_.lock_port();
    ASSERT_TRUE(lock_port) << "no lock-service port in the server's log";
    lock_port_ = *lock_port;
  }

  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  std::vector<std::string> cache_args(std::vector<std::string> args, bool binary = false) {
    std::vector<std::string> all = {"--host", "127.0.0.1", "--port",
                                    std::to_string(server_.port())};
    if (binary) all.push_back("--binary");
    all.insert(all.end(), args.begin(), args.end());
    return all;
  }

  std::vector<std::string> run_args(const std::string& name, std::vector<std::string> options,
                                    std::vector<std::string> command) {
    std::vector<std::string> all = {
        "--host", "127.0.0.1", "--lock-port", std::to_string(lock_port_), "run", name};
    all.insert(all.end(), options.begin(), options.end());
    all.push_back("--");
    all.insert(all.end(), command.begin(), command.end());
    return all;
  }

  // `run job` against the lock service on `lock_port` (a scripted one), with
  // `global` options before `run` and `options` after it; its COMMAND prints
  // the fencing token it was given.
  CliResult run_printing_token(const std::string& lock_port, std::vector<std::string> global = {},
                               std::vector<std::string> options = {}) {
    std::vector<std::string> all = {"--host", "127.0.0.1", "--lock-port", lock_port};
    all.insert(all.end(), global.begin(), global.end());
    all.insert(all.end(), {"run", "job"});
    all.insert(all.end(), options.begin(), options.end());
    all.insert(all.end(), {"--", "sh", "-c", "printf %s \"$LOCKCACHED_FENCING_TOKEN\""});
    return run(all);
  }

  // --host, --port and --lock-port, all pointing at server_.
  std::vector<std::string> both_ports_args(std::vector<std::string> args) {
    std::vector<std::string> all = {"--host",      "127.0.0.1",
                                    "--port",      std::to_string(server_.port()),
                                    "--lock-port", std::to_string(lock_port_)};
    all.insert(all.end(), args.begin(), args.end());
    return all;
  }

  std::unique_ptr<CliProcess> start(const std::vector<std::string>& args,
                                    std::string_view input = "",
                                    const std::vector<std::string>& variables = {}) {
    auto process =
        std::make_unique<CliProcess>(dir_, "cli" + std::to_string(++runs_), args, input, variables);
    EXPECT_TRUE(process->started());
    return process;
  }

  CliResult run(const std::vector<std::string>& args, std::string_view input = "",
                const std::vector<std::string>& variables = {}) {
    std::unique_ptr<CliProcess> process = start(args, input, variables);
    CliResult result;
    result.status = process->wait().value_or(-1);
    result.out = process->out();
    result.err = process->err();
    return result;
  }

  // Runs with `variables` ("NAME=value") in the CLI's environment.
  CliResult run_with(const std::vector<std::string>& variables,
                     const std::vector<std::string>& args) {
    return run(args, "", variables);
  }

  CliResult cache(std::vector<std::string> args, bool binary = false, std::string_view input = "") {
    return run(cache_args(std::move(args), binary), input);
  }

  Client connect_cache() {
    Client client;
    EXPECT_TRUE(client.connect(server_.port()));
    return client;
  }

  Client connect_lock_service() {
    Client client;
    EXPECT_TRUE(client.connect(lock_port_));
    return client;
  }

  // The lock service's view of lock `name`; nullopt while nobody holds it.
  std::optional<LockLine> lock_line(const std::string& name) {
    Client client = connect_lock_service();
    EXPECT_EQ(client.request("stats locks " + name), "200 LOCKS");
    std::optional<LockLine> found;
    for (std::string line = client.read_line(); line != "END"; line = client.read_line()) {
      std::istringstream words(line);
      std::string tag, lock_name;
      uint64_t held_ms = 0;
      LockLine lock;
      if (!(words >> tag >> lock_name >> lock.session >> held_ms >> lock.waiters >> lock.token) ||
          tag != "LOCK") {
        ADD_FAILURE() << "unexpected stats locks line \"" << e2e::escape(line) << "\"";
        return std::nullopt;
      }
      if (lock_name == name) found = lock;
    }
    return found;
  }

  fs::path make_fifo(const std::string& name) {
    fs::path path = dir_ / name;
    EXPECT_EQ(mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
    return path;
  }

  // Lets a job blocked reading `fifo` go on: waits (bounded) for its reader
  // to open the fifo, then writes a line and closes it.
  ::testing::AssertionResult open_fifo(const fs::path& fifo) {
    int fd = -1;
    // Opening for writing without blocking fails (ENXIO) until a reader
    // has it open: the job's own state, not a timing guess.
    eventually([&] { return (fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) >= 0; },
               10s, 10ms);
    if (fd < 0) return ::testing::AssertionFailure() << "nobody opened " << fifo << " to read";
    ssize_t written = write(fd, "go\n", 3);
    close(fd);
    if (written != 3) return ::testing::AssertionFailure() << "write to " << fifo << " failed";
    return ::testing::AssertionSuccess();
  }

  // Waits (bounded) until `path` holds `text`; the job wrote it.
  bool file_contains(const fs::path& path, std::string_view text) {
    return eventually([&] { return read_file(path).find(text) != std::string::npos; }, 10s, 10ms);
  }

  ServerProcess server_;
  uint16_t lock_port_ = 0;
  fs::path dir_;
  int runs_ = 0;
};

// --- cache commands ------------------------------------------------------------

class CliCacheE2e : public CliE2e, public ::testing::WithParamInterface<bool> {
 protected:
  bool binary() const { return GetParam(); }
  CliResult cache(std::vector<std::string> args, std::string_view input = "") {
    return CliE2e::cache(std::move(args), binary(), input);
  }
};

TEST_P(CliCacheE2e, SetGetDeleteRoundTrip) {
  CliResult set = cache({"set", "greeting", "hello", "--flags", "7", "--exptime", "3600"});
  ASSERT_EQ(set.status, 0) << ::testing::PrintToString(set);

  CliResult get = cache({"get", "greeting"});
  EXPECT_EQ(get.status, 0) << ::testing::PrintToString(get);
  EXPECT_EQ(get.out, "hello\n");

  // The flags arrived: another client sees them.
  Client client = connect_cache();
  ASSERT_TRUE(client.send("get greeting\r\n"));
  std::optional<std::vector<e2e::Value>> values = client.read_values();
  ASSERT_TRUE(values) << client.last_error();
  ASSERT_EQ(values->size(), 1u);
  EXPECT_EQ((*values)[0], (e2e::Value{"greeting", 7, "hello", std::nullopt}));

  CliResult removed = cache({"delete", "greeting"});
  EXPECT_EQ(removed.status, 0) << ::testing::PrintToString(removed);
  EXPECT_EQ(client.get("greeting"), std::nullopt);

  CliResult miss = cache({"get", "greeting"});
  EXPECT_EQ(miss.status, kExitNo);
  EXPECT_EQ(miss.out, "");
  EXPECT_NE(miss.err.find("not found"), std::string::npos) << miss.err;

  CliResult removed_again = cache({"delete", "greeting"});
  EXPECT_EQ(removed_again.status, kExitNo);
}

TEST_P(CliCacheE2e, SetReadsTheValueFromStandardInputByteForByte) {
  std::string value = "line 1\nline 2\r\n\x01\xff end";
  CliResult set = cache({"set", "blob", "-"}, value);
  ASSERT_EQ(set.status, 0) << ::testing::PrintToString(set);
  Client client = connect_cache();
  EXPECT_EQ(client.get("blob"), value);
  EXPECT_EQ(cache({"get", "blob"}).out, value + "\n");
}

TEST_P(CliCacheE2e, GetPrintsEveryHitInOrderAndFailsOnAMiss) {
  Client client = connect_cache();
  ASSERT_EQ(client.store("set", "a", "1"), "STORED");
  ASSERT_EQ(client.store("set", "b", "2"), "STORED");
  CliResult get = cache({"get", "b", "missing", "a"});
  EXPECT_EQ(get.status, kExitNo);
  EXPECT_EQ(get.out, "2\n1\n");
  EXPECT_NE(get.err.find("missing"), std::string::npos) << get.err;
}

TEST_P(CliCacheE2e, KeysListsTheKeysWithThePrefix) {
  Client client = connect_cache();
  for (const char* key : {"job:1", "job:2", "other"})
    ASSERT_EQ(client.store("set", key, "x"), "STORED");
  CliResult keys = cache({"keys", "job:"});
  ASSERT_EQ(keys.status, 0) << ::testing::PrintToString(keys);
  std::vector<std::string> listed = lines_of(keys.out);
  EXPECT_EQ(std::multiset<std::string>(listed.begin(), listed.end()),
            (std::multiset<std::string>{"job:1", "job:2"}));

  CliResult all = cache({"keys"});
  EXPECT_EQ(lines_of(all.out).size(), 3u) << all.out;
}

TEST_P(CliCacheE2e, StatsPrintsTheServersNumbers) {
  CliResult stats = cache({"stats"});
  ASSERT_EQ(stats.status, 0) << ::testing::PrintToString(stats);
  std::vector<std::string> lines = lines_of(stats.out);
  std::string pid_line = "pid " + std::to_string(server_.pid());
  EXPECT_NE(std::find(lines.begin(), lines.end(), pid_line), lines.end()) << stats.out;
  EXPECT_NE(stats.out.find("\ncurr_locks "), std::string::npos) << stats.out;
}

// Groups that answer other than STAT lines: `stats reset` (RESET) and
// `stats detail on|off` (OK) print nothing and exit 0; `stats detail dump`
// (PREFIX lines) and `stats cachedump` (ITEM lines) print the server's
// lines as they come. A refusal still exits 1.
TEST_P(CliCacheE2e, StatsGroupsOfOtherLinesArePrinted) {
  CliResult on = cache({"stats", "detail", "on"});
  EXPECT_EQ(on.status, 0) << ::testing::PrintToString(on);
  EXPECT_EQ(on.out, "");
  Client client = connect_cache();
  ASSERT_EQ(client.store("set", "p:x", "1"), "STORED");
  CliResult dump = cache({"stats", "detail", "dump"});
  EXPECT_EQ(dump.status, 0) << ::testing::PrintToString(dump);
  EXPECT_NE(dump.out.find("PREFIX p get 0 hit 0 set 1 del 0"), std::string::npos)
      << ::testing::PrintToString(dump);
  EXPECT_EQ(cache({"stats", "detail", "off"}).status, 0);
  if (!binary()) {
    std::string slab_class;
    for (const auto& [name, value] : client.stats("items")) {
      if (name.starts_with("items:") && name.ends_with(":number")) {
        slab_class = name.substr(6, name.size() - 6 - 7);
      }
    }
    ASSERT_FALSE(slab_class.empty());
    CliResult items = cache({"stats", "cachedump", slab_class, "5"});
    EXPECT_EQ(items.status, 0) << ::testing::PrintToString(items);
    EXPECT_TRUE(items.out.starts_with("ITEM p:x [1 b; ")) << ::testing::PrintToString(items);
    CliResult refused = cache({"stats", "detail", "sideways"});
    EXPECT_EQ(refused.status, kExitNo) << ::testing::PrintToString(refused);
  }
  CliResult reset = cache({"stats", "reset"});
  EXPECT_EQ(reset.status, 0) << ::testing::PrintToString(reset);
  EXPECT_EQ(reset.out, "");
  EXPECT_EQ(client.stats()["cmd_set"], "0");
}

TEST_P(CliCacheE2e, LockRefusesWhatAnotherConnectionHolds) {
  Client holder = connect_cache();
  ASSERT_EQ(holder.store("set", "account", "100"), "STORED");
  ASSERT_EQ(holder.request("lock account"), "OK");

  CliResult lock = cache({"lock", "account"});
  EXPECT_EQ(lock.status, kExitTempFail) << ::testing::PrintToString(lock);
  CliResult set = cache({"set", "account", "0"});
  EXPECT_EQ(set.status, kExitNo) << ::testing::PrintToString(set);
  EXPECT_NE(set.err.find("locked"), std::string::npos) << set.err;
  EXPECT_EQ(cache({"lock", "missing"}).status, kExitNo);

  CliResult unlock = cache({"unlock", "account"});
  EXPECT_EQ(unlock.status, kExitNo) << "only the holder can unlock";
  EXPECT_EQ(holder.request("unlock account"), "OK");
  EXPECT_EQ(cache({"lock", "account"}).status, 0);
  EXPECT_EQ(cache({"unlock_all"}).status, 0);
}

TEST_P(CliCacheE2e, LockHoldsTheObjectWhileTheCommandRuns) {
  Client client = connect_cache();
  ASSERT_EQ(client.store("set", "config", "v1"), "STORED");
  // The command's own client is another connection: it can read the object
  // but not change it.
  std::vector<std::string> inner = {e2e::cli_binary()};
  std::vector<std::string> inner_set = cache_args({"set", "config", "v2"}, binary());
  inner.insert(inner.end(), inner_set.begin(), inner_set.end());
  std::vector<std::string> args = cache_args({"lock", "config", "--"}, binary());
  args.insert(args.end(), inner.begin(), inner.end());
  CliResult locked = run(args);
  EXPECT_EQ(locked.status, kExitNo) << ::testing::PrintToString(locked);
  EXPECT_NE(locked.err.find("locked"), std::string::npos) << locked.err;
  EXPECT_EQ(client.get("config"), "v1");
  // Released when the command ended.
  EXPECT_EQ(client.request("lock config"), "OK");
}

INSTANTIATE_TEST_SUITE_P(Cli, CliCacheE2e, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Binary" : "Text";
                         });

// --- run: the distributed flock --------------------------------------------------

TEST_F(CliE2e, RunExportsTheFencingTokenAndReturnsTheCommandsStatus) {
  CliResult job =
      run(run_args("nightly", {}, {"sh", "-c", "printf %s \"$LOCKCACHED_FENCING_TOKEN\"; exit 3"}));
  EXPECT_EQ(job.status, 3) << ::testing::PrintToString(job);
  std::optional<uint64_t> token = parse_u64(job.out);
  ASSERT_TRUE(token) << "no token in \"" << job.out << "\"";

  // Released when the command ended: free at once, with a later token.
  Client client = connect_lock_service();
  std::string reply = client.request("lock nightly");
  ASSERT_TRUE(reply.starts_with("200 Acquired ")) << reply;
  EXPECT_GT(parse_u64(reply.substr(13)).value_or(0), *token);
}

// Started with SIGCHLD ignored (inherited from a daemon that ignores it),
// the kernel would reap the command unseen and lockcached-cli would wait for
// it, holding the lock, forever. It sees the command end, releases, and
// the command itself got the SIGCHLD setting it was given (bit 17 of
// /proc's SigIgn mask, 0x10000).
TEST_F(CliE2e, RunStartedWithSigchldIgnoredSeesItsCommandEnd) {
  CliProcess job(dir_, "sigchld", run_args("job", {}, {"grep", "SigIgn", "/proc/self/status"}),
                 "", {}, true);
  ASSERT_TRUE(job.started());
  EXPECT_EQ(job.wait(), 0);
  std::string mask = job.out();
  ASSERT_TRUE(mask.starts_with("SigIgn:")) << mask;
  EXPECT_NE(std::stoull(mask.substr(7), nullptr, 16) & 0x10000, 0u) << mask;
  Client client = connect_lock_service();
  EXPECT_TRUE(client.request("lock job").starts_with("200 Acquired "));  // released
}

TEST_F(CliE2e, RunReportsTheCommandsFateLikeAShell) {
  EXPECT_EQ(run(run_args("job", {}, {"sh", "-c", "kill -TERM $$"})).status, 128 + SIGTERM);
  CliResult missing = run(run_args("job", {}, {"/nonexistent/command"}));
  EXPECT_EQ(missing.status, 127);
  EXPECT_NE(missing.err.find("/nonexistent/command"), std::string::npos) << missing.err;
  EXPECT_FALSE(lock_line("job").has_value()) << "the lock outlived the command";
}

TEST_F(CliE2e, ConcurrentRunsAreSerializedAndTheSecondGetsALargerToken) {
  fs::path log = dir_ / "log";
  fs::path fifo = make_fifo("fifo");
  // sh -c SCRIPT sh LOG FIFO: the paths arrive as $1 and $2.
  std::string first_job =
      "echo \"start $LOCKCACHED_FENCING_TOKEN\" >> \"$1\"; cat \"$2\" > /dev/null; "
      "echo end >> \"$1\"";
  std::string second_job = "echo \"start $LOCKCACHED_FENCING_TOKEN\" >> \"$1\"; echo end >> \"$1\"";

  auto first = start(run_args("deploy", {}, {"sh", "-c", first_job, "sh", log, fifo}));
  ASSERT_TRUE(file_contains(log, "start ")) << "the first job never started: " << first->err();
  auto second =
      start(run_args("deploy", {"--wait", "60"}, {"sh", "-c", second_job, "sh", log, fifo}));
  ASSERT_TRUE(eventually([&] {
    std::optional<LockLine> lock = lock_line("deploy");
    return lock && lock->waiters == 1;
  })) << "the second job never queued: "
      << second->err();
  EXPECT_EQ(lines_of(read_file(log)).size(), 1u) << "the second job ran inside the first's lock";

  ASSERT_TRUE(open_fifo(fifo));
  EXPECT_EQ(first->wait(), 0) << first->err();
  EXPECT_EQ(second->wait(), 0) << second->err();

  std::vector<std::string> lines = lines_of(read_file(log));
  ASSERT_EQ(lines.size(), 4u) << read_file(log);
  ASSERT_TRUE(lines[0].starts_with("start ") && lines[2].starts_with("start ")) << read_file(log);
  EXPECT_EQ(lines[1], "end");
  EXPECT_EQ(lines[3], "end");
  std::optional<uint64_t> first_token = parse_u64(lines[0].substr(6));
  std::optional<uint64_t> second_token = parse_u64(lines[2].substr(6));
  ASSERT_TRUE(first_token && second_token) << read_file(log);
  EXPECT_GT(*second_token, *first_token);
}

TEST_F(CliE2e, RunExitsTempFailWhenTheLockIsBusy) {
  Client holder = connect_lock_service();
  ASSERT_TRUE(holder.request("lock backup").starts_with("200 Acquired "));
  fs::path marker = dir_ / "ran";

  CliResult at_once = run(run_args("backup", {"--wait", "0"}, {"touch", marker}));
  EXPECT_EQ(at_once.status, kExitTempFail) << ::testing::PrintToString(at_once);
  EXPECT_NE(at_once.err.find("busy"), std::string::npos) << at_once.err;
  EXPECT_NE(at_once.err.find(" from " + holder.local_address() + " "), std::string::npos)
      << "names the holder's address: " << at_once.err;
  CliResult waited = run(run_args("backup", {"--wait", "0.2"}, {"touch", marker}));
  EXPECT_EQ(waited.status, kExitTempFail) << ::testing::PrintToString(waited);
  EXPECT_FALSE(fs::exists(marker)) << "the command ran without the lock";
}

TEST_F(CliE2e, AnUnreachableServerExitsUnavailable) {
  RefusingPort refusing;
  ASSERT_TRUE(refusing.open());
  const std::string& port = refusing.port();
  fs::path marker = dir_ / "ran";

  CliResult get = run({"--host", "127.0.0.1", "--port", port, "get", "x"});
  EXPECT_EQ(get.status, kExitUnavailable) << ::testing::PrintToString(get);
  EXPECT_NE(get.err.find("cannot connect"), std::string::npos) << get.err;
  CliResult job =
      run({"--host", "127.0.0.1", "--lock-port", port, "run", "x", "--", "touch", marker.string()});
  EXPECT_EQ(job.status, kExitUnavailable) << ::testing::PrintToString(job);
  EXPECT_FALSE(fs::exists(marker));
}

// A leader elected while the CLI asks again after "election" resets the
// connection it just opened; the CLI asks once more and runs the command.
TEST_F(CliE2e, RunAsksAgainWhenAnElectionResetsItsConnection) {
  ScriptedLockService service({"503 not leader: election", std::string(ScriptedLockService::kReset)});
  ASSERT_TRUE(service.start());
  CliResult job = run_printing_token(service.port());
  EXPECT_EQ(service.stop(), 3);
  EXPECT_EQ(job.status, 0) << ::testing::PrintToString(job);
  EXPECT_EQ(job.out, "42") << ::testing::PrintToString(job);
}

// A wait longer than --timeout is cut short by a failover: the leader
// closes its connections. The CLI asks again (--timeout counts from the
// failure, not from the request) and gets the lock there.
TEST_F(CliE2e, RunAsksAgainWhenAFailoverEndsAWaitLongerThanTheTimeout) {
  ScriptedLockService service({ScriptedLockService::reset_while_waiting(1500)});
  ASSERT_TRUE(service.start());
  CliResult job = run_printing_token(service.port(), {"--timeout", "1"}, {"--wait", "30"});
  EXPECT_EQ(service.stop(), 2);
  EXPECT_EQ(job.status, 0) << ::testing::PrintToString(job);
  EXPECT_EQ(job.out, "42") << ::testing::PrintToString(job);
}

// The same when the wait began at the leader a follower named, which then
// died (it resets every connection after): the CLI asks the follower it was
// given again, not the dead leader, and goes to the leader it names now. The
// follower answers `set_timeout` as a real one does, with the 503, so the
// CLI's session there never opens.
TEST_F(CliE2e, RunAsksAgainWhenAFailoverEndsAWaitAtTheLeaderItWasSentTo) {
  std::vector<std::string> dead_after_the_wait(1000, std::string(ScriptedLockService::kReset));
  dead_after_the_wait[0] = ScriptedLockService::reset_while_waiting(1500);
  ScriptedLockService old_leader(dead_after_the_wait);
  ASSERT_TRUE(old_leader.start());
  ScriptedLockService new_leader({});
  ASSERT_TRUE(new_leader.start());
  ScriptedLockService follower(
      {ScriptedLockService::answer_all_with("503 not leader: 127.0.0.1:" + old_leader.port()),
       ScriptedLockService::answer_all_with("503 not leader: 127.0.0.1:" + new_leader.port())});
  ASSERT_TRUE(follower.start());
  CliResult job = run_printing_token(follower.port(), {"--timeout", "1"}, {"--wait", "30"});
  EXPECT_EQ(job.status, 0) << ::testing::PrintToString(job);
  EXPECT_EQ(job.out, "42") << ::testing::PrintToString(job);
  EXPECT_EQ(old_leader.stop(), 1);
  EXPECT_EQ(new_leader.stop(), 1);
  EXPECT_EQ(follower.stop(), 2);
}

// A lock a limit refuses (429, docs/lock-service.md) is the server saying
// no, not a server that is down: exit 1, with the server's reason.
TEST_F(CliE2e, RunRefusedByALimitExitsOne) {
  ScriptedLockService service(
      {ScriptedLockService::answer_lock_with("429 Too many locks in the server")});
  ASSERT_TRUE(service.start());
  CliResult job =
      run({"--host", "127.0.0.1", "--lock-port", service.port(), "run", "job", "--", "true"});
  EXPECT_EQ(job.status, 1) << ::testing::PrintToString(job);
  EXPECT_NE(job.err.find("Too many locks in the server"), std::string::npos)
      << ::testing::PrintToString(job);
  service.stop();
}

// The leader a follower named stops leading as the CLI connects, and closes
// the connection (test/ha/raft_faults.py caught a `cluster transfer` so):
// the CLI asks the follower again, which names the leader again, which by
// then answers.
TEST_F(CliE2e, AChangeIsAskedAgainWhenTheLeaderNamedClosesItsConnection) {
  ScriptedLockService leader({std::string(ScriptedLockService::kReset)});
  ASSERT_TRUE(leader.start());
  std::string named = "503 not leader: 127.0.0.1:" + leader.port();
  ScriptedLockService follower({named, named});
  ASSERT_TRUE(follower.start());
  CliResult transfer = run({"--host", "127.0.0.1", "--lock-port", follower.port(), "cluster",
                            "transfer", "2"});
  EXPECT_EQ(follower.stop(), 2);
  EXPECT_EQ(leader.stop(), 2);
  EXPECT_EQ(transfer.status, 0) << ::testing::PrintToString(transfer);
}

// The node asked first closes the connection unanswered (it learnt of a new
// leader, and closed its lock-service connections): asked again, it
// answers.
TEST_F(CliE2e, AChangeIsAskedAgainWhenTheFirstNodeClosesItsConnection) {
  ScriptedLockService node({std::string(ScriptedLockService::kReset)});
  ASSERT_TRUE(node.start());
  CliResult transfer =
      run({"--host", "127.0.0.1", "--lock-port", node.port(), "cluster", "transfer", "2"});
  EXPECT_EQ(node.stop(), 2);
  EXPECT_EQ(transfer.status, 0) << ::testing::PrintToString(transfer);
}

// A leader named that cannot be reached at all is asked for until the
// timeout, through the node that named it; then the CLI says why it gave up.
TEST_F(CliE2e, ALeaderNamedThatCannotBeReachedEndsUnavailableAtTheTimeout) {
  RefusingPort leader;
  ASSERT_TRUE(leader.open());
  ScriptedLockService follower(std::vector<std::string>(1000, "503 not leader: 127.0.0.1:" +
                                                                   leader.port()));
  ASSERT_TRUE(follower.start());
  CliResult transfer = run({"--host", "127.0.0.1", "--lock-port", follower.port(), "--timeout",
                            "0.5", "cluster", "transfer", "2"});
  EXPECT_GE(follower.stop(), 2) << "asked again after the refusal";
  EXPECT_EQ(transfer.status, kExitUnavailable) << ::testing::PrintToString(transfer);
  EXPECT_NE(transfer.err.find("127.0.0.1:" + leader.port()), std::string::npos) << transfer.err;
}

TEST_F(CliE2e, KillingTheCliReleasesItsLockAtOnce) {
  fs::path log = dir_ / "log";
  fs::path fifo = make_fifo("fifo");
  auto first =
      start(run_args("cron", {},
                     {"sh", "-c", "echo \"$LOCKCACHED_FENCING_TOKEN\" >> \"$1\"; exec cat \"$2\"",
                      "sh", log, fifo}));
  ASSERT_TRUE(file_contains(log, "\n")) << first->err();
  std::optional<uint64_t> first_token = parse_u64(lines_of(read_file(log))[0]);
  ASSERT_TRUE(first_token);

  ASSERT_EQ(kill(first->pid(), SIGKILL), 0);
  EXPECT_EQ(first->wait(), 128 + SIGKILL);
  // No grace period: the next job gets the lock although the first job's
  // command (the orphaned cat) still runs.
  CliResult second =
      run(run_args("cron", {"--wait", "20"}, {"sh", "-c", "printf %s $LOCKCACHED_FENCING_TOKEN"}));
  EXPECT_EQ(second.status, 0) << ::testing::PrintToString(second);
  EXPECT_GT(parse_u64(second.out).value_or(0), *first_token);
}

TEST_F(CliE2e, ASignalToTheCliIsPassedOnToTheCommand) {
  fs::path log = dir_ / "log";
  fs::path fifo = make_fifo("fifo");
  // The command traps SIGTERM and exits 7: the CLI's status then tells a
  // signal passed on (7) from the CLI itself killed by it (143).
  auto job = start(run_args(
      "cron", {},
      {"sh", "-c",
       "trap 'echo caught >> \"$1\"; exit 7' TERM; echo started >> \"$1\"; cat \"$2\" & wait", "sh",
       log, fifo}));
  ASSERT_TRUE(file_contains(log, "started")) << job->err();
  ASSERT_EQ(kill(job->pid(), SIGTERM), 0);
  EXPECT_EQ(job->wait(), 7) << job->err();
  EXPECT_TRUE(file_contains(log, "caught"));
  EXPECT_FALSE(lock_line("cron").has_value()) << "released when the command ended";
}

TEST_F(CliE2e, LosingTheServerWarnsAndLetsTheCommandFinish) {
  fs::path log = dir_ / "log";
  fs::path fifo = make_fifo("fifo");
  auto job = start(run_args(
      "cron", {},
      {"sh", "-c", "echo started >> \"$1\"; cat \"$2\" > /dev/null; echo finished >> \"$1\"", "sh",
       log, fifo}));
  ASSERT_TRUE(file_contains(log, "started")) << job->err();
  ASSERT_TRUE(server_.stop(SIGTERM));
  EXPECT_TRUE(eventually([&] { return job->err().find("lost lock") != std::string::npos; }, 10s))
      << job->err();
  ASSERT_TRUE(open_fifo(fifo));
  EXPECT_EQ(job->wait(), 0) << job->err();
  EXPECT_TRUE(file_contains(log, "finished"));
}

// A server that stops answering (paused here) may come back: the CLI,
// which told its user the lock was lost, hangs up, so that the server lets
// the lock go then instead of holding it until the command ends.
TEST_F(CliE2e, ALostLocksConnectionIsHungUpSoAServerThatComesBackLetsItGo) {
  fs::path log = dir_ / "log";
  fs::path fifo = make_fifo("fifo");
  auto job = start({"--host", "127.0.0.1", "--lock-port", std::to_string(lock_port_),
                    "--timeout", "1", "run", "cron", "--ping", "0.2", "--", "sh", "-c",
                    "echo started >> \"$1\"; exec cat \"$2\" > /dev/null", "sh", log, fifo});
  ASSERT_TRUE(file_contains(log, "started")) << job->err();
  ASSERT_EQ(kill(server_.pid(), SIGSTOP), 0);
  bool lost =
      eventually([&] { return job->err().find("lost lock") != std::string::npos; }, 20s);
  ASSERT_EQ(kill(server_.pid(), SIGCONT), 0);
  ASSERT_TRUE(lost) << job->err();
  // The command still runs; the lock is free for the next job.
  Client next = connect_lock_service();
  std::string reply;
  EXPECT_TRUE(eventually([&] {
    reply = next.request("lock cron");
    return reply.starts_with("200 Acquired ");
  })) << reply;
  ASSERT_TRUE(open_fifo(fifo));
  EXPECT_EQ(job->wait(), 0) << job->err();
}

TEST_F(CliE2e, KillOnLossStopsTheCommandWhenTheServerGoes) {
  fs::path log = dir_ / "log";
  fs::path fifo = make_fifo("fifo");
  auto job =
      start(run_args("cron", {"--kill-on-loss"},
                     {"sh", "-c", "echo started >> \"$1\"; exec cat \"$2\"", "sh", log, fifo}));
  ASSERT_TRUE(file_contains(log, "started")) << job->err();
  ASSERT_TRUE(server_.stop(SIGTERM));
  EXPECT_EQ(job->wait(), 128 + SIGTERM) << job->err();
  EXPECT_NE(job->err().find("SIGTERM"), std::string::npos) << job->err();
}

TEST_F(CliE2e, PingsKeepTheLockPastTheServersIdleTimeout) {
  // A server of its own, which closes connections idle for a second.
  ServerProcess strict;
  // One thread: the idle-connection sweep sees the CLI's connection and the
  // test's idle one in the same pass.
  ASSERT_TRUE(strict.start({"--lock_port=-1", "--idle_timeout=1", "--threads=1"}));
  std::optional<uint16_t> strict_lock_port = strict.lock_port();
  ASSERT_TRUE(strict_lock_port);
  fs::path log = dir_ / "log";
  fs::path fifo = make_fifo("fifo");
  auto job = start({"--host", "127.0.0.1", "--lock-port", std::to_string(*strict_lock_port), "run",
                    "cron", "--ping", "0.1", "--", "sh", "-c",
                    "echo started >> \"$1\"; exec cat \"$2\" > /dev/null", "sh", log, fifo});
  ASSERT_TRUE(file_contains(log, "started")) << job->err();

  // Once an idle connection has been closed, an unpinged one would be too.
  Client idle;
  ASSERT_TRUE(idle.connect(*strict_lock_port));
  ASSERT_TRUE(idle.wait_for_close(10s)) << "the server never closed an idle connection";
  Client observer;
  ASSERT_TRUE(observer.connect(*strict_lock_port));
  EXPECT_EQ(observer.request("stats locks cron"), "200 LOCKS");
  EXPECT_TRUE(observer.read_line().starts_with("LOCK cron ")) << "the lock was lost";

  ASSERT_TRUE(open_fifo(fifo));
  EXPECT_EQ(job->wait(), 0) << job->err();
  EXPECT_EQ(job->err(), "");
}

// --- the command line ------------------------------------------------------------

TEST_F(CliE2e, UsageErrorsExit64) {
  std::vector<std::vector<std::string>> mistakes = {
      {},
      {"frobnicate"},
      {"get"},
      {"set", "key"},
      {"--port", "http", "get", "x"},
      {"--port", "70000", "get", "x"},
      {"get", "x", "--wait", "3"},
      {"run", "job"},
      {"run", "job", "--"},
      {"run", "job", "--wait", "soon", "--", "true"},
      {"run", "bad name", "--", "true"},
      {"--bogus", "stats"},
      {"get", "key with space"},
  };
  for (const std::vector<std::string>& args : mistakes) {
    CliResult result = run(args);
    EXPECT_EQ(result.status, kExitUsage)
        << ::testing::PrintToString(args) << " " << ::testing::PrintToString(result);
    EXPECT_NE(result.err.find("--help"), std::string::npos) << result.err;
  }
}

TEST_F(CliE2e, HelpPrintsTheUsage) {
  CliResult help = run({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_TRUE(help.out.starts_with("usage: lockcached-cli")) << help.out;
  EXPECT_NE(help.out.find("run NAME"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("LOCKCACHED_LOCK_PORT"), std::string::npos) << help.out;
  // The help is where to find out what the variables should hold.
  CliResult despite = run_with({"LOCKCACHED_PORT=abc"}, {"--help"});
  EXPECT_EQ(despite.status, 0) << ::testing::PrintToString(despite);
  EXPECT_EQ(despite.out, help.out);
}

// --- where the server is: --host, --port, --lock-port and the environment -------

TEST_F(CliE2e, LockcachedPortPicksTheCachePort) {
  std::vector<std::string> variables = {"LOCKCACHED_PORT=" + std::to_string(server_.port())};
  CliResult set = run_with(variables, {"--host", "127.0.0.1", "set", "greeting", "hello"});
  ASSERT_EQ(set.status, 0) << ::testing::PrintToString(set);
  CliResult get = run_with(variables, {"--host", "127.0.0.1", "get", "greeting"});
  EXPECT_EQ(get.status, 0) << ::testing::PrintToString(get);
  EXPECT_EQ(get.out, "hello\n");
  Client client = connect_cache();
  EXPECT_EQ(client.get("greeting"), "hello");
}

TEST_F(CliE2e, LockcachedLockPortPicksTheLockServicePort) {
  std::vector<std::string> variables = {"LOCKCACHED_LOCK_PORT=" + std::to_string(lock_port_)};
  CliResult job = run_with(variables, {"--host", "127.0.0.1", "run", "env-job", "--", "sh", "-c",
                                       "printf %s \"$LOCKCACHED_FENCING_TOKEN\""});
  EXPECT_EQ(job.status, 0) << ::testing::PrintToString(job);
  EXPECT_TRUE(parse_u64(job.out)) << "no token in \"" << job.out << "\"";

  Client holder = connect_lock_service();
  ASSERT_TRUE(holder.request("lock held-by-test").starts_with("200 Acquired "));
  CliResult locks = run_with(variables, {"--host", "127.0.0.1", "locks"});
  EXPECT_EQ(locks.status, 0) << ::testing::PrintToString(locks);
  EXPECT_TRUE(locks.out.starts_with("held-by-test ")) << locks.out;
  // Last on the line: the holder's address.
  EXPECT_TRUE(locks.out.ends_with(" " + holder.local_address() + "\n")) << locks.out;
}

TEST_F(CliE2e, LockcachedHostPicksTheHost) {
  // No option at all: the environment says where everything is.
  std::vector<std::string> variables = {"LOCKCACHED_HOST=127.0.0.1",
                                        "LOCKCACHED_PORT=" + std::to_string(server_.port()),
                                        "LOCKCACHED_LOCK_PORT=" + std::to_string(lock_port_)};
  CliResult set = run_with(variables, {"set", "greeting", "hello"});
  ASSERT_EQ(set.status, 0) << ::testing::PrintToString(set);
  EXPECT_EQ(run_with(variables, {"get", "greeting"}).out, "hello\n");
  CliResult job = run_with(variables, {"run", "env-job", "--", "true"});
  EXPECT_EQ(job.status, 0) << ::testing::PrintToString(job);

  // A server on another loopback address, where the default (localhost)
  // does not lead: only the variable can have found it.
  ServerProcess elsewhere;
  ASSERT_TRUE(elsewhere.start({"--listen=127.0.0.2", "--threads=1"}));
  std::vector<std::string> there = {"LOCKCACHED_HOST=127.0.0.2",
                                    "LOCKCACHED_PORT=" + std::to_string(elsewhere.port())};
  CliResult stats = run_with(there, {"stats"});
  EXPECT_EQ(stats.status, 0) << ::testing::PrintToString(stats);
  std::vector<std::string> lines = lines_of(stats.out);
  std::string pid_line = "pid " + std::to_string(elsewhere.pid());
  EXPECT_NE(std::find(lines.begin(), lines.end(), pid_line), lines.end()) << stats.out;
}

TEST_F(CliE2e, TheCommandLineWinsOverTheEnvironment) {
  RefusingPort refusing;
  ASSERT_TRUE(refusing.open());
  std::vector<std::string> nowhere = {"LOCKCACHED_PORT=" + refusing.port(),
                                      "LOCKCACHED_LOCK_PORT=" + refusing.port()};
  // The variables are in effect: without the options, nothing answers.
  EXPECT_EQ(run_with(nowhere, {"--host", "127.0.0.1", "get", "k"}).status, kExitUnavailable);
  EXPECT_EQ(run_with(nowhere, {"--host", "127.0.0.1", "locks"}).status, kExitUnavailable);
  // The options win.
  CliResult set = run_with(nowhere, cache_args({"set", "k", "v"}));
  EXPECT_EQ(set.status, 0) << ::testing::PrintToString(set);
  CliResult job = run_with(nowhere, run_args("job", {}, {"true"}));
  EXPECT_EQ(job.status, 0) << ::testing::PrintToString(job);

  // An invalid variable does no harm where its option is given.
  std::vector<std::string> garbage = {"LOCKCACHED_HOST=no such host", "LOCKCACHED_PORT=abc",
                                      "LOCKCACHED_LOCK_PORT=99999"};
  CliResult get = run_with(garbage, both_ports_args({"get", "k"}));
  EXPECT_EQ(get.status, 0) << ::testing::PrintToString(get);
  EXPECT_EQ(get.out, "v\n");
  CliResult locked_job = run_with(garbage, both_ports_args({"run", "job", "--", "true"}));
  EXPECT_EQ(locked_job.status, 0) << ::testing::PrintToString(locked_job);
}

TEST_F(CliE2e, AnInvalidVariableIsAUsageErrorThatNamesIt) {
  std::string port = std::to_string(server_.port());
  fs::path marker = dir_ / "ran";
  struct Mistake {
    std::string variable;
    std::vector<std::string> args;
  };
  std::vector<Mistake> mistakes = {
      {"LOCKCACHED_PORT=abc", {"--host", "127.0.0.1", "get", "k"}},
      {"LOCKCACHED_PORT=0", {"--host", "127.0.0.1", "set", "k", "v"}},
      {"LOCKCACHED_PORT=65536", {"--host", "127.0.0.1", "--binary", "get", "k"}},
      {"LOCKCACHED_PORT= 11211", {"--host", "127.0.0.1", "stats"}},
      {"LOCKCACHED_LOCK_PORT=-1", {"--host", "127.0.0.1", "locks"}},
      {"LOCKCACHED_LOCK_PORT=11400x",
       {"--host", "127.0.0.1", "run", "job", "--", "touch", marker.string()}},
      // Checked whether or not the command speaks to that port.
      {"LOCKCACHED_LOCK_PORT=abc", {"--host", "127.0.0.1", "--port", port, "get", "k"}},
      {"LOCKCACHED_HOST=two words", {"--port", port, "get", "k"}},
  };
  for (const Mistake& mistake : mistakes) {
    CliResult result = run_with({mistake.variable}, mistake.args);
    EXPECT_EQ(result.status, kExitUsage)
        << mistake.variable << " " << ::testing::PrintToString(result);
    std::vector<std::string> lines = lines_of(result.err);
    ASSERT_FALSE(lines.empty()) << mistake.variable;
    std::string expected = mistake.variable.starts_with("LOCKCACHED_HOST=")
                               ? "expected a host name or address"
                               : "expected a port from 1 to 65535";
    EXPECT_EQ(lines[0], "lockcached-cli: " + mistake.variable + ": " + expected);
    EXPECT_NE(result.err.find("--help"), std::string::npos) << result.err;
  }
  EXPECT_FALSE(fs::exists(marker)) << "run ran its command despite the usage error";
}

TEST_F(CliE2e, AnEmptyVariableCountsAsUnset) {
  // Not a usage error: the command runs.
  CliResult locks =
      run_with({"LOCKCACHED_PORT=", "LOCKCACHED_LOCK_PORT=" + std::to_string(lock_port_)},
               {"--host", "127.0.0.1", "locks"});
  EXPECT_EQ(locks.status, 0) << ::testing::PrintToString(locks);
  // The default host, localhost, is used (and refused: nothing listens).
  RefusingPort refusing;
  ASSERT_TRUE(refusing.open());
  CliResult get =
      run_with({"LOCKCACHED_HOST=", "LOCKCACHED_PORT=" + refusing.port()}, {"get", "k"});
  EXPECT_EQ(get.status, kExitUnavailable) << ::testing::PrintToString(get);
  EXPECT_NE(get.err.find("cannot connect to localhost:" + refusing.port()), std::string::npos)
      << get.err;
}

TEST_F(CliE2e, EveryCommandTakesBothPorts) {
  // As an alias gives them: alias lc='lockcached-cli --port P --lock-port L'.
  CliResult set = run(both_ports_args({"set", "k", "v"}));
  ASSERT_EQ(set.status, 0) << ::testing::PrintToString(set);
  CliResult get = run(both_ports_args({"--binary", "get", "k"}));
  EXPECT_EQ(get.status, 0) << ::testing::PrintToString(get);
  EXPECT_EQ(get.out, "v\n");
  CliResult locked = run(both_ports_args({"lock", "k", "--", "true"}));
  EXPECT_EQ(locked.status, 0) << ::testing::PrintToString(locked);
  CliResult job = run(
      both_ports_args({"run", "job", "--", "sh", "-c", "printf %s \"$LOCKCACHED_FENCING_TOKEN\""}));
  EXPECT_EQ(job.status, 0) << ::testing::PrintToString(job);
  EXPECT_TRUE(parse_u64(job.out)) << "no token in \"" << job.out << "\"";
  CliResult locks = run(both_ports_args({"locks"}));
  EXPECT_EQ(locks.status, 0) << ::testing::PrintToString(locks);

  // The other options still belong to their commands.
  for (const std::vector<std::string>& misplaced :
       std::vector<std::vector<std::string>>{{"locks", "--exptime", "5"},
                                             {"--binary", "run", "job", "--", "true"},
                                             {"get", "k", "--wait", "3"}}) {
    CliResult result = run(both_ports_args(misplaced));
    EXPECT_EQ(result.status, kExitUsage)
        << ::testing::PrintToString(misplaced) << " " << ::testing::PrintToString(result);
    EXPECT_NE(result.err.find("is not an option of"), std::string::npos) << result.err;
  }
}

}  // namespace
