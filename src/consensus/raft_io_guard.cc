#include "lockcached/consensus/raft_io_guard.h"

#include <glog/logging.h>

namespace lockcached::consensus {
namespace {

// The guard of this thread's libraft loop (RaftIoGuard::install).
thread_local RaftIoGuard* loop_guard = nullptr;

// raft_init points the I/O's data at the raft object.
raft_term current_term(struct raft_io* io) {
  return static_cast<struct raft*>(io->data)->current_term;
}

}  // namespace

void RaftIoGuard::install(struct raft_io* io) {
  io_ = io;
  inner_append_ = io->append;
  inner_send_ = io->send;
  io->append = append;
  io->send = send;
  loop_guard = this;
}

int RaftIoGuard::append(struct raft_io* io, struct raft_io_append* request,
                        const struct raft_entry entries[], unsigned count,
                        raft_io_append_cb callback) {
  RaftIoGuard* self = loop_guard;
  self->writes_[request] = {callback, current_term(io)};
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
  // Whatever libraft sends from inside this callback answers the write.
  self->stale_write_ = write.term != current_term(self->io_);
  write.callback(request, status);
  self->stale_write_ = false;
}

int RaftIoGuard::send(struct raft_io* io, struct raft_io_send* request,
                      const struct raft_message* message, raft_io_send_cb callback) {
  RaftIoGuard* self = loop_guard;
  bool stale = self->stale_write_ && message->type == RAFT_IO_APPEND_ENTRIES_RESULT;
  if (stale || message->server_address == nullptr) {
    // libraft frees the request of a send that fails, and calls nothing.
    ++self->dropped_;
    LOG(INFO) << "cluster: a Raft message not sent: "
              << (stale ? "it answers entries of an ended term (libraft 0.15)"
                        : "it has no address");
    return RAFT_NOCONNECTION;
  }
  return self->inner_send_(io, request, message, callback);
}

}  // namespace lockcached::consensus
