#include "lockcached/server/server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include <glog/logging.h>

#include "lockcached/core/size_class_stats.h"
#include "lockcached/core/verbosity.h"
#include "lockcached/net/reactor.h"
#include "lockcached/net/socket.h"
#include "lockcached/replication/memory_file.h"
#include "lockcached/server/allocator_stats.h"
#include "lockcached/server/worker.h"

namespace lockcached::server {
namespace {

uint64_t unix_micros() {
  using namespace std::chrono;
  return static_cast<uint64_t>(
      duration_cast<microseconds>(system_clock::now().time_since_epoch()).count());
}

int64_t elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since)
      .count();
}

// The hosts of --listen, each once, and whether --tls may leave a port on
// it plain: only where every entry of the host says notls:.
std::vector<std::pair<std::string, bool>> hosts_and_notls(
    const std::vector<ListenAddress>& addresses) {
  std::vector<std::pair<std::string, bool>> hosts;
  for (const ListenAddress& address : addresses) {
    auto same = std::find_if(hosts.begin(), hosts.end(),
                             [&](const auto& host) { return host.first == address.host; });
    if (same == hosts.end()) {
      hosts.emplace_back(address.host, address.notls);
    } else {
      same->second = same->second && address.notls;
    }
  }
  return hosts;
}

}  // namespace

Server::Server(const Settings& settings)
    : state_(settings),
      governor_(state_.store, {allocator_resident_bytes, allocator_release_free_pages}),
      configured_memory_limit_(settings.memory_limit),
      prefix_stats_(settings.stats_prefix_delimiter, settings.stats_detail) {}

Server::~Server() {
  stop();
}

bool Server::bind(std::string* error, bool* configuration_error) {
  *configuration_error = false;
  const Settings& settings = state_.settings;
  for (unsigned i = 0; i < settings.threads; ++i) {
    workers_.push_back(std::make_unique<Worker>(state_, *this, *this));
  }
  lock_timers_ = std::make_unique<net::ReactorScheduler>(workers_.front()->reactor());
  // A cluster's lock service is its Raft log's (start_cluster).
  if (settings.cluster.empty()) {
    use_lock_service(
        std::make_shared<locks::LockService>(state_.lock_limits(), settings.fencing_token_floor));
  }
  // Loaded once: with the context config::load checked, else here. Files
  // that do not load are a configuration mistake.
  if (state_.tls && !state_.tls->current() && !state_.tls->reload(error)) {
    *configuration_error = true;
    return false;
  }
  if (net::ListenError failure; !open_listeners(&failure)) {
    *error = failure.message;
    *configuration_error = failure.configuration;
    return false;
  }
  return true;
}

bool Server::start(std::string* error, bool* configuration_error) {
  *configuration_error = false;
  const Settings& settings = state_.settings;
  // Once the ports are ours (a start that fails there leaves the file for
  // the next try), before any client is served.
  load_memory_file();
  if (!settings.virtual_ip.empty() && !start_replication(error)) return false;
  if (!settings.cluster.empty() && !start_cluster(error, configuration_error)) return false;
  crawler_.set_enabled(settings.lru_crawler);  // before any client can ask
  for (auto& worker : workers_)
    worker->start();
  crawler_.start();
  governor_.start();
  return true;
}

bool Server::open_listeners(net::ListenError* error) {
  const Settings& settings = state_.settings;
  return (settings.unix_socket.empty() ? listen_cache(error) : listen_unix(error)) &&
         listen_per_host(PortKind::kLockService, settings.lock_port, settings.tls, &lock_port_,
                         error) &&
         listen_per_host(PortKind::kCache, settings.tls_port, true, &tls_port_, error) &&
         listen_per_host(PortKind::kLockService, settings.lock_tls_port, true, &lock_tls_port_,
                         error);
}

// memcached's -l HOST:PORT and notls:HOST: an address's own port, else
// --port (0: one free port, the same on every address that takes it).
bool Server::listen_cache(net::ListenError* error) {
  const Settings& settings = state_.settings;
  uint16_t shared_port = settings.port;
  bool shared_used = false;
  for (const ListenAddress& address : settings.listen) {
    bool own = address.port != ListenAddress::kDefaultPort;
    uint16_t port = own ? static_cast<uint16_t>(address.port) : shared_port;
    if (!listen_on(PortKind::kCache, address.host, settings.tls && !address.notls, &port, error)) {
      return false;
    }
    if (!own) shared_port = port;
    shared_used = shared_used || !own;
    if (port_ == 0) port_ = port;
  }
  if (shared_used) port_ = shared_port;
  return true;
}

bool Server::listen_per_host(PortKind kind, int setting, bool tls, uint16_t* port,
                             net::ListenError* error) {
  if (setting == kPortOff) return true;
  *port = setting == kAnyFreePort ? 0 : static_cast<uint16_t>(setting);
  for (const auto& [host, notls] : hosts_and_notls(state_.settings.listen)) {
    if (!listen_on(kind, host, tls && !notls, port, error)) return false;
  }
  return true;
}

// Every worker gets its own socket on each address (SO_REUSEPORT), so the
// kernel spreads connections and no thread hands one to another.
bool Server::listen_on(PortKind kind, const std::string& host, bool tls, uint16_t* port,
                       net::ListenError* error) {
  if (*port != 0 && !net::can_bind(host, *port, error)) return false;
  for (auto& worker : workers_) {
    int fd = net::open_listener(host, *port, true, error, state_.settings.listen_backlog);
    if (fd < 0) return false;
    if (*port == 0) *port = net::local_port(fd);
    add_listener(*worker, fd, kind, tls);
  }
  LOG(INFO) << "Listening on " << host << ":" << *port
            << (kind == PortKind::kCache ? " (memcached protocol" : " (lock service")
            << (tls ? " over TLS)" : ")");
  return true;
}

// A path cannot be bound twice: every worker waits on the one socket
// (Worker::add_listener), and the kernel wakes one of them per client.
// Plain always, as memcached's: the socket's mode decides who may connect.
bool Server::listen_unix(net::ListenError* error) {
  const Settings& settings = state_.settings;
  int fd = net::open_unix_listener(settings.unix_socket, settings.unix_socket_mask, error,
                                   settings.listen_backlog);
  if (fd < 0) return false;
  struct stat made{};
  if (lstat(settings.unix_socket.c_str(), &made) == 0) {
    unix_socket_device_ = made.st_dev;
    unix_socket_inode_ = made.st_ino;
  }
  for (auto& worker : workers_) {
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
      *error = {"unix socket " + settings.unix_socket + ": " + std::strerror(errno), false};
      ::close(fd);
      return false;
    }
    add_listener(*worker, copy, PortKind::kCache, false);
  }
  ::close(fd);
  LOG(INFO) << "Listening on unix:" << settings.unix_socket << " (memcached protocol)";
  return true;
}

// Listening sockets take ids from the connections' counter, so that an id
// in `stats conns` names one socket.
void Server::add_listener(Worker& worker, int fd, PortKind kind, bool tls) {
  worker.add_listener(fd, kind, state_.next_connection_id.fetch_add(1, std::memory_order_relaxed),
                      tls);
}

bool Server::start_replication(std::string* error) {
  const Settings& settings = state_.settings;
  replication::NodeSettings node_settings = replication_settings();
  node_settings.virtual_ip = settings.virtual_ip;
  node_settings.listen_host = settings.virtual_ip;
  replication::Node::Hooks hooks;
  hooks.demoted = [this] {
    // Its clients' sessions and cache locks belonged to the master this
    // node was: the service is retired and they go, to find the new one.
    start_lock_service();
    close_client_connections(false);
  };
  hooks.promoted = [this] {
    // The old master's lock service is not replicated: a session resumed
    // here is refused (403 Cannot resume), and the service starts empty.
    // Connections of the one this node had as a replica close before the
    // node takes writes, so that none is served by it meanwhile.
    LOG(WARNING) << "replication: the lock service starts empty on this new master; the old "
                    "master's sessions cannot be resumed (--cluster replicates them)";
    start_lock_service();
    close_client_connections(true);
  };
  replication_ = std::make_unique<replication::Node>(node_settings, state_.store,
                                                     state_.read_only, std::move(hooks));
  if (!replication_->start(error)) {
    *error = "--virtual_ip: " + *error;
    return false;
  }
  return true;
}

replication::NodeSettings Server::replication_settings() const {
  const Settings& settings = state_.settings;
  replication::NodeSettings node_settings;
  node_settings.repl_port = settings.repl_port;
  node_settings.buffer_limit = settings.repl_buffer_size;
  node_settings.timeout_ms = int64_t{settings.repl_timeout_seconds} * 1000;
  return node_settings;
}

bool Server::start_cluster(std::string* error, bool* configuration_error) {
  const Settings& settings = state_.settings;
  // Clients reach the leader's lock service, and its replicas its cache, on
  // its cluster address's host.
  std::optional<net::Endpoint> own;  // --cluster's addresses are IPv4:PORT
  for (const consensus::Member& member : settings.cluster) {
    if (member.id == settings.node_id) own = net::parse_endpoint(member.address);
  }
  const std::string host = own ? net::host_text(*own) : "";
  // libraft reports a cluster port it cannot bind as a bare "I/O error":
  // the bind's own reason first, as for the other ports.
  if (net::ListenError failure; own && !net::can_bind(net::ip_text(*own), own->port, &failure)) {
    *error = "--cluster: " + failure.message;
    *configuration_error = failure.configuration;
    return false;
  }
  cluster::LockMachine::Addresses addresses;
  addresses.lock = host + ":" + std::to_string(lock_port_);
  addresses.replication = host + ":" + std::to_string(settings.repl_port);
  // With --tls the lock port itself speaks TLS; --lock_tls_port adds one.
  if (settings.tls) addresses.lock_tls = addresses.lock;
  if (lock_tls_port_ != 0) addresses.lock_tls = host + ":" + std::to_string(lock_tls_port_);
  // A session's locks outlast a new term's start by three election
  // timeouts at least (locks::Change::grace_floor_ms).
  lock_machine_ = std::make_shared<cluster::LockMachine>(
      state_.lock_limits(), settings.node_id, addresses,
      [this] {
        close_client_connections(true);
        if (replication_) replication_->recheck();  // the cache's master is the leader
      },
      3 * int64_t{settings.election_timeout_ms});
  consensus::RaftSettings raft;
  raft.id = settings.node_id;
  raft.members = settings.cluster;
  raft.data_dir = settings.data_dir;
  raft.secret = settings.cluster_secret;
  raft.election_timeout_ms = settings.election_timeout_ms;
  raft.heartbeat_ms = std::max(settings.election_timeout_ms / 10, 10u);
  raft.join = settings.cluster_join;
  raft_ = std::make_unique<consensus::RaftNode>(raft, *lock_machine_);
  lock_machine_->attach(raft_.get());
  state_.change_members = [this](const consensus::MembershipChange& change,
                                 const net::Endpoint& peer,
                                 auto done) { change_members(change, peer, std::move(done)); };
  state_.set_lock_coordinator(lock_machine_);
  // The cache follows the leader, replicated by the stream a virtual IP's
  // master sends (docs/high-availability.md).
  replication::NodeSettings node_settings = replication_settings();
  node_settings.listen_host = host;
  node_settings.locate = [this, machine = lock_machine_.get()] {
    using Place = replication::MasterPlace;
    if (raft_->status().role == consensus::Role::kLeader) {
      if (cache_may_lead()) return Place{Place::kHere, "", 0};
      return Place{Place::kUnknown, "", 0};  // handing leadership over first
    }
    // Empty in an election, or before the leader announced it.
    std::optional<net::Endpoint> leader =
        net::parse_endpoint(machine->leader_addresses().replication);
    if (!leader || !leader->known()) return Place{Place::kUnknown, "", 0};
    return Place{Place::kElsewhere, net::host_text(*leader), leader->port};
  };
  replication::Node::Hooks hooks;
  // The clients' cache locks belonged to the master this node was.
  hooks.demoted = [this] { close_client_connections(false); };
  replication_ = std::make_unique<replication::Node>(node_settings, state_.store,
                                                     state_.read_only, std::move(hooks));
  if (!raft_->start(error, configuration_error) || !replication_->start(error)) {
    *error = "--cluster: " + *error;
    return false;
  }
  return true;
}

// Only from a member's machine (its own address, or loopback): anyone who
// may take a lock must not also be able to remove the cluster's members.
// A node that is added must know the cluster's secret all the same.
void Server::change_members(const consensus::MembershipChange& change, const net::Endpoint& peer,
                            std::function<void(consensus::MembershipResult)> done) {
  using Status = consensus::MembershipResult::Status;
  std::string host = net::host_text(peer);
  bool member = host == "127.0.0.1" || host == "[::1]";
  std::vector<consensus::Member> members = raft_->status().members;
  members.insert(members.end(), state_.settings.cluster.begin(), state_.settings.cluster.end());
  for (const consensus::Member& m : members)
    member = member || net::host_of(m.address) == host;
  if (!member) {
    return done({Status::kRefused, "cluster changes come only from a member's machine"});
  }
  if (change.kind == consensus::MembershipChange::Kind::kAdd) {
    std::string error;
    std::vector<consensus::Member> parsed =
        consensus::parse_members(std::to_string(change.id) + "@" + change.address, &error);
    if (parsed.empty()) return done({Status::kFailed, error});
  }
  raft_->change_members(change, [machine = lock_machine_, done](const std::string& error) {
    if (error.empty()) return done({Status::kDone, ""});
    if (error == consensus::kNotLeader) {
      cluster::LockMachine::Addresses leader = machine->leader_addresses();
      return done({Status::kNotLeader, leader.lock, leader.lock_tls});
    }
    done({Status::kFailed, error});
  });
}

// A member that restarted has an empty cache. As the cache's master it
// would send that emptiness to every replica, which at the snapshot's end
// drops what the snapshot did not bring: the whole cache lost. So a leader
// whose cache has not the data yet hands leadership to the member after
// the one it last asked, in the order of ids (once a term, kMaxHandOvers
// times at most since its cache last had the data), and meanwhile is
// nobody's master: its cache refuses writes. Not libraft's
// choice (id 0): a new leader knows no follower's progress yet, so libraft
// picks the last voter in the configuration, and two restarted members
// then handed leadership to each other until one of them served its empty
// cache (raft_faults, leader-changes: 3,407 acknowledged writes lost). In
// turn, every other member is asked before any is asked twice. When no one
// takes over (the others are down, or as cold: every node restarted), it
// serves with what it has. On the replication thread (locate).
bool Server::cache_may_lead() {
  // A new cluster's member has all there is, unless a link emptied its
  // store since for a snapshot that did not come whole.
  if (replication_->holds_data() || (raft_->started_fresh() && !replication_->holds_part())) {
    return true;
  }
  consensus::RaftStatus status = raft_->status();
  uint64_t target;
  {
    std::lock_guard lock(hand_over_mutex_);
    // Counted since the cache last had the data: a member that had it and
    // lost it again (a snapshot cut off) may ask the others again.
    if (uint64_t came = replication_->times_data_came(); came != hand_over_since_) {
      hand_over_since_ = came;
      hand_overs_ = 0;
      hand_over_target_ = 0;
    }
    if (hand_overs_ >= kMaxHandOvers) return true;
    // Asked in this term (the status may still say "leader" for a moment
    // after leadership went), or an answer is on its way.
    if (hand_over_term_ == status.term || hand_over_pending_) return false;
    if (status.members.empty()) return false;  // not known yet: ask on the next tick
    target = consensus::member_after(status.members,
                                     hand_over_target_ != 0 ? hand_over_target_ : status.id,
                                     status.id);
    if (target == 0) return true;  // a cluster of one: nobody else has it
    hand_over_term_ = status.term;
    hand_over_pending_ = true;
    hand_over_target_ = target;
    ++hand_overs_;
  }
  LOG(WARNING) << "cluster: leading with a cache that does not have the data yet (restarted); "
                  "handing leadership to a member that has it (asking node "
               << target << ")";
  raft_->change_members({consensus::MembershipChange::Kind::kTransfer, target, ""},
                        [this](const std::string& error) {
                          {
                            std::lock_guard lock(hand_over_mutex_);
                            hand_over_pending_ = false;
                            if (!error.empty()) hand_over_term_ = 0;  // may ask again
                          }
                          LOG_IF(WARNING, !error.empty())
                              << "cluster: leadership was not handed over: " << error;
                          replication_->recheck();
                        });
  return false;
}

void Server::close_client_connections(bool lock_service_only) {
  for (auto& worker : workers_) {
    Worker* raw = worker.get();
    raw->reactor().post([raw, lock_service_only] { raw->close_connections(lock_service_only); });
  }
}

// Tokens start at the wall clock in microseconds, as a single server's at
// its start (docs/lock-service.md, "Fencing tokens"): the old master's
// started at its own start time and grew by one per grant, far slower than
// the clock, so with clocks in sync (NTP) a new master's tokens are above
// every token the old one handed out.
void Server::start_lock_service() {
  use_lock_service(std::make_shared<locks::LockService>(state_.lock_limits(), unix_micros()));
}

void Server::use_lock_service(std::shared_ptr<locks::LockService> service) {
  state_.set_lock_coordinator(
      std::make_shared<locks::LocalCoordinator>(std::move(service), *lock_timers_));
}

void Server::reload(const std::optional<RunTimeChanges>& changes) {
  // The users first, and whatever the flagfile says: a revoked password
  // must not wait for a mistake in the flagfile to be fixed.
  reload_users();
  if (!changes) return;
  if (changes->memory_limit) {
    configured_memory_limit_ = *changes->memory_limit;
    if (*changes->memory_limit < state_.store.smallest_memory_limit()) {
      LOG(WARNING) << "SIGHUP: --memory_limit_mb " << (*changes->memory_limit >> 20)
                   << " takes effect at the next start: below "
                   << (state_.store.smallest_memory_limit() >> 20)
                   << " MB its shards (counted at the start) could not hold the largest items";
    } else {
      state_.store.set_memory_limit(*changes->memory_limit);
    }
  }
  if (changes->idle_timeout_seconds) {
    state_.idle_timeout_seconds.store(*changes->idle_timeout_seconds, std::memory_order_relaxed);
  }
  if (changes->verbosity) core::log_verbosity.store(*changes->verbosity, std::memory_order_relaxed);
  // The files behind the TLS flags may be new (a renewed certificate);
  // their names are not re-read.
  if (std::string error; state_.tls) refresh_certs(&error);
}

void Server::reload_users() {
  core::Authenticator* authenticator = state_.settings.authenticator.get();
  if (authenticator == nullptr) return;
  if (std::string error; !authenticator->reload(&error)) {
    LOG(ERROR) << "SIGHUP: --auth_file unchanged: " << error;
  } else {
    LOG(INFO) << "SIGHUP: --auth_file re-read: " << authenticator->users() << " users";
  }
}

bool Server::refresh_certs(std::string* error) {
  if (!state_.tls) {
    *error = "Error TLS not enabled";
    return false;
  }
  if (!state_.tls->reload(error)) {
    LOG(WARNING) << "refresh_certs: certificates unchanged: " << *error;
    return false;
  }
  LOG(INFO) << "refresh_certs: certificates reloaded";
  return true;
}

// To the process, not this thread (raise): the signals are blocked in
// every thread and main's sigwait takes them, so `shutdown` stops the
// server exactly as an operator's SIGINT or SIGUSR1 does.
void Server::shutdown(bool graceful) {
  LOG(INFO) << "shutdown" << (graceful ? " graceful" : "") << " requested by a client";
  kill(getpid(), graceful ? SIGUSR1 : SIGINT);
}

void Server::stop() {
  if (unix_socket_inode_ != 0) {
    struct stat now{};
    const std::string& path = state_.settings.unix_socket;
    if (lstat(path.c_str(), &now) == 0 && now.st_dev == unix_socket_device_ &&
        now.st_ino == unix_socket_inode_) {
      unlink(path.c_str());  // may fail after --user: the next start replaces it
    }
    unix_socket_inode_ = 0;
  }
  if (replication_) replication_->stop();
  if (raft_) {
    raft_->stop();
    lock_machine_->attach(nullptr);  // connections still closing propose nothing
  }
  governor_.stop();
  crawler_.stop();
  for (auto& worker : workers_)
    worker->stop();
  for (auto& worker : workers_)
    worker->join();
  workers_.clear();
}

void Server::load_memory_file() {
  const std::string& path = state_.settings.memory_file;
  if (path.empty()) return;
  auto started = std::chrono::steady_clock::now();
  replication::MemoryFileLoaded loaded = replication::load_memory_file(path, state_.store);
  switch (loaded.outcome) {
    case replication::MemoryFileLoaded::kNoFile:
      LOG(INFO) << "--memory_file " << path
                << ": no file (the last stop was not a graceful one, SIGUSR1); starting with an "
                   "empty cache";
      return;
    case replication::MemoryFileLoaded::kRefused:
      LOG(WARNING) << "--memory_file " << path << ": " << loaded.why
                   << "; removed, starting with an empty cache";
      return;
    case replication::MemoryFileLoaded::kLoaded:
      break;
  }
  memory_file_loaded_ = true;
  LOG(INFO) << "--memory_file " << path << ": " << loaded.restored << " items restored ("
            << loaded.dropped << " expired while down or found no room) in "
            << elapsed_ms(started) << " ms; written by lockcached " << loaded.written_by << " "
            << loaded.seconds_down << " s ago";
}

void Server::keep_memory_file_for_the_next_start() {
  if (!memory_file_loaded_) return;
  LOG(INFO) << "--memory_file " << state_.settings.memory_file
            << ": the start failed after loading it; writing it back";
  save_memory_file();
}

bool Server::save_memory_file() {
  const std::string& path = state_.settings.memory_file;
  if (path.empty()) return true;
  auto started = std::chrono::steady_clock::now();
  replication::MemoryFileSaved saved =
      replication::save_memory_file(path, state_.store, configured_memory_limit_);
  if (!saved.ok) {
    LOG(ERROR) << "--memory_file " << path << ": " << saved.error
               << "; the next start will be cold";
    return false;
  }
  LOG(INFO) << "--memory_file " << path << ": " << saved.items << " items saved ("
            << saved.bytes << " bytes) in " << elapsed_ms(started) << " ms";
  return true;
}

core::CounterValues Server::thread_counters() const {
  core::CounterValues sum;
  for (const auto& worker : workers_)
    worker->stats().add_to(sum);
  std::lock_guard lock(baseline_mutex_);
  core::subtract(sum, baseline_);
  return sum;
}

void Server::reset() {
  core::CounterValues sum;
  for (const auto& worker : workers_)
    worker->stats().add_to(sum);
  {
    std::lock_guard lock(baseline_mutex_);
    baseline_ = sum;
  }
  state_.total_connections.store(0, std::memory_order_relaxed);
  state_.rejected_connections.store(0, std::memory_order_relaxed);
  state_.store.reset_stats();
  state_.watch.reset_stats();
  prefix_stats_.clear();
}

std::vector<ConnectionStatus> Server::connections() const {
  std::vector<ConnectionStatus> all;
  for (const auto& worker : workers_)
    worker->list_connections(all);
  std::sort(all.begin(), all.end(),
            [](const ConnectionStatus& a, const ConnectionStatus& b) { return a.id < b.id; });
  return all;
}

void Server::collect_connections(uint64_t asking, core::StatList& out) const {
  std::vector<ConnectionStatus> all = connections();
  // Cache locks by owner and lock-service locks by their session's
  // connection: one id space, so one map.
  std::unordered_map<uint64_t, size_t> locks = state_.lock_service()->locks_by_connection();
  for (const store::LockedItem& item : state_.store.locked_items(""))
    ++locks[item.owner];
  report_connections(all, locks, asking, net::monotonic_ms(), out);
}

void Server::collect_cache_locks(std::string_view prefix, core::StatList& out) const {
  // The locks first: a holder that is gone from the registry after that
  // has closed, and released its locks before it left.
  std::vector<store::LockedItem> locked = state_.store.locked_items(prefix);
  if (locked.empty()) return;
  std::vector<ConnectionStatus> holders = connections();
  report_cache_locks(std::move(locked), holders, state_.store.now(), out);
}

void Server::collect(core::StatsGroup group, core::StatList& out) const {
  switch (group) {
    case core::StatsGroup::kSettings:
      return report_settings(state_.settings, settings_sample(), out);
    case core::StatsGroup::kReplication:
      return report_replication(replication_sample(), out);
    case core::StatsGroup::kCluster:
      return report_cluster(cluster_sample(), out);
    case core::StatsGroup::kGeneral:
      return report_general(state_.settings, general_sample(), out);
    case core::StatsGroup::kItems:
    case core::StatsGroup::kSlabs:
    case core::StatsGroup::kSizes:
      return core::collect_size_classes(group, state_.store.class_stats(), out);
  }
}

std::optional<ClusterSample> Server::cluster_sample() const {
  if (!raft_) return std::nullopt;
  return ClusterSample{raft_->status(), lock_machine_->leader_lock_address()};
}

std::optional<ReplicationSample> Server::replication_sample() const {
  if (!replication_) return std::nullopt;
  const replication::NodeSettings& settings = replication_->settings();
  return ReplicationSample{replication_->status(), settings.virtual_ip, settings.repl_port};
}

GeneralSample Server::general_sample() const {
  GeneralSample sample;
  sample.now_unix = static_cast<int64_t>(::time(nullptr));
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  sample.pid = static_cast<int64_t>(getpid());
  sample.started_unix = state_.started_unix;
  sample.user_cpu = usage.ru_utime;
  sample.system_cpu = usage.ru_stime;
  sample.cache_connections = state_.cache_connections.load(std::memory_order_relaxed);
  sample.lock_connections = state_.lock_connections.load(std::memory_order_relaxed);
  sample.total_connections = state_.total_connections.load(std::memory_order_relaxed);
  sample.rejected_connections = state_.rejected_connections.load(std::memory_order_relaxed);
  sample.counters = thread_counters();
  sample.store = state_.store.stats();
  sample.idle_timeout = state_.idle_timeout_seconds.load(std::memory_order_relaxed) > 0;
  if (state_.tls) {
    sample.tls = GeneralSample::Tls{state_.tls_handshake_errors.load(std::memory_order_relaxed),
                                    state_.tls->loaded_at()};
  }
  sample.watch = state_.watch.stats();
  if (replication_) sample.replication = replication_->status();
  return sample;
}

SettingsSample Server::settings_sample() const {
  SettingsSample sample;
  sample.store = state_.store.stats();
  sample.port = port_;
  sample.lock_port = lock_port_;
  sample.tls_port = tls_port_;
  sample.lock_tls_port = lock_tls_port_;
  sample.verbosity = core::log_verbosity.load(std::memory_order_relaxed);
  sample.idle_timeout_seconds = state_.idle_timeout_seconds.load(std::memory_order_relaxed);
  sample.stat_key_prefix = prefix_stats_.delimiter();
  sample.detail_enabled = prefix_stats_.enabled();
  sample.lru_crawler = crawler_.enabled();
  return sample;
}

}  // namespace lockcached::server
