#include "lockcached/server/worker.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <glog/logging.h>

#include "lockcached/net/socket.h"

namespace lockcached::server {
namespace {

// Accepts per readiness event; the rest wait for the next loop turn so that
// a connection storm cannot starve the clients already connected.
constexpr int kMaxAcceptsPerEvent = 64;
// How long a stopping thread waits for cancelled io_uring operations.
constexpr int kMaxShutdownTurns = 100;
constexpr int kShutdownTurnMs = 10;
constexpr std::string_view kTooManyConnections = "ERROR Too many open connections\r\n";

}  // namespace

class Worker::Listener final : public net::EventHandler {
 public:
  Listener(Worker& worker, int fd, PortKind kind, bool tls)
      : worker_(worker), fd_(fd), kind_(kind), tls_(tls) {}
  ~Listener() override { ::close(fd_); }
  void on_event(uint32_t) override { worker_.accept_from(fd_, kind_, tls_); }

 private:
  Worker& worker_;
  int fd_;
  PortKind kind_;
  bool tls_;
};

Worker::Worker(ServerState& state, core::StatsSource& stats_source,
               core::ServerControl& control)
    : state_(state),
      stats_source_(stats_source),
      control_(control),
      reactor_(state.settings.io, state.settings.uring),
      scratch_(std::make_unique<char[]>(kScratchSize)),
      ciphertext_scratch_(state.tls ? std::make_unique<char[]>(kScratchSize) : nullptr),
      keepalive_(net::keepalive_times(std::max(state.settings.tcp_keepalive_seconds, 1))),
      spare_fd_(open("/dev/null", O_RDONLY | O_CLOEXEC)) {
  reactor_.set_before_sleep([this] { free_retired(); });
}

Worker::~Worker() {
  join();
  if (spare_fd_ >= 0) close(spare_fd_);
}

void Worker::add_listener(int fd, PortKind kind, uint64_t id, bool tls) {
  ConnectionStatus status;
  status.id = id;
  status.kind = kind;
  status.listening = true;
  status.address = net::local_endpoint(fd);
  status.last_active_ms = net::monotonic_ms();
  listener_status_.push_back(std::move(status));
  listeners_.push_back(std::make_unique<Listener>(*this, fd, kind, tls));
  // Exclusive: where every worker waits on one socket (a unix socket's),
  // a client wakes one of them, not all.
  CHECK(reactor_.add(fd, EPOLLIN | EPOLLEXCLUSIVE, listeners_.back().get()));
}

void Worker::start() {
  // Always armed: SIGHUP may turn --idle_timeout on while the server runs.
  schedule_idle_check();
  thread_ = std::thread([this] {
    reactor_.run();
    shut_down();
  });
}

void Worker::join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::accept_from(int listen_fd, PortKind kind, bool tls) {
  for (int i = 0; i < kMaxAcceptsPerEvent; ++i) {
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof peer;
    int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &peer_length,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE)
        shed_one(listen_fd);
      else if (errno != EAGAIN && errno != EWOULDBLOCK)
        PLOG(WARNING) << "accept";
      return;
    }
    std::atomic<int>& open = state_.open_connections(kind);
    if (open.fetch_add(1, std::memory_order_relaxed) >= state_.connection_limit(kind)) {
      open.fetch_sub(1, std::memory_order_relaxed);
      reject(fd);
      continue;
    }
    state_.total_connections.fetch_add(1, std::memory_order_relaxed);
    // A unix socket's peer is on this host: its end closes the connection
    // when it dies, and there is no Nagle to turn off.
    if (peer.ss_family != AF_UNIX) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (state_.settings.tcp_keepalive_seconds > 0 && !net::set_keepalive(fd, keepalive_)) {
        PLOG_EVERY_N(WARNING, 1000)
            << "TCP keepalive refused; a client that vanishes is not noticed";
      }
    }
    uint64_t id = state_.next_connection_id.fetch_add(1, std::memory_order_relaxed);
    auto* connection =
        new Connection(*this, fd, id, kind, net::endpoint_of(peer), net::local_endpoint(fd),
                       tls ? state_.tls->current() : nullptr);
    std::lock_guard lock(registry_mutex_);
    connections_.insert(connection);
  }
}

// As memcached: tell the client why, then hang up.
void Worker::reject(int fd) {
  state_.rejected_connections.fetch_add(1, std::memory_order_relaxed);
  ssize_t ignored =
      send(fd, kTooManyConnections.data(), kTooManyConnections.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
  close(fd);
}

// Out of file descriptors: the pending connection would keep the listener
// readable and the loop spinning. Free the spare descriptor, accept the
// client and close it at once, then take the spare back.
void Worker::shed_one(int listen_fd) {
  LOG_EVERY_N(WARNING, 1000) << "out of file descriptors; refusing connections";
  if (spare_fd_ < 0) return;
  close(spare_fd_);
  int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) reject(fd);
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void Worker::retire(Connection* connection) {
  retired_.push_back(connection);
}

// Once a second is fine-grained enough for a timeout counted in seconds,
// and a pass over this thread's connections costs microseconds per thousand.
void Worker::schedule_idle_check() {
  reactor_.add_timer(1000, [this] {
    close_idle();
    schedule_idle_check();
  });
}

// Also ends TLS handshakes that take longer than --tls_handshake_timeout:
// a client that stalls mid-handshake holds a connection and nothing else.
void Worker::close_idle() {
  int timeout_seconds = state_.idle_timeout_seconds.load(std::memory_order_relaxed);
  bool handshakes = state_.tls != nullptr;
  if (timeout_seconds <= 0 && !handshakes) return;
  int64_t now = net::monotonic_ms();
  int64_t idle_since = now - int64_t{timeout_seconds} * 1000;
  int64_t handshake_since = now - int64_t{state_.settings.tls_handshake_timeout_seconds} * 1000;
  std::vector<Connection*> idle;
  for (Connection* connection : connections_) {
    if ((timeout_seconds > 0 && connection->idle_since(idle_since)) ||
        (handshakes && connection->handshake_pending_since(handshake_since))) {
      idle.push_back(connection);
    }
  }
  stats_.idle_kicks.add(idle.size());  // memcached's idle_kicks
  for (Connection* connection : idle)
    connection->close_politely(core::CloseReason::kIdleTimeout);
}

void Worker::free_retired() {
  if (retired_.empty()) return;
  {
    std::lock_guard lock(registry_mutex_);
    for (Connection* connection : retired_)
      connections_.erase(connection);
  }
  // A connection the reactor still owes a completion (io_uring) waits for
  // it: the kernel may still be reading its replies.
  size_t kept = 0;
  for (Connection* connection : retired_) {
    if (connection->referenced()) {
      retired_[kept++] = connection;
    } else {
      delete connection;
    }
  }
  retired_.resize(kept);
}

void Worker::list_connections(std::vector<ConnectionStatus>& out) const {
  out.insert(out.end(), listener_status_.begin(), listener_status_.end());
  std::lock_guard lock(registry_mutex_);
  for (const Connection* connection : connections_)
    out.push_back(connection->status());
}

void Worker::close_connections(bool lock_service_only) {
  for (Connection* connection : connections_) {
    if (lock_service_only && connection->kind() != PortKind::kLockService) continue;
    // Its `cluster transfer` made this node stop leading: it closes once
    // it has told its client so.
    if (connection->awaits_cluster_change()) continue;
    connection->close(core::CloseReason::kShutdown);
  }
  // Not freed here: a posted task runs inside the poller's dispatch, and
  // events of this very batch may still name these connections. They go
  // before the reactor sleeps (free_retired), as every closed one does.
}

void Worker::shut_down() {
  listeners_.clear();
  for (Connection* connection : connections_)
    connection->close(core::CloseReason::kShutdown);
  free_retired();  // outside any dispatch now
  // io_uring: the cancelled receives and sends of closed connections end
  // within a turn or two; their connections are freed as they do.
  for (int turn = 0; turn < kMaxShutdownTurns && !retired_.empty(); ++turn)
    reactor_.run_once(kShutdownTurnMs);
  LOG_IF(WARNING, !retired_.empty())
      << retired_.size() << " connections still waiting for the kernel at shutdown";
}

}  // namespace lockcached::server
