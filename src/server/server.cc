#include "lockcached/server/server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include <glog/logging.h>

#include "lockcached/core/size_class_stats.h"
#include "lockcached/core/verbosity.h"
#include "lockcached/net/reactor.h"
#include "lockcached/net/socket.h"
#include "lockcached/protocol/base64.h"
#include "lockcached/protocol/text_parser.h"
#include "lockcached/replication/memory_file.h"
#include "lockcached/server/allocator_stats.h"
#include "lockcached/server/worker.h"
#include "lockcached/version.h"

namespace lockcached::server {
namespace {

std::string seconds_text(const timeval& tv) {
  char text[48];
  std::snprintf(text, sizeof text, "%ld.%06ld", static_cast<long>(tv.tv_sec),
                static_cast<long>(tv.tv_usec));
  return text;
}

std::string seconds_text(int64_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%lld.%03lld", static_cast<long long>(ms / 1000),
                static_cast<long long>(ms % 1000));
  return text;
}

uint64_t unix_micros() {
  using namespace std::chrono;
  return static_cast<uint64_t>(
      duration_cast<microseconds>(system_clock::now().time_since_epoch()).count());
}

// How memcached's `stats settings` shows a file setting: "(null)" unset.
std::string file_setting(const std::string& name) {
  return name.empty() ? "(null)" : name;
}

int64_t elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since)
      .count();
}

// `stats settings` binding_protocol, memcached's words.
std::string_view protocol_name(CacheProtocol protocol) {
  switch (protocol) {
    case CacheProtocol::kText:
      return "ascii";
    case CacheProtocol::kBinary:
      return "binary";
    case CacheProtocol::kAuto:
      break;
  }
  return "auto-negotiate";
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
      prefix_stats_(settings.stats_prefix_delimiter, settings.stats_detail) {}

Server::~Server() {
  stop();
}

bool Server::start(std::string* error, bool* configuration_error) {
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
  // Once the ports are ours (a start that fails there leaves the file for
  // the next try), before any client is served.
  load_memory_file();
  if (!settings.virtual_ip.empty() && !start_replication(error)) return false;
  if (!settings.cluster.empty() && !start_cluster(error)) return false;
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

bool Server::start_cluster(std::string* error) {
  const Settings& settings = state_.settings;
  // Clients reach the leader's lock service, and its replicas its cache, on
  // its cluster address's host.
  std::string host;
  for (const consensus::Member& member : settings.cluster)
    if (member.id == settings.node_id) host = net::host_of(member.address);
  cluster::LockMachine::Addresses addresses{host + ":" + std::to_string(lock_port_),
                                            host + ":" + std::to_string(settings.repl_port)};
  lock_machine_ = std::make_shared<cluster::LockMachine>(
      state_.lock_limits(), settings.node_id, addresses, [this] {
        close_client_connections(true);
        if (replication_) replication_->recheck();  // the cache's master is the leader
      });
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
  if (!raft_->start(error) || !replication_->start(error)) {
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
    if (error == consensus::kNotLeader) return done({Status::kNotLeader, machine->leader_lock_address()});
    done({Status::kFailed, error});
  });
}

// A member that restarted has an empty cache. As the cache's master it
// would send that emptiness to every replica, which empties its store for a
// new master's snapshot: the whole cache lost. So a leader whose cache has
// not the data yet asks libraft to hand leadership to the most up-to-date
// voter (once a term, kMaxHandOvers times at most) and meanwhile is
// nobody's master: its cache refuses writes. When no one takes over (the
// others are down, or as cold: every node restarted), it serves with what
// it has. On the replication thread (locate).
bool Server::cache_may_lead() {
  // A new cluster's member has all there is, unless a link emptied its
  // store since for a snapshot that did not come whole.
  if (replication_->holds_data() || (raft_->started_fresh() && !replication_->holds_part())) {
    return true;
  }
  uint64_t term = raft_->status().term;
  {
    std::lock_guard lock(hand_over_mutex_);
    if (hand_overs_ >= kMaxHandOvers) return true;
    // Asked in this term (the status may still say "leader" for a moment
    // after leadership went), or an answer is on its way.
    if (hand_over_term_ == term || hand_over_pending_) return false;
    hand_over_term_ = term;
    hand_over_pending_ = true;
    ++hand_overs_;
  }
  LOG(WARNING) << "cluster: leading with a cache that does not have the data yet (restarted); "
                  "handing leadership to a member that has it";
  raft_->change_members({consensus::MembershipChange::Kind::kTransfer, 0, ""},
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
  if (changes->memory_limit) state_.store.set_memory_limit(*changes->memory_limit);
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
  LOG(INFO) << "--memory_file " << path << ": " << loaded.restored << " items restored ("
            << loaded.dropped << " expired while down or found no room) in "
            << elapsed_ms(started) << " ms; written by lockcached " << loaded.written_by << " "
            << loaded.seconds_down << " s ago";
}

bool Server::save_memory_file() {
  const std::string& path = state_.settings.memory_file;
  if (path.empty()) return true;
  auto started = std::chrono::steady_clock::now();
  replication::MemoryFileSaved saved = replication::save_memory_file(path, state_.store);
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

// `stats conns`, as memcached 1.6 prints it (addr, listen_addr, state,
// secs_since_last_cmd per socket), with the connection id where memcached
// has the file descriptor (the id is also the owner of its cache locks),
// and two lines of ours: protocol and locks_held.
void Server::collect_connections(uint64_t asking, core::StatList& out) const {
  std::vector<ConnectionStatus> all = connections();
  // Cache locks by owner and lock-service locks by their session's
  // connection: one id space, so one map.
  std::unordered_map<uint64_t, size_t> locks = state_.lock_service()->locks_by_connection();
  for (const store::LockedItem& item : state_.store.locked_items(""))
    ++locks[item.owner];
  int64_t now_ms = net::monotonic_ms();
  for (const ConnectionStatus& connection : all) {
    std::string prefix = std::to_string(connection.id) + ":";
    out.emplace_back(prefix + "addr", net::conn_text(connection.address, connection.listening));
    if (!connection.listening) {
      out.emplace_back(prefix + "listen_addr", net::conn_text(connection.local_address, true));
    }
    std::string_view state = connection.listening      ? "conn_listening"
                             : connection.id == asking ? "conn_parse_cmd"
                                                       : state_name(connection.state);
    out.emplace_back(prefix + "state", std::string(state));
    int64_t idle_ms = std::max<int64_t>(0, now_ms - connection.last_active_ms);
    out.emplace_back(prefix + "secs_since_last_cmd", std::to_string(idle_ms / 1000));
    if (connection.listening) continue;
    out.emplace_back(prefix + "protocol", std::string(protocol_name(connection.protocol)));
    auto held = locks.find(connection.id);
    out.emplace_back(prefix + "locks_held", std::to_string(held == locks.end() ? 0 : held->second));
  }
}

// `stats cachelocks [PREFIX]`: "STAT <key> <holder id> <holder address>
// <seconds held>", by key; a key that is no valid text key comes
// base64-encoded with " b" after the seconds, as `keys` lists it.
void Server::collect_cache_locks(std::string_view prefix, core::StatList& out) const {
  // The locks first: a holder that is gone from the registry after that
  // has closed, and released its locks before it left.
  std::vector<store::LockedItem> locked = state_.store.locked_items(prefix);
  if (locked.empty()) return;
  std::unordered_map<uint64_t, net::Endpoint> addresses;
  for (const ConnectionStatus& connection : connections()) {
    if (!connection.listening) addresses.emplace(connection.id, connection.address);
  }
  std::sort(locked.begin(), locked.end(),
            [](const store::LockedItem& a, const store::LockedItem& b) { return a.key < b.key; });
  store::RelTime now = state_.store.now();
  for (const store::LockedItem& item : locked) {
    auto holder = addresses.find(item.owner);
    if (holder == addresses.end()) continue;
    std::string value = std::to_string(item.owner) + " " + net::conn_text(holder->second, false) +
                        " " + std::to_string(now >= item.since ? now - item.since : 0);
    if (protocol::listable_as_is(item.key)) {
      out.emplace_back(item.key, std::move(value));
    } else {
      out.emplace_back(protocol::base64_encode(item.key), value + " b");
    }
  }
}

void Server::collect(core::StatsGroup group, core::StatList& out) const {
  switch (group) {
    case core::StatsGroup::kSettings:
      return collect_settings(out);
    case core::StatsGroup::kReplication:
      return collect_replication(out);
    case core::StatsGroup::kCluster:
      return collect_cluster(out);
    case core::StatsGroup::kGeneral:
      return collect_general(out);
    case core::StatsGroup::kItems:
    case core::StatsGroup::kSlabs:
    case core::StatsGroup::kSizes:
      return core::collect_size_classes(group, state_.store.class_stats(), out);
  }
}

// `stats cluster`: this member's view of the Raft cluster.
void Server::collect_cluster(core::StatList& out) const {
  if (!raft_) {
    out.emplace_back("role", "none");
    return;
  }
  consensus::RaftStatus status = raft_->status();
  auto add = [&out](std::string name, uint64_t value) {
    out.emplace_back(std::move(name), std::to_string(value));
  };
  out.emplace_back("role", std::string(consensus::role_name(status.role)));
  add("node_id", status.id);
  add("term", status.term);
  add("leader_id", status.leader_id);
  out.emplace_back("leader", status.leader_address);
  out.emplace_back("leader_lock_service", lock_machine_->leader_lock_address());
  add("commit_index", status.commit_index);
  add("applied_index", status.applied_index);
  add("last_index", status.last_index);
  add("members", status.members.size());
  for (size_t i = 0; i < status.members.size(); ++i) {
    out.emplace_back("member:" + std::to_string(i), std::to_string(status.members[i].id) + "@" +
                                                         status.members[i].address);
  }
}

// `stats replication`: the role, then per replica (a master's) or the link
// (a replica's), named as memcached names per-class stats ("items:1:...").
void Server::collect_replication(core::StatList& out) const {
  if (!replication_) {
    out.emplace_back("role", "none");
    return;
  }
  replication::NodeStatus status = replication_->status();
  const replication::NodeSettings& settings = replication_->settings();
  auto add = [&out](std::string name, uint64_t value) {
    out.emplace_back(std::move(name), std::to_string(value));
  };
  out.emplace_back("role", status.role == replication::Role::kMaster ? "master" : "replica");
  out.emplace_back("state", status.state);
  out.emplace_back("virtual_ip", settings.virtual_ip);
  out.emplace_back("repl_port", std::to_string(settings.repl_port));
  add("promotions", status.promotions);
  add("demotions", status.demotions);
  add("resyncs", status.resyncs);
  add("replicas_dropped", status.replicas_dropped);
  if (status.role == replication::Role::kReplica) {
    out.emplace_back("master", status.master);
    add("bytes_applied", status.link.bytes_applied);
    add("frames_applied", status.link.frames_applied);
    return;
  }
  add("replicas", status.replicas.size());
  for (size_t i = 0; i < status.replicas.size(); ++i) {
    const replication::FollowerStatus& replica = status.replicas[i];
    std::string prefix = "replica:" + std::to_string(i) + ":";
    out.emplace_back(prefix + "address", replica.address);
    out.emplace_back(prefix + "state", replica.syncing ? "snapshot" : "streaming");
    add(prefix + "snapshot_items", replica.snapshot_items);
    add(prefix + "bytes_sent", replica.bytes_sent);
    add(prefix + "bytes_acked", replica.bytes_acked);
    add(prefix + "lag_bytes", replica.bytes_sent + replica.bytes_pending - replica.bytes_acked);
    out.emplace_back(prefix + "lag_seconds", seconds_text(replica.lag_ms));
    add(prefix + "connected_seconds", static_cast<uint64_t>(replica.connected_ms / 1000));
    add(prefix + "silent_ms", static_cast<uint64_t>(replica.silent_ms));
  }
}

void Server::collect_general(core::StatList& out) const {
  auto add = [&out](const char* name, auto value) {
    if constexpr (std::is_convertible_v<decltype(value), std::string>) {
      out.emplace_back(name, value);
    } else {
      out.emplace_back(name, std::to_string(value));
    }
  };
  int64_t now = static_cast<int64_t>(::time(nullptr));
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  add("pid", static_cast<int64_t>(getpid()));
  add("uptime", now - state_.started_unix);
  add("time", now);
  add("version", std::string(LOCKCACHED_PROTOCOL_VERSION));
  add("pointer_size", sizeof(void*) * 8);
  add("rusage_user", seconds_text(usage.ru_utime));
  add("rusage_system", seconds_text(usage.ru_stime));
  add("max_connections", state_.settings.max_connections);
  int cache_connections = state_.cache_connections.load(std::memory_order_relaxed);
  int lock_connections = state_.lock_connections.load(std::memory_order_relaxed);
  add("curr_connections", cache_connections + lock_connections);
  add("curr_lock_connections", lock_connections);
  add("total_connections", state_.total_connections.load(std::memory_order_relaxed));
  add("rejected_connections", state_.rejected_connections.load(std::memory_order_relaxed));
  // One Connection object per open connection, freed when it closes.
  add("connection_structures", cache_connections + lock_connections);
  core::CounterValues counters = thread_counters();
  store::StoreStats store = state_.store.stats();
  bool idle_timeout = state_.idle_timeout_seconds.load(std::memory_order_relaxed) > 0;
  auto add_counter = [&](const char* name, uint64_t value) {
    std::string_view counter(name);
    // As memcached, only while connections can idle out.
    if (counter == "idle_kicks" && !idle_timeout) return;
    add(name, value);
    if (counter == "get_misses") {
      // memcached's place for the lookups (by any command) that found their
      // item expired or flushed, which the store counts.
      add("get_expired", store.found_expired);
      add("get_flushed", store.found_flushed);
    }
  };
#define LOCKCACHED_ADD_COUNTER(name) add_counter(#name, counters.name);
  LOCKCACHED_THREAD_COUNTERS(LOCKCACHED_ADD_COUNTER)
#undef LOCKCACHED_ADD_COUNTER
  add("limit_maxbytes", store.limit_bytes);
  // Listening never stops: past max_connections a client is accepted and
  // closed at once (rejected_connections), memcached's maxconns_fast.
  add("accepting_conns", 1);
  add("listen_disabled_num", 0);
  add("time_in_listen_disabled_us", 0);
  add("threads", state_.settings.threads);
  add("hash_bytes", store.hash_bytes);
  add("bytes", store.bytes);
  add("curr_items", store.curr_items);
  add("total_items", store.total_items);
  add("evictions", store.evictions);
  add("reclaimed", store.reclaimed);
  add("expired_unfetched", store.expired_unfetched);
  add("evicted_unfetched", store.evicted_unfetched);
  add("crawler_reclaimed", store.crawler_reclaimed);
  // Eviction passing over a locked item (memcached: the LRU tail item in
  // use by a request).
  add("lrutail_reflocked", store.evict_passed_locked);
  add("curr_locks", store.locked_items);
  if (state_.tls) {
    add("ssl_handshake_errors", state_.tls_handshake_errors.load(std::memory_order_relaxed));
    add("time_since_server_cert_refresh", now - state_.tls->loaded_at());
  }
  core::WatchStats watch = state_.watch.stats();
  add("log_watchers", watch.watchers);
  add("log_watcher_skipped", watch.skipped);
  add("log_watcher_sent", watch.sent);
  if (replication_) {
    replication::NodeStatus status = replication_->status();
    add("replication_role", std::string(status.role == replication::Role::kMaster ? "master"
                                                                                  : "replica"));
    add("replication_replicas", status.replicas.size());
  }
}

// memcached's names and forms ("(null)" for an unset file), then our own.
void Server::collect_tls_settings(core::StatList& out) const {
  const Settings& settings = state_.settings;
  const tls::Settings& files = settings.tls_files;
  out.emplace_back("ssl_enabled", settings.tls_enabled() ? "yes" : "no");
  out.emplace_back("ssl_chain_cert", file_setting(files.cert_file));
  out.emplace_back("ssl_key",
                   file_setting(files.key_file.empty() ? files.cert_file : files.key_file));
  out.emplace_back("ssl_verify_mode", files.verify_client ? "2" : "0");
  out.emplace_back("ssl_keyformat", "1");  // PEM
  out.emplace_back("ssl_ciphers", files.ciphers.empty() ? "NULL" : files.ciphers);
  out.emplace_back("ssl_ca_cert", files.ca_file.empty() ? "NULL" : files.ca_file);
  out.emplace_back("ssl_session_cache", "yes");
  out.emplace_back("ssl_kernel_tls", "no");
  out.emplace_back("ssl_min_version", files.min_version == tls::kTls13 ? "tlsv1.3" : "tlsv1.2");
  out.emplace_back("tls_port", std::to_string(tls_port_));
  out.emplace_back("lock_tls_port", std::to_string(lock_tls_port_));
  out.emplace_back("tls_handshake_timeout", std::to_string(settings.tls_handshake_timeout_seconds));
}

void Server::collect_settings(core::StatList& out) const {
  const Settings& settings = state_.settings;
  // memcached's names, in memcached's order, then our own.
  out.emplace_back("maxbytes", std::to_string(state_.store.stats().limit_bytes));
  out.emplace_back("maxconns", std::to_string(settings.max_connections));
  out.emplace_back("tcpport", std::to_string(port_));
  out.emplace_back("udpport", "0");
  out.emplace_back("inter", listen_text(settings.listen));
  out.emplace_back("verbosity", std::to_string(core::log_verbosity.load(std::memory_order_relaxed)));
  auto yes_no = [](bool on) { return on ? "yes" : "no"; };
  const core::CommandPolicy& commands = settings.commands;
  out.emplace_back("evictions", settings.evictions ? "on" : "off");
  out.emplace_back("domain_socket", settings.unix_socket.empty() ? "NULL" : settings.unix_socket);
  char mask[8];
  std::snprintf(mask, sizeof mask, "%o", settings.unix_socket_mask);
  out.emplace_back("umask", mask);
  out.emplace_back("shutdown_command", yes_no(commands.shutdown));
  out.emplace_back("num_threads", std::to_string(settings.threads));
  out.emplace_back("stat_key_prefix", std::string(1, prefix_stats_.delimiter()));
  out.emplace_back("detail_enabled", yes_no(prefix_stats_.enabled()));
  out.emplace_back("reqs_per_event", std::to_string(commands.requests_per_event));
  out.emplace_back("cas_enabled", yes_no(settings.cas_enabled));
  out.emplace_back("tcp_backlog", std::to_string(settings.listen_backlog));
  out.emplace_back("binding_protocol", std::string(protocol_name(settings.protocol)));
  // One --auth_file turns on both, as memcached's -Y with -S.
  const char* auth = state_.settings.authenticator ? "yes" : "no";
  out.emplace_back("auth_enabled_sasl", auth);
  out.emplace_back("auth_enabled_ascii", auth);
  out.emplace_back("item_size_max", std::to_string(settings.max_item_size));
  out.emplace_back("maxconns_fast", "yes");
  out.emplace_back("lru_crawler", yes_no(crawler_.enabled()));
  out.emplace_back("flush_enabled", yes_no(commands.flush_all));
  out.emplace_back("dump_enabled", yes_no(commands.dumps));
  collect_tls_settings(out);
  out.emplace_back("memory_file", file_setting(settings.memory_file));
  out.emplace_back("lock_port", std::to_string(lock_port_));
  out.emplace_back("lock_maxconns", std::to_string(settings.lock_max_connections));
  out.emplace_back("idle_timeout",
                   std::to_string(state_.idle_timeout_seconds.load(std::memory_order_relaxed)));
  out.emplace_back("tcp_keepalive", std::to_string(settings.tcp_keepalive_seconds));
  out.emplace_back("watch_enabled", yes_no(commands.watch));
  out.emplace_back("watcher_logbuf_size", std::to_string(settings.watch_buffer_bytes));
  out.emplace_back("lock_memory", yes_no(settings.memory_locked));
  out.emplace_back("enable_coredumps", yes_no(settings.coredumps_enabled));
  out.emplace_back("store_shards", std::to_string(state_.store.stats().shards));
  out.emplace_back("io", std::string(net::io_backend_name(settings.io)));
  out.emplace_back("uring_sqpoll", settings.uring.sqpoll ? "yes" : "no");
  out.emplace_back("virtual_ip", settings.virtual_ip);
  out.emplace_back("repl_port", std::to_string(settings.repl_port));
  out.emplace_back("repl_buffer_size", std::to_string(settings.repl_buffer_size));
  out.emplace_back("repl_timeout", std::to_string(settings.repl_timeout_seconds));
}

}  // namespace lockcached::server
