// Requests as bytes, and replies checked against what was asked: text and
// binary memcached protocols, the locking extension, the named-lock service.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "buffer.h"
#include "keys.h"
#include "options.h"

namespace loadgen {

enum class Op : uint8_t {
  kGet,  // one key, or `width` keys (multi-get)
  kSet,
  kLock,       // the cache's lock (text "lock", binary Lock 0x40)
  kUnlock,     // text "unlock" (binary cycles end with RaU instead)
  kRaU,        // binary replace-and-unlock 0x4a
  kSvcLock,    // named-lock service "lock NAME [SECONDS]"
  kSvcUnlock,  // named-lock service "unlock NAME"
  kVersion,
  kSetup,  // once per connection before the run: etcd's lease grant, Redis's SCRIPT LOAD
};

// What a connection keeps between requests of the etcd and Redis lock APIs.
// Its strings are assigned in place, so after the first cycle no request
// allocates.
struct Session {
  std::string token;  // Redis: this connection's lock value (compare-and-delete checks it)
  std::string setup;  // what kSetup's reply gave: etcd's lease ID, Redis's script SHA1
  std::string held;   // etcd: the key its lock call returned, which unlock names
};

struct Request {
  Op op = Op::kGet;
  uint32_t width = 1;
  uint64_t key = 0;     // the key, or the first key's slot for a multi-get
  uint32_t opaque = 0;  // binary: the opaque the reply must carry
  int64_t sent_ns = 0;
  const Session* session = nullptr;  // etcd and Redis: the connection's
};

enum class Verdict : uint8_t {
  kOk,
  kError,      // the server refused or failed the request
  kMismatch,   // a well-formed reply with the wrong key, value or opaque
  kMalformed,  // not a reply at all: the stream cannot be followed any more
};

struct Reply {
  size_t consumed = 0;  // 0: the reply is not complete yet
  size_t need = 0;      // when incomplete: its full length, if the bytes so far tell
  Verdict verdict = Verdict::kOk;
  uint32_t hits = 0;
  uint32_t misses = 0;
  bool retry = false;        // Redis: the name is held, send the lock again
  std::string_view token{};  // etcd and Redis: what the session keeps (Session)
};

class Codec {
 public:
  explicit Codec(const Options& options);

  const KeyFormat& keys() const { return keys_; }
  const KeyFormat& hot_names() const { return hot_names_; }

  // True when every connection sends Op::kSetup once before the run.
  bool needs_setup() const { return protocol_ == Protocol::kEtcd || protocol_ == Protocol::kRedis; }

  // Appends the request; `multi` holds the keys of a multi-get.
  void write(const Request& request, const uint64_t* multi, Buffer& out) const;

  // Checks the reply to `request` at the start of [data, data + size).
  Reply parse(const Request& request, const uint64_t* multi, const char* data, size_t size) const;

 private:
  void write_text(const Request& request, const uint64_t* multi, Buffer& out) const;
  void write_binary(const Request& request, const uint64_t* multi, Buffer& out) const;
  void write_key(const KeyFormat& format, uint64_t key, Buffer& out) const;
  void write_lock_api(const Request& request, Buffer& out) const;
  void write_value(uint64_t key, Buffer& out) const;
  void write_header(uint8_t opcode, uint64_t key, uint8_t extras, size_t value, uint32_t opaque,
                    Buffer& out) const;

  Reply parse_text(const Request& request, const uint64_t* multi, const char* data,
                   size_t size) const;
  Reply parse_text_get(const Request& request, const uint64_t* multi, const char* data,
                       size_t size) const;
  Reply parse_binary(const Request& request, const uint64_t* multi, const char* data,
                     size_t size) const;
  Reply parse_binary_multiget(const Request& request, const uint64_t* multi, const char* data,
                              size_t size) const;
  Verdict check_value(uint64_t key, const char* data, size_t size) const;

  static constexpr size_t kMaxKey = 256;

  Protocol protocol_;
  std::string host_;  // etcd: the Host header
  KeyFormat keys_;
  KeyFormat hot_names_;
  std::string filler_;
  std::string set_suffix_;      // " 0 0 <size>\r\n"
  std::string lock_suffix_;     // "\r\n", or " <seconds>\r\n" for hot names
  const KeyFormat* svc_names_;  // distinct names (keys_) or hot names
};

}  // namespace loadgen
