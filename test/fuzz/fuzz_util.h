// Helpers shared by the libFuzzer harnesses of test/fuzz: the input format
// (a header byte, protocol bytes, and in-band directives), a deterministic
// PRNG derived from the input, output draining, and a failure report that
// libFuzzer records as a crash.
//
// Input format (see README.md):
//   byte 0      header: bits 0-1 a harness-specific config (store size),
//               bits 2-4 the chunking mode, bit 5 partial output drains,
//               bit 6 bounded continue_work() steps, bit 7 harness-specific.
//   bytes 1..   protocol bytes, interrupted by directives: 0xFF followed by
//               an op letter the harness knows (some take one argument
//               byte). 0xFF 0xFF is one literal 0xFF; 0xFF followed by
//               anything else is delivered literally.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lockcached/core/auth.h"
#include "lockcached/protocol/handler.h"
#include "lockcached/protocol/output_queue.h"

namespace lockcached::fuzz {

constexpr uint8_t kDirective = 0xFF;

// Aborts with a message: libFuzzer reports it as a crash ("deadly signal")
// and saves the input.
[[noreturn]] inline void fail(const char* file, int line, const char* what) {
  std::fprintf(stderr, "FUZZ INVARIANT FAILED at %s:%d: %s\n", file, line, what);
  std::abort();
}

#define FUZZ_CHECK(cond)                                              \
  do {                                                                \
    if (!(cond)) ::lockcached::fuzz::fail(__FILE__, __LINE__, #cond); \
  } while (0)

// LOCKCACHED_FUZZ_TRACE=1 prints every chunk fed, every reply drained and
// every directive to stderr: for reading what a reproducer does.
inline bool trace_enabled() {
  static const bool enabled = std::getenv("LOCKCACHED_FUZZ_TRACE") != nullptr;
  return enabled;
}

inline void trace(const char* what, int slot, std::string_view bytes) {
  if (!trace_enabled()) return;
  std::string shown;
  for (unsigned char c : bytes) {
    if (c == '\n') {
      shown += "\\n\n      ";
    } else if (c == '\r') {
      shown += "\\r";
    } else if (c < 0x20 || c >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      shown += hex;
    } else {
      shown.push_back(static_cast<char>(c));
    }
  }
  std::fprintf(stderr, "[%c] %s %s\n", slot < 0 ? '-' : 'A' + slot, what, shown.c_str());
}

// splitmix64: tiny, deterministic, good enough to pick chunk sizes.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform-ish in [0, bound); 0 when bound is 0.
  uint64_t below(uint64_t bound) { return bound == 0 ? 0 : next() % bound; }

 private:
  uint64_t state_;
};

struct Header {
  explicit Header(uint8_t byte)
      : config(byte & 3),
        chunk_mode((byte >> 2) & 7),
        partial_drains((byte >> 5) & 1),
        bounded_steps((byte >> 6) & 1),
        extra((byte >> 7) & 1) {}
  unsigned config;
  unsigned chunk_mode;  // 0: each segment whole; 1: byte by byte; else random sizes
  bool partial_drains;  // drain a random part of the output after each chunk
  bool bounded_steps;   // continue_work() a few steps per chunk, not to the end
  bool extra;
};

// Largest chunk for each chunk mode (0: the whole segment at once).
inline size_t max_chunk(unsigned mode) {
  static constexpr size_t kMax[8] = {0, 1, 2, 4, 7, 16, 64, 512};
  return kMax[mode & 7];
}

// Splits the input after the header into byte segments and directives.
// `ops` are the op letters the harness knows; those in `ops_with_arg` take
// the next byte as their argument (0 when the input ends first).
template <typename OnBytes, typename OnOp>
void parse_script(const uint8_t* data, size_t size, std::string_view ops,
                  std::string_view ops_with_arg, OnBytes on_bytes, OnOp on_op) {
  std::string segment;
  size_t i = 1;  // byte 0 is the header
  while (i < size) {
    uint8_t c = data[i];
    if (c != kDirective) {
      segment.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    if (i + 1 < size && data[i + 1] == kDirective) {
      segment.push_back(static_cast<char>(kDirective));
      i += 2;
      continue;
    }
    char op = i + 1 < size ? static_cast<char>(data[i + 1]) : '\0';
    if (op == '\0' || ops.find(op) == std::string_view::npos) {
      segment.push_back(static_cast<char>(kDirective));  // literal; `op` follows as data
      ++i;
      continue;
    }
    if (!segment.empty()) {
      on_bytes(std::string_view(segment));
      segment.clear();
    }
    uint8_t arg = 0;
    i += 2;
    if (ops_with_arg.find(op) != std::string_view::npos && i < size) arg = data[i++];
    on_op(op, arg);
  }
  if (!segment.empty()) on_bytes(std::string_view(segment));
}

// Calls on_chunk for consecutive pieces of `bytes`, sized by the chunk mode.
template <typename OnChunk>
void for_each_chunk(std::string_view bytes, unsigned chunk_mode, Rng& rng, OnChunk on_chunk) {
  size_t largest = max_chunk(chunk_mode);
  while (!bytes.empty()) {
    size_t n = largest == 0 ? bytes.size() : 1 + rng.below(largest);
    if (n > bytes.size()) n = bytes.size();
    on_chunk(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
}

// What the client of one connection has read so far, checked for framing:
// text replies (kLines) always end in CRLF once the queue is empty; binary
// replies (kBinary) are whole, well-formed response frames.
class ReplyStream {
 public:
  enum class Kind { kLines, kBinary };
  explicit ReplyStream(Kind kind) : kind_(kind) {}

  void add(const unsigned char* bytes, size_t n) {
    if (n == 0) return;
    if (kind_ == Kind::kLines) {
      for (size_t i = 0; i < n; ++i) {
        last_[0] = last_[1];
        last_[1] = bytes[i];
      }
      seen_ = true;
      return;
    }
    partial_.append(reinterpret_cast<const char*>(bytes), n);
    size_t pos = 0;
    while (partial_.size() - pos >= 24) {
      const unsigned char* h = reinterpret_cast<const unsigned char*>(partial_.data() + pos);
      uint8_t opcode = h[1];
      size_t key_length = size_t{h[2]} << 8 | h[3];
      size_t extras_length = h[4];
      unsigned status = unsigned{h[6]} << 8 | h[7];
      size_t body = size_t{h[8]} << 24 | size_t{h[9]} << 16 | size_t{h[10]} << 8 | h[11];
      FUZZ_CHECK(h[0] == 0x81);  // response magic
      FUZZ_CHECK(h[5] == 0);     // data type
      FUZZ_CHECK(extras_length + key_length <= body);
      // 0x20: authentication required or refused (the Y directive).
      FUZZ_CHECK(status <= 0x06 || status == 0x10 || status == 0x11 || status == 0x20 ||
                 status == 0x81 || status == 0x82);
      if (status == 0) {
        switch (opcode) {
          case 0x00:
          case 0x09:
          case 0x0c:
          case 0x0d:  // get
          case 0x1c:
          case 0x1d:
          case 0x1e:
          case 0x23:
          case 0x24:  // touch, gat
          case 0x46:
          case 0x47:
          case 0x48:
          case 0x49:                         // lock and get
            FUZZ_CHECK(extras_length == 4);  // the flags
            break;
          case 0x05:
          case 0x06:
          case 0x15:
          case 0x16:  // incr, decr
            FUZZ_CHECK(extras_length == 0 && key_length == 0 && body == 8);
            break;
          default:
            break;
        }
      } else {
        FUZZ_CHECK(extras_length == 0);
      }
      if (partial_.size() - pos < 24 + body) break;
      pos += 24 + body;
    }
    partial_.erase(0, pos);
  }

  // The connection's queue is empty: every reply so far was complete.
  void at_rest() {
    if (kind_ == Kind::kLines) {
      FUZZ_CHECK(!seen_ || (last_[0] == '\r' && last_[1] == '\n'));
    } else {
      FUZZ_CHECK(partial_.empty());
    }
  }

  // The client hung up: what it had not read is gone.
  void reset() {
    partial_.clear();
    seen_ = false;
    last_[0] = last_[1] = 0;
  }

 private:
  Kind kind_;
  std::string partial_;  // kBinary: the start of a frame not fully read yet
  unsigned char last_[2] = {0, 0};
  bool seen_ = false;
};

// Reads what a socket would be handed, the way Connection::flush does
// (gather up to 64 iovecs, "send" some, consume): every byte is read so
// that ASan sees a reply that points into freed item memory.
inline uint64_t g_output_checksum = 0;

// `handler` may be mid-reply (a `lru_crawler metadump` walked in steps,
// whose lines end in a bare newline, as memcached's): the queue may then run
// empty between two of its lines.
inline void drain(protocol::OutputQueue& out, size_t budget, int slot, ReplyStream& stream,
                  const protocol::ProtocolHandler& handler) {
  while (budget > 0 && !out.empty()) {
    iovec iov[64];
    int count = out.gather(iov, 64);
    FUZZ_CHECK(count > 0);
    size_t sent = 0;
    for (int i = 0; i < count && sent < budget; ++i) {
      FUZZ_CHECK(iov[i].iov_len > 0);
      size_t take = iov[i].iov_len;
      if (take > budget - sent) take = budget - sent;
      const unsigned char* bytes = static_cast<const unsigned char*>(iov[i].iov_base);
      for (size_t j = 0; j < take; ++j)
        g_output_checksum = g_output_checksum * 131 + bytes[j];
      stream.add(bytes, take);
      trace("<<", slot, {reinterpret_cast<const char*>(bytes), take});
      sent += take;
    }
    FUZZ_CHECK(sent <= out.pending());
    out.consume(sent);
    budget -= sent;
  }
  if (out.empty() && !handler.has_unfinished_work()) stream.at_rest();
}

// The users of every harness's `Y` directive (memcached's -Y): one table for
// the process, as the server's, so an input only chooses whether to use it.
inline const core::Authenticator& authenticator() {
  static const core::Authenticator* users = [] {
    auto* made = new core::Authenticator;
    made->replace({{"alice", "secret"}, {"bob", "hunter2"}});
    return made;
  }();
  return *users;
}

inline void drain_all(protocol::OutputQueue& out, int slot, ReplyStream& stream,
                      const protocol::ProtocolHandler& handler) {
  drain(out, ~size_t{0}, slot, stream, handler);
  FUZZ_CHECK(out.empty() && out.pending() == 0);
}

// After each chunk: everything, or a random part (possibly nothing), so that
// replies referring to items outlive later commands on the same items.
inline void drain_some(protocol::OutputQueue& out, int slot, ReplyStream& stream,
                       const protocol::ProtocolHandler& handler, const Header& header, Rng& rng) {
  if (!header.partial_drains) return drain_all(out, slot, stream, handler);
  drain(out, rng.below(out.pending() + 1), slot, stream, handler);
}

}  // namespace lockcached::fuzz
