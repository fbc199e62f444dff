// End-to-end tests of a Raft cluster (--cluster, docs/high-availability.md):
// three real lockcached processes on loopback, each with its own data
// directory and ports. The leader serves the lock service; the others name
// it; a session and its locks survive the leader's death and a restart of
// every node, and tokens only grow. Where a test needs the cluster in some
// state (a leader elected, an entry applied), it asks the nodes (`stats
// cluster`, `stats locks`) until they show it.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "sanitizer.h"
#include "server_process.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using e2e::Client;
using e2e::eventually;
using e2e::free_ports;
using e2e::ServerProcess;

constexpr int kNodes = 3;     // the initial voters
constexpr int kMaxNodes = 4;  // and one a test may add
// Short, so that elections are quick; the tests do not depend on it.
constexpr const char* kElectionTimeout = "--election_timeout_ms=300";
constexpr auto kElection = 20s;  // how long a test waits for a leader

std::optional<uint64_t> acquired_token(std::string_view reply) {
  constexpr std::string_view kPrefix = "200 Acquired ";
  if (!reply.starts_with(kPrefix)) return std::nullopt;
  uint64_t token = 0;
  std::string_view digits = reply.substr(kPrefix.size());
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), token);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return token;
}

class ClusterE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("cluster_e2e." + std::to_string(getpid()) + "." +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    std::ofstream(root_ / "secret") << "a secret only the members know\n";
    // A cluster port and a replication port per node.
    std::vector<uint16_t> ports = free_ports(2 * kNodes);
    for (int i = 1; i <= kNodes; ++i) {
      fs::create_directories(root_ / std::to_string(i));
      cluster_ += (i > 1 ? "," : "") + std::to_string(i) +
                  "@127.0.0.1:" + std::to_string(ports[2 * (i - 1)]);
      repl_ports_[i] = ports[2 * (i - 1) + 1];
    }
  }
  void TearDown() override {
    for (auto& node : nodes_)
      node.reset();
    fs::remove_all(root_);
  }

  // `extra`: flags beside the common ones (`--cluster` among them
  // replaces the initial voters').
  void start(int id, std::vector<std::string> extra = {}) {
    auto node = std::make_unique<ServerProcess>();
    std::vector<std::string> flags = {"--node_id=" + std::to_string(id),
                                      "--data_dir=" + (root_ / std::to_string(id)).string(),
                                      "--cluster_secret_file=" + (root_ / "secret").string(),
                                      "--lock_port=-1",
                                      "--repl_port=" + std::to_string(repl_ports_[id]),
                                      kElectionTimeout};
    if (std::none_of(extra.begin(), extra.end(),
                     [](const std::string& flag) { return flag.starts_with("--cluster="); })) {
      flags.push_back("--cluster=" + cluster_);
    }
    flags.insert(flags.end(), extra.begin(), extra.end());
    ASSERT_TRUE(node->start(flags));
    std::optional<uint16_t> lock_port = node->lock_port();
    ASSERT_TRUE(lock_port);
    lock_ports_[id] = *lock_port;
    nodes_[id - 1] = std::move(node);
  }
  void start_all() {
    for (int id = 1; id <= kNodes; ++id)
      start(id);
  }

  // Empty when the node closed the connection first (a node that stops
  // leading closes its clients' connections).
  std::map<std::string, std::string> node_stats(int id, const std::string& group = "cluster") {
    Client client;
    if (!client.connect(nodes_[id - 1]->port()) || !client.send("stats " + group + "\r\n"))
      return {};
    std::map<std::string, std::string> stats;
    for (std::string line = client.read_line(); line != "END"; line = client.read_line()) {
      size_t name_end = line.find(' ', 5);
      if (!line.starts_with("STAT ") || name_end == std::string::npos) return {};
      stats[line.substr(5, name_end - 5)] = line.substr(name_end + 1);
    }
    return stats;
  }

  // The node every running node agrees leads, and that leads the cache too
  // (a leader restarted without the cache's data hands leadership over
  // first, closing its clients); 0 if none within kElection.
  int leader() {
    int found = 0;
    eventually(
        [&] {
          found = 0;
          std::string leader_id;
          for (int id = 1; id <= kMaxNodes; ++id) {
            if (!nodes_[id - 1]) continue;
            std::map<std::string, std::string> stats = node_stats(id);
            if (stats["role"] == "leader") found = id;
            if (leader_id.empty()) leader_id = stats["leader_id"];
            if (stats["leader_id"] != leader_id || stats["leader_lock_service"].empty()) {
              return false;
            }
          }
          return found != 0 && leader_id == std::to_string(found) &&
                 node_stats(found, "replication")["role"] == "master";
        },
        kElection, 50ms);
    EXPECT_NE(found, 0) << "no leader that every node knows";
    return found;
  }

  // One `stats` value of node `id`'s lock service.
  std::string lock_stat(int id, const std::string& name) {
    Client client = lock_client(id);
    if (client.request("stats") != "200 STATS") return "";
    std::string value;
    for (std::string line = client.read_line(); line != "END" && !line.starts_with("<");
         line = client.read_line()) {
      if (line.starts_with("STAT " + name + " ")) value = line.substr(6 + name.size());
    }
    return value;
  }

  // lockcached-cli with `args` against node `id`'s lock service: its exit
  // status.
  int cli(int id, const std::string& args) {
    std::string command = e2e::cli_binary() + " --host 127.0.0.1 --lock-port " +
                          std::to_string(lock_ports_[id]) + " " + args + " >&2";
    int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  Client cache_client(int id) {
    Client client;
    EXPECT_TRUE(client.connect(nodes_[id - 1]->port()));
    return client;
  }

  Client lock_client(int id) {
    Client client;
    EXPECT_TRUE(client.connect(lock_ports_[id]));
    return client;
  }

  // A cache connection to whoever leads once leadership has settled (a
  // step-down closes the connections of the master that was): the node
  // that takes a write, which *id names.
  Client settled_leader_cache(int* id) {
    Client client;
    EXPECT_TRUE(eventually([&] {
      *id = leader();
      client = Client();
      return *id != 0 && client.connect(nodes_[*id - 1]->port()) &&
             client.store("set", "after", "1") == "STORED";
    }));
    return client;
  }

  // `lockcached-cli OPTIONS run job` for each of `options` in turn: each
  // must run its command, whose fencing token must be larger than the one
  // before.
  void expect_runs_with_growing_tokens(const std::vector<std::string>& options) {
    uint64_t previous = 0;
    for (const std::string& how : options) {
      std::string command = e2e::cli_binary() + " " + how +
                            " run job -- sh -c 'echo $LOCKCACHED_FENCING_TOKEN' 2>&1";
      FILE* cli = popen(command.c_str(), "r");
      ASSERT_NE(cli, nullptr);
      char line[512] = {};
      bool read = fgets(line, sizeof line, cli) != nullptr;
      int status = pclose(cli);
      EXPECT_TRUE(read) << how;
      EXPECT_EQ(status, 0) << how << ": " << line;
      uint64_t token = std::strtoull(line, nullptr, 10);
      EXPECT_GT(token, previous) << how << ": " << line;
      previous = token;
    }
  }

  fs::path root_;
  std::string cluster_;
  std::unique_ptr<ServerProcess> nodes_[kMaxNodes];
  std::map<int, uint16_t> lock_ports_;
  std::map<int, uint16_t> repl_ports_;  // each node's cache replication port
};

TEST_F(ClusterE2e, TheLeaderServesTheLockServiceAndTheOthersNameIt) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  Client holder = lock_client(lead);
  std::optional<uint64_t> token = acquired_token(holder.request("lock deploy"));
  ASSERT_TRUE(token);
  for (int id = 1; id <= kNodes; ++id) {
    if (id == lead) continue;
    Client other = lock_client(id);
    EXPECT_EQ(other.request("lock deploy"),
              "503 not leader: 127.0.0.1:" + std::to_string(lock_ports_[lead]));
    EXPECT_EQ(other.request("conn_id"),
              "503 not leader: 127.0.0.1:" + std::to_string(lock_ports_[lead]));
    // Every member holds the lock service's state: the grant is there too.
    std::string seen;
    EXPECT_TRUE(eventually([&] {
      Client reader = lock_client(id);
      reader.request("stats locks deploy");
      seen = reader.read_line();
      return seen.starts_with("LOCK deploy ") &&
             seen.find(" " + std::to_string(*token) + " ") != std::string::npos;
    })) << seen;
  }
  std::map<std::string, std::string> stats = node_stats(lead);
  EXPECT_EQ(stats["members"], "3");
  EXPECT_EQ(stats["node_id"], std::to_string(lead));
  EXPECT_GE(std::stoull(stats["applied_index"]), *token >> 20);
}

// lockcached-cli needs to be told no more than one node: a follower's
// 503 names the leader, and `run` goes there.
TEST_F(ClusterE2e, TheCliFollowsTheLeaderFromAnyNode) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  std::vector<std::string> at_each_node;
  for (int id = 1; id <= kNodes; ++id)
    at_each_node.push_back("--host 127.0.0.1 --lock-port " + std::to_string(lock_ports_[id]));
  expect_runs_with_growing_tokens(at_each_node);
}

// A cluster whose lock service speaks TLS on ports of its own
// (--lock_tls_port): a follower reached over TLS names the leader's TLS
// port, not its plain one, and the CLI checks the leader's certificate
// against the name it was given (--host localhost), which the nodes'
// certificates carry, not against the address the follower named, which
// they do not (test/certs/dns-only.pem).
TEST_F(ClusterE2e, TheCliFollowsTheLeaderOverTls) {
  const std::string certs = std::string(LOCKCACHED_SOURCE_DIR) + "/test/certs";
  std::vector<uint16_t> tls_ports = free_ports(kNodes);
  for (int id = 1; id <= kNodes; ++id) {
    start(id, {"--lock_tls_port=" + std::to_string(tls_ports[id - 1]),
               "--tls_cert_file=" + certs + "/dns-only.pem",
               "--tls_key_file=" + certs + "/dns-only.key"});
  }
  int lead = leader();
  ASSERT_NE(lead, 0);
  std::vector<std::string> at_each_node;
  for (int id = 1; id <= kNodes; ++id) {
    at_each_node.push_back("--tls --tls_ca_file " + certs +
                           "/dns-ca.pem --host localhost --timeout 5 --lock-port " +
                           std::to_string(tls_ports[id - 1]));
  }
  expect_runs_with_growing_tokens(at_each_node);
}

// Until a cluster has a leader, a node answers "503 not leader: election";
// once one is elected, it closes its lock-service connections. The CLI
// asks again on a new connection each time, so an election in the middle
// of its request does not end it.
TEST_F(ClusterE2e, TheCliWaitsThroughTheFirstElection) {
  start(1);  // alone: no majority, no leader
  std::string command = e2e::cli_binary() + " --host 127.0.0.1 --lock-port " +
                        std::to_string(lock_ports_[1]) +
                        " --timeout 30 run job -- sh -c 'echo $LOCKCACHED_FENCING_TOKEN'";
  FILE* cli = popen(command.c_str(), "r");
  ASSERT_NE(cli, nullptr);
  // It was answered "election" and asked again: two connections, beside
  // this one.
  Client watcher = cache_client(1);
  uint64_t before = std::stoull(watcher.stats()["total_connections"]);
  EXPECT_TRUE(eventually([&] {
    return std::stoull(watcher.stats()["total_connections"]) >= before + 2;
  })) << "the CLI is not asking again";
  EXPECT_EQ(watcher.stats("cluster")["leader_id"], "0");
  start(2);
  start(3);
  char line[64] = {};
  bool read = fgets(line, sizeof line, cli) != nullptr;
  EXPECT_EQ(pclose(cli), 0);
  EXPECT_TRUE(read);
  EXPECT_GT(std::strtoull(line, nullptr, 10), 0u) << line;
}

// -vv: every change a member applies, in the log's order, with what it did.
TEST_F(ClusterE2e, VeryVerboseLogsEachAppliedChange) {
  start(1, {"--cluster=" + cluster_.substr(0, cluster_.find(',')), "--v=2"});  // alone: it leads
  ASSERT_EQ(leader(), 1);
  Client holder = lock_client(1);
  std::string id = holder.request("conn_id");
  ASSERT_TRUE(id.starts_with("200 ")) << id;
  std::string session = id.substr(4, id.find('-') - 4);  // the serial, before the secret
  std::optional<uint64_t> token = acquired_token(holder.request("lock logged"));
  ASSERT_TRUE(token);
  EXPECT_EQ(holder.request("unlock logged"), "200 Released");
  EXPECT_EQ(holder.request("unlock logged"), "403 Not held");
  std::string granted = "cluster: acquire session " + session + " logged: done token " +
                        std::to_string(*token) + " (asked here)";
  std::string refused = "cluster: release session " + session + " logged: refused (asked here)";
  EXPECT_TRUE(eventually([&] {
    std::string log = nodes_[0]->log();
    return log.find(granted) != std::string::npos && log.find(refused) != std::string::npos;
  })) << nodes_[0]->log();
}

// `cluster leads` answers by its exit status alone (what a keepalived track
// script asks); `cluster status` prints the node's view.
TEST_F(ClusterE2e, TheCliTellsWhetherANodeLeads) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  for (int id = 1; id <= kNodes; ++id) {
    std::string cli =
        e2e::cli_binary() + " --host 127.0.0.1 --port " + std::to_string(nodes_[id - 1]->port());
    FILE* leads = popen((cli + " cluster leads").c_str(), "r");
    ASSERT_NE(leads, nullptr);
    char ignored[16];
    EXPECT_EQ(fgets(ignored, sizeof ignored, leads), nullptr) << "it prints nothing";
    int status = pclose(leads);
    EXPECT_TRUE(WIFEXITED(status)) << "node " << id;
    EXPECT_EQ(WEXITSTATUS(status), id == lead ? 0 : 1) << "node " << id;

    FILE* shown = popen((cli + " cluster status").c_str(), "r");
    ASSERT_NE(shown, nullptr);
    std::string text;
    char line[256];
    while (fgets(line, sizeof line, shown) != nullptr)
      text += line;
    EXPECT_EQ(pclose(shown), 0);
    EXPECT_NE(text.find(id == lead ? "role leader\n" : "role follower\n"), std::string::npos)
        << text;
    EXPECT_NE(text.find("leader_id " + std::to_string(lead) + "\n"), std::string::npos) << text;
  }
}

TEST_F(ClusterE2e, ASessionKeepsItsLocksAndTokensWhenTheLeaderDies) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  Client holder = lock_client(lead);
  ASSERT_EQ(holder.request("set_timeout 30000"), "200 Timeout set");
  std::string id = holder.request("conn_id").substr(4);
  std::optional<uint64_t> token = acquired_token(holder.request("lock ledger"));
  ASSERT_TRUE(token);

  ASSERT_TRUE(nodes_[lead - 1]->stop(SIGKILL).has_value());
  nodes_[lead - 1].reset();
  int next = leader();
  ASSERT_NE(next, 0);
  ASSERT_NE(next, lead);
  // Nobody else gets it: the session's grace runs on the new leader.
  Client other = lock_client(next);
  EXPECT_EQ(other.request("lock ledger"), "409 Unavailable");
  Client resumed = lock_client(next);
  EXPECT_EQ(resumed.request("conn_id " + id), "200 Resumed");
  EXPECT_EQ(resumed.request("lock ledger"), "200 Acquired " + std::to_string(*token));
  // A new grant comes after every earlier one.
  std::optional<uint64_t> later = acquired_token(resumed.request("lock audit"));
  ASSERT_TRUE(later);
  EXPECT_GT(*later, *token);
  // The waiter is granted when the holder lets go.
  Client waiter = lock_client(next);
  ASSERT_TRUE(waiter.send("lock ledger 10\r\n"));
  EXPECT_TRUE(eventually([&] { return lock_stat(next, "waiters") == "1"; }));
  EXPECT_EQ(resumed.request("unlock ledger"), "200 Released");
  std::optional<uint64_t> handed = acquired_token(waiter.read_line());
  ASSERT_TRUE(handed);
  EXPECT_GT(*handed, *later);
}

// `run --wait` given a follower waits at the leader the follower named;
// the leader dies. The CLI asks the follower it was given again, which
// names the new leader (or is it), and waits there: the holder's session,
// whose grace was 0, ends on the new leader and the lock is the waiter's
// (docs/high-availability.md: "a waiting client reconnects and asks again").
// Asking only the dead leader again, the CLI gave up at --timeout.
TEST_F(ClusterE2e, ARunWaitingThroughAFollowerOutlivesTheLeader) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  int follower = lead % kNodes + 1;
  Client holder = lock_client(lead);
  ASSERT_EQ(holder.request("set_timeout 0"), "200 Timeout set");
  std::optional<uint64_t> held = acquired_token(holder.request("lock job"));
  ASSERT_TRUE(held);
  std::string command = e2e::cli_binary() + " --host 127.0.0.1 --lock-port " +
                        std::to_string(lock_ports_[follower]) +
                        " --timeout 10 run job --wait 60 -- sh -c 'echo $LOCKCACHED_FENCING_TOKEN'";
  FILE* cli = popen(command.c_str(), "r");
  ASSERT_NE(cli, nullptr);
  EXPECT_TRUE(eventually([&] { return lock_stat(lead, "waiters") == "1"; }))
      << "the CLI does not wait at the leader";
  ASSERT_TRUE(nodes_[lead - 1]->stop(SIGKILL).has_value());
  nodes_[lead - 1].reset();
  char line[64] = {};
  bool read = fgets(line, sizeof line, cli) != nullptr;
  EXPECT_EQ(pclose(cli), 0) << "the CLI gave up";
  EXPECT_TRUE(read);
  EXPECT_GT(std::strtoull(line, nullptr, 10), *held) << line;
}

// lockcached-cli's ping, `conn_id <own id>`, tells the client its session
// and locks are still its own. A leader paused long enough for another to
// be elected and give the lock away must not say so when it thaws and
// reads the pings queued meanwhile: it answers only through the log.
TEST_F(ClusterE2e, APausedLeaderNeverConfirmsASessionThatANewLeaderEnded) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  Client holder = lock_client(lead);
  ASSERT_EQ(holder.request("set_timeout 0"), "200 Timeout set");
  std::string id = holder.request("conn_id").substr(4);
  ASSERT_TRUE(acquired_token(holder.request("lock x")));
  ASSERT_EQ(holder.request("conn_id " + id), "200 Resumed");  // the ping, while it leads

  ASSERT_EQ(::kill(nodes_[lead - 1]->pid(), SIGSTOP), 0);
  int next = 0;
  EXPECT_TRUE(eventually(
      [&] {
        for (int other = 1; other <= kNodes; ++other)
          if (other != lead && node_stats(other)["role"] == "leader") next = other;
        return next != 0;
      },
      kElection, 50ms));
  std::optional<uint64_t> given{};
  if (next != 0) given = acquired_token(lock_client(next).request("lock x 10", 15s));
  ASSERT_TRUE(holder.send("conn_id " + id + "\r\n"));
  ASSERT_EQ(::kill(nodes_[lead - 1]->pid(), SIGCONT), 0);
  ASSERT_TRUE(given) << "the new leader did not give the lock away";
  std::string reply = holder.read_line(10s);
  EXPECT_NE(reply, "200 Resumed");
  EXPECT_TRUE(reply.starts_with("503") || reply.find("closed by the server") != std::string::npos)
      << reply;
}

// A member whose disk was lost, started again under its old id with an
// empty directory, has forgotten the votes it gave and the entries it
// acknowledged: its peers must not count it. They refuse it (its data
// directory is not the one they knew), so with the third member gone too
// the leader has no majority and grants nothing, where counting the
// emptied member would have let it grant alone.
TEST_F(ClusterE2e, AMemberThatLostItsDiskIsNotCountedUnderItsOldId) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  int emptied = lead % kNodes + 1;
  int other = emptied % kNodes + 1;
  ASSERT_NE(other, lead);
  ASSERT_TRUE(nodes_[emptied - 1]->stop(SIGKILL).has_value());
  for (const auto& entry : fs::directory_iterator(root_ / std::to_string(emptied)))
    fs::remove_all(entry.path());
  start(emptied);
  EXPECT_TRUE(eventually(
      [&] {
        return nodes_[lead - 1]->log().find("cluster port: refused node " +
                                            std::to_string(emptied)) != std::string::npos;
      },
      kElection, 50ms))
      << nodes_[lead - 1]->log();

  ASSERT_TRUE(nodes_[other - 1]->stop(SIGKILL).has_value());
  nodes_[other - 1].reset();
  Client holder = lock_client(lead);
  std::string reply = holder.request("lock granted-by-a-minority", 10s);
  EXPECT_FALSE(reply.starts_with("200")) << reply;
}

// The cache's master is the Raft leader: the others refuse writes and
// follow it, and when it dies the new leader has what it had and takes
// writes, and the remaining follower follows the new one.
TEST_F(ClusterE2e, TheCacheFollowsTheLeader) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  Client writer = cache_client(lead);
  ASSERT_EQ(writer.store("set", "greeting", "hello"), "STORED");
  for (int id = 1; id <= kNodes; ++id) {
    if (id == lead) continue;
    Client follower = cache_client(id);
    EXPECT_EQ(follower.store("set", "greeting", "other"),
              "SERVER_ERROR read-only replica: writes go to the master");
    EXPECT_TRUE(eventually([&] { return follower.get("greeting") == "hello"; }));
  }
  ASSERT_TRUE(nodes_[lead - 1]->stop(SIGKILL).has_value());
  nodes_[lead - 1].reset();
  int next = leader();
  ASSERT_NE(next, 0);
  Client new_writer = cache_client(next);
  EXPECT_TRUE(eventually([&] { return new_writer.store("set", "after", "1") == "STORED"; }));
  EXPECT_EQ(new_writer.get("greeting"), "hello");
  for (int id = 1; id <= kNodes; ++id) {
    if (id == lead || id == next) continue;
    Client follower = cache_client(id);
    EXPECT_TRUE(eventually([&] { return follower.get("after") == "1"; }));
    EXPECT_EQ(follower.get("greeting"), "hello");
  }
}

// A member restarted has an empty cache. Made leader (at once, or once it
// has the master's snapshot: both can happen, the snapshot being small), it
// must never be the master with an empty cache, whose snapshot would empty
// every replica: it hands leadership to a member that has the data, or
// leads with the data it got. Either way the cache keeps it.
TEST_F(ClusterE2e, ARestartedMemberMadeLeaderNeverEmptiesTheCache) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  Client writer = cache_client(lead);
  ASSERT_EQ(writer.store("set", "greeting", "hello"), "STORED");
  int cold = lead % kNodes + 1;
  Client follower = cache_client(cold);
  ASSERT_TRUE(eventually([&] { return follower.get("greeting") == "hello"; }));
  follower.close();
  ASSERT_TRUE(nodes_[cold - 1]->stop(SIGKILL).has_value());
  start(cold);
  // libraft hands over only to a voter that has caught up with its log, and
  // a transfer can end in an election that another member wins: ask whoever
  // leads now, until the restarted member leads.
  ASSERT_TRUE(eventually(
      [&] {
        for (int id = 1; id <= kNodes; ++id) {
          if (node_stats(id)["role"] != "leader") continue;
          if (id == cold) return true;
          Client admin = lock_client(id);
          return admin.request("cluster transfer " + std::to_string(cold)) == "200 Transferred";
        }
        return false;
      },
      kElection));

  // Whoever leads once leadership has settled takes writes and has the data.
  int next = 0;
  Client reader = settled_leader_cache(&next);
  EXPECT_EQ(reader.get("greeting"), "hello");
  std::string log = nodes_[cold - 1]->log();
  bool handed_over = log.find("handing leadership to a member that has it") != std::string::npos;
  std::cout << "the restarted member "
            << (handed_over ? "handed leadership over" : "had the snapshot when it led")
            << "; node " << next << " leads\n";
}

// Two members restarted cold, and the third the master with the data:
// a cold one made leader hands leadership on, in the order of ids, until
// the member with the data leads (Server::cache_may_lead). Left to libraft,
// a new leader, which knows no follower's progress yet, picks the last
// voter: the two cold ones handed leadership to each other until one of
// them served its cold cache, and every replica emptied for its snapshot.
TEST_F(ClusterE2e, ColdMembersHandLeadershipOnUntilTheOneWithTheDataLeads) {
  start_all();
  ASSERT_TRUE(eventually(
      [&] {
        int lead = leader();
        if (lead == 1 || lead == 0) return lead == 1;
        Client admin = lock_client(lead);
        admin.request("cluster transfer 1");
        return false;
      },
      kElection));
  Client writer = cache_client(1);
  ASSERT_EQ(writer.store("set", "greeting", "hello"), "STORED");
  writer.close();
  // 2 and 3 come back cold while 1 is paused: one of them is elected.
  ASSERT_TRUE(nodes_[1]->stop(SIGKILL).has_value());
  ASSERT_TRUE(nodes_[2]->stop(SIGKILL).has_value());
  ASSERT_EQ(::kill(nodes_[0]->pid(), SIGSTOP), 0);
  start(2);
  start(3);
  bool cold_leader = eventually(
      [&] { return node_stats(2)["role"] == "leader" || node_stats(3)["role"] == "leader"; },
      kElection);
  ASSERT_EQ(::kill(nodes_[0]->pid(), SIGCONT), 0);
  ASSERT_TRUE(cold_leader);

  // Whoever leads once leadership has settled takes writes and has the data.
  int next = 0;
  Client reader = settled_leader_cache(&next);
  EXPECT_EQ(reader.get("greeting").value_or("(missing)"), "hello") << "node " << next << " leads";
}

TEST_F(ClusterE2e, AWaitTimesOutOnTheLeadersClock) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  Client holder = lock_client(lead);
  ASSERT_TRUE(acquired_token(holder.request("lock busy")));
  Client waiter = lock_client(lead);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(waiter.request("lock busy 0.3"), "409 Unavailable");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 290ms);
  // The connection goes on being served.
  EXPECT_TRUE(acquired_token(waiter.request("lock free")));
}

// Check-quorum: a leader cut off from the majority (here, the others are
// frozen) steps down within about two election timeouts and closes its
// lock-service connections, so a client on its side learns that its locks
// may be someone else's now. The frozen nodes then elect a new leader.
TEST_F(ClusterE2e, ALeaderThatHearsNoMajorityStepsDownAndClosesItsClients) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  Client holder = lock_client(lead);
  ASSERT_TRUE(acquired_token(holder.request("lock mine")));
  for (int id = 1; id <= kNodes; ++id)
    if (id != lead) kill(nodes_[id - 1]->pid(), SIGSTOP);
  auto start = std::chrono::steady_clock::now();
  bool closed = holder.wait_for_close(10s);
  auto took = std::chrono::steady_clock::now() - start;
  std::string role;
  EXPECT_TRUE(eventually([&] {
    role = node_stats(lead)["role"];
    return !role.empty();
  }));
  for (int id = 1; id <= kNodes; ++id)
    if (id != lead) kill(nodes_[id - 1]->pid(), SIGCONT);
  EXPECT_TRUE(closed);
  EXPECT_NE(role, "leader");
  // 300 ms election timeout: libraft checks the majority once per timeout,
  // so it notices within two of them; the rest is slack for a busy machine
  // (and more under a sanitizer).
  EXPECT_LT(took, std::chrono::milliseconds(static_cast<int64_t>(e2e::latency_bound_ms(3000))));
  std::cout << "step-down closed the client "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
            << " ms after the majority froze\n";
  EXPECT_NE(leader(), 0);
}

TEST_F(ClusterE2e, EveryNodeRestartedAtOnceKeepsTheLocksAndTokensGrow) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  uint64_t before;
  {
    Client holder = lock_client(lead);
    ASSERT_EQ(holder.request("set_timeout 60000"), "200 Timeout set");
    std::optional<uint64_t> token = acquired_token(holder.request("lock kept"));
    ASSERT_TRUE(token);
    before = *token;
  }
  for (auto& node : nodes_) {
    if (!node) continue;
    ASSERT_TRUE(node->stop(SIGTERM).has_value());
    node.reset();
  }
  start_all();
  // The first leader after the restart may hand leadership on at once (its
  // cache is behind the others', server.cc), closing its lock-service
  // connections: ask whichever node leads until one answers both requests
  // (a fresh name each time, in case a lost reply was a grant).
  std::string kept, fresh;
  int attempt = 0;
  ASSERT_TRUE(eventually(
      [&] {
        int lead = leader();
        if (lead == 0) return false;
        Client reader = lock_client(lead);
        auto answered = [](const std::string& reply) {
          return !reply.starts_with("<no reply") && !reply.starts_with("503 ");
        };
        kept = reader.request("lock kept");
        if (!answered(kept)) return false;
        fresh = reader.request("lock fresh-" + std::to_string(++attempt));
        return answered(fresh);
      },
      std::chrono::seconds(30)))
      << kept << " / " << fresh;
  EXPECT_EQ(kept, "409 Unavailable");  // still its session's
  std::optional<uint64_t> after = acquired_token(fresh);
  ASSERT_TRUE(after) << fresh;
  EXPECT_GT(*after, before);
}

// `cluster transfer` hands leadership over, asked of any node: the CLI
// follows the 503 to the leader.
TEST_F(ClusterE2e, ATransferMovesLeadershipToTheNodeNamed) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  int target = lead % kNodes + 1;
  int asked = target % kNodes + 1;  // neither: a follower that names the leader
  ASSERT_NE(asked, target);
  EXPECT_EQ(cli(asked, "cluster transfer " + std::to_string(target)), 0);
  // The nodes' `stats cluster` may still show the old leader for a moment.
  // And the election a transfer starts can go to another member (a CI run
  // saw it once, in ARestartedMemberMadeLeaderNeverEmptiesTheCache): then
  // ask again.
  EXPECT_TRUE(eventually(
      [&] {
        if (leader() == target) return true;
        cli(asked, "cluster transfer " + std::to_string(target));
        return leader() == target;
      },
      kElection));
  // To the node that leads already: done, and nothing moves.
  EXPECT_EQ(cli(asked, "cluster transfer " + std::to_string(target)), 0);
  EXPECT_EQ(leader(), target);
  // Without an id, to the most up-to-date voter.
  EXPECT_EQ(cli(target, "cluster transfer"), 0);
  int next = 0;
  EXPECT_TRUE(eventually([&] {
    next = leader();
    return next != 0 && next != target;
  })) << next;
}

// A node that joins starts empty, is added by the leader, catches up (it
// has the locks granted before it came) and votes: with one original
// member removed and another dead, the leader and the new node are the
// majority that commits a change.
TEST_F(ClusterE2e, ANodeAddedCatchesUpAndVotesAndARemovedNodeLeaves) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  Client holder = lock_client(lead);
  std::optional<uint64_t> token = acquired_token(holder.request("lock kept"));
  ASSERT_TRUE(token);

  std::vector<uint16_t> ports = free_ports(2);
  std::string address = "127.0.0.1:" + std::to_string(ports[0]);
  repl_ports_[4] = ports[1];
  fs::create_directories(root_ / "4");
  start(4, {"--cluster=4@" + address, "--cluster_join"});
  EXPECT_EQ(node_stats(4)["members"], "0");  // it waits to be added
  Client admin = lock_client(lead);
  EXPECT_EQ(admin.request("cluster add 2 " + address).substr(0, 4), "409 ");  // id taken
  EXPECT_EQ(cli(lead, "cluster add 4 " + address), 0);
  EXPECT_TRUE(eventually([&] { return node_stats(lead)["members"] == "4"; }));
  std::string seen;
  EXPECT_TRUE(eventually([&] {
    Client reader = lock_client(4);
    reader.request("stats locks kept");
    seen = reader.read_line();
    return seen.find(" " + std::to_string(*token) + " ") != std::string::npos;
  })) << seen;

  int removed = lead % kNodes + 1;
  int killed = removed % kNodes + 1;
  ASSERT_NE(killed, lead);
  EXPECT_EQ(cli(lead, "cluster remove " + std::to_string(removed)), 0);
  EXPECT_TRUE(eventually([&] { return node_stats(lead)["members"] == "3"; }));
  nodes_[removed - 1].reset();
  nodes_[killed - 1].reset();
  // The leader and node 4 are two of the three voters left.
  EXPECT_EQ(holder.request("unlock kept"), "200 Released");

  // A node that never answers is added as a spare but not made a voter;
  // the reply says so, and how to take it out before adding it again.
  std::string silent = "127.0.0.1:" + std::to_string(free_ports(1)[0]);
  std::string reply = admin.request("cluster add 5 " + silent, 60s);
  EXPECT_TRUE(reply.starts_with("409 added as a spare, not made a voter: ")) << reply;
  EXPECT_NE(reply.find("cluster remove 5"), std::string::npos) << reply;
  EXPECT_EQ(cli(lead, "cluster remove 5"), 0);
}

// The grace runs out on the leader, as a change in the log; the member whose
// connection detached the session tells its `watch locks` watchers, as a
// single server does.
TEST_F(ClusterE2e, AGraceThatRunsOutIsReportedToWatchers) {
  start_all();
  int lead = leader();
  ASSERT_NE(lead, 0);
  Client watcher = cache_client(lead);
  ASSERT_EQ(watcher.request("watch locks"), "OK");
  Client holder = lock_client(lead);
  ASSERT_EQ(holder.request("set_timeout 200"), "200 Timeout set");
  ASSERT_TRUE(acquired_token(holder.request("lock job")));
  holder.close();
  // Watch lines end with "\n" alone, as memcached's do.
  std::string line;
  while (line.find("grace_expired") == std::string::npos) {
    std::optional<std::string> next = watcher.read_until("\n", 5s);
    if (!next) break;
    line = *next;
  }
  EXPECT_NE(line.find("type=lock_release name=job status=released reason=grace_expired"),
            std::string::npos)
      << line;
  Client other = lock_client(lead);
  EXPECT_TRUE(acquired_token(other.request("lock job")));
}

TEST_F(ClusterE2e, AServerWithoutAClusterHasNoMembersToChange) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--lock_port=-1"}));
  Client client;
  ASSERT_TRUE(client.connect(*server.lock_port()));
  EXPECT_EQ(client.request("cluster transfer"), "400 Not a cluster member");
}

}  // namespace
