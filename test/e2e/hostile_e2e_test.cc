// Hostile-client end-to-end tests (issue "Reliability and security"): no
// client, however broken or hostile, may crash the server, wedge it, make it
// grow without bound, or make it lose or corrupt what others stored.
//
// Every test starts its own server (both ports on kernel-picked ports, so
// that ctest -j2 can run two at once), has a well-behaved client store values
// and hold a named lock before the attack, attacks, and ends with
// expect_healthy(): the server still runs, a fresh client gets correct
// answers on both ports, what was stored before the attack is intact, the
// lock held before it is still held by its owner, and the server's RSS is
// bounded.
//
// Attack connections are non-blocking (RawConn) so that a server that stops
// reading cannot hang the test; their random content comes from fixed seeds.
// Replies are awaited wherever there is one; eventually() only polls for what
// the server shows when asked (connection counts, queued waiters, RSS after a
// client went away). Sleeps only pace a deliberately slow client.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sanitizer.h"
#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using e2e::Client;
using e2e::eventually;
using e2e::latency_bound_ms;
using e2e::rss_bound;
using e2e::ServerProcess;
using e2e::stat_u64;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;
// The RSS every test's server must stay under, attack included (for a
// server built without a sanitizer: see rss_bound()).
constexpr uint64_t kRssLimit = 200 * kMiB;
constexpr uint64_t kSeed = 0x5eed'c0de'2024'0001ull;

// --- small helpers ------------------------------------------------------------

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// A field of /proc/PID/status ("VmRSS", "VmSize") in bytes; 0 (and a test
// failure) when it cannot be read.
uint64_t proc_status_bytes(pid_t pid, std::string_view field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.size() > field.size() && line.compare(0, field.size(), field) == 0 &&
        line[field.size()] == ':') {
      std::istringstream words(line.substr(field.size() + 1));
      uint64_t kb = 0;
      words >> kb;
      return kb * kKiB;
    }
  }
  ADD_FAILURE() << "no " << field << " in /proc/" << pid << "/status";
  return 0;
}

uint64_t rss_bytes(pid_t pid) {
  return proc_status_bytes(pid, "VmRSS");
}

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / kMiB);
  return text;
}

std::string kib(uint64_t bytes) {
  return std::to_string(bytes / kKiB) + " KiB";
}

double ms_of(Clock::duration duration) {
  return std::chrono::duration<double, std::milli>(duration).count();
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> words;
  size_t start = 0;
  while (start <= line.size()) {
    size_t space = line.find(' ', start);
    if (space == std::string_view::npos) space = line.size();
    words.emplace_back(line.substr(start, space - start));
    start = space + 1;
  }
  return words;
}

// The port of the "Listening on HOST:PORT (lock service)" line.
std::optional<uint16_t> find_lock_port(const std::string& log) {
  constexpr std::string_view kSuffix = " (lock service)";
  size_t suffix = log.find(kSuffix);
  if (suffix == std::string::npos) return std::nullopt;
  size_t colon = log.rfind(':', suffix);
  size_t line_start = log.rfind('\n', suffix);
  if (colon == std::string::npos || (line_start != std::string::npos && colon < line_start)) {
    return std::nullopt;
  }
  std::optional<uint64_t> port =
      parse_u64(std::string_view(log).substr(colon + 1, suffix - colon - 1));
  if (!port || *port == 0 || *port > 65535) return std::nullopt;
  return static_cast<uint16_t>(*port);
}

// The "Max open files" soft limit of `pid`, as /proc/PID/limits shows it.
std::string max_open_files(pid_t pid) {
  std::ifstream limits("/proc/" + std::to_string(pid) + "/limits");
  std::string line;
  while (std::getline(limits, line)) {
    if (starts_with(line, "Max open files")) {
      std::istringstream words(line.substr(std::strlen("Max open files")));
      std::string soft, hard;
      words >> soft >> hard;
      return soft + " (hard " + hard + ")";
    }
  }
  return "?";
}

std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t word = rng();
    std::memcpy(bytes.data() + i, &word, std::min<size_t>(8, n - i));
  }
  return bytes;
}

size_t pick(std::mt19937_64& rng, size_t n) {
  return static_cast<size_t>(rng() % n);
}

template <typename T, size_t N>
const T& pick_from(std::mt19937_64& rng, const T (&choices)[N]) {
  return choices[pick(rng, N)];
}

// Deterministic, recognisable content: a corrupted or shifted copy differs.
std::string pattern(std::string_view tag, size_t n) {
  std::string data;
  data.reserve(n + 32);
  for (size_t i = 0; data.size() < n; ++i) {
    data += tag;
    data += '#';
    data += std::to_string(i);
    data += ';';
  }
  data.resize(n);
  return data;
}

// --- a non-blocking attack connection ------------------------------------------

// A TCP connection to 127.0.0.1 whose sends and reads never block: a server
// that stops reading, or never answers, cannot hang the test.
class RawConn {
 public:
  RawConn() = default;
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;
  ~RawConn() { close(); }

  bool connect(uint16_t port, std::string* error) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      *error = errno_text("socket");
      return false;
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    while (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      if (errno == EINTR) continue;
      *error = errno_text("connect");
      close();
      return false;
    }
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
    return true;
  }

  // Sends what the socket takes now: the byte count (maybe 0), or -1 once
  // the server has closed or reset the connection.
  ssize_t send_some(std::string_view bytes) {
    if (fd_ < 0 || peer_closed_) return -1;
    while (true) {
      ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent >= 0) return sent;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      peer_closed_ = true;
      return -1;
    }
  }

  // Sends all of `bytes` within `timeout`, reading what arrives meanwhile.
  // False when the server closed the connection or stopped taking bytes.
  bool send_all(std::string_view bytes, std::chrono::milliseconds timeout) {
    Clock::time_point deadline = Clock::now() + timeout;
    while (!bytes.empty()) {
      ssize_t sent = send_some(bytes);
      if (sent < 0) return false;
      bytes.remove_prefix(static_cast<size_t>(sent));
      if (bytes.empty()) break;
      if (!drain() || Clock::now() >= deadline) return false;
      if (sent == 0) wait(POLLOUT | POLLIN, deadline);
    }
    return true;
  }

  // Reads everything that has arrived, keeping up to keep_limit() bytes of
  // it. False once the server has closed the connection.
  bool drain() {
    while (fd_ >= 0 && !peer_closed_) {
      char chunk[65536];
      ssize_t n = ::recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
      if (n > 0) {
        received_total_ += static_cast<size_t>(n);
        size_t keep =
            std::min(static_cast<size_t>(n), keep_limit_ - std::min(keep_limit_, received_.size()));
        received_.append(chunk, keep);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      peer_closed_ = true;  // end of stream or reset
    }
    return false;
  }

  // Waits until at least `n` bytes are kept, or the server closes, or time
  // is up; true when the bytes are there.
  bool wait_for_bytes(size_t n, std::chrono::milliseconds timeout) {
    keep_limit_ = std::max(keep_limit_, n);
    Clock::time_point deadline = Clock::now() + timeout;
    while (received_.size() < n) {
      if (!drain() && received_.size() < n) return false;
      if (received_.size() >= n) break;
      if (Clock::now() >= deadline) return false;
      wait(POLLIN, deadline);
    }
    return true;
  }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Closes with a TCP reset instead of an orderly FIN.
  void abort() {
    if (fd_ < 0) return;
    linger reset{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    close();
  }

  int fd() const { return fd_; }
  bool peer_closed() const { return peer_closed_; }
  size_t received_total() const { return received_total_; }
  std::string& received() { return received_; }
  void set_keep_limit(size_t bytes) { keep_limit_ = bytes; }

 private:
  void wait(short events, Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd poll_fd{fd_, events, 0};
    poll(&poll_fd, 1, static_cast<int>(std::clamp<int64_t>(left.count(), 0, 100)));
  }

  int fd_ = -1;
  bool peer_closed_ = false;
  size_t received_total_ = 0;
  size_t keep_limit_ = 0;
  std::string received_;
};

// --- floods: many attack connections driven by one thread -----------------------

struct Flood {
  RawConn conn;
  std::mt19937_64 rng;
  size_t budget = 0;  // bytes still to generate
  std::string chunk;  // generated, not yet all sent
  size_t chunk_sent = 0;
  uint32_t messages = 0;                    // the generator's count (binary opaques)
  std::function<std::string(Flood&)> next;  // the next bytes to send
  bool done = false;
  bool closed_by_server = false;
};

struct FloodTotals {
  size_t connections = 0;
  size_t closed_by_server = 0;
  size_t stalled = 0;  // still open, the server not taking bytes at the deadline
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  std::vector<std::string> errors;

  void add(const FloodTotals& other) {
    connections += other.connections;
    closed_by_server += other.closed_by_server;
    stalled += other.stalled;
    bytes_sent += other.bytes_sent;
    bytes_received += other.bytes_received;
    errors.insert(errors.end(), other.errors.begin(), other.errors.end());
  }
};

// Sends every flood its budget, round robin, reading (and discarding beyond
// each connection's keep limit) whatever the server answers, until all are
// done or closed by the server, or `deadline` passes.
void run_floods(std::vector<std::unique_ptr<Flood>>& floods, Clock::time_point deadline,
                FloodTotals& totals) {
  while (true) {
    bool active = false;
    bool progress = false;
    std::vector<pollfd> waiting;
    for (auto& flood : floods) {
      if (flood->done) continue;
      if (!flood->conn.drain()) {
        flood->done = flood->closed_by_server = true;
        continue;
      }
      if (flood->chunk_sent == flood->chunk.size()) {
        if (flood->budget == 0) {
          flood->done = true;
          continue;
        }
        flood->chunk = flood->next(*flood);
        flood->budget -= std::min(flood->budget, flood->chunk.size());
        flood->chunk_sent = 0;
      }
      active = true;
      ssize_t sent =
          flood->conn.send_some(std::string_view(flood->chunk).substr(flood->chunk_sent));
      if (sent < 0) {
        flood->done = flood->closed_by_server = true;
        continue;
      }
      flood->chunk_sent += static_cast<size_t>(sent);
      totals.bytes_sent += static_cast<uint64_t>(sent);
      if (sent > 0) {
        progress = true;
      } else {
        waiting.push_back({flood->conn.fd(), POLLIN | POLLOUT, 0});
      }
    }
    if (!active) break;
    if (Clock::now() >= deadline) {
      for (auto& flood : floods)
        totals.stalled += flood->done ? 0 : 1;
      break;
    }
    if (!progress && !waiting.empty()) poll(waiting.data(), waiting.size(), 20);
  }
  for (auto& flood : floods) {
    flood->conn.drain();
    totals.connections += 1;
    totals.closed_by_server += flood->closed_by_server || flood->conn.peer_closed() ? 1 : 0;
    totals.bytes_received += flood->conn.received_total();
  }
}

// --- generators ------------------------------------------------------------------

// Lines of memcached text commands put together at random from real command
// words and hostile arguments. No flush_all and no cache_memlimit: those
// legitimately drop what others stored. Keys never name the well-behaved
// client's keys.
std::string text_soup(Flood& flood) {
  static const char* const kCommands[] = {
      "get",     "gets",      "gat",   "gats",   "bget",     "set",        "add",   "replace",
      "append",  "prepend",   "cas",   "delete", "incr",     "decr",       "touch", "stats",
      "version", "verbosity", "keys",  "lock",   "unlock",   "unlock_all", "mg",    "ms",
      "md",      "ma",        "mn",    "me",     "shutdown", "quit",       "GET",   "x",
      "",        "\x80",      "stats", "get",    "set",      "mg",         "ms"};
  static const char* const kKeys[] = {"fz0", "fz1", "fz2", "fz3", "fz4",    "fz5",
                                      "fz6", "fz7", "fz8", "fz9", "fz\x01", "fz\x7f"};
  static const char* const kNumbers[] = {"0",
                                         "1",
                                         "-1",
                                         "5",
                                         "100",
                                         "1048576",
                                         "1048577",
                                         "2147483645",
                                         "2147483647",
                                         "2147483648",
                                         "4294967295",
                                         "4294967296",
                                         "18446744073709551615",
                                         "18446744073709551616",
                                         "99999999999999999999999999",
                                         "-9223372036854775808",
                                         "0x10",
                                         "1e9",
                                         "abc",
                                         "noreply",
                                         "HTTP/1.1"};
  static const char* const kMetaFlags[] = {
      "v",   "k",           "q",
      "T0",  "T-1",         "T99999999999",
      "N30", "I",           "MS",
      "ME",  "MA",          "MP",
      "MR",  "M+",          "c",
      "t",   "s",           "f",
      "h",   "l",           "O42",
      "b",   "S100",        "S1048577",
      "E1",  "R30",         "D5",
      "J13", "F4294967295", "C1",
      "Mz",  "N-5",         "Oxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"};
  static const char* const kEnds[] = {"\r\n", "\r\n", "\r\n", "\r\n", "\n", "\n", "\r", " \r\n"};
  std::mt19937_64& rng = flood.rng;
  std::string out;
  while (out.size() < 4096) {
    std::string line;
    if (pick(rng, 100) == 0) line.append(pick(rng, 120), ' ');
    std::string command = pick_from(rng, kCommands);
    if (command == "quit" && pick(rng, 20) != 0) command = "get";
    line += command;
    auto key = [&]() -> std::string {
      switch (pick(rng, 40)) {
        case 0:
          return std::string(250, 'K');
        case 1:
          return std::string(251, 'L');
        case 2:
          return "";
        default:
          return pick_from(rng, kKeys);
      }
    };
    bool storage = command == "set" || command == "add" || command == "replace" ||
                   command == "append" || command == "prepend" || command == "cas";
    std::string data;
    if (storage && pick(rng, 2) == 0) {
      // A well-formed storage line with a data block that may not fit.
      size_t length = pick(rng, 3000);
      line += " " + key() + " " + std::to_string(pick(rng, 70000)) + " " +
              pick_from(rng, kNumbers) + " ";
      line += pick(rng, 10) == 0 ? std::string(pick_from(rng, kNumbers)) : std::to_string(length);
      if (command == "cas") line += " " + std::to_string(rng() % 1000);
      if (pick(rng, 4) == 0) line += " noreply";
      data = std::string(length + (pick(rng, 8) == 0 ? pick(rng, 5) : 0), 'd');
      if (pick(rng, 10) == 0 && !data.empty()) data[pick(rng, data.size())] = '\n';
      data += "\r\n";
    } else if (command == "ms" && pick(rng, 2) == 0) {
      size_t length = pick(rng, 2000);
      line += " " + key() + " " + std::to_string(length);
      for (size_t i = pick(rng, 4); i > 0; --i)
        line += std::string(" ") + pick_from(rng, kMetaFlags);
      data = std::string(length, 'm') + "\r\n";
    } else {
      for (size_t i = pick(rng, 7); i > 0; --i) {
        line += pick(rng, 12) == 0 ? "\t" : " ";
        switch (pick(rng, 3)) {
          case 0:
            line += key();
            break;
          case 1:
            line += pick_from(rng, kNumbers);
            break;
          default:
            line += pick_from(rng, kMetaFlags);
        }
      }
    }
    if (pick(rng, 1000) == 0) line.append(3000, 'Z');  // too long: the server hangs up
    out += line;
    out += pick_from(rng, kEnds);
    out += data;
  }
  return out;
}

// Lock-service requests with hostile arguments. Waits are at most 20 ms, so
// that waiting on another attacker's lock ends quickly; names never collide
// with the well-behaved clients' ("x", "keeper").
std::string lock_soup(Flood& flood) {
  static const char* const kNames[] = {"fz0", "fz1", "fz2", "fz3", "fz4", "fz\x01"};
  static const char* const kWaits[] = {"0",     "0.01", "0.02",     "-1",  "nan",  "inf",
                                       "1e999", "abc",  "31536001", "0x1", "1e-9", ""};
  static const char* const kTimeouts[] = {
      "0", "10", "604800000", "604800001", "-1", "99999999999999999999", "x"};
  std::mt19937_64& rng = flood.rng;
  auto name = [&]() -> std::string {
    switch (pick(rng, 30)) {
      case 0:
        return std::string(250, 'n');
      case 1:
        return std::string(251, 'n');
      default:
        return pick_from(rng, kNames);
    }
  };
  std::string out;
  while (out.size() < 2048) {
    switch (pick(rng, 16)) {
      case 0:
        out += "lock " + name() + " " + pick_from(rng, kWaits) + "\r\n";
        break;
      case 1:
      case 2:
        out += "lock " + name() + "\r\n";
        break;
      case 3:
      case 4:
        out += "unlock " + name() + "\r\n";
        break;
      case 5:
        out += "unlock_all\r\n";
        break;
      case 6:
        out += pick(rng, 2) ? "conn_id\r\n" : "conn_id " + random_bytes(rng, 8) + "\r\n";
        break;
      case 7:
        out += std::string("set_timeout ") + pick_from(rng, kTimeouts) + "\r\n";
        break;
      case 8:
        out += pick(rng, 2) ? "stats\r\n" : "stats locks fz\r\n";
        break;
      case 9:
        out += "stats bogus group\r\n";
        break;
      case 10:
        out += "lock\r\nunlock\r\nlock a b c d\r\n";
        break;
      case 11:
        out += "\r\n\n \r\n";
        break;
      case 12:
        out += pick(rng, 200) == 0 ? "quit\r\n" : "version\r\n";
        break;
      default: {
        std::string junk = random_bytes(rng, pick(rng, 64));
        std::replace(junk.begin(), junk.end(), '\n', '.');
        out += junk + "\r\n";
      }
    }
  }
  return out;
}

std::string random_chunk(Flood& flood) {
  return random_bytes(flood.rng, std::min<size_t>(flood.budget, 8192));
}

void put_be16(std::string& out, size_t at, uint16_t value) {
  out[at] = static_cast<char>(value >> 8);
  out[at + 1] = static_cast<char>(value);
}

void put_be32(std::string& out, size_t at, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out[at + i] = static_cast<char>(value >> (24 - 8 * i));
}

void put_be64(std::string& out, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    out[at + i] = static_cast<char>(value >> (56 - 8 * i));
}

uint32_t get_be32(std::string_view in, size_t at) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i)
    value = (value << 8) | static_cast<uint8_t>(in[at + i]);
  return value;
}

std::string binary_header(uint8_t opcode, uint16_t key_length, uint8_t extras_length,
                          uint32_t body_length, uint32_t opaque, uint64_t cas = 0) {
  std::string header(24, '\0');
  header[0] = static_cast<char>(0x80);
  header[1] = static_cast<char>(opcode);
  put_be16(header, 2, key_length);
  header[4] = static_cast<char>(extras_length);
  put_be32(header, 8, body_length);
  std::memcpy(header.data() + 12, &opaque, 4);  // echoed as is
  put_be64(header, 16, cas);
  return header;
}

// A binary request: magic 0x80, then anything. 3/8 are well formed
// (their whole body sent); the rest have random opcodes and lengths, bodies
// declared up to 4 GiB and only partly sent. No Flush (0x08, 0x18): that
// legitimately drops what others stored. Opaque is the message's number.
std::string binary_message(Flood& flood) {
  static const uint8_t kKnown[] = {
      0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
      0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x23,
      0x24, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x4b, 0x50};
  std::mt19937_64& rng = flood.rng;
  uint32_t opaque = ++flood.messages;
  uint8_t opcode = pick_from(rng, kKnown);
  if (pick(rng, 2) == 0) {
    do {
      opcode = static_cast<uint8_t>(rng());
    } while (opcode == 0x08 || opcode == 0x18);
  }
  if (pick(rng, 8) < 3) {
    // Well formed: the lengths each known opcode wants.
    uint8_t extras = 0;
    bool value = false;
    switch (opcode) {
      case 0x01:
      case 0x02:
      case 0x03:
      case 0x11:
      case 0x12:
      case 0x13:
      case 0x4a:
      case 0x4b:
        extras = 8;
        value = true;
        break;
      case 0x0e:
      case 0x0f:
      case 0x19:
      case 0x1a:
        value = true;
        break;
      case 0x05:
      case 0x06:
      case 0x15:
      case 0x16:
        extras = 20;
        break;
      case 0x1c:
      case 0x1d:
      case 0x1e:
      case 0x23:
      case 0x24:
        extras = 4;
        break;
      case 0x1b:
        extras = 4;
        break;
      default:
        break;
    }
    bool keyless = opcode == 0x07 || opcode == 0x17 || opcode == 0x0a || opcode == 0x0b ||
                   opcode == 0x1b || opcode == 0x44 || opcode == 0x45;
    std::string key = keyless ? "" : "fz" + std::to_string(pick(rng, 10));
    if (opcode == 0x10) key = pick(rng, 2) ? "" : "settings";
    if (opcode == 0x50) key = "fz";
    std::string value_bytes = value ? random_bytes(rng, pick(rng, 3000)) : "";
    std::string body = random_bytes(rng, extras) + key + value_bytes;
    if (extras == 20) put_be32(body, 16, static_cast<uint32_t>(pick(rng, 2) ? 0 : 0xffffffff));
    return binary_header(opcode, static_cast<uint16_t>(key.size()), extras,
                         static_cast<uint32_t>(body.size()), opaque, pick(rng, 8) ? 0 : rng()) +
           body;
  }
  static const uint8_t kExtras[] = {0, 0, 4, 8, 20, 255};
  uint8_t extras = pick(rng, 6) ? pick_from(rng, kExtras) : static_cast<uint8_t>(rng());
  uint16_t key;
  switch (pick(rng, 6)) {
    case 0:
      key = 0;
      break;
    case 1:
      key = 250;
      break;
    case 2:
      key = 251;
      break;
    case 3:
      key = static_cast<uint16_t>(rng());
      break;
    default:
      key = static_cast<uint16_t>(1 + pick(rng, 16));
  }
  uint32_t fixed = uint32_t{extras} + key;
  uint32_t body;
  switch (pick(rng, 8)) {
    case 0:
      body = fixed;
      break;
    case 1:
      body = fixed + static_cast<uint32_t>(pick(rng, 2048));
      break;
    case 2:
      body = fixed + static_cast<uint32_t>(pick(rng, 2 * kMiB));
      break;
    case 3:
      body = 0xffffffffu;
      break;
    case 4:
      body = static_cast<uint32_t>(rng());
      break;
    case 5:
      body = 0;
      break;
    case 6:
      body = fixed > 0 ? fixed - 1 : 0;
      break;
    default:
      body = 0x80000000u + static_cast<uint32_t>(pick(rng, 1000));
  }
  std::string message = binary_header(opcode, key, extras, body, opaque, pick(rng, 4) ? 0 : rng());
  message[5] = pick(rng, 4) ? '\0' : static_cast<char>(rng());  // data type
  message[6] = pick(rng, 4) ? '\0' : static_cast<char>(rng());  // vbucket
  message += random_bytes(rng, std::min<size_t>(body, pick(rng, 4096)));
  return message;
}

// Checks the replies of a binary connection: a run of complete responses,
// each with magic 0x81 and a known status, possibly cut short where this
// client stopped keeping bytes. (Opaques are not checked: once the server
// skips a declared body longer than what was sent, it reads later random
// bytes as requests, legitimately.)
std::string check_binary_replies(std::string_view in) {
  static const uint16_t kStatuses[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05,
                                       0x06, 0x10, 0x11, 0x81, 0x82};
  size_t pos = 0;
  while (pos + 24 <= in.size()) {
    if (static_cast<uint8_t>(in[pos]) != 0x81) {
      return "byte " + std::to_string(pos) + ": magic " +
             std::to_string(static_cast<uint8_t>(in[pos])) + ", not 0x81: \"" +
             e2e::escape(in.substr(pos, 48)) + "\"";
    }
    uint16_t status = static_cast<uint16_t>((static_cast<uint8_t>(in[pos + 6]) << 8) |
                                            static_cast<uint8_t>(in[pos + 7]));
    if (std::find(std::begin(kStatuses), std::end(kStatuses), status) == std::end(kStatuses)) {
      return "byte " + std::to_string(pos) + ": unknown status " + std::to_string(status);
    }
    pos += 24 + size_t{get_be32(in, pos + 8)};
  }
  return "";
}

// --- a well-behaved client measuring how promptly it is served ---------------------

// Set+get round trips on a few connections (so that both reactor threads
// are probed) on a thread of its own, until stopped; every reply checked.
class Prober {
 public:
  explicit Prober(uint16_t port) {
    for (int i = 0; i < 4; ++i) {
      clients_.emplace_back();
      EXPECT_TRUE(clients_.back().connect(port));
      clients_.back().set_nodelay();
    }
    thread_ = std::thread([this] { run(); });
  }
  ~Prober() { stop(); }

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // After stop(): round trips made, and the slowest and 99th percentile.
  size_t count() const { return times_.size(); }
  double max_ms() const {
    return times_.empty() ? 0 : *std::max_element(times_.begin(), times_.end());
  }
  double p99_ms() const {
    if (times_.empty()) return 0;
    std::vector<double> sorted = times_;
    std::sort(sorted.begin(), sorted.end());
    return sorted[sorted.size() * 99 / 100];
  }

 private:
  void run() {
    for (size_t round = 0; !stop_; ++round) {
      Client& client = clients_[round % clients_.size()];
      std::string key = "probe" + std::to_string(round % clients_.size());
      std::string value = "round " + std::to_string(round);
      Clock::time_point t0 = Clock::now();
      std::string stored = client.store("set", key, value);
      std::optional<std::string> got = client.get(key);
      times_.push_back(ms_of(Clock::now() - t0));
      if (stored != "STORED" || got != value) {
        ADD_FAILURE() << "probe " << key << ": set \"" << stored << "\", get "
                      << (got ? "\"" + e2e::escape(*got) + "\"" : std::string("nothing"));
        return;
      }
      std::this_thread::sleep_for(1ms);  // pacing the probe, not waiting for anything
    }
  }

  std::vector<Client> clients_;
  std::vector<double> times_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// --- the fixture -------------------------------------------------------------------

::testing::AssertionResult server_read(Client& observer, uint64_t before, uint64_t bytes);

class HostileE2e : public ::testing::Test {
 protected:
  // Starts the server with the lock service on a kernel-picked port, stores
  // the well-behaved client's values and takes its lock.
  void start(std::vector<std::string> flags = {}) {
    flags.insert(flags.begin(), {"--lock_port=-1", "--threads=2"});
    ASSERT_TRUE(server_.start(flags));
    ASSERT_TRUE(eventually(
        [&] {
          lock_port_ = find_lock_port(server_.log()).value_or(0);
          return lock_port_ != 0;
        },
        10s, 10ms))
        << "no \"Listening on ...(lock service)\" line";

    Client client = cache_client();
    static const size_t kSizes[] = {1, 100, 511, 512, 4096, 65536, 300000, 1000000};
    for (size_t i = 0; i < 32; ++i) {
      char key[32];
      std::snprintf(key, sizeof key, "precious:%02zu", i);
      std::string data = pattern(key, kSizes[i % std::size(kSizes)]);
      uint32_t flags = static_cast<uint32_t>(i * 7919);
      ASSERT_EQ(client.store("set", key, data, flags), "STORED") << key;
      precious_.push_back({key, flags, data, std::nullopt});
    }

    keeper_ = lock_client();
    ASSERT_TRUE(starts_with(keeper_.request("lock keeper"), "200 Acquired ")) << "lock keeper";
    keeper_session_ = public_session(keeper_);
    client.close();
    ASSERT_TRUE(connections_become(1)) << "only the keeper's connection should be open";
    baseline_rss_ = rss_bytes(server_.pid());
  }

  Client cache_client() {
    Client client;
    EXPECT_TRUE(client.connect(server_.port()));
    client.set_nodelay();
    return client;
  }

  Client lock_client() {
    Client client;
    EXPECT_TRUE(client.connect(lock_port_));
    client.set_nodelay();
    return client;
  }

  uint64_t curr_connections() {
    Client client = cache_client();
    // Not counting the asking connection itself.
    return stat_u64(client.stats(), "curr_connections") - 1;
  }

  // Waits until the server counts `expected` connections (it counts one
  // when it accepts it, and uncounts it when it has seen it close).
  ::testing::AssertionResult connections_become(uint64_t expected) {
    uint64_t now = 0;
    if (eventually([&] { return (now = curr_connections()) == expected; }, 10s, 20ms)) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "curr_connections stayed " << now << ", expected " << expected;
  }

  // A STAT of the lock service; UINT64_MAX (and a failure) when absent.
  static uint64_t lock_stat(Client& client, const std::string& name) {
    std::string first = client.request("stats");
    EXPECT_EQ(first, "200 STATS");
    if (first != "200 STATS") return UINT64_MAX;
    uint64_t value = UINT64_MAX;
    while (true) {
      std::string line = client.read_line();
      if (line == "END") break;
      std::vector<std::string> words = split(line);
      if (words.size() != 3 || words[0] != "STAT") {
        ADD_FAILURE() << "stats: unexpected line \"" << e2e::escape(line) << "\"";
        return UINT64_MAX;
      }
      if (words[1] == name) value = parse_u64(words[2]).value_or(UINT64_MAX);
    }
    EXPECT_NE(value, UINT64_MAX) << "no STAT " << name;
    return value;
  }

  // Waits until the lock service counts `count` waiters.
  ::testing::AssertionResult waiters_become(Client& observer, uint64_t count,
                                            std::chrono::milliseconds timeout = 10s) {
    uint64_t last = 0;
    if (eventually([&] { return (last = lock_stat(observer, "waiters")) == count; }, timeout,
                   10ms)) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "waiters stayed " << last << ", expected " << count;
  }

  // The session holding `name` per "stats locks NAME", or "" when it is free.
  static std::string holder_of(Client& client, const std::string& name) {
    std::string first = client.request("stats locks " + name);
    EXPECT_EQ(first, "200 LOCKS");
    if (first != "200 LOCKS") return "<" + first + ">";
    std::string holder;
    while (true) {
      std::string line = client.read_line();
      if (line == "END") return holder;
      std::vector<std::string> words = split(line);
      if (words.size() != 7 || words[0] != "LOCK") {
        ADD_FAILURE() << "stats locks: unexpected line \"" << e2e::escape(line) << "\"";
        return "<" + line + ">";
      }
      if (words[1] == name) holder = words[2];
    }
  }

  // Sends lock-service request lines and returns their reply lines, read in
  // one piece up to the reply of a marker request (a listing of no locks):
  // reading thousands of replies costs no more than receiving them, even in
  // a sanitizer build. nullopt (and a test failure) when they do not come.
  static std::optional<std::vector<std::string>> pipeline(Client& client,
                                                          const std::string& requests) {
    constexpr std::string_view kMarkerReply = "200 LOCKS\r\nEND\r\n";
    if (!client.send(requests + "stats locks no-such-lock-prefix\r\n")) {
      ADD_FAILURE() << client.last_error();
      return std::nullopt;
    }
    std::optional<std::string> replies = client.read_until(kMarkerReply, 60s);
    if (!replies) {
      ADD_FAILURE() << client.last_error();
      return std::nullopt;
    }
    std::vector<std::string> lines;
    std::string_view rest(*replies);
    rest.remove_suffix(kMarkerReply.size());
    while (!rest.empty()) {
      size_t end = rest.find("\r\n");
      if (end == std::string_view::npos) end = rest.size();
      lines.emplace_back(rest.substr(0, end));
      rest.remove_prefix(std::min(rest.size(), end + 2));
    }
    return lines;
  }

  // What `stats locks` shows of the client's session: its serial.
  static std::string public_session(Client& client) {
    std::string reply = client.request("conn_id");
    EXPECT_TRUE(starts_with(reply, "200 ")) << reply;
    return reply.size() > 4 ? e2e::session_serial(reply.substr(4)) : "";
  }

  // What every test ends with: the server runs, answers a fresh client
  // correctly on both ports, kept what was stored and locked before the
  // attack, and its RSS is under `rss_limit`.
  void expect_healthy(const std::string& after, uint64_t rss_limit = kRssLimit) {
    SCOPED_TRACE("after " + after);
    std::optional<int> exited = server_.wait_for_exit(0ms);
    ASSERT_FALSE(exited.has_value()) << "the server " << e2e::describe_wait_status(exited);

    Client fresh = cache_client();
    ASSERT_TRUE(fresh.is_open());
    std::string value = pattern("fresh-" + after, 3000);
    EXPECT_EQ(fresh.store("set", "fresh", value, 42), "STORED");
    EXPECT_EQ(fresh.get("fresh"), value);
    size_t intact = 0;
    for (const e2e::Value& stored : precious_) {
      std::optional<std::vector<e2e::Value>> got;
      if (fresh.send("get " + stored.key + "\r\n")) got = fresh.read_values();
      if (got && got->size() == 1 && (*got)[0] == stored) {
        ++intact;
      } else if (!got || got->empty()) {
        ADD_FAILURE() << stored.key << " lost: " << (got ? "a miss" : fresh.last_error());
      } else {
        ADD_FAILURE() << stored.key << " changed: " << ::testing::PrintToString((*got)[0])
                      << ", stored " << stored.data.size() << " bytes with flags " << stored.flags;
      }
    }

    Client locks = lock_client();
    ASSERT_TRUE(locks.is_open());
    std::string reply = locks.request("lock x");
    EXPECT_TRUE(starts_with(reply, "200 Acquired ")) << "lock x: " << reply;
    EXPECT_EQ(locks.request("unlock x"), "200 Released");
    EXPECT_EQ(holder_of(locks, "keeper"), keeper_session_) << "the keeper's lock changed hands";

    uint64_t rss = rss_bytes(server_.pid());
    std::printf(
        "[ HOSTILE  ] after %s: %zu/%zu values intact, server RSS %s (before the attack %s)\n",
        after.c_str(), intact, precious_.size(), mib(rss).c_str(), mib(baseline_rss_).c_str());
    std::fflush(stdout);
    EXPECT_LT(rss, rss_bound(rss_limit))
        << "server RSS " << mib(rss) << ", " << e2e::sanitizer_name();
    exited = server_.wait_for_exit(0ms);
    EXPECT_FALSE(exited.has_value()) << "the server " << e2e::describe_wait_status(exited);
  }

  // Eight clients die after sending half of a storage request each
  // (half_request(key, round)): the even rounds overwrite `kept`, the odd
  // ones store a new key that starts with `victim`. Others must see the old
  // value meanwhile, no half value may be stored, and every connection goes.
  void kill_mid_set(const e2e::Value& kept, const std::string& victim,
                    const std::function<std::string(const std::string&, int)>& half_request,
                    const std::string& what) {
    Client observer = cache_client();
    const uint64_t baseline = 2;  // the keeper's and the observer's
    ASSERT_TRUE(connections_become(baseline));
    for (int round = 0; round < 8; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      bool overwrite = round % 2 == 0;
      std::string key = overwrite ? kept.key : victim + std::to_string(round);
      std::string request = half_request(key, round);
      uint64_t read_before = stat_u64(observer.stats(), "bytes_read");
      Client dying = cache_client();
      ASSERT_TRUE(dying.send(request)) << dying.last_error();
      ASSERT_TRUE(server_read(observer, read_before, request.size()));
      if (overwrite) {
        EXPECT_EQ(observer.get(key), kept.data) << "the old value is what others see";
      }
      if (round % 3 == 0) {
        dying.abort();
      } else {
        dying.close();
      }
      if (!overwrite) {
        EXPECT_EQ(observer.get(key), std::nullopt) << "half a value was stored";
      }
    }
    EXPECT_EQ(observer.get(kept.key), kept.data);
    EXPECT_TRUE(connections_become(baseline)) << "after the killed clients";
    expect_healthy(what);
  }

  ServerProcess server_;
  uint16_t lock_port_ = 0;
  std::vector<e2e::Value> precious_;  // stored before the attack
  Client keeper_;                     // holds the lock "keeper" for the whole test
  std::string keeper_session_;
  uint64_t baseline_rss_ = 0;
};

// Runs `make_floods(thread)` on each of `threads` threads and the floods it
// returns to completion; the totals of all.
FloodTotals flood_in_threads(
    int threads, const std::function<std::vector<std::unique_ptr<Flood>>(int, FloodTotals&)>& make,
    std::chrono::seconds limit) {
  std::vector<FloodTotals> totals(static_cast<size_t>(threads));
  std::vector<std::thread> workers;
  Clock::time_point deadline = Clock::now() + limit;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      FloodTotals& mine = totals[static_cast<size_t>(t)];
      std::vector<std::unique_ptr<Flood>> floods = make(t, mine);
      run_floods(floods, deadline, mine);
      for (size_t i = 0; i < floods.size(); ++i) {
        if (i % 3 == 0) {
          floods[i]->conn.abort();
        } else {
          floods[i]->conn.close();
        }
      }
    });
  }
  for (std::thread& worker : workers)
    worker.join();
  FloodTotals all;
  for (const FloodTotals& one : totals)
    all.add(one);
  return all;
}

// --- 1. random bytes on both ports ---------------------------------------------------

TEST_F(HostileE2e, RandomBytesOnBothPorts) {
  ASSERT_NO_FATAL_FAILURE(start());
  constexpr int kThreads = 4;
  constexpr int kCacheConnections = 200;
  constexpr int kLockConnections = 100;
  Clock::time_point began = Clock::now();
  FloodTotals totals = flood_in_threads(
      kThreads,
      [&](int thread, FloodTotals& mine) {
        std::vector<std::unique_ptr<Flood>> floods;
        for (int i = thread; i < kCacheConnections + kLockConnections; i += kThreads) {
          bool lock_port = i >= kCacheConnections;
          auto flood = std::make_unique<Flood>();
          flood->rng.seed(kSeed + static_cast<uint64_t>(i));
          std::string error;
          if (!flood->conn.connect(lock_port ? lock_port_ : server_.port(), &error)) {
            mine.errors.push_back("connection " + std::to_string(i) + ": " + error);
            continue;
          }
          // Mostly bytes at random; every fourth connection sends commands
          // put together at random instead, to get past the parsers' first
          // checks.
          if (i % 4 != 3) {
            flood->next = random_chunk;
            flood->budget = 200 * kKiB + pick(flood->rng, 200 * kKiB);
          } else if (!lock_port) {
            flood->next = text_soup;
            flood->budget = 100 * kKiB + pick(flood->rng, 100 * kKiB);
          } else {
            flood->next = lock_soup;
            flood->budget = 16 * kKiB + pick(flood->rng, 16 * kKiB);
          }
          floods.push_back(std::move(flood));
        }
        return floods;
      },
      30s);
  std::printf(
      "[ HOSTILE  ] random bytes: %zu connections, %s sent, %s received, %zu closed by "
      "the server, %zu stalled, %.0f ms\n",
      totals.connections, mib(totals.bytes_sent).c_str(), kib(totals.bytes_received).c_str(),
      totals.closed_by_server, totals.stalled, ms_of(Clock::now() - began));
  EXPECT_TRUE(totals.errors.empty()) << totals.errors.size() << " failed, first "
                                     << (totals.errors.empty() ? "" : totals.errors[0]);
  EXPECT_EQ(totals.connections, size_t{kCacheConnections + kLockConnections});
  EXPECT_EQ(totals.stalled, 0u) << "connections the server neither read nor closed for 30 s";
  EXPECT_GT(totals.bytes_sent, 50 * kMiB);
  expect_healthy("random bytes");
}

// --- 2. random binary headers ----------------------------------------------------------

TEST_F(HostileE2e, RandomBinaryHeaders) {
  ASSERT_NO_FATAL_FAILURE(start());
  constexpr int kThreads = 4;
  constexpr int kConnections = 200;
  std::mutex floods_mutex;
  std::vector<std::pair<uint32_t, std::string>> replies(kConnections);  // messages, bytes
  Clock::time_point began = Clock::now();
  FloodTotals totals;
  {
    std::vector<FloodTotals> per_thread(kThreads);
    std::vector<std::thread> workers;
    Clock::time_point deadline = Clock::now() + 30s;
    for (int t = 0; t < kThreads; ++t) {
      workers.emplace_back([&, t] {
        FloodTotals& mine = per_thread[static_cast<size_t>(t)];
        std::vector<std::unique_ptr<Flood>> floods;
        std::vector<int> indexes;
        for (int i = t; i < kConnections; i += kThreads) {
          auto flood = std::make_unique<Flood>();
          flood->rng.seed(kSeed * 3 + static_cast<uint64_t>(i));
          std::string error;
          if (!flood->conn.connect(server_.port(), &error)) {
            mine.errors.push_back("connection " + std::to_string(i) + ": " + error);
            continue;
          }
          flood->conn.set_keep_limit(256 * kKiB);
          flood->next = binary_message;
          flood->budget = 64 * kKiB + pick(flood->rng, 64 * kKiB);
          floods.push_back(std::move(flood));
          indexes.push_back(i);
        }
        run_floods(floods, deadline, mine);
        std::lock_guard lock(floods_mutex);
        for (size_t j = 0; j < floods.size(); ++j) {
          replies[static_cast<size_t>(indexes[j])] = {floods[j]->messages,
                                                      std::move(floods[j]->conn.received())};
          if (j % 3 == 0) {
            floods[j]->conn.abort();
          } else {
            floods[j]->conn.close();
          }
        }
      });
    }
    for (std::thread& worker : workers)
      worker.join();
    for (const FloodTotals& one : per_thread)
      totals.add(one);
  }
  uint64_t messages = 0;
  size_t bad = 0;
  for (size_t i = 0; i < replies.size(); ++i) {
    messages += replies[i].first;
    std::string problem = check_binary_replies(replies[i].second);
    if (!problem.empty() && bad++ < 5) {
      ADD_FAILURE() << "connection " << i << " got a malformed reply stream: " << problem;
    }
  }
  std::printf(
      "[ HOSTILE  ] random binary headers: %zu connections, %llu messages, %s sent, %s "
      "received, %zu closed by the server, %zu stalled, %.0f ms\n",
      totals.connections, static_cast<unsigned long long>(messages), mib(totals.bytes_sent).c_str(),
      kib(totals.bytes_received).c_str(), totals.closed_by_server, totals.stalled,
      ms_of(Clock::now() - began));
  EXPECT_TRUE(totals.errors.empty()) << totals.errors.size() << " failed, first "
                                     << (totals.errors.empty() ? "" : totals.errors[0]);
  EXPECT_EQ(totals.connections, size_t{kConnections});
  EXPECT_EQ(totals.stalled, 0u) << "connections the server neither read nor closed for 30 s";
  EXPECT_EQ(bad, 0u) << "connections with malformed reply streams";
  expect_healthy("random binary headers");
}

// --- 3. 2,000 connections at once ------------------------------------------------------

TEST_F(HostileE2e, TwoThousandSimultaneousConnections) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 250;
  constexpr int kConnections = kThreads * kPerThread;
  // This process holds every client socket; the server (which inherits the
  // limit) one per connection.
  constexpr rlim_t kNeeded = kConnections + 256;
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0) << errno_text("getrlimit");
  ASSERT_GE(limit.rlim_max, kNeeded)
      << "RLIMIT_NOFILE hard limit is " << limit.rlim_max << ", below the " << kNeeded
      << " descriptors this test needs for " << kConnections
      << " client sockets; raise the hard limit (ulimit -Hn) to run it";
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0) << errno_text("setrlimit");
  }
  ASSERT_NO_FATAL_FAILURE(start({"--max_connections=3000"}));
  std::printf("[ HOSTILE  ] test RLIMIT_NOFILE %llu; server's max open files %s\n",
              static_cast<unsigned long long>(limit.rlim_cur),
              max_open_files(server_.pid()).c_str());
  const uint64_t baseline = 1;  // the keeper's

  std::latch connected(kThreads + 1);
  std::latch checked(kThreads + 1);
  std::atomic<int> connect_failures{0};
  std::atomic<int> rejected{0};
  std::atomic<int> wrong{0};
  std::mutex first_problem_mutex;
  std::string first_problem;
  auto problem = [&](const std::string& what) {
    std::lock_guard lock(first_problem_mutex);
    if (first_problem.empty()) first_problem = what;
  };
  std::vector<std::thread> workers;
  Clock::time_point began = Clock::now();
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<Client> clients(kPerThread);
      for (int i = 0; i < kPerThread; ++i) {
        ::testing::AssertionResult result = clients[static_cast<size_t>(i)].connect(server_.port());
        if (!result) {
          connect_failures.fetch_add(1);
          problem(result.message());
        }
      }
      connected.arrive_and_wait();  // all 2,000 are open before any request
      for (int i = 0; i < kPerThread; ++i) {
        Client& client = clients[static_cast<size_t>(i)];
        if (!client.is_open()) continue;
        std::string key = "conn:" + std::to_string(t) + ":" + std::to_string(i);
        std::string reply = client.store("set", key, key + "-value");
        if (reply.find("Too many open connections") != std::string::npos) {
          rejected.fetch_add(1);
          problem(key + ": " + reply);
          continue;
        }
        std::string get_reply = client.request("get " + key);
        std::optional<std::string> rest = client.read_until("END\r\n");
        std::string expected_first = "VALUE " + key + " 0 " + std::to_string(key.size() + 6);
        if (reply != "STORED" || get_reply != expected_first || rest != key + "-value\r\nEND\r\n") {
          wrong.fetch_add(1);
          problem(key + ": set \"" + reply + "\", get \"" + e2e::escape(get_reply) + "\"");
        }
      }
      checked.arrive_and_wait();  // still all open until every one was served
    });
  }
  connected.arrive_and_wait();
  double connect_ms = ms_of(Clock::now() - began);
  uint64_t open_now = 0;
  EXPECT_TRUE(
      eventually([&] { return (open_now = curr_connections()) >= baseline + kConnections; }, 10s))
      << "curr_connections " << open_now << ", expected " << baseline << " + " << kConnections;
  checked.arrive_and_wait();
  for (std::thread& worker : workers)
    worker.join();
  double served_ms = ms_of(Clock::now() - began);
  uint64_t after = 0;
  EXPECT_TRUE(eventually([&] { return (after = curr_connections()) == baseline; }, 10s))
      << "curr_connections stayed " << after << " after all closed, baseline " << baseline;
  std::printf(
      "[ HOSTILE  ] %d connections: connected in %.0f ms, served and closed in %.0f ms, "
      "curr_connections %llu at the peak, %llu after (baseline %llu); %d rejected, %d "
      "connect failures, %d wrong replies\n",
      kConnections, connect_ms, served_ms, static_cast<unsigned long long>(open_now),
      static_cast<unsigned long long>(after), static_cast<unsigned long long>(baseline),
      rejected.load(), connect_failures.load(), wrong.load());
  EXPECT_EQ(connect_failures.load(), 0) << first_problem;
  EXPECT_EQ(rejected.load(), 0) << "the server refused connections below --max_connections: "
                                << first_problem;
  EXPECT_EQ(wrong.load(), 0) << first_problem;
  expect_healthy("2000 simultaneous connections");
}

// --- 4. pipelined gets that are never read ----------------------------------------------

TEST_F(HostileE2e, PipelinedGetsNeverRead) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string big = pattern("big", 500 * 1000);
  Client writer = cache_client();
  ASSERT_EQ(writer.store("set", "big", big), "STORED");
  ASSERT_EQ(writer.get("big"), big);  // warm: the reply path has run once
  Client other = cache_client();      // served while the attack goes on
  Prober prober(server_.port());
  uint64_t before = rss_bytes(server_.pid());
  // The keeper's, the writer's, the other client's and the prober's four.
  const uint64_t baseline_connections = 7;
  ASSERT_TRUE(connections_become(baseline_connections));

  // 2,000 pipelined gets of the 500 KB value (1 GB of replies), never read.
  RawConn pipelined;
  std::string error;
  ASSERT_TRUE(pipelined.connect(server_.port(), &error)) << error;
  std::string gets;
  for (int i = 0; i < 2000; ++i)
    gets += "get big\r\n";
  ASSERT_TRUE(pipelined.send_all(gets, 10s)) << "the server did not take 18 KB of requests";
  // One multi-get line naming the value 10,000 times (5 GB of replies).
  // (Bigger lines stall the reactor thread for longer, a cost of their own:
  // see SmallValueMultiGetNeverRead.)
  RawConn multi;
  ASSERT_TRUE(multi.connect(server_.port(), &error)) << error;
  std::string line = "get";
  for (int i = 0; i < 10000; ++i)
    line += " big";
  line += "\r\n";
  ASSERT_TRUE(multi.send_all(line, 10s)) << "the server did not take the multi-get line";
  // Keep pipelining: a server that went on reading would take all 16 MB.
  std::string more;
  for (int i = 0; i < 1000; ++i)
    more += "get big\r\n";
  uint64_t extra = 0;
  Clock::time_point stop = Clock::now() + 2s;
  while (extra < 16 * kMiB && Clock::now() < stop) {
    ssize_t sent = pipelined.send_some(more);
    if (sent < 0) break;
    extra += static_cast<uint64_t>(sent);
    if (sent == 0) std::this_thread::sleep_for(5ms);  // pacing the hostile client
  }

  // Others are served promptly meanwhile, the big value included.
  std::vector<double> times;
  for (int i = 0; i < 50; ++i) {
    Clock::time_point t0 = Clock::now();
    std::string value = "v" + std::to_string(i);
    EXPECT_EQ(other.store("set", "other", value), "STORED");
    EXPECT_EQ(other.get("other"), value);
    times.push_back(ms_of(Clock::now() - t0));
  }
  Clock::time_point t0 = Clock::now();
  EXPECT_EQ(other.get("big"), big);
  double big_ms = ms_of(Clock::now() - t0);
  uint64_t during = rss_bytes(server_.pid());
  double slowest = *std::max_element(times.begin(), times.end());
  prober.stop();

  pipelined.abort();
  multi.close();
  uint64_t after = during;
  bool returned = eventually(
      [&] { return (after = rss_bytes(server_.pid())) < before + rss_bound(16 * kMiB); }, 10s);
  EXPECT_TRUE(connections_become(baseline_connections)) << "after the hostile clients closed";
  std::printf(
      "[ HOSTILE  ] never-read gets: server took %s more of pipelined gets; RSS before %s, "
      "during %s, after the clients closed %s; others' set+get slowest %.1f ms, 500 KB get "
      "%.1f ms; %zu probe round trips during the attack: p99 %.2f ms, max %.2f ms\n",
      mib(extra).c_str(), mib(before).c_str(), mib(during).c_str(), mib(after).c_str(), slowest,
      big_ms, prober.count(), prober.p99_ms(), prober.max_ms());
  EXPECT_LT(extra, 16 * kMiB) << "the server kept reading requests whose replies pile up";
  EXPECT_LT(during, before + rss_bound(48 * kMiB)) << "RSS grew from " << mib(before);
  EXPECT_LT(slowest, latency_bound_ms(200)) << "others were not served promptly";
  EXPECT_LT(prober.max_ms(), latency_bound_ms(200))
      << "others were not served promptly during the attack";
  EXPECT_LT(big_ms, latency_bound_ms(1000));
  EXPECT_TRUE(returned) << "RSS " << mib(after) << " after the clients closed, " << mib(before)
                        << " before";
  expect_healthy("never-read pipelined gets");
}

// Values under 512 bytes are copied into the reply queue, not referenced.
// One multi-get line of up to 256 KB names a small value 128,000 times: how
// much does a client that never reads make the server buffer, and how long
// are others on the same thread kept waiting? (Eight such clients; the RSS
// bound is the suite's 200 MB.)
TEST_F(HostileE2e, SmallValueMultiGetNeverRead) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string small = pattern("small", 500);
  Client writer = cache_client();
  ASSERT_EQ(writer.store("set", "s", small), "STORED");
  uint64_t before = rss_bytes(server_.pid());
  Prober prober(server_.port());
  constexpr int kClients = 8;
  std::string line = "get";
  while (line.size() < 250 * kKiB)
    line += " s";
  line += "\r\n";
  std::vector<std::unique_ptr<RawConn>> hogs;
  for (int i = 0; i < kClients; ++i) {
    auto hog = std::make_unique<RawConn>();
    std::string error;
    ASSERT_TRUE(hog->connect(server_.port(), &error)) << error;
    ASSERT_TRUE(hog->send_all(line, 10s)) << "the server did not take the multi-get line";
    hogs.push_back(std::move(hog));
  }
  // The server answers each line in one go; wait until it has looked up
  // every key of every line (STAT cmd_get counts keys).
  Client other = cache_client();
  uint64_t peak = 0;
  eventually(
      [&] {
        peak = std::max(peak, rss_bytes(server_.pid()));
        return stat_u64(other.stats(), "cmd_get") >= uint64_t{kClients} * ((line.size() - 5) / 2);
      },
      10s, 20ms);
  peak = std::max(peak, rss_bytes(server_.pid()));
  prober.stop();
  Clock::time_point t0 = Clock::now();
  EXPECT_EQ(other.get("s"), small);
  double get_ms = ms_of(Clock::now() - t0);
  for (auto& hog : hogs)
    hog->abort();
  uint64_t after = peak;
  eventually([&] { return (after = rss_bytes(server_.pid())) < before + rss_bound(16 * kMiB); },
             10s);
  std::printf(
      "[ HOSTILE  ] %d never-read multi-gets (%zu KB line, %zu keys of a 500-byte value "
      "each): RSS before %s, peak %s (%s per client), after they closed %s; a get "
      "afterwards %.1f ms; %zu probe round trips during the attack: p99 %.2f ms, max %.2f ms\n",
      kClients, line.size() / 1024, (line.size() - 5) / 2, mib(before).c_str(), mib(peak).c_str(),
      mib((peak - std::min(peak, before)) / kClients).c_str(), mib(after).c_str(), get_ms,
      prober.count(), prober.p99_ms(), prober.max_ms());
  EXPECT_LT(peak, rss_bound(kRssLimit))
      << "each client's " << line.size() / 1024 << " KB request made the server buffer about "
      << mib((peak - std::min(peak, before)) / kClients) << " of replies it never sends";
  EXPECT_LT(prober.max_ms(), latency_bound_ms(200))
      << "others were stalled while the server answered the multi-gets";
  expect_healthy("never-read small-value multi-gets");
}

// --- 5. 4 GiB bodies declared, never sent ------------------------------------------------

TEST_F(HostileE2e, FourGigabyteBodiesDeclaredNotSent) {
  ASSERT_NO_FATAL_FAILURE(start());
  uint64_t rss_before = rss_bytes(server_.pid());
  uint64_t size_before = proc_status_bytes(server_.pid(), "VmSize");

  struct Case {
    uint8_t opcode;
    uint8_t extras;
    uint16_t expected_status;  // or the connection closed
  };
  static const Case kCases[] = {
      {0x01, 8, 0x03},  // Set
      {0x11, 8, 0x03},  // SetQ: errors are never quiet
      {0x02, 8, 0x03},  // Add
      {0x0e, 0, 0x03},  // Append
      {0x0f, 0, 0x03},  // Prepend
      {0x4a, 8, 0x03},  // RaU
      {0x7f, 0, 0x81},  // an unknown opcode: its body skipped
      {0x00, 0, 0x04},  // Get with a body: invalid, and closed
  };
  std::vector<std::unique_ptr<Client>> held;
  int index = 0;
  for (int round = 0; round < 5; ++round) {
    for (const Case& c : kCases) {
      SCOPED_TRACE("opcode " + std::to_string(c.opcode) + " round " + std::to_string(round));
      auto client = std::make_unique<Client>();
      ASSERT_TRUE(client->connect(server_.port()));
      std::string key = "huge" + std::to_string(index++);
      uint32_t opaque = 0x4000 + static_cast<uint32_t>(index);
      std::string request = binary_header(c.opcode, static_cast<uint16_t>(key.size()), c.extras,
                                          0xffffffffu, opaque) +
                            std::string(c.extras, '\0') + key;
      ASSERT_TRUE(client->send(request)) << client->last_error();
      std::optional<std::string> header = client->read_exactly(24);
      if (!header) {
        EXPECT_TRUE(client->peer_closed())
            << "neither a reply nor a close: " << client->last_error();
        continue;
      }
      EXPECT_EQ(static_cast<uint8_t>((*header)[0]), 0x81);
      uint16_t status = static_cast<uint16_t>((static_cast<uint8_t>((*header)[6]) << 8) |
                                              static_cast<uint8_t>((*header)[7]));
      EXPECT_EQ(status, c.expected_status);
      uint32_t got_opaque;
      std::memcpy(&got_opaque, header->data() + 12, 4);
      EXPECT_EQ(got_opaque, opaque);
      uint32_t body = get_be32(*header, 8);
      ASSERT_LT(body, 1024u);
      ASSERT_TRUE(client->read_exactly(body)) << client->last_error();
      held.push_back(std::move(client));  // kept open, the server still "expecting" 4 GiB
    }
  }
  // The text protocol's counterparts. (A length of 2^32 or more is taken
  // modulo 2^32, as memcached 1.6.18 does: "set k 0 0 4294967296" stores an
  // empty value there too, so it is not among these.)
  static const char* const kTextRequests[] = {
      "set huge-text 0 0 4294967295\r\n",    "set huge-text 0 0 2147483645\r\n",
      "append huge-text 0 0 2147483647\r\n", "set huge-text 0 0 -1\r\n",
      "ms huge-text 4294967295 T0\r\n",      "ms huge-text 2147483645\r\n"};
  for (const char* request : kTextRequests) {
    SCOPED_TRACE(e2e::escape(request));
    auto client = std::make_unique<Client>();
    ASSERT_TRUE(client->connect(server_.port()));
    std::string reply = client->request(std::string_view(request, std::strlen(request) - 2));
    if (starts_with(reply, "<no reply")) {
      EXPECT_TRUE(client->peer_closed()) << reply;
      continue;
    }
    EXPECT_TRUE(starts_with(reply, "CLIENT_ERROR") || starts_with(reply, "SERVER_ERROR")) << reply;
    held.push_back(std::move(client));
  }
  // Some of those connections now send a few MB of the "body": the server
  // must skip it, not keep it.
  std::string filler(256 * kKiB, 'F');
  for (size_t i = 0; i < held.size(); i += 4) {
    for (int j = 0; j < 8; ++j) {
      if (!held[i]->send(filler)) break;
    }
  }
  Client probe = cache_client();
  for (int i = 0; i < index; ++i) {
    EXPECT_EQ(probe.get("huge" + std::to_string(i)), std::nullopt);
  }
  EXPECT_EQ(probe.get("huge-text"), std::nullopt);
  uint64_t rss_after = rss_bytes(server_.pid());
  uint64_t size_after = proc_status_bytes(server_.pid(), "VmSize");
  std::printf(
      "[ HOSTILE  ] %zu connections declaring 4 GiB bodies held open: RSS %s -> %s, "
      "VmSize %s -> %s\n",
      held.size(), mib(rss_before).c_str(), mib(rss_after).c_str(), mib(size_before).c_str(),
      mib(size_after).c_str());
  EXPECT_LT(rss_after, rss_before + rss_bound(32 * kMiB)) << "RSS grew from " << mib(rss_before);
  // Not even reserved: one 4 GiB reservation would show here.
  EXPECT_LT(size_after, size_before + 1024 * kMiB) << "VmSize grew from " << mib(size_before);
  expect_healthy("4 GiB bodies declared");
}

// --- 6. clients killed mid-request -------------------------------------------------------

// Waits until the server has read `bytes` more than `before` (STAT bytes_read),
// so that a client about to be killed is known to be mid-request.
::testing::AssertionResult server_read(Client& observer, uint64_t before, uint64_t bytes) {
  uint64_t now = 0;
  if (eventually([&] { return (now = stat_u64(observer.stats(), "bytes_read")) >= before + bytes; },
                 10s, 5ms)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "the server read " << now - before << " of " << bytes << " bytes";
}

TEST_F(HostileE2e, KilledMidTextSet) {
  ASSERT_NO_FATAL_FAILURE(start());
  // precious:06 is 300,000 bytes; each client dies after half its data block.
  kill_mid_set(
      precious_[6], "victim",
      [](const std::string& key, int round) {
        return "set " + key + " 0 0 200000" + (round % 4 == 1 ? " noreply" : "") + "\r\n" +
               std::string(100000, 'Z');
      },
      "clients killed mid text set");
}

TEST_F(HostileE2e, KilledMidBinarySet) {
  ASSERT_NO_FATAL_FAILURE(start());
  kill_mid_set(
      precious_[7], "bvictim",
      [](const std::string& key, int round) {
        uint8_t opcode = round % 4 == 1 ? 0x11 : 0x01;  // SetQ / Set
        uint32_t value_length = 600000;
        return binary_header(opcode, static_cast<uint16_t>(key.size()), 8,
                             static_cast<uint32_t>(8 + key.size() + value_length), 7) +
               std::string(8, '\0') + key + std::string(value_length / 2, 'B');
      },
      "clients killed mid binary set");
}

TEST_F(HostileE2e, KilledWhileWaitingForLock) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client observer = lock_client();

  // A queued waiter dies (reset, then FIN) before the holder lets go: the
  // lock goes to the next waiter at once. The dead waiter's session keeps
  // the default 30 s grace, so a grant to it would show as a 30 s wait.
  for (bool reset : {true, false}) {
    std::string name = reset ? "wait-reset" : "wait-fin";
    SCOPED_TRACE(name);
    Client holder = lock_client();
    ASSERT_TRUE(starts_with(holder.request("lock " + name), "200 Acquired "));
    Client dying = lock_client();
    ASSERT_TRUE(dying.send("lock " + name + " 30\r\n"));
    ASSERT_TRUE(waiters_become(observer, 1));
    Client next = lock_client();
    std::string next_session = public_session(next);
    ASSERT_TRUE(next.send("lock " + name + " 30\r\n"));
    ASSERT_TRUE(waiters_become(observer, 2));
    if (reset) {
      dying.abort();
    } else {
      dying.close();
    }
    EXPECT_TRUE(waiters_become(observer, 1)) << "the dead waiter is still queued";
    EXPECT_EQ(holder.request("unlock " + name), "200 Released");
    std::string reply = next.read_line(5s);
    EXPECT_TRUE(starts_with(reply, "200 Acquired ")) << reply;
    EXPECT_EQ(holder_of(observer, name), next_session);
    EXPECT_EQ(next.request("unlock " + name), "200 Released");
  }

  // The waiter dies at the moment the holder lets go. It had asked for its
  // locks to end with its connection (set_timeout 0): whichever comes first,
  // the next waiter has the lock within moments.
  std::vector<double> race_ms;
  for (int round = 0; round < 10; ++round) {
    std::string name = "wait-race-" + std::to_string(round);
    SCOPED_TRACE(name);
    Client holder = lock_client();
    ASSERT_TRUE(starts_with(holder.request("lock " + name), "200 Acquired "));
    Client dying = lock_client();
    ASSERT_EQ(dying.request("set_timeout 0"), "200 Timeout set");
    ASSERT_TRUE(dying.send("lock " + name + " 30\r\n"));
    ASSERT_TRUE(waiters_become(observer, 1));
    Client next = lock_client();
    std::string next_session = public_session(next);
    ASSERT_TRUE(next.send("lock " + name + " 30\r\n"));
    ASSERT_TRUE(waiters_become(observer, 2));
    Clock::time_point t0 = Clock::now();
    std::thread unlocker([&] { holder.send("unlock " + name + "\r\n"); });
    dying.abort();
    unlocker.join();
    EXPECT_EQ(holder.read_line(), "200 Released");
    std::string reply = next.read_line(5s);
    race_ms.push_back(ms_of(Clock::now() - t0));
    EXPECT_TRUE(starts_with(reply, "200 Acquired ")) << reply;
    EXPECT_EQ(holder_of(observer, name), next_session);
    EXPECT_EQ(next.request("unlock " + name), "200 Released");
    ASSERT_TRUE(waiters_become(observer, 0));
  }
  std::printf(
      "[ HOSTILE  ] waiter killed as the lock is released: next waiter granted after "
      "%.1f ms at most\n",
      *std::max_element(race_ms.begin(), race_ms.end()));

  // A waiter that pipelined a lot behind its wait (more than the server
  // reads from a blocked connection) and then hangs up: it must not be
  // granted the lock either.
  {
    std::string name = "wait-pipelined";
    SCOPED_TRACE(name);
    Client holder = lock_client();
    ASSERT_TRUE(starts_with(holder.request("lock " + name), "200 Acquired "));
    RawConn dying;
    std::string error;
    ASSERT_TRUE(dying.connect(lock_port_, &error)) << error;
    dying.set_keep_limit(64 * kKiB);
    ASSERT_TRUE(dying.send_all("conn_id\r\n", 10s));
    while (dying.received().find("\r\n") == std::string::npos) {
      ASSERT_TRUE(dying.wait_for_bytes(dying.received().size() + 1, 10s)) << "no conn_id reply";
    }
    std::string dying_session =
        e2e::session_serial(dying.received().substr(4, dying.received().find("\r\n") - 4));
    ASSERT_TRUE(dying.send_all("lock " + name + " 30\r\n", 10s));
    ASSERT_TRUE(waiters_become(observer, 1));
    Client next = lock_client();
    std::string next_session = public_session(next);
    ASSERT_TRUE(next.send("lock " + name + " 30\r\n"));
    ASSERT_TRUE(waiters_become(observer, 2));
    std::string junk;
    while (junk.size() < 256 * kKiB)
      junk += "conn_id\r\n";
    bool all_taken = dying.send_all(junk, 3s);
    dying.close();  // FIN: it has read everything it was sent
    bool left_queue = waiters_become(observer, 1, 3s);
    EXPECT_TRUE(left_queue) << "a waiter that hung up after pipelining "
                            << (all_taken ? "256 KB" : "what the server took")
                            << " is still queued 3 s later";
    EXPECT_EQ(holder.request("unlock " + name), "200 Released");
    Clock::time_point t0 = Clock::now();
    std::string reply = next.read_line(5s);
    std::string holder_now = holder_of(observer, name);
    std::printf(
        "[ HOSTILE  ] waiter hung up behind 256 KB of pipelined requests: %s from the "
        "queue; the next waiter got \"%s\" after %.0f ms; holder now %s (dead one %s, "
        "next %s)\n",
        left_queue ? "removed" : "NOT removed", e2e::escape(reply).c_str(),
        ms_of(Clock::now() - t0), holder_now.c_str(), dying_session.c_str(), next_session.c_str());
    EXPECT_TRUE(starts_with(reply, "200 Acquired "))
        << "the lock went to the waiter that had hung up (session " << dying_session
        << "), held for its grace period: " << reply;
    EXPECT_NE(holder_now, dying_session) << "the dead waiter holds the lock";
  }
  expect_healthy("waiters killed while queued");
}

TEST_F(HostileE2e, KilledMidMultiGet) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client writer = cache_client();
  std::vector<std::string> values;
  std::string request = "get";
  for (int i = 0; i < 100; ++i) {
    char key[16];
    std::snprintf(key, sizeof key, "mv:%03d", i);
    values.push_back(pattern(key, 100000));
    ASSERT_EQ(writer.store("set", key, values.back()), "STORED");
    request += " ";
    request += key;
  }
  uint64_t before = rss_bytes(server_.pid());
  const uint64_t baseline = 2;  // the keeper's and the writer's
  ASSERT_TRUE(connections_become(baseline));
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // Ten at once: each asks for 10 MB, reads 50 KB, dies.
    std::vector<Client> readers(10);
    for (Client& reader : readers) {
      ASSERT_TRUE(reader.connect(server_.port()));
      ASSERT_TRUE(reader.send(request + "\r\n"));
    }
    for (size_t i = 0; i < readers.size(); ++i) {
      std::optional<std::string> first = readers[i].read_exactly(50000);
      ASSERT_TRUE(first) << readers[i].last_error();
      EXPECT_TRUE(starts_with(*first, "VALUE mv:000 0 100000\r\n" + values[0].substr(0, 100)));
      if ((i + static_cast<size_t>(round)) % 2 == 0) {
        readers[i].abort();
      } else {
        readers[i].close();
      }
    }
  }
  // Everything is still there, byte for byte.
  writer.send(request + "\r\n");
  std::optional<std::vector<e2e::Value>> got = writer.read_values();
  ASSERT_TRUE(got) << writer.last_error();
  ASSERT_EQ(got->size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ((*got)[i].data, values[i]) << (*got)[i].key;
  }
  EXPECT_TRUE(connections_become(baseline)) << "after the killed clients";
  uint64_t after = 0;
  EXPECT_TRUE(eventually(
      [&] { return (after = rss_bytes(server_.pid())) < before + rss_bound(16 * kMiB); }, 10s))
      << "RSS " << mib(after) << ", " << mib(before) << " before";
  expect_healthy("clients killed mid multi-get");
}

// --- locks nobody can evict --------------------------------------------------------------

// Cache items are bounded by --memory_limit_mb; named locks are not evictable,
// so the lock service bounds their number (docs/lock-service.md, "Limits").
// One client asks for a million distinct locks: it is granted the
// per-session limit (10,000 by default), every further request is refused
// with 429, the connection stays usable and the server's RSS stays bounded.
TEST_F(HostileE2e, OneClientAsksForAMillionLocks) {
  ASSERT_NO_FATAL_FAILURE(start());
  constexpr size_t kLocks = 1000000;
  constexpr size_t kBatch = 10000;
  constexpr size_t kSessionLimit = 10000;  // --lock_service_max_locks_per_session's default
  const std::string kRefusal = "429 Too many locks for this session";
  Client flood = lock_client();
  size_t acquired = 0;
  size_t refused = 0;
  uint64_t peak = 0;
  Clock::time_point began = Clock::now();
  for (size_t sent = 0; sent < kLocks; sent += kBatch) {
    std::string batch;
    for (size_t i = sent; i < sent + kBatch; ++i) {
      char line[48];
      std::snprintf(line, sizeof line, "lock hostile-flood-%08zu\r\n", i);
      batch += line;
    }
    std::optional<std::vector<std::string>> replies = pipeline(flood, batch);
    ASSERT_TRUE(replies);
    ASSERT_EQ(replies->size(), kBatch);
    for (size_t i = 0; i < kBatch; ++i) {
      const std::string& reply = (*replies)[i];
      if (starts_with(reply, "200 Acquired ")) {
        ++acquired;
      } else {
        ASSERT_EQ(reply, kRefusal) << "lock " << sent + i;
        ++refused;
      }
    }
    peak = std::max(peak, rss_bytes(server_.pid()));
  }
  std::printf(
      "[ HOSTILE  ] one client asked for %zu locks in %.0f ms: %zu acquired, %zu refused; "
      "server RSS peak %s (%s before)\n",
      acquired + refused, ms_of(Clock::now() - began), acquired, refused, mib(peak).c_str(),
      mib(baseline_rss_).c_str());
  EXPECT_EQ(acquired, kSessionLimit);
  EXPECT_EQ(refused, kLocks - kSessionLimit);
  EXPECT_LT(peak, rss_bound(kRssLimit)) << acquired << " locks held, RSS " << mib(peak);
  Client observer = lock_client();
  EXPECT_EQ(lock_stat(observer, "locks"), kSessionLimit + 1) << "the flood's and the keeper's";
  EXPECT_EQ(lock_stat(observer, "limit_refusals"), refused);
  // Still served: a lock given back makes room for another.
  EXPECT_EQ(flood.request("unlock hostile-flood-00000000"), "200 Released");
  std::string reply = flood.request("lock hostile-flood-00999999");
  EXPECT_TRUE(starts_with(reply, "200 Acquired ")) << reply;
  EXPECT_EQ(flood.request("unlock_all"), "200 Released");
  expect_healthy("a million locks asked for");
}

// Many sessions together cannot pass --lock_service_max_names either: eight
// clients at once ask for 10,000 locks each (within the per-session limit)
// of a server that allows 50,000 names; exactly that many exist, every
// other request gets 429, and once they let go others lock again.
TEST_F(HostileE2e, ManyClientsCannotPassTheNamesLimit) {
  constexpr size_t kMaxNames = 50000;
  ASSERT_NO_FATAL_FAILURE(start({"--lock_service_max_names=" + std::to_string(kMaxNames)}));
  constexpr int kClients = 8;
  constexpr size_t kEach = 10000;
  const std::string kRefusal = "429 Too many locks in the server";
  std::vector<Client> clients;
  for (int c = 0; c < kClients; ++c)
    clients.push_back(lock_client());
  std::atomic<size_t> acquired{0};
  std::atomic<size_t> refused{0};
  std::atomic<size_t> other{0};
  std::mutex first_other_mutex;
  std::string first_other;
  std::vector<std::thread> threads;
  Clock::time_point began = Clock::now();
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      std::string batch;
      for (size_t i = 0; i < kEach; ++i)
        batch += "lock names-" + std::to_string(c) + "-" + std::to_string(i) + "\r\n";
      std::optional<std::vector<std::string>> replies =
          pipeline(clients[static_cast<size_t>(c)], batch);
      if (!replies || replies->size() != kEach) {
        other.fetch_add(kEach);
        return;
      }
      for (const std::string& reply : *replies) {
        if (starts_with(reply, "200 Acquired ")) {
          acquired.fetch_add(1);
        } else if (reply == kRefusal) {
          refused.fetch_add(1);
        } else {
          std::lock_guard lock(first_other_mutex);
          if (other.fetch_add(1) == 0) first_other = reply;
        }
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  uint64_t rss = rss_bytes(server_.pid());
  std::printf(
      "[ HOSTILE  ] %d clients asked for %zu locks each in %.0f ms, %zu names allowed: %zu "
      "acquired, %zu refused; server RSS %s (%s before), %.0f bytes per lock\n",
      kClients, kEach, ms_of(Clock::now() - began), kMaxNames, acquired.load(), refused.load(),
      mib(rss).c_str(), mib(baseline_rss_).c_str(),
      static_cast<double>(rss - std::min(rss, baseline_rss_)) / std::max<size_t>(1, acquired));
  EXPECT_EQ(other.load(), 0u) << "first: " << first_other;
  EXPECT_EQ(acquired.load(), kMaxNames - 1) << "the keeper's lock is a name too";
  EXPECT_EQ(refused.load(), kClients * kEach - (kMaxNames - 1));
  Client observer = lock_client();
  EXPECT_EQ(lock_stat(observer, "locks"), kMaxNames);
  EXPECT_EQ(observer.request("lock one-more"), kRefusal);
  EXPECT_LT(rss, rss_bound(kRssLimit)) << "server RSS " << mib(rss);
  for (Client& client : clients)
    EXPECT_EQ(client.request("unlock_all"), "200 Released");
  EXPECT_EQ(lock_stat(observer, "locks"), 1u) << "the keeper's";
  expect_healthy("many clients at the names limit");
}

// --- 7. slow loris ---------------------------------------------------------------------

TEST_F(HostileE2e, SlowLorisDoesNotStallOthers) {
  ASSERT_NO_FATAL_FAILURE(start());
  constexpr int kSlow = 50;
  constexpr auto kDuration = 3s;
  constexpr auto kByteEvery = 50ms;
  // What each slow client trickles, one byte per tick, over and over.
  std::vector<std::string> scripts;
  std::vector<std::unique_ptr<RawConn>> slow;
  for (int i = 0; i < kSlow; ++i) {
    std::string script;
    bool lock_port = false;
    switch (i % 5) {
      case 0:
        script = "get " + precious_[0].key + "\r\n";
        break;
      case 1:
        script = "set loris" + std::to_string(i) + " 0 0 100000\r\n" + std::string(100000, 'L');
        break;
      case 2:
        script = binary_header(0x00, 3, 0, 3, 1) + "fz1";
        break;
      case 3:
        script = "stats\r\nlock loris" + std::to_string(i) + "\r\n";
        lock_port = true;
        break;
      default:
        script = "get" + std::string(100000, ' ');  // a line that never ends
    }
    auto conn = std::make_unique<RawConn>();
    std::string error;
    ASSERT_TRUE(conn->connect(lock_port ? lock_port_ : server_.port(), &error)) << error;
    scripts.push_back(std::move(script));
    slow.push_back(std::move(conn));
  }
  std::atomic<bool> started{false};
  std::atomic<int> slow_closed{0};
  std::thread loris([&] {
    Clock::time_point begin = Clock::now();
    for (size_t tick = 0; Clock::now() - begin < kDuration; ++tick) {
      for (size_t i = 0; i < slow.size(); ++i) {
        const std::string& script = scripts[i];
        slow[i]->send_some(std::string_view(script).substr(tick % script.size(), 1));
        slow[i]->drain();
      }
      started = true;
      std::this_thread::sleep_until(begin + static_cast<int64_t>(tick + 1) *
                                                kByteEvery);  // pacing, by design
    }
    for (auto& conn : slow)
      slow_closed += conn->peer_closed() ? 1 : 0;
  });
  while (!started)
    std::this_thread::yield();

  Client client = cache_client();
  std::vector<double> times;
  Clock::time_point begin = Clock::now();
  for (int i = 0; i < 300; ++i) {
    std::string value = pattern("rt" + std::to_string(i), 100);
    Clock::time_point t0 = Clock::now();
    std::string stored = client.store("set", "rt", value);
    std::optional<std::string> got = client.get("rt");
    times.push_back(ms_of(Clock::now() - t0));
    EXPECT_EQ(stored, "STORED");
    EXPECT_EQ(got, value);
    std::this_thread::sleep_until(begin + (i + 1) * 10ms);  // spread over the attack
  }
  loris.join();
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  double p50 = sorted[sorted.size() / 2];
  double p99 = sorted[sorted.size() * 99 / 100];
  double worst = sorted.back();
  std::printf(
      "[ HOSTILE  ] slow loris (%d clients, a byte every 50 ms for 3 s): 300 set+get round "
      "trips p50 %.2f ms, p99 %.2f ms, max %.2f ms; %d slow clients closed by the server\n",
      kSlow, p50, p99, worst, slow_closed.load());
  EXPECT_LT(worst, latency_bound_ms(200)) << "a round trip took " << worst << " ms";
  for (auto& conn : slow)
    conn->close();
  expect_healthy("slow loris");
}

}  // namespace
