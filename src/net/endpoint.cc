#include "lockcached/net/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <charconv>
#include <cstring>

namespace lockcached::net {
namespace {

bool parse_port(std::string_view text, uint16_t* port) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *port);
  return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

// The IP of an IPv4 or IPv6 endpoint as inet_ntop writes it; "" otherwise.
std::string numeric_ip(const Endpoint& endpoint) {
  char text[INET6_ADDRSTRLEN] = "";
  if (endpoint.family == Endpoint::Family::kIpv4) {
    inet_ntop(AF_INET, endpoint.ip.data(), text, sizeof text);
  } else if (endpoint.family == Endpoint::Family::kIpv6) {
    inet_ntop(AF_INET6, endpoint.ip.data(), text, sizeof text);
  }
  return text;
}

}  // namespace

Endpoint endpoint_of(const sockaddr_storage& address) {
  Endpoint endpoint;
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    endpoint.family = Endpoint::Family::kIpv4;
    std::memcpy(endpoint.ip.data(), &v4->sin_addr, sizeof v4->sin_addr);
    endpoint.port = ntohs(v4->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    endpoint.family = Endpoint::Family::kIpv6;
    std::memcpy(endpoint.ip.data(), &v6->sin6_addr, sizeof v6->sin6_addr);
    endpoint.port = ntohs(v6->sin6_port);
  } else if (address.ss_family == AF_UNIX) {
    const auto* local = reinterpret_cast<const sockaddr_un*>(&address);
    endpoint.family = Endpoint::Family::kUnix;
    endpoint.path.assign(local->sun_path, strnlen(local->sun_path, sizeof local->sun_path));
  }
  return endpoint;
}

std::optional<Endpoint> parse_endpoint(std::string_view text) {
  Endpoint endpoint;
  if (text == "?") return endpoint;
  if (text.starts_with("unix:")) {
    endpoint.family = Endpoint::Family::kUnix;
    endpoint.path = text.substr(5);
    return endpoint;
  }
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || !parse_port(text.substr(colon + 1), &endpoint.port)) {
    return std::nullopt;
  }
  std::string_view host = text.substr(0, colon);
  int family = AF_INET;
  endpoint.family = Endpoint::Family::kIpv4;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    family = AF_INET6;
    endpoint.family = Endpoint::Family::kIpv6;
  }
  if (inet_pton(family, std::string(host).c_str(), endpoint.ip.data()) != 1) return std::nullopt;
  return endpoint;
}

std::string address_text(const Endpoint& endpoint) {
  switch (endpoint.family) {
    case Endpoint::Family::kIpv4:
      return numeric_ip(endpoint) + ":" + std::to_string(endpoint.port);
    case Endpoint::Family::kIpv6:
      return "[" + numeric_ip(endpoint) + "]:" + std::to_string(endpoint.port);
    case Endpoint::Family::kUnix:
      return "unix:" + endpoint.path;
    case Endpoint::Family::kUnknown:
      break;
  }
  return "?";
}

std::string_view host_of(std::string_view host_port) {
  return host_port.substr(0, host_port.rfind(':'));
}

std::string host_text(const Endpoint& endpoint) {
  return std::string(host_of(address_text(endpoint)));
}

std::string ip_text(const Endpoint& endpoint) {
  if (endpoint.family == Endpoint::Family::kUnix) return "unix";
  return numeric_ip(endpoint);
}

std::string conn_text(const Endpoint& endpoint, bool listening) {
  if (endpoint.family == Endpoint::Family::kUnix) {
    return listening ? address_text(endpoint) : "?:<AF 0>";
  }
  return (endpoint.family == Endpoint::Family::kIpv6 ? "tcp6:" : "tcp:") + address_text(endpoint);
}

}  // namespace lockcached::net
