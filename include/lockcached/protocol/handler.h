// What a connection needs from a protocol: feed it bytes, collect replies.
#pragma once

#include <cstddef>
#include <string_view>

#include "lockcached/protocol/output_queue.h"

namespace lockcached::protocol {

class ProtocolHandler {
 public:
  virtual ~ProtocolHandler() = default;
  // Parses and executes every complete request at the front of `input`,
  // appending the replies to `out`. Returns how many bytes it consumed; the
  // caller keeps the rest and offers it again with more bytes behind it.
  virtual size_t consume(std::string_view input, OutputQueue& out) = 0;
  // True once the connection must close after sending what is queued.
  virtual bool wants_close() const = 0;
};

}  // namespace lockcached::protocol
