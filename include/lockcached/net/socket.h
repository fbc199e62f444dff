// Small wrappers over the BSD socket calls the server needs.
#pragma once

#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace lockcached::net {

// What listen() is given: memcached's default (-b), the kernel caps it at
// net.core.somaxconn.
constexpr int kListenBacklog = 1024;

// A non-blocking TCP listening socket on host:port ("0.0.0.0", "::1",
// "localhost"...). With share_port, several sockets may listen on one port
// (SO_REUSEPORT) and the kernel spreads new connections over them. Returns
// the fd, or -1 with *error set.
int open_listener(const std::string& host, uint16_t port, bool share_port, std::string* error);

// True when no socket listens on host:port yet. SO_REUSEPORT would let a
// second server of the same user share a busy port silently; this check
// makes that an "address in use" error instead.
bool port_is_free(const std::string& host, uint16_t port);

uint16_t local_port(int fd);

// A non-blocking TCP connection to host:port, under way: the fd becomes
// writable once it is made or has failed (connect_result says which).
// Returns -1 with *error set when it cannot even start.
int open_connection(const std::string& host, uint16_t port, std::string* error);
// 0 once a connection from open_connection is made, else its errno.
int connect_result(int fd);
// "address:port" of the other end ("?" when unknown).
std::string peer_name(int fd);
// "address:port" of this end ("?" when unknown).
std::string local_name(int fd);
// "1.2.3.4:port" or "[::1]:port"; "?" for a family that is neither.
std::string address_text(const sockaddr_storage& address);

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
