// memcached's text protocol: parses request lines, calls the command core and
// formats the replies. It never touches a socket: bytes in, replies out.
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lockcached/core/command_core.h"
#include "lockcached/protocol/handler.h"
#include "lockcached/protocol/key_walk.h"
#include "lockcached/protocol/meta_commands.h"
#include "lockcached/protocol/read_ahead.h"
#include "lockcached/protocol/text_parser.h"

namespace lockcached::protocol {

// memcached closes a connection whose line grows past 2048 bytes without a
// newline, unless it is a multi-key get; we bound those too.
constexpr size_t kMaxLineLength = 2048;
constexpr size_t kMaxGetLineLength = 256 * 1024;
constexpr size_t kGetKeysPerStep = 1024;
// A get of up to this many keys is answered from the keys noted while they
// were checked, in one call to the store.
constexpr size_t kKeysNoted = 32;

class TextProtocol final : public ProtocolHandler {
 public:
  // The longest "user password" data block read; a longer one is refused.
  static constexpr size_t kMaxAuthData = 4096;

  explicit TextProtocol(core::CommandCore& core)
      : core_(core), budget_(core.policy().requests_per_event), meta_(core) {}

  size_t consume(std::string_view input, OutputQueue& out) override;
  bool wants_close() const override { return close_; }
  core::CloseReason close_reason() const override { return close_reason_; }
  bool has_unfinished_work() const override {
    return keys_.active() || items_.active() || !multi_get_.keys.empty() || budget_.yielded();
  }
  void continue_work(OutputQueue& out) override;
  bool reading_data() const override { return state_ != State::kLine; }

 private:
  // kAuthData: the data block of the `set` that authenticates (memcached's -Y).
  enum class State : uint8_t { kLine, kValue, kSwallow, kAuthData };

  // A command's row in the table of text_protocol.cc: name, handler and
  // whether a replica refuses it.
  struct Command;
  static const Command* find_command(std::string_view name);
  void execute(std::string_view line, OutputQueue& out);
  // Hangs up after what is queued, for a request memcached hangs up on.
  void close_for_error() {
    close_ = true;
    close_reason_ = core::CloseReason::kError;
  }
  // Appends text and CRLF unless the command said noreply.
  void reply(OutputQueue& out, std::string_view text);
  void refuse_on_replica(OutputQueue& out);
  void check_partial_line(std::string_view partial, OutputQueue& out);
  // Notes the gets among the lines of `input` from byte `from` on.
  static void note_gets(std::string_view input, size_t from, ReadAhead& read_ahead);
  // Before authenticating: only a `set` is read, its data being the token.
  void unauthenticated(std::string_view line, OutputQueue& out);
  size_t fill_auth_data(std::string_view input, OutputQueue& out);
  void finish_auth(OutputQueue& out);
  void auth_refused(core::AuthResult result, std::string_view reply, OutputQueue& out);

  // The commands' one signature, for those that take more.
  template <bool kWithCas, bool kTouch>
  void get_as(const Words& words, OutputQueue& out) {
    get(words, kWithCas, kTouch, out);
  }
  template <store::StoreCommand kCommand>
  void update_as(const Words& words, OutputQueue& out) {
    update(words, kCommand, out);
  }
  template <bool kIncrement>
  void arith_as(const Words& words, OutputQueue& out) {
    arith(words, kIncrement, out);
  }
  void version(const Words& words, OutputQueue& out);
  void unlock_all(const Words& words, OutputQueue& out);
  void quit(const Words& words, OutputQueue& out);

  void get(const Words& words, bool with_cas, bool touch, OutputQueue& out);
  // `keys`: the space-separated keys of a get, gets, gat or gats.
  void get_keys(std::string_view keys, bool with_cas, bool touch, int32_t exptime,
                OutputQueue& out);
  struct GetOptions {
    bool with_cas = false;
    bool touch = false;  // gat, gats
    int32_t exptime = 0;
  };
  size_t answer_keys(std::string_view keys, size_t from, const GetOptions& options,
                     OutputQueue& out);
  void answer_key(std::string_view key, const GetOptions& options, OutputQueue& out);
  void answer_noted_keys(const Words::Span* keys, size_t count, const GetOptions& options,
                         OutputQueue& out);
  void get_step(OutputQueue& out);
  void append_value(store::Item& item, bool with_cas, OutputQueue& out);
  void update(const Words& words, store::StoreCommand command, OutputQueue& out);
  void meta(const Words& words, OutputQueue& out);
  size_t fill_value(std::string_view input, OutputQueue& out);
  void finish_value(OutputQueue& out);
  void arith(const Words& words, bool increment, OutputQueue& out);
  void remove(const Words& words, OutputQueue& out);
  void touch(const Words& words, OutputQueue& out);
  void flush_all(const Words& words, OutputQueue& out);
  void keys(const Words& words, OutputQueue& out);
  void lock(const Words& words, OutputQueue& out);
  void unlock(const Words& words, OutputQueue& out);
  void watch(const Words& words, OutputQueue& out);
  void shutdown(const Words& words, OutputQueue& out);
  void verbosity(const Words& words, OutputQueue& out);
  void refresh_certs(const Words& words, OutputQueue& out);
  void cache_memlimit(const Words& words, OutputQueue& out);
  void stats(const Words& words, OutputQueue& out);
  void stats_detail(const Words& words, OutputQueue& out);
  void cachedump(const Words& words, OutputQueue& out);
  void lru_crawler(const Words& words, OutputQueue& out);
  void lru(const Words& words, OutputQueue& out);
  void dump_step(OutputQueue& out);

  core::CommandCore& core_;
  TurnBudget budget_;
  State state_ = State::kLine;
  bool noreply_ = false;
  // The look-ahead's note of the request now running, if it has one: a
  // pipelined get's key is then not hashed again (answer_key).
  const ReadAhead::Get* running_get_ = nullptr;
  // This request writes and this server is a replica: its data block is
  // skipped, then the request refused (update()).
  bool refuse_data_block_ = false;
  bool close_ = false;
  core::CloseReason close_reason_ = core::CloseReason::kNormal;
  // The storage command whose data block is arriving (State::kValue).
  store::ItemRef value_item_;
  store::StoreCommand value_command_ = store::StoreCommand::kSet;
  bool value_is_meta_ = false;  // an ms: MetaCommands answers it
  uint64_t value_cas_ = 0;
  size_t value_filled_ = 0;  // bytes of value and CRLF received so far
  size_t swallow_left_ = 0;  // bytes of a refused data block still to skip
  std::string auth_data_;    // State::kAuthData: what arrived of the block
  size_t auth_left_ = 0;     // and how much of it, with its CRLF, is to come
  KeyWalk keys_;
  // `stats cachedump` or `lru_crawler metadump`, listed a piece at a time.
  ItemWalk items_;
  struct ItemDump {
    bool metadump = false;
    std::bitset<store::kSizeClassCount + 1> classes;  // the ids to list
    uint32_t limit = 0;                               // cachedump; 0: all
    uint32_t shown = 0;
  } dump_;
  // A multi-get of more keys than one step answers (see get_step).
  struct MultiGet {
    std::string keys;  // the key list; empty when no get is in progress
    size_t next = 0;   // where the next step starts
    GetOptions options;
  } multi_get_;
  MetaCommands meta_;
};

}  // namespace lockcached::protocol
