#include "options.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string_view>

#include "failure.h"

namespace lockcached::cli {
namespace {

// Commands that speak to the cache port, and those that speak to the lock
// service port.
constexpr std::string_view kCacheCommands = "get set delete lock unlock unlock_all keys stats cluster";
constexpr std::string_view kLockServiceCommands = "run locks";

// `text` as a whole number from min to max; nullopt for anything else.
template <typename Number>
std::optional<Number> to_integer(std::string_view text, Number min, Number max) {
  Number value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return std::nullopt;
  }
  return value;
}

template <typename Number>
Number parse_integer(std::string_view option, std::string_view text, Number min, Number max) {
  std::optional<Number> value = to_integer(text, min, max);
  if (!value) {
    throw UsageError("--" + std::string(option) + " wants a whole number from " +
                     std::to_string(min) + " to " + std::to_string(max) + ", not \"" +
                     std::string(text) + "\"");
  }
  return *value;
}

double parse_seconds(std::string_view option, std::string_view text, bool forever_allowed) {
  if (forever_allowed && (text == "forever" || text == "inf")) {
    return std::numeric_limits<double>::infinity();
  }
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value) ||
      value < 0) {
    throw UsageError("--" + std::string(option) + " wants seconds (fractions allowed" +
                     (forever_allowed ? ", or \"forever\"" : "") + "), not \"" + std::string(text) +
                     "\"");
  }
  return value;
}

// A host name or address has no spaces or control characters: a value with
// them (in the environment, or in --tls-server-name) is a slip, better named
// than looked up. Nor has a user name or a password: the text protocol and
// the lock service could not send them (docs/authentication.md).
bool valid_word(std::string_view text) {
  return !text.empty() && std::none_of(text.begin(), text.end(),
                                       [](unsigned char c) { return c <= ' ' || c == 0x7f; });
}

std::string file_name(std::string_view option, std::string_view text) {
  if (text.empty()) throw UsageError("--" + std::string(option) + " wants a file name");
  return std::string(text);
}

// The TLS options that only mean something with --tls.
constexpr std::string_view kTlsCompanions[] = {"tls-ca-file", "tls-cert-file", "tls-key-file",
                                               "tls-server-name"};

struct OptionSpec {
  std::string_view name;
  // The commands that take it, space-separated; empty: every command. Where
  // the server is (--host, --port, --lock-port) goes with every command, so
  // that one alias (or one environment) serves the cache and the lock service
  // alike; a command ignores the port it does not speak to.
  std::string_view commands;
  bool takes_value;
  std::function<void(Options&, std::string_view)> apply;
};

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"help", "", false, [](Options& o, std::string_view) { o.help = true; }},
      {"version", "", false, [](Options& o, std::string_view) { o.version = true; }},
      {"host", "", true, [](Options& o, std::string_view v) { o.host = v; }},
      {"timeout", "", true,
       [](Options& o, std::string_view v) {
         o.timeout = parse_seconds("timeout", v, false);
         if (o.timeout == 0) throw UsageError("--timeout must be more than 0 seconds");
       }},
      {"port", "", true,
       [](Options& o, std::string_view v) {
         o.port = parse_integer<uint16_t>("port", v, 1, 65535);
       }},
      {"binary", kCacheCommands, false, [](Options& o, std::string_view) { o.binary = true; }},
      {"flags", "set", true,
       [](Options& o, std::string_view v) {
         o.flags = parse_integer<uint32_t>("flags", v, 0, std::numeric_limits<uint32_t>::max());
       }},
      {"exptime", "set", true,
       [](Options& o, std::string_view v) {
         o.exptime = parse_integer<int64_t>("exptime", v, std::numeric_limits<int32_t>::min(),
                                            std::numeric_limits<uint32_t>::max());
       }},
      {"lock-port", "", true,
       [](Options& o, std::string_view v) {
         o.lock_port = parse_integer<uint16_t>("lock-port", v, 1, 65535);
       }},
      {"wait", "run", true,
       [](Options& o, std::string_view v) { o.wait = parse_seconds("wait", v, true); }},
      {"ping", "run lock", true,
       [](Options& o, std::string_view v) { o.ping = parse_seconds("ping", v, false); }},
      {"kill-on-loss", "run lock", false,
       [](Options& o, std::string_view) { o.kill_on_loss = true; }},
      // TLS speaks to both ports, so it goes with every command as --host does.
      {"tls", "", false, [](Options& o, std::string_view) { o.tls.enabled = true; }},
      {"tls-ca-file", "", true,
       [](Options& o, std::string_view v) { o.tls.ca_file = file_name("tls-ca-file", v); }},
      {"tls-cert-file", "", true,
       [](Options& o, std::string_view v) { o.tls.cert_file = file_name("tls-cert-file", v); }},
      {"tls-key-file", "", true,
       [](Options& o, std::string_view v) { o.tls.key_file = file_name("tls-key-file", v); }},
      {"tls-server-name", "", true,
       [](Options& o, std::string_view v) {
         if (!valid_word(v)) {
           throw UsageError("--tls-server-name wants a host name or address, not \"" +
                            std::string(v) + "\"");
         }
         o.tls.server_name = v;
       }},
      // A login goes to whichever port the command speaks to.
      {"user", "", true,
       [](Options& o, std::string_view v) {
         if (!valid_word(v)) {
           throw UsageError("--user wants a name without spaces or control characters, not \"" +
                            std::string(v) + "\"");
         }
         o.login = Login{std::string(v), ""};
       }},
      {"password-file", "", true,
       [](Options& o, std::string_view v) { o.password_file = file_name("password-file", v); }},
  };
  return specs;
}

// The environment's defaults for where the server is, each overridden by an
// option on the command line.
struct EnvironmentDefault {
  const char* variable;
  std::string_view option;    // the option that wins over it
  std::string_view expected;  // what a valid value is, for the error message
  // Stores a valid value and returns true; returns false for an invalid one.
  bool (*apply)(Options&, std::string_view);
};

bool apply_port(uint16_t& port, std::string_view text) {
  std::optional<uint16_t> value = to_integer<uint16_t>(text, 1, 65535);
  if (value) port = *value;
  return value.has_value();
}

constexpr EnvironmentDefault kEnvironmentDefaults[] = {
    {"LOCKCACHED_HOST", "host", "a host name or address",
     [](Options& o, std::string_view v) {
       if (!valid_word(v)) return false;
       o.host = v;
       return true;
     }},
    {"LOCKCACHED_PORT", "port", "a port from 1 to 65535",
     [](Options& o, std::string_view v) { return apply_port(o.port, v); }},
    {"LOCKCACHED_LOCK_PORT", "lock-port", "a port from 1 to 65535",
     [](Options& o, std::string_view v) { return apply_port(o.lock_port, v); }},
};

// Only the variables whose option the command line leaves out are read, so
// that an option given always works, whatever its variable holds.
void apply_environment(Options& options, const Environment& environment) {
  for (const EnvironmentDefault& fallback : kEnvironmentDefaults) {
    if (options.given.contains(std::string(fallback.option))) continue;
    const char* value = environment(fallback.variable);
    // Empty counts as unset, as `LOCKCACHED_PORT= lockcached-cli ...` means.
    if (value == nullptr || *value == '\0') continue;
    if (!fallback.apply(options, value)) {
      throw UsageError(std::string(fallback.variable) + "=" + value + ": expected " +
                       std::string(fallback.expected));
    }
  }
}

constexpr const char* kPasswordVariable = "LOCKCACHED_PASSWORD";

// The first line of `path`, its line end removed.
std::string read_password_file(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  if (!file) {
    throw Failure(EX_CONFIG, "cannot read --password-file " + path + ": " + strerror(errno));
  }
  std::getline(file, line);
  if (line.ends_with('\r')) line.pop_back();
  if (!valid_word(line)) {
    throw Failure(EX_CONFIG, "--password-file " + path +
                                 ": the first line must be the password, without spaces or "
                                 "control characters");
  }
  return line;
}

// --user takes its password from --password-file or, without that, from
// the environment; either without --user is a slip, as is --user alone.
// Error messages name where the password came from, never the password.
void apply_password(Options& options, const Environment& environment) {
  const char* variable = environment(kPasswordVariable);
  if (variable != nullptr && *variable == '\0') variable = nullptr;  // empty counts as unset
  bool from_file = options.given.contains("password-file");
  if (!options.login) {
    if (from_file) throw UsageError("--password-file needs --user");
    if (variable != nullptr) {
      throw UsageError(std::string(kPasswordVariable) + " is set but --user is not given");
    }
    return;
  }
  if (from_file) {
    options.login->password = read_password_file(options.password_file);
  } else if (variable == nullptr) {
    throw UsageError("--user needs a password: --password-file FILE or " +
                     std::string(kPasswordVariable));
  } else if (!valid_word(variable)) {
    throw UsageError(std::string(kPasswordVariable) +
                     ": the password must have no spaces or control characters");
  } else {
    options.login->password = variable;
  }
}

bool lists(std::string_view commands, std::string_view command) {
  size_t start = 0;
  while (start <= commands.size()) {
    size_t space = std::min(commands.find(' ', start), commands.size());
    if (commands.substr(start, space - start) == command) return true;
    start = space + 1;
  }
  return false;
}

// "--name=value", "--name value", "--name"; "-h" is --help. Underscores
// count as dashes, so --lock_port works as the server spells it.
size_t parse_option(Options& options, int argc, char** argv, int at) {
  std::string_view word = argv[at];
  if (word == "-h") word = "--help";
  if (!word.starts_with("--")) throw UsageError("unknown option " + std::string(word));
  std::string name(word.substr(2));
  std::optional<std::string> value;
  if (size_t equals = name.find('='); equals != std::string::npos) {
    value = name.substr(equals + 1);
    name.resize(equals);
  }
  std::replace(name.begin(), name.end(), '_', '-');
  auto spec = std::find_if(option_specs().begin(), option_specs().end(),
                           [&name](const OptionSpec& s) { return s.name == name; });
  if (spec == option_specs().end()) throw UsageError("unknown option --" + name);
  size_t used = 1;
  if (spec->takes_value && !value) {
    if (at + 1 >= argc) throw UsageError("--" + name + " wants a value");
    value = argv[at + 1];
    used = 2;
  } else if (!spec->takes_value && value) {
    throw UsageError("--" + name + " takes no value");
  }
  spec->apply(options, value.value_or(""));
  options.given.insert(name);
  return used;
}

void check_options_fit(const Options& options) {
  if (options.help || options.version) return;
  if (options.args.empty()) throw UsageError("no command given");
  const std::string& command = options.args[0];
  if (!lists(kCacheCommands, command) && !lists(kLockServiceCommands, command)) {
    throw UsageError("unknown command \"" + command + "\"");
  }
  for (const OptionSpec& spec : option_specs()) {
    if (options.given.contains(std::string(spec.name)) && !spec.commands.empty() &&
        !lists(spec.commands, command)) {
      throw UsageError("--" + std::string(spec.name) + " is not an option of " + command +
                       " (it belongs to: " + std::string(spec.commands) + ")");
    }
  }
  if (options.program && options.program->empty()) {
    throw UsageError("no command after \"--\"");
  }
  bool tunes_holding = options.given.contains("ping") || options.given.contains("kill-on-loss");
  if (command == "lock" && !options.program && tunes_holding) {
    throw UsageError("--ping and --kill-on-loss apply to lock KEY -- COMMAND only");
  }
  // A CA or a certificate without --tls would be a connection in the clear
  // that its user believes verified: said, not ignored.
  for (std::string_view companion : kTlsCompanions) {
    if (options.given.contains(std::string(companion)) && !options.tls.enabled) {
      throw UsageError("--" + std::string(companion) + " needs --tls");
    }
  }
  if (options.tls.cert_file.empty() != options.tls.key_file.empty()) {
    throw UsageError("--tls-cert-file and --tls-key-file go together: give both or neither");
  }
}

}  // namespace

Options parse_options(int argc, char** argv, const Environment& environment) {
  Options options;
  int at = 1;
  bool dash_dash = false;
  while (at < argc && !dash_dash) {
    std::string_view word = argv[at];
    if (word == "--") {
      dash_dash = true;
      ++at;
      continue;
    }
    // "-" alone is an argument: set's VALUE read from stdin.
    if (word.size() > 1 && word[0] == '-') {
      at += static_cast<int>(parse_option(options, argc, argv, at));
    } else {
      options.args.emplace_back(word);
      ++at;
    }
  }
  if (dash_dash) {
    std::vector<std::string> rest(argv + at, argv + argc);
    bool holds_lock =
        !options.args.empty() && (options.args[0] == "run" || options.args[0] == "lock");
    if (holds_lock) {
      options.program = std::move(rest);
    } else {
      options.args.insert(options.args.end(), rest.begin(), rest.end());
    }
  }
  check_options_fit(options);
  // --help and --version work whatever the environment holds: the help is
  // where to find out what it should hold.
  if (!options.help && !options.version) {
    apply_environment(options, environment);
    apply_password(options, environment);
  }
  return options;
}

}  // namespace lockcached::cli
