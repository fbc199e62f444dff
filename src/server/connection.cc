#include "lockcached/server/connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <glog/logging.h>

#include "lockcached/core/verbosity.h"
#include "lockcached/net/socket.h"
#include "lockcached/protocol/binary_protocol.h"
#include "lockcached/protocol/lock_service_protocol.h"
#include "lockcached/protocol/text_protocol.h"
#include "lockcached/server/plain_transport.h"
#include "lockcached/server/tls_transport.h"
#include "lockcached/server/worker.h"

namespace lockcached::server {
namespace {

constexpr size_t kMaxBlockedInput = 64 * 1024;

}  // namespace

Connection::Connection(Worker& worker, int fd, uint64_t id, PortKind kind, net::Endpoint peer,
                       net::Endpoint local, std::shared_ptr<const tls::Context> tls)
    : worker_(worker),
      fd_(fd),
      completes_io_(worker.reactor().completes_io()),
      kind_(kind),
      local_(std::move(local)),
      accepted_ms_(worker.reactor().now_ms()),
      over_tls_(tls != nullptr),
      transport_(make_transport(worker, id, std::move(tls))),
      last_active_ms_(accepted_ms_),
      client_{id, std::move(peer)},
      core_(worker.state().store, worker.stats(), worker.stats_source(), id,
            &worker.state().read_only, &worker.state().watch, &client_, &worker.control(),
            worker.state().settings.authenticator.get(), &worker.state().settings.commands),
      input_(worker.scratch(), Worker::kScratchSize) {
  if (kind == PortKind::kLockService) {
    protocol_ = std::make_unique<protocol::LockServiceProtocol>(protocol::LockServiceContext{
        worker_.state().lock_coordinator(), worker_.reactor(), out_, [this] { on_async_reply(); },
        // In a Raft cluster a replica's lock service says who leads instead.
        worker_.state().settings.cluster.empty() ? &worker_.state().read_only : nullptr,
        &worker_.state().watch, &client_, worker_.state().settings.authenticator.get(),
        worker_.state().change_members, over_tls_});
    protocol_kind_.store(ConnProtocol::kLockService, std::memory_order_relaxed);
  }
  worker_.state().watch.conn_new(client_);
  interest_ = EPOLLIN;
  LOCKCACHED_VLOG(1) << '<' << id << " new " << (kind == PortKind::kLockService ? "lock-service" : "cache")
          << " connection";
  if (completes_io_) {
    receive_ = Receive::kArmed;
    worker_.reactor().receive(fd_, this, receive_once_);
  } else if (!worker_.reactor().add(fd_, interest_, this)) {
    close();
  }
}

// The worker destroys a connection only after close().
Connection::~Connection() {
  DCHECK(closed());
}

// The one place that knows which transports there are.
std::unique_ptr<Transport> Connection::make_transport(Worker& worker, uint64_t id,
                                                      std::shared_ptr<const tls::Context> tls) {
  if (!tls) return std::make_unique<PlainTransport>(worker.stats().bytes_written);
  return std::make_unique<TlsTransport>(std::move(tls), id, worker.stats().bytes_written,
                                        worker.state().tls_handshake_errors,
                                        worker.ciphertext_scratch(), Worker::kScratchSize);
}

void Connection::close(core::CloseReason reason) {
  if (closed()) return;
  LOCKCACHED_VLOG(1) << '<' << core_.owner() << " connection closed";
  watch_.reset();
  worker_.state().watch.conn_close(client_, reason);
  if (waiting_for_room_) {  // io_uring: in the epoll set, no send in flight
    worker_.reactor().remove(fd_);
    waiting_for_room_ = false;
    sending_ = false;
  }
  if (!completes_io_) {
    worker_.reactor().remove(fd_);
  } else if (receive_ != Receive::kOff || sending_) {
    worker_.reactor().cancel_io(fd_);  // what is in flight ends; then the worker frees us
  }
  ::close(fd_);
  fd_ = -1;
  io_ = IoState::kClosed;
  set_state(ConnState::kClosing);
  out_.clear();
  core_.release_all_locks(core::UnlockReason::kDisconnect);  // a client's locks end with it
  if (protocol_) protocol_->connection_closed(reason);
  worker_.state().open_connections(kind_).fetch_sub(1, std::memory_order_relaxed);
  worker_.retire(this);
}

void Connection::close_after_error(int error) {
  if (!net::peer_vanished(error)) return close(core::CloseReason::kError);
  // The client's machine died or its network is cut, so no FIN or RST will
  // ever come. Its locks end now (the lock service's after their grace).
  worker_.stats().conns_dead.add();
  LOG(INFO) << "connection " << client_.id << " from " << net::address_text(client_.address)
            << " on the " << (kind_ == PortKind::kLockService ? "lock" : "cache")
            << " port: nothing heard from its machine (or nothing read by it) for "
            << worker_.state().settings.tcp_keepalive_seconds << " s (--tcp_keepalive); closing it";
  close(core::CloseReason::kDeadPeer);
}

void Connection::on_event(uint32_t events) {
  if (closed()) return;  // closed earlier in this batch of events
  if (waiting_for_room_) [[unlikely]] return on_room_to_send();  // io_uring, after EAGAIN
  if ((events & (EPOLLERR | EPOLLHUP)) && !(events & EPOLLIN)) {
    return close_after_error(net::socket_error(fd_));
  }
  if (events & EPOLLOUT) on_writable();
  if (!closed() && (events & EPOLLIN)) on_readable();
}

// Waiting for a request, as memcached's idle_timeout counts: not while its
// replies go out (a client reading a long one sends nothing), nor while a
// long command runs, a lock wait (quiet by nature) or a watcher.
bool Connection::idle_since(int64_t since) const {
  return !closed() && io_ != IoState::kWatching &&
         last_active_ms_.load(std::memory_order_relaxed) < since && !output_pending() &&
         !(protocol_ && (protocol_->blocked() || protocol_->has_unfinished_work()));
}

bool Connection::handshake_pending_since(int64_t since) const {
  return !closed() && !transport_->handshake_done() && accepted_ms_ < since;
}

ConnectionStatus Connection::status() const {
  ConnectionStatus status;
  status.id = client_.id;
  status.kind = kind_;
  status.address = client_.address;
  status.local_address = local_;
  status.state = state_.load(std::memory_order_relaxed);
  status.protocol = protocol_kind_.load(std::memory_order_relaxed);
  status.last_active_ms = last_active_ms_.load(std::memory_order_relaxed);
  return status;
}

// The client ended its stream (end of file, a half-close, TLS close_notify).
// It may still read: what it asked before is answered first, then the
// connection closes (update_interest, once input would be taken again).
void Connection::end_of_input() {
  client_ended_ = true;
  update_interest();
}

// Replies already queued are still owed (after quit, or once a client that
// ended its stream has been answered): stop reading, and close once the
// queue has drained.
void Connection::close_when_sent() {
  if (closed()) return;
  io_ = IoState::kDraining;
  flush();
}

void Connection::on_writable() {
  flush();
  if (io_ == IoState::kWatching) return pump_watch();
  if (io_ != IoState::kServing || !protocol_ || !protocol_->has_unfinished_work()) return;
  if (unsent() >= kMaxPendingOutput) return;  // let the client catch up first
  // A long command (a big multi-get, a key dump) goes on after the other
  // connections had their turn: memcached's conn_yields.
  worker_.stats().conn_yields.add();
  protocol_->continue_work(out_);
  resume_input();
}

// A lock wait (or a cluster's change) was answered: the client, quiet
// while it waited, is active again as of now (--idle_timeout).
void Connection::on_async_reply() {
  last_active_ms_.store(worker_.reactor().now_ms(), std::memory_order_relaxed);
  resume_input();
}

void Connection::resume_input() {
  if (closed()) return;
  if (protocol_->wants_close()) return close_when_sent();
  bool idle = !protocol_->has_unfinished_work() && !protocol_->blocked();
  if (idle && io_ == IoState::kServing && !input_.empty()) {
    // Requests that arrived behind the long one wait in the buffer.
    run(input_.kept());
  } else {
    flush();
  }
}

void Connection::on_readable() {
  if (io_ == IoState::kWatching) return discard_input();
  finish_read(transport_->read(fd_, input_));
}

void Connection::finish_read(const Input& input) {
  switch (input.status) {
    case Input::Status::kBytes:
      if (input.ended) [[unlikely]] client_ended_ = true;
      return take_input(input.bytes);
    case Input::Status::kAgain:
      return flush();  // a handshake's answers, if any; and read on
    case Input::Status::kEnd:
      return end_of_input();
    case Input::Status::kBroken:
      send_last_words();  // the alert that tells the client why
      return close(core::CloseReason::kError);
    case Input::Status::kFailed:
      return close_after_error(input.error);
  }
}

void Connection::take_input(std::string_view bytes) {
  worker_.stats().bytes_read.add(bytes.size());
  last_active_ms_.store(worker_.reactor().now_ms(), std::memory_order_relaxed);
  if (!protocol_) choose_protocol(bytes.front());
  if (input_.empty()) return run(bytes);
  input_.append(bytes);
  run(input_.kept());
}

void Connection::run(std::string_view input) {
  size_t consumed = protocol_->consume(input, out_);
  input_.keep(input.substr(consumed));
  if (core_.watcher()) [[unlikely]] return start_watch();
  if (protocol_->blocked() && input_.size() >= kMaxBlockedInput) {
    // More than 64 KiB piled up behind a lock wait. Not reading it would hide
    // a hang-up (its FIN queues behind the unread bytes) and leave a dead
    // waiter in line to be granted; this client is cut off instead.
    return close();
  }
  flush();
  if (!closed() && protocol_->wants_close()) close_when_sent();
}

// As memcached: the first byte of a connection tells its protocol for good,
// unless -B (--protocol) allows one only.
void Connection::choose_protocol(char first_byte) {
  CacheProtocol allowed = worker_.state().settings.protocol;
  bool binary = allowed == CacheProtocol::kAuto
                    ? static_cast<uint8_t>(first_byte) == protocol::binary::kRequestMagic
                    : allowed == CacheProtocol::kBinary;
  if (binary) {
    protocol_ = std::make_unique<protocol::BinaryProtocol>(core_);
    protocol_kind_.store(ConnProtocol::kBinary, std::memory_order_relaxed);
  } else {
    protocol_ = std::make_unique<protocol::TextProtocol>(core_);
    protocol_kind_.store(ConnProtocol::kText, std::memory_order_relaxed);
  }
}

void Connection::flush() {
  if (completes_io_) return submit_send();
  int failure = transport_->send(fd_, out_);
  if (failure == Transport::kBroken) return close();
  if (failure != 0) return close_after_error(failure);
  update_interest();
}

void Connection::finish_draining() {
  close_politely(protocol_ ? protocol_->close_reason() : core::CloseReason::kNormal);
}

void Connection::close_politely(core::CloseReason reason) {
  if (closed()) return;
  transport_->say_goodbye();
  send_last_words();
  close(reason);
}

void Connection::send_last_words() {
  // A send in flight owns the stream: a record written beside it would land
  // in the middle of another.
  if (sending_) return;
  std::string_view words = transport_->last_words();
  if (words.empty()) return;
  ssize_t ignored = net::send_some(fd_, words.data(), words.size());
  (void)ignored;
}

void Connection::update_interest() {
  bool pending = output_pending();
  if (io_ == IoState::kDraining && !pending) return finish_draining();
  uint32_t wanted = 0;
  bool unfinished = protocol_ && protocol_->has_unfinished_work();
  note_state(unfinished, pending);
  // A blocked protocol takes no requests, but reading goes on (up to
  // kMaxBlockedInput) so that a client that hangs up is noticed. A watcher
  // reads on (and drops what it reads), to see its client go.
  bool input = wants_input(unfinished) || io_ == IoState::kWatching;
  // Nothing the client sent before its end is left to run.
  if (client_ended_ && input && !stashed_) [[unlikely]] return close_when_sent();
  if (completes_io_) return update_io(input, unfinished);
  // Unfinished work asks for EPOLLOUT even with nothing queued: a writable
  // socket then brings us back on the next loop turn.
  if (pending || unfinished) wanted |= EPOLLOUT;
  if (input) wanted |= EPOLLIN;
  if (wanted == interest_) return;
  interest_ = wanted;
  worker_.reactor().modify(fd_, wanted, this);
}

void Connection::start_watch() {
  io_ = IoState::kWatching;
  set_state(ConnState::kWatch);
  watch_ = std::make_unique<WatchStream>(worker_.state().watch, core_.watcher(), worker_.reactor(),
                                         [this] { pump_watch(); });
  pump_watch();  // "OK", and whatever came before the stream started
}

void Connection::pump_watch() {
  if (closed()) return;
  flush();
  if (closed() || output_pending()) return;  // EPOLLOUT (or on_sent) brings us back
  if (watch_->take(out_)) flush();
}

void Connection::discard_input() {
  ssize_t received = net::read_some(fd_, worker_.scratch(), Worker::kScratchSize);
  if (received == 0) return close(core::CloseReason::kNormal);
  if (received < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    return close_after_error(errno);
  }
  if (received > 0) worker_.stats().bytes_read.add(static_cast<uint64_t>(received));
}

// After every flush: a few tests of what is at hand, and a store only when
// the state changed (a busy connection stays conn_waiting between requests).
void Connection::note_state(bool unfinished, bool pending) {
  ConnState state = ConnState::kWaiting;
  if (io_ == IoState::kDraining) {
    state = ConnState::kClosing;
  } else if (io_ == IoState::kWatching) {
    state = ConnState::kWatch;
  } else if (kind_ == PortKind::kLockService && protocol_->blocked()) {
    state = static_cast<const protocol::LockServiceProtocol&>(*protocol_).waiting_for_lock()
                ? ConnState::kLockWait
                : ConnState::kReplWait;
  } else if (pending || unfinished) {
    state = ConnState::kWrite;
  } else if (protocol_ && protocol_->reading_data()) {
    state = ConnState::kNread;
  } else if (!input_.empty()) {
    state = ConnState::kRead;
  }
  set_state(state);
}

}  // namespace lockcached::server
