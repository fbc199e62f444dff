// Why a connection closed: what `watch connevents` prints and what a
// protocol is told when its connection goes.
#pragma once

#include <cstdint>

namespace lockcached::core {

// memcached's conn_close reasons, and kDeadPeer, ours: the peer stopped
// answering (TCP keepalive, --tcp_keepalive), so its machine is gone or cut
// off.
enum class CloseReason : uint8_t { kError, kNormal, kIdleTimeout, kShutdown, kDeadPeer };

}  // namespace lockcached::core
