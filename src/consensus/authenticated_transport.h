// The cluster port lets only members in: a libraft transport that wraps
// libraft's own TCP transport (raft_uv_tcp) and adds one exchange to every
// connection before libraft uses it.
//
// libraft's connections go one way: a node opens one to each peer and only
// sends on it (AppendEntries, votes), so what a node must know is that an
// incoming connection comes from a member. Whoever sends Raft messages to a
// node can make it grant locks; whoever merely accepts a node's messages
// learns what they say but cannot change anything. So:
//
//   connector -> listener: libraft's handshake (protocol, server id, address)
//   listener  -> connector: 32 random bytes (a nonce, never used twice)
//   connector -> listener: HMAC-SHA256(secret, "lockcached-cluster-2" ||
//                          nonce || id || address || incarnation),
//                          then its incarnation (32 hex digits)
//
// and the listener hands the connection to libraft only when the MAC is
// right and the incarnation is the one it knows for that id, or the first
// it hears (consensus/data_dir.h: a node that lost its disk and came back
// under its old id forgot its votes); otherwise it logs who tried and
// closes it. The nonce makes a recorded exchange worthless later. The messages that follow are not
// encrypted: run the cluster port on a network you trust with what the
// locks are named (docs/high-availability.md).
#pragma once

// libraft's headers declare C functions without extern "C".
extern "C" {
#include <raft.h>
#include <raft/uv.h>
}

#include <functional>
#include <string>

namespace lockcached::consensus {

constexpr size_t kPeerNonceSize = 32;
constexpr size_t kPeerMacSize = 32;          // HMAC-SHA256
constexpr size_t kPeerIncarnationSize = 32;  // hex digits

// The MAC a connector with `secret` sends for `nonce`, as node `id` at
// `address` whose data directory is `incarnation`.
std::string peer_mac(const std::string& secret, const unsigned char* nonce, raft_id id,
                     const std::string& address, const std::string& incarnation);

// Whether node `id` may speak with its directory `incarnation` (PeerBook).
using AdmitPeer = std::function<bool(raft_id id, const std::string& incarnation)>;

// Sets up `transport` (which must stay where it is until closed) as the
// authenticated wrapper of a raft_uv_tcp transport on `loop`, for a member
// whose directory is `incarnation`. 0, or a libraft error code.
int authenticated_transport_init(struct raft_uv_transport* transport, uv_loop_t* loop,
                                 std::string secret, std::string incarnation, AdmitPeer admit);
// Frees what init allocated, once libraft closed the transport.
void authenticated_transport_free(struct raft_uv_transport* transport);

}  // namespace lockcached::consensus
