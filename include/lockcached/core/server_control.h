// What a client may ask of the server as a whole rather than of the store:
// the commands that act on the process. Server implements it; a protocol
// reaches it through its CommandCore.
#pragma once

#include <string>

namespace lockcached::store {
class Crawler;
}  // namespace lockcached::store

namespace lockcached::core {

class ServerControl {
 public:
  virtual ~ServerControl() = default;
  // memcached's refresh_certs: loads the TLS certificates and keys again.
  // False, with memcached's wording of why in *error, when TLS is off or a
  // file does not load (the certificates in use then stay).
  virtual bool refresh_certs(std::string* error) = 0;
  // The expiry crawler, for memcached's `lru_crawler` commands; nullptr
  // where there is none.
  virtual store::Crawler* crawler() { return nullptr; }
  // memcached's `shutdown`: stops the server as SIGINT does, or with
  // `graceful` as SIGUSR1 does.
  virtual void shutdown(bool graceful) = 0;
};

}  // namespace lockcached::core
