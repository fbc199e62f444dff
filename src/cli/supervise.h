// Runs a command while a connection holds a lock for it: the heart of
// `lockcached-cli run` (a distributed flock) and `lock KEY -- COMMAND`.
#pragma once

#include <string>
#include <vector>

#include "connection.h"

namespace lockcached::cli {

// The connection that holds the lock, as the supervisor sees it.
class LockHolder {
 public:
  virtual ~LockHolder() = default;
  virtual Connection& connection() = 0;
  // A request with a reply and no effect; throws (Failure) when the server
  // does not answer.
  virtual void ping() = 0;
  // Gives the lock back; false when it was no longer held.
  virtual bool release() = 0;
  // "lock \"deploy\"", for messages.
  virtual std::string what() const = 0;
};

struct SuperviseOptions {
  double ping_seconds = 10;   // 0: never ping
  bool kill_on_loss = false;  // SIGTERM the command when the lock is lost
};

// Runs `command` (searched in $PATH, stdio inherited) and waits for it while
// pinging the holder's server. Signals sent to lockcached-cli with kill(1)
// are passed on to the command; those from the terminal reach the command
// directly. When the command ends, releases the lock. Returns the command's
// exit status as a shell reports it (128+N when killed by signal N; 127 when
// not found, 126 when not executable).
int run_holding_lock(const std::vector<std::string>& command, LockHolder& holder,
                     const SuperviseOptions& options);

}  // namespace lockcached::cli
