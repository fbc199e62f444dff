// memcached's binary protocol (24-byte header, magic 0x80/0x81) with the
// locking opcodes of ../shared/specs/locking.md. Like TextProtocol it only
// parses and formats; CommandCore does the work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "lockcached/core/command_core.h"
#include "lockcached/protocol/binary_wire.h"
#include "lockcached/protocol/handler.h"
#include "lockcached/protocol/key_walk.h"
#include "lockcached/protocol/read_ahead.h"

namespace lockcached::protocol {

class BinaryProtocol final : public ProtocolHandler {
 public:
  // The longest SASL message read (PLAIN: authzid, user and password).
  static constexpr size_t kMaxSaslMessage = 4096;

  explicit BinaryProtocol(core::CommandCore& core)
      : core_(core), budget_(core.policy().requests_per_event) {}

  size_t consume(std::string_view input, OutputQueue& out) override;
  bool wants_close() const override { return close_; }
  bool has_unfinished_work() const override { return keys_.active() || budget_.yielded(); }
  void continue_work(OutputQueue& out) override;
  bool reading_data() const override { return state_ != State::kHeader; }

 private:
  enum class State : uint8_t { kHeader, kValue, kSwallow };
  // An opcode's row in the table of binary_protocol.cc: its handler, the
  // shape its request must have, whether it is quiet, writes, carries a value.
  struct OpInfo;
  static const OpInfo& op(uint8_t opcode);

  // A request whose header, extras and key are in memory.
  struct Request {
    binary::Header header;
    std::string_view extras;
    std::string_view key;
    std::string_view value;  // empty for the opcodes whose value goes into an item
    // The key's hash, when the look-ahead noted this get (ReadAhead).
    std::optional<uint64_t> key_hash;
  };


  // Notes the pipelined gets after the first request of `input`.
  void note_gets(std::string_view input, ReadAhead& read_ahead) const;
  void dispatch(const Request& request, OutputQueue& out);
  void start_value(const Request& request, OutputQueue& out);
  size_t fill_value(std::string_view input, OutputQueue& out);
  void finish_value(OutputQueue& out);

  void quit(const Request& request, OutputQueue& out);
  void noop(const Request& request, OutputQueue& out);
  void version(const Request& request, OutputQueue& out);
  void verbosity(const Request& request, OutputQueue& out);
  void unlock_all(const Request& request, OutputQueue& out);
  void keys(const Request& request, OutputQueue& out);
  void get(const Request& request, OutputQueue& out);
  void touch(const Request& request, OutputQueue& out);
  void remove(const Request& request, OutputQueue& out);
  void arith(const Request& request, OutputQueue& out);
  void flush(const Request& request, OutputQueue& out);
  void stat(const Request& request, OutputQueue& out);
  void stat_detail(std::string_view what, const binary::Header& h, OutputQueue& out);
  void lock(const Request& request, OutputQueue& out);
  void unlock(const Request& request, OutputQueue& out);
  void lock_and_get(const Request& request, OutputQueue& out);
  void sasl(const Request& request, OutputQueue& out);
  // Answers `status` and skips the request's body without buffering it.
  void refuse(OutputQueue& out, const binary::Header& header, uint16_t status);

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
  // `status`: a success (unless the opcode is quiet) or a failure with its text.
  void respond_status(OutputQueue& out, const binary::Header& request, uint16_t status);
  // Not found: with the key for the opcodes that answer with it.
  void respond_miss(OutputQueue& out, const Request& request);

  core::CommandCore& core_;
  TurnBudget budget_;
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
