// The named-lock service (../shared/specs/lock-service.md): locks on names,
// first-come-first-served waiting, sessions that outlive a disconnect for a
// grace period, and fencing tokens. Thread-safe; knows nothing of sockets or
// reply formats. Names are sharded like the store; each name's waiters are a
// FIFO list, so every operation is O(1) apart from hashing the name.
// Locks cannot be evicted like cache items, so LockLimits bounds them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lockcached/locks/session_id.h"
#include "lockcached/net/endpoint.h"
#include "lockcached/timing/scheduler.h"

namespace lockcached::locks {

constexpr int64_t kDefaultGraceMs = 30000;

// What clients may make the service hold (0: no bound). A lock is a few
// hundred bytes that nothing evicts; without these a single client could
// fill the server's memory with names.
struct LockLimits {
  size_t max_locks_per_session = 10000;  // held plus waited for
  size_t max_names = 1000000;            // distinct names held, all sessions
  // Sessions that hold nothing kept through a grace period: resuming one
  // gives back only its id, and a client that quits over and over must not
  // pile them up. Past this many, such a session ends with its connection.
  size_t max_empty_sessions_in_grace = 10000;
};

// Which limit refused a lock.
enum class Limit : uint8_t { kNone, kSession, kNames };

struct WaitTicket;

// A client's identity across connections: what it holds, and how long its
// locks outlive a disconnect.
struct Session {
  explicit Session(std::string session_id) : id(std::move(session_id)) {}

  // What others may see of the id (session_id.h): `stats locks`, `watch`.
  std::string_view public_id() const { return public_session_id(id); }

  const std::string id;  // secret: whoever has it can take the session over
  std::mutex mutex;  // guards everything below
  std::unordered_set<std::string> held;
  size_t waits = 0;  // queued WaitTickets
  int64_t grace_ms = kDefaultGraceMs;
  bool attached = true;         // a connection uses it
  net::ClientInfo client;       // that connection, while attached
  uint64_t detachments = 0;     // tells a stale grace timer from the current one
  bool empty_in_grace = false;  // counted in LockService::empty_in_grace_
  // The wait it has queued: one at a time, as its connection waits for one
  // lock at a time (docs/lock-service.md, "Waiting"). Weak: the name's
  // queue owns a queued ticket, and the ticket owns its session.
  std::weak_ptr<WaitTicket> wait;
};

// One waiting `lock NAME SECONDS`. on_grant is called once, on the thread
// that releases the lock, with no service lock held, when the wait wins.
struct WaitTicket {
  std::shared_ptr<Session> session;
  std::string name;
  // The connection that waits (Change::detachment; 0: none named): a grant
  // its client never heard of goes back when that connection ends.
  uint64_t attachment = 0;
  std::function<void(uint64_t token)> on_grant;
  bool queued = false;  // guarded by the name's shard lock
  std::list<std::shared_ptr<WaitTicket>>::iterator position;
};

struct LockInfo {
  std::string name;
  std::string session;  // the holder's public id, never its whole id
  int64_t held_ms;
  size_t waiters;
  uint64_t token;
  bool attached = false;   // the session has a connection (else it is in its grace period)
  net::ClientInfo client = {};  // that connection, when attached
};

struct Change;
struct Outcome;

// Everything a LockService holds, as plain data: what a cluster's snapshot
// carries (cluster/lock_log.h encodes it), so that a member that restores
// it is in the very state of the member that took it.
struct FullState {
  struct SessionEntry {
    std::string id;
    int64_t grace_ms = 0;
    bool attached = false;
    net::ClientInfo client;
    uint64_t detachments = 0;
    bool empty_in_grace = false;
  };
  struct Waiter {
    std::string serial;
    uint64_t attachment = 0;  // WaitTicket::attachment
  };
  struct LockEntry {
    std::string name;
    std::string owner;  // the holder's serial
    uint64_t token = 0;
    int64_t acquired_ms = 0;
    uint64_t wait_attachment = 0;  // Entry::wait_attachment
    std::vector<Waiter> waiters;   // first come first
  };
  std::vector<SessionEntry> sessions;
  std::vector<LockEntry> locks;
  uint64_t next_token = 0;  // the last token handed out
  uint64_t next_session = 0;
  std::optional<LockLimits> limits;  // those in force (absent in older snapshots)
  uint64_t grants = 0;
  uint64_t timeouts = 0;
  uint64_t limit_refusals = 0;
};
using GrantCallback = std::function<void(uint64_t token)>;

struct ServiceStats {
  uint64_t locks = 0;
  uint64_t waiters = 0;
  uint64_t sessions = 0;
  uint64_t sessions_in_grace = 0;
  uint64_t grants = 0;
  uint64_t timeouts = 0;
  uint64_t limit_refusals = 0;  // locks refused by a LockLimits bound
};

class LockService {
 public:
  struct Acquired {
    bool granted = false;
    uint64_t token = 0;          // when granted: the fencing token of this grant
    Limit limit = Limit::kNone;  // when a limit refused it (not queued)
  };

  // Every fencing token it hands out is greater than `token_floor`: the
  // server passes its start time in microseconds, so that a restarted
  // server never hands out a token its previous run already gave
  // (docs/lock-service.md, "Fencing tokens").
  // `clock` stamps each lock's acquisition (`stats locks`' held_ms).
  explicit LockService(LockLimits limits = {}, uint64_t token_floor = 0,
                       const timing::Clock& clock = timing::steady_clock());
  ~LockService();
  LockService(const LockService&) = delete;
  LockService& operator=(const LockService&) = delete;

  // Carries out `change` (lock_change.h), a connection's or a cluster
  // log's; a wait it queues is told of its grant through `on_grant`.
  Outcome apply(const Change& change, GrantCallback on_grant = {});

  // `client` names the connection that uses it (reported only). The id's
  // secret is `secret`, or fresh random bits when it is empty.
  std::shared_ptr<Session> create_session(net::ClientInfo client = {}, std::string secret = {});
  // The registered session of serial `serial`; null when there is none.
  std::shared_ptr<Session> find_session(std::string_view serial) const;
  // Hands a detached session to a new connection, `client`; null when the
  // id is unknown or malformed, its secret is wrong, or a connection still
  // uses it. The session is found by its public part and the secret
  // compared in constant time, so timing tells nothing about a secret.
  std::shared_ptr<Session> resume_session(std::string_view id, net::ClientInfo client = {});
  // Drops a session that holds nothing (a connection adopting another one).
  void discard_session(const std::shared_ptr<Session>& session);
  // The connection went away. Returns the grace period to wait before
  // calling expire(); with 0 the locks are already released.
  // `grace_floor_ms`: at least this grace for a session that holds locks
  // (a new term's, kTermStart), its own grace_ms unchanged.
  int64_t detach(const std::shared_ptr<Session>& session, uint64_t* detachment,
                 int64_t grace_floor_ms = 0);
  // The grace period ran out: releases everything unless the session was
  // resumed since `detachment`. Returns the names it released.
  std::vector<std::string> expire(const std::shared_ptr<Session>& session, uint64_t detachment);
  // How long the session's locks will outlive its next disconnect.
  void set_grace(const std::shared_ptr<Session>& session, int64_t grace_ms);

  // Takes the lock if it is free (or already the session's) and no limit
  // forbids it.
  Acquired try_acquire(const std::shared_ptr<Session>& session, std::string_view name);
  // Like try_acquire, but when the lock is taken queues the ticket behind
  // the waiters already there (a wait counts toward the session's limit).
  Acquired acquire_or_wait(const std::shared_ptr<WaitTicket>& ticket);
  // Takes the ticket out of its queue. False when it is no longer queued: it
  // was granted and its on_grant call is on its way.
  bool cancel_wait(WaitTicket& ticket, bool timed_out);
  // The same for whatever wait the session has queued; false when none, or
  // when `attachment` (0: any) is not the attachment the wait was made on.
  bool cancel_session_wait(const std::shared_ptr<Session>& session, bool timed_out,
                           uint64_t attachment = 0);
  // A wait's connection ended before its client heard the answer: when the
  // wait was granted already (`name` went to that connection's wait, and
  // nothing since told the client of it), the lock goes back. False when
  // it did not.
  bool give_back_unheard_grant(const std::shared_ptr<Session>& session, std::string_view name,
                               uint64_t attachment);
  // Every token from now on is greater than `token` (a cluster raises it
  // to each entry's index, shifted: docs/lock-service.md, "Fencing tokens").
  void raise_token_floor(uint64_t token);
  // False when the session does not hold the lock.
  bool release(const std::shared_ptr<Session>& session, std::string_view name);
  void release_all(const std::shared_ptr<Session>& session);

  ServiceStats stats() const;
  // Every held lock whose name starts with `prefix`.
  std::vector<LockInfo> list(std::string_view prefix) const;
  // How many locks each attached session holds, by its net::ClientInfo::id
  // (sessions without one left out). For `stats conns`.
  std::unordered_map<uint64_t, size_t> locks_by_connection() const;

  // This node changed role and serves another service now: a connection
  // still on this one must confirm nothing more and close, so that its
  // client reconnects to the right one. Thread-safe, for good.
  void retire() { retired_.store(true, std::memory_order_release); }
  bool retired() const { return retired_.load(std::memory_order_acquire); }

  // What the server needs to end a session in its grace period that nobody
  // resumes (start_term): as detach() gives it, call expire(session,
  // detachment) after grace_ms.
  struct Adopted {
    std::shared_ptr<Session> session;
    uint64_t detachment;
    int64_t grace_ms;
  };

  // The whole state, and back: replace_state drops everything the service
  // holds and takes `state` instead (false when `state` is inconsistent:
  // the service is then empty). Call with no change in progress. A
  // restored wait tells nobody of its grant: a member restores only while
  // it follows, and a new leader's first change ends every wait.
  FullState export_state() const;
  bool replace_state(const FullState& state);

  // A cluster's new leader (ChangeKind::kTermStart): every wait ends
  // unanswered, and every session detaches as if its connection had just
  // dropped, those already in their grace too, so that each grace counts
  // from now (a grace of 0 ends a session that holds nothing at once; one
  // that holds locks and was attached gets `grace_floor_ms` at least). The sessions left in
  // their grace are appended to *in_grace, for the leader's timers.
  void start_term(std::vector<Adopted>* in_grace, int64_t grace_floor_ms = 0);

 private:
  struct Entry {
    std::shared_ptr<Session> owner;
    uint64_t token = 0;
    int64_t acquired_ms = 0;
    // The connection whose wait this grant answered (0: none, or the holder
    // asked again since, so its client knows): give_back_unheard_grant.
    uint64_t wait_attachment = 0;
    std::list<std::shared_ptr<WaitTicket>> waiters;
  };
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, Entry> entries;
  };
  struct Grant {
    std::shared_ptr<WaitTicket> ticket;
    uint64_t token;
  };

  Shard& shard_for(std::string_view name) const;
  // Under the session's mutex: may it hold or wait for one more lock?
  bool session_full(const Session& session) const;
  // With sessions_mutex_ and the session's mutex held.
  void leave_empty_in_grace(Session& session);
  // With sessions_mutex_ held: takes `session` out of the registry.
  void unregister_locked(const Session& session);
  // For a name nobody holds: checks both limits and reserves the name.
  Limit admit_new_name(Session& session);
  Acquired refuse(Limit limit);
  // Under the shard lock, for an entry the session holds already.
  static Acquired asked_again(Entry& entry);
  // Under the shard lock, for a name without an entry: creates it, held by
  // `session`, unless a limit refuses.
  Acquired create(Shard& shard, std::string name, const std::shared_ptr<Session>& session,
                  uint64_t wait_attachment);
  // Under the shard lock: `session` now holds the entry, with a new token,
  // granted to the wait of connection `wait_attachment` (0: no wait).
  void take(Entry& entry, const std::shared_ptr<Session>& session, std::string_view name,
            bool was_waiting, uint64_t wait_attachment);
  // replace_state's halves, with sessions_mutex_ held.
  void clear_locked();
  bool load_locked(const FullState& state);
  // The owner let go: the first waiter gets it, or the entry goes.
  void pass_on(Shard& shard, std::unordered_map<std::string, Entry>::iterator entry,
               std::vector<Grant>& grants);
  // `only_unheard_of`: only a grant to that connection's wait
  // (give_back_unheard_grant); 0: whatever the holder's.
  bool release_locked(const std::shared_ptr<Session>& session, std::string_view name,
                      std::vector<Grant>& grants, uint64_t only_unheard_of = 0);
  static void deliver(std::vector<Grant>& grants);

  static constexpr size_t kShards = 64;
  // Set once, or in a cluster by each new term's entry (kTermStart) and a
  // snapshot: read and written on the applying thread only.
  LockLimits limits_;
  const timing::Clock& clock_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<bool> retired_{false};
  std::atomic<uint64_t> names_{0};    // entries in all shards; reserved before creating one
  std::atomic<uint64_t> next_token_;  // the last token handed out
  std::atomic<uint64_t> grants_{0};
  std::atomic<uint64_t> timeouts_{0};
  std::atomic<uint64_t> waiting_{0};
  std::atomic<uint64_t> held_{0};
  std::atomic<uint64_t> limit_refusals_{0};

  mutable std::mutex sessions_mutex_;
  // By public id (the serial), so that resume_session looks a session up
  // without hashing or comparing its secret.
  std::unordered_map<std::string, std::shared_ptr<Session>> sessions_;
  uint64_t next_session_ = 0;    // guarded by sessions_mutex_
  uint64_t in_grace_ = 0;        // guarded by sessions_mutex_
  uint64_t empty_in_grace_ = 0;  // guarded by sessions_mutex_
};

}  // namespace lockcached::locks
