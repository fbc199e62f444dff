#include "lockcached/protocol/output_queue.h"

#include <algorithm>
#include <charconv>

namespace lockcached::protocol {
namespace {

constexpr size_t kMinCapacity = 1024;

}  // namespace

void OutputQueue::append_number(uint64_t value) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  append({digits, static_cast<size_t>(end - digits)});
}

void OutputQueue::append_reference(store::Item* item, const char* data, size_t length) {
  item->refs.fetch_add(1, std::memory_order_relaxed);
  items_.push_back({size_, data, length, item});
  pending_ += length;
}

// Moves the unsent bytes to the front of a buffer with room for `more`: a
// client that never lets the queue drain cannot make it grow without bound.
void OutputQueue::grow(size_t more) {
  const size_t unsent = size_ - bytes_sent_;
  const size_t needed = unsent + more;
  size_t capacity = std::max(capacity_, kMinCapacity);
  while (capacity < needed)
    capacity *= 2;
  if (capacity > capacity_) {
    auto grown = std::make_unique_for_overwrite<char[]>(capacity);
    if (unsent > 0) std::memcpy(grown.get(), bytes_.get() + bytes_sent_, unsent);
    bytes_ = std::move(grown);
    capacity_ = capacity;
  } else if (unsent > 0) {
    std::memmove(bytes_.get(), bytes_.get() + bytes_sent_, unsent);
  }
  // Item ranges already sent are dropped; the others move with the bytes.
  items_.erase(items_.begin(), items_.begin() + static_cast<ptrdiff_t>(head_));
  head_ = 0;
  for (ItemRange& range : items_)
    range.at -= bytes_sent_;
  size_ = unsent;
  bytes_sent_ = 0;
}

int OutputQueue::gather_with_items(iovec* iov, int max) const {
  int count = 0;
  size_t at = bytes_sent_;
  size_t skip = item_sent_;  // only the first range can be partly sent
  for (size_t i = head_; i < items_.size(); ++i, skip = 0) {
    const ItemRange& range = items_[i];
    if (range.at > at) {
      if (count == max) return count;
      iov[count++] = {bytes_.get() + at, range.at - at};
      at = range.at;
    }
    if (count == max) return count;
    iov[count++] = {const_cast<char*>(range.data + skip), range.length - skip};
  }
  if (size_ > at && count < max) iov[count++] = {bytes_.get() + at, size_ - at};
  return count;
}

void OutputQueue::consume_slowly(size_t bytes) {
  pending_ -= bytes;
  while (bytes > 0) {
    // Buffered bytes before the next item range (or to the end).
    size_t until = head_ < items_.size() ? items_[head_].at : size_;
    size_t take = std::min(bytes, until - bytes_sent_);
    bytes_sent_ += take;
    bytes -= take;
    if (bytes == 0) break;
    ItemRange& range = items_[head_];
    size_t left = range.length - item_sent_;
    if (bytes < left) {
      item_sent_ += bytes;
      break;
    }
    bytes -= left;
    store::item_release(range.item);
    range.item = nullptr;
    ++head_;
    item_sent_ = 0;
  }
  if (pending_ == 0) clear();
}

std::string OutputQueue::take_all() {
  std::string all;
  all.reserve(pending_);
  iovec iov[64];
  while (!empty()) {
    int count = gather(iov, 64);
    size_t taken = 0;
    for (int i = 0; i < count; ++i) {
      all.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
      taken += iov[i].iov_len;
    }
    consume(taken);
  }
  return all;
}

void OutputQueue::clear() {
  for (size_t i = head_; i < items_.size(); ++i)
    store::item_release(items_[i].item);
  items_.clear();
  head_ = item_sent_ = 0;
  size_ = bytes_sent_ = 0;
  pending_ = 0;
  if (capacity_ > kKeepCapacity) {
    bytes_.reset();
    capacity_ = 0;
  }
  if (items_.capacity() > kKeepCapacity / sizeof(ItemRange)) items_.shrink_to_fit();
}

void OutputQueue::release_memory() {
  clear();
  bytes_.reset();
  capacity_ = 0;
  std::vector<ItemRange>().swap(items_);
}

}  // namespace lockcached::protocol
