// SIGHUP's re-read of the configuration (configuration.h).
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <glog/logging.h>

#include "lockcached/config/checks.h"
#include "lockcached/config/configuration.h"
#include "lockcached/config/flag_loader.h"
#include "lockcached/config/flags.h"
#include "lockcached/config/parsed_flags.h"
#include "lockcached/core/verbosity.h"

namespace lockcached::config {
namespace {

using Values = std::map<std::string_view, int64_t>;

// What a start would say of `text` as the value of `name`, alone (the
// flag loader's words: gflags' parse of its type, then the table's check
// of the value or the parse of its text, checks.h); "" when nothing.
std::string value_problem(const std::string& name, const std::string& text,
                          const std::string& origin, std::optional<Value>* value) {
  *value = value_from_text(name, text);
  if (!*value) {
    return "bad value '" + text + "' for --" + name + " (" + origin + "): expected " +
           gflags_registry().describe_type(name);
  }
  const Flag* flag = find_flag(name);
  std::string message = parse_problem(name, text);
  if (message.empty() && flag != nullptr && flag->check) message = flag->check(**value);
  return message.empty() ? "" : "--" + name + ": " + message + " (" + origin + ")";
}

// The flags SIGHUP re-reads, as the command line and the flagfiles have
// them now (the last setting of each wins); nullopt, logged, for a mistake.
// Every setting is checked as a start checks it, those of the flags SIGHUP
// leaves alone too: the next start would refuse a file that SIGHUP took.
std::optional<Values> reread(const std::vector<std::string>& args) {
  CollectedFlags collected = collect_flags(args, gflags_registry());
  if (!collected.error.empty()) {
    LOG(ERROR) << "SIGHUP: configuration unchanged: " << collected.error;
    return std::nullopt;
  }
  Values values;
  for (const auto& [name, text, origin] : collected.settings) {
    std::optional<Value> value;
    if (std::string problem = value_problem(name, text, origin, &value); !problem.empty()) {
      LOG(ERROR) << "SIGHUP: configuration unchanged: " << problem;
      return std::nullopt;
    }
    const Flag* flag = find_flag(name);
    if (flag == nullptr || flag->reload != Reload::kOnSighup) continue;
    values[flag->name] = std::get<int64_t>(*value);  // whole numbers (flags_test.cc)
  }
  return values;
}

// Whether the rules between flags allow `values` (a start with them would
// be refused otherwise); logged when they do not. The values are set for
// the rules to read, then set back: reloaded() sets what changed. Not
// --v, whose level in force is core::log_verbosity, and which no rule reads.
bool rules_allow(const Values& values, const ParsedFlags& parsed) {
  std::vector<std::pair<int32_t*, int32_t>> in_force;
  for (const auto& [name, value] : values) {
    if (name == "v") continue;
    auto* flag = std::get<int32_t*>(find_flag(name)->storage);  // flags_test.cc
    in_force.emplace_back(flag, *flag);
    *flag = static_cast<int32_t>(value);
  }
  FlagProblem problem = check_reloaded_rules(parsed);
  for (auto [flag, value] : in_force)
    *flag = value;
  if (problem.flag.empty()) return true;
  LOG(ERROR) << "SIGHUP: configuration unchanged: --" << problem.flag << ": " << problem.message;
  return false;
}

// `name`'s value where the files changed it from `now`, logged; else nullopt.
std::optional<int> changed(const Values& values, std::string_view name, int now) {
  auto found = values.find(name);
  if (found == values.end() || found->second == now) return std::nullopt;
  LOG(INFO) << "SIGHUP: --" << name << " " << now << " -> " << found->second;
  return static_cast<int>(found->second);
}

}  // namespace

std::optional<server::RunTimeChanges> reloaded(const std::vector<std::string>& args,
                                               const ParsedFlags& parsed) {
  std::optional<Values> values = reread(args);
  if (!values || !rules_allow(*values, parsed)) return std::nullopt;
  server::RunTimeChanges changes;
  if (std::optional<int> megabytes = changed(*values, "memory_limit_mb", FLAGS_memory_limit_mb)) {
    FLAGS_memory_limit_mb = *megabytes;
    changes.memory_limit = static_cast<size_t>(*megabytes) << 20;
  }
  if (std::optional<int> seconds = changed(*values, "idle_timeout", FLAGS_idle_timeout)) {
    FLAGS_idle_timeout = *seconds;
    changes.idle_timeout_seconds = seconds;
  }
  // Against the level in force, which the verbosity command may have changed.
  changes.verbosity = changed(*values, "v", core::log_verbosity.load(std::memory_order_relaxed));
  LOG(INFO) << "SIGHUP: configuration re-read; other flags take effect at the next start";
  return changes;
}

}  // namespace lockcached::config
