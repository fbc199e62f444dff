// A byte buffer that is reused for the whole run: appending and consuming
// move two offsets; memory is only allocated when a reply or request larger
// than anything seen so far needs it.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

namespace loadgen {

class Buffer {
 public:
  explicit Buffer(size_t capacity) : data_(capacity) {}

  const char* head() const { return data_.data() + begin_; }
  size_t size() const { return end_ - begin_; }
  bool empty() const { return begin_ == end_; }
  size_t room() const { return data_.size() - end_; }

  // Room for at least n more bytes at tail().
  void ensure(size_t n) {
    if (room() >= n) return;
    if (begin_ > 0) {
      std::memmove(data_.data(), head(), size());
      end_ -= begin_;
      begin_ = 0;
    }
    if (room() < n) data_.resize(std::max(2 * data_.size(), end_ + n));
  }
  char* tail() { return data_.data() + end_; }
  void commit(size_t n) { end_ += n; }

  void append(const void* bytes, size_t n) {
    ensure(n);
    std::memcpy(tail(), bytes, n);
    end_ += n;
  }
  void append(char c) { append(&c, 1); }

  void consume(size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }

 private:
  std::vector<char> data_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace loadgen
