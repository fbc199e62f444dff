// The epoll backend: readiness only; the handlers make their own calls.
#include <unistd.h>

#include <cerrno>

#include <glog/logging.h>

#include "poller.h"

namespace lockcached::net {

EpollPoller::EpollPoller() : epoll_fd_(epoll_create1(EPOLL_CLOEXEC)) {
  PCHECK(epoll_fd_ >= 0) << "epoll_create1";
}

EpollPoller::~EpollPoller() {
  close(epoll_fd_);
}

bool EpollPoller::add(int fd, uint32_t events, EventHandler* handler) {
  return control(EPOLL_CTL_ADD, fd, events, handler);
}

bool EpollPoller::modify(int fd, uint32_t events, EventHandler* handler) {
  return control(EPOLL_CTL_MOD, fd, events, handler);
}

void EpollPoller::remove(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

bool EpollPoller::control(int operation, int fd, uint32_t events, EventHandler* handler) {
  epoll_event event{};
  event.events = events;
  event.data.ptr = handler;
  return epoll_ctl(epoll_fd_, operation, fd, &event) == 0;
}

void EpollPoller::wait(int timeout_ms) {
  count_ = epoll_wait(epoll_fd_, events_, kMaxEventsPerWait, timeout_ms);
  if (count_ < 0) {
    PCHECK(errno == EINTR) << "epoll_wait";
    count_ = 0;
  }
}

void EpollPoller::dispatch() {
  for (int i = 0; i < count_; ++i)
    static_cast<EventHandler*>(events_[i].data.ptr)->on_event(events_[i].events);
  count_ = 0;
}

}  // namespace lockcached::net
