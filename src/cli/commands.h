// The commands of lockcached-cli; each returns the exit status.
#pragma once

#include "options.h"

namespace lockcached::cli {

// The cache-port commands: get, set, delete, lock, unlock, unlock_all, keys,
// stats, cluster.
int run_cache_command(const Options& options);
// `run NAME -- COMMAND`: a distributed flock(1) on the lock service.
int run_locked(const Options& options);
// `locks [PREFIX]`: the lock service's held locks.
int list_locks(const Options& options);
// `cluster add|remove|transfer`, on the lock service (the leader's).
int change_members(const Options& options);

}  // namespace lockcached::cli
