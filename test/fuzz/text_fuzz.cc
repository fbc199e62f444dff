// libFuzzer harness: the text protocol (classic and meta commands) over a
// small store, two connections, chunked input. See cache_harness.h for the
// input format and README.md for how to run it.
#include <cstddef>
#include <cstdint>

#include "cache_harness.h"
#include "lockcached/core/verbosity.h"
#include "lockcached/protocol/text_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // An input's `verbosity 2` would have every later input log each request.
  lockcached::core::log_verbosity.store(0, std::memory_order_relaxed);
  lockcached::fuzz::CacheHarness<lockcached::protocol::TextProtocol> harness(data, size);
  harness.run();
  return 0;
}
