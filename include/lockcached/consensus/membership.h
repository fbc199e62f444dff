// A change of a Raft cluster's members (`cluster add|remove|transfer`, on
// the lock-service port), as plain data: what the lock-service protocol
// parses, what the server checks and hands to the RaftNode, and how it
// ended, which the protocol formats.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "lockcached/net/endpoint.h"

namespace lockcached::consensus {

struct MembershipChange {
  enum class Kind : uint8_t {
    kAdd,       // `id` at `address`: caught up from the log, then a voter
    kRemove,    // `id` leaves (the leader itself may: it steps down)
    kTransfer,  // leadership moves to voter `id` (0: the most up-to-date)
  };
  Kind kind = Kind::kAdd;
  uint64_t id = 0;
  std::string address;  // kAdd: "IPv4:PORT" of its cluster port
};

struct MembershipResult {
  enum class Status : uint8_t {
    kDone,
    kNotLeader,  // detail: the leader's lock-service address, empty in an election
    kRefused,    // detail: why this client may not ask
    kFailed,     // detail: why the cluster could not make it
  };
  Status status = Status::kDone;
  std::string detail;
  std::string leader_tls = {};  // kNotLeader: the leader's TLS lock-service address, "" when none
};

// Asks for `change` on behalf of a client at `peer`; `done` is called once,
// from any thread.
using MembershipRequester =
    std::function<void(const MembershipChange& change, const net::Endpoint& peer,
                       std::function<void(MembershipResult)> done)>;

// What RaftNode::change_members reports when the node did not lead.
inline constexpr std::string_view kNotLeader = "not leader";

}  // namespace lockcached::consensus
