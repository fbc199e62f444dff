// Where a lock-service connection's changes go, and how their outcomes come
// back (lock_change.h). The protocol only asks; the coordinator decides
// when a change is made and owns every timer the lock service needs (a
// wait's timeout, a detached session's grace), on one scheduler:
//
// - LocalCoordinator, a single server: the change is made at once, on the
//   asking thread, and its outcome returned; timers run on a scheduler the
//   server gives it (a reactor thread's; a test's clock in tests).
// - cluster::LockMachine, a cluster member: the change is proposed to the
//   Raft log and made when the log commits it; its outcome comes later,
//   and timers run on the Raft thread of the leader.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "lockcached/locks/lock_change.h"
#include "lockcached/locks/lock_service.h"
#include "lockcached/timing/scheduler.h"

namespace lockcached::locks {

// Told an outcome that was not returned at once: a cluster's outcomes, a
// queued wait's end (kDone with its token: granted; kBusy: timed out),
// and, for kDetach, the end of the grace (kDone with the names released,
// when nobody resumed the session). Called once per event, from whichever
// thread decided it: the asker hops to its own.
using Answer = std::function<void(const Outcome& outcome)>;

class Coordinator {
 public:
  explicit Coordinator(std::shared_ptr<LockService> service) : service_(std::move(service)) {}
  virtual ~Coordinator() = default;
  // The outcome when it is known at once, else one with status kLater (it
  // comes through `answer`). A wait's later end always comes through
  // `answer`. Returned by value, not as an optional: a lock and an unlock
  // each make one Outcome, built where the caller reads it.
  virtual Outcome submit(Change&& change, Answer answer) = 0;
  // True when submit always answers at once (then `answer` matters only for
  // a wait's end and a grace's).
  virtual bool answers_at_once() const = 0;
  // The state changes are made to; for reads (stats, lists, what a session
  // holds), which are thread-safe.
  LockService& service() { return *service_; }
  const std::shared_ptr<LockService>& shared_service() const { return service_; }

 protected:
  std::shared_ptr<LockService> service_;
};

class LocalCoordinator final : public Coordinator {
 public:
  // `timers` must be callable from any thread.
  LocalCoordinator(std::shared_ptr<LockService> service, timing::Scheduler& timers);

  Outcome submit(Change&& change, Answer answer) override;
  bool answers_at_once() const override { return true; }

 private:
  Outcome wait(Change& change, Answer answer);
  void start_grace(const std::shared_ptr<Session>& session, uint64_t detachment,
                   int64_t grace_ms, Answer answer);

  timing::Scheduler& timers_;
};

}  // namespace lockcached::locks
