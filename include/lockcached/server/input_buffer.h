// A connection's input on its way to the protocol: where the next bytes
// land, and the start of a request that has not fully arrived.
//
// Reads land in the worker's scratch buffer (or, on io_uring, stay in the
// reactor's receive buffer) and only what the protocol leaves of them is
// copied here, so an idle connection holds no input buffer at all.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

namespace lockcached::server {

// Where the next bytes may go: `size` bytes at `data`.
struct InputRoom {
  char* data;
  size_t size;
};

class InputBuffer {
 public:
  // The least capacity of a kept request: a few more reads' worth.
  static constexpr size_t kMinCapacity = 4096;

  // `scratch`: the worker's buffer, shared by its connections, where bytes
  // land while nothing is kept.
  InputBuffer(char* scratch, size_t scratch_size) : scratch_(scratch), scratch_size_(scratch_size) {}
  InputBuffer(const InputBuffer&) = delete;
  InputBuffer& operator=(const InputBuffer&) = delete;

  // Nothing kept (and no buffer held).
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  std::string_view kept() const { return {data_.get(), size_}; }

  // Where the next bytes go: the scratch buffer while nothing is kept, else
  // after the kept bytes, with at least `min_room` there. Asking twice for
  // the same room gives the same place.
  InputRoom room(size_t min_room) {
    if (size_ == 0) return {scratch_, scratch_size_};
    reserve(min_room);
    return {data_.get() + size_, capacity_ - size_};
  }
  // Adds `bytes` after the kept ones: a copy, unless they already landed
  // there (in room()).
  void append(std::string_view bytes);
  // Keeps what the protocol left unconsumed for the next read: `rest` is
  // the tail of kept() where something was kept, else of bytes elsewhere.
  // Inline for the usual case, on every read: the requests were whole.
  void keep(std::string_view rest) {
    if (rest.empty()) {
      data_.reset();
      size_ = capacity_ = 0;
    } else {
      keep_some(rest);
    }
  }

 private:
  void keep_some(std::string_view rest);
  // Room for `min_room` more bytes after the kept ones.
  void reserve(size_t min_room);

  char* const scratch_;
  const size_t scratch_size_;
  // Held only while something is kept.
  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace lockcached::server
