// lockcached-floor: the least a one-thread epoll server can do per request.
//
// It answers every memcached request without any store (answer.h), doing
// the I/O as lockcached does (epoll.cc). What lockcached reaches as a
// fraction of this is what its store, parser and bookkeeping cost
// (bench/README.md).
#include <arpa/inet.h>
#include <gflags/gflags.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "answer.h"

DEFINE_string(listen, "127.0.0.1", "IPv4 address to listen on");
DEFINE_int32(port, 11511, "TCP port (0: any free port)");
DEFINE_uint64(value_size, 32, "size of the value every get returns");

namespace {

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
  // The line lockcached prints, which scripts wait for: keep it the same.
  std::fprintf(stderr, "Listening on %s:%d (memcached protocol)\n", FLAGS_listen.c_str(),
               ntohs(bound.sin_port));
  return floor_server::run_epoll(listener, FLAGS_value_size);
}
