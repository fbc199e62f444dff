// --listen (memcached's -l): where the memcached protocols listen, as
// memcached spells it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lockcached::server {

// One entry of the list: [notls:]HOST[:PORT]. An IPv6 address with a port
// is in brackets ("[::1]:11211"); one without may be bare ("::1"). "*" is
// every address of the host (0.0.0.0 and ::), as in memcached.
struct ListenAddress {
  static constexpr int kDefaultPort = -1;  // --port's
  std::string host;                        // without brackets
  int port = kDefaultPort;                 // the memcached protocols' port on this address
  bool notls = false;                      // with --tls, this address's ports stay plain
  std::string text;                        // as given, for `stats settings` (inter); empty
                                           // on the second address of "*"

  bool operator==(const ListenAddress&) const = default;
};

// Parses memcached's list (entries separated by ',' or ';'); appends the
// entries to *addresses ("*" gives two). False, with *error naming the
// entry at fault, for a malformed entry or an empty list.
bool parse_listen_addresses(std::string_view list, std::vector<ListenAddress>* addresses,
                            std::string* error);

// The entries as given, joined with ',' (`stats settings` inter).
std::string listen_text(const std::vector<ListenAddress>& addresses);

}  // namespace lockcached::server
