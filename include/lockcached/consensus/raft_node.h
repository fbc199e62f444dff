// One member of a Raft cluster (docs/high-availability.md), on libraft
// (Debian's libraft-dev 0.15, the engine under dqlite and LXD) and its
// libuv I/O: the log, snapshots, term and vote live in a data directory;
// peers speak TCP on the cluster port, each connection authenticated with
// the cluster's shared secret (authenticated_transport.h).
//
// Everything of libraft runs on the node's own thread, with its own libuv
// loop. Other threads hand it commands (propose) and read its status; what
// the cluster decides reaches the application on that thread, through the
// StateMachine interface, in log order, on every member alike.
//
// The process must ignore SIGPIPE, as lockcached's main does: libuv writes
// to peers with write(2), and a peer that went away would raise it.
//
// Group commit: commands proposed while earlier entries are on their way
// travel together in the next entry, as etcd batches proposals; one disk
// write and one round trip to the followers then carry all of them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockcached/consensus/membership.h"
#include "lockcached/timing/scheduler.h"

namespace lockcached::consensus {

struct Member {
  uint64_t id = 0;
  std::string address;  // "IPv4:PORT" of its cluster port
  bool operator==(const Member&) const = default;
};

// --cluster=ID@HOST:PORT,...: the initial voters. Empty, with *error set,
// when `text` is not that (ids 1 and up, each id and address once, numeric
// IPv4 addresses: no name service decides who is a member).
std::vector<Member> parse_members(std::string_view text, std::string* error);

// The id of the member after `id` in the order of ids, from the first again
// past the last, never `self`; 0 when there is no other member. Asking
// members in this order reaches every other one in turn.
uint64_t member_after(const std::vector<Member>& members, uint64_t id, uint64_t self);

struct RaftSettings {
  uint64_t id = 0;
  std::vector<Member> members;  // the initial voters, this node among them
  std::string data_dir;         // must exist
  std::string secret;           // the cluster's shared secret
  // A follower that hears no leader for 1 to 2 times this stands for
  // election; a leader that hears no majority for this long steps down.
  unsigned election_timeout_ms = 1000;
  unsigned heartbeat_ms = 100;
  // A snapshot is taken after this many entries, and this many are kept
  // behind it (a follower that lags less catches up from the log).
  unsigned snapshot_threshold = 4096;
  unsigned snapshot_trailing = 1024;
  // A node that joins a running cluster: it starts with no configuration
  // rather than the initial voters, and waits for the leader to add it
  // (change_members). Only for an empty data directory; a node with a log
  // has its configuration there.
  bool join = false;
};

// How RaftNode::change_members ended: empty when the change took effect;
// else why not, kNotLeader when this node did not lead.
using MembershipDone = std::function<void(const std::string& error)>;

enum class Role : uint8_t { kUnavailable, kFollower, kCandidate, kLeader };
std::string_view role_name(Role role);

struct RaftStatus {
  Role role = Role::kUnavailable;
  uint64_t id = 0;
  uint64_t term = 0;
  uint64_t leader_id = 0;  // 0: none known
  std::string leader_address;
  uint64_t commit_index = 0;
  uint64_t applied_index = 0;
  uint64_t last_index = 0;
  std::vector<Member> members;  // the configuration in use
};

// The replicated application, called on the node's thread only.
class StateMachine {
 public:
  virtual ~StateMachine() = default;
  // One committed entry: the commands proposed together, in order, at log
  // `index`, stamped with the proposing leader's clock (milliseconds since
  // the Unix epoch; for display: nothing may decide by it).
  virtual void apply(uint64_t index, uint64_t stamp_ms,
                     std::span<const std::string_view> commands) = 0;
  // The whole state, to be restored elsewhere (after `applied_index`).
  virtual std::string snapshot() = 0;
  // Replaces the state; false when `data` is not a snapshot.
  virtual bool restore(std::string_view data) = 0;
  // The role, term or leader changed (polled every few milliseconds).
  virtual void on_status(const RaftStatus& status) = 0;
};

class RaftNode {
 public:
  RaftNode(RaftSettings settings, StateMachine& machine);
  ~RaftNode();
  RaftNode(const RaftNode&) = delete;
  RaftNode& operator=(const RaftNode&) = delete;

  // Loads the data directory (bootstraps it with the initial voters when it
  // is empty), starts listening on this member's address and starts the
  // thread. False, with *error set, when any of that fails, and
  // *configuration_error (if given) true when the flags are at fault: the
  // data directory is another node's, or its configuration does not list
  // this node where --cluster says it is (consensus/data_dir.h).
  bool start(std::string* error, bool* configuration_error = nullptr);
  // Closes everything and joins the thread (a leader just stops; the
  // others elect a new one).
  void stop();

  // Thread-safe. Appends `command` to the next entry, if this node leads
  // when the entry is made; false when it does not lead now, or is stopping
  // or stopped. A command may still be dropped (leadership lost before it
  // was committed): the application learns of that through on_status.
  bool propose(std::string_view command);
  // Thread-safe: runs `task` on the node's thread (never, once the node has
  // stopped).
  void post(std::function<void()> task);
  // Thread-safe. Makes `change` if this node leads; `done` is called once,
  // on the node's thread, when the new configuration is committed (a
  // transfer: when the target leads, or after an election timeout when it
  // does not), or at once when the change cannot be made.
  void change_members(MembershipChange change, MembershipDone done);
  RaftStatus status() const;
  // This start made the cluster: its data directory was empty and it
  // bootstrapped the initial voters (after start()).
  bool started_fresh() const;
  // The node's thread's timers: for the application's (leader's) timers.
  timing::Scheduler& scheduler();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockcached::consensus
