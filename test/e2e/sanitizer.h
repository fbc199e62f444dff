// Which sanitizer the server under test was built with, and how much that
// relaxes the tests' RSS and latency bounds (and nothing else: every
// functional assertion holds under a sanitizer too, but for what its
// run-time itself defeats, such as mlockall).
//
// Told by the server binary itself (the one ServerProcess starts, or the one
// its wrapper script runs: server_run_by), not by how this test binary was
// built: CI's sanitizer stages run these tests against a server of another
// build (LOCKCACHED_TEST_SERVER_DIR), and $LOCKCACHED_SERVER_BINARY may name
// any. An instrumented binary names the sanitizer's run-time entry point
// (__asan_init, __tsan_init) among its symbols. $LOCKCACHED_SANITIZER
// (address, thread, none) overrides the guess.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "server_process.h"

namespace e2e {

enum class Sanitizer { kNone, kAddress, kThread };

inline Sanitizer detect_server_sanitizer() {
  if (const char* forced = std::getenv("LOCKCACHED_SANITIZER")) {
    std::string_view name = forced;
    if (name == "address") return Sanitizer::kAddress;
    if (name == "thread") return Sanitizer::kThread;
    if (name == "none") return Sanitizer::kNone;
  }
  // Through a wrapper script, the server it runs.
  std::ifstream file(server_run_by(server_binary()), std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  if (bytes.find("__asan_init") != std::string::npos) return Sanitizer::kAddress;
  if (bytes.find("__tsan_init") != std::string::npos) return Sanitizer::kThread;
  return Sanitizer::kNone;
}

inline Sanitizer server_sanitizer() {
  static const Sanitizer sanitizer = detect_server_sanitizer();
  return sanitizer;
}

inline const char* sanitizer_name() {
  switch (server_sanitizer()) {
    case Sanitizer::kAddress:
      return "AddressSanitizer";
    case Sanitizer::kThread:
      return "ThreadSanitizer";
    default:
      return "no sanitizer";
  }
}

// An RSS bound (or growth allowance) of a normal server, for the server under
// test. ASan keeps up to 256 MiB of freed blocks in quarantine, pads every
// block with redzones and adds an eighth in shadow; TSan's shadow is several
// times the memory it watches. Neither build uses jemalloc. Still far below
// what unbounded growth reaches.
inline uint64_t rss_bound(uint64_t normal) {
  constexpr uint64_t kMiB = 1024 * 1024;
  switch (server_sanitizer()) {
    case Sanitizer::kAddress:
      return normal * 2 + 320 * kMiB;
    case Sanitizer::kThread:
      return normal * 4 + 320 * kMiB;
    default:
      return normal;
  }
}

// A latency bound of a normal server, for the server under test: an
// instrumented server (and test client) is several times slower per request,
// and a single slow round trip of thousands measured is what these bounds
// catch, so they take the worst case, not the average slowdown.
inline double latency_bound_ms(double normal) {
  switch (server_sanitizer()) {
    case Sanitizer::kAddress:
      return normal * 10;
    case Sanitizer::kThread:
      return normal * 20;
    default:
      return normal;
  }
}

}  // namespace e2e
