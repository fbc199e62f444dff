// Replies waiting to be sent: bytes the protocol formatted, and references to
// item memory that is sent straight from the item (no copy of large values).
// The connection turns it into iovecs for one writev; no socket in here.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockcached/store/item.h"

namespace lockcached::protocol {

class OutputQueue {
 public:
  OutputQueue() = default;
  OutputQueue(const OutputQueue&) = delete;
  OutputQueue& operator=(const OutputQueue&) = delete;
  ~OutputQueue() { clear(); }

  // Every reply passes through here, so the common case is inline: a copy
  // into the byte buffer.
  void append(std::string_view bytes) {
    if (bytes.size() > capacity_ - size_) grow(bytes.size());
    if (!bytes.empty()) std::memcpy(bytes_.get() + size_, bytes.data(), bytes.size());
    size_ += bytes.size();
    pending_ += bytes.size();
  }
  void append_number(uint64_t value);
  // Room for up to `max` bytes at the end of the buffer, for a reply that is
  // cheaper to write in place than to put together elsewhere and copy;
  // commit(end) appends what was written up to `end`.
  char* reserve(size_t max) {
    if (max > capacity_ - size_) grow(max);
    return bytes_.get() + size_;
  }
  void commit(const char* end) {
    size_t written = static_cast<size_t>(end - (bytes_.get() + size_));
    size_ += written;
    pending_ += written;
  }
  // Sends [data, data+length) from inside `item`, keeping it alive until sent.
  // Small ranges are copied (cheaper than a reference and an iovec) while
  // the copy buffer is small; beyond that everything is referenced, so one
  // request cannot make the queue copy a value thousands of times.
  void append_item(store::Item* item, const char* data, size_t length) {
    if (copies(length)) {
      append({data, length});
    } else {
      append_reference(item, data, length);
    }
  }
  // Whether append_item copies `length` bytes (else it references them).
  bool copies(size_t length) const {
    return length < kCopyBelow && size_ - bytes_sent_ < kMaxCopiedBytes;
  }
  // A reference to item memory, whatever its length.
  void append_reference(store::Item* item, const char* data, size_t length);

  bool empty() const { return pending_ == 0; }
  size_t pending() const { return pending_; }

  // Describes up to `max` unsent pieces, in order; returns how many.
  int gather(iovec* iov, int max) const {
    if (!items_.empty()) return gather_with_items(iov, max);
    if (pending_ == 0 || max == 0) return 0;
    iov[0] = {bytes_.get() + bytes_sent_, pending_};
    return 1;
  }
  // The first `bytes` of what gather described were sent.
  void consume(size_t bytes) {
    if (bytes == pending_ && items_.empty() && capacity_ <= kKeepCapacity) {
      size_ = bytes_sent_ = pending_ = 0;  // all sent: the usual case
      return;
    }
    consume_slowly(bytes);
  }
  // Trades contents with `other` (io_uring: the queue being sent and the
  // one filling up behind it), without copying or moving a byte.
  void swap(OutputQueue& other) noexcept {
    std::swap(bytes_, other.bytes_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
    std::swap(bytes_sent_, other.bytes_sent_);
    items_.swap(other.items_);
    std::swap(head_, other.head_);
    std::swap(item_sent_, other.item_sent_);
    std::swap(pending_, other.pending_);
  }
  // Everything unsent as one string; empties the queue (tests, diagnostics).
  std::string take_all();
  void clear();
  // clear(), and the buffer goes back whatever its size (io_uring: the spare
  // of a connection's two queues, once it stops pipelining).
  void release_memory();

 private:
  // A range of item memory, sent after the first `at` bytes of the buffer
  // (and after the references before it).
  struct ItemRange {
    size_t at;
    const char* data;
    size_t length;
    store::Item* item;
  };

  // A queue that once held a huge reply gives the memory back when it drains.
  static constexpr size_t kKeepCapacity = 64 * 1024;
  static constexpr size_t kCopyBelow = 512;
  // Copies stop once this much is buffered: a multi-get naming one small
  // value 100,000 times must cost a reference each, not 100,000 copies of it.
  static constexpr size_t kMaxCopiedBytes = 256 * 1024;

  void grow(size_t more);
  int gather_with_items(iovec* iov, int max) const;
  void consume_slowly(size_t bytes);

  // The formatted bytes, in order; item ranges sit between them.
  std::unique_ptr<char[]> bytes_;
  size_t size_ = 0;
  size_t capacity_ = 0;
  size_t bytes_sent_ = 0;  // bytes_[0, bytes_sent_) are gone
  std::vector<ItemRange> items_;
  size_t head_ = 0;       // first item range not wholly sent
  size_t item_sent_ = 0;  // bytes of items_[head_] already sent
  size_t pending_ = 0;
};

}  // namespace lockcached::protocol
