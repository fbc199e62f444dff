// One load generator thread: its share of the connections in one epoll loop
// (engine.cc) or io_uring loop (uring.cc), keeping --depth requests in
// flight on each and checking every reply.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "buffer.h"
#include "histogram.h"
#include "keys.h"
#include "options.h"
#include "protocol.h"
#include "tls.h"

struct io_uring_cqe;
namespace bench {
class Uring;
}

namespace loadgen {

struct Stats {
  uint64_t ops = 0;     // replies received and checked
  uint64_t cycles = 0;  // completed lock cycles (lock modes)
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t retries = 0;  // Redis: locks refused because the name was held, sent again
  uint64_t errors = 0;   // refused or failed requests, lost connections, stalls
  uint64_t mismatches = 0;
  uint64_t bytes_out = 0;
  uint64_t bytes_in = 0;
  Histogram latency;        // per request, nanoseconds
  Histogram cycle_latency;  // per lock cycle, nanoseconds
  std::string first_problem;

  void merge(const Stats& other);
  void problem(const std::string& what);
};

// kSetup: each connection's Op::kSetup (etcd, Redis), before the run.
enum class Phase { kPreload, kSetup, kMeasure };

int64_t now_ns();

// Opens a blocking TCP connection with TCP_NODELAY; -1 and a message in
// `error` when it fails.
int connect_to(const Options& options, std::string& error);

class Worker {
 public:
  // `tls` is null for plain connections.
  Worker(const Options& options, const Codec& codec, ssl_ctx_st* tls, int index);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Opens this thread's connections (and runs their TLS handshakes); false
  // (and a message) when one fails.
  bool connect(std::string& error);

  // Runs until `deadline_ns` (when non-zero) or until `quota` requests are
  // answered; preload stores this thread's share of the keys instead, setup
  // sends each connection's Op::kSetup.
  Stats run(Phase phase, int64_t deadline_ns, uint64_t quota);

  // The TLS version and cipher the first connection got ("" when plain).
  std::string tls_name() const;

 private:
  struct Conn;

  void prime();
  bool keep_going(int64_t now, int64_t deadline_ns);
  void loop(int64_t deadline_ns);
  void on_readable(Conn& conn);
  bool receive(Conn& conn);
  bool take_replies(Conn& conn, int64_t now);
  void account(Conn& conn, const Request& request, const Reply& reply, int64_t now);
  void fill(Conn& conn, int64_t now);
  bool next_request(Conn& conn, Request& request, uint64_t* multi);
  void next_kv(Request& request, uint64_t* multi);
  void next_cycle_step(Conn& conn, Request& request, int64_t now);
  void end_step(Conn& conn, const Reply& reply, int64_t now);
  void flush(Conn& conn);
  void watch(Conn& conn);
  void kill(Conn& conn, const std::string& why);
  bool may_issue() const;

  // --io=uring (uring.cc).
  void run_uring(int64_t deadline_ns);
  void arm_uring();
  void reap(int64_t now);
  void on_recv(Conn& conn, const io_uring_cqe* cqe, int64_t now);
  void on_send(Conn& conn, int result);
  void queue_send(Conn& conn);
  void send_ready();
  void send_rest(Conn& conn);

  const Options& options_;
  const Codec& codec_;
  ssl_ctx_st* const tls_;
  const int index_;
  Rng rng_;
  KeyChooser chooser_;
  int epoll_ = -1;
  bench::Uring* uring_ = nullptr;  // --io=uring: the ring of the current run
  std::vector<Conn*> ready_;       // --io=uring: connections with requests to send
  std::vector<std::unique_ptr<Conn>> conns_;
  int live_ = 0;

  Phase phase_ = Phase::kMeasure;
  uint64_t quota_ = 0;  // requests this run may issue (0: unlimited)
  uint64_t issued_ = 0;
  uint64_t outstanding_ = 0;
  uint64_t next_preload_key_ = 0;
  int64_t last_progress_ns_ = 0;
  Stats stats_;
};

}  // namespace loadgen
