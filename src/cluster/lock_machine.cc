#include "lockcached/cluster/lock_machine.h"

#include <chrono>
#include <optional>
#include <random>
#include <vector>

#include <glog/logging.h>

#include "lockcached/core/verbosity.h"

namespace lockcached::cluster {
namespace {

uint64_t random_incarnation() {
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

// -vv's words for a change's kind and outcome. Switches without a default:
// a kind or status added later is a -Wswitch warning (an error with
// LOCKCACHED_WERROR) until it is named here.
const char* kind_name(locks::ChangeKind kind) {
  using Kind = locks::ChangeKind;
  switch (kind) {
    case Kind::kOpen:
      return "open";
    case Kind::kResume:
      return "resume";
    case Kind::kDetach:
      return "detach";
    case Kind::kSetGrace:
      return "grace";
    case Kind::kAcquire:
      return "acquire";
    case Kind::kCancelWait:
      return "cancel";
    case Kind::kRelease:
      return "release";
    case Kind::kReleaseAll:
      return "release_all";
    case Kind::kExpire:
      return "expire";
    case Kind::kTermStart:
      return "term_start";
  }
  return "?";  // a value no enumerator names (a malformed entry)
}

const char* status_name(locks::OutcomeStatus status) {
  using Status = locks::OutcomeStatus;
  switch (status) {
    case Status::kDone:
      return "done";
    case Status::kRefused:
      return "refused";
    case Status::kBusy:
      return "busy";
    case Status::kLimited:
      return "limited";
    case Status::kQueued:
      return "queued";
    case Status::kNotLeader:
      return "not leader";
    case Status::kLost:
      return "lost";
    case Status::kLater:
      return "later";
  }
  return "?";
}

// The changes that name a session; the others open one, or concern all.
bool names_session(locks::ChangeKind kind) {
  return kind != locks::ChangeKind::kOpen && kind != locks::ChangeKind::kTermStart;
}

}  // namespace

int64_t LockMachine::EntryClock::now_ms() const {
  int64_t stamp = stamp_ms_.load(std::memory_order_relaxed);
  if (stamp != 0) return stamp;
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

LockMachine::LockMachine(locks::LockLimits limits, uint64_t node_id, Addresses addresses,
                         std::function<void()> role_changed, int64_t term_grace_floor_ms)
    : Coordinator(std::make_shared<locks::LockService>(limits, 0, clock_)),
      node_id_(node_id),
      addresses_(std::move(addresses)),
      limits_(limits),
      term_grace_floor_ms_(term_grace_floor_ms),
      incarnation_(random_incarnation()),
      role_changed_(std::move(role_changed)) {}

LockMachine::~LockMachine() = default;

LockMachine::Addresses LockMachine::leader_addresses() const {
  std::lock_guard lock(mutex_);
  if (status_.leader_id == 0 || status_.leader_id != announced_.node) return {};
  return announced_addresses_;
}

locks::Outcome LockMachine::submit(locks::Change&& change, locks::Answer answer) {
  LoggedChange logged{{node_id_, incarnation_, 0}, std::move(change)};
  locks::Change& logged_change = logged.change;
  // The log names a session by its serial: every member has its own object.
  if (logged_change.session) logged_change.serial = logged_change.session->public_id();
  logged_change.session.reset();
  // Drawn here, once: every member must give the session the same id.
  if (logged_change.kind == locks::ChangeKind::kOpen && logged_change.id.empty()) {
    logged_change.id = locks::make_session_secret();
  }
  // A detach is answered only when its grace runs out (grace_ends_).
  bool detach = logged_change.kind == locks::ChangeKind::kDetach;
  bool answered = answer && !detach;
  if (answered) {
    logged.origin.request = next_request_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    pending_[logged.origin.request] = {std::move(answer), logged_change.wait_ms > 0};
  } else if (answer) {
    std::lock_guard lock(mutex_);
    grace_ends_[logged.change.serial] = std::move(answer);
  }
  consensus::RaftNode* node = this->node();
  if (!node || !node->propose(encode(logged))) {
    {
      std::lock_guard lock(mutex_);
      if (answered) pending_.erase(logged.origin.request);
      if (detach) grace_ends_.erase(logged.change.serial);
    }
    locks::Outcome refused;
    refused.status = locks::OutcomeStatus::kNotLeader;
    Addresses leader = leader_addresses();
    refused.leader = leader.lock;
    refused.leader_tls = leader.lock_tls;
    return refused;
  }
  locks::Outcome later;
  later.status = locks::OutcomeStatus::kLater;
  return later;
}

void LockMachine::apply(uint64_t index, uint64_t stamp_ms,
                        std::span<const std::string_view> commands) {
  service_->raise_token_floor(index << kTokenShift);
  clock_.set(static_cast<int64_t>(stamp_ms));
  for (std::string_view command : commands) {
    std::optional<LoggedChange> logged = decode_change(command);
    if (!logged) {
      // Every member skips it alike.
      LOG(ERROR) << "cluster: a change in entry " << index << " is malformed; skipped";
      continue;
    }
    apply_change(*logged);
  }
  clock_.set(0);
}

void LockMachine::apply_change(const LoggedChange& logged) {
  locks::Change change = logged.change;
  bool mine = from_here(logged.origin);
  uint64_t request = logged.origin.request;
  if (names_session(change.kind)) {
    change.session = service_->find_session(change.serial);
    if (!change.session) {
      // Ended before its change came up (a new leader's first change
      // detached it, and its grace ran out): its connection must go.
      locks::Outcome gone;
      gone.status = locks::OutcomeStatus::kLost;
      if (mine) answer(request, gone, true);
      return;
    }
  }
  // A grant reaches the connection that waits only on the member it asked.
  locks::GrantCallback on_grant = [](uint64_t) {};
  if (mine && change.kind == locks::ChangeKind::kAcquire && change.wait_ms > 0) {
    on_grant = [this, request](uint64_t token) {
      auto timer = wait_timers_.find(request);
      if (timer != wait_timers_.end()) {
        node()->scheduler().cancel(timer->second);
        timers_.erase(timer->second);
        wait_timers_.erase(timer);
      }
      locks::Outcome granted;
      granted.token = token;
      answer(request, granted, true);
    };
  }
  locks::Outcome outcome = service_->apply(change, std::move(on_grant));
  // -vv: what every member applies, in the log's order.
  LOCKCACHED_VLOG(2) << "cluster: " << kind_name(change.kind)
                     << (names_session(change.kind) ? " session " + change.serial : "")
                     << (change.name.empty() ? "" : " " + change.name) << ": "
                     << status_name(outcome.status)
                     << (outcome.token ? " token " + std::to_string(outcome.token) : "")
                     << (mine ? " (asked here)" : "");
  end_grace(change, outcome);
  if (change.kind == locks::ChangeKind::kTermStart) {
    std::lock_guard lock(mutex_);
    announced_ = logged.origin;
    announced_addresses_ = {change.id, change.name, change.lock_tls_address};
  }
  // The leader's timers; every member's state is the same without them.
  if (leading_) {
    if (change.kind == locks::ChangeKind::kDetach && outcome.grace_ms > 0) {
      arm_expiry(change.serial, outcome.detachment, outcome.grace_ms);
    }
    if (mine && outcome.status == locks::OutcomeStatus::kQueued) {
      arm_timeout(change.serial, change.detachment, request, change.wait_ms);
    }
    if (mine && change.kind == locks::ChangeKind::kTermStart) {
      for (const locks::LockService::Adopted& in_grace : outcome.in_grace) {
        arm_expiry(std::string(in_grace.session->public_id()), in_grace.detachment,
                   in_grace.grace_ms);
      }
      LOG(INFO) << "cluster: leading; " << outcome.in_grace.size()
                << " lock-service sessions in their grace";
    }
  }
  if (!mine) return;
  if (change.kind == locks::ChangeKind::kCancelWait) {
    // A timeout that came first ends its wait; one that came after the grant
    // finds nothing to cancel, and the grant answered already.
    if (change.timed_out && outcome.status == locks::OutcomeStatus::kDone) {
      wait_timers_.erase(request);
      locks::Outcome timed_out;
      timed_out.status = locks::OutcomeStatus::kBusy;
      answer(request, timed_out, true);
    }
    return;
  }
  answer(request, outcome, outcome.status != locks::OutcomeStatus::kQueued);
}

// On every member, so that the member whose connection detached the
// session tells its watchers, whoever leads when the grace runs out.
void LockMachine::end_grace(const locks::Change& change, const locks::Outcome& outcome) {
  using Kind = locks::ChangeKind;
  bool done = outcome.status == locks::OutcomeStatus::kDone;
  std::string serial;
  if (change.kind == Kind::kExpire && done) serial = change.serial;
  if (change.kind == Kind::kResume && done) serial = locks::public_session_id(change.id);
  // A session that kept no grace ended with its connection.
  if (change.kind == Kind::kDetach && done && outcome.grace_ms <= 0) serial = change.serial;
  if (serial.empty()) return;
  locks::Answer told;
  {
    std::lock_guard lock(mutex_);
    auto found = grace_ends_.find(serial);
    if (found == grace_ends_.end()) return;
    told = std::move(found->second);
    grace_ends_.erase(found);
  }
  if (change.kind == Kind::kExpire) told(outcome);
}

void LockMachine::answer(uint64_t request, const locks::Outcome& outcome, bool last) {
  if (request == 0) return;
  locks::Answer answer;
  {
    std::lock_guard lock(mutex_);
    auto found = pending_.find(request);
    if (found == pending_.end()) return;
    answer = last ? std::move(found->second.answer) : found->second.answer;
    if (last) pending_.erase(found);
  }
  answer(outcome);
}

void LockMachine::propose(const locks::Change& change, uint64_t request) {
  if (consensus::RaftNode* node = this->node())
    node->propose(encode(LoggedChange{{node_id_, incarnation_, request}, change}));
}

void LockMachine::arm_expiry(const std::string& serial, uint64_t detachment, int64_t grace_ms) {
  auto id = std::make_shared<timing::Scheduler::TimerId>();
  *id = node()->scheduler().after(grace_ms, [this, serial, detachment, id] {
    timers_.erase(*id);
    locks::Change expire = locks::Change::grace_over(detachment);
    expire.serial = serial;
    propose(expire);
  });
  timers_.insert(*id);
}

void LockMachine::arm_timeout(const std::string& serial, uint64_t attachment, uint64_t request,
                              int64_t wait_ms) {
  auto id = std::make_shared<timing::Scheduler::TimerId>();
  *id = node()->scheduler().after(wait_ms, [this, serial, attachment, request, id] {
    timers_.erase(*id);
    wait_timers_.erase(request);
    locks::Change cancel = locks::Change::wait_timed_out(attachment);
    cancel.serial = serial;
    propose(cancel, request);
  });
  timers_.insert(*id);
  wait_timers_[request] = *id;
}

void LockMachine::cancel_timers() {
  for (timing::Scheduler::TimerId id : timers_)
    node()->scheduler().cancel(id);
  timers_.clear();
  wait_timers_.clear();
}

// Leadership lost: what was proposed may or may not be committed by the
// next leader, so nobody is told it happened.
void LockMachine::fail_pending() {
  std::unordered_map<uint64_t, Pending> pending;
  {
    std::lock_guard lock(mutex_);
    pending.swap(pending_);
  }
  locks::Outcome lost;
  lost.status = locks::OutcomeStatus::kLost;
  for (auto& [request, waiting] : pending)
    waiting.answer(lost);
}

std::string LockMachine::snapshot() {
  Announcement announced;
  {
    std::lock_guard lock(mutex_);
    announced = {announced_, announced_addresses_.lock, announced_addresses_.replication,
                 announced_addresses_.lock_tls};
  }
  return encode(service_->export_state(), announced);
}

// The announcement comes back with the locks: a member that starts from a
// snapshot taken after the leader's first entry would otherwise know no
// leader's addresses until the next election (its 503s would say
// "election" and its cache would follow no master).
bool LockMachine::restore(std::string_view data) {
  std::optional<Announcement> announced;
  std::optional<locks::FullState> state = decode_state(data, &announced);
  if (!state || !service_->replace_state(*state)) {
    LOG(ERROR) << "cluster: a lock-service snapshot does not decode";
    return false;
  }
  if (announced) {  // an older snapshot leaves what this member knew
    std::lock_guard lock(mutex_);
    announced_ = announced->origin;
    announced_addresses_ = {announced->lock_address, announced->replication_address,
                            announced->lock_tls_address};
  }
  return true;
}

void LockMachine::on_status(const consensus::RaftStatus& status) {
  uint64_t leader_before;
  {
    std::lock_guard lock(mutex_);
    leader_before = status_.leader_id;
    status_ = status;
  }
  bool leads = status.role == consensus::Role::kLeader;
  // Led before, leads again in a later term, and the status poll missed the
  // step-down between: what the old term left must end all the same, and
  // the new term needs its own first entry.
  if (leads && leading_ && status.term != leading_term_) {
    leading_ = false;
    cancel_timers();
    fail_pending();
  }
  if (leads && !leading_) {
    leading_ = true;
    leading_term_ = status.term;
    locks::Change start;
    start.kind = locks::ChangeKind::kTermStart;
    start.id = addresses_.lock;
    start.name = addresses_.replication;
    start.lock_tls_address = addresses_.lock_tls;
    start.limits = limits_;
    start.grace_floor_ms = term_grace_floor_ms_;
    propose(start);
  } else if (!leads && leading_) {
    leading_ = false;
    cancel_timers();
    fail_pending();
  } else if (status.leader_id == leader_before) {
    return;  // a new term with the same leader, or a candidate's turn
  }
  role_changed_();
}

}  // namespace lockcached::cluster
