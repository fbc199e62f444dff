// lockcached-floor: the least a one-thread epoll server can do per request.
//
// It answers every memcached request without any store: a get is a hit with
// the value the load generator would have stored (bench/common/value.h), so
// that the bytes on the wire match a real hit; a storage command consumes
// its data block and answers STORED. The I/O is what lockcached does: level-
// triggered epoll, one read per readiness event into a shared scratch buffer,
// every complete request of the read answered, one write for all replies.
// What lockcached reaches as a fraction of this is what its store, parser
// and bookkeeping cost (bench/README.md).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gflags/gflags.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "../common/value.h"

DEFINE_string(listen, "127.0.0.1", "IPv4 address to listen on");
DEFINE_int32(port, 11511, "TCP port (0: any free port)");
DEFINE_uint64(value_size, 32, "size of the value every get returns");

namespace {

constexpr size_t kScratch = 64 * 1024;
constexpr size_t kHeader = 24;

// The replies of one read: grows to the largest batch seen, then is reused
// (no zero-filling and no allocation per reply).
class Output {
 public:
  void clear() { size_ = 0; }
  const char* data() const { return bytes_.data(); }
  size_t size() const { return size_; }
  char* grow(size_t n) {
    if (bytes_.size() < size_ + n) bytes_.resize(2 * (size_ + n));
    char* at = bytes_.data() + size_;
    size_ += n;
    return at;
  }
  void append(std::string_view text) { std::memcpy(grow(text.size()), text.data(), text.size()); }
  void append(size_t n, char c) { std::memset(grow(n), c, n); }

 private:
  std::vector<char> bytes_;
  size_t size_ = 0;
};

// What to answer once the rest of a data block has been skipped.
enum class After { kNothing, kStored, kBinary };

struct Conn {
  int fd = -1;
  std::string partial;  // an incomplete request left over from the last read
  size_t skip = 0;      // bytes of a data block still to come, never buffered
  After after = After::kNothing;
  char header[24] = {};  // the binary request whose body is being skipped
  std::string unsent;    // replies the socket did not take yet
  bool writing = false;
  bool closing = false;
};

class Floor {
 public:
  explicit Floor(size_t value_size) : filler_(bench::make_filler(value_size)) {
    value_header_ = " 0 " + std::to_string(value_size) + "\r\n";
    value_header_cas_ = " 0 " + std::to_string(value_size) + " 1\r\n";
  }
  int run(int listener);

 private:
  void accept_all(int listener);
  void on_readable(Conn* conn);
  size_t consume(Conn* conn, const char* data, size_t size);
  size_t consume_text(Conn* conn, const char* data, size_t size);
  size_t consume_binary(Conn* conn, const char* data, size_t size);
  size_t skip_data(Conn* conn, size_t available);
  void reply_value(std::string_view key, bool with_cas);
  void reply_binary(const char* request, std::string_view key, bool value);
  void flush(Conn* conn);
  void close_conn(Conn* conn);

  std::string filler_;
  std::string value_header_;      // " 0 <size>\r\n" after "VALUE <key>"
  std::string value_header_cas_;  // the same for gets, with CAS 1
  Output out_;
  std::vector<char> scratch_ = std::vector<char>(kScratch);
  int epoll_ = -1;
};

int listen_on(const std::string& host, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int Floor::run(int listener) {
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = nullptr;  // the listener
  epoll_ctl(epoll_, EPOLL_CTL_ADD, listener, &event);
  epoll_event events[256];
  for (;;) {
    const int n = epoll_wait(epoll_, events, 256, -1);
    if (n < 0 && errno != EINTR) return 1;
    for (int i = 0; i < n; ++i) {
      auto* conn = static_cast<Conn*>(events[i].data.ptr);
      if (conn == nullptr) {
        accept_all(listener);
        continue;
      }
      if (events[i].events & EPOLLOUT) flush(conn);
      if (conn->fd >= 0 && (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
        on_readable(conn);
      }
      if (conn->fd < 0) delete conn;
    }
  }
}

void Floor::accept_all(int listener) {
  for (;;) {
    const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto* conn = new Conn;
    conn->fd = fd;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.ptr = conn;
    epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event);
  }
}

void Floor::on_readable(Conn* conn) {
  if (conn->writing) return;  // back-pressure: answer no more until the replies are out
  const size_t kept = conn->partial.size();
  if (kept + kScratch > scratch_.size()) scratch_.resize(kept + kScratch);
  if (kept > 0) std::memcpy(scratch_.data(), conn->partial.data(), kept);
  const ssize_t n = read(conn->fd, scratch_.data() + kept, kScratch);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    close_conn(conn);
    return;
  }
  const size_t size = kept + static_cast<size_t>(n);
  out_.clear();
  const size_t used = consume(conn, scratch_.data(), size);
  conn->partial.assign(scratch_.data() + used, size - used);
  // Nothing is unsent here (a connection with unsent replies is not read), so
  // the replies go straight from out_; only what the socket refuses is kept.
  size_t done = 0;
  if (out_.size() > 0) {
    const ssize_t sent = write(conn->fd, out_.data(), out_.size());
    if (sent < 0 && errno != EAGAIN && errno != EINTR) {
      close_conn(conn);
      return;
    }
    done = sent > 0 ? static_cast<size_t>(sent) : 0;
  }
  if (done < out_.size()) conn->unsent.assign(out_.data() + done, out_.size() - done);
  flush(conn);
  if (conn->fd >= 0 && conn->closing && conn->unsent.empty()) close_conn(conn);
}

size_t Floor::consume(Conn* conn, const char* data, size_t size) {
  size_t at = 0;
  while (at < size && !conn->closing) {
    if (conn->skip > 0) {
      at += skip_data(conn, size - at);
      continue;
    }
    const size_t used = static_cast<uint8_t>(data[at]) == 0x80
                            ? consume_binary(conn, data + at, size - at)
                            : consume_text(conn, data + at, size - at);
    if (used == 0) break;
    at += used;
  }
  return at;
}

// Quiet storage commands (SetQ, AddQ, ReplaceQ, LockQ, UnlockQ, RaUQ) answer
// nothing on success.
bool is_quiet(uint8_t opcode) {
  return opcode == 0x11 || opcode == 0x12 || opcode == 0x13 || opcode == 0x41 || opcode == 0x43 ||
         opcode == 0x4b;
}

// The next space-separated word of a request line from `at`; empty at the end.
std::string_view next_word(std::string_view line, size_t& at) {
  while (at < line.size() && line[at] == ' ')
    ++at;
  const size_t begin = at;
  while (at < line.size() && line[at] != ' ')
    ++at;
  return line.substr(begin, at - begin);
}

size_t Floor::consume_text(Conn* conn, const char* data, size_t size) {
  const void* newline = std::memchr(data, '\n', size);
  if (newline == nullptr) return 0;
  const size_t line_end = static_cast<const char*>(newline) - data + 1;
  std::string_view line(data, line_end - 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t at = 0;
  const std::string_view command = next_word(line, at);
  if (command == "get" || command == "gets") {
    for (std::string_view key = next_word(line, at); !key.empty(); key = next_word(line, at)) {
      reply_value(key, command == "gets");
    }
    out_.append("END\r\n");
  } else if (command == "set" || command == "add" || command == "replace" || command == "append" ||
             command == "prepend" || command == "cas") {
    std::string_view bytes_word;
    for (int i = 0; i < 4; ++i)
      bytes_word = next_word(line, at);  // key flags exptime bytes
    size_t bytes = 0;
    std::from_chars(bytes_word.data(), bytes_word.data() + bytes_word.size(), bytes);
    const bool reply = line.find(" noreply") == std::string_view::npos;
    if (size < line_end + bytes + 2) {
      // The rest of the block is skipped as it arrives, never buffered.
      conn->skip = line_end + bytes + 2 - size;
      conn->after = reply ? After::kStored : After::kNothing;
      return size;
    }
    if (reply) out_.append("STORED\r\n");
    return line_end + bytes + 2;
  } else if (command == "lock" || command == "unlock" || command == "unlock_all") {
    out_.append("OK\r\n");
  } else if (command == "version") {
    out_.append("VERSION floor\r\n");
  } else if (command == "quit") {
    conn->closing = true;
  } else {
    out_.append("ERROR\r\n");
  }
  return line_end;
}

void Floor::reply_value(std::string_view key, bool with_cas) {
  out_.append("VALUE ");
  out_.append(key);
  out_.append(with_cas ? value_header_cas_ : value_header_);
  bench::value_for(key, filler_, out_.grow(filler_.size()));
  out_.append("\r\n");
}

size_t Floor::consume_binary(Conn* conn, const char* data, size_t size) {
  if (size < kHeader) return 0;
  uint32_t body = 0;
  for (int i = 8; i < 12; ++i)
    body = body << 8 | static_cast<uint8_t>(data[i]);
  const auto opcode = static_cast<uint8_t>(data[1]);
  const bool get = opcode == 0x00 || opcode == 0x09 || opcode == 0x0c || opcode == 0x0d;
  if (size < kHeader + body) {
    if (get) return 0;  // the key is needed for the reply
    conn->skip = kHeader + body - size;
    std::memcpy(conn->header, data, kHeader);
    conn->after = is_quiet(opcode) ? After::kNothing : After::kBinary;
    return size;
  }
  const size_t key_size = static_cast<uint8_t>(data[2]) << 8 | static_cast<uint8_t>(data[3]);
  const size_t extras = static_cast<uint8_t>(data[4]);
  const std::string_view key(data + kHeader + extras, key_size);
  switch (opcode) {
    case 0x00:  // Get, GetQ, GetK, GetKQ: a hit
    case 0x09:
    case 0x0c:
    case 0x0d:
      reply_binary(data, opcode >= 0x0c ? key : std::string_view(), true);
      break;
    default:  // Set, Add, Replace, Lock, Unlock, RaU, Noop, Version, ...: success
      if (!is_quiet(opcode)) reply_binary(data, {}, false);
  }
  return kHeader + body;
}

size_t Floor::skip_data(Conn* conn, size_t available) {
  const size_t n = std::min(conn->skip, available);
  conn->skip -= n;
  if (conn->skip > 0) return n;
  if (conn->after == After::kStored) out_.append("STORED\r\n");
  if (conn->after == After::kBinary) reply_binary(conn->header, {}, false);
  return n;
}

void Floor::reply_binary(const char* request, std::string_view key, bool value) {
  const size_t extras = value ? 4 : 0;
  const size_t value_size = value ? filler_.size() : 0;
  const size_t body = extras + key.size() + value_size;
  char header[kHeader] = {};
  header[0] = static_cast<char>(0x81);
  header[1] = request[1];
  header[2] = static_cast<char>(key.size() >> 8);
  header[3] = static_cast<char>(key.size());
  header[4] = static_cast<char>(extras);
  for (int i = 0; i < 4; ++i)
    header[8 + i] = static_cast<char>(body >> (24 - 8 * i));
  std::memcpy(header + 12, request + 12, 4);  // opaque
  header[23] = 1;                             // CAS 1
  out_.append({header, kHeader});
  out_.append(extras, '\0');
  out_.append(key);
  if (!value) return;
  char* value_at = out_.grow(value_size);
  const size_t key_size = static_cast<uint8_t>(request[2]) << 8 | static_cast<uint8_t>(request[3]);
  const size_t request_extras = static_cast<uint8_t>(request[4]);
  bench::value_for({request + kHeader + request_extras, key_size}, filler_, value_at);
}

void Floor::flush(Conn* conn) {
  while (!conn->unsent.empty()) {
    const ssize_t n = write(conn->fd, conn->unsent.data(), conn->unsent.size());
    if (n > 0) {
      conn->unsent.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    close_conn(conn);
    return;
  }
  const bool want = !conn->unsent.empty();
  if (want == conn->writing) return;
  conn->writing = want;
  epoll_event event{};
  event.events = want ? EPOLLOUT : EPOLLIN;
  event.data.ptr = conn;
  epoll_ctl(epoll_, EPOLL_CTL_MOD, conn->fd, &event);
}

void Floor::close_conn(Conn* conn) {
  if (conn->fd < 0) return;
  epoll_ctl(epoll_, EPOLL_CTL_DEL, conn->fd, nullptr);
  close(conn->fd);
  conn->fd = -1;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("a one-thread epoll server with no store (bench/README.md)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  signal(SIGPIPE, SIG_IGN);
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  const int listener = listen_on(FLAGS_listen, FLAGS_port);
  if (listener < 0) {
    std::fprintf(stderr, "lockcached-floor: cannot listen on %s:%d: %s\n", FLAGS_listen.c_str(),
                 FLAGS_port, std::strerror(errno));
    return 1;
  }
  sockaddr_in bound{};
  socklen_t length = sizeof bound;
  getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &length);
  std::fprintf(stderr, "Listening on %s:%d (memcached protocol)\n", FLAGS_listen.c_str(),
               ntohs(bound.sin_port));
  return Floor(FLAGS_value_size).run(listener);
}
