// One client connection: reads bytes, hands them to its protocol handler,
// writes the replies back with writev. Lives and dies on its worker's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "lockcached/core/command_core.h"
#include "lockcached/core/watch.h"
#include "lockcached/net/reactor.h"
#include "lockcached/protocol/handler.h"
#include "lockcached/protocol/output_queue.h"
#include "lockcached/server/settings.h"

namespace lockcached::server {

class Worker;

class Connection final : public net::EventHandler {
 public:
  // `peer`: the client's address as accept() gave it (AF_INET or AF_INET6).
  Connection(Worker& worker, int fd, uint64_t id, PortKind kind, const sockaddr_in6& peer);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void on_event(uint32_t events) override;
  // Idle: nothing read since `since` (monotonic ms), and not waiting for a
  // lock (a lock wait is quiet by nature).
  bool idle_since(int64_t since) const;
  // Closes the socket at once; the worker frees the object after the batch.
  // `reason` is what `watch connevents` reports.
  void close(core::CloseReason reason = core::CloseReason::kError);
  bool closed() const { return fd_ < 0; }
  PortKind kind() const { return kind_; }

 private:
  void on_readable();
  void on_writable();
  void close_when_sent();
  // A reply was queued outside a read (a lock wait ended): send it and go
  // on with requests that arrived meanwhile.
  void resume_input();
  // Feeds input to the protocol, keeps what it did not consume, replies.
  void run(std::string_view input, bool from_scratch);
  void choose_protocol(char first_byte);
  void keep_unconsumed(std::string_view rest, bool from_scratch);
  void flush();
  void update_interest();
  // `watch`: the connection only streams its watcher's lines from now on.
  void start_watch();
  // Moves the watcher's pending lines to the socket, once what was taken
  // before is sent: a watcher that does not read leaves its lines in the
  // watcher's bounded buffer, where the next ones are dropped and counted.
  void pump_watch();
  void discard_input();

  Worker& worker_;
  int fd_;
  const PortKind kind_;
  uint32_t interest_ = 0;
  int64_t last_read_ms_;
  bool draining_ = false;  // closing once the queued replies are sent
  core::ClientInfo client_;  // before core_, which points to it
  core::CommandCore core_;
  std::unique_ptr<protocol::ProtocolHandler> protocol_;  // chosen by the first byte
  protocol::OutputQueue out_;
  // The start of a request that has not fully arrived. Usually empty: reads
  // land in the worker's scratch buffer and only a leftover is kept here, so
  // an idle connection holds no buffer.
  std::unique_ptr<char[]> partial_;
  size_t partial_size_ = 0;
  size_t partial_capacity_ = 0;
  // While watching: what the watcher's wake-ups, posted from other
  // threads, find this connection through; reset when it closes.
  std::shared_ptr<Connection*> watch_self_;
  std::string watch_lines_;  // scratch: the lines taken, on their way to out_
};

}  // namespace lockcached::server
