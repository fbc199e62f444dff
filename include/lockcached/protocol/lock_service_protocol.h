// The named-lock service's line protocol (../shared/specs/lock-service.md):
// one request per line, replies "<code> <word or value>". Parses and
// formats only; locks::LockService does the work.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "lockcached/locks/lock_service.h"
#include "lockcached/net/reactor.h"
#include "lockcached/protocol/handler.h"
#include "lockcached/protocol/text_parser.h"

namespace lockcached::protocol {

// What a lock-service connection lends its protocol.
struct LockServiceContext {
  locks::LockService& service;
  net::Reactor& reactor;  // the connection's own: timers and grant delivery
  OutputQueue& out;       // where replies to waits go when the wait ends
  // Called on the reactor thread once such a reply is queued.
  std::function<void()> on_async_reply;
  // True while this server is a replica: only stats and quit are served.
  const std::atomic<bool>* read_only = nullptr;
};

class LockServiceProtocol final : public ProtocolHandler {
 public:
  explicit LockServiceProtocol(LockServiceContext context);
  ~LockServiceProtocol() override;

  size_t consume(std::string_view input, OutputQueue& out) override;
  bool wants_close() const override { return close_; }
  bool blocked() const override { return wait_ != nullptr; }
  void connection_closed() override;

 private:
  void execute(std::string_view line, OutputQueue& out);
  void lock(const Words& words, OutputQueue& out);
  void unlock(const Words& words, OutputQueue& out);
  void conn_id(const Words& words, OutputQueue& out);
  void set_timeout(const Words& words, OutputQueue& out);
  void stats(const Words& words, OutputQueue& out);
  void start_wait(std::string_view name, int64_t wait_ms, OutputQueue& out);
  // Both run on the reactor thread; exactly one of them answers a wait.
  void on_granted(uint64_t token);
  void on_wait_timeout();
  void end_wait(std::string_view reply);

  LockServiceContext context_;
  std::shared_ptr<locks::Session> session_;
  std::shared_ptr<locks::WaitTicket> wait_;
  net::Reactor::TimerId wait_timer_ = 0;
  // Callbacks that may outlive this object hold a weak_ptr to this.
  std::shared_ptr<LockServiceProtocol*> self_;
  bool close_ = false;
  bool closed_ = false;
};

}  // namespace lockcached::protocol
