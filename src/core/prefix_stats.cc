#include "lockcached/core/prefix_stats.h"

namespace lockcached::core {

void PrefixStats::add(std::string_view key, uint64_t gets, uint64_t hits, uint64_t sets,
                      uint64_t deletes) {
  size_t end = key.find(delimiter_);
  if (end == std::string_view::npos) return;
  std::string prefix(key.substr(0, end));
  std::lock_guard lock(mutex_);
  auto found = index_.find(prefix);
  if (found == index_.end()) {
    if (lines_.size() >= kMaxPrefixes) return;
    found = index_.emplace(prefix, lines_.size()).first;
    lines_.push_back({std::move(prefix), {}});
  }
  PrefixCounts& counts = lines_[found->second].counts;
  counts.gets += gets;
  counts.hits += hits;
  counts.sets += sets;
  counts.deletes += deletes;
}

std::vector<PrefixLine> PrefixStats::dump() const {
  std::lock_guard lock(mutex_);
  return lines_;
}

std::string PrefixStats::dump_text() const {
  std::string text;
  for (const PrefixLine& line : dump()) {
    text += "PREFIX ";
    text += line.prefix;
    for (auto [name, count] : {std::pair{" get ", line.counts.gets},
                               {" hit ", line.counts.hits},
                               {" set ", line.counts.sets},
                               {" del ", line.counts.deletes}}) {
      text += name;
      text += std::to_string(count);
    }
    text += "\r\n";
  }
  return text + "END\r\n";
}

void PrefixStats::clear() {
  std::lock_guard lock(mutex_);
  index_.clear();
  lines_.clear();
}

}  // namespace lockcached::core
