#include "lockcached/net/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace lockcached::net {
namespace {


struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr resolve(const std::string& host, uint16_t port, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* result = nullptr;
  std::string bare = host;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
  }
  int rc = getaddrinfo(bare.c_str(), std::to_string(port).c_str(), &hints, &result);
  if (rc != 0) {
    if (error) *error = host + ": " + gai_strerror(rc);
    return nullptr;
  }
  return AddrInfoPtr(result);
}

// A non-blocking socket for host:port's first address; -1 (*error set)
// when the name does not resolve or no socket can be had.
int open_socket(const std::string& host, uint16_t port, AddrInfoPtr* info, std::string* error) {
  *info = resolve(host, port, error);
  if (!*info) return -1;
  int fd = socket((*info)->ai_family, (*info)->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) *error = std::string("socket: ") + std::strerror(errno);
  return fd;
}

}  // namespace

int open_listener(const std::string& host, uint16_t port, bool share_port, std::string* error,
                  int backlog) {
  AddrInfoPtr info;
  int fd = open_socket(host, port, &info, error);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (share_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  if (info->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(fd, info->ai_addr, info->ai_addrlen) != 0 || listen(fd, backlog) != 0) {
    *error = host + ":" + std::to_string(port) + ": " + std::strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

bool port_is_free(const std::string& host, uint16_t port) {
  AddrInfoPtr info = resolve(host, port, nullptr);
  if (!info) return true;  // open_listener reports the resolution error
  int fd = socket(info->ai_family, info->ai_socktype | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (info->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  bool free = bind(fd, info->ai_addr, info->ai_addrlen) == 0;
  close(fd);
  return free;
}

uint16_t local_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

int open_connection(const std::string& host, uint16_t port, std::string* error) {
  AddrInfoPtr info;
  int fd = open_socket(host, port, &info, error);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, info->ai_addr, info->ai_addrlen) != 0 && errno != EINPROGRESS) {
    *error = host + ":" + std::to_string(port) + ": " + std::strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

int socket_error(int fd) {
  int result = 0;
  socklen_t length = sizeof result;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &result, &length) != 0) return errno;
  return result;
}

// Linux ends a connection with a user timeout when a keepalive probe finds
// the peer silent for that long (tcp_keepalive_timer), so it ends at the
// first probe time idle + k * interval (k >= 1) that reaches the timeout.
int KeepaliveTimes::bound_s() const {
  int user_timeout_s = static_cast<int>((user_timeout_ms + 999) / 1000);
  int probes = std::max(1, (user_timeout_s - idle_s + interval_s - 1) / interval_s);
  return idle_s + probes * interval_s;
}

KeepaliveTimes keepalive_times(int seconds) {
  constexpr int kMaxKeepaliveCount = 127;  // the kernel's bound on TCP_KEEPCNT
  KeepaliveTimes times;
  times.idle_s = std::max(1, seconds / 2);
  int probing_s = seconds - times.idle_s;  // the rest of `seconds`
  times.interval_s = std::max(1, probing_s / 8);
  times.count = std::clamp((probing_s + times.interval_s - 1) / times.interval_s, 1,
                           kMaxKeepaliveCount);
  times.user_timeout_ms = static_cast<unsigned>(seconds) * 1000;
  return times;
}

bool set_keepalive(int fd, const KeepaliveTimes& times) {
  int on = 1;
  return setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) == 0 &&
         setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &times.idle_s, sizeof times.idle_s) == 0 &&
         setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &times.interval_s, sizeof times.interval_s) ==
             0 &&
         setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &times.count, sizeof times.count) == 0 &&
         setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &times.user_timeout_ms,
                    sizeof times.user_timeout_ms) == 0;
}

bool peer_vanished(int error) {
  return error == ETIMEDOUT || error == EHOSTUNREACH || error == ENETUNREACH ||
         error == EHOSTDOWN;
}

std::string address_text(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(v6->sin6_port));
  }
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(v4->sin_port));
  }
  return "?";
}

std::string peer_name(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "?";
  return address_text(address);
}

std::string local_name(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "?";
  return address_text(address);
}

}  // namespace lockcached::net
