#include "lockcached/config/flag_loader.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <gflags/gflags.h>

namespace lockcached::config {
namespace {

constexpr std::string_view kCommandLine = "command line";
// A flagfile naming itself (or a cycle) must end in an error, not a crash.
constexpr int kMaxFlagfileDepth = 8;

std::string_view trim(std::string_view text) {
  size_t start = text.find_first_not_of(" \t\r");
  if (start == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t\r");
  return text.substr(start, end - start + 1);
}

// A flagfile line without its comment: one that starts the line, or one
// after a blank ("--listen=127.0.0.1  # loopback only"). A '#' inside a
// value ("--tls_ciphers=A#B") stays, since no blank comes before it.
std::string_view without_comment(std::string_view line) {
  for (size_t hash = line.find('#'); hash != std::string_view::npos;
       hash = line.find('#', hash + 1)) {
    if (hash == 0 || line[hash - 1] == ' ' || line[hash - 1] == '\t') {
      return line.substr(0, hash);
    }
  }
  return line;
}

// "--name=value" / "-name" -> name and optional value; gflags takes one dash
// or two, and dashes inside the name for underscores.
struct SplitFlag {
  std::string name;
  std::optional<std::string> value;
};
std::optional<SplitFlag> split_flag(std::string_view arg) {
  if (arg.size() < 2 || arg[0] != '-') return std::nullopt;
  arg.remove_prefix(arg[1] == '-' ? 2 : 1);
  if (arg.empty() || arg[0] == '-' || arg[0] == '=') return std::nullopt;
  SplitFlag flag;
  size_t equals = arg.find('=');
  flag.name = std::string(arg.substr(0, equals));
  for (char& c : flag.name)
    if (c == '-') c = '_';
  if (equals != std::string_view::npos) flag.value = std::string(arg.substr(equals + 1));
  return flag;
}

// "--noname" sets the boolean flag "name" to false, as in gflags.
struct ResolvedFlag {
  std::string name;
  FlagType type;
  bool negated;
};
ResolvedFlag resolve(const FlagRegistry& registry, const std::string& name) {
  FlagType type = registry.type_of(name);
  if (type == FlagType::kUnknown && name.starts_with("no") &&
      registry.type_of(name.substr(2)) == FlagType::kBool) {
    return {name.substr(2), FlagType::kBool, true};
  }
  return {name, type, false};
}

std::string where(const std::string& origin) { return " (" + origin + ")"; }

// gflags' --help* and --version, and memcached's --license (-i): "help",
// "helpfull", "version" or "license"; "" for any other flag.
std::string info_request_of(std::string_view name) {
  if (name == "version") return "version";
  if (name == "license") return "license";
  if (name == "help" || name == "helpshort") return "help";
  if (name.starts_with("help")) return "helpfull";  // helpfull, helpxml, helpon, ...
  return "";
}

// Walks arguments, expanding flagfiles as they come, and hands each flag to
// `on_flag` with its resolved name and value. Shared by the start and the
// SIGHUP re-read, which differ only in what they do with a flag.
class FlagWalker {
 public:
  using OnFlag = std::function<bool(const std::string& name, const std::string& value,
                                    const std::string& origin)>;

  FlagWalker(const FlagRegistry& registry, const ReadLines& read_lines, OnFlag on_flag)
      : registry_(registry), read_lines_(read_lines), on_flag_(std::move(on_flag)) {}

  void walk(const std::vector<SourcedArgument>& args, int depth) {
    for (size_t i = 0; i < args.size() && error.empty(); ++i) {
      const SourcedArgument& arg = args[i];
      std::optional<SplitFlag> flag = split_flag(arg.text);
      if (!flag) {
        error = "unexpected argument '" + arg.text + "'" + where(arg.origin) +
                ": flags are --name=value";
        return;
      }
      // A valued flag on the command line may take the next argument.
      bool from_file = arg.origin != kCommandLine;
      if (!flag->value && !from_file && i + 1 < args.size() && takes_value(flag->name) &&
          args[i + 1].origin == kCommandLine) {
        flag->value = args[++i].text;
      }
      one_flag(*flag, arg.origin, depth);
    }
  }

  std::string error;
  std::string info_request;
  std::vector<std::string> flagfiles;

 private:
  bool takes_value(const std::string& name) const {
    return name == "flagfile" || registry_.type_of(name) == FlagType::kValued;
  }

  void one_flag(const SplitFlag& flag, const std::string& origin, int depth) {
    if (flag.name == "flagfile") {
      if (!flag.value || flag.value->empty()) {
        error = "--flagfile needs a file name" + where(origin);
        return;
      }
      return flagfile(*flag.value, origin, depth);
    }
    if (flag.name == "fromenv" || flag.name == "tryfromenv") {
      if (!flag.value || flag.value->empty()) {
        error = "--" + flag.name + " needs a list of flags" + where(origin);
        return;
      }
      return from_environment(*flag.value, flag.name == "fromenv", origin, depth);
    }
    if (std::string request = info_request_of(flag.name); !request.empty()) {
      if (info_request.empty()) info_request = request;
      return;
    }
    auto [name, type, negated] = resolve(registry_, flag.name);
    if (negated && flag.value) type = FlagType::kUnknown;  // "--nofoo=x" means nothing
    std::string value = flag.value.value_or(negated ? "false" : "true");
    if (type == FlagType::kUnknown) {
      error = "unknown flag --" + flag.name + where(origin);
      return;
    }
    if (type == FlagType::kValued && !flag.value) {
      error = "--" + name + " needs a value" + where(origin);
      return;
    }
    if (!on_flag_(name, value, origin)) {
      error = "bad value '" + value + "' for --" + name + where(origin) + ": expected " +
              registry_.describe_type(name);
    }
  }

  void flagfile(const std::string& path, const std::string& origin, int depth) {
    if (depth >= kMaxFlagfileDepth) {
      error = "--flagfile=" + path + where(origin) + ": flagfiles nested too deep";
      return;
    }
    std::string read_error;
    std::optional<std::vector<std::string>> lines = read_lines_(path, &read_error);
    if (!lines) {
      error = "cannot read flagfile " + path + where(origin) + ": " + read_error;
      return;
    }
    if (depth == 0) flagfiles.push_back(path);  // nested ones come with it
    std::vector<SourcedArgument> args;
    for (size_t n = 0; n < lines->size(); ++n) {
      std::string_view line = trim(without_comment((*lines)[n]));
      if (line.empty()) continue;
      args.push_back({std::string(line), path + ":" + std::to_string(n + 1)});
    }
    walk(args, depth + 1);
  }

  // gflags' --fromenv=a,b and --tryfromenv=a,b: each flag set from
  // $FLAGS_a, as gflags sets it. Its mistakes are gflags' errors too (an
  // unknown flag, a bad value, and for --fromenv a variable not set), which
  // gflags' SetCommandLineOption would drop, starting with the default.
  void from_environment(const std::string& names, bool required, const std::string& origin,
                        int depth) {
    const std::string option = required ? "--fromenv" : "--tryfromenv";
    if (depth >= kMaxFlagfileDepth) {
      error = option + "=" + names + where(origin) + ": nested too deep";
      return;
    }
    for (size_t start = 0; start <= names.size() && error.empty();) {
      size_t comma = std::min(names.find(',', start), names.size());
      std::string name = names.substr(start, comma - start);
      start = comma + 1;
      if (name.empty()) continue;
      std::string variable = "FLAGS_" + name;
      const char* value = std::getenv(variable.c_str());
      if (resolve(registry_, name).type == FlagType::kUnknown) {
        error = "unknown flag --" + name + where(option + "=" + names + ", " + origin);
      } else if (value == nullptr && required) {
        error = option + "=" + names + where(origin) + ": " + variable +
                " not found in environment";
      } else if (value != nullptr) {
        one_flag({name, std::string(value)}, variable + " in the environment", depth + 1);
      }
    }
  }

  const FlagRegistry& registry_;
  const ReadLines& read_lines_;
  OnFlag on_flag_;
};

std::vector<SourcedArgument> from_command_line(const std::vector<std::string>& args) {
  std::vector<SourcedArgument> sourced;
  for (size_t i = 1; i < args.size(); ++i)
    sourced.push_back({args[i], std::string(kCommandLine)});
  return sourced;
}

}  // namespace

bool names_flag(const FlagRegistry& registry, std::string_view name) {
  std::string normalized(name);
  std::replace(normalized.begin(), normalized.end(), '-', '_');
  return resolve(registry, normalized).type != FlagType::kUnknown;
}

std::optional<std::vector<std::string>> read_file_lines(const std::string& path,
                                                        std::string* error) {
  std::ifstream file(path);
  if (!file) {
    *error = std::strerror(errno);
    return std::nullopt;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);)
    lines.push_back(std::move(line));
  if (file.bad()) {
    *error = std::strerror(errno);
    return std::nullopt;
  }
  return lines;
}

std::string LoadedFlags::origin_of(std::string_view name) const {
  for (auto it = origins.rbegin(); it != origins.rend(); ++it) {
    if (it->first == name) return it->second;
  }
  return "";
}

FlagRegistry gflags_registry() {
  FlagRegistry registry;
  registry.type_of = [](std::string_view name) {
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(std::string(name).c_str(), &info)) {
      return FlagType::kUnknown;
    }
    return info.type == "bool" ? FlagType::kBool : FlagType::kValued;
  };
  // SetCommandLineOption answers "" when gflags refuses the value.
  registry.set = [](std::string_view name, std::string_view value) {
    return !gflags::SetCommandLineOption(std::string(name).c_str(), std::string(value).c_str())
                .empty();
  };
  registry.describe_type = [](std::string_view name) {
    gflags::CommandLineFlagInfo info;
    gflags::GetCommandLineFlagInfo(std::string(name).c_str(), &info);
    if (info.type == "bool") return std::string("true or false");
    if (info.type == "string") return std::string("a string");
    return "a number (" + info.type + ")";
  };
  return registry;
}

LoadedFlags load_flags(const std::vector<std::string>& args, const FlagRegistry& registry,
                       const ReadLines& read_lines) {
  LoadedFlags loaded;
  FlagWalker walker(registry, read_lines,
                    [&](const std::string& name, const std::string& value,
                        const std::string& origin) {
                      if (!registry.set(name, value)) return false;
                      loaded.origins.emplace_back(name, origin);
                      return true;
                    });
  walker.walk(from_command_line(args), 0);
  loaded.error = std::move(walker.error);
  loaded.info_request = std::move(walker.info_request);
  loaded.flagfiles = std::move(walker.flagfiles);
  return loaded;
}

CollectedFlags collect_flags(const std::vector<std::string>& args, const FlagRegistry& registry,
                             const ReadLines& read_lines) {
  CollectedFlags collected;
  FlagWalker walker(registry, read_lines,
                    [&](const std::string& name, const std::string& value,
                        const std::string& origin) {
                      collected.settings.push_back({name, value, origin});
                      return true;
                    });
  walker.walk(from_command_line(args), 0);
  collected.error = std::move(walker.error);
  return collected;
}

}  // namespace lockcached::config
