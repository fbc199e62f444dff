// The stats report (server/stats_report.h) from plain inputs, without a
// server: the names, their order and the forms of the values that
// memcached's clients and the end-to-end tests read.
#include "lockcached/server/stats_report.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lockcached::server {
namespace {

std::vector<std::string> names(const core::StatList& list) {
  std::vector<std::string> out;
  for (const auto& [name, value] : list)
    out.push_back(name);
  return out;
}

// The value of `name`; "<absent>" when the list has none.
std::string value(const core::StatList& list, std::string_view name) {
  for (const auto& [key, text] : list) {
    if (key == name) return text;
  }
  return "<absent>";
}

// Where `name` is in the list; -1 when absent.
int position(const core::StatList& list, std::string_view name) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].first == name) return static_cast<int>(i);
  }
  return -1;
}

net::Endpoint at(std::string_view address) {
  return *net::parse_endpoint(address);
}

// --- stats settings ----------------------------------------------------------

TEST(StatsReportTest, SettingsInMemcachedsOrderThenOurs) {
  Settings settings;
  SettingsSample sample;
  sample.store.limit_bytes = 64 << 20;
  sample.store.shards = 16;
  sample.port = 40000;
  sample.lock_port = 40001;
  core::StatList out;
  report_settings(settings, sample, out);

  const std::vector<std::string> expected = {"maxbytes",
                                             "maxconns",
                                             "tcpport",
                                             "udpport",
                                             "inter",
                                             "verbosity",
                                             "evictions",
                                             "domain_socket",
                                             "umask",
                                             "shutdown_command",
                                             "num_threads",
                                             "stat_key_prefix",
                                             "detail_enabled",
                                             "reqs_per_event",
                                             "cas_enabled",
                                             "tcp_backlog",
                                             "binding_protocol",
                                             "auth_enabled_sasl",
                                             "auth_enabled_ascii",
                                             "item_size_max",
                                             "maxconns_fast",
                                             "lru_crawler",
                                             "flush_enabled",
                                             "dump_enabled",
                                             "ssl_enabled",
                                             "ssl_chain_cert",
                                             "ssl_key",
                                             "ssl_verify_mode",
                                             "ssl_keyformat",
                                             "ssl_ciphers",
                                             "ssl_ca_cert",
                                             "ssl_session_cache",
                                             "ssl_kernel_tls",
                                             "ssl_min_version",
                                             "tls_port",
                                             "lock_tls_port",
                                             "tls_handshake_timeout",
                                             "memory_file",
                                             "lock_port",
                                             "lock_maxconns",
                                             "idle_timeout",
                                             "tcp_keepalive",
                                             "watch_enabled",
                                             "watcher_logbuf_size",
                                             "lock_memory",
                                             "enable_coredumps",
                                             "store_shards",
                                             "io",
                                             "uring_sqpoll",
                                             "virtual_ip",
                                             "repl_port",
                                             "repl_buffer_size",
                                             "repl_timeout"};
  EXPECT_EQ(names(out), expected);

  EXPECT_EQ(value(out, "maxbytes"), "67108864") << "the limit now, not the setting";
  EXPECT_EQ(value(out, "tcpport"), "40000") << "the port bound";
  EXPECT_EQ(value(out, "lock_port"), "40001");
  EXPECT_EQ(value(out, "udpport"), "0");
  EXPECT_EQ(value(out, "inter"), "0.0.0.0");
  EXPECT_EQ(value(out, "domain_socket"), "NULL");
  EXPECT_EQ(value(out, "umask"), "700") << "octal, as memcached";
  EXPECT_EQ(value(out, "stat_key_prefix"), ":");
  EXPECT_EQ(value(out, "binding_protocol"), "auto-negotiate");
  EXPECT_EQ(value(out, "auth_enabled_sasl"), "no");
  EXPECT_EQ(value(out, "ssl_chain_cert"), "(null)") << "an unset file";
  EXPECT_EQ(value(out, "ssl_ciphers"), "NULL");
  EXPECT_EQ(value(out, "memory_file"), "(null)");
  EXPECT_EQ(value(out, "store_shards"), "16");
  EXPECT_EQ(value(out, "io"), "epoll");
  EXPECT_EQ(value(out, "virtual_ip"), "");
}

TEST(StatsReportTest, SettingsShowWhatChangesWhileServing) {
  Settings settings;
  settings.protocol = CacheProtocol::kBinary;
  settings.unix_socket = "/run/lockcached.sock";
  settings.unix_socket_mask = 0755;
  settings.tls_files.cert_file = "server.pem";
  SettingsSample sample;
  sample.verbosity = 2;
  sample.idle_timeout_seconds = 30;
  sample.stat_key_prefix = '/';
  sample.detail_enabled = true;
  sample.lru_crawler = false;
  core::StatList out;
  report_settings(settings, sample, out);
  EXPECT_EQ(value(out, "verbosity"), "2");
  EXPECT_EQ(value(out, "idle_timeout"), "30");
  EXPECT_EQ(value(out, "stat_key_prefix"), "/");
  EXPECT_EQ(value(out, "detail_enabled"), "yes");
  EXPECT_EQ(value(out, "lru_crawler"), "no");
  EXPECT_EQ(value(out, "binding_protocol"), "binary");
  EXPECT_EQ(value(out, "domain_socket"), "/run/lockcached.sock");
  EXPECT_EQ(value(out, "umask"), "755");
  EXPECT_EQ(value(out, "ssl_chain_cert"), "server.pem");
  EXPECT_EQ(value(out, "ssl_key"), "server.pem") << "the certificate's file holds the key";
}

// --- stats -------------------------------------------------------------------

TEST(StatsReportTest, GeneralNumbers) {
  Settings settings;
  GeneralSample sample;
  sample.pid = 4242;
  sample.started_unix = 1000;
  sample.now_unix = 1500;
  sample.user_cpu = {3, 25};
  sample.system_cpu = {0, 999999};
  sample.cache_connections = 5;
  sample.lock_connections = 2;
  sample.counters.get_misses = 7;
  sample.store.found_expired = 3;
  sample.store.found_flushed = 1;
  core::StatList out;
  report_general(settings, sample, out);

  EXPECT_EQ(out.front(), (std::pair<std::string, std::string>{"pid", "4242"}));
  EXPECT_EQ(value(out, "uptime"), "500");
  EXPECT_EQ(value(out, "time"), "1500");
  EXPECT_EQ(value(out, "rusage_user"), "3.000025");
  EXPECT_EQ(value(out, "rusage_system"), "0.999999");
  EXPECT_EQ(value(out, "curr_connections"), "7") << "both ports";
  EXPECT_EQ(value(out, "curr_lock_connections"), "2");
  EXPECT_EQ(value(out, "connection_structures"), "7");
  // memcached's place for the store's expired and flushed lookups.
  int misses = position(out, "get_misses");
  ASSERT_GE(misses, 0);
  EXPECT_EQ(position(out, "get_expired"), misses + 1);
  EXPECT_EQ(position(out, "get_flushed"), misses + 2);
  EXPECT_EQ(value(out, "get_expired"), "3");
  // Only what is on.
  EXPECT_EQ(position(out, "idle_kicks"), -1) << "connections cannot idle out";
  EXPECT_EQ(position(out, "ssl_handshake_errors"), -1);
  EXPECT_EQ(position(out, "replication_role"), -1);
  EXPECT_EQ(out.back().first, "log_watcher_sent");
}

TEST(StatsReportTest, GeneralNumbersOfWhatIsOn) {
  Settings settings;
  GeneralSample sample;
  sample.now_unix = 1500;
  sample.idle_timeout = true;
  sample.tls = GeneralSample::Tls{4, 1400};
  replication::NodeStatus master;
  master.role = replication::Role::kMaster;
  master.replicas.resize(2);
  sample.replication = master;
  core::StatList out;
  report_general(settings, sample, out);
  EXPECT_EQ(value(out, "idle_kicks"), "0");
  EXPECT_EQ(value(out, "ssl_handshake_errors"), "4");
  EXPECT_EQ(value(out, "time_since_server_cert_refresh"), "100");
  EXPECT_EQ(value(out, "replication_role"), "master");
  EXPECT_EQ(value(out, "replication_replicas"), "2");
  EXPECT_EQ(out.back().first, "replication_replicas");
}

// --- stats conns ---------------------------------------------------------------

TEST(StatsReportTest, ConnectionsAsMemcachedShowsThem) {
  ConnectionStatus listener;
  listener.id = 1;
  listener.listening = true;
  listener.address = at("0.0.0.0:11211");
  listener.last_active_ms = 1000;
  ConnectionStatus asking;
  asking.id = 5;
  asking.address = at("[::1]:50000");
  asking.local_address = at("[::1]:11211");
  asking.protocol = ConnProtocol::kText;
  asking.last_active_ms = 9000;
  ConnectionStatus waiting;
  waiting.id = 7;
  waiting.address = at("unix:");
  waiting.local_address = at("unix:/run/lockcached.sock");
  waiting.state = ConnState::kLockWait;
  waiting.protocol = ConnProtocol::kLockService;
  waiting.last_active_ms = 12000;  // after the moment asked: never negative
  core::StatList out;
  report_connections({listener, asking, waiting}, {{7, 3}, {99, 1}}, 5, 10500, out);

  const core::StatList expected = {
      {"1:addr", "tcp:0.0.0.0:11211"},
      {"1:state", "conn_listening"},
      {"1:secs_since_last_cmd", "9"},
      {"5:addr", "tcp6:[::1]:50000"},
      {"5:listen_addr", "tcp6:[::1]:11211"},
      {"5:state", "conn_parse_cmd"},
      {"5:secs_since_last_cmd", "1"},
      {"5:protocol", "text"},
      {"5:locks_held", "0"},
      {"7:addr", "?:<AF 0>"},
      {"7:listen_addr", "unix:/run/lockcached.sock"},
      {"7:state", "conn_lock_wait"},
      {"7:secs_since_last_cmd", "0"},
      {"7:protocol", "lock_service"},
      {"7:locks_held", "3"},
  };
  EXPECT_EQ(out, expected);
}

// --- stats cachelocks ----------------------------------------------------------

TEST(StatsReportTest, CacheLocksByKeyWithTheirHolders) {
  ConnectionStatus listener;
  listener.id = 1;
  listener.listening = true;
  listener.address = at("127.0.0.1:11211");
  ConnectionStatus holder;
  holder.id = 4;
  holder.address = at("127.0.0.1:40000");
  std::vector<store::LockedItem> locked = {
      {"zeta", 4, 100}, {"a b", 4, 150},  // not listable as it is: base64
      {"alpha", 9, 10},                   // its holder has gone
      {"gamma", 1, 10},                   // a listener holds nothing
      {"beta", 4, 300},                   // locked after the moment asked
  };
  core::StatList out;
  report_cache_locks(locked, {listener, holder}, 200, out);
  const core::StatList expected = {
      {"YSBi", "4 tcp:127.0.0.1:40000 50 b"},
      {"beta", "4 tcp:127.0.0.1:40000 0"},
      {"zeta", "4 tcp:127.0.0.1:40000 100"},
  };
  EXPECT_EQ(out, expected);
}

// --- stats cluster and stats replication ------------------------------------

TEST(StatsReportTest, NoClusterAndNoReplicationSayNone) {
  core::StatList cluster;
  report_cluster(std::nullopt, cluster);
  EXPECT_EQ(cluster, (core::StatList{{"role", "none"}}));
  core::StatList replication;
  report_replication(std::nullopt, replication);
  EXPECT_EQ(replication, (core::StatList{{"role", "none"}}));
}

TEST(StatsReportTest, AClusterMembersView) {
  ClusterSample sample;
  sample.status.role = consensus::Role::kLeader;
  sample.status.id = 2;
  sample.status.term = 7;
  sample.status.leader_id = 2;
  sample.status.leader_address = "192.0.2.2:7000";
  sample.status.commit_index = 40;
  sample.status.applied_index = 39;
  sample.status.last_index = 41;
  sample.status.members = {{1, "192.0.2.1:7000"}, {2, "192.0.2.2:7000"}};
  sample.leader_lock_service = "192.0.2.2:11400";
  core::StatList out;
  report_cluster(sample, out);
  const core::StatList expected = {
      {"role", "leader"},
      {"node_id", "2"},
      {"term", "7"},
      {"leader_id", "2"},
      {"leader", "192.0.2.2:7000"},
      {"leader_lock_service", "192.0.2.2:11400"},
      {"commit_index", "40"},
      {"applied_index", "39"},
      {"last_index", "41"},
      {"members", "2"},
      {"member:0", "1@192.0.2.1:7000"},
      {"member:1", "2@192.0.2.2:7000"},
  };
  EXPECT_EQ(out, expected);
}

TEST(StatsReportTest, AMasterAndItsReplicas) {
  ReplicationSample sample;
  sample.virtual_ip = "192.0.2.100";
  sample.repl_port = 11213;
  sample.status.role = replication::Role::kMaster;
  sample.status.state = "master";
  sample.status.promotions = 1;
  replication::FollowerStatus replica;
  replica.address = "192.0.2.3:51000";
  replica.bytes_sent = 1000;
  replica.bytes_pending = 200;
  replica.bytes_acked = 900;
  replica.lag_ms = 1005;
  replica.connected_ms = 65999;
  replica.silent_ms = 12;
  sample.status.replicas = {replica};
  core::StatList out;
  report_replication(sample, out);
  const core::StatList expected = {
      {"role", "master"},
      {"state", "master"},
      {"virtual_ip", "192.0.2.100"},
      {"repl_port", "11213"},
      {"promotions", "1"},
      {"demotions", "0"},
      {"resyncs", "0"},
      {"replicas_dropped", "0"},
      {"replicas", "1"},
      {"replica:0:address", "192.0.2.3:51000"},
      {"replica:0:state", "streaming"},
      {"replica:0:snapshot_items", "0"},
      {"replica:0:bytes_sent", "1000"},
      {"replica:0:bytes_acked", "900"},
      {"replica:0:lag_bytes", "300"},
      {"replica:0:lag_seconds", "1.005"},
      {"replica:0:connected_seconds", "65"},
      {"replica:0:silent_ms", "12"},
  };
  EXPECT_EQ(out, expected);
}

TEST(StatsReportTest, AReplicasLink) {
  ReplicationSample sample;
  sample.status.role = replication::Role::kReplica;
  sample.status.state = "streaming";
  sample.status.master = "192.0.2.100:11213";
  sample.status.link.bytes_applied = 5000;
  sample.status.link.frames_applied = 50;
  core::StatList out;
  report_replication(sample, out);
  EXPECT_EQ(value(out, "role"), "replica");
  EXPECT_EQ(value(out, "master"), "192.0.2.100:11213");
  EXPECT_EQ(value(out, "bytes_applied"), "5000");
  EXPECT_EQ(out.back(), (std::pair<std::string, std::string>{"frames_applied", "50"}));
  EXPECT_EQ(position(out, "replicas"), -1);
}

}  // namespace
}  // namespace lockcached::server
