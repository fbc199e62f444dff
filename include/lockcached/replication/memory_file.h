// A warm restart (memcached's -e, --memory_file): at a graceful stop the
// whole store goes to a file, and the next start loads it before serving,
// so an upgrade or a restart does not empty the cache.
//
// The file is the store in the replication stream's frames (encoder.h):
// a header, every live item as the SetQ a snapshot sends (with its CAS and
// SavedState, which a replica does without), a pending delayed flush_all
// as a FlushQ before them, then a footer that counts them and a SHA-256 of
// everything before it. Exptimes are unix times, as on the stream, so an
// item that expired while the server was down is not loaded.
//
// It is valid only as written at a graceful stop, as memcached's: it is
// written under another name and renamed, and a start removes it before
// loading anything, so a crash after that start finds no file and starts
// cold instead of serving what the cache held a restart ago. A file that
// fails any check (format, checksum, another memory limit or item size) is
// removed too, and loads nothing.
#pragma once

#include <cstdint>
#include <string>

#include "lockcached/store/store.h"

namespace lockcached::replication {

struct MemoryFileSaved {
  bool ok = false;
  std::string error;  // when not ok
  uint64_t items = 0;
  uint64_t bytes = 0;  // the file's size
};

struct MemoryFileLoaded {
  enum Outcome { kLoaded, kNoFile, kRefused };
  Outcome outcome = kNoFile;
  std::string why;  // kRefused: what was wrong with the file
  uint64_t restored = 0;
  uint64_t dropped = 0;  // expired or flushed while down, or without room
  int64_t seconds_down = 0;
  std::string written_by;  // the lockcached version that wrote it
};

// Writes every live item of `store` to `path`. The store must be quiet (the
// server's workers stopped): the file is one moment of it. The file records
// `memory_limit`, the configured one (--memory_limit_mb), which a start with
// the same flags has: not the store's, which cache_memlimit may have changed
// for this run only.
MemoryFileSaved save_memory_file(const std::string& path, store::Store& store,
                                 size_t memory_limit);

// Loads `path` into `store`, which must be empty, and removes the file.
// The file must have been written with the same memory limit and item size
// as `store` has.
MemoryFileLoaded load_memory_file(const std::string& path, store::Store& store);

}  // namespace lockcached::replication
