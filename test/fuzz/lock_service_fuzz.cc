// libFuzzer harness: the named-lock service's line protocol
// (LockServiceProtocol over one LockService) with three client connections.
//
// The protocol needs a net::Reactor for its wait timers, grace timers and
// the delivery of grants (post()). The real reactor runs on epoll and
// CLOCK_MONOTONIC, which would make the harness depend on wall time, so
// this file defines net::Reactor's members itself (src/net/reactor.cc is
// not linked in): timers run on a fake millisecond clock that only
// directives move, posted tasks wait in a queue, and run() executes one
// pump the harness chooses (posted tasks, due timers, or both until
// nothing is left). So a `lock NAME SECONDS` that has to wait stays
// blocked until the input releases the lock and pumps, or advances the
// fake clock past its timeout; in between the other connections go on.
//
// Directives (0xFF + op, see fuzz_util.h):
//   A / B / C  switch to connection 0 / 1 / 2
//   K          chunk boundary, nothing else
//   T n        advance the fake clock n*100 ms and run the due timers
//   H n        advance it n minutes and run the due timers
//   R          run the posted tasks (grant deliveries) until none is left
//   P          run posted tasks and due timers until nothing is left
//   X          the current client hangs up; later bytes for it open a new
//              connection (a new session)
//   I          learn the session id of every connection (a `conn_id` sent
//              aside, not in the input stream)
//   S n        send "conn_id <learned id n>" on the current connection
//   D          drain the current connection's output completely
//   Y          connections opened from now on must `auth` first (users
//              alice:secret and bob:hunter2, fuzz_util.h)
// Header byte (fuzz_util.h), bit 7: pump (P) after every chunk.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "lockcached/locks/lock_service.h"
#include "lockcached/net/reactor.h"
#include "lockcached/net/reactor_scheduler.h"
#include "lockcached/protocol/lock_service_protocol.h"
#include "../../src/net/poller.h"  // Reactor's member needs the whole type
#include "lockcached/protocol/output_queue.h"

// ---------------------------------------------------------------------------
// A deterministic net::Reactor: the class of reactor.h, defined here.

namespace lockcached::net {
namespace fake {

enum class Pump { kPosted, kTimers, kAll };

int64_t now_ms = 1'000'000'000;
Pump pump = Pump::kAll;
// What run() left behind (kAll leaves no posted task and no due timer).
size_t timers_left = 0;
size_t posted_left = 0;

}  // namespace fake

int64_t monotonic_ms() {
  return fake::now_ms;
}

class Reactor::Waker {};  // nothing to wake: run() is one pump

Reactor::Reactor(IoBackend, UringOptions) : wake_fd_(-1), now_ms_(fake::now_ms) {}

Reactor::~Reactor() = default;

// No file descriptors here (no poller, and wake_fd_ is -1).
bool Reactor::add(int, uint32_t, EventHandler*) {
  return poller_ != nullptr;
}

bool Reactor::modify(int, uint32_t, EventHandler*) {
  return wake_fd_ >= 0;
}

void Reactor::remove(int) {}

Reactor::TimerId Reactor::add_timer(int64_t delay_ms, Task task) {
  TimerId id = next_timer_id_++;
  timers_.push({monotonic_ms() + delay_ms, id});
  timer_tasks_.emplace(id, std::move(task));
  return id;
}

void Reactor::cancel_timer(TimerId id) {
  timer_tasks_.erase(id);
}

void Reactor::post(Task task) {
  std::lock_guard lock(posted_mutex_);
  posted_.push_back(std::move(task));
}

// Never: the harness pumps the posted tasks itself, so the scheduler posts
// every timer's arming and cancel, as the real one does from another thread.
bool Reactor::in_turn() const {
  return false;
}

void Reactor::stop() {
  std::lock_guard lock(posted_mutex_);
  stop_requested_ = true;
  stopping_ = true;  // unused: run() is one pump, never a loop to stop
}

int Reactor::next_timeout_ms() const {
  if (timers_.empty()) return -1;
  int64_t wait = timers_.top().deadline_ms - monotonic_ms();
  return wait <= 0 ? 0 : 1;
}

// As the real reactor: a cancelled timer's heap entry is skipped.
void Reactor::run_due_timers() {
  int64_t now = monotonic_ms();
  while (!timers_.empty() && timers_.top().deadline_ms <= now) {
    TimerId id = timers_.top().id;
    timers_.pop();
    auto found = timer_tasks_.find(id);
    if (found == timer_tasks_.end()) continue;
    Task task = std::move(found->second);
    timer_tasks_.erase(found);
    task();
  }
}

void Reactor::run_posted_tasks() {
  std::vector<Task> tasks;
  {
    std::lock_guard lock(posted_mutex_);
    tasks.swap(posted_);
  }
  for (Task& task : tasks)
    task();
}

void Reactor::run() {
  auto posted_waiting = [this] {
    std::lock_guard lock(posted_mutex_);
    return !posted_.empty();
  };
  switch (fake::pump) {
    case fake::Pump::kPosted:
      while (posted_waiting())
        run_posted_tasks();
      break;
    case fake::Pump::kTimers:
      run_due_timers();
      break;
    case fake::Pump::kAll:
      // The real loop's order: the posted tasks of a wake-up, then timers.
      while (posted_waiting() || next_timeout_ms() == 0) {
        run_posted_tasks();
        run_due_timers();
      }
      break;
  }
  fake::timers_left = timer_tasks_.size();
  std::lock_guard lock(posted_mutex_);
  fake::posted_left = posted_.size();
}

}  // namespace lockcached::net

// ---------------------------------------------------------------------------

namespace lockcached::fuzz {
namespace {

class LockHarness {
 public:
  LockHarness(const uint8_t* data, size_t size)
      : data_(data), size_(size), header_(data[0]), rng_(0x7654321ull * (data[0] + 1) + size) {
    net::fake::now_ms = 1'000'000'000;
  }

  ~LockHarness() {
    for (auto& c : conns_) {
      if (c) close(*c, false);
    }
    graveyard_.clear();
  }

  void run() {
    parse_script(
        data_, size_, "ABCKTHRPXISDY", "THS",
        [this](std::string_view bytes) {
          for_each_chunk(bytes, header_.chunk_mode, rng_,
                         [this](std::string_view chunk) { feed(current_, chunk); });
        },
        [this](char op, uint8_t arg) { directive(op, arg); });
    finish();
  }

 private:
  static constexpr int kSlots = 3;

  // One client connection, as server::Connection holds it.
  struct Conn {
    Conn(LockHarness& harness, int slot)
        : slot(slot),
          behind_auth(harness.auth_on_),
          protocol(protocol::LockServiceContext{harness.coordinator_, harness.reactor_, out,
                                                [&harness, this] { harness.resume(*this); },
                                                nullptr, nullptr, nullptr,
                                                harness.auth_on_ ? &authenticator() : nullptr}) {}
    int slot;                   // for traces
    bool behind_auth;           // opened after Y: `auth` first
    protocol::OutputQueue out;  // before the protocol, which refers to it
    std::string pending;        // the unconsumed tail
    ReplyStream replies{ReplyStream::Kind::kLines};
    bool closed = false;
    protocol::LockServiceProtocol protocol;
  };

  Conn& conn(int slot) {
    if (!conns_[slot]) conns_[slot] = std::make_unique<Conn>(*this, slot);
    return *conns_[slot];
  }

  void feed(int slot, std::string_view bytes) {
    Conn& c = conn(slot);
    trace(">>", slot, bytes);
    c.pending.append(bytes);
    offer(c);
    if (header_.extra) pump(net::fake::Pump::kAll);
    if (Conn* open = conns_[slot].get()) {
      drain_some(open->out, slot, open->replies, open->protocol, header_, rng_);
    }
    settle();
  }

  // Connection::run: offer everything unconsumed; keep the rest.
  void offer(Conn& c) {
    if (c.closed) return;
    bool was_blocked = c.protocol.blocked();
    size_t queued = c.out.pending();
    size_t consumed = c.protocol.consume(c.pending, c.out);
    FUZZ_CHECK(consumed <= c.pending.size());
    if (was_blocked) {
      // A waiting connection still reads, but takes no request.
      FUZZ_CHECK(consumed == 0);
      FUZZ_CHECK(c.out.pending() == queued);
    }
    c.pending.erase(0, consumed);
    if (c.protocol.wants_close()) return close(c, true);
    if (!c.protocol.blocked() && !c.pending.empty()) {
      // Idle: what is left is an incomplete line; offering it again
      // without new bytes (as resume_input does) does nothing.
      queued = c.out.pending();
      FUZZ_CHECK(c.protocol.consume(c.pending, c.out) == 0);
      FUZZ_CHECK(c.out.pending() == queued);
      FUZZ_CHECK(!c.protocol.wants_close());
    }
  }

  // on_async_reply, i.e. Connection::resume_input: a wait ended (on the
  // reactor thread, inside a pump); go on with what arrived meanwhile.
  void resume(Conn& c) {
    FUZZ_CHECK(!c.closed);
    FUZZ_CHECK(!c.protocol.blocked());
    FUZZ_CHECK(in_pump_);
    if (!c.pending.empty()) offer(c);
  }

  // Connection::close. The object itself goes to the graveyard and is
  // freed at the next safe point (the worker's retire()), since this may
  // run inside one of its own callbacks.
  void close(Conn& c, bool send_first) {
    if (c.closed) return;
    if (send_first) drain_all(c.out, c.slot, c.replies, c.protocol);
    trace("closed", c.slot, {});
    c.out.clear();
    c.closed = true;
    c.protocol.connection_closed(lockcached::core::CloseReason::kNormal);
    FUZZ_CHECK(!c.protocol.blocked());
    for (auto& slot : conns_) {
      if (slot.get() == &c) graveyard_.push_back(std::move(slot));
    }
  }

  void pump(net::fake::Pump mode) {
    in_pump_ = true;
    net::fake::pump = mode;
    reactor_.run();
    in_pump_ = false;
  }

  // Between steps: free closed connections, check the service.
  void settle() {
    graveyard_.clear();
    check_invariants();
  }

  void directive(char op, uint8_t arg) {
    if (trace_enabled()) {
      std::fprintf(stderr, "[%c] directive %c %u\n", 'A' + current_, op, arg);
    }
    switch (op) {
      case 'A':
      case 'B':
      case 'C':
        current_ = op - 'A';
        break;
      case 'K':
        break;
      case 'T':
        net::fake::now_ms += int64_t{arg} * 100;
        pump(net::fake::Pump::kTimers);
        break;
      case 'H':
        net::fake::now_ms += int64_t{arg} * 60'000;
        pump(net::fake::Pump::kTimers);
        break;
      case 'R':
        pump(net::fake::Pump::kPosted);
        break;
      case 'P':
        pump(net::fake::Pump::kAll);
        break;
      case 'X':
        if (conns_[current_]) close(*conns_[current_], false);
        break;
      case 'I':
        learn_ids();
        break;
      case 'S':
        if (!known_ids_.empty()) {
          feed(current_, "conn_id " + known_ids_[arg % known_ids_.size()] + "\r\n");
        }
        break;
      case 'D':
        if (Conn* c = conns_[current_].get()) drain_all(c->out, current_, c->replies, c->protocol);
        break;
      case 'Y':
        auth_on_ = true;
        break;
    }
    settle();
  }

  // A `conn_id` on the side of each connection that takes requests: its
  // session's id, for S to resume later.
  void learn_ids() {
    for (auto& c : conns_) {
      if (!c || c->protocol.blocked()) continue;
      protocol::OutputQueue out;
      constexpr std::string_view kRequest = "conn_id\r\n";
      FUZZ_CHECK(c->protocol.consume(kRequest, out) == kRequest.size());
      std::string reply = out.take_all();
      // A connection behind authentication (the Y directive) that has not
      // logged in has no id to show.
      if (reply == "401 Authentication required\r\n") continue;
      FUZZ_CHECK(reply.size() > 6 && reply.compare(0, 4, "200 ") == 0);
      FUZZ_CHECK(reply.compare(reply.size() - 2, 2, "\r\n") == 0);
      std::string id = reply.substr(4, reply.size() - 6);
      if (std::find(known_ids_.begin(), known_ids_.end(), id) == known_ids_.end()) {
        known_ids_.push_back(std::move(id));
      }
    }
  }

  void check_invariants() {
    locks::ServiceStats stats = service_->stats();
    std::vector<locks::LockInfo> held = service_->list("");
    FUZZ_CHECK(held.size() == stats.locks);
    uint64_t waiters = 0;
    for (const locks::LockInfo& lock : held) {
      waiters += lock.waiters;
      FUZZ_CHECK(lock.token > 0 && lock.token <= stats.grants);
    }
    FUZZ_CHECK(waiters == stats.waiters);
    uint64_t with_session = 0, blocked = 0;
    for (const auto& c : conns_) {
      if (!c) continue;
      FUZZ_CHECK(!c->closed);
      // Behind authentication (Y), a connection opens its session with
      // its first successful `auth`; without, at once.
      FUZZ_CHECK(c->protocol.has_session() || c->behind_auth);
      if (c->protocol.has_session()) ++with_session;
      if (c->protocol.blocked()) ++blocked;
    }
    // Every queued wait belongs to a connection that is blocked on it.
    FUZZ_CHECK(stats.waiters <= blocked);
    // Every live connection with a session has its own attached one; all
    // others are in their grace period.
    FUZZ_CHECK(stats.sessions_in_grace <= stats.sessions);
    FUZZ_CHECK(stats.sessions - stats.sessions_in_grace == with_session);
  }

  // Every client hangs up; once every timer has run (grace periods
  // included), nothing may be left: no lock, waiter or session.
  void finish() {
    for (auto& c : conns_) {
      if (!c) continue;
      drain_all(c->out, c->slot, c->replies, c->protocol);
      close(*c, false);
    }
    settle();
    net::fake::now_ms += int64_t{400} * 24 * 3600 * 1000;  // past any wait or grace period
    pump(net::fake::Pump::kAll);
    settle();
    FUZZ_CHECK(net::fake::timers_left == 0);
    FUZZ_CHECK(net::fake::posted_left == 0);
    locks::ServiceStats stats = service_->stats();
    FUZZ_CHECK(stats.locks == 0);
    FUZZ_CHECK(stats.waiters == 0);
    FUZZ_CHECK(stats.sessions == 0);
    FUZZ_CHECK(stats.sessions_in_grace == 0);
    FUZZ_CHECK(service_->list("").empty());
  }

  const uint8_t* data_;
  size_t size_;
  Header header_;
  bool auth_on_ = false;  // `Y`: new connections must authenticate
  Rng rng_;
  std::shared_ptr<locks::LockService> service_ = std::make_shared<locks::LockService>();
  net::Reactor reactor_;
  net::ReactorScheduler timers_{reactor_};
  std::shared_ptr<locks::Coordinator> coordinator_ =
      std::make_shared<locks::LocalCoordinator>(service_, timers_);
  // After the service and the reactor: connections go first.
  std::unique_ptr<Conn> conns_[kSlots];
  std::vector<std::unique_ptr<Conn>> graveyard_;
  std::vector<std::string> known_ids_;
  int current_ = 0;
  bool in_pump_ = false;
};

}  // namespace
}  // namespace lockcached::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  lockcached::fuzz::LockHarness harness(data, size);
  harness.run();
  return 0;
}
