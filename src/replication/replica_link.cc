#include "lockcached/replication/replica_link.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <glog/logging.h>

#include "lockcached/net/socket.h"
#include "lockcached/replication/heartbeat.h"

namespace lockcached::replication {
namespace {

constexpr size_t kChunkSize = 256 * 1024;

}  // namespace

ReplicaLink::ReplicaLink(net::Reactor& reactor, store::Store& store, LinkSettings settings)
    : reactor_(reactor), store_(store), settings_(std::move(settings)) {}

ReplicaLink::~ReplicaLink() {
  if (ack_timer_ != 0) reactor_.cancel_timer(ack_timer_);
  if (fd_ >= 0) {
    reactor_.remove(fd_);
    ::close(fd_);
  }
}

bool ReplicaLink::start() {
  std::string error;
  fd_ = net::open_connection(settings_.address, settings_.port, &error);
  if (fd_ < 0) {
    end_reason_ = error;
    return false;
  }
  started_ms_ = net::monotonic_ms();
  if (!reactor_.add(fd_, EPOLLOUT, this)) {
    end("epoll refused the connection");
    return false;
  }
  return true;
}

void ReplicaLink::on_event(uint32_t events) {
  if (ended()) return;
  if (!connected_.load(std::memory_order_relaxed)) {
    int result = net::socket_error(fd_);
    if (result != 0) return end(std::string("connect: ") + std::strerror(result));
    return on_connected();
  }
  if (events & EPOLLIN) read_stream();
  if (!ended() && (events & EPOLLOUT)) send_pending();
  if (!ended() && (events & (EPOLLERR | EPOLLHUP)) && !(events & EPOLLIN)) {
    end("connection lost");
  }
}

void ReplicaLink::on_connected() {
  applier_ = std::make_unique<Applier>(store_);
  chunk_ = std::make_unique<char[]>(kChunkSize);
  heard_ms_ = net::monotonic_ms();
  connected_.store(true, std::memory_order_relaxed);
  reactor_.modify(fd_, EPOLLIN, this);
  LOG(INFO) << "replication: replica of " << settings_.address << ":" << settings_.port
            << "; receiving the snapshot";
  // At once: the master begins the stream when it hears from the replica,
  // and the ack says that this one takes each item's CAS (heartbeat.h).
  ack();
}

void ReplicaLink::read_stream() {
  ssize_t n = net::read_some(fd_, chunk_.get(), kChunkSize);
  if (n == 0) return end("the master closed the connection");
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
    return end(std::string("read: ") + std::strerror(errno));
  }
  heard_ms_ = net::monotonic_ms();
  bool fed = applier_->feed({chunk_.get(), static_cast<size_t>(n)});
  // Published before a bad frame ends the link: the good frames before it
  // may have begun the snapshot (and emptied the store), and the node must
  // learn that it no longer holds the data (Node::note_what_the_store_holds).
  publish_progress();
  if (!fed) return end("bad replication stream: " + std::string(applier_->error()));
  if (ack_timer_ == 0 && applier_->bytes_applied() != bytes_acked_) {
    ack_timer_ = reactor_.add_timer(kAckDelayMs, [this] {
      ack_timer_ = 0;
      if (!ended()) ack();
    });
  }
}

void ReplicaLink::publish_progress() {
  bytes_applied_.store(applier_->bytes_applied(), std::memory_order_relaxed);
  frames_applied_.store(applier_->frames_applied(), std::memory_order_relaxed);
  if (applier_->snapshot_started() && !snapshot_started_.load(std::memory_order_relaxed)) {
    snapshot_started_.store(true, std::memory_order_relaxed);
    LOG(INFO) << "replication: "
              << (applier_->store_emptied()
                      ? "store emptied for the snapshot"
                      : "the snapshot comes beside what the store holds, until it is whole");
  }
  snapshot_received_.store(applier_->snapshot_received(), std::memory_order_relaxed);
}

void ReplicaLink::ack() {
  bytes_acked_ = applier_->bytes_applied();
  append_noop_response(bytes_acked_, out_);
  send_pending();
}

void ReplicaLink::heartbeat() {
  if (ended()) return;
  int64_t now = net::monotonic_ms();
  if (!connected_.load(std::memory_order_relaxed)) {
    if (now - started_ms_ > settings_.connect_timeout_ms) end("connect: timed out");
    return;
  }
  if (now - heard_ms_ > settings_.silence_limit_ms) {
    return end("the master said nothing for " + std::to_string(now - heard_ms_) + " ms");
  }
  ack();  // also tells a master with nothing to send that this replica lives
}

void ReplicaLink::send_pending() {
  while (!out_.empty()) {
    ssize_t n = net::send_some(fd_, out_.data(), out_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return end(std::string("send: ") + std::strerror(errno));
    }
    out_.erase(0, static_cast<size_t>(n));
  }
  reactor_.modify(fd_, EPOLLIN | (out_.empty() ? 0u : EPOLLOUT), this);
}

void ReplicaLink::end(const std::string& why) {
  if (fd_ < 0) return;
  end_reason_ = why;
  reactor_.remove(fd_);
  ::close(fd_);
  fd_ = -1;
  connected_.store(false, std::memory_order_relaxed);
}

LinkStatus ReplicaLink::status() const {
  LinkStatus status;
  status.connected = connected_.load(std::memory_order_relaxed);
  status.snapshot_received = snapshot_received_.load(std::memory_order_relaxed);
  status.snapshot_started = snapshot_started_.load(std::memory_order_relaxed);
  status.bytes_applied = bytes_applied_.load(std::memory_order_relaxed);
  status.frames_applied = frames_applied_.load(std::memory_order_relaxed);
  return status;
}

}  // namespace lockcached::replication
