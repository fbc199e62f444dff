// One server's part in replicating the cache (yrmcds's model,
// docs/high-availability.md): the master streams every change to the
// replicas that connect to it; the others are read-only replicas of it. Who the master is, is the node that
// holds the virtual IP, or, in a Raft cluster, the leader
// (NodeSettings::locate). A thread of its own looks once a tick, and when
// told to (recheck), and changes role when the master moves.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lockcached/net/reactor.h"
#include "lockcached/replication/master.h"
#include "lockcached/replication/replica_link.h"
#include "lockcached/store/store.h"

namespace lockcached::replication {

// Where the master is, as a node sees it now.
struct MasterPlace {
  enum Where : uint8_t { kHere, kElsewhere, kUnknown } where = kUnknown;
  std::string host;   // kElsewhere: where replicas connect
  uint16_t port = 0;  // and on which port (0: repl_port)
};

struct NodeSettings {
  std::string virtual_ip;  // empty with `locate`
  // A Raft cluster's: where its leader is (thread-safe). Without it, the
  // master is whoever holds the virtual IP.
  std::function<MasterPlace()> locate;
  // Where a master listens for replicas: the virtual IP, or its own address.
  std::string listen_host;
  uint16_t repl_port = 11213;
  size_t buffer_limit = size_t{30} << 20;  // per replica, on the master
  // A peer silent this long is gone; a replica that lost its master waits
  // as long for the virtual IP before it resyncs from whoever has it.
  int64_t timeout_ms = 10000;
  int64_t tick_ms = 1000;  // how often the virtual IP is looked at
};

enum class Role : uint8_t { kMaster, kReplica };

struct NodeStatus {
  Role role = Role::kReplica;
  std::string state;  // "master", "connecting", "streaming", "waiting for the virtual IP"
  LinkStatus link;    // a replica's
  std::string master;  // a replica's: where it links to, "HOST:PORT"
  std::vector<FollowerStatus> replicas;  // a master's
  uint64_t promotions = 0;
  uint64_t demotions = 0;
  uint64_t resyncs = 0;  // connections begun to a master (each that connects: a new snapshot)
  uint64_t replicas_dropped = 0;
};

class Node {
 public:
  // What the server does when the role changes, on the replication thread.
  struct Hooks {
    // Closes every client connection (on demotion: their cache locks and
    // sessions belonged to the master this node was).
    std::function<void()> demoted;
    // Called before the new master takes writes (optional): a --virtual_ip
    // node starts a lock service of its own then, since the old master's is
    // not replicated.
    std::function<void()> promoted;
  };

  // While a replica, *read_only is true: the protocols then refuse writes.
  Node(NodeSettings settings, store::Store& store, std::atomic<bool>& read_only, Hooks hooks);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Takes the role the virtual IP gives now and starts the thread. False,
  // with *error set, when the address cannot be checked.
  bool start(std::string* error);
  void stop();

  // Thread-safe: looks where the master is now, rather than at the next tick
  // (a Raft member whose leader changed).
  void recheck();
  // Thread-safe.
  NodeStatus status() const;
  // Thread-safe: this node's cache has the data: it has been the master,
  // or a replica that applied a master's whole snapshot (heartbeat.h:
  // kSnapshotEndKey), and no snapshot has begun since that did not come
  // whole. A Raft member that restarted has not, and must not become the
  // master whose snapshot would replace every replica's data
  // (Server::cache_may_lead).
  bool holds_data() const { return holds_data_.load(std::memory_order_acquire); }
  // Thread-safe: a master's snapshot began here and did not come whole (the
  // master died first). The store has what it held before beside what came
  // (unless the stream emptied it, Applier), but not all of that master's
  // writes.
  bool holds_part() const { return holds_part_.load(std::memory_order_acquire); }
  // Thread-safe: how often holds_data() became true. A Raft leader's
  // hand-overs (Server::cache_may_lead) are counted from the last time.
  uint64_t times_data_came() const { return times_data_came_.load(std::memory_order_acquire); }
  const NodeSettings& settings() const { return settings_; }

 private:
  void schedule_tick();
  void schedule_send();
  static constexpr int64_t kSendIntervalMs = 1;
  void tick();
  MasterPlace locate() const;
  void note_what_the_store_holds(const LinkStatus& link);
  void note_holds_data(bool holds);
  void promote();
  void demote(const MasterPlace& place);
  // A replica without a link (or linked to a master that is no longer the
  // one): connects to `place`, unless it still waits to see whether the
  // virtual IP comes here, or no master is known.
  void keep_linked(int64_t now_ms, const MasterPlace& place);
  bool open_master(std::string* error);
  void retry_open_master();

  const NodeSettings settings_;
  store::Store& store_;
  std::atomic<bool>& read_only_;
  const Hooks hooks_;
  net::Reactor reactor_;
  std::thread thread_;

  mutable std::mutex mutex_;  // what status() reads: everything below
  Role role_ = Role::kReplica;
  std::unique_ptr<Master> master_;
  std::unique_ptr<ReplicaLink> link_;
  bool link_was_streaming_ = false;
  std::atomic<bool> holds_data_{false};
  std::atomic<bool> holds_part_{false};
  std::atomic<uint64_t> times_data_came_{0};
  std::string link_host_;  // where link_ connects, "HOST:PORT"
  int64_t lost_master_ms_ = -1;  // >= 0: waiting for the virtual IP since
  uint64_t promotions_ = 0;
  uint64_t demotions_ = 0;
  uint64_t resyncs_ = 0;
  uint64_t dropped_before_ = 0;  // replicas dropped by earlier Master objects
};

}  // namespace lockcached::replication
