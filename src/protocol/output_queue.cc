#include "lockcached/protocol/output_queue.h"

#include <charconv>

namespace lockcached::protocol {
namespace {

constexpr size_t kCopyBelow = 512;
// Copies stop once this much is buffered: a multi-get naming one small value
// 100,000 times must cost a reference each, not 100,000 copies of it.
constexpr size_t kMaxCopiedBytes = 256 * 1024;
// A queue that once held a huge reply gives the memory back when it drains.
constexpr size_t kKeepCapacity = 64 * 1024;

}  // namespace

void OutputQueue::append(std::string_view bytes) {
  if (bytes.empty()) return;
  if (!segments_.empty() && segments_.back().item == nullptr &&
      segments_.back().offset + segments_.back().length == buffer_.size()) {
    segments_.back().length += bytes.size();
  } else {
    segments_.push_back({buffer_.size(), bytes.size(), nullptr});
  }
  buffer_.append(bytes);
  pending_ += bytes.size();
}

void OutputQueue::append_number(uint64_t value) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  append({digits, static_cast<size_t>(end - digits)});
}

void OutputQueue::append_item(store::Item* item, const char* data, size_t length) {
  if (length < kCopyBelow && buffer_.size() < kMaxCopiedBytes) {
    append({data, length});
    return;
  }
  item->refs.fetch_add(1, std::memory_order_relaxed);
  auto base = reinterpret_cast<const char*>(item);
  segments_.push_back({static_cast<size_t>(data - base), length, item});
  pending_ += length;
}

const char* OutputQueue::segment_data(const Segment& segment) const {
  const char* base = segment.item ? reinterpret_cast<const char*>(segment.item) : buffer_.data();
  return base + segment.offset;
}

int OutputQueue::gather(iovec* iov, int max) const {
  int count = 0;
  size_t skip = head_offset_;
  for (size_t i = head_; i < segments_.size() && count < max; ++i, skip = 0) {
    iov[count].iov_base = const_cast<char*>(segment_data(segments_[i]) + skip);
    iov[count].iov_len = segments_[i].length - skip;
    ++count;
  }
  return count;
}

void OutputQueue::consume(size_t bytes) {
  pending_ -= bytes;
  while (bytes > 0) {
    Segment& segment = segments_[head_];
    size_t left = segment.length - head_offset_;
    if (bytes < left) {
      head_offset_ += bytes;
      return;
    }
    bytes -= left;
    if (segment.item) store::item_release(segment.item);
    segment.item = nullptr;
    ++head_;
    head_offset_ = 0;
  }
  if (pending_ == 0) clear();
}

std::string OutputQueue::take_all() {
  std::string all;
  all.reserve(pending_);
  size_t skip = head_offset_;
  for (size_t i = head_; i < segments_.size(); ++i, skip = 0) {
    all.append(segment_data(segments_[i]) + skip, segments_[i].length - skip);
  }
  clear();
  return all;
}

void OutputQueue::clear() {
  for (size_t i = head_; i < segments_.size(); ++i) {
    if (segments_[i].item) store::item_release(segments_[i].item);
  }
  segments_.clear();
  buffer_.clear();
  if (buffer_.capacity() > kKeepCapacity) buffer_.shrink_to_fit();
  if (segments_.capacity() > kKeepCapacity / sizeof(Segment)) segments_.shrink_to_fit();
  head_ = head_offset_ = 0;
  pending_ = 0;
}

}  // namespace lockcached::protocol
