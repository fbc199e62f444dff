// Wires it all together: the shared state, the listeners and the workers.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockcached/cluster/lock_machine.h"
#include "lockcached/consensus/raft_node.h"
#include "lockcached/core/prefix_stats.h"
#include "lockcached/core/server_control.h"
#include "lockcached/core/stats.h"
#include "lockcached/net/reactor_scheduler.h"
#include "lockcached/net/socket.h"
#include "lockcached/replication/node.h"
#include "lockcached/server/connection.h"
#include "lockcached/server/server_state.h"
#include "lockcached/server/settings.h"
#include "lockcached/server/stats_report.h"
#include "lockcached/store/crawler.h"
#include "lockcached/store/memory_governor.h"

namespace lockcached::server {

class Worker;

class Server final : public core::StatsSource, public core::ServerControl {
 public:
  explicit Server(const Settings& settings);
  ~Server() override;

  // Binds every listener; then start() loads --memory_file and starts the
  // workers. Two steps, so that what must succeed before the memory file is
  // used up (loading removes it) comes between: main's pid file. False,
  // with *error set, if something cannot be started; *configuration_error
  // then says whether the configuration is at fault (net::ListenError, TLS
  // files that do not load), so that a retry cannot help.
  bool bind(std::string* error, bool* configuration_error);
  bool start(std::string* error, bool* configuration_error);
  // Closes listeners and connections and joins the workers.
  void stop();
  // After stop(), on a graceful stop (SIGUSR1): writes the cache to
  // Settings::memory_file, if set, for the next start to load. Logs what
  // it did; false when the file could not be written.
  bool save_memory_file();
  // After stop(), when the start failed: start() had loaded (and so
  // removed) the memory file, which is written back for the next try.
  void keep_memory_file_for_the_next_start();
  // The memcached port actually bound (differs from the setting when it is
  // 0): --port's, or where every --listen address has its own port, the
  // first address's; 0 with --unix_socket alone.
  uint16_t port() const { return port_; }
  uint16_t lock_port() const { return lock_port_; }
  // The extra TLS ports (Settings::tls_port, lock_tls_port) as bound; 0: none.
  uint16_t tls_port() const { return tls_port_; }
  uint16_t lock_tls_port() const { return lock_tls_port_; }

  // SIGHUP: re-reads --auth_file; then, with `changes` (the flagfile read
  // without a mistake), sets what changed and reloads the TLS certificates.
  // nullopt: the flagfile had a mistake, and all it names stays as it is.
  void reload(const std::optional<RunTimeChanges>& changes);

  void collect(core::StatsGroup group, core::StatList& out) const override;
  void reset() override;
  core::PrefixStats* prefix_stats() override { return &prefix_stats_; }
  void collect_connections(uint64_t asking, core::StatList& out) const override;
  void collect_cache_locks(std::string_view prefix, core::StatList& out) const override;
  bool refresh_certs(std::string* error) override;
  store::Crawler* crawler() override { return &crawler_; }
  void shutdown(bool graceful) override;

 private:
  // Every listener of the settings; false with *error at the first that
  // cannot be opened.
  bool open_listeners(net::ListenError* error);
  // The memcached protocols on each --listen address.
  bool listen_cache(net::ListenError* error);
  // `setting` (kPortOff, kAnyFreePort or a port) on each host of --listen
  // once; *port gets the port bound. `tls`: with --tls, where some entry of
  // the host is not notls:.
  bool listen_per_host(PortKind kind, int setting, bool tls, uint16_t* port,
                       net::ListenError* error);
  // One socket per worker on host:*port (SO_REUSEPORT); a *port of 0
  // becomes the one the kernel picked.
  bool listen_on(PortKind kind, const std::string& host, bool tls, uint16_t* port,
                 net::ListenError* error);
  // --unix_socket: one socket, a descriptor of it in every worker.
  bool listen_unix(net::ListenError* error);
  void add_listener(Worker& worker, int fd, PortKind kind, bool tls);
  // SIGHUP's re-read of Settings::authenticator's file (its name stays);
  // a file that does not load keeps the users loaded before.
  void reload_users();
  // With Settings::memory_file: loads what the last graceful stop saved.
  void load_memory_file();
  // With --virtual_ip: takes the role the address gives before any client
  // is served.
  bool start_replication(std::string* error);
  // With --cluster: joins the Raft cluster; its leader serves the lock service.
  bool start_cluster(std::string* error, bool* configuration_error);
  // The flags both ways of replicating the cache share.
  replication::NodeSettings replication_settings() const;
  // A demoted master's clients go (or only the lock service's, from a
  // promoted replica): posted to every worker.
  void close_client_connections(bool lock_service_only);
  // Whether this Raft leader may be the cache's master now (server.cc).
  bool cache_may_lead();
  // `cluster add|remove|transfer` from a client at `peer` (state_.change_members).
  void change_members(const consensus::MembershipChange& change, const net::Endpoint& peer,
                      std::function<void(consensus::MembershipResult)> done);
  // A --virtual_ip node that changed role: a new, empty lock service
  // whose tokens start above the wall clock now.
  void start_lock_service();
  // New connections use `service`, through a coordinator on lock_timers_.
  void use_lock_service(std::shared_ptr<locks::LockService> service);
  // Every worker's listening sockets and connections, by id.
  std::vector<ConnectionStatus> connections() const;
  core::CounterValues thread_counters() const;
  // What the stats report (stats_report.h) is handed, sampled now.
  GeneralSample general_sample() const;
  SettingsSample settings_sample() const;
  std::optional<ReplicationSample> replication_sample() const;  // nullopt: not replicated
  std::optional<ClusterSample> cluster_sample() const;          // nullopt: no cluster

  ServerState state_;
  store::Crawler crawler_{state_.store};
  store::MemoryGovernor governor_;
  std::vector<std::unique_ptr<Worker>> workers_;
  // A single server's lock-service timers (waits, graces): the first worker's.
  std::unique_ptr<net::ReactorScheduler> lock_timers_;
  std::unique_ptr<replication::Node> replication_;
  // With --cluster: the lock service replicated by Raft.
  std::shared_ptr<cluster::LockMachine> lock_machine_;
  std::unique_ptr<consensus::RaftNode> raft_;
  // A leader with a cold cache handing leadership over (cache_may_lead).
  static constexpr int kMaxHandOvers = 3;
  std::mutex hand_over_mutex_;  // guards what follows
  uint64_t hand_over_term_ = 0;  // the term it last asked in
  bool hand_over_pending_ = false;
  int hand_overs_ = 0;
  uint64_t hand_over_target_ = 0;  // the member last asked to take over
  uint64_t hand_over_since_ = 0;   // replication's times_data_came() then
  uint16_t port_ = 0;
  // The socket file --unix_socket made, removed at stop unless another file
  // took its path meanwhile.
  dev_t unix_socket_device_ = 0;
  ino_t unix_socket_inode_ = 0;
  uint16_t lock_port_ = 0;
  uint16_t tls_port_ = 0;
  uint16_t lock_tls_port_ = 0;
  // --memory_limit_mb as configured, SIGHUP's change included; the store's
  // own limit may differ until the next start (cache_memlimit). What the
  // memory file records, for the next start with the same flags to load.
  size_t configured_memory_limit_;
  bool memory_file_loaded_ = false;  // start() restored the cache from it
  mutable std::mutex baseline_mutex_;
  core::CounterValues baseline_;  // counters at the last "stats reset"
  core::PrefixStats prefix_stats_;
};

}  // namespace lockcached::server
