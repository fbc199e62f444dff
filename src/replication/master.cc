#include "lockcached/replication/master.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>

#include <glog/logging.h>

#include "lockcached/net/socket.h"
#include "lockcached/replication/heartbeat.h"
#include "lockcached/replication/replica_buffer.h"
#include "lockcached/replication/snapshot.h"

namespace lockcached::replication {
namespace {

// The snapshot adds pieces only while less than this waits to be sent, so
// a new replica costs a bounded amount of memory however large the store;
// and never past half the replica's buffer (snapshot_fill), so that a piece
// added just under the bound still fits, with the changes that come
// meanwhile.
constexpr size_t kSnapshotQueuedBytes = size_t{1} << 20;
constexpr size_t kReadChunk = 4096;
// The lag in time is measured against stream positions sampled this often.
constexpr int64_t kLagSampleMs = 10;
constexpr size_t kMaxLagSamples = 4096;
// How long a new replica may take to answer before its stream begins
// without CASes (Follower::begin_stream). A lockcached replica answers at
// once, memcached answers the Noop sent at the connection's start; an older
// lockcached replica acks within a tick.
constexpr int64_t kGreetingMs = 1000;

}  // namespace

// Hands every change to each follower's buffer. Immutable: a replica that
// comes or goes gets a new FanOut (install_fan_out_locked), so a change
// takes no lock beyond the shard's and the buffers' own.
class Master::FanOut final : public store::ChangeListener {
 public:
  explicit FanOut(std::vector<ReplicaBuffer*> buffers) : buffers_(std::move(buffers)) {}
  void on_store(const store::Item& item) override {
    for (ReplicaBuffer* buffer : buffers_)
      buffer->on_store(item);
  }
  void on_delete(std::string_view key) override {
    for (ReplicaBuffer* buffer : buffers_)
      buffer->on_delete(key);
  }
  void on_flush(store::RelTime moment) override {
    for (ReplicaBuffer* buffer : buffers_)
      buffer->on_flush(moment);
  }

 private:
  const std::vector<ReplicaBuffer*> buffers_;
};

class Master::Acceptor final : public net::EventHandler {
 public:
  explicit Acceptor(Master& master) : master_(master) {}
  void on_event(uint32_t) override { master_.accept(); }

 private:
  Master& master_;
};

// One connected replica: its buffer, the snapshot while it lasts, and the
// bytes taken from the buffer that the socket has not accepted yet. Its
// stream begins once the replica answered (or kGreetingMs passed): only
// then is it known whether it takes each item's CAS (heartbeat.h), which
// must hold for every frame, so the buffer hears no change before.
class Master::Follower final : public net::EventHandler {
 public:
  Follower(Master& master, int fd)
      : master_(master),
        fd_(fd),
        address_(net::peer_name(fd)),
        buffer_(master.store_.clock(), master.settings_.buffer_limit),
        snapshot_(master.store_, buffer_),
        connected_ms_(net::monotonic_ms()),
        heard_ms_(connected_ms_) {
    append_noop_request(out_);  // memcached answers it; a lockcached replica needs no prompt
  }
  ~Follower() override { close_socket(); }

  bool start() { return master_.reactor_.add(fd_, EPOLLIN | EPOLLOUT, this); }
  ReplicaBuffer& buffer() { return buffer_; }
  uint64_t acked() const { return bytes_acked_.load(std::memory_order_relaxed); }
  const std::string& address() const { return address_; }
  bool closed() const { return fd_ < 0; }
  // Its buffer hears the store's changes (Master::install_fan_out_locked).
  bool streaming() const { return streaming_; }
  int64_t connected_at() const { return connected_ms_; }

  // The replica answered, or took too long to: the stream begins, with each
  // item's CAS if it said it takes them.
  void begin_stream(bool with_cas) {
    if (streaming_ || closed()) return;
    if (with_cas) buffer_.send_cas();
    buffer_.on_snapshot_begin();  // first: the store reports nothing here yet
    streaming_ = true;
    master_.stream_to(this);
    LOG(INFO) << "replication: sending a snapshot to " << address_
              << (with_cas ? ", with each item's CAS"
                           : ", without CASes (not a replica that takes them)");
    pump();
  }
  void on_event(uint32_t events) override {
    if (closed()) return;
    if (events & (EPOLLERR | EPOLLHUP)) return master_.drop(this, "connection lost");
    if (events & EPOLLIN) read_answers();
    if (!closed() && (events & EPOLLOUT)) pump();
  }

  // Sends until the socket is full or nothing waits, adding snapshot pieces
  // while the queue is short.
  void pump() {
    sample_position();
    while (!closed()) {
      if (sent_ == out_.size() && !refill()) return want_writable(false);
      ssize_t n = net::send_some(fd_, out_.data() + sent_, out_.size() - sent_);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return want_writable(true);
        if (errno == EINTR) continue;
        return master_.drop(this, std::string("send: ") + std::strerror(errno));
      }
      size_t stream_before = std::min(sent_, stream_end_);
      sent_ += static_cast<size_t>(n);
      size_t stream_after = std::min(sent_, stream_end_);
      // The stream's bytes alone, as the replica counts what it applied.
      bytes_sent_.fetch_add(stream_after - stream_before, std::memory_order_relaxed);
      queued_.store(stream_end_ - stream_after, std::memory_order_relaxed);
    }
  }

  // Appended after whatever is queued: frames stay whole. A keep-alive,
  // not part of the stream: neither counted as sent nor acked.
  void send_noop() {
    append_noop_request(out_);
    pump();
  }

  int64_t silent_since() const { return heard_ms_; }

  FollowerStatus status(int64_t now_ms) const {
    FollowerStatus status;
    status.address = address_;
    status.syncing = syncing_.load(std::memory_order_relaxed);
    status.snapshot_items = snapshot_items_.load(std::memory_order_relaxed);
    // Acked first: the replica acks only bytes sent, so the count sent,
    // read after, is at least as large.
    status.bytes_acked = bytes_acked_.load(std::memory_order_acquire);
    status.bytes_sent = bytes_sent_.load(std::memory_order_acquire);
    status.bytes_pending = buffer_.size() + queued_.load(std::memory_order_relaxed);
    status.connected_ms = now_ms - connected_ms_;
    status.silent_ms = now_ms - heard_ms_.load(std::memory_order_relaxed);
    int64_t behind_since = behind_since_ms_.load(std::memory_order_relaxed);
    status.lag_ms = behind_since < 0 ? 0 : now_ms - behind_since;
    return status;
  }

  void close_socket() {
    if (fd_ < 0) return;
    master_.reactor_.remove(fd_);
    ::close(fd_);
    fd_ = -1;
  }

 private:
  // Moves the buffer's bytes (or the next snapshot piece's) into out_.
  // False when there is nothing to send.
  bool refill() {
    out_.clear();
    sent_ = 0;
    stream_end_ = 0;
    if (!streaming_) return false;
    for (;;) {
      if (!buffer_.take(out_)) {
        master_.drop(this, "fell more than --repl_buffer_size behind; it must resync");
        return false;
      }
      if (!out_.empty() || !syncing_.load(std::memory_order_relaxed)) break;
      while (syncing_.load(std::memory_order_relaxed) && buffer_.size() < master_.snapshot_fill_) {
        if (!snapshot_.send_piece(master_.piece_items_)) finish_snapshot();
      }
      snapshot_items_.store(snapshot_.items_sent(), std::memory_order_relaxed);
    }
    stream_end_ = out_.size();  // Noops go after (send_noop)
    queued_.store(out_.size(), std::memory_order_relaxed);
    return !out_.empty();
  }

  void finish_snapshot() {
    syncing_.store(false, std::memory_order_relaxed);
    buffer_.on_snapshot_end();
    LOG(INFO) << "replication: snapshot of " << snapshot_.items_sent() << " items sent to "
              << address_ << " in " << net::monotonic_ms() - connected_ms_ << " ms";
  }

  void read_answers() {
    char chunk[kReadChunk];
    ssize_t n = net::read_some(fd_, chunk, sizeof chunk);
    if (n == 0) return master_.drop(this, "replica closed the connection");
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      return master_.drop(this, std::string("read: ") + std::strerror(errno));
    }
    heard_ms_.store(net::monotonic_ms(), std::memory_order_relaxed);
    if (!answers_.feed({chunk, static_cast<size_t>(n)})) {
      return master_.drop(this, "sent something other than responses");
    }
    bytes_acked_.store(answers_.bytes_applied(), std::memory_order_release);
    forget_acked_samples();
    if (!streaming_ && answers_.answered()) begin_stream(answers_.takes_cas());
  }

  // Every kLagSampleMs while changes come: the stream position and when it
  // was reached, so that an ack tells how old the oldest unapplied change is.
  void sample_position() {
    uint64_t position = buffer_.appended();
    int64_t now = net::monotonic_ms();
    if (!samples_.empty() && (position == samples_.back().first ||
                              now - samples_.back().second < kLagSampleMs ||
                              samples_.size() >= kMaxLagSamples)) {
      return;
    }
    if (samples_.empty() && position <= acked()) return;
    samples_.emplace_back(position, now);
    if (samples_.size() == 1) behind_since_ms_.store(now, std::memory_order_relaxed);
  }

  void forget_acked_samples() {
    while (!samples_.empty() && samples_.front().first <= acked())
      samples_.pop_front();
    behind_since_ms_.store(samples_.empty() ? -1 : samples_.front().second,
                           std::memory_order_relaxed);
  }

  void want_writable(bool writable) {
    if (writable == writable_ || closed()) return;
    writable_ = writable;
    master_.reactor_.modify(fd_, EPOLLIN | (writable ? EPOLLOUT : 0u), this);
  }

  Master& master_;
  int fd_;
  const std::string address_;
  ReplicaBuffer buffer_;
  Snapshot snapshot_;
  std::string out_;
  size_t sent_ = 0;
  size_t stream_end_ = 0;  // out_'s stream bytes come first; Noops after
  bool writable_ = true;  // registered for EPOLLOUT
  bool streaming_ = false;  // begin_stream
  ResponseReader answers_;
  std::deque<std::pair<uint64_t, int64_t>> samples_;  // position, when; unacked
  const int64_t connected_ms_;
  // Read by followers() on other threads.
  std::atomic<int64_t> heard_ms_;
  std::atomic<bool> syncing_{true};
  std::atomic<uint64_t> snapshot_items_{0};
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_acked_{0};
  std::atomic<size_t> queued_{0};  // stream bytes in out_, not sent yet
  std::atomic<int64_t> behind_since_ms_{-1};
};

Master::Master(net::Reactor& reactor, store::Store& store, MasterSettings settings)
    : reactor_(reactor),
      store_(store),
      settings_(std::move(settings)),
      // A piece must fit in a buffer with room to spare, even of the
      // largest items: at most a quarter of it.
      piece_items_(std::clamp<size_t>(settings_.buffer_limit / 4 / store.max_item_size(), 1,
                                      Snapshot::kPieceItems)),
      // Below it a piece is added; a piece is at most about a quarter of
      // the buffer (--repl_buffer_size holds 4 x --max_item_size), so the
      // buffer never holds more than three quarters of its limit from the
      // snapshot, whatever the limit.
      snapshot_fill_(std::min(kSnapshotQueuedBytes, settings_.buffer_limit / 2)) {}

Master::~Master() {
  store_.set_change_listener(nullptr);
  if (listen_fd_ >= 0) {
    reactor_.remove(listen_fd_);
    ::close(listen_fd_);
  }
  std::lock_guard lock(mutex_);
  followers_.clear();
  dropped_.clear();
}

bool Master::listen(std::string* error) {
  net::ListenError failure;
  listen_fd_ = net::open_listener(settings_.address, settings_.port, false, &failure);
  if (listen_fd_ < 0) {
    *error = failure.message;
    return false;
  }
  acceptor_ = std::make_unique<Acceptor>(*this);
  if (!reactor_.add(listen_fd_, EPOLLIN, acceptor_.get())) {
    *error = "epoll refused the replication listener";
    return false;
  }
  LOG(INFO) << "replication: master; replicas connect to " << settings_.address << ":"
            << settings_.port;
  return true;
}

void Master::accept() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) PLOG(WARNING) << "replication: accept";
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Follower* raw;
    {
      std::lock_guard lock(mutex_);
      followers_.push_back(std::make_unique<Follower>(*this, fd));
      raw = followers_.back().get();
    }
    LOG(INFO) << "replication: replica " << raw->address() << " connected";
    if (!raw->start()) drop(raw, "epoll refused the connection");
  }
}

// The rule of replication/snapshot.h: its buffer hears every change from
// here on, before the snapshot's first piece is taken.
void Master::stream_to(Follower* follower) {
  std::lock_guard lock(mutex_);
  if (std::none_of(followers_.begin(), followers_.end(),
                   [follower](const auto& f) { return f.get() == follower; })) {
    return;
  }
  install_fan_out_locked();
}

void Master::install_fan_out_locked() {
  std::vector<ReplicaBuffer*> buffers;
  for (const auto& follower : followers_) {
    if (follower->streaming()) buffers.push_back(&follower->buffer());
  }
  auto fan_out = buffers.empty() ? nullptr : std::make_unique<FanOut>(std::move(buffers));
  // They return once no change is still being handed to the old one.
  store_.set_change_listener(fan_out.get());
  fan_out_ = std::move(fan_out);
}

void Master::drop(Follower* follower, const std::string& why) {
  if (follower->closed()) return;
  LOG(WARNING) << "replication: dropped replica " << follower->address() << ": " << why;
  follower->close_socket();
  {
    std::lock_guard lock(mutex_);
    auto found = std::find_if(followers_.begin(), followers_.end(),
                              [follower](const auto& f) { return f.get() == follower; });
    if (found == followers_.end()) return;
    dropped_.push_back(std::move(*found));
    followers_.erase(found);
    ++dropped_total_;
    install_fan_out_locked();  // then nothing writes into its buffer any more
  }
}

void Master::free_dropped() {
  std::lock_guard lock(mutex_);
  dropped_.clear();
}

// A copy: sending or a heartbeat may drop a follower from followers_.
std::vector<Master::Follower*> Master::live_followers() const {
  std::lock_guard lock(mutex_);
  std::vector<Follower*> live;
  for (const auto& follower : followers_)
    live.push_back(follower.get());
  return live;
}

void Master::pump_all() {
  for (Follower* follower : live_followers())
    follower->pump();
}

void Master::heartbeat() {
  int64_t now = net::monotonic_ms();
  for (Follower* follower : live_followers()) {
    if (now - follower->silent_since() > settings_.silence_limit_ms) {
      drop(follower, "silent for more than --repl_timeout");
      continue;
    }
    if (!follower->streaming() && now - follower->connected_at() >= kGreetingMs) {
      follower->begin_stream(false);
    }
    if (!follower->closed()) follower->send_noop();
  }
}

std::vector<FollowerStatus> Master::followers() const {
  int64_t now = net::monotonic_ms();
  std::lock_guard lock(mutex_);
  std::vector<FollowerStatus> statuses;
  for (const auto& follower : followers_)
    statuses.push_back(follower->status(now));
  return statuses;
}

uint64_t Master::dropped_total() const {
  std::lock_guard lock(mutex_);
  return dropped_total_;
}

}  // namespace lockcached::replication
