#include "lockcached/net/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace lockcached::net {
namespace {

static_assert(kMaxUnixPathLength == sizeof(sockaddr_un::sun_path) - 1);

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// host:port's addresses; nullptr with getaddrinfo's code in *failure.
AddrInfoPtr resolve(const std::string& host, uint16_t port, int* failure) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* result = nullptr;
  std::string bare = host;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
  }
  *failure = getaddrinfo(bare.c_str(), std::to_string(port).c_str(), &hints, &result);
  if (*failure != 0) return nullptr;
  return AddrInfoPtr(result);
}

// A non-blocking socket for host:port's first address; -1 (*error set)
// when the name does not resolve or no socket can be had.
int open_socket(const std::string& host, uint16_t port, AddrInfoPtr* info, std::string* error) {
  int failure = 0;
  *info = resolve(host, port, &failure);
  if (!*info) {
    *error = host + ": " + gai_strerror(failure);
    return -1;
  }
  int fd = socket((*info)->ai_family, (*info)->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) *error = std::string("socket: ") + std::strerror(errno);
  return fd;
}

// What binding a listener fails with when its configuration is wrong, so
// that trying again cannot help: an address that is not this host's
// (EADDRNOTAVAIL), a privileged port or an unwritable directory (EACCES,
// EPERM), a missing directory on a unix socket's path (ENOENT, ENOTDIR),
// a read-only file system. EADDRINUSE is not one: a server that is still
// stopping holds its port for a moment (a restart, an upgrade), and
// trying again is what mends it.
bool configuration_error(int error) {
  return error == EADDRNOTAVAIL || error == EACCES || error == EPERM || error == ENOENT ||
         error == ENOTDIR || error == EROFS;
}

void set_error(ListenError* error, const std::string& where, int number) {
  error->message = where + ": " + std::strerror(number);
  error->configuration = configuration_error(number);
}

// "HOST:PORT", an IPv6 address in brackets.
std::string endpoint(const std::string& host, uint16_t port) {
  bool bare_ipv6 = host.find(':') != std::string::npos && !host.starts_with('[');
  return (bare_ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// host:port's first address for a listener; nullptr with *error set. A
// name that does not exist is the configuration's fault; a name server
// that does not answer is the moment's.
AddrInfoPtr resolve_to_listen(const std::string& host, uint16_t port, ListenError* error) {
  int failure = 0;
  AddrInfoPtr info = resolve(host, port, &failure);
  if (!info) {
    error->message = host + ": " + gai_strerror(failure);
    error->configuration = failure == EAI_NONAME;
  }
  return info;
}

// A socket bound to `info` (SO_REUSEADDR, IPv6 only for an IPv6 address,
// SO_REUSEPORT with share_port); -1 with *error set.
int bind_socket(const addrinfo& info, int type_flags, bool share_port, const std::string& where,
                ListenError* error) {
  int fd = socket(info.ai_family, info.ai_socktype | type_flags | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    set_error(error, where, errno);
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (share_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  if (info.ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(fd, info.ai_addr, info.ai_addrlen) != 0) {
    set_error(error, where, errno);
    close(fd);
    return -1;
  }
  return fd;
}

// A socket file at `path` left by a server that is gone is removed. One
// that a server still listens on (a connection is accepted, or would wait
// in its backlog) is in use; memcached would take its path over silently.
bool clear_stale_socket(const std::string& path, const sockaddr_un& address, ListenError* error) {
  struct stat info{};
  if (lstat(path.c_str(), &info) != 0) return true;  // nothing there, or bind says why
  if (!S_ISSOCK(info.st_mode)) {
    *error = {path + ": exists and is not a socket", true};
    return false;
  }
  int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (probe < 0) {
    set_error(error, "socket", errno);
    return false;
  }
  int failure =
      connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 ? 0 : errno;
  close(probe);
  if (failure == 0 || failure == EAGAIN) {
    set_error(error, path, EADDRINUSE);
    return false;
  }
  if (failure != ECONNREFUSED) {
    set_error(error, path, failure);
    return false;
  }
  if (unlink(path.c_str()) != 0) {
    set_error(error, path + ": a socket nobody listens on, and it cannot be removed", errno);
    return false;
  }
  return true;
}

}  // namespace

int open_listener(const std::string& host, uint16_t port, bool share_port, ListenError* error,
                  int backlog) {
  AddrInfoPtr info = resolve_to_listen(host, port, error);
  if (!info) return -1;
  std::string where = endpoint(host, port);
  int fd = bind_socket(*info, SOCK_NONBLOCK, share_port, where, error);
  if (fd >= 0 && ::listen(fd, backlog) != 0) {
    set_error(error, where, errno);
    close(fd);
    return -1;
  }
  return fd;
}

bool can_bind(const std::string& host, uint16_t port, ListenError* error) {
  AddrInfoPtr info = resolve_to_listen(host, port, error);
  if (!info) return false;
  int fd = bind_socket(*info, 0, false, endpoint(host, port), error);
  if (fd < 0) return false;
  close(fd);
  return true;
}

int open_unix_listener(const std::string& path, unsigned mode, ListenError* error,
                       int backlog) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() > kMaxUnixPathLength) {
    *error = {"unix socket " + path + ": a path of 1 to " + std::to_string(kMaxUnixPathLength) +
                  " bytes is needed",
              true};
    return -1;
  }
  path.copy(address.sun_path, path.size());
  if (!clear_stale_socket(path, address, error)) return -1;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    set_error(error, "socket", errno);
    return -1;
  }
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    set_error(error, path, errno);
    close(fd);
    return -1;
  }
  // Nobody can connect before listen(): the mode is in force for the first
  // client. (fchmod on the socket would not change the file.)
  if (chmod(path.c_str(), mode) != 0 || ::listen(fd, backlog) != 0) {
    set_error(error, path, errno);
    close(fd);
    unlink(path.c_str());
    return -1;
  }
  return fd;
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

std::string peer_name(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "?";
  return address_text(endpoint_of(address));
}

Endpoint local_endpoint(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return {};
  return endpoint_of(address);
}

}  // namespace lockcached::net
