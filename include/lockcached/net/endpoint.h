// One end of a connection as plain data, and the one home of every text
// form the server prints of it. No socket call is needed to use it (the
// fuzz harnesses include it); only endpoint.cc knows the sockaddr
// structures, to turn what accept() and getsockname() give into one.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sockaddr_storage;

namespace lockcached::net {

struct Endpoint {
  enum class Family : uint8_t { kUnknown, kIpv4, kIpv6, kUnix };
  Family family = Family::kUnknown;
  // Network order: kIpv4 uses the first 4 bytes, kIpv6 all 16.
  std::array<uint8_t, 16> ip{};
  uint16_t port = 0;  // kIpv4 and kIpv6, host order
  // kUnix: the socket's path; "" for an unnamed socket, as a client's is.
  std::string path;

  bool known() const { return family != Family::kUnknown; }
  bool operator==(const Endpoint&) const = default;
};

// Who a client is: its connection's id, which is also its lock owner id
// (the number `stats conns` and `stats cachelocks` show, every watch
// stream's cfd=, a lock session's connection), and where it connects from.
// Owned by its connection; a lock session keeps a copy while attached.
struct ClientInfo {
  uint64_t id = 0;  // 0: unknown
  Endpoint address;
};
// Who a caller without a connection (a test, a fuzz harness) is.
inline const ClientInfo kUnknownClient{};

// What accept() or getsockname() gave: AF_INET, AF_INET6, AF_UNIX; any
// other family is kUnknown.
Endpoint endpoint_of(const sockaddr_storage& address);

// Back from address_text's form ("?" is kUnknown); nullopt for anything
// address_text does not write.
std::optional<Endpoint> parse_endpoint(std::string_view text);

// Ours, in logs, `stats locks` and a Raft log's sessions: "1.2.3.4:5",
// "[::1]:5", "unix:PATH" ("unix:" for an unnamed socket); "?" when unknown.
std::string address_text(const Endpoint& endpoint);
// The host of a "HOST:PORT" text (a configured address, or address_text's):
// all before its last ':'.
std::string_view host_of(std::string_view host_port);
// The host of address_text's form: "1.2.3.4", "[::1]".
std::string host_text(const Endpoint& endpoint);
// memcached's `watch` rip=: "1.2.3.4", "::1"; "unix" for a unix-domain
// socket's client, "" when unknown. Its rport= is Endpoint::port.
std::string ip_text(const Endpoint& endpoint);
// memcached's `stats conns` addr and listen_addr: "tcp:1.2.3.4:5",
// "tcp6:[::1]:5", "unix:/run/x.sock". memcached keeps no address for a
// client of a unix socket, and shows "?:<AF 0>" for it.
std::string conn_text(const Endpoint& endpoint, bool listening);

}  // namespace lockcached::net
