// memcached's binary protocol (24-byte header, magic 0x80/0x81) with the
// locking opcodes of ../shared/specs/locking.md. Like TextProtocol it only
// parses and formats; CommandCore does the work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lockcached/core/command_core.h"
#include "lockcached/protocol/handler.h"
#include "lockcached/protocol/key_walk.h"

namespace lockcached::protocol {

namespace binary {

constexpr uint8_t kRequestMagic = 0x80;
constexpr uint8_t kResponseMagic = 0x81;
constexpr size_t kHeaderSize = 24;

enum Opcode : uint8_t {
  kGet = 0x00,
  kSet = 0x01,
  kAdd = 0x02,
  kReplace = 0x03,
  kDelete = 0x04,
  kIncrement = 0x05,
  kDecrement = 0x06,
  kQuit = 0x07,
  kFlush = 0x08,
  kGetQ = 0x09,
  kNoop = 0x0a,
  kVersion = 0x0b,
  kGetK = 0x0c,
  kGetKQ = 0x0d,
  kAppend = 0x0e,
  kPrepend = 0x0f,
  kStat = 0x10,
  kSetQ = 0x11,
  kAddQ = 0x12,
  kReplaceQ = 0x13,
  kDeleteQ = 0x14,
  kIncrementQ = 0x15,
  kDecrementQ = 0x16,
  kQuitQ = 0x17,
  kFlushQ = 0x18,
  kAppendQ = 0x19,
  kPrependQ = 0x1a,
  kVerbosity = 0x1b,
  kTouch = 0x1c,
  kGat = 0x1d,
  kGatQ = 0x1e,
  kGatK = 0x23,
  kGatKQ = 0x24,
  // The locking extension.
  kLock = 0x40,
  kLockQ = 0x41,
  kUnlock = 0x42,
  kUnlockQ = 0x43,
  kUnlockAll = 0x44,
  kUnlockAllQ = 0x45,
  kLaG = 0x46,
  kLaGQ = 0x47,
  kLaGK = 0x48,
  kLaGKQ = 0x49,
  kRaU = 0x4a,
  kRaUQ = 0x4b,
  // yrmcds's key dump: one reply per key, then an empty one.
  kKeys = 0x50,
};

enum Status : uint16_t {
  kSuccess = 0x00,
  kNotFound = 0x01,
  kExists = 0x02,
  kTooLarge = 0x03,
  kInvalid = 0x04,
  kNotStored = 0x05,
  kNonNumeric = 0x06,
  kLocked = 0x10,
  kNotLocked = 0x11,
  kUnknownCommand = 0x81,
  kOutOfMemory = 0x82,
};

struct Header {
  uint8_t magic;
  uint8_t opcode;
  uint16_t key_length;
  uint8_t extras_length;
  uint32_t body_length;
  uint32_t opaque;  // echoed as received, byte order untouched
  uint64_t cas;
};

Header decode_header(const char* bytes);

}  // namespace binary

class BinaryProtocol final : public ProtocolHandler {
 public:
  explicit BinaryProtocol(core::CommandCore& core) : core_(core) {}

  size_t consume(std::string_view input, OutputQueue& out) override;
  bool wants_close() const override { return close_; }
  bool has_unfinished_work() const override { return keys_.active(); }
  void continue_work(OutputQueue& out) override;

 private:
  enum class State : uint8_t { kHeader, kValue, kSwallow };

  // A request whose header, extras and key are in memory.
  struct Request {
    binary::Header header;
    std::string_view extras;
    std::string_view key;
  };

  void dispatch(const Request& request, OutputQueue& out);
  void start_value(const Request& request, OutputQueue& out);
  size_t fill_value(std::string_view input, OutputQueue& out);
  void finish_value(OutputQueue& out);

  void get(const Request& request, OutputQueue& out);
  void touch(const Request& request, OutputQueue& out);
  void remove(const Request& request, OutputQueue& out);
  void arith(const Request& request, OutputQueue& out);
  void flush(const Request& request, OutputQueue& out);
  void stat(const Request& request, OutputQueue& out);
  void lock(const Request& request, OutputQueue& out);
  void unlock(const Request& request, OutputQueue& out);
  void lock_and_get(const Request& request, OutputQueue& out);

  // A reply with the request's opcode and opaque.
  void respond(OutputQueue& out, const binary::Header& request, uint16_t status,
               std::string_view extras = {}, std::string_view key = {}, std::string_view value = {},
               uint64_t cas = 0);
  // A get-style hit: flags, optionally the key, the value from the item.
  void respond_item(OutputQueue& out, const binary::Header& request, const store::Item& item,
                    bool with_key, bool with_value);
  void respond_error(OutputQueue& out, const binary::Header& request, uint16_t status);
  // The request is malformed: say so and close, as memcached does.
  void protocol_error(OutputQueue& out, const binary::Header& request);
  void respond_store(OutputQueue& out, const binary::Header& request, store::StoreResult result);

  core::CommandCore& core_;
  State state_ = State::kHeader;
  bool close_ = false;
  // The storage request whose value is arriving (State::kValue).
  binary::Header value_header_{};
  store::ItemRef value_item_;
  size_t value_filled_ = 0;
  size_t swallow_left_ = 0;
  KeyWalk keys_;
  binary::Header keys_header_{};  // the Keys request being answered
};

}  // namespace lockcached::protocol
