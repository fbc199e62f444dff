#include "server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#if !defined(LOCKCACHED_SERVERS_UNDER_TEST) || !defined(LOCKCACHED_WITHOUT_IO_URING)
#error "test/CMakeLists.txt defines the paths this file uses"
#endif

namespace e2e {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kListeningPrefix = "Listening on ";
constexpr std::string_view kCacheSuffix = " (memcached protocol)";
constexpr std::string_view kLockServiceSuffix = " (lock service)";

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 60'000));
}

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// The port of the first "Listening on HOST:PORT<suffix>" line; 0 for a
// "Listening on unix:PATH<suffix>" line.
std::optional<uint16_t> find_listening_port(const std::string& log, std::string_view kind_suffix) {
  size_t suffix = log.find(kind_suffix);
  if (suffix == std::string::npos) return std::nullopt;
  size_t line_start = log.rfind('\n', suffix);
  line_start = line_start == std::string::npos ? 0 : line_start + 1;
  size_t prefix = log.find(kListeningPrefix, line_start);
  if (prefix == std::string::npos || prefix > suffix) return std::nullopt;
  if (log.compare(prefix + kListeningPrefix.size(), 5, "unix:") == 0) return 0;
  size_t colon = log.rfind(':', suffix);
  if (colon == std::string::npos || colon < prefix) return std::nullopt;
  unsigned port = 0;
  auto [end, error] = std::from_chars(log.data() + colon + 1, log.data() + suffix, port);
  if (error != std::errc() || end != log.data() + suffix || port == 0 || port > 65535) {
    return std::nullopt;
  }
  return static_cast<uint16_t>(port);
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace

std::string escape(std::string_view bytes, size_t max_length) {
  std::string text;
  for (size_t i = 0; i < bytes.size() && i < max_length; ++i) {
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '\r') {
      text += "\\r";
    } else if (c == '\n') {
      text += "\\n";
    } else if (c == '\\') {
      text += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      text += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      text += hex;
    }
  }
  if (bytes.size() > max_length) text += "...(" + std::to_string(bytes.size()) + " bytes)";
  return text;
}

TempDir::TempDir() {
  std::string pattern = ::testing::TempDir() + "lockcached_e2e_XXXXXX";
  path_ = mkdtemp(pattern.data()) ? pattern : "";
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string session_serial(std::string_view id) {
  return std::string(id.substr(0, id.find('-')));
}

std::string describe_wait_status(std::optional<int> status) {
  if (!status) return "still running";
  if (WIFEXITED(*status)) return "exited with status " + std::to_string(WEXITSTATUS(*status));
  if (WIFSIGNALED(*status)) return "killed by signal " + std::to_string(WTERMSIG(*status));
  return "wait status " + std::to_string(*status);
}

std::string output_of_refused_start(const std::vector<std::string>& flags) {
  ServerProcess server;
  EXPECT_FALSE(server.start(flags));
  std::optional<int> status = server.wait_for_exit(std::chrono::seconds(5));
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 64)
      << describe_wait_status(status);
  EXPECT_TRUE(server.wait_for_output_end(std::chrono::seconds(5)));
  return server.log();
}

// --- ServerProcess -----------------------------------------------------------

ServerProcess::~ServerProcess() {
  kill_and_reap();
  if (drainer_.joinable()) drainer_.join();
  // A sanitizer build's report fails the test even where no assertion
  // noticed it (one about the last request, or at exit).
  for (std::string_view report : {"runtime error:", "ERROR: AddressSanitizer",
                                  "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer"}) {
    if (pid_ > 0 && log().find(report) != std::string::npos) {
      ADD_FAILURE() << "lockcached (pid " << pid_ << ") reported \"" << report << "\"";
      break;
    }
  }
  if (output_ >= 0) ::close(output_);
  if (pidfd_ >= 0) ::close(pidfd_);
  if (pid_ > 0 && ::testing::Test::HasFailure()) {
    std::cerr << "---- lockcached (pid " << pid_ << ", " << describe_wait_status(wait_status_)
              << ") output ----\n"
              << log() << "---- end of lockcached output ----\n";
  }
}

::testing::AssertionResult ServerProcess::start(const std::vector<std::string>& flags,
                                                std::chrono::milliseconds timeout) {
  std::vector<std::string> args = {"--port=0", "--lock_port=0", "--listen=127.0.0.1"};
  args.insert(args.end(), flags.begin(), flags.end());
  return start_as_given(args, timeout);
}

::testing::AssertionResult ServerProcess::start_as_given(const std::vector<std::string>& flags,
                                                         std::chrono::milliseconds timeout) {
  if (pid_ > 0) return ::testing::AssertionFailure() << "ServerProcess::start called twice";

  std::vector<std::string> args = {server_binary()};
  if (refuse_io_uring_) args.insert(args.begin(), LOCKCACHED_WITHOUT_IO_URING);
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::string command_line;
  for (const std::string& arg : args)
    command_line += (command_line.empty() ? "" : " ") + arg;

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return ::testing::AssertionFailure() << errno_text("pipe2");
  }
  int dev_null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int saved = errno;
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    if (dev_null >= 0) ::close(dev_null);
    return ::testing::AssertionFailure() << "fork: " << std::strerror(saved);
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    if (dev_null >= 0) dup2(dev_null, STDIN_FILENO);
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    // Do not outlive a crashed test process.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    execv(argv[0], argv.data());
    const char message[] = "e2e: execv of the lockcached binary failed\n";
    ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
    (void)ignored;
    _exit(127);
  }
  ::close(pipe_fds[1]);
  if (dev_null >= 0) ::close(dev_null);
  pid_ = pid;
  output_ = pipe_fds[0];
  pidfd_ = open_pidfd(pid);

  // Read the output until the server says where it listens.
  Clock::time_point deadline = Clock::now() + timeout;
  std::string failure;
  while (true) {
    {
      std::lock_guard lock(log_mutex_);
      if (std::optional<uint16_t> port = find_listening_port(log_, kCacheSuffix)) {
        port_ = *port;
        break;
      }
    }
    pollfd poll_fd{output_, POLLIN, 0};
    int ready = poll(&poll_fd, 1, remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      failure = errno_text("poll");
      break;
    }
    if (ready == 0) {
      failure = "no \"Listening on ...(memcached protocol)\" line within " +
                std::to_string(timeout.count()) + " ms";
      break;
    }
    char chunk[4096];
    ssize_t n = read(output_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failure = "the server closed its output before listening";
      break;
    }
    std::lock_guard lock(log_mutex_);
    log_.append(chunk, static_cast<size_t>(n));
  }

  if (!failure.empty()) {
    // Give it a moment to say why it stopped, then make sure it is gone.
    std::optional<int> status = wait_for_exit(std::chrono::milliseconds(2000));
    kill_and_reap();
    drain_output();
    return ::testing::AssertionFailure() << failure << "; " << command_line << " "
                                         << describe_wait_status(status) << "; its output:\n"
                                         << log();
  }
  drainer_ = std::thread([this] { drain_output(); });
  return ::testing::AssertionSuccess();
}

// Reads the child's output until end of file (the child has exited).
void ServerProcess::drain_output() {
  char chunk[4096];
  while (true) {
    ssize_t n = read(output_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    std::lock_guard lock(log_mutex_);
    if (n <= 0) {
      output_ended_ = true;
      output_ended_cv_.notify_all();
      return;
    }
    log_.append(chunk, static_cast<size_t>(n));
  }
}

bool ServerProcess::wait_for_output_end(std::chrono::milliseconds timeout) {
  std::unique_lock lock(log_mutex_);
  return output_ended_cv_.wait_for(lock, timeout, [this] { return output_ended_; });
}

std::string ServerProcess::log() const {
  std::lock_guard lock(log_mutex_);
  return log_;
}

std::optional<uint16_t> ServerProcess::lock_port(std::chrono::milliseconds timeout) const {
  std::optional<uint16_t> port;
  eventually([&] { return (port = find_listening_port(log(), kLockServiceSuffix)).has_value(); },
             timeout);
  return port;
}

std::optional<int> ServerProcess::wait_for_exit(std::chrono::milliseconds timeout) {
  if (wait_status_ || pid_ <= 0) return wait_status_;
  Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t reaped = waitpid(pid_, &status, WNOHANG);
    if (reaped == pid_) {
      wait_status_ = status;
      return wait_status_;
    }
    if (reaped < 0 && errno != EINTR) return std::nullopt;
    if (Clock::now() >= deadline) return std::nullopt;
    if (pidfd_ >= 0) {
      // Readable once the child has exited.
      pollfd poll_fd{pidfd_, POLLIN, 0};
      poll(&poll_fd, 1, remaining_ms(deadline));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

std::optional<int> ServerProcess::stop(int signal, std::chrono::milliseconds timeout) {
  if (wait_status_ || pid_ <= 0) return wait_status_;
  if (kill(pid_, signal) != 0) return std::nullopt;
  return wait_for_exit(timeout);
}

void ServerProcess::kill_and_reap() {
  if (pid_ <= 0 || wait_status_) return;
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) return;
  }
  wait_status_ = status;
}

// --- Value ---------------------------------------------------------------------

void PrintTo(const Value& value, std::ostream* os) {
  *os << "{key=" << value.key << " flags=" << value.flags << " data=\"" << escape(value.data)
      << "\"";
  if (value.cas) *os << " cas=" << *value.cas;
  *os << "}";
}

// --- Client --------------------------------------------------------------------

Client::~Client() {
  close();
}

Client::Client(Client&& other) noexcept
    : fd_(other.fd_),
      buffer_(std::move(other.buffer_)),
      peer_closed_(other.peer_closed_),
      last_error_(std::move(other.last_error_)) {
  other.fd_ = -1;
}

Client& Client::operator=(Client&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    buffer_ = std::move(other.buffer_);
    peer_closed_ = other.peer_closed_;
    last_error_ = std::move(other.last_error_);
    other.fd_ = -1;
  }
  return *this;
}

::testing::AssertionResult Client::connect(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return connect_to(reinterpret_cast<const sockaddr*>(&address), sizeof address,
                    "127.0.0.1:" + std::to_string(port));
}

::testing::AssertionResult Client::connect_unix(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) {
    return ::testing::AssertionFailure() << "unix socket path too long: " << path;
  }
  path.copy(address.sun_path, path.size());
  return connect_to(reinterpret_cast<const sockaddr*>(&address), sizeof address, "unix:" + path);
}

::testing::AssertionResult Client::connect_to(const sockaddr* address, socklen_t length,
                                              const std::string& name) {
  close();
  buffer_.clear();
  peer_closed_ = false;
  fd_ = socket(address->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return ::testing::AssertionFailure() << errno_text("socket");
  // A send to a server that stopped reading must fail the test, not hang it.
  timeval send_timeout{static_cast<time_t>(kReplyTimeout.count() / 1000), 0};
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
  while (::connect(fd_, address, length) != 0) {
    if (errno == EINTR) continue;
    std::string error = errno_text("connect");
    close();
    return ::testing::AssertionFailure() << error << " (" << name << ")";
  }
  return ::testing::AssertionSuccess();
}

void Client::set_nodelay(bool on) {
  int value = on ? 1 : 0;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &value, sizeof value);
}

bool Client::send(std::string_view bytes) {
  if (fd_ < 0) {
    last_error_ = "send on a closed client";
    return false;
  }
  while (!bytes.empty()) {
    ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      last_error_ = errno_text("send");
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(sent));
  }
  return true;
}

bool Client::fill(Clock::time_point deadline, std::string_view waiting_for) {
  auto fail = [&](const std::string& why) {
    last_error_ = why + " while waiting for " + std::string(waiting_for) +
                  "; unconsumed bytes: \"" + escape(buffer_, 80) + "\"";
    return false;
  };
  if (fd_ < 0) return fail("client not connected");
  if (peer_closed_) return fail("connection closed by the server");
  while (true) {
    pollfd poll_fd{fd_, POLLIN, 0};
    int ready = poll(&poll_fd, 1, remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return fail(errno_text("poll"));
    if (ready == 0) return fail("timed out");
    char chunk[65536];
    ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE))) {
      peer_closed_ = true;
      return fail("connection closed by the server");
    }
    if (n < 0) return fail(errno_text("recv"));
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }
}

std::optional<std::string> Client::read_until(std::string_view terminator,
                                              std::chrono::milliseconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  size_t search_from = 0;
  while (true) {
    size_t found = buffer_.find(terminator, search_from);
    if (found != std::string::npos) {
      std::string text = buffer_.substr(0, found + terminator.size());
      buffer_.erase(0, found + terminator.size());
      return text;
    }
    search_from = buffer_.size() >= terminator.size() ? buffer_.size() - terminator.size() + 1 : 0;
    if (!fill(deadline, "\"" + escape(terminator) + "\"")) return std::nullopt;
  }
}

std::optional<std::string> Client::read_exactly(size_t n, std::chrono::milliseconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  while (buffer_.size() < n) {
    if (!fill(deadline, std::to_string(n) + " bytes")) return std::nullopt;
  }
  std::string text = buffer_.substr(0, n);
  buffer_.erase(0, n);
  return text;
}

std::string Client::read_line(std::chrono::milliseconds timeout) {
  std::optional<std::string> line = read_until("\r\n", timeout);
  if (!line) return "<no reply: " + last_error_ + ">";
  line->resize(line->size() - 2);
  return *line;
}

std::string Client::request(std::string_view command, std::chrono::milliseconds timeout) {
  std::string bytes(command);
  bytes += "\r\n";
  if (!send(bytes)) return "<no reply: " + last_error_ + ">";
  return read_line(timeout);
}

bool Client::wait_for_close(std::chrono::milliseconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  while (!peer_closed_) {
    if (!fill(deadline, "the server to close the connection") && !peer_closed_) return false;
  }
  return true;
}

std::string Client::local_address() const {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ADD_FAILURE() << "getsockname: " << std::strerror(errno);
    return "?";
  }
  char text[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &address.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(address.sin_port));
}

void Client::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Client::abort() {
  if (fd_ < 0) return;
  linger reset{1, 0};
  setsockopt(fd_, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  close();
}

bool Client::shutdown_send() {
  if (fd_ < 0 || ::shutdown(fd_, SHUT_WR) != 0) {
    last_error_ = errno_text("shutdown");
    return false;
  }
  return true;
}

std::string Client::store(std::string_view command, std::string_view key, std::string_view data,
                          uint32_t flags, int64_t exptime, std::string_view extra) {
  std::string bytes = std::string(command) + " " + std::string(key) + " " + std::to_string(flags) +
                      " " + std::to_string(exptime) + " " + std::to_string(data.size());
  if (!extra.empty()) bytes += " " + std::string(extra);
  bytes += "\r\n";
  bytes += data;
  bytes += "\r\n";
  if (!send(bytes)) return "<no reply: " + last_error_ + ">";
  return read_line();
}

std::optional<std::vector<Value>> Client::read_values(std::chrono::milliseconds timeout) {
  std::vector<Value> values;
  while (true) {
    std::string line = read_line(timeout);
    if (line == "END") return values;
    std::vector<std::string> words;
    for (size_t start = 0; start < line.size();) {
      size_t space = line.find(' ', start);
      if (space == std::string::npos) space = line.size();
      words.push_back(line.substr(start, space - start));
      start = space + 1;
    }
    Value value;
    size_t length = 0;
    bool ok = (words.size() == 4 || words.size() == 5) && words[0] == "VALUE";
    auto parse = [](const std::string& word, auto* number) {
      auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), *number);
      return error == std::errc() && end == word.data() + word.size();
    };
    if (ok) {
      value.key = words[1];
      ok = parse(words[2], &value.flags) && parse(words[3], &length);
    }
    if (ok && words.size() == 5) {
      uint64_t cas = 0;
      ok = parse(words[4], &cas);
      value.cas = cas;
    }
    if (!ok) {
      last_error_ = "expected VALUE or END, got \"" + escape(line) + "\"";
      return std::nullopt;
    }
    std::optional<std::string> data = read_exactly(length + 2, timeout);
    if (!data) return std::nullopt;
    if (data->substr(length) != "\r\n") {
      last_error_ =
          "data block of " + value.key + " does not end in \\r\\n: \"" + escape(*data) + "\"";
      return std::nullopt;
    }
    data->resize(length);
    value.data = std::move(*data);
    values.push_back(std::move(value));
  }
}

std::optional<std::string> Client::get(std::string_view key) {
  if (!send("get " + std::string(key) + "\r\n")) {
    ADD_FAILURE() << "get " << key << ": " << last_error_;
    return std::nullopt;
  }
  std::optional<std::vector<Value>> values = read_values();
  if (!values) {
    ADD_FAILURE() << "get " << key << ": " << last_error_;
    return std::nullopt;
  }
  if (values->empty()) return std::nullopt;
  if (values->size() != 1 || (*values)[0].key != key) {
    ADD_FAILURE() << "get " << key << ": " << values->size() << " values, first "
                  << ::testing::PrintToString((*values)[0]);
    return std::nullopt;
  }
  return std::move((*values)[0].data);
}

std::map<std::string, std::string> Client::stats(std::string_view group) {
  std::string command = group.empty() ? "stats" : "stats " + std::string(group);
  if (!send(command + "\r\n")) {
    ADD_FAILURE() << command << ": " << last_error_;
    return {};
  }
  std::map<std::string, std::string> stats;
  while (true) {
    std::string line = read_line();
    if (line == "END") return stats;
    size_t name_end = line.find(' ', 5);
    if (line.rfind("STAT ", 0) != 0 || name_end == std::string::npos) {
      ADD_FAILURE() << command << ": unexpected line \"" << escape(line) << "\"";
      return {};
    }
    stats[line.substr(5, name_end - 5)] = line.substr(name_end + 1);
  }
}

uint64_t stat_u64(const std::map<std::string, std::string>& stats, const std::string& name) {
  auto it = stats.find(name);
  if (it == stats.end()) {
    ADD_FAILURE() << "no STAT " << name;
    return 0;
  }
  uint64_t value = 0;
  const std::string& text = it->second;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    ADD_FAILURE() << "STAT " << name << " is not a number: \"" << text << "\"";
    return 0;
  }
  return value;
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds interval) {
  Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);
  }
}

namespace {

// What test/CMakeLists.txt wrote into servers-under-test when the build was
// configured: "server PATH", "cli PATH", "io_uring_refused 0|1", a line each.
struct ServersUnderTest {
  std::string server;
  std::string cli;
  bool io_uring_refused = false;
};

ServersUnderTest read_servers_under_test() {
  ServersUnderTest found;
  std::ifstream file(LOCKCACHED_SERVERS_UNDER_TEST);
  std::string name;
  std::string value;
  bool refused_named = false;
  while (file >> name && std::getline(file >> std::ws, value)) {
    if (name == "server") found.server = value;
    if (name == "cli") found.cli = value;
    if (name == "io_uring_refused") {
      found.io_uring_refused = value == "1";
      refused_named = true;
    }
  }
  if (found.server.empty() || found.cli.empty() || !refused_named) {
    // Every test needs it: no test can run without.
    std::fprintf(stderr, "%s: no server, cli and io_uring_refused lines (configure the build)\n",
                 LOCKCACHED_SERVERS_UNDER_TEST);
    std::abort();
  }
  return found;
}

const ServersUnderTest& servers_under_test() {
  static const ServersUnderTest servers = read_servers_under_test();
  return servers;
}

}  // namespace

// $LOCKCACHED_SERVER_BINARY, when set and not empty, replaces the configured
// binary: a run by hand against another build of the server.
std::string server_binary() {
  const char* override_binary = std::getenv("LOCKCACHED_SERVER_BINARY");
  if (override_binary != nullptr && *override_binary != '\0') return override_binary;
  return servers_under_test().server;
}

std::string server_run_by(const std::string& program) {
  std::ifstream file(program, std::ios::binary);
  std::string line;
  if (!std::getline(file, line) || !line.starts_with("#!")) return program;
  while (std::getline(file, line)) {
    if (!line.starts_with("exec ")) continue;
    size_t end = line.rfind('\'');
    if (end == std::string::npos || end == 0) break;
    size_t start = line.rfind('\'', end - 1);
    if (start == std::string::npos) break;
    return line.substr(start + 1, end - start - 1);
  }
  return program;
}

std::string cli_binary() {
  return servers_under_test().cli;
}

bool io_uring_refused() {
  return servers_under_test().io_uring_refused;
}

std::string uring_or_refused() {
  return io_uring_refused() ? "epoll" : "uring";
}

uid_t uid_of(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Uid:", 0) == 0) return static_cast<uid_t>(std::stoul(line.substr(4)));
  }
  return static_cast<uid_t>(-1);
}

}  // namespace e2e
