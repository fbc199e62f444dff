// lockcached-cli's command line: options may come anywhere before "--";
// after "--" come the command that `run` and `lock` hold their lock for (for
// the other commands, plain arguments that may start with "-"). Where the
// server is may also come from the environment (LOCKCACHED_HOST,
// LOCKCACHED_PORT, LOCKCACHED_LOCK_PORT); the command line wins. So may the
// password for --user (LOCKCACHED_PASSWORD, where --password-file is not
// given): never an option, which `ps` would show.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "login.h"
#include "tls_session.h"

namespace lockcached::cli {

struct Options {
  std::string host = "localhost";
  uint16_t port = 11211;
  uint16_t lock_port = 11400;
  bool binary = false;
  double timeout = 10;  // seconds for connecting and for each reply
  uint32_t flags = 0;
  int64_t exptime = 0;
  double wait = 0;   // run: seconds to wait for the lock; infinity: forever
  double ping = 10;  // seconds between keep-alive requests while a command runs
  bool kill_on_loss = false;
  TlsOptions tls;              // --tls and its files, for both ports
  std::optional<Login> login;  // --user: log in on both ports
  std::string password_file;   // where login's password was read from
  bool help = false;
  bool version = false;

  std::vector<std::string> args;                    // the command word and its arguments
  std::optional<std::vector<std::string>> program;  // after "--", for run and lock
  std::set<std::string> given;                      // options on the command line, no dashes
};

// Looks up an environment variable: its value, or nullptr when it is not set.
// Passed in rather than read from the process, so that parsing depends on
// nothing but its arguments.
using Environment = std::function<const char*(const char* name)>;

// Throws UsageError for anything it cannot make sense of, including an
// option given to a command that does not take it and a LOCKCACHED_*
// variable that is invalid where the command line does not override it.
// Reads --password-file, the one file read here: a Failure with EX_CONFIG
// when it cannot be read or holds no usable password.
Options parse_options(int argc, char** argv, const Environment& environment);

}  // namespace lockcached::cli
