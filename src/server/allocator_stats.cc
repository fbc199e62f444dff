#include "lockcached/server/allocator_stats.h"

#include <cstdint>

// jemalloc's control interface, declared weak: the library that holds the
// server code is linked into the server (with jemalloc) and into the tests
// (without), and only the server has the symbol.
extern "C" int mallctl(const char* name, void* old_value, size_t* old_length, void* new_value,
                       size_t new_length) __attribute__((weak));

namespace lockcached::server {

size_t allocator_resident_bytes() {
  if (mallctl == nullptr) return 0;
  // jemalloc's statistics are a snapshot taken when the epoch advances.
  uint64_t epoch = 1;
  size_t epoch_length = sizeof epoch;
  if (mallctl("epoch", &epoch, &epoch_length, &epoch, epoch_length) != 0) return 0;
  size_t resident = 0;
  size_t length = sizeof resident;
  if (mallctl("stats.resident", &resident, &length, nullptr, 0) != 0) return 0;
  return resident;
}

void allocator_release_free_pages() {
  if (mallctl == nullptr) return;
  // "arena.<MALLCTL_ARENAS_ALL>.purge": every arena's unused dirty pages.
  mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
}

}  // namespace lockcached::server
