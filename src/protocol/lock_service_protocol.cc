#include "lockcached/protocol/lock_service_protocol.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <mutex>
#include <string>
#include <utility>

#include "lockcached/core/verbosity.h"
#include "lockcached/net/endpoint.h"

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

// "200 Acquired TOKEN\r\n" in `buffer`, without a heap string: every grant
// writes one.
std::string_view acquired_reply(uint64_t token, std::array<char, 40>& buffer) {
  constexpr std::string_view kHead = "200 Acquired ";
  char* end = std::copy(kHead.begin(), kHead.end(), buffer.data());
  end = std::to_chars(end, buffer.data() + buffer.size() - 2, token).ptr;
  *end++ = '\r';
  *end++ = '\n';
  return {buffer.data(), static_cast<size_t>(end - buffer.data())};
}

// The request as -vv logs it: without a session id's secret, which would
// let whoever reads the log take the session over.
std::string loggable(std::string_view line, const Words& words) {
  if (words.count >= 1 && words[0] == "auth") return "auth (hidden)";
  if (words.count < 2 || words[0] != "conn_id") return std::string(line);
  std::string_view shown = locks::public_session_id(words[1]);
  return "conn_id " + std::string(shown) + (shown.size() < words[1].size() ? "-<secret>" : "");
}

// Who may run a command.
enum class Access : uint8_t {
  kChanges,  // changes the locks: the leader's to make, never a replica's
  kReads,    // served on a replica too, once authenticated
  kAnyone,   // served before authenticating too
};

}  // namespace

LockServiceProtocol::LockServiceProtocol(LockServiceContext context)
    : context_(std::move(context)),
      auth_(context_.authenticator),
      self_(std::make_shared<LockServiceProtocol*>(this)) {
  // With --auth_file, only once the client said who it is: a session is
  // state (in a cluster, entries in every member's log) that only users
  // may make.
  if (!auth_.required()) open_session();
}

void LockServiceProtocol::open_session() {
  locks::Change open;
  open.kind = locks::ChangeKind::kOpen;
  open.client = client();
  OutputQueue unused;  // opening replies nothing
  submit(std::move(open), unused);
}

LockServiceProtocol::~LockServiceProtocol() {
  if (!closed_) connection_closed(core::CloseReason::kNormal);
}

size_t LockServiceProtocol::consume(std::string_view input, OutputQueue& out) {
  size_t pos = 0;
  while (pos < input.size() && !close_ && !blocked() && !has_unfinished_work()) {
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
    // The replies a client has not read are bounded as on the cache port
    // (`stats locks` can be megabytes): the rest waits until it read some.
    if (!budget_.take(out)) break;
    execute(input.substr(pos, end - pos), out);
    pos = newline + 1;
  }
  return close_ ? input.size() : pos;
}

// One command's row: its name, its handler and who may run it.
struct LockServiceProtocol::Command {
  std::string_view name;
  void (LockServiceProtocol::*handler)(const Words& words, OutputQueue& out);
  Access access = Access::kChanges;  // deny by default: a replica refuses it
};

const LockServiceProtocol::Command* LockServiceProtocol::find_command(std::string_view name) {
  using L = LockServiceProtocol;
  static constexpr Command kCommands[] = {
      {"lock", &L::lock},
      {"unlock", &L::unlock},
      {"unlock_all", &L::unlock_all},
      {"conn_id", &L::conn_id},
      {"set_timeout", &L::set_timeout},
      {"stats", &L::stats, Access::kReads},
      {"cluster", &L::cluster, Access::kReads},  // a Raft cluster's members: its leader decides
      {"auth", &L::auth, Access::kAnyone},       // a client authenticates on a replica too
      {"quit", &L::quit, Access::kAnyone},
  };
  for (const Command& command : kCommands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

void LockServiceProtocol::execute(std::string_view line, OutputQueue& out) {
  Words words = split_words(line);
  // -vv: every request line after the connection's id, as the cache's;
  // never a password or a session's secret.
  LOCKCACHED_VLOG(2) << '<' << client().id << ' ' << escape_for_log(loggable(line, words));
  const Command* command = words.count > 0 ? find_command(words[0]) : nullptr;
  Access access = command != nullptr ? command->access : Access::kChanges;
  // --auth_file: nothing but `auth` and `quit` before authenticating.
  if (auth_.required() && access != Access::kAnyone) [[unlikely]] {
    return out.append("401 Authentication required\r\n");
  }
  if (words.count == 0) return out.append("400 Unknown command\r\n");
  if (access != Access::kChanges) return (this->*command->handler)(words, out);
  // Acquire: a node that stopped being a replica retired its service
  // first, so this sees that the connection's service is stale.
  if (context_.read_only && context_.read_only->load(std::memory_order_acquire)) {
    out.append("503 ");
    out.append(kReadOnlyReason);
    return out.append("\r\n");
  }
  if (service().retired()) {
    close_ = true;  // its sessions live elsewhere now: the client must reconnect
    return;
  }
  if (command == nullptr) return out.append("400 Unknown command\r\n");
  if (!session_) {
    // A cluster member that did not lead when this connection came: every
    // change belongs to the leader.
    out.append("503 not leader: ");
    out.append(not_leader_);
    return out.append("\r\n");
  }
  (this->*command->handler)(words, out);
}

void LockServiceProtocol::quit(const Words&, OutputQueue& out) {
  out.append("200 Bye\r\n");
  close_ = true;
}

void LockServiceProtocol::unlock_all(const Words& words, OutputQueue& out) {
  if (words.count != 1) return out.append("400 unlock_all takes no arguments\r\n");
  // Reported first: a waiter may be granted a lock as soon as it is free.
  if (watched()) {
    for (const std::string& name : held_names())
      report("lock_release", name, "status=released reason=unlock_all");
  }
  locks::Change release;
  release.kind = locks::ChangeKind::kReleaseAll;
  release.session = session_;
  submit(std::move(release), out);
}

// `cluster add ID IPV4:PORT`, `cluster remove ID`, `cluster transfer [ID]`:
// the leader changes its cluster's members; the reply comes once the new
// configuration is committed (docs/high-availability.md, "Membership").
void LockServiceProtocol::cluster(const Words& words, OutputQueue& out) {
  using Kind = consensus::MembershipChange::Kind;
  if (!context_.change_members) return out.append("400 Not a cluster member\r\n");
  consensus::MembershipChange change;
  std::string_view verb = words.count >= 2 ? words[1] : "";
  size_t arguments = verb == "add" ? 4 : verb == "remove" ? 3 : 2;
  if (verb == "add") change.kind = Kind::kAdd;
  if (verb == "remove") change.kind = Kind::kRemove;
  if (verb == "transfer") change.kind = Kind::kTransfer;
  bool shaped = (verb == "add" || verb == "remove" || verb == "transfer") &&
                (words.count == arguments || (verb == "transfer" && words.count == 3));
  if (!shaped) {
    return out.append(
        "400 Usage: cluster add ID IPV4:PORT | cluster remove ID | "
        "cluster transfer [ID]\r\n");
  }
  if (words.count >= 3) {
    std::string_view id = words[2];
    auto [end, error] = std::from_chars(id.data(), id.data() + id.size(), change.id);
    if (error != std::errc() || end != id.data() + id.size() || change.id == 0) {
      return out.append("400 A node id is a number from 1\r\n");
    }
  }
  if (change.kind == Kind::kAdd) {
    change.address = std::string(words[3]);
    // As --cluster takes it: no name service decides who is a member.
    std::optional<net::Endpoint> address = net::parse_endpoint(change.address);
    if (!address || address->family != net::Endpoint::Family::kIpv4 || address->port == 0) {
      return out.append("400 The address must be IPV4:PORT\r\n");
    }
  }
  changing_members_ = true;
  context_.change_members(change, client().address,
                          [reactor = &context_.reactor, self = std::weak_ptr(self_),
                           kind = change.kind](consensus::MembershipResult result) {
                            reactor->post([self, kind, result = std::move(result)] {
                              if (auto alive = self.lock())
                                (*alive)->on_members_changed(kind, result);
                            });
                          });
}

// Where a 503 sends this client: "HOST:PORT", or "election" while there is
// no leader. A client that came over TLS can speak only TLS: the leader's
// TLS port, where it has one (where it has none, the failed handshake
// there says what is wrong).
std::string LockServiceProtocol::leader_for_client(const std::string& plain,
                                                   const std::string& tls) const {
  if (plain.empty()) return "election";
  return context_.over_tls && !tls.empty() ? tls : plain;
}

void LockServiceProtocol::on_members_changed(consensus::MembershipChange::Kind kind,
                                             const consensus::MembershipResult& result) {
  using Status = consensus::MembershipResult::Status;
  using Kind = consensus::MembershipChange::Kind;
  changing_members_ = false;
  OutputQueue& out = context_.out;
  switch (result.status) {
    case Status::kDone:
      out.append(kind == Kind::kAdd      ? "200 Added\r\n"
                 : kind == Kind::kRemove ? "200 Removed\r\n"
                                         : "200 Transferred\r\n");
      break;
    case Status::kNotLeader:
      out.append("503 not leader: " + leader_for_client(result.detail, result.leader_tls) +
                 "\r\n");
      break;
    case Status::kRefused:
      out.append("403 " + result.detail + "\r\n");
      break;
    case Status::kFailed:
      out.append("409 " + result.detail + "\r\n");
      break;
  }
  // A transfer or a removal that was done may have ended this node's
  // leadership, whose lock-service connections close; this one was spared
  // for its reply. One that was not done changed nothing: the client may
  // ask again here (after "503 not leader: election", the CLI does).
  if (kind != Kind::kAdd && result.status == Status::kDone) close_ = true;
  if (context_.on_async_reply) context_.on_async_reply();
}

// 401 as HTTP's Unauthorized; the third refusal closes the connection.
void LockServiceProtocol::auth(const Words& words, OutputQueue& out) {
  if (!auth_.enabled()) return out.append("400 Authentication not enabled\r\n");
  if (words.count != 3) return out.append("400 auth takes USER PASSWORD\r\n");
  bool first = auth_.required();
  core::AuthResult result = auth_.attempt(words[1], words[2]);
  if (result == core::AuthResult::kAccepted) {
    out.append("200 Authenticated\r\n");
    if (first) open_session();
    return;
  }
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
  locks::Change acquire;
  acquire.kind = locks::ChangeKind::kAcquire;
  acquire.session = session_;
  acquire.name.assign(name);
  acquire.wait_ms = static_cast<int64_t>(std::ceil(seconds * 1000));
  // Its timeout ends this connection's wait only: the session may wait
  // again on another connection by then (coordinators' wait timers).
  acquire.detachment = attachment_;
  submit(std::move(acquire), out);
}

void LockServiceProtocol::submit(locks::Change&& change, OutputQueue& out) {
  pending_ = change.kind;
  pending_name_ = change.name;
  pending_wait_ms_ = change.wait_ms;
  locks::Coordinator& coordinator = *context_.coordinator;
  bool later = !coordinator.answers_at_once() ||
               (change.kind == locks::ChangeKind::kAcquire && change.wait_ms > 0);
  locks::Outcome outcome = coordinator.submit(std::move(change), later ? answer() : nullptr);
  if (outcome.status != locks::OutcomeStatus::kLater) finish(outcome, out);
}

// Runs on whichever thread decided: hop to the connection's own. If the
// connection is gone by then, nobody learns of the outcome: a session
// opened or resumed for it detaches (its grace then runs as for any
// disconnect). A wait's grant needs nothing here: the connection's end
// named the wait in its cancel, which gives such a grant back in the order
// of the changes, before any resume (LockService::give_back_unheard_grant).
locks::Answer LockServiceProtocol::answer() {
  return [reactor = &context_.reactor, self = std::weak_ptr(self_),
          coordinator = context_.coordinator](const locks::Outcome& outcome) {
    // `outcome = outcome`: a plain copy (one captured by name would be a
    // const member, copied again instead of moved into the task).
    reactor->post([self, coordinator, outcome = outcome] {
      if (auto alive = self.lock()) return (*alive)->on_answer(outcome);
      if (outcome.status != locks::OutcomeStatus::kDone || !outcome.session) return;
      // It names the attachment it undoes: the client may have resumed the
      // session on another connection meanwhile, which keeps it.
      locks::Change undo;
      undo.kind = locks::ChangeKind::kDetach;
      undo.session = outcome.session;
      undo.detachment = outcome.attachment;
      coordinator->submit(std::move(undo), nullptr);
    });
  };
}

void LockServiceProtocol::on_answer(const locks::Outcome& outcome) {
  if (closed_ || !pending_) return;
  finish(outcome, context_.out);
  context_.on_async_reply();
}

void LockServiceProtocol::finish(const locks::Outcome& outcome, OutputQueue& out) {
  locks::ChangeKind kind = *pending_;
  if (kind == locks::ChangeKind::kAcquire && outcome.status != locks::OutcomeStatus::kNotLeader &&
      outcome.status != locks::OutcomeStatus::kLost) {
    return finish_acquire(outcome, out);
  }
  pending_.reset();
  waiting_ = false;
  bool confirming = std::exchange(confirming_, false);
  switch (outcome.status) {
    case locks::OutcomeStatus::kNotLeader:
      not_leader_ = leader_for_client(outcome.leader, outcome.leader_tls);
      if (kind == locks::ChangeKind::kOpen) return;  // said at the first change asked for
      out.append("503 not leader: ");
      out.append(not_leader_);
      return out.append("\r\n");
    case locks::OutcomeStatus::kLost:
      close_ = true;  // it may or may not have happened: the client must look
      return;
    default:
      break;
  }
  bool done = outcome.status == locks::OutcomeStatus::kDone;
  switch (kind) {
    case locks::ChangeKind::kOpen:
      session_ = outcome.session;
      attachment_ = outcome.attachment;
      return;
    case locks::ChangeKind::kRelease:
      if (!done) return out.append("403 Not held\r\n");
      confirm("200 Released\r\n", out);
      return;
    case locks::ChangeKind::kReleaseAll:
      confirm("200 Released\r\n", out);
      return;
    case locks::ChangeKind::kResume:
      if (!done) return out.append("403 Cannot resume\r\n");
      session_ = outcome.session;
      attachment_ = outcome.attachment;
      confirm("200 Resumed\r\n", out);
      return;
    case locks::ChangeKind::kSetGrace:
      confirm(confirming ? "200 Resumed\r\n" : "200 Timeout set\r\n", out);
      return;
    default:
      return;
  }
}

void LockServiceProtocol::finish_acquire(const locks::Outcome& outcome, OutputQueue& out) {
  std::string_view name = pending_name_;
  switch (outcome.status) {
    case locks::OutcomeStatus::kQueued:
      waiting_ = true;  // the grant or the timeout answers
      if (watched()) report("lock_wait", name, "timeout_ms=" + std::to_string(pending_wait_ms_));
      return;
    case locks::OutcomeStatus::kLimited:
      report("lock_refused", name, limit_name(outcome.limit));
      out.append(limit_reply(outcome.limit));
      break;
    case locks::OutcomeStatus::kBusy:
      report(waiting_ ? "lock_timeout" : "lock_busy", name, "");
      out.append("409 Unavailable\r\n");
      break;
    default:
      if (watched()) report("lock_grant", name, token_field(outcome.token));
      pending_.reset();
      waiting_ = false;
      std::array<char, 40> reply;
      confirm(acquired_reply(outcome.token, reply), out);
      return;
  }
  pending_.reset();
  waiting_ = false;
}

// A demoted node retired the service the change was made on: its client
// must not count on it, and reconnects to find the new master.
void LockServiceProtocol::confirm(std::string_view reply, OutputQueue& out) {
  if (service().retired()) {
    close_ = true;
    return;
  }
  out.append(reply);
}

void LockServiceProtocol::unlock(const Words& words, OutputQueue& out) {
  if (words.count < 2) return out.append("400 Missing lock name\r\n");
  if (words.count > 2) return out.append("400 Too many arguments\r\n");
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
  locks::Change release;
  release.kind = locks::ChangeKind::kRelease;
  release.session = session_;
  release.name.assign(words[1]);
  submit(std::move(release), out);
}

void LockServiceProtocol::conn_id(const Words& words, OutputQueue& out) {
  if (words.count == 1) {
    confirm("200 " + session_->id + "\r\n", out);
    return;
  }
  if (words.count != 2) return out.append("400 Too many arguments\r\n");
  // Its own id, which the client knows (compared like any other all the
  // same): lockcached-cli's ping, whose 200 says the session and its locks
  // are still the client's. A single server knows at once. A cluster member
  // answers once the log commits a change that alters nothing (the grace the
  // session has): a leader that lost its majority, and whose sessions a new
  // leader may have ended, can no longer confirm one (a paused leader's
  // queued pings were answered 200 after a new leader gave their locks away).
  if (constant_time_equal(words[1], session_->id)) {
    if (context_.coordinator->answers_at_once()) return out.append("200 Resumed\r\n");
    locks::Change same;
    same.kind = locks::ChangeKind::kSetGrace;
    same.session = session_;
    {
      std::lock_guard lock(session_->mutex);
      same.grace_ms = session_->grace_ms;
    }
    confirming_ = true;
    return submit(std::move(same), out);
  }
  locks::Change resume;
  resume.kind = locks::ChangeKind::kResume;
  resume.session = session_;
  resume.id.assign(words[1]);
  resume.client = client();
  submit(std::move(resume), out);
}

void LockServiceProtocol::set_timeout(const Words& words, OutputQueue& out) {
  uint64_t millis;
  if (words.count != 2 || !parse_u64(words[1], &millis) || millis > kMaxGraceMs) {
    return out.append("400 Bad timeout\r\n");
  }
  locks::Change grace;
  grace.kind = locks::ChangeKind::kSetGrace;
  grace.session = session_;
  grace.grace_ms = static_cast<int64_t>(millis);
  submit(std::move(grace), out);
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
        out.append(lock.client.address.known() ? net::address_text(lock.client.address) : "-");
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
  self_.reset();  // answers still on their way undo what they bring
  // A wait not answered yet may be queued when its change is made (a
  // cluster makes it later): cancelled too, after it in the log, so that a
  // grant never reaches a session whose client no longer waits for it.
  bool was_waiting = waiting_ || (pending_ == locks::ChangeKind::kAcquire && pending_wait_ms_ > 0);
  pending_.reset();
  waiting_ = false;
  if (!session_) return;
  if (was_waiting) {
    // Named: if the wait was granted already, its client never heard of
    // it, and the lock goes back (LockService::give_back_unheard_grant).
    locks::Change cancel;
    cancel.kind = locks::ChangeKind::kCancelWait;
    cancel.session = session_;
    cancel.name = pending_name_;
    cancel.detachment = attachment_;
    context_.coordinator->submit(std::move(cancel), nullptr);
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
  locks::Change detach;
  detach.kind = locks::ChangeKind::kDetach;
  detach.session = session_;
  detach.detachment = attachment_;
  // When the grace runs out, whoever watches hears of the locks it let go;
  // the connection is gone by then, so the answer keeps a copy of who it was.
  locks::Answer expired;
  if (context_.watch && context_.client) {
    expired = [watch = context_.watch, client = *context_.client,
               session = std::string(session_->public_id())](const locks::Outcome& outcome) {
      if (!watch->watching(core::kWatchLocks)) return;
      for (const std::string& name : outcome.released) {
        watch->lock_service_event(client, "lock_release", name,
                                  "status=released reason=grace_expired", session);
      }
    };
  }
  locks::Outcome outcome = context_.coordinator->submit(std::move(detach), std::move(expired));
  // A cluster decides later; its grace is the session's, unless a limit ends it.
  int64_t grace_ms;
  if (outcome.status != locks::OutcomeStatus::kLater) {
    grace_ms = outcome.grace_ms;
  } else {
    std::lock_guard lock(session_->mutex);
    grace_ms = session_->grace_ms;
  }
  // Nobody else tells the operator whose locks a vanished client leaves.
  LOG_IF(INFO, dead) << "lock service: session " << session_->public_id()
                     << " lost its connection (the client stopped answering); its " << names.size()
                     << " locks "
                     << (grace_ms > 0
                             ? "end in " + std::to_string(grace_ms) + " ms unless it resumes"
                             : std::string("are released"));
  if (grace_ms > 0 && !names.empty()) {
    report("session_detach", "",
           "grace_ms=" + std::to_string(grace_ms) + " locks=" + std::to_string(names.size()) +
               (dead ? " reason=dead_peer" : ""));
  }
}

void LockServiceProtocol::report(std::string_view type, std::string_view name,
                                 std::string_view details) {
  if (!watched() || !session_) return;
  context_.watch->lock_service_event(*context_.client, type, name, details, session_->public_id());
}

std::vector<std::string> LockServiceProtocol::held_names() const {
  std::lock_guard lock(session_->mutex);
  return {session_->held.begin(), session_->held.end()};
}

}  // namespace lockcached::protocol
