// Keeps the process near --memory_limit_mb when the allocator, not the
// items, holds the memory.
//
// The store counts item bytes exactly, but freed items leave holes: when
// item sizes shift (small to large), evicting small items frees their
// memory only once every item on an allocator page is gone, so for a while
// the old pages and the new items both take memory (memcached's slab
// calcification, in another form). The governor reads what the allocator
// holds resident every few milliseconds and, once that is more than the
// limit allows, lowers the store's eviction target by the excess, so that
// eviction empties pages sooner, and again by whatever the heap grows
// after (not by the same excess again: evictions that leave holes shrink
// the items, not the heap); it raises the target back as memory comes
// down. The store holds fewer items for a while instead of growing.
//
// Free pages come first: the allocator keeps freed pages for a moment
// (dirty_decay_ms in main.cc) because re-faulting a large item's pages on
// every store cost several times the store itself; when memory is over,
// the governor has those given back before it evicts anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "lockcached/store/background_loop.h"
#include "lockcached/store/store.h"

namespace lockcached::store {

struct MemoryReading {
  size_t limit = 0;          // the configured item memory
  size_t item_bytes = 0;     // what the items take now
  size_t target = 0;         // the eviction target now
  size_t heap_resident = 0;  // what the allocator holds resident
  // The heap as of the target's last cut (the lowest since); 0 while the
  // heap has been within bounds since.
  size_t heap_at_cut = 0;
};

struct EvictionTarget {
  size_t target = 0;
  size_t heap_at_cut = 0;  // for the next reading
};

// What the heap may hold for a given item limit: the limit, an eighth more
// and 4 MiB, for allocator size classes, hash buckets and connection buffers.
size_t allowed_heap(size_t limit);
// The eviction target for the next interval: the pure control law, apart
// from the thread so that it can be tested alone.
EvictionTarget next_eviction_target(const MemoryReading& reading);

// What the governor needs of the memory allocator.
struct AllocatorControl {
  // Bytes the allocator holds resident; 0 when it cannot tell.
  std::function<size_t()> resident;
  // Returns the pages it keeps free for reuse to the system.
  std::function<void()> release_free_pages;
};

class MemoryGovernor {
 public:
  MemoryGovernor(Store& store, AllocatorControl allocator)
      : store_(store), allocator_(std::move(allocator)) {}

  // Does nothing when the allocator cannot report its size.
  void start();
  void stop() { loop_.stop(); }

 private:
  int64_t round();

  Store& store_;
  AllocatorControl allocator_;
  size_t heap_at_cut_ = 0;  // MemoryReading::heap_at_cut, the loop's thread only
  BackgroundLoop loop_;
};

}  // namespace lockcached::store
