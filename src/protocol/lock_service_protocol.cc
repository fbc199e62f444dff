#include "lockcached/protocol/lock_service_protocol.h"

#include <charconv>
#include <cmath>
#include <string>

#include "lockcached/core/verbosity.h"

namespace lockcached::protocol {
namespace {

constexpr size_t kMaxLine = 2048;
constexpr double kMaxWaitSeconds = 365.0 * 24 * 3600;
constexpr uint64_t kMaxGraceMs = 7ull * 24 * 3600 * 1000;

// A wait of SECONDS, fractions allowed: false for anything else.
bool parse_seconds(std::string_view word, double* seconds) {
  auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), *seconds);
  return error == std::errc() && end == word.data() + word.size() && std::isfinite(*seconds) &&
         *seconds >= 0;
}

// 429, as HTTP's Too Many Requests: the request was fine, the client asked
// for more than it may have (docs/lock-service.md, "Limits").
std::string_view limit_reply(locks::Limit limit) {
  return limit == locks::Limit::kSession ? "429 Too many locks for this session\r\n"
                                         : "429 Too many locks in the server\r\n";
}

std::string_view limit_name(locks::Limit limit) {
  return limit == locks::Limit::kSession ? "limit=session" : "limit=names";
}

std::string token_field(uint64_t token) {
  return "token=" + std::to_string(token);
}

std::string acquired_reply(uint64_t token) {
  return "200 Acquired " + std::to_string(token) + "\r\n";
}

// The request as -vv logs it: without a session id's secret, which would
// let whoever reads the log take the session over.
std::string loggable(std::string_view line, const Words& words) {
  if (words.count >= 1 && words[0] == "auth") return "auth (hidden)";
  if (words.count < 2 || words[0] != "conn_id") return std::string(line);
  std::string_view shown = locks::public_session_id(words[1]);
  return "conn_id " + std::string(shown) + (shown.size() < words[1].size() ? "-<secret>" : "");
}

}  // namespace

LockServiceProtocol::LockServiceProtocol(LockServiceContext context)
    : context_(std::move(context)),
      auth_(context_.authenticator),
      session_(context_.service->create_session(context_.session_client)),
      self_(std::make_shared<LockServiceProtocol*>(this)) {}

LockServiceProtocol::~LockServiceProtocol() {
  if (!closed_) connection_closed(core::CloseReason::kNormal);
}

size_t LockServiceProtocol::consume(std::string_view input, OutputQueue& out) {
  size_t pos = 0;
  while (pos < input.size() && !close_ && !blocked()) {
    size_t newline = input.find('\n', pos);
    // Too long whether or not its end has arrived: the verdict must not
    // depend on how TCP split the bytes.
    // (A partial line may still end in the CR of its CRLF.)
    size_t end = newline == std::string_view::npos ? input.size() : newline;
    if (end > pos && input[end - 1] == '\r') --end;
    if (end - pos > kMaxLine) {
      out.append("400 Line too long\r\n");
      close_ = true;
      break;
    }
    if (newline == std::string_view::npos) break;
    execute(input.substr(pos, end - pos), out);
    pos = newline + 1;
  }
  return close_ ? input.size() : pos;
}

void LockServiceProtocol::execute(std::string_view line, OutputQueue& out) {
  Words words = split_words(line);
  // -vv: every request line after the connection's id, as the cache's;
  // never a password or a session's secret.
  LOCKCACHED_VLOG(2) << '<' << context_.session_client.connection << ' '
                     << escape_for_log(loggable(line, words));
  if (words.count == 0) return out.append("400 Unknown command\r\n");
  std::string_view command = words[0];
  // Before anything a replica refuses: a client authenticates there too.
  if (command == "auth") return auth(words, out);
  // --auth_file: nothing but `auth` and `quit` before authenticating.
  if (auth_.required() && command != "quit") [[unlikely]] {
    return out.append("401 Authentication required\r\n");
  }
  // Acquire: a node that stopped being a replica retired its service
  // first, so this sees that the connection's service is stale.
  if (context_.read_only && context_.read_only->load(std::memory_order_acquire) &&
      command != "stats" && command != "quit") {
    out.append("503 ");
    out.append(kReadOnlyReason);
    return out.append("\r\n");
  }
  if (service().retired()) {
    close_ = true;  // its sessions live elsewhere now: the client must reconnect
    return;
  }
  if (command == "lock") return lock(words, out);
  if (command == "unlock") return unlock(words, out);
  if (command == "unlock_all") {
    if (words.count != 1) return out.append("400 unlock_all takes no arguments\r\n");
    // Reported first: a waiter may be granted a lock as soon as it is free.
    if (watched()) {
      for (const std::string& name : held_names())
        report("lock_release", name, "status=released reason=unlock_all");
    }
    service().release_all(session_);
    answer_change("200 Released\r\n", out);
    return;
  }
  if (command == "conn_id") return conn_id(words, out);
  if (command == "set_timeout") return set_timeout(words, out);
  if (command == "stats") return stats(words, out);
  if (command == "quit") {
    out.append("200 Bye\r\n");
    close_ = true;
    return;
  }
  out.append("400 Unknown command\r\n");
}

// 401 as HTTP's Unauthorized; the third refusal closes the connection.
void LockServiceProtocol::auth(const Words& words, OutputQueue& out) {
  if (!auth_.enabled()) return out.append("400 Authentication not enabled\r\n");
  if (words.count != 3) return out.append("400 auth takes USER PASSWORD\r\n");
  core::AuthResult result = auth_.attempt(words[1], words[2]);
  if (result == core::AuthResult::kAccepted) return out.append("200 Authenticated\r\n");
  out.append("401 Authentication failed\r\n");
  if (result == core::AuthResult::kLockedOut) close_ = true;
}

void LockServiceProtocol::lock(const Words& words, OutputQueue& out) {
  if (words.count < 2) return out.append("400 Missing lock name\r\n");
  if (words.count > 3) return out.append("400 Too many arguments\r\n");
  std::string_view name = words[1];
  if (!printable_key(name)) return out.append("400 Bad lock name\r\n");
  double seconds = 0;
  if (words.count == 3 && (!parse_seconds(words[2], &seconds) || seconds > kMaxWaitSeconds)) {
    return out.append("400 Bad timeout\r\n");
  }
  if (seconds == 0) {
    locks::LockService::Acquired acquired = service().try_acquire(session_, name);
    if (acquired.limit != locks::Limit::kNone) {
      report("lock_refused", name, limit_name(acquired.limit));
      return out.append(limit_reply(acquired.limit));
    }
    if (!acquired.granted) {
      report("lock_busy", name, "");
      return out.append("409 Unavailable\r\n");
    }
    report("lock_grant", name, token_field(acquired.token));
    answer_change(acquired_reply(acquired.token), out);
    return;
  }
  start_wait(name, static_cast<int64_t>(std::ceil(seconds * 1000)), out);
}

void LockServiceProtocol::start_wait(std::string_view name, int64_t wait_ms, OutputQueue& out) {
  auto ticket = std::make_shared<locks::WaitTicket>();
  ticket->session = session_;
  ticket->name.assign(name);
  // Runs on whichever thread releases the lock: hop to our own reactor. If
  // this connection is gone by then, nobody learns of the grant, so give
  // the lock back.
  ticket->on_grant = [reactor = &context_.reactor, self = std::weak_ptr(self_),
                      service = context_.service, session = session_, raw_ticket = ticket.get(),
                      name = ticket->name](uint64_t token) {
    reactor->post([self, service, session, raw_ticket, name, token] {
      auto alive = self.lock();
      if (alive && (*alive)->wait_.get() == raw_ticket) {
        (*alive)->on_granted(token);
      } else {
        service->release(session, name);
      }
    });
  };
  locks::LockService::Acquired acquired = service().acquire_or_wait(ticket);
  if (acquired.limit != locks::Limit::kNone) {
    report("lock_refused", name, limit_name(acquired.limit));
    return out.append(limit_reply(acquired.limit));
  }
  if (acquired.granted) {
    report("lock_grant", name, token_field(acquired.token));
    answer_change(acquired_reply(acquired.token), out);
    return;
  }
  report("lock_wait", name, "timeout_ms=" + std::to_string(wait_ms));
  wait_ = std::move(ticket);
  wait_timer_ = context_.reactor.add_timer(wait_ms, [self = std::weak_ptr(self_)] {
    if (auto alive = self.lock()) (*alive)->on_wait_timeout();
  });
}

void LockServiceProtocol::on_granted(uint64_t token) {
  report("lock_grant", wait_->name, token_field(token));
  context_.reactor.cancel_timer(wait_timer_);
  end_wait();
  if (answer_change(acquired_reply(token), context_.out)) context_.on_async_reply();
}

void LockServiceProtocol::on_wait_timeout() {
  // A grant already decided is on its way to us: let it answer instead.
  if (!service().cancel_wait(*wait_, true)) return;
  report("lock_timeout", wait_->name, "");
  end_wait();
  context_.out.append("409 Unavailable\r\n");  // nothing changed: nothing to replicate
  context_.on_async_reply();
}

void LockServiceProtocol::end_wait() {
  wait_.reset();
  wait_timer_ = 0;
}

// The replicas must have a grant, a release or a session's change before
// its client hears of it: a client that saw "200" keeps what it saw when
// the master dies (docs/high-availability.md). Without replicas (a single
// server, or a master alone) there is nothing to wait for.
bool LockServiceProtocol::answer_change(std::string reply, OutputQueue& out) {
  if (service().retired()) {
    close_ = true;  // a demoted master: the change may exist nowhere else
    return true;
  }
  std::shared_ptr<locks::ReplicationBarrier> barrier = service().replication_barrier();
  if (barrier) {
    replicating_ = true;
    bool waits = barrier->after_replicated(
        [reactor = &context_.reactor, self = std::weak_ptr(self_), reply](bool replicated) {
          reactor->post([self, replicated, reply = std::move(reply)] {
            if (auto alive = self.lock()) (*alive)->on_replicated(replicated, reply);
          });
        });
    if (waits) return false;
    replicating_ = false;
  }
  out.append(reply);
  return true;
}

void LockServiceProtocol::on_replicated(bool replicated, const std::string& reply) {
  replicating_ = false;
  if (replicated) {
    context_.out.append(reply);
  } else {
    close_ = true;  // this node is no longer the master: its client must find the new one
  }
  context_.on_async_reply();
}

void LockServiceProtocol::unlock(const Words& words, OutputQueue& out) {
  if (words.count != 2) return out.append("400 Missing lock name\r\n");
  if (!printable_key(words[1])) return out.append("400 Bad lock name\r\n");
  if (watched()) {
    bool held;
    {
      std::lock_guard lock(session_->mutex);
      held = session_->held.contains(std::string(words[1]));
    }
    report("lock_release", words[1],
           held ? "status=released reason=unlock" : "status=not_held reason=unlock");
  }
  if (!service().release(session_, words[1])) return out.append("403 Not held\r\n");
  answer_change("200 Released\r\n", out);
}

void LockServiceProtocol::conn_id(const Words& words, OutputQueue& out) {
  if (words.count == 1) {
    // The id is worth something only once the replicas know the session.
    answer_change("200 " + session_->id + "\r\n", out);
    return;
  }
  if (words.count != 2) return out.append("400 Too many arguments\r\n");
  // Its own id, which the client knows; compared like any other all the same.
  if (constant_time_equal(words[1], session_->id)) return out.append("200 Resumed\r\n");
  bool in_use;
  {
    std::lock_guard lock(session_->mutex);
    in_use = !session_->held.empty();
  }
  std::shared_ptr<locks::Session> resumed =
      in_use ? nullptr : service().resume_session(words[1], context_.session_client);
  if (!resumed) return out.append("403 Cannot resume\r\n");
  service().discard_session(session_);
  session_ = std::move(resumed);
  answer_change("200 Resumed\r\n", out);
}

void LockServiceProtocol::set_timeout(const Words& words, OutputQueue& out) {
  uint64_t millis;
  if (words.count != 2 || !parse_u64(words[1], &millis) || millis > kMaxGraceMs) {
    return out.append("400 Bad timeout\r\n");
  }
  service().set_grace(session_, static_cast<int64_t>(millis));
  answer_change("200 Timeout set\r\n", out);
}

void LockServiceProtocol::stats(const Words& words, OutputQueue& out) {
  if (words.count >= 2 && words[1] == "locks") {
    if (words.count > 3) return out.append("400 Too many arguments\r\n");
    out.append("200 LOCKS\r\n");
    for (const locks::LockInfo& lock : service().list(words.count == 3 ? words[2] : "")) {
      out.append("LOCK ");
      out.append(lock.name);
      out.append(" ");
      out.append(lock.session);
      out.append(" ");
      out.append_number(static_cast<uint64_t>(lock.held_ms));
      out.append(" ");
      out.append_number(lock.waiters);
      out.append(" ");
      out.append_number(lock.token);
      // Last, so that readers of the five fields before it go on working.
      out.append(" ");
      if (!lock.attached) {
        out.append("detached");  // in its grace period
      } else {
        out.append(lock.client.address.empty() ? "-" : lock.client.address);
      }
      out.append("\r\n");
    }
    return out.append("END\r\n");
  }
  if (words.count != 1) return out.append("400 Unknown stats group\r\n");
  locks::ServiceStats stats = service().stats();
  auto stat = [&out](std::string_view name, uint64_t value) {
    out.append("STAT ");
    out.append(name);
    out.append(" ");
    out.append_number(value);
    out.append("\r\n");
  };
  out.append("200 STATS\r\n");
  stat("clients", stats.sessions - stats.sessions_in_grace);
  stat("locks", stats.locks);
  stat("monitoring", 0);
  stat("waiters", stats.waiters);
  stat("sessions_in_grace", stats.sessions_in_grace);
  stat("grants", stats.grants);
  stat("timeouts", stats.timeouts);
  stat("limit_refusals", stats.limit_refusals);
  out.append("END\r\n");
}

void LockServiceProtocol::connection_closed(core::CloseReason reason) {
  closed_ = true;
  self_.reset();  // grants in flight now give their lock back
  if (wait_) {
    context_.reactor.cancel_timer(wait_timer_);
    service().cancel_wait(*wait_, false);
    wait_.reset();
  }
  std::vector<std::string> names;
  int64_t grace_before = 0;
  bool dead = reason == core::CloseReason::kDeadPeer;
  if (watched() || dead) {
    std::lock_guard lock(session_->mutex);
    names.assign(session_->held.begin(), session_->held.end());
    grace_before = session_->grace_ms;
  }
  // Reported before the release, which may grant them to waiters at once.
  if (grace_before <= 0) {
    for (const std::string& name : names)
      report("lock_release", name, "status=released reason=disconnect");
  }
  uint64_t detachment;
  int64_t grace_ms = service().detach(session_, &detachment);
  // Nobody else tells the operator whose locks a vanished client leaves.
  LOG_IF(INFO, dead) << "lock service: session " << session_->public_id()
                     << " lost its connection (the client stopped answering); its "
                     << names.size() << " locks "
                     << (grace_ms > 0 ? "end in " + std::to_string(grace_ms) +
                                            " ms unless it resumes"
                                      : std::string("are released"));
  if (grace_ms > 0) {
    if (!names.empty()) {
      report("session_detach", "",
             "grace_ms=" + std::to_string(grace_ms) + " locks=" + std::to_string(names.size()) +
                 (dead ? " reason=dead_peer" : ""));
    }
    // Whoever watches then hears of the locks the grace let go; the
    // connection is gone, so the timer keeps a copy of who it was.
    context_.reactor.add_timer(grace_ms, [service = context_.service, session = session_,
                                          detachment, watch = context_.watch,
                                          client = context_.client ? *context_.client : core::ClientInfo{}] {
      std::vector<std::string> held;
      if (watch && watch->watching(core::kWatchLocks)) {
        std::lock_guard lock(session->mutex);
        if (!session->attached && session->detachments == detachment)
          held.assign(session->held.begin(), session->held.end());
      }
      service->expire(session, detachment);
      for (const std::string& name : held) {
        watch->lock_service_event(client, "lock_release", name,
                                  "status=released reason=grace_expired", session->public_id());
      }
    });
  }
}

void LockServiceProtocol::report(std::string_view type, std::string_view name,
                                 std::string_view details) {
  if (!watched()) return;
  context_.watch->lock_service_event(*context_.client, type, name, details, session_->public_id());
}

std::vector<std::string> LockServiceProtocol::held_names() const {
  std::lock_guard lock(session_->mutex);
  return {session_->held.begin(), session_->held.end()};
}

}  // namespace lockcached::protocol
