// The configuration, loaded at start: memcached's options translated
// (command_line.h), flagfiles read (flag_loader.h), every flag checked
// (checks.h) and the files the flags name loaded; and read again at SIGHUP.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lockcached/config/settings.h"

namespace lockcached::config {

// Exit status for a configuration mistake (lockcached(1), "EXIT STATUS"):
// EX_USAGE, which tells lockcached.service (RestartPreventExitStatus=64)
// that restarting cannot help.
constexpr int kUsageError = 64;

// What main does to the process itself, around the server.
struct ProcessSettings {
  bool daemonize = false;         // memcached's -d
  std::string pid_file;           // -P
  std::string user;               // -u: run as this user once the ports are bound
  bool lock_memory = false;       // -k: mlockall
  bool enable_coredumps = false;  // -r
};

struct Configuration {
  // The command line, memcached's options made flags: what SIGHUP walks
  // again (its flagfiles read afresh).
  std::vector<std::string> args;
  ParsedFlags parsed;  // for server_settings: what the checks judged
  LoadedFiles files;
  ProcessSettings process;
};

// The command line made strict, or an exit: 64 (EX_USAGE) with one line on
// stderr for a mistake, 0 after --help, --version or --license. Before
// logging starts; warnings go to stderr.
Configuration load(int argc, char** argv);

// SIGHUP: `args` (Configuration::args) walked again, the flagfiles read
// afresh, for the flags that may change while serving (Reload::kOnSighup):
// those that changed, each logged, for Server::reload. nullopt (logged) for
// a mistake anywhere, or values that the rules between flags (checks.h)
// refuse with `parsed` (Configuration::parsed): then nothing changes.
std::optional<server::RunTimeChanges> reloaded(const std::vector<std::string>& args,
                                               const ParsedFlags& parsed);

}  // namespace lockcached::config
