// How lockcached-cli ends when something goes wrong: every error is a
// Failure carrying the exit status it must end with (sysexits.h codes, so
// that cron, systemd and shell scripts can tell "busy" from "broken").
#pragma once

#include <sysexits.h>

#include <stdexcept>
#include <string>

namespace lockcached::cli {

// The server answered, and the answer was no: a miss, NOT_STORED, LOCKED...
constexpr int kExitNo = 1;
// The server refused --user and its password.
constexpr int kExitLoginRefused = EX_NOPERM;
// What a shell answers for a command it found but could not execute, and for
// one it did not find.
constexpr int kExitCannotExecute = 126;
constexpr int kExitCommandNotFound = 127;

class Failure : public std::runtime_error {
 public:
  Failure(int exit_code, const std::string& message)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// A mistake on the command line: exit 64 with a pointer to --help.
class UsageError : public Failure {
 public:
  explicit UsageError(const std::string& message) : Failure(EX_USAGE, message) {}
};

}  // namespace lockcached::cli
