// The start-up checks: of each flag's value alone (the table's check
// column, flags.h, or the parse of its text, parsed_flags.h), then the
// rules between flags. A problem stops the start with exit status 64 and
// one line, "--FLAG: MESSAGE (ORIGIN)".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "lockcached/config/flags.h"
#include "lockcached/config/parsed_flags.h"

namespace lockcached::config {

// The table's checks of numbers: "must be MIN..MAX"; "must be 0 or more"
// or "must be at least MIN".
Check between(int64_t min, int64_t max);
Check at_least(int64_t min);
// Of a choice: "must be a, b or c".
Check one_of(std::initializer_list<std::string_view> choices);
// Of a string flag, by one of the functions below.
Check text_check(std::string (*problem)(const std::string& text));

// What is wrong with the value of a string flag alone; "" when nothing.
std::string unix_socket_problem(const std::string& path);
std::string one_character_problem(const std::string& text);
std::string virtual_ip_problem(const std::string& address);
std::string user_problem(const std::string& user);

// The flag at fault and what is wrong with its value; empty when all is well.
struct FlagProblem {
  std::string flag;
  std::string message;
};

// The first problem: each flag's own check or the parse of its text
// (`parsed`'s problems), in the table's order, then the rules between
// flags (checks.cc), which read the parsed flags from `parsed`.
FlagProblem check_flags(const ParsedFlags& parsed);

// The first problem of the rules between flags that read a flag SIGHUP
// re-reads, for the values in FLAGS_* now: what SIGHUP must not change
// them to, since a start with them would be refused.
FlagProblem check_reloaded_rules(const ParsedFlags& parsed);

}  // namespace lockcached::config
