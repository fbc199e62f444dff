// `watch`: a connection turned into a stream of its watcher's lines
// (core/watch.h). The connection owns one from the `watch` command to its
// close; from then on it only writes what this takes.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "lockcached/core/watch.h"
#include "lockcached/net/reactor.h"
#include "lockcached/protocol/output_queue.h"

namespace lockcached::server {

class WatchStream {
 public:
  // Streams `watcher`'s lines: whenever a line lands in its empty buffer,
  // `pump` runs on `reactor`'s thread, until this stream is destroyed.
  WatchStream(core::WatchHub& hub, std::shared_ptr<core::Watcher> watcher, net::Reactor& reactor,
              std::function<void()> pump);
  // The watcher stops: the hub forgets it, and wake-ups still on their way
  // find nobody.
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  // Moves the watcher's pending lines to the end of `out`; false when
  // there were none. Call it only once what it took before is sent: a
  // watcher that does not read then leaves its lines in the watcher's
  // bounded buffer, where the next ones are dropped and counted, and its
  // memory stays at that buffer and one socket's worth. Each take empties
  // the buffer, so the next line wakes the stream again.
  bool take(protocol::OutputQueue& out);

 private:
  core::WatchHub& hub_;
  const std::shared_ptr<core::Watcher> watcher_;
  // What the wake-ups, posted from other threads, find this stream's pump
  // through; they hold it weakly.
  const std::shared_ptr<std::function<void()>> pump_;
  std::string lines_;  // scratch: the lines taken, on their way to `out`
};

}  // namespace lockcached::server
