// What the memory allocator holds, for the MemoryGovernor.
#pragma once

#include <cstddef>

namespace lockcached::server {

// Bytes jemalloc holds resident (its stats.resident, refreshed); 0 when the
// process does not run on jemalloc (sanitizer builds, the test binaries).
size_t allocator_resident_bytes();

}  // namespace lockcached::server
