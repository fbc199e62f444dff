// cluster::LockMachine and its log format, without Raft: the changes a
// leader would commit are applied, in one order, to several machines, as
// the members of a cluster apply them. Every machine must end in the same
// state (that is what lets a follower take over), tokens must be the
// entries' indexes, and a snapshot must restore that state exactly.
#include "lockcached/cluster/lock_machine.h"

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace lockcached::cluster {
namespace {

using locks::ChangeKind;

LoggedChange change(ChangeKind kind, std::string serial = "", std::string name = "") {
  LoggedChange logged;
  logged.change.kind = kind;
  logged.change.serial = std::move(serial);
  logged.change.name = std::move(name);
  return logged;
}

LoggedChange open(std::string secret) {
  LoggedChange logged = change(ChangeKind::kOpen);
  logged.change.id = std::move(secret);
  return logged;
}

LoggedChange wait_for(std::string serial, std::string name) {
  LoggedChange logged = change(ChangeKind::kAcquire, std::move(serial), std::move(name));
  logged.change.wait_ms = 5000;
  return logged;
}

// A log: entries of changes, applied from index 1 on.
using Log = std::vector<std::vector<LoggedChange>>;

void apply_log(LockMachine& machine, const Log& log, uint64_t first_index = 1) {
  uint64_t index = first_index;
  for (const auto& entry : log) {
    std::vector<std::string> encoded;
    for (const LoggedChange& logged : entry)
      encoded.push_back(encode(logged));
    std::vector<std::string_view> commands(encoded.begin(), encoded.end());
    machine.apply(index, 1795000000000 + index, commands);
    ++index;
  }
}

LockMachine machine(uint64_t node_id) {
  return LockMachine(locks::LockLimits{}, node_id, {"127.0.0.1:11400", "127.0.0.1:11213"}, [] {});
}

const std::string kSecretA(32, 'a');
const std::string kSecretB(32, 'b');

// Sessions 1 and 2; 1 holds "n" and "m", 2 waits for "n"; 1 releases "n"
// (2 is granted), 1 detaches, 1's grace expires; then a new term.
Log busy_log() {
  return {
      {open(kSecretA), open(kSecretB)},
      {change(ChangeKind::kAcquire, "1", "n"), change(ChangeKind::kAcquire, "1", "m")},
      {wait_for("2", "n")},
      {change(ChangeKind::kRelease, "1", "n")},
      {change(ChangeKind::kDetach, "1")},
      {[] {
        LoggedChange expire = change(ChangeKind::kExpire, "1");
        expire.change.detachment = 1;
        return expire;
      }()},
      {change(ChangeKind::kTermStart)},
  };
}

bool same_state(const locks::FullState& a, const locks::FullState& b) {
  return encode(a) == encode(b);
}

// Where a state's limits start: after its format and five counters.
constexpr size_t kLimitsAt = 1 + 5 * 8;

TEST(LockLog, ChangesAndStatesComeBackAsTheyWent) {
  LoggedChange logged = wait_for("k3", "deploy");
  logged.origin = {2, 77, 9};
  logged.change.client = {12, *net::parse_endpoint("192.0.2.7:4000")};
  logged.change.timed_out = true;
  logged.change.detachment = 5;
  std::optional<LoggedChange> back = decode_change(encode(logged));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, logged);
  std::string bytes = encode(logged);
  EXPECT_NE(bytes.find("192.0.2.7:4000"), std::string::npos) << "the address as text, as ever";
  EXPECT_FALSE(decode_change(bytes.substr(0, bytes.size() - 1)));
  EXPECT_FALSE(decode_change(bytes + "x"));
  EXPECT_FALSE(decode_change(""));
  bytes[1] = 99;  // no such kind
  EXPECT_FALSE(decode_change(bytes));

  LockMachine source = machine(1);
  apply_log(source, busy_log());
  locks::FullState state = source.service().export_state();
  std::optional<locks::FullState> state_back = decode_state(encode(state));
  ASSERT_TRUE(state_back);
  EXPECT_TRUE(same_state(*state_back, state));
  EXPECT_FALSE(decode_state(encode(state).substr(1)));

  Announcement announced{{1, 7, 0}, "192.0.2.11:11400", "192.0.2.11:11213", "192.0.2.11:11401"};
  std::optional<Announcement> announced_back;
  ASSERT_TRUE(decode_state(encode(state, announced), &announced_back));
  EXPECT_EQ(announced_back, announced);
  // A snapshot of format 1 (before the announcement was kept) still loads;
  // without locks, its bytes are today's but for the announcement.
  locks::FullState no_locks = state;
  no_locks.locks.clear();
  no_locks.limits.reset();
  std::string older = encode(no_locks);
  older[0] = 1;
  older.erase(kLimitsAt, 1);  // format 3's limits: here only "none"
  older.resize(older.size() - 3 * 8 - 3 * 4);  // an empty announcement's bytes
  std::optional<locks::FullState> older_back = decode_state(older, &announced_back);
  ASSERT_TRUE(older_back);
  EXPECT_TRUE(same_state(*older_back, no_locks));
  EXPECT_FALSE(announced_back);
}

// Format 3 added, per lock, the connection whose wait it was granted to,
// and each waiter's connection. A snapshot of format 2 still loads, with 0
// for both (no grant to give back); format 3 keeps them.
TEST(LockLog, AStateKeepsTheConnectionsOfWaitsAndOlderFormatsLoad) {
  locks::FullState state;
  state.next_token = 9;
  state.next_session = 2;
  state.sessions = {{"1-aaaa", 30000, true, {}, 0, false}, {"2-bbbb", 30000, true, {}, 4, false}};
  state.locks = {{"the-lock", "1", 9, 100, 3, {{"2", 5}}}};
  std::optional<locks::FullState> back = decode_state(encode(state));
  ASSERT_TRUE(back);
  ASSERT_EQ(back->locks.size(), 1u);
  EXPECT_EQ(back->locks[0].wait_attachment, 3u);
  ASSERT_EQ(back->locks[0].waiters.size(), 1u);
  EXPECT_EQ(back->locks[0].waiters[0].serial, "2");
  EXPECT_EQ(back->locks[0].waiters[0].attachment, 5u);

  // Format 2's bytes: these without the two attachments.
  state.locks[0].wait_attachment = 0;
  state.locks[0].waiters[0].attachment = 0;
  std::string bytes = encode(state);
  size_t lock = bytes.find("the-lock");
  ASSERT_NE(lock, std::string::npos);
  size_t wait_attachment = lock + 8 + 4 + 1 + 8 + 8;  // name, owner "1", token, acquired
  bytes.erase(wait_attachment, 8);
  size_t waiter_attachment = wait_attachment + 8 + 4 + 1;  // the count, the serial "2"
  bytes.erase(waiter_attachment, 8);
  bytes.erase(kLimitsAt, 1);  // the limits: "none"
  bytes.resize(bytes.size() - 4);  // format 4's TLS lock address: ""
  bytes[0] = 2;
  std::optional<locks::FullState> older = decode_state(bytes);
  ASSERT_TRUE(older);
  EXPECT_TRUE(same_state(*older, state));
}

TEST(LockMachine, EveryMemberReachesTheSameStateFromTheSameLog) {
  LockMachine a = machine(1);
  LockMachine b = machine(2);
  LockMachine c = machine(3);
  Log log = busy_log();
  for (LockMachine* member : {&a, &b, &c})
    apply_log(*member, log);
  locks::FullState reference = a.service().export_state();
  EXPECT_TRUE(same_state(b.service().export_state(), reference));
  EXPECT_TRUE(same_state(c.service().export_state(), reference));
  // Session 1 ended; 2 holds "n", handed over by 1's release.
  ASSERT_EQ(reference.sessions.size(), 1u);
  EXPECT_EQ(reference.sessions[0].id, "2-" + kSecretB);
  EXPECT_FALSE(reference.sessions[0].attached);  // the new term detached it
  ASSERT_EQ(reference.locks.size(), 1u);
  EXPECT_EQ(reference.locks[0].name, "n");
  EXPECT_EQ(reference.locks[0].owner, "2");
}

TEST(LockMachine, ATokenIsTheIndexOfTheEntryThatGrantedIt) {
  LockMachine member = machine(1);
  apply_log(member, {{open(kSecretA), open(kSecretB)},
                     {change(ChangeKind::kAcquire, "1", "n"), change(ChangeKind::kAcquire, "1", "m")},
                     {wait_for("2", "n")},
                     {},
                     {change(ChangeKind::kRelease, "1", "n")}});
  std::vector<locks::LockInfo> held = member.service().list("");
  ASSERT_EQ(held.size(), 2u);
  for (const locks::LockInfo& lock : held) {
    if (lock.name == "m") {
      EXPECT_EQ(lock.token, (uint64_t{2} << kTokenShift) + 2);  // entry 2, its second grant
    } else {
      EXPECT_EQ(lock.token, (uint64_t{5} << kTokenShift) + 1);  // handed over by entry 5
    }
  }
}

// A member that was away restores a snapshot and applies the rest of the
// log: it ends where the others are.
TEST(LockMachine, ASnapshotRestoresTheStateExactly) {
  Log log = busy_log();
  Log first(log.begin(), log.begin() + 4);
  Log rest(log.begin() + 4, log.end());
  LockMachine leader = machine(1);
  apply_log(leader, first);
  std::string snapshot = leader.snapshot();
  apply_log(leader, rest, first.size() + 1);

  LockMachine away = machine(2);
  apply_log(away, {{open(kSecretA)}});  // what it had before: replaced
  ASSERT_TRUE(away.restore(snapshot));
  apply_log(away, rest, first.size() + 1);
  EXPECT_TRUE(same_state(away.service().export_state(), leader.service().export_state()));
  EXPECT_FALSE(away.restore("not a snapshot"));
}

// A member's own --lock_service_max_* flags do not decide what it applies:
// each term's first entry carries its leader's limits, and a snapshot the
// limits in force, so members with other flags (a rolling restart that
// changes one) refuse the same changes. Before, one member granted a lock
// that another refused, and a later leader could hand it out again.
TEST(LockMachine, EveryMemberAppliesTheLeadersLimits) {
  locks::LockLimits one_name;
  one_name.max_names = 1;
  LockMachine leader(one_name, 1, {"127.0.0.1:11400", "127.0.0.1:11213"}, [] {});
  LockMachine other = machine(2);  // the default limits
  LoggedChange start = change(ChangeKind::kTermStart);
  start.change.limits = one_name;
  start.change.grace_floor_ms = 900;
  Log log = {{start},
             {open(kSecretA), open(kSecretB)},
             {change(ChangeKind::kAcquire, "1", "x")},
             {change(ChangeKind::kAcquire, "2", "y")}};
  apply_log(leader, log);
  apply_log(other, log);
  EXPECT_EQ(other.service().list("").size(), 1u);  // y refused: one name at most
  EXPECT_TRUE(same_state(other.service().export_state(), leader.service().export_state()));

  LockMachine restored = machine(3);
  ASSERT_TRUE(restored.restore(leader.snapshot()));
  Log more = {{change(ChangeKind::kAcquire, "2", "z")}};
  apply_log(leader, more, log.size() + 1);
  apply_log(restored, more, log.size() + 1);
  EXPECT_EQ(restored.service().list("").size(), 1u);
  EXPECT_TRUE(same_state(restored.service().export_state(), leader.service().export_state()));

  std::optional<LoggedChange> back = decode_change(encode(start));
  ASSERT_TRUE(back);
  ASSERT_TRUE(back->change.limits);
  EXPECT_EQ(back->change.limits->max_names, 1u);
  EXPECT_EQ(back->change.grace_floor_ms, 900);
}

// A member that starts from a snapshot taken after the leader's first entry
// (a member added, or restarted, once the log was compacted past it) knows
// where the leader serves, as one that applied the whole log does: its 503s
// name the leader, and its cache follows the leader's.
TEST(LockMachine, ASnapshotKeepsWhereTheLeaderServes) {
  LoggedChange announce = change(ChangeKind::kTermStart);
  announce.origin = {1, 7, 0};
  announce.change.id = "192.0.2.11:11400";
  announce.change.name = "192.0.2.11:11213";
  announce.change.lock_tls_address = "192.0.2.11:11401";
  LockMachine leader = machine(1);
  apply_log(leader, {{open(kSecretA)}, {announce}});

  LockMachine joined = machine(4);
  ASSERT_TRUE(joined.restore(leader.snapshot()));
  consensus::RaftStatus following;
  following.role = consensus::Role::kFollower;
  following.leader_id = 1;
  joined.on_status(following);
  EXPECT_EQ(joined.leader_addresses().lock, "192.0.2.11:11400");
  EXPECT_EQ(joined.leader_addresses().replication, "192.0.2.11:11213");
  EXPECT_EQ(joined.leader_addresses().lock_tls, "192.0.2.11:11401");
  // A change it cannot make (it does not lead) names both lock addresses.
  locks::Change lock;
  lock.kind = ChangeKind::kAcquire;
  lock.serial = "1";
  lock.name = "n";
  locks::Outcome refused = joined.submit(std::move(lock), [](const locks::Outcome&) {});
  EXPECT_EQ(refused.status, locks::OutcomeStatus::kNotLeader);
  EXPECT_EQ(refused.leader, "192.0.2.11:11400");
  EXPECT_EQ(refused.leader_tls, "192.0.2.11:11401");
}

// Format 3 added the leader's TLS lock address to a term's first entry; an
// entry of format 2 still decodes, with none.
TEST(LockLog, ATermsFirstEntryKeepsTheLeadersTlsAddressAndOlderFormatsLoad) {
  LoggedChange start = change(ChangeKind::kTermStart);
  start.change.id = "192.0.2.11:11400";
  start.change.name = "192.0.2.11:11213";
  start.change.lock_tls_address = "192.0.2.11:11401";
  start.change.grace_floor_ms = 900;
  std::optional<LoggedChange> back = decode_change(encode(start));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, start);
  EXPECT_EQ(back->change.lock_tls_address, "192.0.2.11:11401");

  start.change.lock_tls_address.clear();
  std::string older = encode(start);
  older.resize(older.size() - 4);  // format 3's TLS lock address: ""
  older[0] = 2;
  back = decode_change(older);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->change.grace_floor_ms, 900);
  EXPECT_EQ(back->change.lock_tls_address, "");
  EXPECT_FALSE(decode_change(older.substr(0, older.size() - 1)));
}

// A change for a session that is gone changes nothing, on every member.
TEST(LockMachine, AChangeForAnEndedSessionChangesNothing) {
  LockMachine member = machine(1);
  apply_log(member, busy_log());
  locks::FullState before = member.service().export_state();
  apply_log(member, {{change(ChangeKind::kAcquire, "1", "x")}, {change(ChangeKind::kRelease, "1", "m")}},
            busy_log().size() + 1);
  locks::FullState after = member.service().export_state();
  EXPECT_EQ(after.locks.size(), before.locks.size());
  EXPECT_EQ(after.sessions.size(), before.sessions.size());
}

// A server detaches its stopped node while lock-service connections still
// close on worker threads, each submitting its detach: they are refused (no
// node, so no leader), and the node pointer is read and cleared without a
// data race (stage 20's ThreadSanitizer once caught a plain pointer here).
TEST(LockMachine, ChangesSubmittedWhileTheNodeIsDetachedAreRefused) {
  LockMachine member = machine(1);
  std::atomic<bool> submitting{false};
  locks::Outcome refused;
  std::thread closing([&] {
    submitting.store(true);
    locks::Change detach;
    detach.kind = ChangeKind::kRelease;
    detach.serial = "1";
    detach.name = "n";
    refused = member.submit(std::move(detach), [](const locks::Outcome&) {});
  });
  while (!submitting.load())
    std::this_thread::yield();
  member.attach(nullptr);
  closing.join();
  EXPECT_EQ(refused.status, locks::OutcomeStatus::kNotLeader);
}

}  // namespace
}  // namespace lockcached::cluster
