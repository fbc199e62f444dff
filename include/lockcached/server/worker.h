// A reactor thread: its own listening sockets (SO_REUSEPORT), its own
// connections for their whole life, its own statistics.
#pragma once

#include <memory>
#include <thread>
#include <unordered_set>
#include <vector>

#include "lockcached/core/stats.h"
#include "lockcached/net/reactor.h"
#include "lockcached/server/server_state.h"

namespace lockcached::server {

class Connection;

class Worker {
 public:
  Worker(ServerState& state, core::StatsSource& stats_source);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Takes ownership of a listening socket; call before start().
  void add_listener(int fd, PortKind kind);
  void start();
  // Asks the thread to close everything and end; join() waits for it.
  void stop() { reactor_.stop(); }
  void join();

  net::Reactor& reactor() { return reactor_; }
  ServerState& state() { return state_; }
  core::StatsSource& stats_source() { return stats_source_; }
  core::ThreadStats& stats() { return stats_; }
  // Where reads land first; see Connection.
  char* scratch() { return scratch_.get(); }
  static constexpr size_t kScratchSize = 64 * 1024;

  // Closes every client connection of this thread (on its thread; post it),
  // or only those of the lock service.
  void close_connections(bool lock_service_only = false);

  // Called by a connection that closed itself; freed before the loop sleeps.
  void retire(Connection* connection);

 private:
  class Listener;

  void accept_from(int listen_fd, PortKind kind);
  void reject(int fd);
  void shed_one(int listen_fd);
  void free_retired();
  // --idle_timeout: a timer that closes connections idle for that long.
  void schedule_idle_check();
  void close_idle();
  void shut_down();

  ServerState& state_;
  core::StatsSource& stats_source_;
  core::ThreadStats stats_;
  net::Reactor reactor_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::unordered_set<Connection*> connections_;
  std::vector<Connection*> retired_;
  std::unique_ptr<char[]> scratch_;
  int spare_fd_;  // given up to accept-and-close one client when out of fds
  std::thread thread_;
};

}  // namespace lockcached::server
