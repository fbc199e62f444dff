#include "lockcached/locks/lock_service.h"

#include <algorithm>
#include <functional>

#include "lockcached/locks/lock_change.h"

namespace lockcached::locks {
namespace {

// What a connection sends on its session's behalf once it is gone, or
// that may reach the session after it: its end (kDetach), its wait's end
// (kCancelWait), a grant it could not take back any more (kRelease).
bool from_connection_gone(ChangeKind kind) {
  return kind == ChangeKind::kDetach || kind == ChangeKind::kCancelWait ||
         kind == ChangeKind::kRelease;
}

// A session's attachment to a connection, numbered: every detach and every
// resume counts one more, so the number is the connection's own.
uint64_t attachment_of(Session& session) {
  std::lock_guard lock(session.mutex);
  return session.detachments + 1;
}

// 0 names no attachment: the change is the session's whoever sends it.
bool still_attached(Session& session, uint64_t attachment) {
  if (attachment == 0) return true;
  std::lock_guard lock(session.mutex);
  return session.attached && session.detachments + 1 == attachment;
}

}  // namespace

LockService::LockService(LockLimits limits, uint64_t token_floor, const timing::Clock& clock)
    : limits_(limits),
      clock_(clock),
      shards_(std::make_unique<Shard[]>(kShards)),
      next_token_(token_floor) {}

LockService::~LockService() = default;

LockService::Shard& LockService::shard_for(std::string_view name) const {
  return shards_[std::hash<std::string_view>{}(name) % kShards];
}

Outcome LockService::apply(const Change& change, GrantCallback on_grant) {
  Outcome outcome;
  const std::shared_ptr<Session>& session = change.session;
  if (from_connection_gone(change.kind) && !still_attached(*session, change.detachment)) {
    outcome.status = OutcomeStatus::kRefused;  // the session moved on: not this one's to end
    return outcome;
  }
  switch (change.kind) {
    case ChangeKind::kOpen:
      outcome.session = create_session(change.client, change.id);
      outcome.attachment = attachment_of(*outcome.session);
      break;
    case ChangeKind::kResume: {
      bool in_use;
      {
        std::lock_guard lock(session->mutex);
        in_use = !session->held.empty();
      }
      outcome.session = in_use ? nullptr : resume_session(change.id, change.client);
      if (!outcome.session) {
        outcome.status = OutcomeStatus::kRefused;
        break;
      }
      discard_session(session);
      outcome.attachment = attachment_of(*outcome.session);
      break;
    }
    case ChangeKind::kDetach:
      outcome.grace_ms = detach(session, &outcome.detachment);
      break;
    case ChangeKind::kSetGrace:
      set_grace(session, change.grace_ms);
      break;
    case ChangeKind::kAcquire: {
      Acquired acquired;
      if (change.wait_ms <= 0) {
        acquired = try_acquire(session, change.name);
      } else {
        auto ticket = std::make_shared<WaitTicket>();
        ticket->session = session;
        ticket->name = change.name;
        ticket->attachment = change.detachment;
        ticket->on_grant = std::move(on_grant);
        acquired = acquire_or_wait(ticket);
      }
      outcome.token = acquired.token;
      outcome.limit = acquired.limit;
      outcome.status = acquired.limit != Limit::kNone ? OutcomeStatus::kLimited
                       : acquired.granted             ? OutcomeStatus::kDone
                       : change.wait_ms > 0           ? OutcomeStatus::kQueued
                                                      : OutcomeStatus::kBusy;
      break;
    }
    case ChangeKind::kCancelWait: {
      // A connection that ends while it waits names the wait's lock: made
      // already (a cluster made it after the connection asked, or a release
      // granted it while the answer was on its way), it goes back. A
      // timeout never gives a grant back: it lost the race to it.
      // Only the wait of the connection that sends it (its attachment):
      // checked on the ticket itself, as still_attached above is a lock
      // scope of its own, and the session may have been resumed and be
      // waiting again on another connection by now.
      bool ended = cancel_session_wait(session, change.timed_out, change.detachment) ||
                   (!change.timed_out &&
                    give_back_unheard_grant(session, change.name, change.detachment));
      if (!ended) outcome.status = OutcomeStatus::kRefused;
      break;
    }
    case ChangeKind::kRelease:
      if (!release(session, change.name)) outcome.status = OutcomeStatus::kRefused;
      break;
    case ChangeKind::kReleaseAll:
      release_all(session);
      break;
    case ChangeKind::kExpire:
      outcome.released = expire(session, change.detachment);
      break;
    case ChangeKind::kTermStart:
      if (change.limits) limits_ = *change.limits;  // before the detaches, which count them
      start_term(&outcome.in_grace, change.grace_floor_ms);
      break;
  }
  return outcome;
}

std::shared_ptr<Session> LockService::find_session(std::string_view serial) const {
  std::lock_guard lock(sessions_mutex_);
  auto found = sessions_.find(std::string(serial));
  return found == sessions_.end() ? nullptr : found->second;
}

std::shared_ptr<Session> LockService::create_session(net::ClientInfo client, std::string secret) {
  if (secret.empty()) secret = make_session_secret();  // a system call: outside the lock
  std::lock_guard lock(sessions_mutex_);
  std::string serial = session_serial(++next_session_);
  auto session = std::make_shared<Session>(serial + '-' + secret);
  session->client = std::move(client);  // nobody else sees it yet
  sessions_.emplace(std::move(serial), session);
  return session;
}

std::shared_ptr<Session> LockService::resume_session(std::string_view id, net::ClientInfo client) {
  std::optional<SessionIdParts> asked = split_session_id(id);
  if (!asked) return nullptr;
  std::lock_guard lock(sessions_mutex_);
  auto found = sessions_.find(std::string(asked->serial));
  if (found == sessions_.end()) return nullptr;
  std::shared_ptr<Session> session = found->second;
  // An id of another shape (from a broken snapshot) has no secret to match.
  std::optional<SessionIdParts> own = split_session_id(session->id);
  if (!own || !constant_time_equal(own->secret, asked->secret)) return nullptr;
  std::lock_guard session_lock(session->mutex);
  if (session->attached) return nullptr;
  session->attached = true;
  session->client = std::move(client);
  ++session->detachments;  // the pending grace timer no longer applies
  --in_grace_;
  leave_empty_in_grace(*session);
  return session;
}

void LockService::discard_session(const std::shared_ptr<Session>& session) {
  std::lock_guard lock(sessions_mutex_);
  unregister_locked(*session);
}

int64_t LockService::detach(const std::shared_ptr<Session>& session, uint64_t* detachment,
                            int64_t grace_floor_ms) {
  int64_t grace;
  {
    std::lock_guard lock(sessions_mutex_);
    std::lock_guard session_lock(session->mutex);
    session->attached = false;
    session->client = {};
    *detachment = ++session->detachments;
    grace = session->grace_ms;
    if (!session->held.empty()) grace = std::max(grace, grace_floor_ms);
    if (grace > 0 && session->held.empty()) {
      if (limits_.max_empty_sessions_in_grace != 0 &&
          empty_in_grace_ >= limits_.max_empty_sessions_in_grace) {
        grace = 0;
      } else {
        ++empty_in_grace_;
        session->empty_in_grace = true;
      }
    }
    if (grace > 0) {
      ++in_grace_;
    } else {
      // Gone before the locks are: a resume in between would take over a
      // session whose locks go anyway (and count a grace never counted).
      unregister_locked(*session);
    }
  }
  if (grace <= 0) release_all(session);
  return grace;
}

std::vector<std::string> LockService::expire(const std::shared_ptr<Session>& session,
                                             uint64_t detachment) {
  std::vector<std::string> released;
  {
    std::lock_guard lock(sessions_mutex_);
    std::lock_guard session_lock(session->mutex);
    if (session->attached || session->detachments != detachment) return released;  // resumed
    released.assign(session->held.begin(), session->held.end());
    std::sort(released.begin(), released.end());  // as release_all lets them go
    ++session->detachments;  // expired once: a repeated call finds nothing to do
    unregister_locked(*session);
    --in_grace_;
    leave_empty_in_grace(*session);
  }
  release_all(session);
  return released;
}

void LockService::set_grace(const std::shared_ptr<Session>& session, int64_t grace_ms) {
  std::lock_guard session_lock(session->mutex);
  session->grace_ms = grace_ms;
}

// Only the session itself, never whatever has its serial now: replace_state
// registers new objects under the serials of old ones that a connection may
// still hold.
void LockService::unregister_locked(const Session& session) {
  auto found = sessions_.find(std::string(session.public_id()));
  if (found != sessions_.end() && found->second.get() == &session) sessions_.erase(found);
}

void LockService::leave_empty_in_grace(Session& session) {
  if (!session.empty_in_grace) return;
  session.empty_in_grace = false;
  --empty_in_grace_;
}

void LockService::take(Entry& entry, const std::shared_ptr<Session>& session, std::string_view name,
                       bool was_waiting, uint64_t wait_attachment) {
  grants_.fetch_add(1, std::memory_order_relaxed);
  entry.owner = session;
  entry.wait_attachment = wait_attachment;
  entry.token = next_token_.fetch_add(1, std::memory_order_relaxed) + 1;
  entry.acquired_ms = clock_.now_ms();
  held_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard session_lock(session->mutex);
    session->held.emplace(name);
    if (was_waiting) {
      --session->waits;  // the wait became a lock: same count
      session->wait.reset();
    }
  }
}

bool LockService::session_full(const Session& session) const {
  return limits_.max_locks_per_session != 0 &&
         session.held.size() + session.waits >= limits_.max_locks_per_session;
}

Limit LockService::admit_new_name(Session& session) {
  {
    std::lock_guard session_lock(session.mutex);
    if (session_full(session)) return Limit::kSession;
  }
  // A reservation, not a check: two shards creating names at once cannot
  // both take the last one.
  uint64_t names = names_.load(std::memory_order_relaxed);
  do {
    if (limits_.max_names != 0 && names >= limits_.max_names) return Limit::kNames;
  } while (!names_.compare_exchange_weak(names, names + 1, std::memory_order_relaxed));
  return Limit::kNone;
}

// Its holder asks for it again: granted, with its token, and its client
// knows it holds it now, so it is no grant to give back
// (give_back_unheard_grant).
LockService::Acquired LockService::asked_again(Entry& entry) {
  entry.wait_attachment = 0;
  return {true, entry.token};
}

LockService::Acquired LockService::refuse(Limit limit) {
  limit_refusals_.fetch_add(1, std::memory_order_relaxed);
  return {false, 0, limit};
}

LockService::Acquired LockService::create(Shard& shard, std::string name,
                                          const std::shared_ptr<Session>& session,
                                          uint64_t wait_attachment) {
  if (Limit limit = admit_new_name(*session); limit != Limit::kNone) return refuse(limit);
  auto entry = shard.entries.try_emplace(std::move(name)).first;
  take(entry->second, session, entry->first, false, wait_attachment);
  return {true, entry->second.token};
}

LockService::Acquired LockService::try_acquire(const std::shared_ptr<Session>& session,
                                               std::string_view name) {
  Shard& shard = shard_for(name);
  std::string key(name);
  std::lock_guard lock(shard.mutex);
  auto entry = shard.entries.find(key);
  if (entry == shard.entries.end()) return create(shard, std::move(key), session, 0);
  if (entry->second.owner == session) return asked_again(entry->second);
  return {false, 0};
}

LockService::Acquired LockService::acquire_or_wait(const std::shared_ptr<WaitTicket>& ticket) {
  Shard& shard = shard_for(ticket->name);
  std::lock_guard lock(shard.mutex);
  auto entry = shard.entries.find(ticket->name);
  if (entry == shard.entries.end()) {
    return create(shard, ticket->name, ticket->session, ticket->attachment);
  }
  if (entry->second.owner == ticket->session) return asked_again(entry->second);
  {
    std::lock_guard session_lock(ticket->session->mutex);
    if (session_full(*ticket->session)) return refuse(Limit::kSession);
    ++ticket->session->waits;
    ticket->session->wait = ticket;
  }
  auto& waiters = entry->second.waiters;
  ticket->position = waiters.insert(waiters.end(), ticket);
  ticket->queued = true;
  waiting_.fetch_add(1, std::memory_order_relaxed);
  return {false, 0};
}

bool LockService::cancel_wait(WaitTicket& ticket, bool timed_out) {
  Shard& shard = shard_for(ticket.name);
  std::lock_guard lock(shard.mutex);
  if (!ticket.queued) return false;
  auto entry = shard.entries.find(ticket.name);
  entry->second.waiters.erase(ticket.position);
  ticket.queued = false;
  {
    std::lock_guard session_lock(ticket.session->mutex);
    --ticket.session->waits;
    if (ticket.session->wait.lock().get() == &ticket) ticket.session->wait.reset();
  }
  waiting_.fetch_sub(1, std::memory_order_relaxed);
  if (timed_out) timeouts_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool LockService::cancel_session_wait(const std::shared_ptr<Session>& session, bool timed_out,
                                      uint64_t attachment) {
  std::shared_ptr<WaitTicket> ticket;
  {
    std::lock_guard session_lock(session->mutex);
    ticket = session->wait.lock();
  }
  if (ticket && attachment != 0 && ticket->attachment != attachment) return false;
  return ticket && cancel_wait(*ticket, timed_out);
}

void LockService::raise_token_floor(uint64_t token) {
  uint64_t current = next_token_.load(std::memory_order_relaxed);
  while (current < token &&
         !next_token_.compare_exchange_weak(current, token, std::memory_order_relaxed)) {
  }
}

void LockService::pass_on(Shard& shard, std::unordered_map<std::string, Entry>::iterator entry,
                          std::vector<Grant>& grants) {
  held_.fetch_sub(1, std::memory_order_relaxed);
  auto& waiters = entry->second.waiters;
  if (waiters.empty()) {
    shard.entries.erase(entry);
    names_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  std::shared_ptr<WaitTicket> next = std::move(waiters.front());
  waiters.pop_front();
  next->queued = false;
  waiting_.fetch_sub(1, std::memory_order_relaxed);
  take(entry->second, next->session, entry->first, true, next->attachment);
  grants.push_back({std::move(next), entry->second.token});
}

bool LockService::give_back_unheard_grant(const std::shared_ptr<Session>& session,
                                          std::string_view name, uint64_t attachment) {
  if (attachment == 0) return false;
  std::vector<Grant> grants;
  bool given = release_locked(session, name, grants, attachment);
  deliver(grants);
  return given;
}

bool LockService::release_locked(const std::shared_ptr<Session>& session, std::string_view name,
                                 std::vector<Grant>& grants, uint64_t only_unheard_of) {
  Shard& shard = shard_for(name);
  std::lock_guard lock(shard.mutex);
  auto entry = shard.entries.find(std::string(name));
  if (entry == shard.entries.end() || entry->second.owner != session) return false;
  if (only_unheard_of != 0 && entry->second.wait_attachment != only_unheard_of) return false;
  {
    std::lock_guard session_lock(session->mutex);
    session->held.erase(std::string(name));
  }
  pass_on(shard, entry, grants);
  return true;
}

// Outside every service lock: on_grant posts to another thread's reactor.
void LockService::deliver(std::vector<Grant>& grants) {
  for (Grant& grant : grants)
    grant.ticket->on_grant(grant.token);
}

bool LockService::release(const std::shared_ptr<Session>& session, std::string_view name) {
  std::vector<Grant> grants;
  bool released = release_locked(session, name, grants);
  deliver(grants);
  return released;
}

void LockService::release_all(const std::shared_ptr<Session>& session) {
  std::vector<std::string> names;
  {
    std::lock_guard session_lock(session->mutex);
    names.assign(session->held.begin(), session->held.end());
  }
  // In name order: each name passed on takes the next token, and a cluster's
  // members must give the same tokens, whatever order their sets hold the
  // names in (one restored from a snapshot built its set in name order).
  std::sort(names.begin(), names.end());
  std::vector<Grant> grants;
  for (const std::string& name : names)
    release_locked(session, name, grants);
  deliver(grants);
}

ServiceStats LockService::stats() const {
  ServiceStats stats;
  stats.locks = held_.load(std::memory_order_relaxed);
  stats.waiters = waiting_.load(std::memory_order_relaxed);
  stats.grants = grants_.load(std::memory_order_relaxed);
  stats.timeouts = timeouts_.load(std::memory_order_relaxed);
  stats.limit_refusals = limit_refusals_.load(std::memory_order_relaxed);
  std::lock_guard lock(sessions_mutex_);
  stats.sessions = sessions_.size();
  stats.sessions_in_grace = in_grace_;
  return stats;
}

std::vector<LockInfo> LockService::list(std::string_view prefix) const {
  std::vector<LockInfo> locks;
  int64_t now = clock_.now_ms();
  for (size_t i = 0; i < kShards; ++i) {
    std::lock_guard lock(shards_[i].mutex);
    for (const auto& [name, entry] : shards_[i].entries) {
      if (name.compare(0, prefix.size(), prefix) != 0) continue;
      // Taken after `now` was read, on another thread: 0, never negative.
      LockInfo info{name, std::string(entry.owner->public_id()),
                    std::max<int64_t>(0, now - entry.acquired_ms),
                    entry.waiters.size(), entry.token};
      {
        std::lock_guard session_lock(entry.owner->mutex);  // after the shard's, as everywhere
        info.attached = entry.owner->attached;
        info.client = entry.owner->client;
      }
      locks.push_back(std::move(info));
    }
  }
  return locks;
}

std::unordered_map<uint64_t, size_t> LockService::locks_by_connection() const {
  std::unordered_map<uint64_t, size_t> counts;
  std::lock_guard lock(sessions_mutex_);
  for (const auto& [serial, session] : sessions_) {
    std::lock_guard session_lock(session->mutex);
    if (session->attached && session->client.id != 0) {
      counts[session->client.id] = session->held.size();
    }
  }
  return counts;
}

// Called with no change in progress (a cluster's thread applies them all).
FullState LockService::export_state() const {
  FullState state;
  {
    std::lock_guard lock(sessions_mutex_);
    state.next_token = next_token_.load(std::memory_order_relaxed);
    state.next_session = next_session_;
    state.limits = limits_;
    for (const auto& [serial, session] : sessions_) {
      std::lock_guard session_lock(session->mutex);
      state.sessions.push_back({session->id, session->grace_ms, session->attached, session->client,
                                session->detachments, session->empty_in_grace});
    }
  }
  state.grants = grants_.load(std::memory_order_relaxed);
  state.timeouts = timeouts_.load(std::memory_order_relaxed);
  state.limit_refusals = limit_refusals_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < kShards; ++i) {
    std::lock_guard lock(shards_[i].mutex);
    for (const auto& [name, entry] : shards_[i].entries) {
      FullState::LockEntry saved{name,        std::string(entry.owner->public_id()),
                                 entry.token, entry.acquired_ms,
                                 entry.wait_attachment, {}};
      for (const auto& waiter : entry.waiters)
        saved.waiters.push_back({std::string(waiter->session->public_id()), waiter->attachment});
      state.locks.push_back(std::move(saved));
    }
  }
  // The same state in the same order on every member, whatever the hashing.
  std::sort(state.sessions.begin(), state.sessions.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  std::sort(state.locks.begin(), state.locks.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return state;
}

void LockService::clear_locked() {
  sessions_.clear();
  in_grace_ = empty_in_grace_ = 0;
  for (size_t i = 0; i < kShards; ++i) {
    std::lock_guard shard_lock(shards_[i].mutex);
    shards_[i].entries.clear();
  }
  names_.store(0, std::memory_order_relaxed);
  held_.store(0, std::memory_order_relaxed);
  waiting_.store(0, std::memory_order_relaxed);
}

bool LockService::replace_state(const FullState& state) {
  std::lock_guard lock(sessions_mutex_);  // before a shard's, as in every path
  clear_locked();
  if (!load_locked(state)) {
    clear_locked();
    return false;
  }
  return true;
}

bool LockService::load_locked(const FullState& state) {
  if (state.limits) limits_ = *state.limits;
  next_token_.store(state.next_token, std::memory_order_relaxed);
  next_session_ = state.next_session;
  grants_.store(state.grants, std::memory_order_relaxed);
  timeouts_.store(state.timeouts, std::memory_order_relaxed);
  limit_refusals_.store(state.limit_refusals, std::memory_order_relaxed);
  for (const FullState::SessionEntry& saved : state.sessions) {
    auto session = std::make_shared<Session>(saved.id);
    session->grace_ms = saved.grace_ms;
    session->attached = saved.attached;
    session->client = saved.client;
    session->detachments = saved.detachments;
    session->empty_in_grace = saved.empty_in_grace;
    if (!saved.attached) ++in_grace_;
    if (saved.empty_in_grace) ++empty_in_grace_;
    sessions_.emplace(std::string(session->public_id()), std::move(session));
  }
  auto find = [this](const std::string& serial) {
    auto found = sessions_.find(serial);
    return found == sessions_.end() ? nullptr : found->second;
  };
  for (const FullState::LockEntry& saved : state.locks) {
    std::shared_ptr<Session> owner = find(saved.owner);
    if (!owner) return false;
    Shard& shard = shard_for(saved.name);
    std::lock_guard shard_lock(shard.mutex);
    Entry& entry = shard.entries[saved.name];
    entry.owner = owner;
    entry.token = saved.token;
    entry.acquired_ms = saved.acquired_ms;
    entry.wait_attachment = saved.wait_attachment;
    names_.fetch_add(1, std::memory_order_relaxed);
    held_.fetch_add(1, std::memory_order_relaxed);
    owner->held.insert(saved.name);
    for (const FullState::Waiter& waiter : saved.waiters) {
      std::shared_ptr<Session> session = find(waiter.serial);
      if (!session) return false;
      auto ticket = std::make_shared<WaitTicket>();
      ticket->session = session;
      ticket->name = saved.name;
      ticket->attachment = waiter.attachment;
      ticket->on_grant = [](uint64_t) {};
      ticket->position = entry.waiters.insert(entry.waiters.end(), ticket);
      ticket->queued = true;
      ++session->waits;
      session->wait = ticket;
      waiting_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return true;
}

void LockService::start_term(std::vector<Adopted>* in_grace, int64_t grace_floor_ms) {
  std::vector<std::pair<std::string, std::shared_ptr<Session>>> sessions;
  {
    std::lock_guard lock(sessions_mutex_);
    sessions.assign(sessions_.begin(), sessions_.end());
  }
  // The same order on every member, whatever its map's: a session ended
  // here (no grace, or the limit on empty ones) releases its locks, and the
  // limit picks by that order.
  std::sort(sessions.begin(), sessions.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // Every wait ends before any session lets its locks go: released first,
  // a lock would pass to a waiter the loop had not reached, and so to a
  // session that no longer waits for it.
  for (const auto& [serial, session] : sessions)
    cancel_session_wait(session, false);
  for (const auto& [serial, session] : sessions) {
    uint64_t detachment;
    int64_t grace_ms;
    bool attached;
    {
      std::lock_guard session_lock(session->mutex);
      attached = session->attached;
    }
    if (attached) {
      grace_ms = detach(session, &detachment, grace_floor_ms);
      if (grace_ms <= 0) continue;  // ended
    } else {
      // Already in its grace: it starts again, and the old timer no longer applies.
      std::lock_guard lock(sessions_mutex_);
      std::lock_guard session_lock(session->mutex);
      detachment = ++session->detachments;
      grace_ms = session->grace_ms;
    }
    in_grace->push_back({session, detachment, grace_ms});
  }
}

}  // namespace lockcached::locks
