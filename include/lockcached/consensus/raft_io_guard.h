// A shim over libraft's I/O (raft_uv) for two bugs of the libraft that
// Debian 12 packages (0.15.0), both fixed upstream in 0.17.1. It sits where
// libraft meets its I/O, so it needs nothing of libraft's internals.
//
// 1. A follower whose term changes while it writes a leader's entries to
//    disk still answers that AppendEntries once the write is done, to
//    whoever it follows by then (fixed by 35479fc, "Don't respond to
//    AppendEntries if role/term has changed"):
//    - with no leader known yet in the new term, libraft sent it to a null
//      address, and raft_uv's send read it: a SIGSEGV (ClusterE2e, a
//      cluster restarted cold, whose leaders hand leadership on at once);
//    - with a new leader known, it tells that leader that this node's log
//      matches its own up to the last entry written, which may be the old
//      term's.
//    The guard remembers the term in which each write began, and refuses an
//    AppendEntries result sent from a write's callback when the term is no
//    longer that one (and any message without an address).
//
// 2. A new leader commits entries of earlier terms by counting the members
//    that have them (fixed by 524f735, "Don't commit entries from old terms
//    by counting"). Raft forbids it (the Raft paper's Figure 8): such an
//    entry can still be replaced by a later leader's, after members applied
//    it, and their lock states would differ. libraft 0.15 counts at the
//    leader's last entry on disk, so the miscount can happen only until the
//    leader has written an entry of its own term (its first, LockMachine's
//    term start, proposed as it starts leading). Until then the guard holds
//    back every AppendEntries result from the leader's libraft: nothing is
//    counted, and the followers answer again at the next heartbeat.
#pragma once

// libraft's headers declare C functions without extern "C".
extern "C" {
#include <raft.h>
}

#include <unordered_map>

namespace lockcached::consensus {

class RaftIoGuard {
 public:
  // Wraps `io` (set up by raft_uv_init, not yet started). Both must stay
  // where they are while `io` is in use; every call into `io`, and every
  // callback, must come on the thread that calls this (libraft's loop
  // thread): a write's callback carries only its request, and finds this
  // guard through that thread.
  void install(struct raft_io* io);

  // What it held back, for a test to see.
  unsigned stale_answers_dropped() const { return stale_answers_dropped_; }
  unsigned early_results_dropped() const { return early_results_dropped_; }

 private:
  struct Write {
    raft_io_append_cb callback;
    raft_term term;          // the node's when the write began
    raft_term entries_term;  // the highest of its entries
  };

  static int start(struct raft_io* io, unsigned msecs, raft_io_tick_cb tick,
                   raft_io_recv_cb recv);
  static void received(struct raft_io* io, struct raft_message* message);
  static int append(struct raft_io* io, struct raft_io_append* request,
                    const struct raft_entry entries[], unsigned count,
                    raft_io_append_cb callback);
  static void appended(struct raft_io_append* request, int status);
  static int send(struct raft_io* io, struct raft_io_send* request,
                  const struct raft_message* message, raft_io_send_cb callback);

  struct raft_io* io_ = nullptr;
  decltype(raft_io::start) inner_start_ = nullptr;
  decltype(raft_io::append) inner_append_ = nullptr;
  decltype(raft_io::send) inner_send_ = nullptr;
  raft_io_recv_cb recv_ = nullptr;  // libraft's
  std::unordered_map<struct raft_io_append*, Write> writes_;
  bool stale_write_ = false;     // in the callback of a write of an ended term
  raft_term written_term_ = 0;   // the highest term of an entry on disk
  unsigned stale_answers_dropped_ = 0;
  unsigned early_results_dropped_ = 0;
};

}  // namespace lockcached::consensus
