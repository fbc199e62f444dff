#include "lockcached/server/input_buffer.h"

#include <algorithm>
#include <cstring>

namespace lockcached::server {

void InputBuffer::append(std::string_view bytes) {
  if (bytes.empty()) return;
  if (bytes.data() != data_.get() + size_) {
    reserve(bytes.size());
    std::memcpy(data_.get() + size_, bytes.data(), bytes.size());
  }
  size_ += bytes.size();
}

void InputBuffer::keep_some(std::string_view rest) {
  if (size_ == 0) {  // `rest` is elsewhere: the scratch or a receive's buffer
    capacity_ = std::max(rest.size() * 2, kMinCapacity);
    data_ = std::make_unique<char[]>(capacity_);
  }
  std::memmove(data_.get(), rest.data(), rest.size());
  size_ = rest.size();
}

void InputBuffer::reserve(size_t min_room) {
  if (capacity_ - size_ >= min_room) return;
  size_t capacity = std::max(capacity_ * 2, size_ + min_room);
  auto grown = std::make_unique<char[]>(capacity);
  if (size_ > 0) std::memcpy(grown.get(), data_.get(), size_);
  data_ = std::move(grown);
  capacity_ = capacity;
}

}  // namespace lockcached::server
