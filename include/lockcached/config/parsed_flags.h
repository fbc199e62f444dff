// The flags whose text the server takes apart, parsed once per start:
// config::load parses them when every flag is set and hands the one result
// to the start-up checks (checks.h), its warnings and the server's settings
// (settings.h), so that none of them parses a flag again, nor differently.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockcached/consensus/raft_node.h"
#include "lockcached/server/listen_address.h"
#include "lockcached/tls/context.h"

namespace lockcached::config {

struct ParsedFlags {
  std::vector<server::ListenAddress> listen;  // --listen, as memcached's -l has it
  std::vector<consensus::Member> cluster;     // --cluster's members; none without it
  unsigned unix_socket_mask = 0700;           // --unix_socket_mask's permission bits
  tls::Settings tls;                          // the TLS flags, as tls::Context loads them
  // --lock_port was not given: config::load set it from the cache port.
  bool lock_port_follows_cache = false;
  // Why a flag's text did not parse, by the flag's name: the check of its
  // value alone, which check_flags reports in the table's order. Its value
  // above is then meaningless, and config::load stops the start.
  std::map<std::string, std::string, std::less<>> problems;

  // Why `flag`'s text did not parse; "" when it did (or is not parsed here).
  std::string problem_of(std::string_view flag) const;
};

// The flags as gflags holds them now, parsed.
ParsedFlags parse_flags();

// Why `text` would not parse as the value of `flag`, as parse_flags parses
// it; "" when it would, or for a flag not parsed here.
std::string parse_problem(std::string_view flag, const std::string& text);

// Octal permission bits (--unix_socket_mask); nullopt for anything else.
std::optional<unsigned> parse_octal_mask(std::string_view text);

}  // namespace lockcached::config
