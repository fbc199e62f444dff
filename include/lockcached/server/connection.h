// One client connection: reads bytes, hands them to its protocol handler,
// writes the replies back with writev. Lives and dies on its worker's thread.
// Its I/O follows the reactor's backend: readiness and its own system calls
// (epoll, connection.cc), or receives and sends the reactor completes
// (io_uring, connection_uring.cc). Either way the raw bytes pass through its
// Transport (plain or TLS), and a `watch` turns it into a WatchStream's
// writer.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
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
#include "lockcached/server/connection_status.h"
#include "lockcached/server/input_buffer.h"
#include "lockcached/server/settings.h"
#include "lockcached/server/transport.h"
#include "lockcached/server/watch_stream.h"
#include "lockcached/tls/context.h"

namespace lockcached::server {

class Worker;

class Connection final : public net::EventHandler {
 public:
  // `peer`: the client's address as accept() gave it; `local`: this
  // end's; `tls`: the listener's TLS configuration, nullptr on a plain port.
  Connection(Worker& worker, int fd, uint64_t id, PortKind kind, net::Endpoint peer,
             net::Endpoint local, std::shared_ptr<const tls::Context> tls = nullptr);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void on_event(uint32_t events) override;
  void on_received(const char* data, int result, bool more) override;
  void on_sent(int result) override;
  // Idle: no request (nor a lock wait's end) since `since` (monotonic ms)
  // and waiting for one (--idle_timeout; connection.cc says what does not
  // count).
  bool idle_since(int64_t since) const;
  // A TLS client that has not finished its handshake since `since`.
  bool handshake_pending_since(int64_t since) const;
  // Closes the socket at once; the worker frees the object after the batch.
  // `reason` is what `watch connevents` reports.
  void close(core::CloseReason reason = core::CloseReason::kError);
  // The same, after the transport's goodbye (TLS: close_notify), sent where
  // the stream allows it: a client cut off (--idle_timeout) sees a clean
  // end, as after `quit`.
  void close_politely(core::CloseReason reason);
  // Closes after the socket failed with `error` (an errno): kDeadPeer when
  // the peer stopped answering (--tcp_keepalive, net::peer_vanished),
  // kError otherwise.
  void close_after_error(int error);
  bool closed() const { return io_ == IoState::kClosed; }
  // The reactor or the loop still owes this connection a call: the worker
  // frees a closed connection only once nothing is.
  bool referenced() const {
    return receive_ != Receive::kOff || sending_ || next_turn_pending_;
  }
  PortKind kind() const { return kind_; }
  bool awaits_cluster_change() const { return protocol_ && protocol_->awaits_cluster_change(); }
  // Safe from any thread while the worker's registry keeps the connection.
  ConnectionStatus status() const;

 private:
  // Where the connection's I/O stands, one state at a time (memcached's
  // drive_machine keeps one too). What the protocol is doing (a long
  // command, a lock wait) and what waits to be sent are asked of the
  // protocol and the queues; this is what the connection itself decided.
  enum class IoState : uint8_t {
    kServing,   // reads requests, writes replies
    kWatching,  // `watch`: writes its watcher's lines; reads only to see the client go
    kDraining,  // reads nothing more: closes once what is queued was sent
    kClosed,    // the socket is closed; freed once the reactor owes it nothing
  };
  // io_uring: the connection's one receive.
  enum class Receive : uint8_t {
    kOff,
    kArmed,     // it goes on delivering until stopped
    kStopping,  // asked to stop (input is paused); deliveries may still come
  };

  static std::unique_ptr<Transport> make_transport(Worker& worker, uint64_t id,
                                                   std::shared_ptr<const tls::Context> tls);
  void on_readable();
  void on_writable();
  // What the transport made of bytes from the client goes to the protocol.
  void finish_read(const Input& input);
  void take_input(std::string_view bytes);
  void close_when_sent();
  void end_of_input();
  // A reply was queued outside a read (a lock wait ended): send it and go
  // on with requests that arrived meanwhile.
  void on_async_reply();
  void resume_input();
  // Feeds input to the protocol, keeps what it did not consume, replies.
  void run(std::string_view input);
  void choose_protocol(char first_byte);
  void flush();
  // Replies or raw bytes the socket has not taken yet.
  bool output_pending() const {
    return !out_.empty() || sending_ || transport_->holds_output();
  }
  // Reply bytes not sent yet (TLS: not encrypted yet).
  size_t unsent() const { return out_.pending() + in_flight_.pending(); }
  bool wants_input(bool unfinished) const {
    return io_ == IoState::kServing && unsent() < kMaxPendingOutput && !unfinished;
  }
  // Draining is over: the transport says goodbye, the socket closes.
  void finish_draining();
  // Last words before a close: what the socket takes now, nothing more.
  void send_last_words();
  void update_interest();

  // io_uring (connection_uring.cc).
  void update_io(bool input, bool unfinished);
  void submit_send();
  // Sends the next raw bytes of in_flight_, if any; false when the stream
  // broke.
  bool send_in_flight();
  // io_uring: the socket takes bytes again after a send's EAGAIN.
  void on_room_to_send();
  // Bytes that came while input was paused wait to be handled.
  void stash(const char* data, size_t size);
  void call_next_turn();
  void on_next_turn();
  // `watch`: the connection only streams its watcher's lines from now on.
  void start_watch();
  // Moves the watcher's pending lines to the socket, once what was taken
  // before is sent (WatchStream::take).
  void pump_watch();
  void discard_input();
  // Publishes what the connection does now for `stats conns`.
  void note_state(bool unfinished, bool pending);
  void set_state(ConnState state) {
    if (state_.load(std::memory_order_relaxed) != state)
      state_.store(state, std::memory_order_relaxed);
  }

  // Stop reading from a client while this much of its output waits unsent: a
  // client that never reads must not make the server buffer without bound.
  static constexpr size_t kMaxPendingOutput = protocol::kMaxQueuedOutput;

  Worker& worker_;
  int fd_;
  const bool completes_io_;  // the reactor's backend is io_uring
  const PortKind kind_;
  const net::Endpoint local_;
  const int64_t accepted_ms_;
  const bool over_tls_;  // accepted on a TLS port
  IoState io_ = IoState::kServing;
  const std::unique_ptr<Transport> transport_;
  uint32_t interest_ = 0;
  // When the client last sent a request, or a lock wait of its ended (a
  // waiter sends nothing meanwhile): --idle_timeout counts from there, and
  // `stats conns` shows it. Written by this connection's thread only; read
  // by `stats conns` from any.
  std::atomic<int64_t> last_active_ms_;
  std::atomic<ConnState> state_{ConnState::kWaiting};
  std::atomic<ConnProtocol> protocol_kind_{ConnProtocol::kUndecided};
  const net::ClientInfo client_;  // its id and the peer; before core_, which points to it
  core::CommandCore core_;
  std::unique_ptr<protocol::ProtocolHandler> protocol_;  // chosen by the first byte
  protocol::OutputQueue out_;
  InputBuffer input_;
  std::unique_ptr<WatchStream> watch_;  // once a `watch` started

  // io_uring: what is in flight. A send's bytes stay put until it ends:
  // replies queued meanwhile go to out_, and in_flight_ holds the ones
  // being sent (TLS: being encrypted, the transport holding the ciphertext).
  Receive receive_ = Receive::kOff;
  bool receive_once_ = false;  // one buffer per receive: they ran short (on_received)
  bool sending_ = false;
  bool waiting_for_room_ = false;  // io_uring: a send's EAGAIN, waiting in the epoll set
  bool stashed_ = false;  // bytes received while paused, not yet handled
  bool client_ended_ = false;  // its stream's end came (end_of_input)
  bool next_turn_pending_ = false;
  protocol::OutputQueue in_flight_;
  struct SendVector {  // a send of many pieces: its msghdr and iovecs
    msghdr message;
    iovec iov[Transport::kMaxSendPieces];
  };
  std::unique_ptr<SendVector> send_vector_;
};

}  // namespace lockcached::server
