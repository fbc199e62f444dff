// A shim over libraft's I/O (raft_uv) for a bug of the libraft that Debian
// 12 packages (0.15.0): a follower whose term changes while it writes a
// leader's entries to disk still answers that AppendEntries once the write
// is done, to whoever it follows by then. Upstream fixed it in 0.17.1
// ("replication: Don't respond to AppendEntries if role/term has changed").
//
// What the stale answer did here:
// - with no leader known yet in the new term, libraft sent it to a null
//   address, and raft_uv's send read it: a SIGSEGV (ClusterE2e, a cluster
//   restarted cold, whose leaders hand leadership on at once);
// - with a new leader known, it told that leader this node's log matches
//   its own up to the last entry written, which may be the old term's: the
//   new leader could count this node towards committing an entry it does
//   not have.
//
// RaftIoGuard drops that answer, as 0.17.1 does: it remembers the term in
// which each write began, and refuses an AppendEntries result sent from a
// write's callback when the term is no longer that one (and any message
// without an address).
#pragma once

// libraft's headers declare C functions without extern "C".
extern "C" {
#include <raft.h>
}

#include <unordered_map>

namespace lockcached::consensus {

class RaftIoGuard {
 public:
  // Wraps `io` (set up by raft_uv_init, not yet given to raft_init). Both
  // must stay where they are while `io` is in use; every call into `io`,
  // and every callback, must come on the thread that calls this (libraft's
  // loop thread): a write's callback carries only its request, and finds
  // this guard through that thread.
  void install(struct raft_io* io);

  // How many answers it dropped (a test's view).
  unsigned dropped() const { return dropped_; }

 private:
  struct Write {
    raft_io_append_cb callback;
    raft_term term;  // the node's when the write began
  };

  static int append(struct raft_io* io, struct raft_io_append* request,
                    const struct raft_entry entries[], unsigned count,
                    raft_io_append_cb callback);
  static void appended(struct raft_io_append* request, int status);
  static int send(struct raft_io* io, struct raft_io_send* request,
                  const struct raft_message* message, raft_io_send_cb callback);

  struct raft_io* io_ = nullptr;
  decltype(raft_io::append) inner_append_ = nullptr;
  decltype(raft_io::send) inner_send_ = nullptr;
  std::unordered_map<struct raft_io_append*, Write> writes_;
  bool stale_write_ = false;  // in the callback of a write of an ended term
  unsigned dropped_ = 0;
};

}  // namespace lockcached::consensus
