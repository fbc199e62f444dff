// Standard base64 (RFC 4648, with padding), for the meta protocol's binary
// keys ("b" flag).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lockcached::protocol {

std::string base64_encode(std::string_view bytes);
// memcached's lenient decoder (see base64.cc): empty optional when what is
// left of `text` after skipping characters outside the alphabet is not
// padded base64.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace lockcached::protocol
