// A text-protocol client connection for unit tests, without a socket: a
// command core and a TextProtocol of its own, fed bytes the way a
// Connection feeds them.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "lockcached/core/command_core.h"
#include "lockcached/core/stats.h"
#include "lockcached/protocol/output_queue.h"
#include "lockcached/protocol/text_protocol.h"
#include "lockcached/store/store.h"

namespace lockcached::protocol {

struct TextConnection {
  TextConnection(store::Store& store, core::StatsSource& source, store::OwnerId owner)
      : core(store, stats, source, owner), protocol(core) {}

  // Appends `bytes` to what the protocol left unconsumed, offers it all, and
  // returns the replies produced (the consume() contract of a connection:
  // unfinished work is continued before more requests are offered).
  std::string feed(std::string_view bytes) {
    pending.append(bytes);
    for (;;) {
      size_t consumed = protocol.consume(pending, out);
      EXPECT_LE(consumed, pending.size());
      pending.erase(0, consumed);
      if (!protocol.has_unfinished_work()) break;
      while (protocol.has_unfinished_work())
        protocol.continue_work(out);
      if (pending.empty() || protocol.wants_close()) break;
    }
    return out.take_all();
  }

  core::ThreadStats stats;
  core::CommandCore core;
  TextProtocol protocol;
  OutputQueue out;
  std::string pending;
};

}  // namespace lockcached::protocol
