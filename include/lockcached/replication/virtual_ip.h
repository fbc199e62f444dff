// Which node is the master: the one that holds the virtual IP on one of its
// interfaces (yrmcds's rule; keepalived moves the address). A node asks on
// start and about once a second after (the server's role watcher).
#pragma once

#include <string>

namespace lockcached::replication {

enum class AddressOwnership { kLocal, kRemote, kInvalid };

// Whether `address` (IPv4 or IPv6, numeric) is assigned to an interface of
// this host's network namespace right now. kInvalid when it is no numeric
// address, or the interfaces cannot be read (with *error set).
AddressOwnership address_ownership(const std::string& address, std::string* error);

// Whether `address` is a numeric IPv4 or IPv6 address (no name lookups: a
// virtual IP must not depend on DNS).
bool is_numeric_address(const std::string& address);

}  // namespace lockcached::replication
