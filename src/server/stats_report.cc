#include "lockcached/server/stats_report.h"

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <type_traits>

#include "lockcached/protocol/base64.h"
#include "lockcached/protocol/text_parser.h"
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

// How memcached's `stats settings` shows a file setting: "(null)" unset.
std::string file_setting(const std::string& name) {
  return name.empty() ? "(null)" : name;
}

const char* yes_no(bool on) {
  return on ? "yes" : "no";
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

// `stats conns` state: memcached's names, and ours where it has none.
std::string_view state_name(ConnState state) {
  switch (state) {
    case ConnState::kWaiting:
      return "conn_waiting";
    case ConnState::kRead:
      return "conn_read";
    case ConnState::kNread:
      return "conn_nread";
    case ConnState::kWrite:
      return "conn_mwrite";
    case ConnState::kLockWait:
      return "conn_lock_wait";
    case ConnState::kReplWait:
      return "conn_repl_wait";
    case ConnState::kClosing:
      return "conn_closing";
    case ConnState::kWatch:
      return "conn_watch";
  }
  return "conn_unknown";
}

// `stats conns` protocol.
std::string_view protocol_name(ConnProtocol protocol) {
  switch (protocol) {
    case ConnProtocol::kUndecided:
      return "undecided";
    case ConnProtocol::kText:
      return "text";
    case ConnProtocol::kBinary:
      return "binary";
    case ConnProtocol::kLockService:
      return "lock_service";
  }
  return "unknown";
}

std::string_view role_name(replication::Role role) {
  return role == replication::Role::kMaster ? "master" : "replica";
}

// out's lines, a number or text each.
class Lines {
 public:
  explicit Lines(core::StatList& out) : out_(out) {}
  template <typename Value>
  void add(std::string name, const Value& value) {
    if constexpr (std::is_convertible_v<Value, std::string>) {
      out_.emplace_back(std::move(name), value);
    } else if constexpr (std::is_convertible_v<Value, std::string_view>) {
      out_.emplace_back(std::move(name), std::string(value));
    } else {
      out_.emplace_back(std::move(name), std::to_string(value));
    }
  }

 private:
  core::StatList& out_;
};

// memcached's names, in memcached's order ("(null)" for an unset file),
// then our own.
void report_tls_settings(const Settings& settings, const SettingsSample& sample, Lines& out) {
  const tls::Settings& files = settings.tls_files;
  out.add("ssl_enabled", yes_no(settings.tls_enabled()));
  out.add("ssl_chain_cert", file_setting(files.cert_file));
  out.add("ssl_key", file_setting(files.key_file.empty() ? files.cert_file : files.key_file));
  out.add("ssl_verify_mode", files.verify_client ? "2" : "0");
  out.add("ssl_keyformat", "1");  // PEM
  out.add("ssl_ciphers", files.ciphers.empty() ? "NULL" : files.ciphers);
  out.add("ssl_ca_cert", files.ca_file.empty() ? "NULL" : files.ca_file);
  out.add("ssl_session_cache", "yes");
  out.add("ssl_kernel_tls", "no");
  out.add("ssl_min_version", files.min_version == tls::kTls13 ? "tlsv1.3" : "tlsv1.2");
  out.add("tls_port", sample.tls_port);
  out.add("lock_tls_port", sample.lock_tls_port);
  out.add("tls_handshake_timeout", settings.tls_handshake_timeout_seconds);
}

}  // namespace

void report_general(const Settings& settings, const GeneralSample& sample, core::StatList& list) {
  Lines out(list);
  out.add("pid", sample.pid);
  out.add("uptime", sample.now_unix - sample.started_unix);
  out.add("time", sample.now_unix);
  out.add("version", LOCKCACHED_PROTOCOL_VERSION);
  out.add("pointer_size", sizeof(void*) * 8);
  out.add("rusage_user", seconds_text(sample.user_cpu));
  out.add("rusage_system", seconds_text(sample.system_cpu));
  out.add("max_connections", settings.max_connections);
  int open = sample.cache_connections + sample.lock_connections;
  out.add("curr_connections", open);
  out.add("curr_lock_connections", sample.lock_connections);
  out.add("total_connections", sample.total_connections);
  out.add("rejected_connections", sample.rejected_connections);
  // One Connection object per open connection, freed when it closes.
  out.add("connection_structures", open);
  const store::StoreStats& store = sample.store;
  auto add_counter = [&](const char* name, uint64_t value) {
    std::string_view counter(name);
    // As memcached, only while connections can idle out.
    if (counter == "idle_kicks" && !sample.idle_timeout) return;
    out.add(name, value);
    if (counter == "get_misses") {
      // memcached's place for the lookups (by any command) that found their
      // item expired or flushed, which the store counts.
      out.add("get_expired", store.found_expired);
      out.add("get_flushed", store.found_flushed);
    }
  };
#define LOCKCACHED_ADD_COUNTER(name) add_counter(#name, sample.counters.name);
  LOCKCACHED_THREAD_COUNTERS(LOCKCACHED_ADD_COUNTER)
#undef LOCKCACHED_ADD_COUNTER
  out.add("limit_maxbytes", store.limit_bytes);
  // Listening never stops: past max_connections a client is accepted and
  // closed at once (rejected_connections), memcached's maxconns_fast.
  out.add("accepting_conns", 1);
  out.add("listen_disabled_num", 0);
  out.add("time_in_listen_disabled_us", 0);
  out.add("threads", settings.threads);
  out.add("hash_bytes", store.hash_bytes);
  out.add("bytes", store.bytes);
  out.add("curr_items", store.curr_items);
  out.add("total_items", store.total_items);
  out.add("evictions", store.evictions);
  out.add("reclaimed", store.reclaimed);
  out.add("expired_unfetched", store.expired_unfetched);
  out.add("evicted_unfetched", store.evicted_unfetched);
  out.add("crawler_reclaimed", store.crawler_reclaimed);
  // Eviction passing over a locked item (memcached: the LRU tail item in
  // use by a request).
  out.add("lrutail_reflocked", store.evict_passed_locked);
  out.add("curr_locks", store.locked_items);
  if (sample.tls) {
    out.add("ssl_handshake_errors", sample.tls->handshake_errors);
    out.add("time_since_server_cert_refresh",
            sample.now_unix - sample.tls->certificates_loaded_unix);
  }
  out.add("log_watchers", sample.watch.watchers);
  out.add("log_watcher_skipped", sample.watch.skipped);
  out.add("log_watcher_sent", sample.watch.sent);
  if (sample.replication) {
    out.add("replication_role", role_name(sample.replication->role));
    out.add("replication_replicas", sample.replication->replicas.size());
  }
}

void report_settings(const Settings& settings, const SettingsSample& sample, core::StatList& list) {
  Lines out(list);
  // memcached's names, in memcached's order, then our own.
  out.add("maxbytes", sample.store.limit_bytes);
  out.add("maxconns", settings.max_connections);
  out.add("tcpport", sample.port);
  out.add("udpport", "0");
  out.add("inter", listen_text(settings.listen));
  out.add("verbosity", sample.verbosity);
  const core::CommandPolicy& commands = settings.commands;
  out.add("evictions", settings.evictions ? "on" : "off");
  out.add("domain_socket", settings.unix_socket.empty() ? "NULL" : settings.unix_socket);
  char mask[8];
  std::snprintf(mask, sizeof mask, "%o", settings.unix_socket_mask);
  out.add("umask", mask);
  out.add("shutdown_command", yes_no(commands.shutdown));
  out.add("num_threads", settings.threads);
  out.add("stat_key_prefix", std::string(1, sample.stat_key_prefix));
  out.add("detail_enabled", yes_no(sample.detail_enabled));
  out.add("reqs_per_event", commands.requests_per_event);
  out.add("cas_enabled", yes_no(settings.cas_enabled));
  out.add("tcp_backlog", settings.listen_backlog);
  out.add("binding_protocol", protocol_name(settings.protocol));
  // One --auth_file turns on both, as memcached's -Y with -S.
  const char* auth = yes_no(settings.authenticator != nullptr);
  out.add("auth_enabled_sasl", auth);
  out.add("auth_enabled_ascii", auth);
  out.add("item_size_max", settings.max_item_size);
  out.add("maxconns_fast", "yes");
  out.add("lru_crawler", yes_no(sample.lru_crawler));
  out.add("flush_enabled", yes_no(commands.flush_all));
  out.add("dump_enabled", yes_no(commands.dumps));
  report_tls_settings(settings, sample, out);
  out.add("memory_file", file_setting(settings.memory_file));
  out.add("lock_port", sample.lock_port);
  out.add("lock_maxconns", settings.lock_max_connections);
  out.add("idle_timeout", sample.idle_timeout_seconds);
  out.add("tcp_keepalive", settings.tcp_keepalive_seconds);
  out.add("watch_enabled", yes_no(commands.watch));
  out.add("watcher_logbuf_size", settings.watch_buffer_bytes);
  out.add("lock_memory", yes_no(settings.memory_locked));
  out.add("enable_coredumps", yes_no(settings.coredumps_enabled));
  out.add("store_shards", sample.store.shards);
  out.add("io", net::io_backend_name(settings.io));
  out.add("uring_sqpoll", yes_no(settings.uring.sqpoll));
  out.add("virtual_ip", settings.virtual_ip);
  out.add("repl_port", settings.repl_port);
  out.add("repl_buffer_size", settings.repl_buffer_size);
  out.add("repl_timeout", settings.repl_timeout_seconds);
}

void report_connections(const std::vector<ConnectionStatus>& connections,
                        const std::unordered_map<uint64_t, size_t>& locks_held, uint64_t asking,
                        int64_t now_ms, core::StatList& list) {
  Lines out(list);
  for (const ConnectionStatus& connection : connections) {
    std::string prefix = std::to_string(connection.id) + ":";
    out.add(prefix + "addr", net::conn_text(connection.address, connection.listening));
    if (!connection.listening) {
      out.add(prefix + "listen_addr", net::conn_text(connection.local_address, true));
    }
    std::string_view state = connection.listening      ? "conn_listening"
                             : connection.id == asking ? "conn_parse_cmd"
                                                       : state_name(connection.state);
    out.add(prefix + "state", state);
    int64_t idle_ms = std::max<int64_t>(0, now_ms - connection.last_active_ms);
    out.add(prefix + "secs_since_last_cmd", idle_ms / 1000);
    if (connection.listening) continue;
    out.add(prefix + "protocol", protocol_name(connection.protocol));
    auto held = locks_held.find(connection.id);
    out.add(prefix + "locks_held", held == locks_held.end() ? 0 : held->second);
  }
}

void report_cache_locks(std::vector<store::LockedItem> locked,
                        const std::vector<ConnectionStatus>& connections, store::RelTime now,
                        core::StatList& out) {
  std::unordered_map<uint64_t, net::Endpoint> addresses;
  for (const ConnectionStatus& connection : connections) {
    if (!connection.listening) addresses.emplace(connection.id, connection.address);
  }
  std::sort(locked.begin(), locked.end(),
            [](const store::LockedItem& a, const store::LockedItem& b) { return a.key < b.key; });
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

void report_cluster(const std::optional<ClusterSample>& cluster, core::StatList& list) {
  Lines out(list);
  if (!cluster) {
    out.add("role", "none");
    return;
  }
  const consensus::RaftStatus& status = cluster->status;
  out.add("role", consensus::role_name(status.role));
  out.add("node_id", status.id);
  out.add("term", status.term);
  out.add("leader_id", status.leader_id);
  out.add("leader", status.leader_address);
  out.add("leader_lock_service", cluster->leader_lock_service);
  out.add("commit_index", status.commit_index);
  out.add("applied_index", status.applied_index);
  out.add("last_index", status.last_index);
  out.add("members", status.members.size());
  for (size_t i = 0; i < status.members.size(); ++i) {
    out.add("member:" + std::to_string(i),
            std::to_string(status.members[i].id) + "@" + status.members[i].address);
  }
}

void report_replication(const std::optional<ReplicationSample>& replication, core::StatList& list) {
  Lines out(list);
  if (!replication) {
    out.add("role", "none");
    return;
  }
  const replication::NodeStatus& status = replication->status;
  out.add("role", role_name(status.role));
  out.add("state", status.state);
  out.add("virtual_ip", replication->virtual_ip);
  out.add("repl_port", replication->repl_port);
  out.add("promotions", status.promotions);
  out.add("demotions", status.demotions);
  out.add("resyncs", status.resyncs);
  out.add("replicas_dropped", status.replicas_dropped);
  if (status.role == replication::Role::kReplica) {
    out.add("master", status.master);
    out.add("bytes_applied", status.link.bytes_applied);
    out.add("frames_applied", status.link.frames_applied);
    return;
  }
  out.add("replicas", status.replicas.size());
  for (size_t i = 0; i < status.replicas.size(); ++i) {
    const replication::FollowerStatus& replica = status.replicas[i];
    std::string prefix = "replica:" + std::to_string(i) + ":";
    out.add(prefix + "address", replica.address);
    out.add(prefix + "state", replica.syncing ? "snapshot" : "streaming");
    out.add(prefix + "snapshot_items", replica.snapshot_items);
    out.add(prefix + "bytes_sent", replica.bytes_sent);
    out.add(prefix + "bytes_acked", replica.bytes_acked);
    uint64_t behind = replica.bytes_sent + replica.bytes_pending;
    out.add(prefix + "lag_bytes", behind > replica.bytes_acked ? behind - replica.bytes_acked : 0);
    out.add(prefix + "lag_seconds", seconds_text(replica.lag_ms));
    out.add(prefix + "connected_seconds", static_cast<uint64_t>(replica.connected_ms / 1000));
    out.add(prefix + "silent_ms", static_cast<uint64_t>(replica.silent_ms));
  }
}

}  // namespace lockcached::server
