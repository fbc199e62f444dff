#include "free_ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include <gtest/gtest.h>

namespace test_ports {
namespace {

// The lowest of the kernel's ephemeral ports: those are what bind(0) hands
// out, and what every outgoing connection of any process on the machine
// takes as its own.
unsigned lowest_ephemeral_port() {
  unsigned low = 32768;  // Linux's default
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  return low;
}

// Binds 127.0.0.1:`port` (0: the kernel picks); the socket, or -1.
int bind_loopback(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return fd;
  close(fd);
  return -1;
}

}  // namespace

std::vector<uint16_t> free_ports(size_t count) {
  constexpr unsigned kLowest = 10000;
  const unsigned ephemeral_low = lowest_ephemeral_port();
  static std::mt19937 random(static_cast<unsigned>(getpid()) ^ std::random_device{}());
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  for (size_t i = 0; i < count; ++i) {
    int fd = -1;
    uint16_t port = 0;
    for (int attempt = 0; fd < 0 && attempt < 100 && ephemeral_low > kLowest + 1000; ++attempt) {
      port = static_cast<uint16_t>(
          std::uniform_int_distribution<unsigned>(kLowest, ephemeral_low - 1)(random));
      fd = bind_loopback(port);
    }
    if (fd < 0) {  // no room below the range, or none free there
      fd = bind_loopback(0);
      sockaddr_in address{};
      socklen_t length = sizeof address;
      EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
      port = ntohs(address.sin_port);
    }
    fds.push_back(fd);  // held until every port is chosen: no port twice
    ports.push_back(port);
  }
  for (int fd : fds)
    close(fd);
  return ports;
}

bool port_is_free(uint16_t port) {
  int fd = bind_loopback(port);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

}  // namespace test_ports
