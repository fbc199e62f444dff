#include "lockcached/server/watch_stream.h"

#include <utility>

namespace lockcached::server {

WatchStream::WatchStream(core::WatchHub& hub, std::shared_ptr<core::Watcher> watcher,
                         net::Reactor& reactor, std::function<void()> pump)
    : hub_(hub),
      watcher_(std::move(watcher)),
      pump_(std::make_shared<std::function<void()>>(std::move(pump))) {
  // Runs on the emitting thread, when a line lands in the empty buffer:
  // the stream's own thread takes it.
  watcher_->attach([reactor = &reactor, weak = std::weak_ptr(pump_)] {
    reactor->post([weak] {
      if (auto pump = weak.lock()) (*pump)();
    });
  });
}

WatchStream::~WatchStream() {
  watcher_->detach();
  hub_.remove(watcher_);
}

bool WatchStream::take(protocol::OutputQueue& out) {
  watcher_->take(lines_);
  if (lines_.empty()) return false;
  out.append(lines_);
  lines_.clear();
  return true;
}

}  // namespace lockcached::server
