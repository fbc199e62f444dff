// Ports on 127.0.0.1 for the servers a test starts and must name itself (a
// cluster's members, a replication port): one home for the unit and the
// end-to-end tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace test_ports {

// `count` TCP ports free on 127.0.0.1 now, all different: each is held
// until every one is chosen, so that the kernel cannot hand one out twice.
// Drawn below the kernel's ephemeral range where there is room: a port
// from inside it can be taken, between this choice and the server's bind,
// by any outgoing connection (the suite's hostile tests open thousands at
// once), and a cluster member then failed to start ("start: I/O error").
std::vector<uint16_t> free_ports(size_t count);
inline uint16_t free_port() {
  return free_ports(1)[0];
}
// Whether `port` on 127.0.0.1 can be bound now.
bool port_is_free(uint16_t port);

}  // namespace test_ports
