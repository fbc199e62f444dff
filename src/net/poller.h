// What a Reactor asks of its I/O backend (Redis's ae_epoll.c / ae_kqueue.c
// split): wait for events, then hand each to its handler. One file per
// backend implements it: poller_epoll.cc, poller_uring.cc. Private to net/.
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>

#include "lockcached/net/reactor.h"

namespace lockcached::net {

class Poller {
 public:
  virtual ~Poller() = default;

  // Readiness, level-triggered (see Reactor).
  virtual bool add(int fd, uint32_t events, EventHandler* handler) = 0;
  virtual bool modify(int fd, uint32_t events, EventHandler* handler) = 0;
  virtual void remove(int fd) = 0;

  // Completion I/O: only a backend that completes_io() is asked.
  virtual bool completes_io() const { return false; }
  virtual void receive(int, EventHandler*, bool /*once*/) {}
  virtual void stop_receiving(EventHandler*) {}
  virtual void send(int, const void*, size_t, EventHandler*) {}
  virtual void send(int, const msghdr*, EventHandler*) {}
  virtual void cancel_io(int) {}

  // Blocks until something happened or `timeout_ms` passed (-1: no limit);
  // dispatch() then hands what happened to the handlers. Split so that the
  // reactor reads the clock once in between.
  virtual void wait(int timeout_ms) = 0;
  virtual void dispatch() = 0;
};

// Level-triggered epoll; also what the io_uring backend keeps for the few
// descriptors that want readiness (listeners, replication links).
class EpollPoller final : public Poller {
 public:
  EpollPoller();
  ~EpollPoller() override;

  bool add(int fd, uint32_t events, EventHandler* handler) override;
  bool modify(int fd, uint32_t events, EventHandler* handler) override;
  void remove(int fd) override;
  void wait(int timeout_ms) override;
  void dispatch() override;

  int fd() const { return epoll_fd_; }

 private:
  static constexpr int kMaxEventsPerWait = 256;

  bool control(int operation, int fd, uint32_t events, EventHandler* handler);

  int epoll_fd_;
  epoll_event events_[kMaxEventsPerWait];
  int count_ = 0;
};

// nullptr (and why) when the kernel refuses what the backend needs.
std::unique_ptr<Poller> make_uring_poller(UringOptions options, std::string* why);

}  // namespace lockcached::net
