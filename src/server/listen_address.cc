#include "lockcached/server/listen_address.h"

#include <charconv>

namespace lockcached::server {
namespace {

constexpr std::string_view kNoTls = "notls:";

bool parse_port(std::string_view text, int* port) {
  auto [end, failure] = std::from_chars(text.data(), text.data() + text.size(), *port);
  return !text.empty() && failure == std::errc() && end == text.data() + text.size() &&
         *port >= 0 && *port <= 65535;
}

// One entry, as memcached's server_sockets() reads it: a bracketed host may
// have ":PORT" after it; an unbracketed one has a port only when it holds
// a single ':' (more are a bare IPv6 address).
bool parse_entry(std::string_view entry, std::vector<ListenAddress>* addresses,
                 std::string* error) {
  ListenAddress address;
  address.text = std::string(entry);
  auto fail = [&](const std::string& why) {
    *error = address.text + ": " + why;
    return false;
  };
  if (entry.starts_with(kNoTls)) {
    address.notls = true;
    entry.remove_prefix(kNoTls.size());
  }
  std::string_view host = entry;
  std::string_view port;
  if (entry.starts_with('[')) {
    size_t close = entry.find(']');
    if (close == std::string_view::npos) return fail("missing ']'");
    host = entry.substr(1, close - 1);
    std::string_view rest = entry.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || rest.size() == 1)) {
      return fail("expected :PORT after ']'");
    }
    if (!rest.empty()) port = rest.substr(1);
  } else if (size_t colon = entry.find(':');
             colon != std::string_view::npos && colon == entry.rfind(':')) {
    host = entry.substr(0, colon);
    port = entry.substr(colon + 1);
    if (port.empty()) return fail("expected a port after ':'");
  }
  if (host.empty()) return fail("no host");
  if (!port.empty() && !parse_port(port, &address.port)) {
    return fail("the port must be a number from 0 to 65535");
  }
  if (host != "*") {
    address.host = std::string(host);
    addresses->push_back(std::move(address));
    return true;
  }
  address.host = "0.0.0.0";
  addresses->push_back(address);
  address.host = "::";
  address.text.clear();  // "*" is one entry of the list
  addresses->push_back(std::move(address));
  return true;
}

}  // namespace

bool parse_listen_addresses(std::string_view list, std::vector<ListenAddress>* addresses,
                            std::string* error) {
  size_t before = addresses->size();
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find_first_of(",;", start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view entry = list.substr(start, end - start);
    start = end + 1;
    if (!entry.empty() && !parse_entry(entry, addresses, error)) return false;
  }
  if (addresses->size() == before) {
    *error = "needs at least one address";
    return false;
  }
  return true;
}

std::string listen_text(const std::vector<ListenAddress>& addresses) {
  std::string joined;
  for (const ListenAddress& address : addresses) {
    if (!address.text.empty()) joined += (joined.empty() ? "" : ",") + address.text;
  }
  return joined;
}

}  // namespace lockcached::server
