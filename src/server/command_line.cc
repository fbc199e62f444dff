#include "lockcached/server/command_line.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace lockcached::server {
namespace {

// memcached 1.6 options that lockcached does not implement: refusing them
// beats starting a server that silently behaves otherwise than asked.
struct Unsupported {
  char letter;
  std::string_view long_name;  // empty: memcached has none
};
constexpr Unsupported kUnsupported[] = {
    {'a', "unix-mask"},
    {'A', "enable-shutdown"},
    {'s', "unix-socket"},
    {'r', "enable-coredumps"},
    {'M', "disable-evictions"},
    {'k', "lock-memory"},
    {'i', "license"},
    {'f', "slab-growth-factor"},
    {'n', "slab-min-size"},
    {'L', "enable-largepages"},
    {'D', ""},
    {'R', "max-reqs-per-event"},
    {'C', "disable-cas"},
    {'b', "listen-backlog"},
    {'B', "protocol"},
    {'F', "disable-flush-all"},
    {'X', "disable-dumping"},
    {'W', "disable-watch"},
    {'N', "napi_ids"},
};

// memcached's long options that are not gflags flags of the same meaning,
// and the short option each stands for.
struct LongAlias {
  std::string_view long_name;
  char letter;
};
constexpr LongAlias kLongAliases[] = {
    {"memory-limit", 'm'}, {"conn-limit", 'c'}, {"max-item-size", 'I'},
    {"udp-port", 'U'},     {"verbose", 'v'},    {"daemon", 'd'},   {"pidfile", 'P'},
    {"enable-ssl", 'Z'},   {"extended", 'o'},   {"auth-file", 'Y'}, {"enable-sasl", 'S'},
    {"memory-file", 'e'},
};

// memcached's TLS settings among its -o options, and the flag each sets.
// `values`: the values memcached takes and what each becomes; empty: any
// value, as it is.
struct ExtendedOption {
  std::string_view name;
  std::string_view flag;
  std::vector<std::pair<std::string_view, std::string_view>> values;
};
const ExtendedOption kExtendedOptions[] = {
    {"ssl_chain_cert", "tls_cert_file", {}},
    {"ssl_key", "tls_key_file", {}},
    {"ssl_ca_cert", "tls_ca_file", {}},
    {"ssl_ciphers", "tls_ciphers", {}},
    // 1 (request a certificate, accept none) has no equivalent; 3 (once)
    // is 2 here, since a connection never renegotiates.
    {"ssl_verify_mode", "tls_verify_client", {{"0", "false"}, {"2", "true"}, {"3", "true"}}},
    // TLS 1.0 and 1.1 are refused: broken, and off in Debian's OpenSSL.
    {"ssl_min_version", "tls_min_version", {{"2", "1.2"}, {"3", "1.3"}}},
};

bool takes_value(char letter) {
  return std::string_view("pUlmctIuPoYe").find(letter) != std::string_view::npos;
}

std::optional<int64_t> parse_integer(std::string_view text, int64_t min, int64_t max) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (value < min || value > max) return std::nullopt;
  return value;
}

// Splits memcached's -l list (commas or semicolons) and refuses the
// HOST:PORT form: lockcached listens on one cache port for every address.
bool add_listen_addresses(std::string_view list, std::vector<std::string>* addresses,
                          std::string* error) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find_first_of(",;", start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view address = list.substr(start, end - start);
    start = end + 1;
    if (address.empty()) continue;
    bool bracketed = address.front() == '[';
    size_t close = address.find(']');
    if (bracketed && close == std::string_view::npos) {
      *error = "-l " + std::string(address) + ": missing ']'";
      return false;
    }
    bool has_port = bracketed ? close + 1 < address.size()
                              : address.find(':') != std::string_view::npos &&
                                    address.find(':') == address.rfind(':');
    if (has_port) {
      *error = "-l " + std::string(address) +
               ": a port per address is not supported; give the port with -p";
      return false;
    }
    addresses->emplace_back(bracketed ? address.substr(1, close - 1) : address);
  }
  if (addresses->empty()) {
    *error = "-l needs at least one address";
    return false;
  }
  return true;
}

std::string join_commas(const std::vector<std::string>& parts) {
  std::string joined;
  for (const std::string& part : parts)
    joined += (joined.empty() ? "" : ",") + part;
  return joined;
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
      if (!takes_value(alias.letter) && value) {
        fail("--" + std::string(name) + " takes no value");
      } else {
        option(alias.letter, value, "--" + std::string(name));
      }
      return;
    }
    if (!is_gflag_(name)) {
      for (const Unsupported& unsupported : kUnsupported) {
        if (unsupported.long_name == name) return fail_unsupported(unsupported);
      }
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
    switch (letter) {
      case 'p':
        return integer_flag(spelled, *value, "port", 0, 65535);
      case 'U':
        return udp_port(spelled, *value);
      case 'l':
        return listen(*value);
      case 'm':
        return integer_flag(spelled, *value, "memory_limit_mb", 1, kInt32Max);
      case 'c':
        return integer_flag(spelled, *value, "max_connections", 1, kInt32Max);
      case 't':
        return integer_flag(spelled, *value, "threads", 0, kInt32Max);
      case 'I':
        return item_size(spelled, *value);
      case 'u':
        if (value->empty()) return fail(spelled + " needs a user name");
        return flag("user", *value);
      case 'v':
        return flag("v", std::to_string(++verbosity_));
      case 'd':
        return flag("daemonize", "true");
      case 'P':
        if (value->empty()) return fail(spelled + " needs a file name");
        return flag("pid_file", *value);
      case 'Z':
        return flag("tls", "true");
      case 'Y':
        if (value->empty()) return fail(spelled + " needs a file name");
        return flag("auth_file", *value);
      case 'S':  // main refuses it without an auth file
        return flag("enable_sasl", "true");
      case 'e':
        if (value->empty()) return fail(spelled + " needs a file name");
        return flag("memory_file", *value);
      case 'o':
        return extended(spelled, *value);
      case 'h':
        return result_.args.push_back("--help");
      case 'V':
        return result_.args.push_back("--version");
      default:
        break;
    }
    for (const Unsupported& unsupported : kUnsupported) {
      if (unsupported.letter == letter) return fail_unsupported(unsupported);
    }
    fail("unknown option -" + std::string(1, letter) + " (see --help)");
  }

  void integer_flag(const std::string& spelled, std::string_view text, const char* flag_name,
                    int64_t min, int64_t max) {
    std::optional<int64_t> value = parse_integer(text, min, max);
    if (!value) {
      return fail(spelled + " " + std::string(text) + ": expected a whole number from " +
                  std::to_string(min) + " to " + std::to_string(max));
    }
    flag(flag_name, std::to_string(*value));
  }

  void udp_port(const std::string& spelled, std::string_view text) {
    std::optional<int64_t> port = parse_integer(text, 0, 65535);
    if (!port) return fail(spelled + " " + std::string(text) + ": expected a port, 0 to 65535");
    if (*port != 0) {
      result_.warnings.push_back(spelled + " " + std::to_string(*port) +
                                 " ignored: lockcached serves TCP only (UDP stays off)");
    }
  }

  void listen(std::string_view list) {
    std::string error;
    if (!add_listen_addresses(list, &listen_addresses_, &error)) return fail(error);
    // memcached adds every -l to the list; the last --listen= carries it all.
    flag("listen", join_commas(listen_addresses_));
  }

  // memcached's -o list: the TLS settings translate, anything else is refused.
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
    for (const ExtendedOption& known : kExtendedOptions) {
      if (known.name != name) continue;
      if (value.empty()) return fail(spelled + " " + std::string(name) + " needs a value");
      if (known.values.empty()) return flag(known.flag, value);
      for (const auto& [accepted, translated] : known.values) {
        if (accepted == value) return flag(known.flag, translated);
      }
      std::string choices;
      for (const auto& accepted : known.values)
        choices += (choices.empty() ? "" : ", ") + std::string(accepted.first);
      return fail(spelled + " " + std::string(option) + ": lockcached takes " + choices);
    }
    fail("memcached's option " + spelled + " " + std::string(name) +
         " is not supported by lockcached");
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

  void fail_unsupported(const Unsupported& unsupported) {
    std::string names = "-" + std::string(1, unsupported.letter);
    if (!unsupported.long_name.empty()) {
      names += " (--" + std::string(unsupported.long_name) + ")";
    }
    fail("memcached's option " + names + " is not supported by lockcached");
  }

  void fail(std::string message) {
    if (result_.error.empty()) result_.error = std::move(message);
  }

  static constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

  const std::vector<std::string>& args_;
  const IsGflag& is_gflag_;
  size_t next_ = 1;
  int verbosity_ = 0;
  std::vector<std::string> listen_addresses_;
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

}  // namespace lockcached::server
