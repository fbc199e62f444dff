// Strict configuration: every flag on the command line and in a flagfile
// must name a known flag with a valid value, or the server does not start.
//
// gflags itself ignores an unknown flag in a flagfile (a typo such as
// --listne=127.0.0.1 left the server listening everywhere) and exits 1 on
// an unknown flag on the command line, below the 64 (EX_USAGE) that
// lockcached.service counts on not to restart in a loop. So lockcached
// reads its flagfiles itself, remembers where each flag came from, and sets
// flags one by one; gflags only stores them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockcached::config {

// One argument and where it came from: "command line" or "FILE:LINE".
struct SourcedArgument {
  std::string text;
  std::string origin;
};

// What a flag registry (gflags in the server; a fake in tests) says of a name.
enum class FlagType { kUnknown, kBool, kValued };

struct FlagRegistry {
  // The type of the flag called `name` (dashes already made underscores).
  std::function<FlagType(std::string_view name)> type_of;
  // Sets it; false when `value` is no valid value for it. `describe_type`
  // fills what a valid value is, for the error message.
  std::function<bool(std::string_view name, std::string_view value)> set;
  std::function<std::string(std::string_view name)> describe_type;
};

// The registry of the flags gflags knows in this process.
FlagRegistry gflags_registry();

// Whether `name` (dashes or underscores) names a flag of `registry`, or is
// "no" before a boolean one: how memcached's option translator tells
// gflags' single-dash arguments ("-logtostderr") from its own ("-vv").
bool names_flag(const FlagRegistry& registry, std::string_view name);

// How to read a flagfile: its lines, or nullopt with *error set.
using ReadLines = std::function<std::optional<std::vector<std::string>>(const std::string& path,
                                                                         std::string* error)>;

// Reads a file from disk (the ReadLines of the server).
std::optional<std::vector<std::string>> read_file_lines(const std::string& path,
                                                        std::string* error);

struct LoadedFlags {
  // The request for help, version or license instead of a start: "help",
  // "helpfull", "version", "license"; empty for a normal start.
  std::string info_request;
  // Every flagfile named, in order: what SIGHUP re-reads.
  std::vector<std::string> flagfiles;
  // The flags set, name -> the origin of the setting that won.
  std::vector<std::pair<std::string, std::string>> origins;
  // Not empty: the configuration is unusable; one line, naming the flag and
  // where it came from. The server exits 64 (EX_USAGE).
  std::string error;

  // Where `name` was last set, or "" when it keeps its default.
  std::string origin_of(std::string_view name) const;
};

// Applies `args` (argv after memcached's options were translated, the
// program name first) to `registry`: each --flagfile=FILE is replaced by the
// flags in FILE (one per line, "#" comments, blank lines; nested flagfiles
// allowed), then every --name=value, --name value, --name and --noname is
// set in order, so that a later setting wins as in gflags. Stops at the
// first problem: an unknown flag, a bad value, a missing file, a stray word.
LoadedFlags load_flags(const std::vector<std::string>& args, const FlagRegistry& registry,
                       const ReadLines& read_lines = read_file_lines);

// Walks `args` as load_flags does, flagfiles read afresh, but sets nothing:
// the name and value of every setting in order, a later one overriding an
// earlier one, with where it came from. For SIGHUP, where the caller decides what may change at run
// time; the command line keeps its precedence over the files.
struct CollectedFlag {
  std::string name;
  std::string value;
  std::string origin;  // "command line" or "FILE:LINE", as start-up errors name it
};
struct CollectedFlags {
  std::vector<CollectedFlag> settings;
  std::string error;
};
CollectedFlags collect_flags(const std::vector<std::string>& args, const FlagRegistry& registry,
                             const ReadLines& read_lines = read_file_lines);

}  // namespace lockcached::config
