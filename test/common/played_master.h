// A replication master that a test plays: a listening socket on loopback's
// network, one replica connected at a time, and exactly the bytes the test
// sends. One home for the unit tests (replication::Node) and the end-to-end
// ones (a real lockcached as the replica).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace test_peers {

class PlayedMaster {
 public:
  // On address:port; port 0 takes one the kernel picks (port()).
  explicit PlayedMaster(const char* address = "127.0.0.1", uint16_t port = 0);
  ~PlayedMaster();
  PlayedMaster(const PlayedMaster&) = delete;
  PlayedMaster& operator=(const PlayedMaster&) = delete;

  bool bound() const { return port_ != 0; }
  uint16_t port() const { return port_; }
  // The replica's next connection, once the last one is hung up on (false
  // after timeout_ms without one).
  bool accept_replica(int timeout_ms = 10000);
  bool send(std::string_view bytes);
  // `count` bytes from the replica; nullopt after timeout_ms without any,
  // or when it hung up first.
  std::optional<std::string> read(size_t count, int timeout_ms = 5000);
  void hang_up();

 private:
  int listener_ = -1;
  int replica_ = -1;
  uint16_t port_ = 0;
};

}  // namespace test_peers
