// memcached's meta commands (mn, mg, ms, md, ma, me): the third parser over
// the command core. They arrive on text connections; TextProtocol hands
// their lines here and reads the data block of an ms for us.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lockcached/core/command_core.h"
#include "lockcached/protocol/output_queue.h"
#include "lockcached/protocol/text_parser.h"

namespace lockcached::protocol {

class MetaCommands {
 public:
  explicit MetaCommands(core::CommandCore& core) : core_(core) {}

  // What the text protocol must read after the line: an ms data block into
  // `item`, or `swallow` bytes of a refused one.
  struct DataBlock {
    store::ItemRef item;
    size_t swallow = 0;
  };

  // Executes a line whose command is two characters starting with 'm'.
  DataBlock execute(const Words& words, OutputQueue& out);
  // The pending ms's data block has arrived (CRLF already checked).
  void finish_set(const store::ItemRef& item, OutputQueue& out);

 private:
  // The flags of one meta request, parsed.
  struct Flags {
    bool base64 = false;
    bool quiet = false;
    bool value = false;
    bool no_bump = false;
    bool invalidate = false;
    bool has_cas = false;
    uint64_t cas = 0;
    bool has_ttl = false;
    int64_t ttl = 0;
    bool vivify = false;
    int64_t vivify_ttl = 0;
    int64_t recache_ttl = 0;
    uint32_t client_flags = 0;
    char mode = 0;
    uint64_t delta = 1;
    uint64_t initial = 0;
  };
  // The rows of meta_commands.cc's tables: a command by its second letter
  // (its handler, whether it writes), a flag by its letter (what it takes,
  // whether it makes an mg write).
  struct Command;
  struct FlagRule;
  static const Command* find_command(char letter);
  static const FlagRule& flag_rule(unsigned char letter);

  // The error line for the request's flags (from `first` on), or empty.
  // Decodes `key` in place for the b flag.
  static std::string_view parse_flags(const Words& words, size_t first, Flags& flags,
                                      std::string& key);
  // The checks mg, md and ma start with, in memcached's order: fills flags,
  // the (decoded) key and the O/k tokens to echo; returns the error line to
  // answer, or empty.
  static std::string_view parse_request(const Words& words, bool is_get, Flags& flags,
                                        std::string& key, std::string& echoed);
  // Appends what an O or k flag sends back (the opaque; the key, base64
  // with " b" for binary keys); false when an opaque is too long.
  static bool echo(std::string_view word, std::string_view key, bool base64, std::string& line);
  // echo() for each flag from `first` on, in request order.
  static bool append_echo(const Words& words, size_t first, std::string_view key, bool base64,
                          std::string& line);

  // Whether a replica must refuse this request (it would change the cache).
  static bool writes_on_replica(const Command& command, const Words& words);
  static DataBlock refuse_on_replica(const Command& command, const Words& words, OutputQueue& out);
  // The commands' one signature, for those that read no data block.
  template <void (MetaCommands::*kAnswer)(const Words&, OutputQueue&)>
  DataBlock without_data(const Words& words, OutputQueue& out) {
    (this->*kAnswer)(words, out);
    return {};
  }
  DataBlock noop(const Words& words, OutputQueue& out);
  void get(const Words& words, OutputQueue& out);
  DataBlock set(const Words& words, OutputQueue& out);
  void remove(const Words& words, OutputQueue& out);
  void arith(const Words& words, OutputQueue& out);
  void debug(const Words& words, OutputQueue& out);

  core::CommandCore& core_;
  // The ms whose data block is on its way.
  struct PendingSet {
    store::StoreCommand command = store::StoreCommand::kSet;
    Flags flags;
    std::string key;         // decoded
    std::string echo_words;  // the request's flags, re-split when answering
  } pending_;
};

}  // namespace lockcached::protocol
