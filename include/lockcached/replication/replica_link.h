// A replica's connection to its master: connects to the master's
// replication port, applies the stream as it comes (Applier: a lockcached
// master's snapshot beside what the store holds, another's into an emptied
// store), and acks what it applied within kAckDelayMs.
// Runs on the replication thread (replication::Node), which polls ended()
// once a tick and decides what follows: promotion or a resync.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "lockcached/net/reactor.h"
#include "lockcached/replication/applier.h"
#include "lockcached/store/store.h"

namespace lockcached::replication {

struct LinkSettings {
  std::string address;  // the virtual IP
  uint16_t port = 11213;
  int64_t silence_limit_ms = 10000;  // the master sends a Noop every tick
  int64_t connect_timeout_ms = 3000;
};

struct LinkStatus {
  bool connected = false;
  bool snapshot_started = false;   // the master's first frame came
  bool snapshot_received = false;  // the master's whole snapshot is applied
  uint64_t bytes_applied = 0;
  uint64_t frames_applied = 0;
};

class ReplicaLink final : public net::EventHandler {
 public:
  ReplicaLink(net::Reactor& reactor, store::Store& store, LinkSettings settings);
  ~ReplicaLink() override;
  ReplicaLink(const ReplicaLink&) = delete;
  ReplicaLink& operator=(const ReplicaLink&) = delete;

  // Starts connecting. False (and ended()) when that fails at once.
  bool start();
  // Once a tick: tells the master how far it got, and gives up on a master
  // that said nothing for too long or a connection that never came.
  void heartbeat();
  bool ended() const { return fd_ < 0; }
  // Why it ended; empty while it has not.
  const std::string& end_reason() const { return end_reason_; }

  // Thread-safe.
  LinkStatus status() const;

  void on_event(uint32_t events) override;

 private:
  void on_connected();
  void read_stream();
  // What the applier did, for status(): from the replication thread.
  void publish_progress();
  // Queues an ack of what is applied now and sends it.
  void ack();
  void send_pending();
  // How stale an ack may be: the master's measure of the lag.
  static constexpr int64_t kAckDelayMs = 10;
  void end(const std::string& why);

  net::Reactor& reactor_;
  store::Store& store_;
  const LinkSettings settings_;
  int fd_ = -1;
  int64_t started_ms_ = 0;
  int64_t heard_ms_ = 0;
  uint64_t bytes_acked_ = 0;           // the last ack queued
  net::Reactor::TimerId ack_timer_ = 0;  // a delayed ack is due
  std::unique_ptr<Applier> applier_;
  std::unique_ptr<char[]> chunk_;
  std::string out_;  // acks the socket has not taken yet
  std::string end_reason_;
  std::atomic<bool> connected_{false};
  std::atomic<bool> snapshot_started_{false};  // the applier's, for status()
  std::atomic<bool> snapshot_received_{false};
  std::atomic<uint64_t> bytes_applied_{0};  // the applier's, for status()
  std::atomic<uint64_t> frames_applied_{0};
};

}  // namespace lockcached::replication
