// What a connection needs from a protocol: feed it bytes, collect replies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lockcached/core/close_reason.h"
#include "lockcached/protocol/output_queue.h"

namespace lockcached::protocol {

// Why a replica refuses a write (docs/high-availability.md): each protocol
// puts it in its own error form.
constexpr std::string_view kReadOnlyReason = "read-only replica: writes go to the master";

// The most replies a connection queues for its client: once this much waits
// unsent, it runs no further request until the client has read some.
inline constexpr size_t kMaxQueuedOutput = 4 * 1024 * 1024;

// memcached's -R (CommandPolicy::requests_per_event): a cache protocol
// counts the requests it runs in one consume() and, once the limit ran,
// stops; the connection then yields (has_unfinished_work) and comes back
// for the rest after the other connections on its thread had their turn.
// It stops the same way once kMaxQueuedOutput of replies wait: one read
// of pipelined requests (a turn's worth) could queue far more than that,
// and pin every item its replies refer to. The connection comes back once
// the client read enough.
class TurnBudget {
 public:
  explicit TurnBudget(uint32_t limit) : limit_(limit) {}
  // At the start of consume().
  void start_turn() { used_ = 0; }
  // Before a complete request, with `out` the replies queued so far: false
  // once the turn's requests are spent or the queue is full.
  bool take(const OutputQueue& out) {
    if ((limit_ != 0 && used_ == limit_) || out.pending() >= kMaxQueuedOutput) {
      yielded_ = true;
      return false;
    }
    ++used_;
    return true;
  }
  // A turn ended on the limit and the connection has not come back yet.
  bool yielded() const { return yielded_; }
  void resume() { yielded_ = false; }

 private:
  const uint32_t limit_;  // 0: no limit
  uint32_t used_ = 0;
  bool yielded_ = false;
};

class ProtocolHandler {
 public:
  virtual ~ProtocolHandler() = default;
  // Parses and executes every complete request at the front of `input`,
  // appending the replies to `out`. Returns how many bytes it consumed; the
  // caller keeps the rest and offers it again with more bytes behind it.
  virtual size_t consume(std::string_view input, OutputQueue& out) = 0;
  // True once the connection must close after sending what is queued.
  virtual bool wants_close() const = 0;
  // Why, as `watch connevents` reports it: a client's quit is normal; a
  // request that makes the server hang up (memcached: an HTTP request, a
  // line too long) is an error.
  virtual core::CloseReason close_reason() const { return core::CloseReason::kNormal; }
  // A request that produces a lot of output (the `keys` walk) is answered in
  // steps, so that one client cannot hold up the others on its thread.
  // While it has unfinished work, consume() takes no further requests and
  // the connection calls continue_work() once per loop turn.
  virtual bool has_unfinished_work() const { return false; }
  virtual void continue_work(OutputQueue& /*out*/) {}
  // Waiting for something outside the connection (a lock wait): consume()
  // takes nothing meanwhile, and the protocol tells the connection through
  // its own callback when a reply is queued and it can go on.
  virtual bool blocked() const { return false; }
  // A storage command's data block is arriving (`stats conns`: conn_nread).
  virtual bool reading_data() const { return false; }
  // Waiting for a change of the cluster's members (`cluster transfer`),
  // which may make this node stop leading: the connection is not closed
  // with the others then, and closes itself once it has the reply.
  virtual bool awaits_cluster_change() const { return false; }
  // The connection is gone, for `reason` (called once, on its thread,
  // before destruction).
  virtual void connection_closed(core::CloseReason /*reason*/) {}
};

}  // namespace lockcached::protocol
