// Small wrappers over the BSD socket calls the server needs.
#pragma once

#include <cstdint>
#include <string>

namespace lockcached::net {

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

}  // namespace lockcached::net
