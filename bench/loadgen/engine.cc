#include "engine.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "conn.h"

namespace loadgen {
namespace {

constexpr int kPreloadDepth = 32;
constexpr int64_t kStallNs = 10'000'000'000;  // no reply for this long: the server hangs
constexpr Op kBinaryCycle[] = {Op::kLock, Op::kGet, Op::kRaU};
constexpr Op kTextCycle[] = {Op::kLock, Op::kGet, Op::kSet, Op::kUnlock};
constexpr Op kServiceCycle[] = {Op::kSvcLock, Op::kSvcUnlock};

}  // namespace

void Stats::merge(const Stats& other) {
  ops += other.ops;
  cycles += other.cycles;
  retries += other.retries;
  hits += other.hits;
  misses += other.misses;
  errors += other.errors;
  mismatches += other.mismatches;
  bytes_out += other.bytes_out;
  bytes_in += other.bytes_in;
  latency.merge(other.latency);
  cycle_latency.merge(other.cycle_latency);
  if (first_problem.empty()) first_problem = other.first_problem;
}

void Stats::problem(const std::string& what) {
  if (first_problem.empty()) first_problem = what;
}

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

int connect_to(const Options& options, std::string& error) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(options.port));
  if (inet_pton(AF_INET, options.host.c_str(), &address.sin_addr) != 1) {
    error = "bad --host " + options.host;
    return -1;
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    error = std::string("connect: ") + std::strerror(errno);
    if (fd >= 0) close(fd);
    return -1;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

Worker::Worker(const Options& options, const Codec& codec, ssl_ctx_st* tls, int index)
    : options_(options),
      codec_(codec),
      tls_(tls),
      index_(index),
      rng_(options.seed * 0x100000001b3ULL + static_cast<uint64_t>(index)),
      chooser_(options.keys, options.zipf, options.zipf_theta) {}

Worker::~Worker() {
  if (epoll_ >= 0) close(epoll_);
}

// With --io=uring there is no epoll instance, and the sockets stay blocking:
// io_uring waits for them itself. Each run makes its ring (run_uring).
bool Worker::connect(std::string& error) {
  const bool uring = options_.io == Io::kUring;
  if (!uring) epoll_ = epoll_create1(EPOLL_CLOEXEC);
  if (!uring && epoll_ < 0) {
    error = std::string("epoll_create1: ") + std::strerror(errno);
    return false;
  }
  const int depth = std::max(options_.depth, kPreloadDepth);
  for (int c = index_; c < options_.connections; c += options_.threads) {
    auto conn = std::make_unique<Conn>(depth, options_.multiget);
    conn->index = c;
    conn->session.token = std::to_string(rng_.next());  // this connection's, for Redis
    conn->stream = Transport(connect_to(options_, error));
    const int fd = conn->stream.fd();
    if (fd < 0) return false;
    if (uring) {
      conns_.push_back(std::move(conn));
      continue;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    // The handshake is done here, before the preload and the measured run.
    if (tls_ != nullptr && !conn->stream.start_tls(tls_, error)) return false;
    epoll_event event{};
    event.events = conn->events;
    event.data.ptr = conn.get();
    epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event);
    conns_.push_back(std::move(conn));
  }
  live_ = static_cast<int>(conns_.size());
  return true;
}

std::string Worker::tls_name() const {
  return conns_.empty() ? "" : conns_.front()->stream.tls_name();
}

Stats Worker::run(Phase phase, int64_t deadline_ns, uint64_t quota) {
  phase_ = phase;
  quota_ = quota;
  issued_ = 0;
  next_preload_key_ = static_cast<uint64_t>(index_);
  stats_ = Stats();
  last_progress_ns_ = now_ns();
  if (options_.io == Io::kUring) {
    run_uring(deadline_ns);
    return stats_;
  }
  prime();
  loop(deadline_ns);
  return stats_;
}

void Worker::prime() {
  const int64_t now = now_ns();
  for (auto& conn : conns_) {
    if (conn->dead) continue;
    fill(*conn, now);
    flush(*conn);
  }
}

bool Worker::may_issue() const {
  if (phase_ == Phase::kPreload) return next_preload_key_ < options_.keys;
  if (phase_ == Phase::kSetup) return issued_ < conns_.size();
  return quota_ == 0 || issued_ < quota_;
}

// False when the run is over: its deadline passed, its work is done, every
// connection died, or the server stalled (an error).
bool Worker::keep_going(int64_t now, int64_t deadline_ns) {
  if (deadline_ns != 0 && now >= deadline_ns) return false;
  if (live_ == 0 || (outstanding_ == 0 && !may_issue())) return false;
  if (now - last_progress_ns_ > kStallNs) {
    ++stats_.errors;
    stats_.problem("no reply for 10 s with requests in flight");
    return false;
  }
  return true;
}

void Worker::loop(int64_t deadline_ns) {
  epoll_event events[128];
  for (;;) {
    const int64_t now = now_ns();
    if (!keep_going(now, deadline_ns)) return;
    int timeout_ms = 100;  // at most, so that a stall is noticed
    if (deadline_ns != 0) {
      timeout_ms = static_cast<int>(std::min<int64_t>(100, (deadline_ns - now) / 1'000'000 + 1));
    }
    const int n = epoll_wait(epoll_, events, 128, timeout_ms);
    for (int i = 0; i < n; ++i) {
      Conn& conn = *static_cast<Conn*>(events[i].data.ptr);
      if (conn.dead) continue;
      const uint32_t ready = conn.stream.ready(events[i].events);
      if (ready & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(conn);
      if (!conn.dead && (ready & EPOLLOUT)) flush(conn);
    }
  }
}

void Worker::on_readable(Conn& conn) {
  if (!receive(conn)) return;
  const int64_t now = now_ns();
  if (!take_replies(conn, now)) return;
  fill(conn, now);
  flush(conn);
}

// Reads what has arrived: one read on a plain stream; with TLS, reads until
// OpenSSL holds nothing more, since epoll cannot report bytes that are
// already inside OpenSSL. False when nothing came or the connection died.
// Forced inline (and watch too): as calls they cost the plain path about 20
// instructions per request more than before TLS existed (callgrind).
[[gnu::always_inline]] inline bool Worker::receive(Conn& conn) {
  bool got = false;
  do {
    conn.in.ensure(
        std::max(kReadChunk, conn.need > conn.in.size() ? conn.need - conn.in.size() : 0));
    const ssize_t n = conn.stream.read(conn.in.tail(), conn.in.room());
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
    if (n <= 0) {
      kill(conn, n == 0 ? "the server closed a connection" : conn.stream.failure());
      return false;
    }
    conn.in.commit(static_cast<size_t>(n));
    stats_.bytes_in += static_cast<uint64_t>(n);
    got = true;
  } while (conn.stream.buffered());
  if (!got) watch(conn);  // a TLS read may now wait for EPOLLOUT
  return got;
}

// Asks epoll for what the connection now waits for, when that changed.
[[gnu::always_inline]] inline void Worker::watch(Conn& conn) {
  const uint32_t events = conn.stream.interest(!conn.out.empty());
  if (events == conn.events) return;
  conn.events = events;
  epoll_event event{};
  event.events = events;
  event.data.ptr = &conn;
  epoll_ctl(epoll_, EPOLL_CTL_MOD, conn.stream.fd(), &event);
}

// Checks every complete reply in the input; false when the stream broke.
bool Worker::take_replies(Conn& conn, int64_t now) {
  while (conn.count > 0 && !conn.in.empty()) {
    const size_t slot = conn.head;
    const Request& request = conn.pending[slot];
    const uint64_t* multi = conn.multi.data() + slot * options_.multiget;
    const Reply reply = codec_.parse(request, multi, conn.in.head(), conn.in.size());
    if (reply.consumed == 0) {
      conn.need = reply.need;
      return true;
    }
    conn.need = 0;
    conn.head = (conn.head + 1) % conn.pending.size();
    --conn.count;
    --outstanding_;
    last_progress_ns_ = now;
    account(conn, request, reply, now);
    conn.in.consume(reply.consumed);
    if (reply.verdict == Verdict::kMalformed) {
      kill(conn, "a reply that cannot be parsed");
      return false;
    }
  }
  if (conn.count == 0 && !conn.in.empty()) {
    ++stats_.mismatches;
    kill(conn, "bytes that answer no request");
    return false;
  }
  return true;
}

void Worker::account(Conn& conn, const Request& request, const Reply& reply, int64_t now) {
  const bool measured = phase_ == Phase::kMeasure;
  if (measured) {
    ++stats_.ops;
    stats_.hits += reply.hits;
    stats_.misses += reply.misses;
    stats_.latency.record(static_cast<uint64_t>(now - request.sent_ns));
  }
  if (reply.verdict == Verdict::kError || reply.verdict == Verdict::kMalformed) {
    ++stats_.errors;
    stats_.problem("an error reply: " +
                   std::string(conn.in.head(), std::min<size_t>(reply.consumed, 80)));
  } else if (reply.verdict == Verdict::kMismatch) {
    ++stats_.mismatches;
    stats_.problem("a reply with the wrong key, value or opaque");
  }
  if (!reply.token.empty()) {
    (request.op == Op::kSetup ? conn.session.setup : conn.session.held) = reply.token;
  }
  if (options_.mode != Mode::kKv && phase_ == Phase::kMeasure) end_step(conn, reply, now);
}

// A lock cycle's step is answered: the cycle ends after its last step; a
// lock refused for a held name (Redis) is its step again.
void Worker::end_step(Conn& conn, const Reply& reply, int64_t now) {
  if (reply.retry) {
    ++stats_.retries;
    conn.retry = true;
    --conn.step;
    return;
  }
  const size_t steps = options_.mode == Mode::kLockService      ? std::size(kServiceCycle)
                       : options_.protocol == Protocol::kBinary ? std::size(kBinaryCycle)
                                                                : std::size(kTextCycle);
  if (conn.step < steps) return;
  ++stats_.cycles;
  stats_.cycle_latency.record(static_cast<uint64_t>(now - conn.cycle_start));
  ++conn.cycle_no;
  conn.step = 0;
}

void Worker::fill(Conn& conn, int64_t now) {
  const size_t depth = phase_ == Phase::kPreload ? static_cast<size_t>(kPreloadDepth)
                                                 : static_cast<size_t>(options_.depth);
  while (conn.count < depth && may_issue()) {
    const size_t slot = (conn.head + conn.count) % conn.pending.size();
    Request& request = conn.pending[slot];
    uint64_t* multi = conn.multi.data() + slot * options_.multiget;
    request = Request();
    request.opaque = ++conn.opaque;
    request.sent_ns = now;
    request.session = &conn.session;
    if (!next_request(conn, request, multi)) return;
    const size_t before = conn.out.size();
    codec_.write(request, multi, conn.out);
    stats_.bytes_out += conn.out.size() - before;
    ++conn.count;
    ++outstanding_;
    ++issued_;
  }
}

bool Worker::next_request(Conn& conn, Request& request, uint64_t* multi) {
  if (phase_ == Phase::kPreload) {
    request.op = Op::kSet;
    request.key = next_preload_key_;
    next_preload_key_ += static_cast<uint64_t>(options_.threads);
    return true;
  }
  if (options_.mode == Mode::kKv) {
    next_kv(request, multi);
    return true;
  }
  // A cycle's next step goes out only once the previous step is answered.
  if (conn.count > 0) return false;
  if (phase_ == Phase::kSetup) {
    request.op = Op::kSetup;
    return conn.session.setup.empty();
  }
  next_cycle_step(conn, request, request.sent_ns);
  return true;
}

void Worker::next_kv(Request& request, uint64_t* multi) {
  if (rng_.unit() >= options_.get_ratio) {
    request.op = Op::kSet;
    request.key = chooser_.next(rng_);
    return;
  }
  request.op = Op::kGet;
  request.width = static_cast<uint32_t>(options_.multiget);
  if (request.width == 1) {
    request.key = chooser_.next(rng_);
    return;
  }
  for (uint32_t i = 0; i < request.width; ++i)
    multi[i] = chooser_.next(rng_);
  request.key = multi[0];
}

void Worker::next_cycle_step(Conn& conn, Request& request, int64_t now) {
  if (conn.step == 0 && !conn.retry) {
    conn.cycle_start = now;
    const auto connections = static_cast<uint64_t>(options_.connections);
    const uint64_t own_keys = std::max<uint64_t>(1, options_.keys / connections);
    if (options_.mode == Mode::kLockService && options_.hot_names > 0) {
      conn.cycle_key = rng_.below(static_cast<uint64_t>(options_.hot_names));
    } else {
      conn.cycle_key = static_cast<uint64_t>(conn.index) + connections * (conn.cycle_no % own_keys);
    }
  }
  if (options_.mode == Mode::kLockService) {
    request.op = kServiceCycle[conn.step];
  } else if (options_.protocol == Protocol::kBinary) {
    request.op = kBinaryCycle[conn.step];
  } else {
    request.op = kTextCycle[conn.step];
  }
  request.key = conn.cycle_key;
  conn.retry = false;
  ++conn.step;
}

void Worker::flush(Conn& conn) {
  while (!conn.out.empty()) {
    const ssize_t n = conn.stream.write(conn.out.head(), conn.out.size());
    if (n > 0) {
      conn.out.consume(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    kill(conn, "write: " + conn.stream.failure());
    return;
  }
  watch(conn);
}

void Worker::kill(Conn& conn, const std::string& why) {
  ++stats_.errors;
  stats_.problem(why);
  outstanding_ -= conn.count;
  conn.count = 0;
  conn.dead = true;
  if (epoll_ >= 0) epoll_ctl(epoll_, EPOLL_CTL_DEL, conn.stream.fd(), nullptr);
  --live_;
}

}  // namespace loadgen
