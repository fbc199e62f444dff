// lockcached-floor: the least a one-thread server can do per request.
//
// It answers every memcached request without any store (answer.h), in one
// of two loops: --io=epoll (epoll.cc) does the I/O as lockcached does;
// --io=uring (uring.cc) does it with io_uring. What lockcached reaches as a
// fraction of the floor with the same backend is what its store, parser and
// bookkeeping cost (bench/README.md).
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
DEFINE_string(io, "epoll",
              "epoll: level-triggered epoll, read and write calls, as lockcached; uring: "
              "io_uring with multishot accept and receive into provided buffers");

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
  gflags::SetUsageMessage("a one-thread server with no store (bench/README.md)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_io != "epoll" && FLAGS_io != "uring") {
    std::fprintf(stderr, "lockcached-floor: --io must be epoll or uring\n");
    return 2;
  }
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
  return FLAGS_io == "uring" ? floor_server::run_uring(listener, FLAGS_value_size)
                             : floor_server::run_epoll(listener, FLAGS_value_size);
}
