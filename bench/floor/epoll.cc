// The floor's epoll loop: the I/O lockcached does. Level-triggered epoll,
// one read per readiness event into a shared scratch buffer, every complete
// request of the read answered, one write for all replies.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "answer.h"

namespace floor_server {
namespace {

constexpr size_t kScratch = 64 * 1024;

struct Conn {
  int fd = -1;
  Requests requests;
  std::string unsent;  // replies the socket did not take yet
  bool writing = false;
};

class EpollFloor {
 public:
  explicit EpollFloor(size_t value_size) : answerer_(value_size) {}
  int run(int listener);

 private:
  void accept_all(int listener);
  void on_readable(Conn* conn);
  void flush(Conn* conn);
  void close_conn(Conn* conn);

  Answerer answerer_;
  Output out_;  // the replies of one read
  std::vector<char> scratch_ = std::vector<char>(kScratch);
  int epoll_ = -1;
};

int EpollFloor::run(int listener) {
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

void EpollFloor::accept_all(int listener) {
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

void EpollFloor::on_readable(Conn* conn) {
  if (conn->writing) return;  // back-pressure: answer no more until the replies are out
  std::string& partial = conn->requests.partial;
  const size_t kept = partial.size();
  if (kept + kScratch > scratch_.size()) scratch_.resize(kept + kScratch);
  if (kept > 0) std::memcpy(scratch_.data(), partial.data(), kept);
  const ssize_t n = read(conn->fd, scratch_.data() + kept, kScratch);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    close_conn(conn);
    return;
  }
  const size_t size = kept + static_cast<size_t>(n);
  out_.clear();
  const size_t used = answerer_.consume(conn->requests, scratch_.data(), size, out_);
  partial.assign(scratch_.data() + used, size - used);
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
  if (conn->fd >= 0 && conn->requests.closing && conn->unsent.empty()) close_conn(conn);
}

void EpollFloor::flush(Conn* conn) {
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

void EpollFloor::close_conn(Conn* conn) {
  if (conn->fd < 0) return;
  epoll_ctl(epoll_, EPOLL_CTL_DEL, conn->fd, nullptr);
  close(conn->fd);
  conn->fd = -1;
}

}  // namespace

int run_epoll(int listener, size_t value_size) {
  return EpollFloor(value_size).run(listener);
}

}  // namespace floor_server
