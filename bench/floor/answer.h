// The floor server's answers, shared by its epoll and io_uring loops: every
// memcached request (text or binary) gets a fixed reply of the right shape,
// with no store behind it. A get is a hit with the value the load generator
// would have stored (bench/common/value.h), so that the bytes on the wire
// match a real hit; a storage command consumes its data block and answers
// STORED.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace floor_server {

// Replies appended one after the other: grows to the largest batch seen,
// then is reused (no zero-filling and no allocation per reply).
class Output {
 public:
  void clear() { size_ = 0; }
  const char* data() const { return bytes_.data(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  char* grow(size_t n) {
    if (bytes_.size() < size_ + n) bytes_.resize(2 * (size_ + n));
    char* at = bytes_.data() + size_;
    size_ += n;
    return at;
  }
  void append(std::string_view text) { std::memcpy(grow(text.size()), text.data(), text.size()); }
  void append(size_t n, char c) { std::memset(grow(n), c, n); }

 private:
  std::vector<char> bytes_;
  size_t size_ = 0;
};

// What to answer once the rest of a data block has been skipped.
enum class After { kNothing, kStored, kBinary };

// What one connection's request stream left between two reads.
struct Requests {
  std::string partial;  // an incomplete request left over from the last read
  size_t skip = 0;      // bytes of a data block still to come, never buffered
  After after = After::kNothing;
  char header[24] = {};  // the binary request whose body is being skipped
  bool closing = false;  // "quit" was read: answer nothing more, then close
};

class Answerer {
 public:
  explicit Answerer(size_t value_size);

  // Answers every complete request of [data, data + size) into `out`;
  // returns the bytes used (what is left is the start of a request).
  size_t consume(Requests& conn, const char* data, size_t size, Output& out);

  // Answers conn.partial followed by [data, data + size), keeping what is
  // left incomplete in conn.partial. Used in place when nothing was left
  // over, which is the common case.
  void answer(Requests& conn, const char* data, size_t size, Output& out);

 private:
  size_t consume_text(Requests& conn, const char* data, size_t size, Output& out);
  size_t consume_binary(Requests& conn, const char* data, size_t size, Output& out);
  size_t skip_data(Requests& conn, size_t available, Output& out);
  void reply_value(std::string_view key, bool with_cas, Output& out);
  void reply_binary(const char* request, std::string_view key, bool value, Output& out);

  std::string filler_;
  std::string value_header_;      // " 0 <size>\r\n" after "VALUE <key>"
  std::string value_header_cas_;  // the same for gets, with CAS 1
};

// The two loops; each runs until it fails (1).
int run_epoll(int listener, size_t value_size);
int run_uring(int listener, size_t value_size);

}  // namespace floor_server
