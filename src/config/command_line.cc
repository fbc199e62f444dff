#include "lockcached/config/command_line.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "lockcached/config/flags.h"
#include "lockcached/server/listen_address.h"

namespace lockcached::config {
namespace {

// How memcached checks the value of an option that changes nothing here:
// a mistake still stops the start, as it stops memcached's.
struct ValueRule {
  enum Kind : uint8_t {
    kNone,     // no value (one given is ignored, as memcached ignores it)
    kText,     // any value but none
    kInteger,  // a whole number from min to max
    kNumber,   // a number above min, at most max
    kChoice,   // one of `choices` (space-separated)
  };
  Kind kind = kNone;
  double min = 0;
  double max = 0;
  std::string_view choices;
  bool optional = false;  // the value may be left out
};
constexpr ValueRule integer(double min, double max, bool optional = false) {
  ValueRule rule;
  rule.kind = ValueRule::kInteger;
  rule.min = min;
  rule.max = max;
  rule.optional = optional;
  return rule;
}
constexpr ValueRule number_above(double min, double max) {
  ValueRule rule = integer(min, max);
  rule.kind = ValueRule::kNumber;
  return rule;
}
constexpr ValueRule one_of(std::string_view choices) {
  ValueRule rule;
  rule.kind = ValueRule::kChoice;
  rule.choices = choices;
  return rule;
}
constexpr ValueRule kNoValue{};
constexpr ValueRule kAnyText = [] {
  ValueRule rule;
  rule.kind = ValueRule::kText;
  return rule;
}();
constexpr double kInt32 = 2147483647;
constexpr ValueRule kU32 = integer(0, 4294967295.0);

// memcached options that tune memcached's own machinery (its slabs, its
// LRU, its hash table, extstore...). They start lockcached as they start
// memcached: the value is checked as memcached checks it, then the option
// is dropped with one warning that says why it changes nothing here. An
// empty `why`: lockcached always does what the option asks (no warning).
// `name`: an -o key, or "-" and the letter of a short option.
struct NoEffect {
  std::string_view name;
  ValueRule value;
  std::string_view why;
};
constexpr std::string_view kNoSlabs =
    "lockcached has no slab classes: each item is one allocation of its own size";
constexpr std::string_view kNoSlabMoves =
    "lockcached has no slab classes to move memory between";
constexpr std::string_view kNoSegmentedLru =
    "lockcached evicts with one CLOCK hand per shard, not memcached's segmented LRU";
constexpr std::string_view kCrawlerPaced =
    "lockcached's expiry crawler paces itself (a tenth of a core at most)";
constexpr std::string_view kNoExtstore = "lockcached keeps every item in memory (no extstore)";
const NoEffect kNoEffect[] = {
    {"-f", number_above(1, 1e9), kNoSlabs},
    {"-n", integer(1, kInt32), kNoSlabs},
    {"-L", kNoValue,
     "lockcached does not preallocate its memory; huge pages follow the kernel's "
     "transparent_hugepage setting"},
    {"-N", integer(1, kInt32),
     "lockcached spreads connections over its threads with SO_REUSEPORT"},
    {"maxconns_fast", kNoValue, ""},
    {"no_maxconns_fast", kNoValue,
     "lockcached always answers a connection over --max_connections with ERROR Too many "
     "open connections and closes it"},
    {"hashpower", integer(12, 32),
     "lockcached's hash tables start small and double as they fill"},
    {"no_hashexpand", kNoValue, "lockcached's hash tables start small and double as they fill"},
    {"slab_reassign", kNoValue, kNoSlabMoves},
    {"no_slab_reassign", kNoValue, kNoSlabMoves},
    {"slab_automove", integer(0, 2, /*optional=*/true), kNoSlabMoves},
    {"no_slab_automove", kNoValue, kNoSlabMoves},
    {"slab_automove_ratio", number_above(0, 1), kNoSlabMoves},
    {"slab_automove_window", integer(3, kInt32), kNoSlabMoves},
    {"slab_sizes", kAnyText, kNoSlabs},
    {"slab_chunk_max", integer(1, kInt32), kNoSlabs},
    {"no_chunked_items", kNoValue, kNoSlabs},
    {"tail_repair_time", integer(10, kInt32),
     "lockcached frees an item that a reply still points at once that reply is sent"},
    {"hash_algorithm", one_of("jenkins murmur3 xxh3"),
     "lockcached hashes keys with a seeded hash of its own"},
    {"lru_crawler_sleep", integer(0, 1000000), kCrawlerPaced},
    {"lru_crawler_tocrawl", kU32, kCrawlerPaced},
    {"lru_maintainer", kNoValue, kNoSegmentedLru},
    {"no_lru_maintainer", kNoValue, kNoSegmentedLru},
    {"hot_lru_pct", integer(1, 79), kNoSegmentedLru},
    {"warm_lru_pct", integer(1, 79), kNoSegmentedLru},
    {"hot_max_factor", number_above(0, 1e9), kNoSegmentedLru},
    {"warm_max_factor", number_above(0, 1e9), kNoSegmentedLru},
    {"temporary_ttl", integer(-kInt32 - 1, kInt32), kNoSegmentedLru},
    {"worker_logbuf_size", kU32,
     "lockcached's threads write watch lines straight into the watchers' buffers"},
    {"track_sizes", kNoValue, ""},  // `stats sizes` is always on
    {"inline_ascii_resp", kNoValue, ""},     // memcached ignores both
    {"no_inline_ascii_resp", kNoValue, ""},
    {"modern", kNoValue, ""},  // memcached 1.6: "currently: nothing"
    {"no_modern", kNoValue, "lockcached has no older defaults to return to"},
    {"drop_privileges", kNoValue,
     "lockcached sets up no system-call filter of its own (lockcached.service does)"},
    {"no_drop_privileges", kNoValue, ""},
    {"resp_obj_mem_limit", kNoValue, "memcached no longer uses it either"},
    {"read_buf_mem_limit", kU32, "lockcached's idle connections hold no read buffer"},
    {"sock_cookie_id", kU32, "lockcached marks no socket"},
    {"ssl_keyformat", one_of("1"), ""},  // PEM, the only one
    {"ssl_wbuf_size", kU32, "lockcached writes TLS records of up to 16 KiB"},
    {"ssl_session_cache", kNoValue, ""},  // always on
    {"ssl_kernel_tls", kNoValue, "lockcached does TLS in user space"},
    {"ext_path", kAnyText, kNoExtstore},
    {"ext_page_size", kU32, kNoExtstore},
    {"ext_wbuf_size", kU32, kNoExtstore},
    {"ext_threads", kU32, kNoExtstore},
    {"ext_io_depth", kU32, kNoExtstore},
    {"ext_item_size", kU32, kNoExtstore},
    {"ext_item_age", kU32, kNoExtstore},
    {"ext_low_ttl", kU32, kNoExtstore},
    {"ext_recache_rate", kU32, kNoExtstore},
    {"ext_compact_under", kU32, kNoExtstore},
    {"ext_drop_under", kU32, kNoExtstore},
    {"ext_max_sleep", kU32, kNoExtstore},
    {"ext_max_frag", number_above(0, 1), kNoExtstore},
    {"ext_drop_unread", kNoValue, kNoExtstore},
    {"slab_automove_freeratio", number_above(0, 1), kNoExtstore},
};

// memcached's long options that are not gflags flags of the same meaning,
// and the short option each stands for.
struct LongAlias {
  std::string_view long_name;
  char letter;
  // getopt's optional_argument: a value may follow '=', and memcached
  // ignores it (its --verbose=2 is one -v, as is --verbose=abc).
  bool ignores_value = false;
};
constexpr LongAlias kLongAliases[] = {
    {"memory-limit", 'm'},
    {"conn-limit", 'c'},
    {"max-item-size", 'I'},
    {"udp-port", 'U'},
    {"verbose", 'v', /*ignores_value=*/true},
    {"daemon", 'd'},
    {"pidfile", 'P'},
    {"enable-ssl", 'Z'},
    {"extended", 'o'},
    {"auth-file", 'Y'},
    {"enable-sasl", 'S'},
    {"enable-shutdown", 'A'},
    {"enable-coredumps", 'r'},
    {"disable-evictions", 'M'},
    {"lock-memory", 'k'},
    {"license", 'i'},
    {"slab-growth-factor", 'f'},
    {"slab-min-size", 'n'},
    {"enable-largepages", 'L'},
    {"max-reqs-per-event", 'R'},
    {"disable-cas", 'C'},
    {"listen-backlog", 'b'},
    {"disable-flush-all", 'F'},
    {"disable-dumping", 'X'},
    {"disable-watch", 'W'},
    {"napi-ids", 'N'},
    {"memory-file", 'e'},
    {"unix-socket", 's'},
    {"unix-mask", 'a'},
};

// memcached's reading of the value of an option for one of our flags
// (flags.cc spells the option), where it is its own: a whole number in
// memcached's range, or a name that may not be empty. Any other value goes
// to the flag as given, and the flag's check judges it.
struct OwnValue {
  std::string_view option;
  ValueRule number;        // kInteger, or kNone: any
  std::string_view needs;  // not empty: an empty value is "<option> needs <needs>"
};
const OwnValue kOwnValues[] = {
    {"-p", integer(0, 65535), ""},   {"-m", integer(1, kInt32), ""},
    {"-c", integer(1, kInt32), ""},  {"-t", integer(0, kInt32), ""},
    {"-b", integer(1, kInt32), ""},  {"-R", integer(1, kInt32), ""},
    {"-u", kNoValue, "a user name"}, {"-P", kNoValue, "a file name"},
    {"-Y", kNoValue, "a file name"}, {"-e", kNoValue, "a file name"},
    {"-s", kNoValue, "a file name"},
};

// memcached's values of the -o options for our flags that take only some,
// and what each becomes.
struct OwnChoices {
  std::string_view option;
  std::vector<std::pair<std::string_view, std::string_view>> values;
};
const OwnChoices kOwnChoices[] = {
    // 1 (request a certificate, accept none) has no equivalent; 3 (once)
    // is 2 here, since a connection never renegotiates.
    {"-o ssl_verify_mode", {{"0", "false"}, {"2", "true"}, {"3", "true"}}},
    // TLS 1.0 and 1.1 are refused: broken, and off in Debian's OpenSSL.
    {"-o ssl_min_version", {{"2", "1.2"}, {"3", "1.3"}}},
};

template <typename Row, size_t N>
const Row* find_option(const Row (&rows)[N], std::string_view option) {
  for (const Row& row : rows) {
    if (row.option == option) return &row;
  }
  return nullptr;
}

const NoEffect* no_effect(std::string_view name) {
  for (const NoEffect& option : kNoEffect) {
    if (option.name == name) return &option;
  }
  return nullptr;
}

// Whether memcached's option for the flag takes no value (-d, -o lru_crawler).
bool is_switch(const Flag& flag) {
  return is_bool(flag) && find_option(kOwnChoices, flag.memcached) == nullptr;
}

// Whether memcached's getopt takes a value after the letter: as its -U and
// -o do, as the options of its machinery with a value do (kNoEffect), and
// those of our flags that are no switch; -v counts instead (-vv).
bool takes_value(char letter) {
  std::string option = {'-', letter};
  if (letter == 'v') return false;
  if (const Flag* ours = flag_spelled(option)) return !is_switch(*ours);
  if (const NoEffect* ignored = no_effect(option)) return ignored->value.kind != ValueRule::kNone;
  return letter == 'U' || letter == 'o';
}

// Whether `text` is what `rule` allows; *expected says what would be.
bool value_fits(const ValueRule& rule, std::optional<std::string_view> text,
                std::string* expected) {
  if (rule.kind == ValueRule::kNone || (!text && rule.optional)) return true;
  auto number = [](double value) {
    std::string text = std::to_string(value);
    text.erase(text.find_last_not_of('0') + 1);
    if (text.back() == '.') text.pop_back();
    return text;
  };
  switch (rule.kind) {
    case ValueRule::kNone:
    case ValueRule::kText:
      *expected = "a value";
      return text && !text->empty();
    case ValueRule::kInteger: {
      *expected = "a whole number from " + number(rule.min) + " to " + number(rule.max);
      int64_t value = 0;
      auto [end, error] = text ? std::from_chars(text->data(), text->data() + text->size(), value)
                               : std::from_chars_result{nullptr, std::errc::invalid_argument};
      return text && error == std::errc() && end == text->data() + text->size() &&
             value >= rule.min && value <= rule.max;
    }
    case ValueRule::kNumber: {
      *expected = "a number above " + number(rule.min) + ", at most " + number(rule.max);
      if (!text || text->empty()) return false;
      std::string copy(*text);
      char* end = nullptr;
      double value = std::strtod(copy.c_str(), &end);
      return *end == '\0' && value > rule.min && value <= rule.max;
    }
    case ValueRule::kChoice: {
      *expected = "one of: " + std::string(rule.choices);
      if (!text || text->empty()) return false;
      std::string_view choices = rule.choices;
      while (!choices.empty()) {
        size_t space = std::min(choices.find(' '), choices.size());
        if (choices.substr(0, space) == *text) return true;
        choices.remove_prefix(std::min(space + 1, choices.size()));
      }
      return false;
    }
  }
  return false;
}

std::optional<int64_t> parse_integer(std::string_view text, int64_t min, int64_t max) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (value < min || value > max) return std::nullopt;
  return value;
}

// Walks the command line once, like getopt, writing the translation.
class Translator {
 public:
  Translator(const std::vector<std::string>& args, const IsGflag& is_gflag)
      : args_(args), is_gflag_(is_gflag) {}

  TranslatedCommandLine run() {
    if (!args_.empty()) result_.args.push_back(args_[0]);
    for (next_ = 1; next_ < args_.size() && result_.error.empty();) {
      const std::string& arg = args_[next_++];
      if (arg == "--") {
        result_.args.insert(result_.args.end(), args_.begin() + next_ - 1, args_.end());
        break;
      }
      if (arg.starts_with("--")) {
        long_option(arg);
      } else if (arg.size() > 1 && arg[0] == '-' && is_short_cluster(arg)) {
        short_cluster(arg);
      } else {
        result_.args.push_back(arg);
      }
    }
    return std::move(result_);
  }

 private:
  // "-p11211", "-vv", "-v": memcached's. "-logtostderr", "-v=2", "-port=1":
  // gflags' own single-dash forms, left to it. "-ossl_verify_mode=3" is
  // memcached's too (getopt: -o with a joined value): an '=' goes to gflags
  // only after the name of one of its flags.
  bool is_short_cluster(const std::string& arg) const {
    std::string_view body = std::string_view(arg).substr(1);
    size_t equals = body.find('=');
    if (equals != std::string_view::npos) {
      return equals > 1 && takes_value(body[0]) && !is_gflag_(body.substr(0, equals));
    }
    return body.size() == 1 || !is_gflag_(body);
  }

  void long_option(const std::string& arg) {
    std::string_view body = std::string_view(arg).substr(2);
    size_t equals = body.find('=');
    std::string_view name = body.substr(0, equals);
    std::optional<std::string_view> value;
    if (equals != std::string_view::npos) value = body.substr(equals + 1);
    for (const LongAlias& alias : kLongAliases) {
      if (alias.long_name != name) continue;
      if (!takes_value(alias.letter) && value && !alias.ignores_value) {
        return fail("--" + std::string(name) + " takes no value");
      }
      if (alias.ignores_value) value.reset();
      return option(alias.letter, value, "--" + std::string(name));
    }
    result_.args.push_back(arg);
  }

  void short_cluster(const std::string& arg) {
    for (size_t i = 1; i < arg.size() && result_.error.empty(); ++i) {
      char letter = arg[i];
      if (!takes_value(letter)) {
        option(letter, std::nullopt, std::string("-") + letter);
        continue;
      }
      // getopt: the rest of the argument is the value, else the next one.
      std::optional<std::string_view> value;
      if (i + 1 < arg.size()) value = std::string_view(arg).substr(i + 1);
      option(letter, value, std::string("-") + letter);
      return;
    }
  }

  // One option; `value` is its joined value, if any (else the next argument
  // is taken when the option needs one). `spelled` names it in messages.
  void option(char letter, std::optional<std::string_view> value, const std::string& spelled) {
    if (takes_value(letter) && !value) {
      if (next_ >= args_.size()) return fail(spelled + " needs a value");
      value = args_[next_++];
    }
    // memcached's options that set no flag, or whose value it reads its own way.
    switch (letter) {
      case 'U':
        return udp_port(spelled, *value);
      case 'l':
        return listen(spelled, *value);
      case 'I':
        return item_size(spelled, *value);
      case 'v':
        return flag("v", std::to_string(++verbosity_));
      case 'o':
        return extended(spelled, *value);
      case 'B':
        return protocol(spelled, *value);
      case 'D':
        return delimiter(spelled, *value);
      case 'h':
        return result_.args.push_back("--help");
      case 'V':
        return result_.args.push_back("--version");
      case 'i':
        return result_.args.push_back("--license");
      default:
        break;
    }
    std::string option = {'-', letter};
    if (const Flag* ours = flag_spelled(option)) {
      if (is_switch(*ours)) return flag(ours->name, "true");
      return own_value(*ours, spelled, *value);
    }
    if (const NoEffect* ignored = no_effect(option)) {
      return drop(*ignored, spelled + (value ? " " + std::string(*value) : ""), value);
    }
    fail("unknown option -" + std::string(1, letter) + " (see --help)");
  }

  // The value of a short option for one of our flags: checked as memcached
  // checks it (kOwnValues), then the flag's.
  void own_value(const Flag& ours, const std::string& spelled, std::string_view text) {
    const OwnValue* own = find_option(kOwnValues, ours.memcached);
    if (own != nullptr && !own->needs.empty() && text.empty()) {
      return fail(spelled + " needs " + std::string(own->needs));
    }
    if (std::string expected; own != nullptr && !value_fits(own->number, text, &expected)) {
      return fail(spelled + " " + std::string(text) + ": expected " + expected);
    }
    flag(ours.name, text);
  }

  void udp_port(const std::string& spelled, std::string_view text) {
    std::optional<int64_t> port = parse_integer(text, 0, 65535);
    if (!port) return fail(spelled + " " + std::string(text) + ": expected a port, 0 to 65535");
    if (*port != 0) {
      result_.warnings.push_back(spelled + " " + std::to_string(*port) +
                                 " ignored: lockcached serves TCP only (UDP stays off)");
    }
  }

  // --listen takes memcached's syntax; this only checks it early, to name -l.
  void listen(const std::string& spelled, std::string_view list) {
    std::string error;
    if (!server::parse_listen_addresses(list, &listen_addresses_, &error)) {
      return fail(spelled + " " + error);
    }
    // memcached adds every -l to the list; the last --listen= carries it all.
    flag("listen", server::listen_text(listen_addresses_));
  }

  // -B: the protocols a cache connection may speak.
  void protocol(const std::string& spelled, std::string_view name) {
    if (name != "ascii" && name != "binary" && name != "auto") {
      return fail(spelled + " " + std::string(name) + ": expected ascii, binary or auto");
    }
    flag("protocol", name);
  }

  // -D: memcached takes the value's first character, and turns the
  // per-prefix counters on.
  void delimiter(const std::string& spelled, std::string_view text) {
    if (text.empty()) return fail(spelled + " needs a delimiter character");
    flag("stats_prefix_delimiter", text.substr(0, 1));
    flag("stats_detail", "true");
  }

  // An option without effect here, `shown` as given: its value checked,
  // then one warning (none where lockcached always does what it asks).
  void drop(const NoEffect& option, const std::string& shown,
            std::optional<std::string_view> value) {
    if (std::string expected; !value_fits(option.value, value, &expected)) {
      return fail(shown + ": expected " + expected);
    }
    if (!option.why.empty()) {
      result_.warnings.push_back(shown + " ignored: " + std::string(option.why));
    }
  }

  // memcached's -o list: the TLS settings, idle_timeout, watcher_logbuf_size
  // and [no_]lru_crawler translate, the options of memcached's own machinery
  // are dropped (kNoEffect), anything else is refused.
  void extended(const std::string& spelled, std::string_view list) {
    size_t start = 0;
    while (start <= list.size() && result_.error.empty()) {
      size_t end = list.find(',', start);
      if (end == std::string_view::npos) end = list.size();
      std::string_view option = list.substr(start, end - start);
      start = end + 1;
      if (!option.empty()) extended_option(spelled, option);
    }
  }

  void extended_option(const std::string& spelled, std::string_view option) {
    size_t equals = option.find('=');
    std::string_view name = option.substr(0, equals);
    std::string_view value = equals == std::string_view::npos ? "" : option.substr(equals + 1);
    if (const Flag* ours = flag_spelled("-o " + std::string(name))) {
      return extended_value(*ours, spelled, option, value);
    }
    // memcached's no_ before a switch turns it off (no_lru_crawler).
    if (name.starts_with("no_")) {
      const Flag* ours = flag_spelled("-o " + std::string(name.substr(3)));
      if (ours != nullptr && is_switch(*ours)) return flag(ours->name, "false");
    }
    if (const NoEffect* ignored = no_effect(name)) {
      std::optional<std::string_view> given;
      if (equals != std::string_view::npos) given = value;
      return drop(*ignored, spelled + " " + std::string(option), given);
    }
    fail("memcached's option " + spelled + " " + std::string(name) +
         " is not supported by lockcached");
  }

  // An -o option for one of our flags: a switch, any value, or one of
  // memcached's values that translate (kOwnChoices).
  void extended_value(const Flag& ours, const std::string& spelled,
                      std::string_view option, std::string_view value) {
    if (is_switch(ours)) return flag(ours.name, "true");
    const OwnChoices* choices = find_option(kOwnChoices, ours.memcached);
    std::string_view name = option.substr(0, option.find('='));
    if (value.empty()) return fail(spelled + " " + std::string(name) + " needs a value");
    if (choices == nullptr) return flag(ours.name, value);
    std::string accepted;
    for (const auto& [given, translated] : choices->values) {
      if (given == value) return flag(ours.name, translated);
      accepted += (accepted.empty() ? "" : ", ") + std::string(given);
    }
    fail(spelled + " " + std::string(option) + ": lockcached takes " + accepted);
  }

  void item_size(const std::string& spelled, std::string_view text) {
    int64_t bytes = 0;
    if (!parse_item_size(text, &bytes)) {
      return fail(spelled + " " + std::string(text) +
                  ": expected a size in bytes, optionally with k or m (e.g. 2m)");
    }
    flag("max_item_size", std::to_string(bytes));
  }

  void flag(std::string_view name, std::string_view value) {
    result_.args.push_back("--" + std::string(name) + "=" + std::string(value));
  }

  void fail(std::string message) {
    if (result_.error.empty()) result_.error = std::move(message);
  }

  const std::vector<std::string>& args_;
  const IsGflag& is_gflag_;
  size_t next_ = 1;
  int verbosity_ = 0;
  std::vector<server::ListenAddress> listen_addresses_;
  TranslatedCommandLine result_;
};

}  // namespace

bool parse_item_size(std::string_view text, int64_t* bytes) {
  int64_t unit = 1;
  if (!text.empty()) {
    char last = text.back();
    if (last == 'k' || last == 'K') unit = int64_t{1} << 10;
    if (last == 'm' || last == 'M') unit = int64_t{1} << 20;
    if (unit != 1) text.remove_suffix(1);
  }
  std::optional<int64_t> number = parse_integer(text, 0, std::numeric_limits<int64_t>::max() >> 20);
  if (!number) return false;
  *bytes = *number * unit;
  return true;
}

TranslatedCommandLine translate_memcached_options(const std::vector<std::string>& args,
                                                  const IsGflag& is_gflag) {
  return Translator(args, is_gflag).run();
}

}  // namespace lockcached::config
