// memcached's command-line options, translated into lockcached's gflags flags
// before gflags parses the command line, so that init scripts and container
// commands written for memcached start lockcached unchanged.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lockcached::config {

// What translate_memcached_options made of a command line.
struct TranslatedCommandLine {
  // The program name, then every argument, memcached's options replaced by
  // the equivalent --flag=value in the same position (so that the usual rule,
  // a later flag overrides an earlier one, holds across both styles).
  std::vector<std::string> args;
  // Options accepted but without effect (-U with a port): log them.
  std::vector<std::string> warnings;
  // Not empty: the command line is unusable (exit with EX_USAGE).
  std::string error;
};

// Whether gflags knows a flag of this name (e.g. "logtostderr" or
// "nologtostderr"): such a single-dash argument is gflags', not memcached's.
using IsGflag = std::function<bool(std::string_view name)>;

// Translates memcached's -p -U -l -m -c -t -I -v -u -d -P -Z -Y -S -h -V (joined
// "-p11211", separate "-p 11211" and bundled "-vv" forms, as getopt takes
// them) and the long options --memory-limit --conn-limit --max-item-size
// --udp-port --verbose --daemon --pidfile --enable-ssl --auth-file
// --enable-sasl. memcached's --port --listen
// --threads --user are lockcached's gflags flags of the same meaning and
// pass through untouched. memcached options lockcached does not implement
// and unknown single-letter options are errors. Everything else passes
// through to the strict flag loader (flag_loader.h). Which of memcached's
// options sets which of our flags is the flag table's (flags.h).
TranslatedCommandLine translate_memcached_options(const std::vector<std::string>& args,
                                                  const IsGflag& is_gflag);

// memcached's -I size: a number of bytes with an optional k/K/m/M suffix
// ("2m" is 2097152). False when the text is no such size.
bool parse_item_size(std::string_view text, int64_t* bytes);

}  // namespace lockcached::config
