#include <atomic>
#include <mutex>

#include "lockcached/locks/coordinator.h"

namespace lockcached::locks {
namespace {

// A queued wait's end: its grant or its timeout, whichever comes first.
// `mutex` keeps the grant's answer back while the timer is ending a wait:
// the timer names the session, not the wait, so until the client hears of
// the grant it cannot have started a newer wait that the timer would end.
struct WaitEnd {
  std::mutex mutex;
  bool over = false;  // guarded by mutex
  std::atomic<timing::Scheduler::TimerId> timer{0};
  Answer answer;
};

}  // namespace

LocalCoordinator::LocalCoordinator(std::shared_ptr<LockService> service,
                                   timing::Scheduler& timers)
    : Coordinator(std::move(service)), timers_(timers) {}

Outcome LocalCoordinator::submit(Change&& change, Answer answer) {
  // One named result and one return, so that the outcome is built where the
  // caller reads it (a second return path would cost a move and a destructor).
  bool waits = change.kind == ChangeKind::kAcquire && change.wait_ms > 0;
  Outcome outcome = waits ? wait(change, std::move(answer)) : service_->apply(change);
  if (change.kind == ChangeKind::kDetach && outcome.grace_ms > 0) {
    start_grace(change.session, outcome.detachment, outcome.grace_ms, std::move(answer));
  }
  return outcome;
}

// A grant and a timeout exclude each other (the name's shard lock decides
// which takes the ticket out of its queue); `over` tells the timer that the
// grant won, and WaitEnd::mutex why the timer may trust it.
Outcome LocalCoordinator::wait(Change& change, Answer answer) {
  auto end = std::make_shared<WaitEnd>();
  end->answer = std::move(answer);
  timing::Scheduler* timers = &timers_;
  Outcome outcome = service_->apply(change, [end, timers](uint64_t token) {
    {
      std::lock_guard lock(end->mutex);
      end->over = true;
    }
    if (auto timer = end->timer.load()) timers->cancel(timer);
    Outcome granted;
    granted.token = token;
    end->answer(granted);
  });
  if (outcome.status != OutcomeStatus::kQueued) return outcome;
  std::weak_ptr<LockService> service = service_;
  end->timer = timers_.after(change.wait_ms, [end, service, session = change.session,
                                               attachment = change.detachment] {
    std::shared_ptr<LockService> alive = service.lock();
    std::lock_guard lock(end->mutex);
    if (!alive || end->over) return;
    Change cancel = Change::wait_timed_out(attachment);
    cancel.session = session;
    if (alive->apply(cancel).status != OutcomeStatus::kDone) return;  // granted meanwhile
    Outcome timed_out;
    timed_out.status = OutcomeStatus::kBusy;
    end->answer(timed_out);
  });
  bool granted_already;
  {
    std::lock_guard lock(end->mutex);
    granted_already = end->over;
  }
  if (granted_already) timers_.cancel(end->timer);  // granted before the timer was set
  return outcome;
}

void LocalCoordinator::start_grace(const std::shared_ptr<Session>& session, uint64_t detachment,
                                   int64_t grace_ms, Answer answer) {
  std::weak_ptr<LockService> service = service_;
  timers_.after(grace_ms, [service, session, detachment, answer = std::move(answer)] {
    std::shared_ptr<LockService> alive = service.lock();
    if (!alive) return;
    Change expire = Change::grace_over(detachment);
    expire.session = session;
    Outcome outcome = alive->apply(expire);
    if (answer && !outcome.released.empty()) answer(outcome);
  });
}

}  // namespace lockcached::locks
