#include "lockcached/core/size_class_stats.h"

#include <algorithm>
#include <string>

namespace lockcached::core {
namespace {

// "items:N:number"
void collect_items(const store::SizeClassStats& c, StatList& out) {
  std::string prefix = "items:" + std::to_string(c.id) + ":";
  auto add = [&](const char* name, uint64_t value) {
    out.emplace_back(prefix + name, std::to_string(value));
  };
  add("number", c.number);
  add("age", c.age);
  add("mem_requested", c.requested);
  add("evicted", c.evicted);
  add("evicted_nonzero", c.evicted_nonzero);
  add("evicted_time", c.evicted_time);
  add("outofmemory", c.outofmemory);
  add("reclaimed", c.reclaimed);
  add("expired_unfetched", c.expired_unfetched);
  add("evicted_unfetched", c.evicted_unfetched);
  add("crawler_reclaimed", c.crawler_reclaimed);
  add("crawler_items_checked", c.crawler_items_checked);
}

// "N:chunk_size". Nothing is preallocated: every chunk is an item's
// allocation, so total_chunks is used_chunks and no chunk is free; pages
// are the used chunks in memcached's 1 MiB pages, rounded up.
void collect_slabs(const store::SizeClassStats& c, StatList& out) {
  std::string prefix = std::to_string(c.id) + ":";
  auto add = [&](const char* name, uint64_t value) {
    out.emplace_back(prefix + name, std::to_string(value));
  };
  uint64_t per_page = std::max<uint64_t>(1, kSlabPageSize / c.chunk_size);
  add("chunk_size", c.chunk_size);
  add("chunks_per_page", per_page);
  add("total_pages", (c.number + per_page - 1) / per_page);
  add("total_chunks", c.number);
  add("used_chunks", c.number);
  add("free_chunks", 0);
  add("free_chunks_end", 0);
}

}  // namespace

void collect_size_classes(StatsGroup group, const std::vector<store::SizeClassStats>& classes,
                          StatList& out) {
  uint64_t active = 0;
  uint64_t malloced = 0;
  for (const store::SizeClassStats& c : classes) {
    if (c.number == 0) continue;
    ++active;
    malloced += c.allocated;
    if (group == StatsGroup::kItems) collect_items(c, out);
    if (group == StatsGroup::kSlabs) collect_slabs(c, out);
    // A histogram by allocator class, not memcached's 32-byte buckets.
    if (group == StatsGroup::kSizes)
      out.emplace_back(std::to_string(c.chunk_size), std::to_string(c.number));
  }
  if (group == StatsGroup::kSlabs) {
    out.emplace_back("active_slabs", std::to_string(active));
    out.emplace_back("total_malloced", std::to_string(malloced));
  }
}

}  // namespace lockcached::core
