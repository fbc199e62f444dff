// How the lock service's changes and state are written into a cluster's
// Raft log and snapshots (cluster/lock_machine.h): plain bytes, read back
// the same on every member. A change names its session by serial (the
// member applying it finds the session), and says which connection asked,
// so that the member it came from can answer it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lockcached/locks/lock_change.h"
#include "lockcached/locks/lock_service.h"

namespace lockcached::cluster {

// Who is waiting for a change's outcome: a request of one run of one
// member (a restarted member is a new incarnation, so an entry of its
// previous run is answered to nobody).
struct Origin {
  uint64_t node = 0;
  uint64_t incarnation = 0;
  uint64_t request = 0;  // 0: nobody waits
  bool operator==(const Origin&) const = default;
};

// A change as the log holds it: its session named by `change.serial` (empty
// for kOpen and kTermStart), never by `change.session`, which only means
// something on the member that holds it.
struct LoggedChange {
  Origin origin;
  locks::Change change;
  // The same bytes in the log.
  bool operator==(const LoggedChange& other) const;
};

std::string encode(const LoggedChange& change);
// nullopt when `bytes` are not an encoded change (a member skips it).
std::optional<LoggedChange> decode_change(std::string_view bytes);

// The last leader that announced itself (its kTermStart), and where it
// serves. A snapshot carries it beside the lock service's state: a member
// that starts from a snapshot taken after the leader's first entry must
// still name that leader in its 503s and follow its cache.
struct Announcement {
  Origin origin;
  std::string lock_address;
  std::string replication_address;
  std::string lock_tls_address = {};  // "" when the leader serves no TLS lock port
  bool operator==(const Announcement&) const = default;
};

std::string encode(const locks::FullState& state, const Announcement& announced = {});
// `announced` (when given) is set from the bytes; a snapshot written before
// announcements were kept leaves it nullopt.
std::optional<locks::FullState> decode_state(std::string_view bytes,
                                             std::optional<Announcement>* announced = nullptr);

}  // namespace lockcached::cluster
