#include "lockcached/protocol/text_protocol.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>

#include <glog/logging.h>

#include "lockcached/core/uri_encode.h"
#include "lockcached/core/verbosity.h"
#include "lockcached/protocol/base64.h"
#include "lockcached/store/crawler.h"
#include "lockcached/version.h"

namespace lockcached::protocol {
namespace {

using store::StoreCommand;

constexpr std::string_view kBadFormat = "CLIENT_ERROR bad command line format";
constexpr std::string_view kBadExptime = "CLIENT_ERROR invalid exptime argument";
constexpr size_t kMaxLeadingSpaces = 100;
// memcached refuses a data length it could not add the CRLF to.
constexpr int32_t kMaxDataLength = INT32_MAX - 2;

// Whether a command changes the cache, so that a replica refuses it.
enum class Writes : uint8_t {
  kYes,        // refused before it runs
  kDataBlock,  // a storage command: refused once its data block is skipped
  kNo,
};

bool is_multiget_prefix(std::string_view line) {
  for (std::string_view prefix : {"get ", "gets ", "gat ", "gats "}) {
    if (line.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

// The text after `word`, which must point into `line`.
std::string_view text_after(std::string_view line, std::string_view word) {
  return line.substr(static_cast<size_t>(word.data() + word.size() - line.data()));
}

}  // namespace

// One command's row: its name, its handler, and whether it writes. Deny by
// default: a command not marked as a read is refused on a replica.
struct TextProtocol::Command {
  std::string_view name;
  void (TextProtocol::*handler)(const Words& words, OutputQueue& out);
  Writes writes = Writes::kYes;

  static constexpr std::array<Command, 30> table();
};

// Sorted by name (find_command looks them up by their first letter). The
// meta commands are MetaCommands' own (meta()).
constexpr std::array<TextProtocol::Command, 30> TextProtocol::Command::table() {
  using T = TextProtocol;
  using store::StoreCommand;
  return {{
      {"add", &T::update_as<StoreCommand::kAdd>, Writes::kDataBlock},
      {"append", &T::update_as<StoreCommand::kAppend>, Writes::kDataBlock},
      {"bget", &T::get_as<false, false>, Writes::kNo},
      {"cache_memlimit", &T::cache_memlimit, Writes::kNo},  // this server's own memory
      {"cas", &T::update_as<StoreCommand::kCas>, Writes::kDataBlock},
      {"decr", &T::arith_as<false>},
      {"delete", &T::remove},
      {"flush_all", &T::flush_all},
      {"gat", &T::get_as<false, true>},
      {"gats", &T::get_as<true, true>},
      {"get", &T::get_as<false, false>, Writes::kNo},
      {"gets", &T::get_as<true, false>, Writes::kNo},
      {"incr", &T::arith_as<true>},
      {"keys", &T::keys, Writes::kNo},
      {"lock", &T::lock},
      {"lru", &T::lru, Writes::kNo},
      {"lru_crawler", &T::lru_crawler, Writes::kNo},
      {"prepend", &T::update_as<StoreCommand::kPrepend>, Writes::kDataBlock},
      {"quit", &T::quit, Writes::kNo},
      {"refresh_certs", &T::refresh_certs, Writes::kNo},
      {"replace", &T::update_as<StoreCommand::kReplace>, Writes::kDataBlock},
      {"set", &T::update_as<StoreCommand::kSet>, Writes::kDataBlock},
      {"shutdown", &T::shutdown, Writes::kNo},
      {"stats", &T::stats, Writes::kNo},
      {"touch", &T::touch},
      {"unlock", &T::unlock},
      {"unlock_all", &T::unlock_all},
      {"verbosity", &T::verbosity, Writes::kNo},
      {"version", &T::version, Writes::kNo},
      {"watch", &T::watch, Writes::kNo},
  }};
}

namespace {

// Where each first letter's commands start in a table sorted by name: those
// of letter c are [first[c - 'a'], first[c - 'a' + 1]).
template <typename Table>
constexpr std::array<uint8_t, 27> first_by_letter(const Table& table) {
  std::array<uint8_t, 27> first{};
  size_t row = 0;
  for (size_t letter = 0; letter < 26; ++letter) {
    first[letter] = static_cast<uint8_t>(row);
    while (row < table.size() && static_cast<size_t>(table[row].name[0] - 'a') == letter)
      ++row;
  }
  first[26] = static_cast<uint8_t>(row);
  return first;
}

}  // namespace

const TextProtocol::Command* TextProtocol::find_command(std::string_view name) {
  static constexpr std::array kCommands = Command::table();
  static_assert(std::ranges::is_sorted(kCommands, {}, &Command::name));
  static constexpr std::array kFirst = first_by_letter(kCommands);
  static_assert(kFirst[26] == kCommands.size(), "every name starts with a lowercase letter");
  size_t letter = static_cast<unsigned char>(name[0]) - size_t{'a'};
  if (letter >= 26) return nullptr;
  for (size_t row = kFirst[letter]; row < kFirst[letter + 1]; ++row) {
    if (kCommands[row].name == name) return &kCommands[row];
  }
  return nullptr;
}

size_t TextProtocol::consume(std::string_view input, OutputQueue& out) {
  // A watcher (`watch`) takes no more requests; what it sends is dropped,
  // as memcached ignores it.
  if (core_.watcher()) return input.size();
  budget_.start_turn();
  ReadAhead read_ahead(core_);  // this read's: nothing kept between reads
  bool looked_ahead = false;
  size_t pos = 0;
  while (pos < input.size() && !close_ && !has_unfinished_work() && !core_.watcher()) {
    switch (state_) {
      case State::kValue:
        pos += fill_value(input.substr(pos), out);
        break;
      case State::kAuthData:
        pos += fill_auth_data(input.substr(pos), out);
        break;
      case State::kSwallow: {
        size_t skip = std::min(swallow_left_, input.size() - pos);
        pos += skip;
        swallow_left_ -= skip;
        if (swallow_left_ == 0) state_ = State::kLine;
        break;
      }
      case State::kLine: {
        // A get the look-ahead noted: its line's end is known.
        const ReadAhead::Get* noted = looked_ahead ? read_ahead.running(pos) : nullptr;
        const char* newline = noted ? input.data() + pos + noted->line_length
                                    : static_cast<const char*>(std::memchr(input.data() + pos, '\n',
                                                                           input.size() - pos));
        if (newline == nullptr) {
          check_partial_line(input.substr(pos), out);
          return close_ ? input.size() : pos;
        }
        if (!budget_.take(out)) break;  // the others on this thread, or the client, first
        size_t end = static_cast<size_t>(newline - input.data());
        size_t next = end + 1;
        // A get with more lines behind it: a pipeline of gets, likely (the
        // lines of a set's data block are not worth a look at depth 1).
        if (!looked_ahead && next < input.size() &&
            get_keys_start(input.substr(pos, end - pos)) > 0) {
          looked_ahead = true;
          note_gets(input, next, read_ahead);
          read_ahead.running(pos);  // fetches the first noted get's item
        }
        if (end - pos > 1 && input[end - 1] == '\r') --end;
        running_get_ = noted;
        execute(input.substr(pos, end - pos), out);
        running_get_ = nullptr;
        pos = next;
        break;
      }
    }
  }
  return close_ || core_.watcher() ? input.size() : pos;
}

void TextProtocol::note_gets(std::string_view input, size_t from, ReadAhead& read_ahead) {
  // Twice ReadAhead's gets: room for the sets and data blocks between them.
  constexpr size_t kMaxLines = 2 * ReadAhead::kMaxGets;
  auto note = [&read_ahead, from](size_t offset, size_t length, std::string_view key) {
    read_ahead.note(from + offset, key, length);
  };
  for_each_get_line(input.substr(from), kMaxLines, note);
}

void TextProtocol::check_partial_line(std::string_view partial, OutputQueue& out) {
  if (partial.size() <= kMaxLineLength) return;
  size_t start = std::min(partial.find_first_not_of(' '), partial.size());
  if (start <= kMaxLeadingSpaces && is_multiget_prefix(partial.substr(start)) &&
      partial.size() <= kMaxGetLineLength) {
    return;
  }
  out.append("CLIENT_ERROR line too long\r\n");
  close_for_error();
}

void TextProtocol::reply(OutputQueue& out, std::string_view text) {
  if (noreply_) return;
  out.append(text);
  out.append("\r\n");
}

// Even with noreply, as memcached's out_errstring: a write must never be
// lost without a word.
void TextProtocol::refuse_on_replica(OutputQueue& out) {
  noreply_ = false;
  reply(out, "SERVER_ERROR " + std::string(kReadOnlyReason));
}

void TextProtocol::execute(std::string_view line, OutputQueue& out) {
  // -vv, as memcached's: every request line, after the connection's id.
  LOCKCACHED_VLOG(2) << '<' << core_.owner() << ' ' << escape_for_log(line);
  noreply_ = false;
  if (core_.auth_required()) [[unlikely]] return unauthenticated(line, out);
  // The most frequent request skips the split into words: its keys are
  // walked as they are looked up anyway.
  if (get_keys_start(line) == 4 && line.find_first_not_of(' ', 4) != std::string_view::npos) {
    return get_keys(line.substr(4), false, false, 0, out);
  }
  Words words = split_words(line);
  if (words.count == 0 || words[0].size() < 2) return reply(out, "ERROR");
  std::string_view name = words[0];
  if (name.size() == 2 && name[0] == 'm') return meta(words, out);
  const Command* command = find_command(name);
  if (command == nullptr) {
    // A browser or HTTP probe pointed at the cache port: just hang up.
    if (words.last().substr(0, 5) == "HTTP/") return close_for_error();
    return reply(out, "ERROR");
  }
  refuse_data_block_ = false;
  if (core_.read_only() && command->writes != Writes::kNo) {
    if (command->writes == Writes::kYes) return refuse_on_replica(out);
    refuse_data_block_ = true;  // update() refuses once it knows the block's size
  }
  (this->*command->handler)(words, out);
}

void TextProtocol::version(const Words&, OutputQueue& out) {
  reply(out, "VERSION " LOCKCACHED_PROTOCOL_VERSION);
}

void TextProtocol::unlock_all(const Words&, OutputQueue& out) {
  core_.release_all_locks();
  reply(out, "OK");
}

void TextProtocol::quit(const Words&, OutputQueue&) {
  close_ = true;
}

// memcached's -Y: the first command must be a `set` (any key, flags and
// exptime) whose data block is "user password"; anything else, `quit`
// included, is answered CLIENT_ERROR unauthenticated (memcached 1.6.18's
// words). Nothing is stored, and noreply is ignored, as memcached does.
void TextProtocol::unauthenticated(std::string_view line, OutputQueue& out) {
  Words words = split_words(line);
  uint64_t length = 0;
  if (words.count < 5 || words[0] != "set" || !parse_u64(words[4], &length)) {
    return out.append("CLIENT_ERROR unauthenticated\r\n");
  }
  if (length > kMaxAuthData) {  // no user:password line is that long: skip it
    swallow_left_ = length + 2;
    state_ = State::kSwallow;
    return auth_refused(core_.auth_malformed(), "CLIENT_ERROR authentication failure", out);
  }
  auth_data_.clear();
  auth_left_ = length + 2;
  state_ = State::kAuthData;
}

size_t TextProtocol::fill_auth_data(std::string_view input, OutputQueue& out) {
  size_t take = std::min(auth_left_, input.size());
  auth_data_.append(input.substr(0, take));
  auth_left_ -= take;
  if (auth_left_ == 0) finish_auth(out);
  return take;
}

void TextProtocol::finish_auth(OutputQueue& out) {
  state_ = State::kLine;
  std::string data = std::move(auth_data_);
  auth_data_.clear();
  // memcached's words for a block without its CRLF (not "bad data chunk").
  if (!data.ends_with("\r\n")) {
    return out.append("CLIENT_ERROR bad command line termination\r\n");
  }
  data.resize(data.size() - 2);
  // memcached splits the block on spaces: the first two words count.
  Words token = split_words(data);
  if (token.count < 2) {
    return auth_refused(core_.auth_malformed(), "CLIENT_ERROR bad authentication token format",
                        out);
  }
  core::AuthResult result = core_.authenticate(token[0], token[1]);
  if (result == core::AuthResult::kAccepted) return out.append("STORED\r\n");
  auth_refused(result, "CLIENT_ERROR authentication failure", out);
}

// After the third failure the connection closes (memcached lets a client
// guess forever).
void TextProtocol::auth_refused(core::AuthResult result, std::string_view reply,
                                OutputQueue& out) {
  out.append(reply);
  out.append("\r\n");
  if (result == core::AuthResult::kLockedOut) close_for_error();
}

void TextProtocol::get(const Words& words, bool with_cas, bool touch, OutputQueue& out) {
  if (words.count < 2) return reply(out, "ERROR");
  int32_t exptime = 0;
  std::string_view keys = text_after(words.line, words[0]);
  if (touch) {
    if (!parse_i32(words[1], &exptime)) return reply(out, kBadExptime);
    keys = text_after(words.line, words[1]);
  }
  get_keys(keys, with_cas, touch, exptime, out);
}

void TextProtocol::get_keys(std::string_view keys, bool with_cas, bool touch, int32_t exptime,
                            OutputQueue& out) {
  // memcached answers only the error when any key is bad, so check first.
  // The first keys are noted on the way: a usual get or multi-get is then
  // answered without a second walk over its line.
  bool all_valid = true;
  size_t count = 0;
  Words::Span noted[kKeysNoted];  // [0, min(count, kKeysNoted)) are set
  for_each_word(keys, [&all_valid, &count, &noted](std::string_view key) {
    all_valid &= valid_key(key);
    if (count < kKeysNoted) noted[count] = {key.data(), key.size()};
    ++count;
  });
  if (!all_valid) return reply(out, kBadFormat);

  const GetOptions options{with_cas, touch, exptime};
  if (count == 1) {
    answer_key({noted[0].data, noted[0].size}, options, out);  // the usual get
  } else if (count <= kKeysNoted) {
    answer_noted_keys(noted, count, options, out);
  } else if (count <= kGetKeysPerStep) {
    answer_keys(keys, 0, options, out);  // all in one step, from the line
  } else {
    multi_get_.keys.assign(keys);
    multi_get_.next = 0;
    multi_get_.options = options;
    return get_step(out);
  }
  out.append("END\r\n");
}

// "VALUE <key> <flags> <bytes>[ <cas>]\r\n" and the value, written straight
// into the output buffer: this is most of what a get costs in user space.
void TextProtocol::append_value(store::Item& item, bool with_cas, OutputQueue& out) {
  constexpr size_t kMaxHeader = 6 + store::kMaxKeyLength + 3 * 21 + 2;
  const size_t value_bytes = item.value_len + 2;  // with the item's "\r\n"
  const bool copy = out.copies(value_bytes);
  char* at = out.reserve(kMaxHeader + (copy ? value_bytes : 0));
  std::memcpy(at, "VALUE ", 6);
  at += 6;
  std::memcpy(at, item.key_data(), item.key_len);
  at += item.key_len;
  *at++ = ' ';
  at = std::to_chars(at, at + 10, item.flags).ptr;
  *at++ = ' ';
  at = std::to_chars(at, at + 10, item.value_len).ptr;
  if (with_cas) {
    *at++ = ' ';
    at = std::to_chars(at, at + 20, core_.cas_of(item)).ptr;
  }
  *at++ = '\r';
  *at++ = '\n';
  if (copy) {
    std::memcpy(at, item.value(), value_bytes);
    at += value_bytes;
  }
  out.commit(at);
  if (!copy) out.append_reference(&item, item.value(), value_bytes);
}

void TextProtocol::answer_key(std::string_view key, const GetOptions& options, OutputQueue& out) {
  if (options.touch) {
    store::ItemRef item = core_.get_and_touch(key, options.exptime);
    core_.detail_get(key, static_cast<bool>(item));
    if (item) append_value(*item, options.with_cas, out);
    return;
  }
  // The key the look-ahead hashed, when this is its get: the same bytes.
  bool noted =
      running_get_ && running_get_->key_data == key.data() && running_get_->key_size == key.size();
  uint64_t hash = noted ? running_get_->hash : core_.key_hash(key);
  // Under the store's lock: a small value is copied, a large one referenced.
  core_.read_hashed(key, hash,
                    [&](store::Item& item) { append_value(item, options.with_cas, out); });
}

// A multi-get's keys, looked up in one call to the store (CommandCore::read_each).
void TextProtocol::answer_noted_keys(const Words::Span* keys, size_t count,
                                     const GetOptions& options, OutputQueue& out) {
  if (options.touch) {
    for (size_t i = 0; i < count; ++i)
      answer_key({keys[i].data, keys[i].size}, options, out);
    return;
  }
  core_.read_each(
      count, [keys](size_t i) { return std::string_view(keys[i].data, keys[i].size); },
      [&](size_t, store::Item& item) { append_value(item, options.with_cas, out); });
}

// Answers up to kGetKeysPerStep of the keys from `from` on; returns where
// it stopped. A longer get goes on in later steps, and the connection
// serves others in between (has_unfinished_work): a 256 KB line of 100,000
// keys must not hold up the thread for the whole of it.
size_t TextProtocol::answer_keys(std::string_view keys, size_t from, const GetOptions& options,
                                 OutputQueue& out) {
  size_t looked_up = 0;
  while (from < keys.size() && looked_up < kGetKeysPerStep) {
    size_t start = keys.find_first_not_of(' ', from);
    if (start == std::string_view::npos) return keys.size();
    size_t end = std::min(keys.find(' ', start), keys.size());
    from = end;
    ++looked_up;
    answer_key(keys.substr(start, end - start), options, out);
  }
  return from;
}

void TextProtocol::get_step(OutputQueue& out) {
  MultiGet& get = multi_get_;
  get.next = answer_keys(get.keys, get.next, get.options, out);
  if (get.next >= get.keys.size()) {
    get.keys.clear();
    out.append("END\r\n");
  }
}

void TextProtocol::update(const Words& words, StoreCommand command, OutputQueue& out) {
  size_t required = command == StoreCommand::kCas ? 6 : 5;
  if (words.count != required && words.count != required + 1) return reply(out, "ERROR");
  noreply_ = words.last() == "noreply";
  std::string_view key = words[1];
  uint32_t flags;
  int32_t exptime;
  int32_t length;
  uint64_t cas = 0;
  if (!valid_key(key) || !parse_u32(words[2], &flags) || !parse_i32(words[3], &exptime) ||
      !parse_i32(words[4], &length) ||
      (command == StoreCommand::kCas && !parse_u64(words[5], &cas)) || length < 0 ||
      length > kMaxDataLength) {
    return reply(out, kBadFormat);
  }
  core_.detail_set(key);
  store::ItemRef item;
  if (refuse_data_block_) {
    refuse_on_replica(out);
  } else if (item = core_.allocate(key, flags, exptime, static_cast<size_t>(length)); !item) {
    reply(out, static_cast<size_t>(length) > core_.max_item_size()
                   ? "SERVER_ERROR object too large for cache"
                   : "SERVER_ERROR out of memory storing object");
    core_.drop_stale(command, key);
  }
  if (!item) {
    swallow_left_ = static_cast<size_t>(length) + 2;
    state_ = State::kSwallow;
    return;
  }
  value_item_ = std::move(item);
  value_is_meta_ = false;
  value_command_ = command;
  value_cas_ = cas;
  value_filled_ = 0;
  state_ = State::kValue;
}

size_t TextProtocol::fill_value(std::string_view input, OutputQueue& out) {
  size_t total = size_t{value_item_->value_len} + 2;
  size_t take = std::min(total - value_filled_, input.size());
  std::memcpy(value_item_->value() + value_filled_, input.data(), take);
  value_filled_ += take;
  if (value_filled_ == total) finish_value(out);
  return take;
}

void TextProtocol::finish_value(OutputQueue& out) {
  state_ = State::kLine;
  store::ItemRef item = std::move(value_item_);
  const char* end = item->value() + item->value_len;
  if (end[0] != '\r' || end[1] != '\n') return reply(out, "CLIENT_ERROR bad data chunk");
  if (value_is_meta_) return meta_.finish_set(item, out);
  switch (core_.store(value_command_, item, value_cas_).status) {
    case store::StoreStatus::kStored:
      return reply(out, "STORED");
    case store::StoreStatus::kNotStored:
      return reply(out, "NOT_STORED");
    case store::StoreStatus::kExists:
      return reply(out, "EXISTS");
    case store::StoreStatus::kNotFound:
      return reply(out, "NOT_FOUND");
    case store::StoreStatus::kLocked:
      return reply(out, "LOCKED");
    case store::StoreStatus::kNotLocked:  // only replace_and_unlock, a binary command
    case store::StoreStatus::kNoMemory:
      return reply(out, "SERVER_ERROR out of memory storing object");
  }
}

// Meta commands answer for themselves (their quiet mode is their own); an
// ms leaves its data block for us to read.
void TextProtocol::meta(const Words& words, OutputQueue& out) {
  MetaCommands::DataBlock block = meta_.execute(words, out);
  if (block.item) {
    value_item_ = std::move(block.item);
    value_is_meta_ = true;
    value_filled_ = 0;
    state_ = State::kValue;
  } else if (block.swallow > 0) {
    swallow_left_ = block.swallow;
    state_ = State::kSwallow;
  }
}

void TextProtocol::arith(const Words& words, bool increment, OutputQueue& out) {
  if (words.count != 3 && words.count != 4) return reply(out, "ERROR");
  noreply_ = words.last() == "noreply";
  if (!valid_key(words[1])) return reply(out, kBadFormat);
  store::ArithRequest request;
  request.increment = increment;
  if (!parse_u64(words[2], &request.delta)) {
    return reply(out, "CLIENT_ERROR invalid numeric delta argument");
  }
  store::ArithResult result = core_.arith(words[1], request);
  switch (result.status) {
    case store::ArithStatus::kOk:
      if (noreply_) return;
      out.append_number(result.value);
      out.append("\r\n");
      return;
    case store::ArithStatus::kNotFound:
      return reply(out, "NOT_FOUND");
    case store::ArithStatus::kNonNumeric:
      return reply(out, "CLIENT_ERROR cannot increment or decrement non-numeric value");
    case store::ArithStatus::kLocked:
      return reply(out, "LOCKED");
    case store::ArithStatus::kExists:  // only the binary protocol sends a CAS
    case store::ArithStatus::kNoMemory:
      return reply(out, "SERVER_ERROR out of memory");
  }
}

void TextProtocol::remove(const Words& words, OutputQueue& out) {
  if (words.count < 2 || words.count > 4) return reply(out, "ERROR");
  if (words.count > 2) {
    // "delete KEY 0" survives from the old hold-time argument.
    bool hold_is_zero = words[2] == "0";
    noreply_ = words.last() == "noreply";
    bool valid = (words.count == 3 && (hold_is_zero || noreply_)) ||
                 (words.count == 4 && hold_is_zero && noreply_);
    if (!valid) {
      return reply(out, "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]");
    }
  }
  if (!valid_key(words[1])) return reply(out, kBadFormat);
  core_.detail_delete(words[1]);
  switch (core_.remove(words[1], 0)) {
    case store::DeleteStatus::kDeleted:
      return reply(out, "DELETED");
    case store::DeleteStatus::kLocked:
      return reply(out, "LOCKED");
    case store::DeleteStatus::kNotFound:
    case store::DeleteStatus::kExists:
      return reply(out, "NOT_FOUND");
  }
}

void TextProtocol::touch(const Words& words, OutputQueue& out) {
  if (words.count != 3 && words.count != 4) return reply(out, "ERROR");
  noreply_ = words.last() == "noreply";
  if (!valid_key(words[1])) return reply(out, kBadFormat);
  int32_t exptime;
  if (!parse_i32(words[2], &exptime)) return reply(out, kBadExptime);
  reply(out, core_.touch(words[1], exptime) ? "TOUCHED" : "NOT_FOUND");
}

void TextProtocol::flush_all(const Words& words, OutputQueue& out) {
  if (words.count > 3) return reply(out, "ERROR");
  noreply_ = words.last() == "noreply";
  int32_t delay = 0;
  bool has_delay = words.count == 3 || (words.count == 2 && !noreply_);
  if (!core_.policy().flush_all) {
    core_.flush_all(0);  // refused, and counted first, as memcached's -F
    return reply(out, "CLIENT_ERROR flush_all not allowed");
  }
  if (has_delay && !parse_i32(words[1], &delay)) {
    return reply(out, kBadExptime);
  }
  core_.flush_all(delay);
  reply(out, "OK");
}

// yrmcds's key dump: "VALUE <key>" lines, then END.
void TextProtocol::keys(const Words& words, OutputQueue& out) {
  if (words.count > 2) return reply(out, "ERROR");
  // memcached's -X covers its dumps; this is lockcached's.
  if (!core_.policy().dumps) return reply(out, "CLIENT_ERROR keys not allowed");
  if (words.count == 2 && !valid_key(words[1])) return reply(out, kBadFormat);
  keys_.start(words.count == 2 ? words[1] : std::string_view());
  continue_work(out);
}

void TextProtocol::continue_work(OutputQueue& out) {
  if (budget_.yielded()) return budget_.resume();
  if (!multi_get_.keys.empty()) return get_step(out);
  if (items_.active()) return dump_step(out);
  bool done = keys_.step(core_, [&out](std::string_view key) {
    out.append("VALUE ");
    if (listable_as_is(key)) {
      out.append(key);
    } else {
      // Stored through the binary protocol or a base64 meta key: printed
      // raw it would break the reply, so it comes base64-encoded, marked
      // " b" as the meta protocol marks such keys.
      out.append(base64_encode(key));
      out.append(" b");
    }
    out.append("\r\n");
  });
  if (done) out.append("END\r\n");
}

// lock/unlock take exactly one key and no noreply, as in yrmcds.
void TextProtocol::lock(const Words& words, OutputQueue& out) {
  if (words.count != 2) return reply(out, "ERROR");
  if (!valid_key(words[1])) return reply(out, kBadFormat);
  switch (core_.lock(words[1])) {
    case store::LockStatus::kOk:
      return reply(out, "OK");
    case store::LockStatus::kLocked:
      return reply(out, "LOCKED");
    case store::LockStatus::kNotFound:
    case store::LockStatus::kNotLocked:
      return reply(out, "NOT_FOUND");
  }
}

void TextProtocol::unlock(const Words& words, OutputQueue& out) {
  if (words.count != 2) return reply(out, "ERROR");
  if (!valid_key(words[1])) return reply(out, kBadFormat);
  if (core_.unlock(words[1]) == store::LockStatus::kOk) return reply(out, "OK");
  reply(out, "CLIENT_ERROR object is not locked or not found");
}

// memcached's log streams: `watch` alone is `watch fetchers`.
void TextProtocol::watch(const Words& words, OutputQueue& out) {
  if (!core_.policy().watch) return reply(out, "CLIENT_ERROR watch commands not allowed");
  uint32_t streams = words.count == 1 ? core::kWatchFetchers : 0;
  for (size_t i = 1; i < words.count; ++i) {
    uint32_t stream = core::watch_stream(words[i]);
    if (stream == 0) return reply(out, "ERROR");
    streams |= stream;
  }
  // Replies to requests before it are still queued: they go out first,
  // then "OK" and the stream, as memcached 1.6.18 sends them.
  if (!core_.start_watch(streams)) return reply(out, "WATCHER_TOO_MANY log watcher limit reached");
  out.append("OK\r\n");
}

// memcached's -A: `shutdown` stops the server as SIGINT does, `shutdown
// graceful` as SIGUSR1 does; the connection closes without a reply.
void TextProtocol::shutdown(const Words& words, OutputQueue& out) {
  if (!core_.policy().shutdown) return reply(out, "ERROR: shutdown not enabled");
  bool graceful = words.count == 2 && words[1] == "graceful";
  if (words.count != 1 && !graceful) return reply(out, "CLIENT_ERROR invalid shutdown mode");
  close_ = true;
  close_reason_ = core::CloseReason::kShutdown;  // memcached's conn_close reason=shutdown
  core_.shutdown(graceful);
}

void TextProtocol::verbosity(const Words& words, OutputQueue& out) {
  if (words.count != 2 && words.count != 3) return reply(out, "ERROR");
  noreply_ = words.last() == "noreply";
  uint32_t level;
  if (!parse_u32(words[1], &level)) return reply(out, kBadFormat);
  core::set_log_verbosity(level);
  reply(out, "OK");
}

// As memcached: "OK" obeys noreply, a failure is always told.
void TextProtocol::refresh_certs(const Words& words, OutputQueue& out) {
  if (words.count > 2) return reply(out, "ERROR");
  std::string error;
  if (core_.refresh_certs(&error)) {
    noreply_ = words.last() == "noreply";
    return reply(out, "OK");
  }
  reply(out, error);
}

// memcached's replies; a lower limit evicts down to it at once (never a
// locked item: Store::set_memory_limit).
void TextProtocol::cache_memlimit(const Words& words, OutputQueue& out) {
  if (words.count != 2 && words.count != 3) return reply(out, "ERROR");
  noreply_ = words.last() == "noreply";
  uint32_t megabytes;
  if (!parse_u32(words[1], &megabytes)) return reply(out, "ERROR");
  if (megabytes < 8) return reply(out, "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m");
  if (megabytes > 1000000000) {
    return reply(out, "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes");
  }
  // memcached's reply for a limit it cannot apply: here one below what the
  // shards counted at the start need to hold the largest items.
  if (!core_.set_memory_limit(size_t{megabytes} << 20)) {
    return reply(out, "MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust");
  }
  reply(out, "OK");
}

// memcached's per-prefix counters: "stats detail on|off|dump".
void TextProtocol::stats_detail(const Words& words, OutputQueue& out) {
  core::PrefixStats* prefixes = core_.prefix_stats();
  std::string_view what = words.count >= 3 ? words[2] : std::string_view();
  if (prefixes == nullptr || (what != "on" && what != "off" && what != "dump")) {
    return reply(out, "CLIENT_ERROR usage: stats detail on|off|dump");
  }
  if (what != "dump") {
    prefixes->set_enabled(what == "on");
    return reply(out, "OK");
  }
  out.append(prefixes->dump_text());
}

void TextProtocol::stats(const Words& words, OutputQueue& out) {
  core::StatList list;
  if (words.count == 1) {
    core_.collect_stats(core::StatsGroup::kGeneral, list);
  } else if (words[1] == "settings") {
    core_.collect_stats(core::StatsGroup::kSettings, list);
  } else if (words[1] == "replication") {
    core_.collect_stats(core::StatsGroup::kReplication, list);
  } else if (words[1] == "cluster") {
    core_.collect_stats(core::StatsGroup::kCluster, list);
  } else if (words[1] == "reset") {
    core_.reset_stats();
    return reply(out, "RESET");
  } else if (words[1] == "detail") {
    return stats_detail(words, out);
  } else if (words[1] == "items") {
    core_.collect_stats(core::StatsGroup::kItems, list);
  } else if (words[1] == "slabs") {
    core_.collect_stats(core::StatsGroup::kSlabs, list);
  } else if (words[1] == "sizes") {
    core_.collect_stats(core::StatsGroup::kSizes, list);
  } else if (words[1] == "sizes_enable" || words[1] == "sizes_disable") {
    // memcached's reply (without END, as memcached's): the histogram by
    // size class costs nothing, so it is always on.
    return reply(out, "STAT sizes_status enabled");
  } else if (words[1] == "cachedump") {
    return cachedump(words, out);
  } else if (words[1] == "conns") {
    core_.collect_connections(list);
  } else if (words[1] == "cachelocks") {
    if (words.count > 3) return reply(out, "ERROR");
    core_.collect_cache_locks(words.count == 3 ? words[2] : std::string_view(), list);
  } else if (words[1] == "extstore") {
    // memcached's answer without an external store configured: the group
    // is there, empty. lockcached has none.
  } else {
    return reply(out, "ERROR");
  }
  for (const auto& [name, value] : list) {
    out.append("STAT ");
    out.append(name);
    out.append(" ");
    out.append(value);
    out.append("\r\n");
  }
  out.append("END\r\n");
}

// "stats cachedump CLASS LIMIT": memcached's replies, but LIMIT 0 lists
// every item of the class (memcached stops at 2 MB), a piece at a time.
void TextProtocol::cachedump(const Words& words, OutputQueue& out) {
  if (!core_.policy().dumps) return reply(out, "CLIENT_ERROR stats cachedump not allowed");
  if (words.count < 4) return reply(out, "CLIENT_ERROR bad command line");
  uint32_t id;
  uint32_t limit;
  if (!parse_u32(words[2], &id) || !parse_u32(words[3], &limit)) {
    return reply(out, "CLIENT_ERROR bad command line format");
  }
  if (id > store::kLargestSizeClass) return reply(out, "CLIENT_ERROR Illegal slab id");
  // An empty class (0 always is) needs no walk.
  if (id == 0 || core_.class_stats()[id - 1].number == 0) return reply(out, "END");
  dump_ = ItemDump{};
  dump_.classes.set(id);
  dump_.limit = limit;
  items_.start();
  dump_step(out);
}

namespace {

// memcached's class list of `lru_crawler crawl|metadump`: "all", or ids
// 1..63 joined by commas (empty ones skipped). False for a bad id.
bool parse_class_list(std::string_view ids, std::bitset<store::kSizeClassCount + 1>& classes) {
  if (ids == "all") {
    classes.set();
    classes.reset(0);
    return true;
  }
  while (!ids.empty()) {
    size_t comma = std::min(ids.find(','), ids.size());
    std::string_view word = ids.substr(0, comma);
    ids.remove_prefix(std::min(comma + 1, ids.size()));
    if (word.empty()) continue;
    uint32_t id;
    if (!parse_u32(word, &id) || id == 0 || id > store::kLargestSizeClass) return false;
    classes.set(id);
  }
  return true;
}

constexpr std::string_view kCrawlerDisabled = "CLIENT_ERROR lru crawler disabled";
constexpr std::string_view kBadClass = "BADCLASS invalid class id";
constexpr std::string_view kNoClass = "NOTSTARTED no items to crawl";

}  // namespace

// memcached's `lru_crawler`, word for word. enable and disable pause and
// resume the expiry crawler (store/crawler.h); crawl starts a pass at once
// (one pass covers every class); sleep and tocrawl pace memcached's
// crawler and change nothing here.
void TextProtocol::lru_crawler(const Words& words, OutputQueue& out) {
  store::Crawler* crawler = core_.crawler();
  std::string_view what = words.count >= 2 ? words[1] : std::string_view();
  if (words.count == 2 && (what == "enable" || what == "disable")) {
    if (crawler == nullptr || !crawler->set_enabled(what == "enable")) {
      // memcached's words for starting a crawler that runs already.
      if (what == "enable") return reply(out, "ERROR failed to start lru crawler thread");
    }
    return reply(out, "OK");
  }
  if (words.count != 3) return reply(out, "ERROR");
  uint32_t number;
  if (what == "sleep" || what == "tocrawl") {
    if (!parse_u32(words[2], &number)) return reply(out, kBadFormat);
    if (what == "sleep" && number > 1000000) {
      return reply(out, "CLIENT_ERROR sleep must be one second or less");
    }
    return reply(out, "OK");
  }
  if (what != "crawl" && what != "metadump") return reply(out, "ERROR");
  if (crawler != nullptr && !crawler->enabled()) return reply(out, kCrawlerDisabled);
  if (what == "metadump" && !core_.policy().dumps) return reply(out, "ERROR metadump not allowed");
  std::bitset<store::kSizeClassCount + 1> classes;
  if (what == "metadump" && words[2] == "hash") {
    classes.set();
  } else if (words[2] == "hash") {
    return reply(out, "ERROR an unknown error happened");  // memcached's, for crawl hash
  } else if (!parse_class_list(words[2], classes)) {
    return reply(out, kBadClass);
  }
  if (classes.none()) return reply(out, kNoClass);
  if (what == "crawl") {
    if (crawler != nullptr) crawler->crawl_now();
    return reply(out, "OK");
  }
  dump_ = ItemDump{};
  dump_.metadump = true;
  dump_.classes = classes;
  items_.start();
  dump_step(out);
}

// memcached's `lru tune|mode|temp_ttl`, checked and answered as memcached
// does; its segmented LRU has no counterpart (one CLOCK hand per shard), so
// an accepted setting changes nothing.
void TextProtocol::lru(const Words& words, OutputQueue& out) {
  noreply_ = words.last() == "noreply";
  std::string_view what = words.count >= 2 ? words[1] : std::string_view();
  if (what == "tune" && words.count >= 6) {
    uint32_t hot_percent;
    uint32_t warm_percent;
    double hot_factor;
    double warm_factor;
    if (!parse_u32(words[2], &hot_percent) || !parse_u32(words[3], &warm_percent) ||
        !parse_double(words[4], &hot_factor) || !parse_double(words[5], &warm_factor)) {
      return reply(out, "ERROR");
    }
    if (uint64_t{hot_percent} + warm_percent > 80) {
      return reply(out, "ERROR hot and warm pcts must not exceed 80");
    }
    if (hot_factor <= 0 || warm_factor <= 0) {
      return reply(out, "ERROR hot/warm age factors must be greater than 0");
    }
    return reply(out, "OK");
  }
  int32_t ttl;
  if (what == "mode" && words.count >= 3 && (words[2] == "flat" || words[2] == "segmented")) {
    return reply(out, "OK");
  }
  if (what == "temp_ttl" && words.count >= 3 && parse_i32(words[2], &ttl)) {
    return reply(out, "OK");
  }
  reply(out, "ERROR");
}

namespace {

void append_uri_encoded(std::string_view key, OutputQueue& out) {
  out.commit(core::uri_encode(key, out.reserve(3 * key.size())));
}

void append_signed(int64_t value, OutputQueue& out) {
  if (value < 0) out.append("-");
  out.append_number(value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value));
}

}  // namespace

void TextProtocol::dump_step(OutputQueue& out) {
  ItemDump& dump = dump_;
  auto limit_reached = [&dump] { return dump.limit != 0 && dump.shown >= dump.limit; };
  bool done = items_.step(core_, [&](const store::Item& item) {
    unsigned id = store::size_class_of(item.total_size());
    if (limit_reached() || !dump.classes[id]) return;
    if (dump.metadump) {
      // memcached's line, ended by "\n" alone; a base64 key's bytes, encoded.
      out.append("key=");
      append_uri_encoded(item.key(), out);
      out.append(" exp=");
      append_signed(item.exptime == 0 ? -1 : core_.unix_time(item.exptime), out);
      out.append(" la=");
      append_signed(core_.unix_time(item.atime), out);
      out.append(" cas=");
      out.append_number(core_.cas_of(item));
      out.append(item.fetched ? " fetch=yes cls=" : " fetch=no cls=");
      out.append_number(id);
      out.append(" size=");
      out.append_number(item.total_size());
      out.append("\n");
    } else {
      if (item.key_binary) return;  // memcached leaves out base64 keys
      out.append("ITEM ");
      out.append(item.key());
      out.append(" [");
      out.append_number(item.value_len);
      out.append(" b; ");
      append_signed(item.exptime == 0 ? 0 : core_.unix_time(item.exptime), out);
      out.append(" s]\r\n");
    }
    ++dump.shown;
  });
  if (!done && limit_reached()) {
    items_.stop();
    done = true;
  }
  if (done) out.append("END\r\n");
}

}  // namespace lockcached::protocol
