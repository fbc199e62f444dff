#include "lockcached/consensus/raft_io_guard.h"

#include <algorithm>
#include <string>

#include <glog/logging.h>

namespace lockcached::consensus {
namespace {

// The guard of this thread's libraft loop (RaftIoGuard::install).
thread_local RaftIoGuard* loop_guard = nullptr;

// raft_init points the I/O's data at the raft object.
struct raft* raft_of(struct raft_io* io) {
  return static_cast<struct raft*>(io->data);
}

}  // namespace

void RaftIoGuard::install(struct raft_io* io) {
  io_ = io;
  inner_start_ = io->start;
  inner_append_ = io->append;
  inner_send_ = io->send;
  io->start = start;
  io->append = append;
  io->send = send;
  loop_guard = this;
}

int RaftIoGuard::start(struct raft_io* io, unsigned msecs, raft_io_tick_cb tick,
                       raft_io_recv_cb recv) {
  RaftIoGuard* self = loop_guard;
  self->recv_ = recv;
  return self->inner_start_(io, msecs, tick, received);
}

void RaftIoGuard::received(struct raft_io* io, struct raft_message* message) {
  RaftIoGuard* self = loop_guard;
  struct raft* raft = raft_of(io);
  // A result carries no buffer that its receiver would have to free.
  if (message->type == RAFT_IO_APPEND_ENTRIES_RESULT && raft_state(raft) == RAFT_LEADER &&
      self->written_term_ < raft->current_term) {
    ++self->early_results_dropped_;
    return;
  }
  self->recv_(io, message);
}

int RaftIoGuard::append(struct raft_io* io, struct raft_io_append* request,
                        const struct raft_entry entries[], unsigned count,
                        raft_io_append_cb callback) {
  RaftIoGuard* self = loop_guard;
  raft_term entries_term = 0;
  for (unsigned i = 0; i < count; ++i)
    entries_term = std::max(entries_term, entries[i].term);
  self->writes_[request] = {callback, raft_of(io)->current_term, entries_term};
  int rv = self->inner_append_(io, request, entries, count, appended);
  if (rv != 0) self->writes_.erase(request);  // no callback comes
  return rv;
}

void RaftIoGuard::appended(struct raft_io_append* request, int status) {
  RaftIoGuard* self = loop_guard;
  auto found = self->writes_.find(request);
  CHECK(found != self->writes_.end()) << "a write libraft did not start through the guard";
  Write write = found->second;
  self->writes_.erase(found);
  // A log entry that could not be written (a full or failing disk) ends
  // the process. libraft 0.15 would truncate its log and, as leader, stay
  // leader: the next entry took the same index and term, which followers
  // that had the failed one kept, so members applied different changes
  // (fixed upstream in 0.16 by stepping down). A restart starts from what
  // is on disk. A write cancelled because the log is closing is no failure.
  LOG_IF(FATAL, status != 0 && status != RAFT_CANCELED)
      << "cluster: writing the Raft log failed (" << raft_strerror(status)
      << (self->io_->errmsg[0] != '\0' ? std::string(": ") + self->io_->errmsg : std::string())
      << "); stopping, since a member that cannot write its log must not go on";
  if (status == 0) self->written_term_ = std::max(self->written_term_, write.entries_term);
  // Whatever libraft sends from inside this callback answers the write.
  self->stale_write_ = write.term != raft_of(self->io_)->current_term;
  write.callback(request, status);
  self->stale_write_ = false;
}

int RaftIoGuard::send(struct raft_io* io, struct raft_io_send* request,
                      const struct raft_message* message, raft_io_send_cb callback) {
  RaftIoGuard* self = loop_guard;
  bool stale = self->stale_write_ && message->type == RAFT_IO_APPEND_ENTRIES_RESULT;
  if (stale || message->server_address == nullptr) {
    // libraft frees the request of a send that fails, and calls nothing.
    ++self->stale_answers_dropped_;
    LOG(INFO) << "cluster: a Raft message not sent: "
              << (stale ? "it answers entries of an ended term (libraft 0.15)"
                        : "it has no address");
    return RAFT_NOCONNECTION;
  }
  return self->inner_send_(io, request, message, callback);
}

}  // namespace lockcached::consensus
