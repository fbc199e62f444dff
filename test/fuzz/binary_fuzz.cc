// libFuzzer harness: the binary protocol (with the locking opcodes) over a
// small store, two connections, chunked input. See cache_harness.h for the
// input format and README.md for how to run it.
#include <cstddef>
#include <cstdint>

#include "cache_harness.h"
#include "lockcached/protocol/binary_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  lockcached::fuzz::CacheHarness<lockcached::protocol::BinaryProtocol> harness(data, size);
  harness.run();
  return 0;
}
