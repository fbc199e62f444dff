#include "lockcached/replication/virtual_ip.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace lockcached::replication {
namespace {

// The address in network byte order, as an interface lists it.
struct Parsed {
  int family = AF_UNSPEC;
  in_addr v4{};
  in6_addr v6{};
};

bool parse(const std::string& text, Parsed* parsed) {
  if (inet_pton(AF_INET, text.c_str(), &parsed->v4) == 1) {
    parsed->family = AF_INET;
    return true;
  }
  if (inet_pton(AF_INET6, text.c_str(), &parsed->v6) == 1) {
    parsed->family = AF_INET6;
    return true;
  }
  return false;
}

bool matches(const sockaddr* address, const Parsed& wanted) {
  if (address == nullptr || address->sa_family != wanted.family) return false;
  if (wanted.family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr == wanted.v4.s_addr;
  }
  const in6_addr& have = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
  return std::memcmp(&have, &wanted.v6, sizeof have) == 0;
}

}  // namespace

AddressOwnership address_ownership(const std::string& address, std::string* error) {
  Parsed wanted;
  if (!parse(address, &wanted)) {
    *error = address + ": not a numeric IPv4 or IPv6 address";
    return AddressOwnership::kInvalid;
  }
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) {
    *error = std::string("getifaddrs: ") + std::strerror(errno);
    return AddressOwnership::kInvalid;
  }
  AddressOwnership ownership = AddressOwnership::kRemote;
  for (const ifaddrs* entry = interfaces; entry != nullptr; entry = entry->ifa_next) {
    if (matches(entry->ifa_addr, wanted)) {
      ownership = AddressOwnership::kLocal;
      break;
    }
  }
  freeifaddrs(interfaces);
  return ownership;
}

bool is_numeric_address(const std::string& address) {
  Parsed parsed;
  return parse(address, &parsed);
}

}  // namespace lockcached::replication
