// A reactor thread: its own listening sockets (SO_REUSEPORT), its own
// connections for their whole life, its own statistics.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "lockcached/core/stats.h"
#include "lockcached/net/reactor.h"
#include "lockcached/net/socket.h"
#include "lockcached/server/connection.h"
#include "lockcached/server/server_state.h"

namespace lockcached::server {

class Worker {
 public:
  Worker(ServerState& state, core::StatsSource& stats_source, core::ServerControl& control);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Takes ownership of a listening socket; call before start(). `id`
  // names it in `stats conns`.
  // `tls`: the port speaks TLS (ServerState::tls).
  void add_listener(int fd, PortKind kind, uint64_t id, bool tls = false);
  void start();
  // Asks the thread to close everything and end; join() waits for it.
  void stop() { reactor_.stop(); }
  void join();

  net::Reactor& reactor() { return reactor_; }
  ServerState& state() { return state_; }
  core::StatsSource& stats_source() { return stats_source_; }
  core::ServerControl& control() { return control_; }
  core::ThreadStats& stats() { return stats_; }
  // Where reads land first; see Connection.
  char* scratch() { return scratch_.get(); }
  static constexpr size_t kScratchSize = 64 * 1024;
  // Where a TLS connection's ciphertext lands before it is decrypted into
  // scratch(); as large.
  char* ciphertext_scratch() { return ciphertext_scratch_.get(); }

  // This node's role changed: closes every client connection of this
  // thread (on its thread; post it), or only those of the lock service,
  // but for those waiting for a cluster change's reply, which close after it.
  void close_connections(bool lock_service_only);

  // Called by a connection that closed itself; freed before the loop sleeps.
  void retire(Connection* connection);

  // `stats conns`: appends this thread's listening sockets and connections.
  // Thread-safe: takes the registry mutex, which this thread takes only to
  // add or remove a connection.
  void list_connections(std::vector<ConnectionStatus>& out) const;

 private:
  class Listener;

  void accept_from(int listen_fd, PortKind kind, bool tls);
  void reject(int fd);
  void shed_one(int listen_fd);
  void free_retired();
  // --idle_timeout: a timer that closes connections idle for that long.
  void schedule_idle_check();
  void close_idle();
  void shut_down();

  ServerState& state_;
  core::StatsSource& stats_source_;
  core::ServerControl& control_;
  core::ThreadStats stats_;
  net::Reactor reactor_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  // What `stats conns` shows of the listening sockets: fixed before start().
  std::vector<ConnectionStatus> listener_status_;
  // Changed on this thread only, and then under registry_mutex_, so this
  // thread reads it freely and list_connections() under the mutex. A
  // connection leaves it before it is freed.
  mutable std::mutex registry_mutex_;
  std::unordered_set<Connection*> connections_;
  std::vector<Connection*> retired_;
  std::unique_ptr<char[]> scratch_;
  std::unique_ptr<char[]> ciphertext_scratch_;  // only where some port speaks TLS
  const net::KeepaliveTimes keepalive_;  // each client socket's, with --tcp_keepalive
  int spare_fd_;  // given up to accept-and-close one client when out of fds
  std::thread thread_;
};

}  // namespace lockcached::server
