// Small wrappers over the BSD socket calls the server needs.
#pragma once

#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "lockcached/net/endpoint.h"

namespace lockcached::net {

// What listen() is given unless told otherwise (--listen_backlog,
// memcached's -b and its default); the kernel caps it at net.core.somaxconn.
constexpr int kListenBacklog = 1024;

// Why a listening socket could not be had: the message ("HOST:PORT: Cannot
// assign requested address"), and whether the configuration is at fault,
// so that no retry can mend it (an address not on this host, a port or a
// path this user may not bind, a name that does not exist), rather than
// the moment (the address still in use by a server that is stopping).
struct ListenError {
  std::string message;
  bool configuration = false;
};

// A non-blocking TCP listening socket on host:port ("0.0.0.0", "::1",
// "localhost"...). With share_port, several sockets may listen on one port
// (SO_REUSEPORT) and the kernel spreads new connections over them.
// `backlog`: listen()'s queue of connections not yet accepted. Returns the
// fd, or -1 with *error set.
int open_listener(const std::string& host, uint16_t port, bool share_port, ListenError* error,
                  int backlog = kListenBacklog);

// Whether host:port can be bound: SO_REUSEPORT would let a second server of
// the same user share a busy port silently, so a bind without it is tried
// first. False, with the bind's own reason in *error, when it fails.
bool can_bind(const std::string& host, uint16_t port, ListenError* error);

// The longest path a unix-domain socket may have (sun_path, less its NUL).
constexpr size_t kMaxUnixPathLength = 107;

// A non-blocking unix-domain stream socket listening at `path`, the file's
// permission bits set to `mode` before the first client can connect
// (memcached's -a). A socket file that nobody listens on any more (its
// server was killed) is replaced; one that a live server listens on is
// "in use", as a TCP port would be; a file that is no socket is refused.
int open_unix_listener(const std::string& path, unsigned mode, ListenError* error,
                       int backlog = kListenBacklog);

uint16_t local_port(int fd);

// A non-blocking TCP connection to host:port, under way: the fd becomes
// writable once it is made or has failed (socket_error says which).
// Returns -1 with *error set when it cannot even start.
int open_connection(const std::string& host, uint16_t port, std::string* error);
// The socket's pending error (SO_ERROR), 0 when none: what ended a
// connection that epoll reports with EPOLLERR, or whether a connection from
// open_connection was made.
int socket_error(int fd);

// The largest --tcp_keepalive: TCP_KEEPIDLE's and TCP_KEEPINTVL's bound.
constexpr int kMaxKeepaliveSeconds = 32767;

// How a connection whose peer vanished (its machine died, its link was cut:
// no FIN and no RST ever come) is found dead within about `seconds`:
// - with nothing to send, the kernel sends keepalive probes once the
//   connection was silent for `idle_s`, then every `interval_s`;
// - TCP_USER_TIMEOUT ends it at the first probe at which nothing was heard
//   from the peer for `seconds` (with a user timeout set, Linux counts time,
//   not probes: `count` is only a fallback for kernels that ignore it), and
//   ends it as well when data it sent, or its window probes, stay
//   unacknowledged that long.
// So a dead peer is found at most bound_s() after it was last heard from.
// A live peer answers every probe from its kernel, so a healthy idle client
// is never cut off; one whose receive window stays shut that long (it reads
// nothing of what it asked for) is treated as dead too.
struct KeepaliveTimes {
  int idle_s = 0;
  int interval_s = 0;
  int count = 0;
  unsigned user_timeout_ms = 0;
  int bound_s() const;
};
// For --tcp_keepalive=seconds (1..kMaxKeepaliveSeconds): probes from half
// of it on, 8 or more of them before it is over, so bound_s() is `seconds`
// plus at most one probe interval (seconds/16, at least 1 s).
KeepaliveTimes keepalive_times(int seconds);
// Turns keepalive on for `fd` with those times; false (errno set) when the
// kernel refuses one of them.
bool set_keepalive(int fd, const KeepaliveTimes& times);
// True when a connection failed with `error` because its peer stopped
// answering: it timed out (ETIMEDOUT), or timed out after the network said
// the peer could not be reached (an ICMP or ARP failure is only a soft
// error for an established connection, which the kernel reports when the
// timeout ends it).
bool peer_vanished(int error);
// The other end's address as text (net::address_text; "?" when unknown).
std::string peer_name(int fd);
// This end (kUnknown when the kernel does not say).
Endpoint local_endpoint(int fd);

// The system calls of the request path, made directly. glibc's read(),
// send() and sendmsg() are thread cancellation points: in a process with
// more than one thread each call costs two atomic read-modify-writes on the
// thread's cancel state around the system call (about 60 instructions, four
// locked operations per request). No lockcached thread is ever cancelled.
// Results and errno are the plain calls'.
inline ssize_t read_some(int fd, void* buffer, size_t size) {
  return syscall(SYS_read, fd, buffer, size);
}
inline ssize_t send_some(int fd, const void* bytes, size_t size) {
  return syscall(SYS_sendto, fd, bytes, size, MSG_NOSIGNAL, nullptr, 0);
}
inline ssize_t send_some(int fd, const iovec* iov, size_t count) {
  msghdr message{};
  message.msg_iov = const_cast<iovec*>(iov);
  message.msg_iovlen = count;
  return syscall(SYS_sendmsg, fd, &message, MSG_NOSIGNAL);
}

}  // namespace lockcached::net
