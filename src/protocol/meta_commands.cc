#include "lockcached/protocol/meta_commands.h"

#include <charconv>
#include <climits>
#include <string>

#include "lockcached/protocol/base64.h"
#include "lockcached/protocol/handler.h"

namespace lockcached::protocol {
namespace {

using store::StoreCommand;

constexpr std::string_view kBadFormat = "CLIENT_ERROR bad command line format";
constexpr std::string_view kBadToken = "CLIENT_ERROR bad token in command line format";
constexpr std::string_view kBadBase64Key = "CLIENT_ERROR error decoding key";
// memcached refuses more than 20 tokens, counting command, key and its own
// end marker.
constexpr size_t kMaxWordsWithFlags = 19;
constexpr size_t kMaxOpaqueLength = 32;

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

std::string_view MetaCommands::parse_flags(const Words& words, size_t first, Flags& flags,
                                           std::string& key) {
  bool seen[128] = {};
  bool failed = false;
  std::string_view error = kBadFormat;
  auto fail = [&](std::string_view text) {
    if (!failed) error = text;
    failed = true;
  };
  for (size_t i = first; i < words.count; ++i) {
    std::string_view word = words[i];
    unsigned char flag = static_cast<unsigned char>(word[0]);
    if (flag >= 127 || seen[flag]) return "CLIENT_ERROR duplicate flag";
    seen[flag] = true;
    std::string_view token = word.substr(1);
    int32_t number;
    switch (flag) {
      case 'b':
        if (auto decoded = base64_decode(key)) {
          key = std::move(*decoded);
          flags.base64 = true;
        } else {
          fail(kBadBase64Key);
        }
        break;
      case 'N':
      case 'T':
      case 'R':
        if (!parse_i32(token, &number)) {
          fail(kBadToken);
        } else if (flag == 'N') {
          flags.vivify = true;
          flags.vivify_ttl = number;
        } else if (flag == 'T') {
          flags.has_ttl = true;
          flags.ttl = number;
        } else {
          flags.recache_ttl = number;
        }
        break;
      case 'F':
        if (!parse_u32(token, &flags.client_flags)) fail(kBadFormat);
        break;
      case 'C':
        if (!parse_u64(token, &flags.cas)) fail(kBadToken);
        flags.has_cas = true;
        break;
      case 'M':
        if (token.size() != 1)
          fail("CLIENT_ERROR incorrect length for M token");
        else
          flags.mode = token[0];
        break;
      case 'J':
        if (!parse_u64(token, &flags.initial)) fail("CLIENT_ERROR invalid numeric initial value");
        break;
      case 'D':
        if (!parse_u64(token, &flags.delta)) fail("CLIENT_ERROR invalid numeric delta value");
        break;
      case 'I':
        flags.invalidate = true;
        break;
      case 'q':
        flags.quiet = true;
        break;
      case 'v':
        flags.value = true;
        break;
      case 'u':
        flags.no_bump = true;
        break;
      case 'O':
      case 'P':
      case 'L':
      case 'k':
      case 's':
      case 't':
      case 'c':
      case 'f':
      case 'h':
      case 'l':
        break;
      default:
        return "CLIENT_ERROR invalid flag";
    }
  }
  return failed ? error : std::string_view();
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

MetaCommands::DataBlock MetaCommands::execute(const Words& words, OutputQueue& out) {
  // A replica serves mg (without N or T, which would write) and the rest
  // that only reads; ms still has its data block skipped.
  if (core_.read_only() && writes_on_replica(words)) {
    finish_line("SERVER_ERROR " + std::string(kReadOnlyReason), out);
    if (words[0][1] != 's') return {};
    int32_t length;
    bool sized = words.count >= 3 && parse_i32(words[2], &length) && length >= 0 &&
                 length <= INT_MAX - 2;
    return {{}, sized ? static_cast<size_t>(length) + 2 : 0};
  }
  switch (words[0][1]) {
    case 'n':
      out.append("MN\r\n");
      return {};
    case 'g':
      get(words, out);
      return {};
    case 's':
      return set(words, out);
    case 'd':
      remove(words, out);
      return {};
    case 'a':
      arith(words, out);
      return {};
    case 'e':
      debug(words, out);
      return {};
    default:
      out.append("ERROR\r\n");
      return {};
  }
}

bool MetaCommands::writes_on_replica(const Words& words) {
  switch (words[0][1]) {
    case 's':
    case 'd':
    case 'a':
      return true;
    case 'g':
      // N (create on a miss) and T (a new TTL) change the cache.
      for (size_t i = 2; i < words.count; ++i) {
        if (words[i][0] == 'N' || words[i][0] == 'T') return true;
      }
      return false;
    default:
      return false;
  }
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
  bool ttl_changed = false;  // memcached applies T and N in request order
  for (size_t i = 2; i < words.count; ++i) {
    switch (words[i][0]) {
      case 'T':
        ttl_changed = true;
        break;
      case 'N':
        ttl_changed |= result.created;
        break;
      case 'c':
        add_unsigned(line, 'c', result.cas);
        break;
      case 't':
        add_number(line, 't',
                   ttl_left(ttl_changed ? result.exptime : result.exptime_before, core_.now()));
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
