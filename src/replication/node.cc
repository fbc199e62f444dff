#include "lockcached/replication/node.h"

#include <glog/logging.h>

#include "lockcached/replication/virtual_ip.h"

namespace lockcached::replication {

Node::Node(NodeSettings settings, store::Store& store, std::atomic<bool>& read_only, Hooks hooks)
    : settings_(std::move(settings)),
      store_(store),
      read_only_(read_only),
      hooks_(std::move(hooks)) {
  reactor_.set_before_sleep([this] {
    std::lock_guard lock(mutex_);
    if (master_) master_->free_dropped();
  });
}

Node::~Node() {
  stop();
}

bool Node::start(std::string* error) {
  if (!settings_.locate &&
      address_ownership(settings_.virtual_ip, error) == AddressOwnership::kInvalid) {
    return false;
  }
  MasterPlace place = locate();
  {
    std::lock_guard lock(mutex_);
    role_ = place.where == MasterPlace::kHere ? Role::kMaster : Role::kReplica;
  }
  read_only_.store(role_ == Role::kReplica, std::memory_order_relaxed);
  if (role_ == Role::kMaster) note_holds_data(true);
  if (!settings_.locate) {
    LOG(INFO) << "replication: virtual IP " << settings_.virtual_ip
              << (role_ == Role::kMaster ? " is here: starting as master"
                                         : " is elsewhere: starting as a replica");
  }
  if (role_ == Role::kMaster) {
    // Before the server is ready: a replica started next finds the port open.
    std::lock_guard lock(mutex_);
    if (!open_master(error)) return false;
  } else {
    reactor_.post([this, place] { keep_linked(net::monotonic_ms(), place); });
  }
  schedule_tick();
  schedule_send();
  thread_ = std::thread([this] {
    reactor_.run();
    std::lock_guard lock(mutex_);
    master_.reset();
    link_.reset();
  });
  return true;
}

void Node::stop() {
  reactor_.stop();
  if (thread_.joinable()) thread_.join();
}

void Node::schedule_tick() {
  reactor_.add_timer(settings_.tick_ms, [this] {
    tick();
    schedule_tick();
  });
}

// Sending on a timer instead of waking this thread for each change: a
// wake-up (eventfd write, context switch) per change cost the master about
// 30% more CPU per request on workload 1 with one replica; batching a
// millisecond's changes into one send costs 1% (bench/RESULTS.md), for at
// most a millisecond more lag.
void Node::schedule_send() {
  reactor_.add_timer(kSendIntervalMs, [this] {
    {
      std::lock_guard lock(mutex_);
      if (master_) master_->pump_all();
    }
    schedule_send();
  });
}

void Node::recheck() {
  reactor_.post([this] { tick(); });
}

// From a master's first frame until its snapshot is whole the store holds
// a part: what it held before stays beside what came (a marked snapshot,
// Applier), but that master's own writes are not all there, and a member
// whose snapshot from it came whole may have them. So such a node, made
// the Raft leader, first hands leadership on (Server::cache_may_lead).
void Node::note_what_the_store_holds(const LinkStatus& link) {
  if (!link.snapshot_started) return;
  note_holds_data(link.snapshot_received);
  holds_part_.store(!link.snapshot_received, std::memory_order_release);
}

void Node::note_holds_data(bool holds) {
  if (holds_data_.exchange(holds, std::memory_order_acq_rel) != holds && holds) {
    times_data_came_.fetch_add(1, std::memory_order_release);
  }
}

MasterPlace Node::locate() const {
  if (settings_.locate) return settings_.locate();
  std::string error;
  AddressOwnership owner = address_ownership(settings_.virtual_ip, &error);
  if (owner == AddressOwnership::kInvalid) {
    LOG_EVERY_N(ERROR, 60) << "replication: cannot tell who holds the virtual IP: " << error;
    return {};
  }
  return {owner == AddressOwnership::kLocal ? MasterPlace::kHere : MasterPlace::kElsewhere,
          settings_.virtual_ip};
}

void Node::tick() {
  // Before locate(): a Raft leader asks whether its cache has the data. The
  // link's applier changes the store on this thread, so no locate() comes
  // between.
  {
    std::lock_guard lock(mutex_);
    if (link_) note_what_the_store_holds(link_->status());
  }
  MasterPlace place = locate();
  // A virtual IP nobody can check changes nothing; a Raft cluster without a
  // leader has no master, and a master that no longer leads steps down.
  if (place.where == MasterPlace::kUnknown && !settings_.locate) return;
  bool here = place.where == MasterPlace::kHere;
  if (role_ == Role::kMaster) {
    if (!here) return demote(place);
    std::lock_guard lock(mutex_);
    if (!master_) {
      retry_open_master();
      return;
    }
    master_->heartbeat();
    return;
  }
  if (here) return promote();
  if (link_) link_->heartbeat();
  keep_linked(net::monotonic_ms(), place);
}

void Node::keep_linked(int64_t now_ms, const MasterPlace& place) {
  std::lock_guard lock(mutex_);
  // A Raft leader elsewhere now: the link to the old one goes.
  std::string target = place.host + ":" + std::to_string(place.port ? place.port : settings_.repl_port);
  bool moved = link_ && place.where == MasterPlace::kElsewhere && target != link_host_;
  if (link_ && !link_->ended() && !moved) {
    link_was_streaming_ = link_was_streaming_ || link_->status().connected;
    return;
  }
  if (moved) {
    LOG(INFO) << "replication: the master is at " << target << " now";
  } else if (link_) {
    // With a virtual IP, the address may come here: wait for it with the
    // data this node has. A Raft cluster says where its leader is.
    if (link_was_streaming_ && !settings_.locate) {
      // The master may be gone for good: if the virtual IP comes here
      // soon, this node takes over with what it has (tick promotes it).
      LOG(WARNING) << "replication: lost the master (" << link_->end_reason()
                   << "); waiting up to " << settings_.timeout_ms
                   << " ms for the virtual IP to move";
      lost_master_ms_ = now_ms;
    } else {
      LOG_EVERY_N(WARNING, 30) << "replication: no master at " << link_host_ << " ("
                               << link_->end_reason()
                               << "); retrying every tick";
    }
  }
  if (link_) {
    link_.reset();
    link_was_streaming_ = false;
  }
  // The new master's snapshot replaces this node's data once it is whole
  // (Applier): until then the data stays, should that master go too.
  if (lost_master_ms_ >= 0) {
    if (now_ms - lost_master_ms_ < settings_.timeout_ms) return;
    LOG(WARNING) << "replication: the virtual IP went elsewhere; resyncing from the new master";
    lost_master_ms_ = -1;
  }
  if (place.where != MasterPlace::kElsewhere) return;  // no master known yet
  LinkSettings link_settings{place.host, place.port ? place.port : settings_.repl_port,
                             settings_.timeout_ms};
  link_ = std::make_unique<ReplicaLink>(reactor_, store_, link_settings);
  link_host_ = target;
  if (link_->start()) ++resyncs_;
}

void Node::promote() {
  std::lock_guard lock(mutex_);
  if (settings_.locate) {
    LOG(WARNING) << "replication: this node leads the Raft cluster now: promoting this replica "
                    "to master";
  } else {
    LOG(WARNING) << "replication: the virtual IP " << settings_.virtual_ip
                 << " is here now: promoting this replica to master";
  }
  link_.reset();
  link_was_streaming_ = false;
  lost_master_ms_ = -1;
  role_ = Role::kMaster;
  ++promotions_;
  note_holds_data(true);  // what it has is the data now
  holds_part_.store(false, std::memory_order_release);
  if (hooks_.promoted) hooks_.promoted();
  // Release: whoever sees writes allowed sees the replica's service retired.
  read_only_.store(false, std::memory_order_release);
  retry_open_master();
}

void Node::demote(const MasterPlace& place) {
  if (settings_.locate) {
    LOG(WARNING) << "replication: no longer the Raft leader: this master becomes a replica and "
                    "resyncs";
  } else {
    LOG(WARNING) << "replication: lost the virtual IP " << settings_.virtual_ip
                 << ": this master becomes a replica and resyncs";
  }
  read_only_.store(true, std::memory_order_relaxed);
  // Its clients' cache locks and lock-service sessions belonged to the
  // master this node was; they must find the new one.
  hooks_.demoted();
  // Their cache locks go now, not when the posted closes run: a lock that
  // the new master's snapshot found would keep this node's old value (the
  // applier cannot replace a locked item), and an unlock after the
  // snapshot's end would keep it for good (Store::unlock spares an item
  // that a flush passed over while it was locked).
  size_t released = store_.release_all_locks();
  LOG_IF(INFO, released > 0) << "replication: released " << released
                             << " cache locks of the master this node was";
  {
    std::lock_guard lock(mutex_);
    if (master_) dropped_before_ += master_->dropped_total();
    master_.reset();
    role_ = Role::kReplica;
    ++demotions_;
  }
  keep_linked(net::monotonic_ms(), place);
}

// With mutex_ held.
bool Node::open_master(std::string* error) {
  MasterSettings master_settings{settings_.listen_host, settings_.repl_port,
                                 settings_.buffer_limit, settings_.timeout_ms};
  auto master = std::make_unique<Master>(reactor_, store_, master_settings);
  if (!master->listen(error)) return false;
  master_ = std::move(master);
  return true;
}

// With mutex_ held. A promoted node whose listener cannot open (the port is
// taken) serves as master all the same and tries again at the next tick.
void Node::retry_open_master() {
  std::string error;
  if (!open_master(&error)) {
    LOG_EVERY_N(ERROR, 30) << "replication: cannot listen for replicas: " << error;
  }
}

NodeStatus Node::status() const {
  std::lock_guard lock(mutex_);
  NodeStatus status;
  status.role = role_;
  // Where a replica links to, or will (a virtual IP's master is always there).
  status.master = link_ ? link_host_
                  : settings_.locate ? ""
                                     : settings_.virtual_ip + ":" + std::to_string(settings_.repl_port);
  status.promotions = promotions_;
  status.demotions = demotions_;
  status.resyncs = resyncs_;
  status.replicas_dropped = dropped_before_;
  if (role_ == Role::kMaster) {
    status.state = "master";
    if (master_) {
      status.replicas = master_->followers();
      status.replicas_dropped += master_->dropped_total();
    }
  } else if (link_ && !link_->ended()) {
    status.link = link_->status();
    status.state = status.link.connected ? "streaming" : "connecting";
  } else {
    status.state = lost_master_ms_ >= 0 ? "waiting for the virtual IP" : "connecting";
  }
  return status;
}

}  // namespace lockcached::replication
