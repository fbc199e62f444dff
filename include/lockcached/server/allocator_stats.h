// What the memory allocator holds, and giving free pages back: for the
// MemoryGovernor.
#pragma once

#include <cstddef>

namespace lockcached::server {

// Bytes jemalloc holds resident (its stats.resident, refreshed); 0 when the
// process does not run on jemalloc (sanitizer builds, the test binaries).
size_t allocator_resident_bytes();

// Gives the pages jemalloc keeps free for reuse (dirty, decaying over
// dirty_decay_ms) back to the system now; nothing without jemalloc.
void allocator_release_free_pages();

}  // namespace lockcached::server
