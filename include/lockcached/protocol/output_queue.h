// Replies waiting to be sent: bytes the protocol formatted, and references to
// item memory that is sent straight from the item (no copy of large values).
// The connection turns it into iovecs for one writev; no socket in here.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockcached/store/item.h"

namespace lockcached::protocol {

class OutputQueue {
 public:
  OutputQueue() = default;
  OutputQueue(const OutputQueue&) = delete;
  OutputQueue& operator=(const OutputQueue&) = delete;
  ~OutputQueue() { clear(); }

  void append(std::string_view bytes);
  void append_number(uint64_t value);
  // Sends [data, data+length) from inside `item`, keeping it alive until sent.
  // Small ranges are copied (cheaper than a reference and an iovec) while
  // the copy buffer is small; beyond that everything is referenced, so one
  // request cannot make the queue copy a value thousands of times.
  void append_item(store::Item* item, const char* data, size_t length);

  bool empty() const { return pending_ == 0; }
  size_t pending() const { return pending_; }

  // Describes up to `max` unsent pieces, in order; returns how many.
  int gather(iovec* iov, int max) const;
  // The first `bytes` of what gather described were sent.
  void consume(size_t bytes);
  // Everything unsent as one string; empties the queue (tests, diagnostics).
  std::string take_all();
  void clear();

 private:
  struct Segment {
    size_t offset;  // into buffer_, or into the item's memory
    size_t length;
    store::Item* item;  // null: the bytes are in buffer_
  };
  const char* segment_data(const Segment& segment) const;

  std::string buffer_;
  std::vector<Segment> segments_;
  size_t head_ = 0;         // first unsent segment
  size_t head_offset_ = 0;  // bytes of it already sent
  size_t pending_ = 0;
};

}  // namespace lockcached::protocol
