#include "played_master.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace test_peers {

PlayedMaster::PlayedMaster(const char* address, uint16_t port) {
  listener_ = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_port = htons(port);
  socklen_t length = sizeof where;
  if (inet_pton(AF_INET, address, &where.sin_addr) != 1 ||
      bind(listener_, reinterpret_cast<sockaddr*>(&where), length) != 0 ||
      listen(listener_, 8) != 0 ||
      getsockname(listener_, reinterpret_cast<sockaddr*>(&where), &length) != 0) {
    return;  // not bound(): port_ stays 0
  }
  port_ = ntohs(where.sin_port);
}

PlayedMaster::~PlayedMaster() {
  hang_up();
  close(listener_);
}

bool PlayedMaster::accept_replica(int timeout_ms) {
  hang_up();
  pollfd ready{listener_, POLLIN, 0};
  if (poll(&ready, 1, timeout_ms) != 1) return false;
  replica_ = accept(listener_, nullptr, nullptr);
  return replica_ >= 0;
}

bool PlayedMaster::send(std::string_view bytes) {
  return ::send(replica_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(bytes.size());
}

std::optional<std::string> PlayedMaster::read(size_t count, int timeout_ms) {
  std::string bytes(count, '\0');
  size_t got = 0;
  while (got < count) {
    pollfd ready{replica_, POLLIN, 0};
    if (poll(&ready, 1, timeout_ms) != 1) return std::nullopt;
    ssize_t n = recv(replica_, bytes.data() + got, count - got, 0);
    if (n <= 0) return std::nullopt;
    got += static_cast<size_t>(n);
  }
  return bytes;
}

void PlayedMaster::hang_up() {
  if (replica_ >= 0) close(replica_);
  replica_ = -1;
}

}  // namespace test_peers
