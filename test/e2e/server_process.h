// End-to-end test harness: the real lockcached binary in a child process, and
// a plain TCP client that speaks to it byte for byte.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "free_ports.h"

namespace e2e {

// How long any single reply may take. Generous: CI machines are slow and
// loaded, and a test only waits this long when it is about to fail anyway.
constexpr std::chrono::milliseconds kReplyTimeout{10000};
// How long the server may take to print its "Listening on" line.
constexpr std::chrono::milliseconds kStartTimeout{10000};
// The server's per-item header (store::Item::kHeaderSize, store/item.h):
// what `bytes`, `mem_requested` and metadump's size= count beyond the key,
// the value and its CRLF. These tests see the server from outside only.
constexpr uint64_t kItemHeaderBytes = 30;

// The lockcached binary in a child process, its stderr (glog) on a pipe.
class ServerProcess {
 public:
  ServerProcess() = default;
  // Kills the child (SIGKILL) if it still runs; if the current test has failed,
  // prints what the server logged, for diagnosis.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Starts LOCKCACHED_BINARY --port=0 --lock_port=0 --listen=127.0.0.1 followed
  // by `flags` (gflags lets a later flag override an earlier one), and waits for
  // the "Listening on HOST:PORT (memcached protocol)" line (or "Listening on
  // unix:PATH (memcached protocol)": port() is 0 then). Fails, with the
  // server's output, when the line does not come within `timeout` or the child
  // exits first. $LOCKCACHED_SERVER_BINARY, when set, replaces LOCKCACHED_BINARY.
  ::testing::AssertionResult start(const std::vector<std::string>& flags = {},
                                   std::chrono::milliseconds timeout = kStartTimeout);
  // The same with `flags` alone, none of start()'s: for a test of what the
  // server does by default.
  ::testing::AssertionResult start_as_given(const std::vector<std::string>& flags,
                                            std::chrono::milliseconds timeout = kStartTimeout);

  // Before start: the kernel refuses io_uring to this server (through
  // test/tools/without_io_uring.cc), whatever LOCKCACHED_TEST_IO is.
  void refuse_io_uring() { refuse_io_uring_ = true; }

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

  // Sends `signal` and waits up to `timeout` for the child to exit. Returns its
  // wait status (see WIFEXITED), or nullopt when it is still running.
  std::optional<int> stop(int signal = SIGTERM,
                          std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Waits up to `timeout` for the child to exit on its own; as stop().
  std::optional<int> wait_for_exit(std::chrono::milliseconds timeout);

  // Everything the server wrote to stderr and stdout so far.
  std::string log() const;
  // The lock-service port (start with --lock_port=-1), from its "Listening
  // on HOST:PORT (lock service)" line; nullopt if it is not logged in time.
  std::optional<uint16_t> lock_port(std::chrono::milliseconds timeout = kStartTimeout) const;
  // Waits up to `timeout` until the server's output has ended (it exited and
  // everything it wrote is in log()); false on timeout.
  bool wait_for_output_end(std::chrono::milliseconds timeout);

 private:
  void drain_output();
  void kill_and_reap();

  pid_t pid_ = -1;
  int pidfd_ = -1;   // for waiting with a timeout without polling waitpid
  int output_ = -1;  // read end of the child's stderr/stdout pipe
  uint16_t port_ = 0;
  std::optional<int> wait_status_;
  mutable std::mutex log_mutex_;
  bool refuse_io_uring_ = false;
  std::string log_;
  bool output_ended_ = false;  // guarded by log_mutex_
  std::condition_variable output_ended_cv_;
  std::thread drainer_;
};

// The lockcached binary under test: $LOCKCACHED_SERVER_BINARY when set and
// not empty, else the one test/CMakeLists.txt picked when the build was
// configured (this build's, or another build's: CI's sanitizer stages),
// through a wrapper script where the suite refuses io_uring. Read at run
// time from the build's test/servers-under-test, as are cli_binary() and
// io_uring_refused().
std::string server_binary();
// The lockcached binary that `program` runs: `program` itself, or, for a
// wrapper script of test/CMakeLists.txt, the server it names last on its
// exec line, as 'PATH'. What a sanitizer build is told by (sanitizer.h).
std::string server_run_by(const std::string& program);
// The lockcached-cli binary under test (test/CMakeLists.txt picks it).
std::string cli_binary();

// Whether the suite's servers run with io_uring refused by the kernel
// (LOCKCACHED_TEST_IO=refused, CI stage 22): their --io=auto and --io=uring
// then take epoll.
bool io_uring_refused();
// The backend (`stats settings`' io) of a server started with --io=auto or
// --io=uring: uring, or epoll where the suite refuses io_uring.
std::string uring_or_refused();

// The real user id of process `pid`, from /proc; -1 when unknown.
uid_t uid_of(pid_t pid);

// Describes a wait status: "exited with 0", "killed by signal 9", ...
std::string describe_wait_status(std::optional<int> status);

// Starts the server with `flags` (as ServerProcess::start), expects it to
// exit at once with EX_USAGE (64), and returns all it wrote.
std::string output_of_refused_start(const std::vector<std::string>& flags);

// One VALUE block of a get/gets/gat/gats reply.
struct Value {
  std::string key;
  uint32_t flags = 0;
  std::string data;
  std::optional<uint64_t> cas;  // gets and gats only

  bool operator==(const Value&) const = default;
};
void PrintTo(const Value& value, std::ostream* os);

// A blocking TCP connection to 127.0.0.1 with timed reads.
//
// Reads that cannot be satisfied return nullopt (or, for read_line and
// request, a text in angle brackets that no memcached reply starts with) and
// leave the reason in last_error(). Bytes read but not yet consumed are kept,
// so that a reply can be read in pieces.
class Client {
 public:
  Client() = default;
  ~Client();
  Client(Client&& other) noexcept;
  Client& operator=(Client&& other) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  ::testing::AssertionResult connect(uint16_t port);
  // To a unix-domain socket (--unix_socket).
  ::testing::AssertionResult connect_unix(const std::string& path);
  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // This end of the connection, "127.0.0.1:PORT": how the server names its
  // peer (`stats conns`, `stats locks`). "?" (and a test failure) when unknown.
  std::string local_address() const;

  void set_nodelay(bool on = true);
  // Sends all of `bytes`; false (and last_error) when the connection fails.
  bool send(std::string_view bytes);

  // Everything up to and including `terminator`.
  std::optional<std::string> read_until(std::string_view terminator,
                                        std::chrono::milliseconds timeout = kReplyTimeout);
  std::optional<std::string> read_exactly(size_t n,
                                          std::chrono::milliseconds timeout = kReplyTimeout);
  // One line without its "\r\n"; on failure "<no reply: REASON>".
  std::string read_line(std::chrono::milliseconds timeout = kReplyTimeout);
  // Sends `command` and "\r\n", returns the first reply line as read_line().
  std::string request(std::string_view command, std::chrono::milliseconds timeout = kReplyTimeout);

  // True when the server closes the connection (end of stream or reset)
  // within `timeout`. Bytes that arrive first are kept for the read_*() calls.
  bool wait_for_close(std::chrono::milliseconds timeout = kReplyTimeout);
  bool peer_closed() const { return peer_closed_; }
  // Bytes received but not consumed by a read_*() call.
  const std::string& buffered() const { return buffer_; }
  const std::string& last_error() const { return last_error_; }

  void close();
  // Closes with a TCP reset instead of an orderly FIN.
  void abort();
  // Ends the sending direction (FIN) and keeps reading.
  bool shutdown_send();

  // --- memcached text protocol helpers --------------------------------------

  // "CMD KEY FLAGS EXPTIME LEN[ EXTRA]\r\nDATA\r\n"; returns the reply line.
  std::string store(std::string_view command, std::string_view key, std::string_view data,
                    uint32_t flags = 0, int64_t exptime = 0, std::string_view extra = "");
  // Reads VALUE blocks up to END. nullopt when the reply is anything else.
  std::optional<std::vector<Value>> read_values(std::chrono::milliseconds timeout = kReplyTimeout);
  // "get KEY": the value, or nullopt on a miss (any malformed reply fails the
  // current test).
  std::optional<std::string> get(std::string_view key);
  // "stats[ GROUP]" as a name -> value map; empty (and a test failure) on a
  // malformed reply.
  std::map<std::string, std::string> stats(std::string_view group = "");

 private:
  ::testing::AssertionResult connect_to(const sockaddr* address, socklen_t length,
                                        const std::string& name);
  // Waits until the buffer holds more bytes, the peer closes or time is up.
  bool fill(std::chrono::steady_clock::time_point deadline, std::string_view waiting_for);

  int fd_ = -1;
  std::string buffer_;
  bool peer_closed_ = false;
  std::string last_error_;
};

// Reads a numeric stat; fails the current test and returns 0 when absent.
uint64_t stat_u64(const std::map<std::string, std::string>& stats, const std::string& name);

// Calls `condition` every `interval` until it holds or `timeout` passes; for
// waiting on a state the server shows only when asked (expiry, a closed
// connection being counted), never as a stand-in for awaiting a reply.
bool eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::seconds(5),
                std::chrono::milliseconds interval = std::chrono::milliseconds(100));

// Ports a test must name itself (test/common/free_ports.h).
using test_ports::free_port;
using test_ports::free_ports;
using test_ports::port_is_free;

// A fresh directory for one test (under gtest's TempDir()), removed with
// all it holds afterwards.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Makes binary-safe text readable in failure messages ("\r\n" -> "\\r\\n").
std::string escape(std::string_view bytes, size_t max_length = 200);

// The public part of a lock-service session id "<serial>-<secret>", all
// that `stats locks` and `watch` show of a session (docs/lock-service.md).
std::string session_serial(std::string_view id);

}  // namespace e2e
