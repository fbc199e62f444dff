#include "lockcached/protocol/meta_commands.h"

#include <array>
#include <charconv>
#include <climits>
#include <optional>
#include <string>

#include "lockcached/protocol/base64.h"
#include "lockcached/protocol/handler.h"

namespace lockcached::protocol {
namespace {

using store::StoreCommand;

constexpr std::string_view kBadFormat = "CLIENT_ERROR bad command line format";
constexpr std::string_view kBadToken = "CLIENT_ERROR bad token in command line format";
constexpr std::string_view kBadBase64Key = "CLIENT_ERROR error decoding key";
constexpr std::string_view kBadInitial = "CLIENT_ERROR invalid numeric initial value";
constexpr std::string_view kBadDelta = "CLIENT_ERROR invalid numeric delta value";
constexpr std::string_view kBadModeLength = "CLIENT_ERROR incorrect length for M token";
// memcached refuses more than 20 tokens, counting command, key and its own
// end marker.
constexpr size_t kMaxWordsWithFlags = 19;
constexpr size_t kMaxOpaqueLength = 32;

// What follows a flag's letter in its word.
enum class Takes : uint8_t {
  kUnknown,    // not a flag: "invalid flag"
  kNothing,    // nothing, or nothing parse_flags reads
  kBase64Key,  // b: nothing, but the key is base64
  kTtl,        // a 32-bit signed number of seconds
  kU32,
  kU64,
  kMode,  // M: one character
};

// Whether a meta command changes the cache, so that a replica refuses it.
enum class Writes : uint8_t {
  kYes,
  kDataBlock,  // ms: yes, and its data block is skipped
  kByFlags,    // mg: only with a flag that writes (FlagRule::writes)
  kNo,
};

void add_number(std::string& line, char flag, int64_t value) {
  line.push_back(' ');
  line.push_back(flag);
  line += std::to_string(value);
}

void add_unsigned(std::string& line, char flag, uint64_t value) {
  line.push_back(' ');
  line.push_back(flag);
  line += std::to_string(value);
}

// memcached's TTL report: -1 for "never".
// The "t" flag: -1 for never; 0 once the time is up. An item given a
// negative TTL (T-1, or N-1 on a miss) expires at once, so its reply says
// t0, never t-1 ("never expires"); a locked item outlives its exptime and
// says t0 too.
int64_t ttl_left(store::RelTime exptime, store::RelTime now) {
  if (exptime == 0) return -1;
  return exptime > now ? int64_t{exptime} - int64_t{now} : 0;
}

void finish_line(std::string line, OutputQueue& out) {
  line += "\r\n";
  out.append(line);
}

}  // namespace

// What one flag letter takes, where it goes in Flags, and the error for a
// token it cannot take.
struct MetaCommands::FlagRule {
  Takes takes = Takes::kUnknown;
  std::string_view error = kBadFormat;
  bool Flags::*given = nullptr;    // set once the flag is read
  int64_t Flags::*ttl = nullptr;   // Takes::kTtl
  uint32_t Flags::*u32 = nullptr;  // Takes::kU32
  uint64_t Flags::*u64 = nullptr;  // Takes::kU64
  bool writes = false;             // an mg with it changes the cache: a replica refuses it

  // Reads `token` (the word after the letter) into `flags` or, for b, `key`.
  bool take(std::string_view token, Flags& flags, std::string& key) const;
  static constexpr std::array<FlagRule, 128> table();
};

constexpr std::array<MetaCommands::FlagRule, 128> MetaCommands::FlagRule::table() {
  using enum Takes;
  using F = Flags;
  std::array<FlagRule, 128> rules{};
  // The handlers read these from the words themselves (mg's s t c f h l,
  // the O and k echoes); P and L are memcached's proxy hints.
  for (char letter : std::string_view("OPLkstcfhl"))
    rules[letter] = {.takes = kNothing};
  rules['q'] = {.takes = kNothing, .given = &F::quiet};
  rules['v'] = {.takes = kNothing, .given = &F::value};
  rules['u'] = {.takes = kNothing, .given = &F::no_bump};
  rules['I'] = {.takes = kNothing, .given = &F::invalidate};
  rules['b'] = {.takes = kBase64Key, .error = kBadBase64Key, .given = &F::base64};
  rules['N'] = {.takes = kTtl, .error = kBadToken, .given = &F::vivify, .ttl = &F::vivify_ttl};
  rules['T'] = {.takes = kTtl, .error = kBadToken, .given = &F::has_ttl, .ttl = &F::ttl};
  rules['R'] = {.takes = kTtl, .error = kBadToken, .ttl = &F::recache_ttl};
  rules['F'] = {.takes = kU32, .u32 = &F::client_flags};
  rules['C'] = {.takes = kU64, .error = kBadToken, .given = &F::has_cas, .u64 = &F::cas};
  rules['J'] = {.takes = kU64, .error = kBadInitial, .u64 = &F::initial};
  rules['D'] = {.takes = kU64, .error = kBadDelta, .u64 = &F::delta};
  rules['M'] = {.takes = kMode, .error = kBadModeLength};
  // N (create on a miss) and T (a new TTL) are what make an mg write.
  rules['N'].writes = rules['T'].writes = true;
  return rules;
}

const MetaCommands::FlagRule& MetaCommands::flag_rule(unsigned char letter) {
  static constexpr std::array<FlagRule, 128> kRules = FlagRule::table();
  return kRules[letter < kRules.size() ? letter : 0];  // 0: no flag
}

bool MetaCommands::FlagRule::take(std::string_view token, Flags& flags, std::string& key) const {
  int32_t number = 0;
  std::optional<std::string> decoded;
  bool taken = true;
  switch (takes) {
    case Takes::kUnknown:
    case Takes::kNothing:
      break;
    case Takes::kBase64Key:
      decoded = base64_decode(key);
      taken = decoded.has_value();
      if (taken) key = std::move(*decoded);
      break;
    case Takes::kTtl:
      taken = parse_i32(token, &number);
      if (taken) flags.*ttl = number;
      break;
    case Takes::kU32:
      taken = parse_u32(token, &(flags.*u32));
      break;
    case Takes::kU64:
      taken = parse_u64(token, &(flags.*u64));
      break;
    case Takes::kMode:
      taken = token.size() == 1;
      if (taken) flags.mode = token[0];
      break;
  }
  if (taken && given != nullptr) flags.*given = true;
  return taken;
}

// A duplicate or unknown flag is answered at once; a bad token only once
// the others were checked, so that those errors win (memcached's order).
std::string_view MetaCommands::parse_flags(const Words& words, size_t first, Flags& flags,
                                           std::string& key) {
  bool seen[128] = {};
  std::string_view error;  // the first bad token's
  for (size_t i = first; i < words.count; ++i) {
    std::string_view word = words[i];
    unsigned char letter = static_cast<unsigned char>(word[0]);
    if (letter >= 127 || seen[letter]) return "CLIENT_ERROR duplicate flag";
    seen[letter] = true;
    const FlagRule& rule = flag_rule(letter);
    if (rule.takes == Takes::kUnknown) return "CLIENT_ERROR invalid flag";
    if (!rule.take(word.substr(1), flags, key) && error.empty()) error = rule.error;
  }
  return error;
}

std::string_view MetaCommands::parse_request(const Words& words, bool is_get, Flags& flags,
                                             std::string& key, std::string& echoed) {
  if (words.count < 2) return "ERROR";
  if (words[1].size() > store::kMaxKeyLength) return kBadFormat;
  if (words.count > kMaxWordsWithFlags) {
    return is_get ? "CLIENT_ERROR options flags are too long"
                  : "CLIENT_ERROR options flags too long";
  }
  key.assign(words[1]);
  std::string_view error = parse_flags(words, 2, flags, key);
  // memcached's word for every other flag error of md/ma/ms is this one;
  // a key that is no base64 is named for what it is, as mg names it.
  if (!error.empty() && !is_get && error != kBadBase64Key) {
    return "CLIENT_ERROR invalid or duplicate flag";
  }
  if (!error.empty()) return error;
  if (!flags.base64 && !valid_key(key)) return kBadFormat;
  // Refused before any side effect (memcached would have done some of the
  // work first; see compare_memcached.py, difference (e)).
  if (!append_echo(words, 2, key, flags.base64, echoed)) {
    return "CLIENT_ERROR opaque token too long";
  }
  return {};
}

bool MetaCommands::echo(std::string_view word, std::string_view key, bool base64,
                        std::string& line) {
  if (word[0] == 'O') {
    if (word.size() > kMaxOpaqueLength) return false;
    line.push_back(' ');
    line += word;
  } else if (word[0] == 'k') {
    line += " k";
    line += base64 ? base64_encode(key) : std::string(key);
    if (base64) line += " b";
  }
  return true;
}

bool MetaCommands::append_echo(const Words& words, size_t first, std::string_view key, bool base64,
                               std::string& line) {
  for (size_t i = first; i < words.count; ++i) {
    if (!echo(words[i], key, base64, line)) return false;
  }
  return true;
}

// One meta command's row, by its second letter (mg: 'g').
struct MetaCommands::Command {
  DataBlock (MetaCommands::*handler)(const Words& words, OutputQueue& out) = nullptr;
  Writes writes = Writes::kYes;  // deny by default: a replica refuses it

  static constexpr std::array<Command, 26> table();
};

constexpr std::array<MetaCommands::Command, 26> MetaCommands::Command::table() {
  using M = MetaCommands;
  std::array<Command, 26> commands{};
  commands['n' - 'a'] = {&M::noop, Writes::kNo};
  commands['g' - 'a'] = {&M::without_data<&M::get>, Writes::kByFlags};
  commands['s' - 'a'] = {&M::set, Writes::kDataBlock};
  commands['d' - 'a'] = {&M::without_data<&M::remove>};
  commands['a' - 'a'] = {&M::without_data<&M::arith>};
  commands['e' - 'a'] = {&M::without_data<&M::debug>, Writes::kNo};
  return commands;
}

const MetaCommands::Command* MetaCommands::find_command(char letter) {
  static constexpr std::array<Command, 26> kCommands = Command::table();
  size_t row = static_cast<unsigned char>(letter) - size_t{'a'};
  if (row >= kCommands.size() || kCommands[row].handler == nullptr) return nullptr;
  return &kCommands[row];
}

MetaCommands::DataBlock MetaCommands::execute(const Words& words, OutputQueue& out) {
  const Command* command = find_command(words[0][1]);
  if (command == nullptr) {
    out.append("ERROR\r\n");
    return {};
  }
  if (core_.read_only() && writes_on_replica(*command, words)) {
    return refuse_on_replica(*command, words, out);
  }
  return (this->*command->handler)(words, out);
}

bool MetaCommands::writes_on_replica(const Command& command, const Words& words) {
  if (command.writes != Writes::kByFlags) return command.writes != Writes::kNo;
  for (size_t i = 2; i < words.count; ++i) {
    if (flag_rule(static_cast<unsigned char>(words[i][0])).writes) return true;
  }
  return false;
}

// Refused before anything is parsed; an ms still has its data block skipped.
MetaCommands::DataBlock MetaCommands::refuse_on_replica(const Command& command, const Words& words,
                                                        OutputQueue& out) {
  finish_line("SERVER_ERROR " + std::string(kReadOnlyReason), out);
  if (command.writes != Writes::kDataBlock) return {};
  int32_t length;
  bool sized =
      words.count >= 3 && parse_i32(words[2], &length) && length >= 0 && length <= INT_MAX - 2;
  return {{}, sized ? static_cast<size_t>(length) + 2 : 0};
}

MetaCommands::DataBlock MetaCommands::noop(const Words&, OutputQueue& out) {
  out.append("MN\r\n");
  return {};
}

void MetaCommands::get(const Words& words, OutputQueue& out) {
  Flags flags;
  std::string key;
  std::string echoed;
  if (std::string_view error = parse_request(words, true, flags, key, echoed); !error.empty()) {
    return finish_line(std::string(error), out);
  }
  store::MetaGetRequest request;
  request.bump = !flags.no_bump;
  request.vivify = flags.vivify;
  using Step = store::MetaGetRequest::Step;
  for (size_t i = 2; i < words.count; ++i) {  // in the client's order
    switch (words[i][0]) {
      case 'T':
        request.add(Step::kTouch, core_.rel_time(flags.ttl));
        break;
      case 'N':
        request.add(Step::kVivifyTtl, core_.rel_time(flags.vivify_ttl));
        break;
      case 'R':
        request.add(Step::kRecache, core_.rel_time(flags.recache_ttl));
        break;
      case 't':
        request.add(Step::kReadTtl);
        break;
    }
  }
  store::MetaGetResult result = core_.meta_get(key, request);

  if (!result.item) {
    if (!flags.quiet) finish_line("EN" + echoed, out);
    return;
  }
  const store::Item& item = *result.item;
  std::string line = flags.value ? "VA " + std::to_string(item.value_len) : "HD";
  store::RelTime now = core_.now();
  // The key comes back as it was stored (base64 if stored that way).
  std::string stored_key = result.key_binary ? key : std::string(item.key());
  for (size_t i = 2; i < words.count; ++i) {
    switch (words[i][0]) {
      case 's':
        add_unsigned(line, 's', item.value_len);
        break;
      case 't':
        add_number(line, 't', ttl_left(result.exptime_read, now));
        break;
      case 'c':
        add_unsigned(line, 'c', core_.cas_of(item));
        break;
      case 'f':
        add_unsigned(line, 'f', item.flags);
        break;
      case 'l':
        add_unsigned(line, 'l', result.last_access);
        break;
      case 'h':
        add_unsigned(line, 'h', result.fetched_before ? 1 : 0);
        break;
      case 'O':
      case 'k':
        echo(words[i], stored_key, result.key_binary, line);
        break;
    }
  }
  // memcached's order: Z before X, and W last.
  if (result.token_was_sent) line += " Z";
  if (result.stale) line += " X";
  if (result.won) line += " W";
  finish_line(std::move(line), out);
  if (flags.value) out.append_item(result.item.get(), item.value(), item.value_len + 2);
}

MetaCommands::DataBlock MetaCommands::set(const Words& words, OutputQueue& out) {
  if (words.count < 2) {
    out.append("ERROR\r\n");
    return {};
  }
  if (words[1].size() > store::kMaxKeyLength || words.count == 2) {
    out.append("CLIENT_ERROR bad command line format\r\n");
    return {};
  }
  if (words.count > kMaxWordsWithFlags) {
    out.append("CLIENT_ERROR options flags too long\r\n");
    return {};
  }
  int32_t length;
  if (!parse_i32(words[2], &length) || length < 0 || length > INT_MAX - 2) {
    out.append("CLIENT_ERROR bad command line format\r\n");
    return {};
  }
  // From here on, a refused request still has its data block skipped.
  DataBlock swallow{{}, static_cast<size_t>(length) + 2};
  Flags flags;
  std::string key(words[1]);
  std::string_view error = parse_flags(words, 3, flags, key);
  StoreCommand command = StoreCommand::kSet;
  if (error.empty()) {
    switch (flags.mode) {
      case 0:
      case 'S':
        break;
      case 'E':
        command = StoreCommand::kAdd;
        break;
      case 'A':
        command = StoreCommand::kAppend;
        break;
      case 'P':
        command = StoreCommand::kPrepend;
        break;
      case 'R':
        command = StoreCommand::kReplace;
        break;
      default:
        error = "CLIENT_ERROR invalid mode for ms M token";
    }
  }
  std::string ignored;
  if (error.empty() && !append_echo(words, 3, key, flags.base64, ignored)) {
    error = "CLIENT_ERROR opaque token too long";
  }
  if (error.empty() && !flags.base64 && !valid_key(key)) error = kBadFormat;
  if (!error.empty()) {
    out.append(error);
    out.append("\r\n");
    return swallow;
  }
  // A CAS turns set and replace into cas, as in memcached.
  if (flags.has_cas && (command == StoreCommand::kSet || command == StoreCommand::kReplace)) {
    command = StoreCommand::kCas;
  }
  store::ItemRef item = core_.allocate(key, flags.client_flags, flags.ttl, size_t(length));
  if (!item) {
    out.append(size_t(length) > core_.max_item_size()
                   ? "SERVER_ERROR object too large for cache\r\n"
                   : "SERVER_ERROR out of memory storing object\r\n");
    core_.drop_stale(StoreCommand::kSet, key);
    return swallow;
  }
  item->key_binary = flags.base64;  // mg k and me answer with the key as stored
  pending_.command = command;
  pending_.flags = flags;
  pending_.key = std::move(key);
  pending_.echo_words.clear();
  for (size_t i = 3; i < words.count; ++i) {
    pending_.echo_words += words[i];
    pending_.echo_words.push_back(' ');
  }
  return {std::move(item), 0};
}

void MetaCommands::finish_set(const store::ItemRef& item, OutputQueue& out) {
  const Flags& flags = pending_.flags;
  store::StoreResult result =
      core_.store(pending_.command, item, flags.cas, flags.invalidate && flags.has_cas);
  std::string line;
  switch (result.status) {
    case store::StoreStatus::kStored:
      if (flags.quiet) return;
      line = "HD";
      break;
    case store::StoreStatus::kNotStored:
      line = "NS";
      break;
    case store::StoreStatus::kNotFound:
      line = "NF";
      break;
    case store::StoreStatus::kExists:
    case store::StoreStatus::kLocked:  // see docs/locking.md: a failed write
    case store::StoreStatus::kNotLocked:
      line = "EX";
      break;
    case store::StoreStatus::kNoMemory:
      return out.append("SERVER_ERROR out of memory storing object\r\n");
  }
  Words words = split_words(pending_.echo_words);
  for (size_t i = 0; i < words.count; ++i) {
    if (words[i][0] == 'c') add_unsigned(line, 'c', result.cas);
    echo(words[i], pending_.key, flags.base64, line);
  }
  finish_line(std::move(line), out);
}

void MetaCommands::remove(const Words& words, OutputQueue& out) {
  Flags flags;
  std::string key;
  std::string line;  // the echoed tokens, then the code in front
  if (std::string_view error = parse_request(words, false, flags, key, line); !error.empty()) {
    return finish_line(std::string(error), out);
  }
  // C0 is a CAS to compare, as in memcached: it matches no item (EX).
  uint64_t cas = !flags.has_cas ? 0 : flags.cas == 0 ? store::kUnmatchableCas : flags.cas;
  store::DeleteStatus status;
  if (flags.invalidate) {
    store::RelTime exptime = core_.rel_time(flags.ttl);
    status = core_.invalidate(key, cas, flags.has_ttl ? &exptime : nullptr);
  } else {
    status = core_.remove(key, cas);
  }
  switch (status) {
    case store::DeleteStatus::kDeleted:
      if (flags.quiet) return;
      line = "HD" + line;
      break;
    case store::DeleteStatus::kNotFound:
      line = "NF" + line;
      break;
    case store::DeleteStatus::kExists:
    case store::DeleteStatus::kLocked:  // see docs/locking.md
      line = "EX" + line;
      break;
  }
  finish_line(std::move(line), out);
}

void MetaCommands::arith(const Words& words, OutputQueue& out) {
  Flags flags;
  std::string key;
  std::string echoed;
  if (std::string_view error = parse_request(words, false, flags, key, echoed); !error.empty()) {
    return finish_line(std::string(error), out);
  }
  store::ArithRequest request;
  switch (flags.mode) {
    case 0:
    case 'I':
    case '+':
      request.increment = true;
      break;
    case 'D':
    case '-':
      request.increment = false;
      break;
    default:
      return out.append("CLIENT_ERROR invalid mode for ma M token\r\n");
  }
  request.delta = flags.delta;
  request.compare_cas = flags.has_cas ? flags.cas : 0;
  request.create = flags.vivify;
  request.initial = flags.initial;
  request.exptime = core_.rel_time(flags.vivify_ttl);
  request.set_exptime = flags.has_ttl;
  request.new_exptime = core_.rel_time(flags.ttl);
  // memcached applies T and N in the request's order.
  for (size_t i = 2; i < words.count; ++i) {
    if (words[i][0] == 'T') request.creation_ttl_last = false;
    if (words[i][0] == 'N') request.creation_ttl_last = true;
  }
  store::ArithResult result = core_.arith(key, request);

  switch (result.status) {
    case store::ArithStatus::kOk:
      break;
    case store::ArithStatus::kNonNumeric:
      return out.append("CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    case store::ArithStatus::kNoMemory:
      return out.append("SERVER_ERROR out of memory\r\n");
    case store::ArithStatus::kNotFound:
    case store::ArithStatus::kExists:
    case store::ArithStatus::kLocked:  // see docs/locking.md
      return finish_line((result.status == store::ArithStatus::kNotFound ? "NF" : "EX") + echoed,
                         out);
  }
  // memcached quiets a plain success but still answers a creation.
  if (flags.quiet && !result.created) return;
  std::string number = std::to_string(result.value);
  std::string line = flags.value ? "VA " + std::to_string(number.size()) : "HD";
  store::RelTime ttl = result.exptime_before;  // as of each flag's place
  for (size_t i = 2; i < words.count; ++i) {
    switch (words[i][0]) {
      case 'T':
        ttl = request.new_exptime;
        break;
      case 'N':
        if (result.created) ttl = request.exptime;
        break;
      case 'c':
        add_unsigned(line, 'c', result.cas);
        break;
      case 't':
        add_number(line, 't', ttl_left(ttl, core_.now()));
        break;
      case 'O':
      case 'k':
        echo(words[i], key, flags.base64, line);
        break;
    }
  }
  if (flags.value) line += "\r\n" + number;
  finish_line(std::move(line), out);
}

// "me KEY [b]": memcached's human-readable item dump.
void MetaCommands::debug(const Words& words, OutputQueue& out) {
  if (words.count < 2 || words[1].size() > store::kMaxKeyLength) {
    return out.append("CLIENT_ERROR bad command line format\r\n");
  }
  core_.count_meta_command();  // memcached 1.6.18's cmd_meta counts only me
  std::string key(words[1]);
  bool base64 = words.count >= 3 && words[2] == "b";
  if (base64) {
    auto decoded = base64_decode(key);
    if (!decoded) return out.append("CLIENT_ERROR bad command line format\r\n");
    key = std::move(*decoded);
  }
  store::MetaGetResult result = core_.peek(key);
  if (!result.item) return out.append("EN\r\n");
  const store::Item& item = *result.item;
  // memcached prints exp as now - exptime (negative while the item lives),
  // and the key as it was stored.
  std::string line = "ME " + (result.key_binary ? base64_encode(key) : key);
  line += " exp=" +
          std::to_string(result.exptime == 0 ? -1 : int64_t{core_.now()} - int64_t{result.exptime});
  line += " la=" + std::to_string(result.last_access);
  line += " cas=" + std::to_string(core_.cas_of(item));
  line += result.fetched_before ? " fetch=yes" : " fetch=no";
  line += " cls=" + std::to_string(store::size_class_of(item.total_size()));
  line += " size=" + std::to_string(item.total_size());
  finish_line(std::move(line), out);
}

}  // namespace lockcached::protocol
