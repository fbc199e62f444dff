// Unit tests of the lock service's replication (issue 16), without sockets:
// the service's change hook, the lock frames, the replica's LockMirror and
// the promotion (LockService::adopt), joined as a master LockService ->
// ReplicaBuffer -> bytes -> Applier -> LockMirror -> new master.
#include <endian.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <latch>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "lockcached/locks/lock_change_listener.h"
#include "lockcached/locks/lock_service.h"
#include "lockcached/replication/applier.h"
#include "lockcached/replication/lock_mirror.h"
#include "lockcached/replication/lock_stream.h"
#include "lockcached/replication/replica_buffer.h"
#include "lockcached/store/clock.h"
#include "lockcached/store/store.h"

namespace lockcached::replication {
namespace {

using locks::LockService;
using locks::LockState;
using locks::Session;
using locks::WaitTicket;

constexpr size_t kBufferLimit = size_t{64} << 20;

store::StoreConfig small_store() {
  store::StoreConfig config;
  config.memory_limit = size_t{4} << 20;
  config.shard_count = 2;
  return config;
}

// The tests' own count of the largest token handed out.
void note_token(std::atomic<uint64_t>* high_water, uint64_t token) {
  uint64_t seen = high_water->load();
  while (seen < token && !high_water->compare_exchange_weak(seen, token)) {
  }
}

// A ticket whose grant is noted in *high_water (from whichever thread
// releases the lock).
std::shared_ptr<WaitTicket> ticket(const std::shared_ptr<Session>& session, std::string name,
                                   std::atomic<uint64_t>* high_water) {
  auto wait = std::make_shared<WaitTicket>();
  wait->session = session;
  wait->name = std::move(name);
  wait->on_grant = [high_water](uint64_t token) { note_token(high_water, token); };
  return wait;
}

// The master's state as the service itself shows it: `sessions` are the
// live ones (the caller keeps track), the locks come from list(), which
// names a holder by its public id; the stream carries whole ids.
LockState master_state(const LockService& service,
                       const std::vector<std::shared_ptr<Session>>& sessions, uint64_t high_water) {
  LockState state;
  std::unordered_map<std::string, std::string> whole_ids;
  for (const std::shared_ptr<Session>& session : sessions) {
    std::lock_guard lock(session->mutex);
    state.sessions[session->id] = {session->grace_ms, session->held};
    whole_ids[std::string(session->public_id())] = session->id;
  }
  for (const locks::LockInfo& info : service.list("")) {
    state.locks[info.name] = {whole_ids[info.session], info.token};
  }
  state.token_high_water = high_water;
  return state;
}

// Random use of the service as connections make it, on few names so that
// they collide: sessions come and go (detach, resume, expire, discard),
// locks are taken, waited for, handed over and released, graces change.
// Waits are cancelled before a detach, as the protocol does.
class RandomLockChanges {
 public:
  RandomLockChanges(LockService& service, uint32_t seed, uint32_t names,
                    std::atomic<uint64_t>* high_water)
      : service_(service), rng_(seed), names_(names), high_water_(high_water) {}

  void step() {
    switch (pick(12)) {
      case 0:
        if (clients_.size() < 8) clients_.push_back({service_.create_session(), true, 0, {}});
        break;
      case 1:
      case 2:
        if (Client* client = attached()) {
          auto acquired = service_.try_acquire(client->session, name());
          if (acquired.granted) note_token(high_water_, acquired.token);
        }
        break;
      case 3:
        if (Client* client = attached()) wait(*client);
        break;
      case 4:
      case 5:
        if (Client* client = attached()) service_.release(client->session, name());
        break;
      case 6:
        if (Client* client = attached()) service_.release_all(client->session);
        break;
      case 7:
        if (Client* client = attached()) service_.set_grace(client->session, grace());
        break;
      case 8:
        if (Client* client = attached()) detach(*client);
        break;
      case 9:
        resume();
        break;
      case 10:
        expire();
        break;
      default:
        if (Client* client = attached()) discard(*client);
        break;
    }
  }

  // Every session this driver knows to be in the registry.
  void live(std::vector<std::shared_ptr<Session>>& sessions) const {
    for (const Client& client : clients_)
      sessions.push_back(client.session);
  }

 private:
  struct Client {
    std::shared_ptr<Session> session;
    bool attached = true;
    uint64_t detachment = 0;
    std::vector<std::shared_ptr<WaitTicket>> tickets;
  };

  uint32_t pick(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng_); }
  std::string name() { return "lock" + std::to_string(pick(names_)); }
  int64_t grace() {
    static constexpr int64_t kGraces[] = {0, 500, 30000};
    return kGraces[pick(3)];
  }

  Client* attached() {
    if (clients_.empty()) return nullptr;
    Client& client = clients_[pick(static_cast<uint32_t>(clients_.size()))];
    return client.attached ? &client : nullptr;
  }

  Client* detached() {
    if (clients_.empty()) return nullptr;
    Client& client = clients_[pick(static_cast<uint32_t>(clients_.size()))];
    return client.attached ? nullptr : &client;
  }

  void wait(Client& client) {
    auto wait = ticket(client.session, name(), high_water_);
    auto acquired = service_.acquire_or_wait(wait);
    if (acquired.granted) return note_token(high_water_, acquired.token);
    if (acquired.limit == locks::Limit::kNone) client.tickets.push_back(std::move(wait));
  }

  // A granted ticket's cancel finds nothing: its lock stays held.
  void cancel_waits(Client& client) {
    for (const std::shared_ptr<WaitTicket>& wait : client.tickets)
      service_.cancel_wait(*wait, false);
    client.tickets.clear();
  }

  void remove(Client& client) {
    if (&client != &clients_.back()) client = std::move(clients_.back());
    clients_.pop_back();
  }

  void detach(Client& client) {
    cancel_waits(client);
    client.attached = false;
    if (service_.detach(client.session, &client.detachment) <= 0) remove(client);
  }

  void resume() {
    if (Client* client = detached()) {
      ASSERT_EQ(service_.resume_session(client->session->id), client->session);
      client->attached = true;
    }
  }

  void expire() {
    if (Client* client = detached()) {
      service_.expire(client->session, client->detachment);
      remove(*client);
    }
  }

  // As `conn_id` does with the connection's own session, which holds nothing.
  void discard(Client& client) {
    cancel_waits(client);
    {
      std::lock_guard lock(client.session->mutex);
      if (!client.session->held.empty()) return;
    }
    service_.discard_session(client.session);
    remove(client);
  }

  LockService& service_;
  std::mt19937 rng_;
  const uint32_t names_;
  std::atomic<uint64_t>* high_water_;
  std::vector<Client> clients_;
};

// A listener that writes down what it is told, for the hook's tests.
class RecordingListener final : public locks::LockChangeListener {
 public:
  void on_session(std::string_view id, int64_t grace_ms) override {
    events.push_back("session " + std::string(id) + " " + std::to_string(grace_ms));
  }
  void on_session_end(std::string_view id) override { events.push_back("end " + std::string(id)); }
  void on_grant(std::string_view name, std::string_view session_id, uint64_t token) override {
    events.push_back("grant " + std::string(name) + " " + std::string(session_id) + " " +
                     std::to_string(token));
  }
  void on_release(std::string_view name, std::string_view session_id) override {
    events.push_back("release " + std::string(name) + " " + std::string(session_id));
  }
  void on_token_floor(uint64_t token) override {
    events.push_back("floor " + std::to_string(token));
  }
  std::vector<std::string> events;
};

// ---- The service's hook ----

class LockReplicationHookTest : public ::testing::Test {
 protected:
  LockReplicationHookTest() : service_({}, 100) { service_.set_change_listener(&listener_); }
  ~LockReplicationHookTest() override { service_.set_change_listener(nullptr); }

  std::vector<std::string> take() { return std::exchange(listener_.events, {}); }

  LockService service_;
  RecordingListener listener_;
};

TEST_F(LockReplicationHookTest, SessionsGrantsAndReleasesAreReported) {
  auto a = service_.create_session();
  service_.set_grace(a, 5000);
  ASSERT_TRUE(service_.try_acquire(a, "x").granted);
  ASSERT_TRUE(service_.try_acquire(a, "x").granted);  // already held: no change
  ASSERT_TRUE(service_.release(a, "x"));
  EXPECT_FALSE(service_.release(a, "x"));
  EXPECT_EQ(take(),
            (std::vector<std::string>{"session " + a->id + " 30000", "session " + a->id + " 5000",
                                      "grant x " + a->id + " 101", "release x " + a->id}));
}

TEST_F(LockReplicationHookTest, HandOverReportsTheReleaseThenTheWaitersGrant) {
  std::atomic<uint64_t> high_water{0};
  auto a = service_.create_session();
  auto b = service_.create_session();
  ASSERT_TRUE(service_.try_acquire(a, "x").granted);
  ASSERT_FALSE(service_.acquire_or_wait(ticket(b, "x", &high_water)).granted);
  take();
  ASSERT_TRUE(service_.release(a, "x"));
  EXPECT_EQ(high_water.load(), 102u);
  EXPECT_EQ(take(), (std::vector<std::string>{"release x " + a->id, "grant x " + b->id + " 102"}));
}

TEST_F(LockReplicationHookTest, SessionEndsAreReportedWhenTheSessionLeaves) {
  auto a = service_.create_session();
  auto b = service_.create_session();
  auto c = service_.create_session();
  ASSERT_TRUE(service_.try_acquire(a, "x").granted);
  ASSERT_TRUE(service_.try_acquire(b, "y").granted);
  take();
  // Grace 0: the locks go at once, then the session.
  service_.set_grace(a, 0);
  uint64_t detachment;
  EXPECT_EQ(service_.detach(a, &detachment), 0);
  // Expiry: the session ends, then its locks are released.
  EXPECT_GT(service_.detach(b, &detachment), 0);
  service_.expire(b, detachment);
  service_.discard_session(c);
  service_.set_grace(c, 10);  // an ended session stays ended
  EXPECT_EQ(take(), (std::vector<std::string>{"session " + a->id + " 0", "release x " + a->id,
                                              "end " + a->id, "end " + b->id, "release y " + b->id,
                                              "end " + c->id}));
}

TEST_F(LockReplicationHookTest, DetachWithGraceAndResumeAreNotReported) {
  auto a = service_.create_session();
  ASSERT_TRUE(service_.try_acquire(a, "x").granted);
  take();
  uint64_t detachment;
  ASSERT_GT(service_.detach(a, &detachment), 0);
  ASSERT_EQ(service_.resume_session(a->id), a);
  service_.expire(a, detachment);  // stale: nothing happens
  EXPECT_TRUE(take().empty());
}

TEST_F(LockReplicationHookTest, NoReportsAfterTheListenerIsRemoved) {
  service_.set_change_listener(nullptr);
  auto a = service_.create_session();
  service_.set_grace(a, 1);
  ASSERT_TRUE(service_.try_acquire(a, "x").granted);
  service_.release_all(a);
  service_.discard_session(a);
  EXPECT_TRUE(take().empty());
}

TEST_F(LockReplicationHookTest, SnapshotSendsTheFloorSessionsThenLocks) {
  auto a = service_.create_session();
  ASSERT_TRUE(service_.try_acquire(a, "x").granted);
  ASSERT_TRUE(service_.release(a, "x"));  // token 101 handed out, nothing held
  ASSERT_TRUE(service_.try_acquire(a, "y").granted);
  take();
  RecordingListener out;
  uint64_t cursor = 0;
  int pieces = 0;
  while (cursor != LockService::kSnapshotDone) {
    cursor = service_.snapshot(cursor, out);
    ++pieces;
  }
  EXPECT_EQ(pieces, 65);  // sessions, then 64 shards
  EXPECT_EQ(out.events, (std::vector<std::string>{"floor 102", "session " + a->id + " 30000",
                                                  "grant y " + a->id + " 102"}));
}

// ---- Frames ----

uint64_t u64_at(std::string_view bytes, size_t at) {
  uint64_t big;
  std::memcpy(&big, bytes.data() + at, 8);
  return be64toh(big);
}

TEST(LockReplicationFrameTest, GrantCarriesTokenNameAndSession) {
  std::string frame;
  LockStreamEncoder::append_grant("name", "sid", 0x0102030405060708, frame);
  ASSERT_EQ(frame.size(), 24u + 8 + 4 + 3);
  EXPECT_EQ(static_cast<uint8_t>(frame[0]), 0x80);
  EXPECT_EQ(static_cast<uint8_t>(frame[1]), 0xe2);
  EXPECT_EQ(frame.substr(2, 2), std::string("\0\4", 2));        // key length
  EXPECT_EQ(frame[4], 8);                                       // extras
  EXPECT_EQ(frame.substr(8, 4), std::string("\0\0\0\x0f", 4));  // body
  EXPECT_EQ(frame.substr(12, 12), std::string(12, '\0'));       // opaque, CAS
  EXPECT_EQ(u64_at(frame, 24), 0x0102030405060708u);
  EXPECT_EQ(frame.substr(32), "namesid");
}

// ---- The replica's side ----

// A replica: its store, and the mirror its applier feeds.
struct Replica {
  store::ManualClock clock;
  store::Store store{small_store(), clock};
  LockMirror mirror;
  Applier applier{store, &mirror};
};

// One replica's buffer, the master's listener for as long as it lives.
struct Feed {
  explicit Feed(LockService& service) : master(service) { master.set_change_listener(&buffer); }
  ~Feed() { master.set_change_listener(nullptr); }
  LockService& master;
  store::ManualClock clock;  // for the cache frames' encoder
  ReplicaBuffer buffer{clock, kBufferLimit};
};

// Moves what the buffer holds into the replica.
void deliver(ReplicaBuffer& buffer, Replica& replica) {
  std::string bytes;
  ASSERT_TRUE(buffer.take(bytes)) << "replica buffer overflowed";
  ASSERT_TRUE(replica.applier.feed(bytes)) << replica.applier.error();
}

// A header with the given fields (the writer's own layout is checked by
// the frame tests above), followed by `body`.
std::string frame(uint8_t opcode, uint16_t key_length, uint8_t extras_length,
                  std::string_view body) {
  std::string bytes;
  wire::append_request_header(opcode, key_length, extras_length, body.size(), bytes);
  return bytes.append(body);
}

TEST(LockReplicationApplierTest, MalformedLockFramesAreRefusedAndStayRefused) {
  std::string eight(8, '\0');
  std::string negative_grace = frame(0xe0, 1, 8, "\x80" + std::string(7, '\0') + "s");
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"session without id", frame(0xe0, 0, 8, eight)},
      {"session without grace", frame(0xe0, 1, 0, "s")},
      {"session with a value", frame(0xe0, 1, 8, eight + "sv")},
      {"session end with extras", frame(0xe1, 1, 8, eight + "s")},
      {"grant without session", frame(0xe2, 1, 8, eight + "n")},
      {"grant without token", frame(0xe2, 1, 0, "ns")},
      {"grant with a long session id", frame(0xe2, 1, 8, eight + "n" + std::string(251, 's'))},
      {"grant with a long name", frame(0xe2, 251, 8, eight + std::string(251, 'n') + "s")},
      {"grant with token 0", frame(0xe2, 1, 8, eight + "ns")},
      {"release with extras", frame(0xe3, 1, 8, eight + "ns")},
      {"release without session", frame(0xe3, 1, 0, "n")},
      {"token floor with a key", frame(0xe4, 1, 8, eight + "k")},
      {"negative grace", negative_grace},
      {"opcode 0xe5, outside the lock stream", frame(0xe5, 0, 0, "")},
      {"unknown private opcode", frame(0xe6, 0, 0, "")},
  };
  for (const auto& [name, bytes] : cases) {
    Replica replica;
    EXPECT_FALSE(replica.applier.feed(bytes)) << name;
    EXPECT_FALSE(replica.applier.error().empty()) << name;
    std::string good;
    LockStreamEncoder::append_session("s", 1, good);
    EXPECT_FALSE(replica.applier.feed(good)) << name << ": must stay refused";
    EXPECT_EQ(replica.mirror.state(), LockState{}) << name;
    EXPECT_EQ(replica.applier.bytes_applied(), 0u) << name;
  }
}

TEST(LockReplicationApplierTest, OversizedLockFrameIsRefusedFromTheHeaderAlone) {
  std::string header = frame(0xe2, 1, 8, "");
  uint32_t body = htobe32(8 + 1 + 251);  // one byte more than the longest id
  std::memcpy(&header[8], &body, 4);
  Replica replica;
  ASSERT_TRUE(replica.applier.feed(header.substr(0, 20)));
  EXPECT_FALSE(replica.applier.feed(header.substr(20)));
  EXPECT_LE(replica.applier.buffered(), 24u);
}

TEST(LockReplicationApplierTest, WithoutAMirrorLockFramesAreRefused) {
  std::vector<std::string> frames(5);
  LockStreamEncoder::append_session("s", 1, frames[0]);
  LockStreamEncoder::append_session_end("s", frames[1]);
  LockStreamEncoder::append_grant("n", "s", 1, frames[2]);
  LockStreamEncoder::append_release("n", "s", frames[3]);
  LockStreamEncoder::append_token_floor(1, frames[4]);
  for (const std::string& bytes : frames) {
    store::ManualClock clock;
    store::Store store(small_store(), clock);
    Applier plain(store);
    EXPECT_FALSE(plain.feed(bytes)) << static_cast<int>(static_cast<uint8_t>(bytes[1]));
    Replica replica;  // the same frame is fine with a mirror
    EXPECT_TRUE(replica.applier.feed(bytes)) << replica.applier.error();
  }
}

// ---- Master -> stream -> replica ----

// A fixed history with every kind of change: sessions that end in each
// way, a grace change, a hand-over to a waiter.
struct ScriptedMaster {
  ScriptedMaster(LockService& service, std::atomic<uint64_t>* high_water) {
    auto a = service.create_session();
    auto b = service.create_session();
    auto c = service.create_session();
    auto d = service.create_session();
    service.set_grace(a, 5000);
    for (const char* name : {"x", "y", "w"})
      note_token(high_water, service.try_acquire(a, name).token);
    EXPECT_FALSE(service.acquire_or_wait(ticket(b, "x", high_water)).granted);
    note_token(high_water, service.try_acquire(c, "z").token);
    service.release(a, "x");  // b gets x
    service.release(a, "w");
    service.set_grace(c, 0);
    uint64_t detachment;
    service.detach(c, &detachment);  // z goes with c
    service.detach(a, &detachment);  // a keeps y in grace
    service.discard_session(d);
    live = {a, b};
  }
  std::vector<std::shared_ptr<Session>> live;
};

TEST(LockReplicationStreamTest, EverySplitPointYieldsTheMasterState) {
  LockService master;
  Feed feed(master);
  std::atomic<uint64_t> high_water{0};
  ScriptedMaster script(master, &high_water);
  const LockState expected = master_state(master, script.live, high_water.load());
  ASSERT_EQ(expected.locks.size(), 2u);  // b holds x, a holds y
  std::string stream;
  ASSERT_TRUE(feed.buffer.take(stream));
  ASSERT_EQ(feed.buffer.appended(), stream.size());

  for (size_t split = 0; split <= stream.size(); ++split) {
    Replica replica;
    ASSERT_TRUE(replica.applier.feed(std::string_view(stream).substr(0, split))) << split;
    EXPECT_LE(replica.applier.bytes_applied(), split);
    EXPECT_EQ(replica.applier.bytes_applied() + replica.applier.buffered(), split);
    ASSERT_TRUE(replica.applier.feed(std::string_view(stream).substr(split))) << split;
    EXPECT_EQ(replica.applier.bytes_applied(), stream.size());
    EXPECT_EQ(replica.mirror.state(), expected) << "split at " << split;
  }
}

class LockReplicationRandomTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(LockReplicationRandomTest, ReplicaFollowsRandomChangesFedInRandomPieces) {
  LockService master;
  Feed feed(master);
  std::atomic<uint64_t> high_water{0};
  RandomLockChanges changes(master, GetParam(), 12, &high_water);
  Replica replica;
  std::mt19937 cuts(GetParam() + 1000);
  std::string pending;
  size_t checks = 0;
  for (int i = 0; i < 5000; ++i) {
    changes.step();
    std::string bytes;
    ASSERT_TRUE(feed.buffer.take(bytes));
    pending += bytes;
    size_t cut = std::uniform_int_distribution<size_t>(0, pending.size())(cuts);
    ASSERT_TRUE(replica.applier.feed(std::string_view(pending).substr(0, cut)))
        << replica.applier.error();
    pending.erase(0, cut);
    if (i % 250 == 249) {
      ASSERT_TRUE(replica.applier.feed(pending));
      pending.clear();
      std::vector<std::shared_ptr<Session>> live;
      changes.live(live);
      ASSERT_EQ(master.stats().sessions, live.size());
      ASSERT_EQ(replica.mirror.state(), master_state(master, live, high_water.load()))
          << "after " << i + 1;
      ++checks;
    }
  }
  EXPECT_EQ(checks, 20u);
  EXPECT_EQ(replica.applier.bytes_applied(), feed.buffer.appended());
  EXPECT_FALSE(replica.mirror.state().locks.empty());  // the comparison compared something
  EXPECT_GT(master.stats().grants, 100u);
}

// A new replica of a master with a history: the snapshot, interleaved with
// more changes, yields the master's state.
TEST_P(LockReplicationRandomTest, SnapshotInterleavedWithChangesYieldsTheMaster) {
  LockService master({}, 1000);
  std::atomic<uint64_t> high_water{1000};
  RandomLockChanges before(master, GetParam(), 300, &high_water);
  for (int i = 0; i < 3000; ++i)
    before.step();
  Replica replica;
  Feed feed(master);  // the rule: the listener before the first piece
  RandomLockChanges during(master, GetParam() + 1, 300, &high_water);
  for (uint64_t cursor = 0; cursor != LockService::kSnapshotDone;) {
    cursor = master.snapshot(cursor, feed.buffer);
    // Most sessions of the history keep what they hold during the walk.
    before.step();
    for (int i = 0; i < 20; ++i)
      during.step();
    if (cursor % 4 == 0) deliver(feed.buffer, replica);  // the replica lags
  }
  deliver(feed.buffer, replica);
  std::vector<std::shared_ptr<Session>> live;
  before.live(live);
  during.live(live);
  ASSERT_EQ(master.stats().sessions, live.size());
  LockState expected = master_state(master, live, high_water.load());
  EXPECT_GT(expected.locks.size(), 5u);
  EXPECT_EQ(replica.mirror.state(), expected);
}

// The negative of the rule: a snapshot with no stream while it runs misses
// what changed behind the walk. Shows the comparison can fail.
TEST_P(LockReplicationRandomTest, SnapshotWithoutTheStreamMissesChanges) {
  LockService master;
  std::atomic<uint64_t> high_water{0};
  RandomLockChanges changes(master, GetParam(), 300, &high_water);
  for (int i = 0; i < 3000; ++i)
    changes.step();
  LockMirror mirror;
  for (uint64_t cursor = 0; cursor != LockService::kSnapshotDone;) {
    cursor = master.snapshot(cursor, mirror);
    for (int i = 0; i < 20; ++i)
      changes.step();
  }
  std::vector<std::shared_ptr<Session>> live;
  changes.live(live);
  EXPECT_NE(mirror.state(), master_state(master, live, high_water.load()));
}

INSTANTIATE_TEST_SUITE_P(LockReplication, LockReplicationRandomTest,
                         ::testing::Values(1u, 2u, 3u, 42u));

TEST(LockReplicationStreamTest, HighWaterMarkReachesAReplicaWithNoLockHeld) {
  for (bool granted_once : {false, true}) {
    LockService master({}, 5000);
    if (granted_once) {
      auto session = master.create_session();
      ASSERT_EQ(master.try_acquire(session, "x").token, 5001u);
      ASSERT_TRUE(master.release(session, "x"));
      master.discard_session(session);
    }
    Feed feed(master);
    for (uint64_t cursor = 0; cursor != LockService::kSnapshotDone;)
      cursor = master.snapshot(cursor, feed.buffer);
    Replica replica;
    deliver(feed.buffer, replica);
    EXPECT_TRUE(replica.mirror.state().locks.empty());
    EXPECT_TRUE(replica.mirror.state().sessions.empty());
    EXPECT_EQ(replica.mirror.state().token_high_water, granted_once ? 5001u : 5000u);
  }
}

// Cache and lock frames share one buffer and one applier: one stream per
// replica, whose position the master and the replica count alike.
TEST(LockReplicationStreamTest, CacheAndLockFramesShareOneStream) {
  store::ManualClock clock;
  store::Store cache(small_store(), clock);
  LockService locks;
  ReplicaBuffer buffer(clock, kBufferLimit);
  cache.set_change_listener(&buffer);
  locks.set_change_listener(&buffer);
  Replica replica;
  auto session = locks.create_session();
  store::ItemRef item = cache.allocate("key", 0, 0, 1);
  item->value()[0] = 'v';
  cache.store(store::StoreCommand::kSet, item, 0, store::kNoOwner);
  uint64_t token = locks.try_acquire(session, "lock").token;
  const uint64_t after_grant = buffer.appended();
  cache.remove("key", 0, store::kNoOwner);
  // What the grant's client waits for: the end of the last lock frame, not
  // of the cache frame behind it, which the replica may ack later.
  EXPECT_EQ(buffer.lock_appended(), after_grant);

  std::string bytes;
  ASSERT_TRUE(buffer.take(bytes));
  EXPECT_EQ(buffer.appended(), bytes.size());
  EXPECT_EQ(buffer.size(), 0u);
  EXPECT_EQ(buffer.appended(), after_grant + 24 + 3);  // then the DeleteQ
  ASSERT_TRUE(replica.applier.feed(std::string_view(bytes).substr(0, after_grant)));
  EXPECT_EQ(replica.applier.bytes_applied(), after_grant);  // the ack the grant waits for
  EXPECT_TRUE(replica.store.get("key"));
  EXPECT_EQ(replica.mirror.state().locks.at("lock"), (locks::LockOwner{session->id, token}));
  ASSERT_TRUE(replica.applier.feed(std::string_view(bytes).substr(after_grant)));
  EXPECT_FALSE(replica.store.get("key"));
  EXPECT_EQ(replica.applier.bytes_applied(), buffer.appended());

  locks.release(session, "lock");  // appended() goes on across take()
  EXPECT_GT(buffer.appended(), bytes.size());
  EXPECT_EQ(buffer.lock_appended(), buffer.appended());
  cache.set_change_listener(nullptr);
  locks.set_change_listener(nullptr);
}

// Forwards every call to `out`; on a session's end, holds the ending thread
// there (inside expire, before it releases the session's locks) until
// `walked`: the moment a snapshot's walk can pass the session's names.
class PausingListener final : public locks::LockChangeListener {
 public:
  PausingListener(locks::LockChangeListener& out, std::latch& ended, std::latch& walked)
      : out_(out), ended_(ended), walked_(walked) {}
  void on_session(std::string_view id, int64_t grace_ms) override { out_.on_session(id, grace_ms); }
  void on_session_end(std::string_view id) override {
    out_.on_session_end(id);
    ended_.count_down();
    walked_.wait();
  }
  void on_grant(std::string_view name, std::string_view session_id, uint64_t token) override {
    out_.on_grant(name, session_id, token);
  }
  void on_release(std::string_view name, std::string_view session_id) override {
    out_.on_release(name, session_id);
  }
  void on_token_floor(uint64_t token) override { out_.on_token_floor(token); }

 private:
  locks::LockChangeListener& out_;
  std::latch& ended_;
  std::latch& walked_;
};

// The race LockMirror::on_grant ignores unknown sessions for: a session
// ends, and a snapshot's walk sends its lock before expire releases it.
TEST(LockReplicationStreamTest, WalkThatSeesAnEndedSessionsLockLeavesNoTrace) {
  LockService master;
  auto session = master.create_session();
  ASSERT_TRUE(master.try_acquire(session, "x").granted);
  uint64_t detachment;
  ASSERT_GT(master.detach(session, &detachment), 0);
  store::ManualClock clock;
  ReplicaBuffer buffer(clock, kBufferLimit);
  std::latch ended(1);
  std::latch walked(1);
  PausingListener pausing(buffer, ended, walked);
  master.set_change_listener(&pausing);
  uint64_t cursor = master.snapshot(0, pausing);  // the session, in grace
  std::thread expiry([&] { master.expire(session, detachment); });
  ended.wait();
  while (cursor != LockService::kSnapshotDone)
    cursor = master.snapshot(cursor, pausing);
  walked.count_down();
  expiry.join();
  master.set_change_listener(nullptr);
  std::string bytes;
  ASSERT_TRUE(buffer.take(bytes));
  // The walk's grant fell between the session's end and its release.
  store::Store store(small_store(), clock);
  RecordingListener heard;
  Applier decoder(store, &heard);
  ASSERT_TRUE(decoder.feed(bytes));
  const std::string id = session->id;
  ASSERT_EQ(heard.events,
            (std::vector<std::string>{"floor 1", "session " + id + " 30000", "end " + id,
                                      "grant x " + id + " 1", "release x " + id}));
  Replica replica;
  ASSERT_TRUE(replica.applier.feed(bytes));
  EXPECT_TRUE(replica.mirror.state().sessions.empty());
  EXPECT_TRUE(replica.mirror.state().locks.empty());
  EXPECT_EQ(replica.mirror.state().token_high_water, 1u);
}

// Threads change the master while the snapshot runs and the replica
// applies what arrives: the case the lock rules are for (and the one TSan
// checks). Hand-overs cross threads: one thread's release grants another's
// waiter.
TEST(LockReplicationConcurrentTest, SnapshotWhileOtherThreadsChangeLocks) {
  LockService master({}, 77);
  std::atomic<uint64_t> high_water{77};
  RandomLockChanges before(master, 5, 40, &high_water);
  for (int i = 0; i < 2000; ++i)
    before.step();
  Replica replica;
  Feed feed(master);
  std::atomic<bool> snapshot_done{false};
  std::vector<RandomLockChanges> drivers;
  drivers.reserve(2);
  for (uint32_t seed : {6u, 7u})
    drivers.emplace_back(master, seed, 40, &high_water);
  std::vector<std::thread> threads;
  for (RandomLockChanges& driver : drivers) {
    threads.emplace_back([&driver, &snapshot_done] {
      int steps = 0;
      while (!snapshot_done.load() || steps < 5000) {
        driver.step();
        ++steps;
      }
    });
  }
  for (uint64_t cursor = 0; cursor != LockService::kSnapshotDone;) {
    cursor = master.snapshot(cursor, feed.buffer);
    deliver(feed.buffer, replica);
    std::this_thread::yield();
  }
  snapshot_done = true;
  for (std::thread& thread : threads)
    thread.join();
  deliver(feed.buffer, replica);
  std::vector<std::shared_ptr<Session>> live;
  before.live(live);
  for (const RandomLockChanges& driver : drivers)
    driver.live(live);
  ASSERT_EQ(master.stats().sessions, live.size());
  LockState expected = master_state(master, live, high_water.load());
  EXPECT_FALSE(expected.locks.empty());
  EXPECT_EQ(replica.mirror.state(), expected);
  EXPECT_EQ(replica.applier.bytes_applied(), feed.buffer.appended());
}

// ---- Promotion ----

class LockReplicationAdoptTest : public ::testing::Test {
 protected:
  // The old master: a holds x and y (grace 5 s, detached by the failover
  // or not: attachment is not replicated), b holds z with grace 0, c holds
  // nothing; token 2000 was the last handed out, and released.
  LockReplicationAdoptTest() : old_master_({}, 1000) {
    ReplicaBuffer buffer(clock_, kBufferLimit);
    old_master_.set_change_listener(&buffer);
    a_ = old_master_.create_session();
    b_ = old_master_.create_session();
    c_ = old_master_.create_session();
    old_master_.set_grace(a_, 5000);
    old_master_.set_grace(b_, 0);
    old_master_.set_grace(c_, 1000);
    x_token_ = old_master_.try_acquire(a_, "x").token;
    y_token_ = old_master_.try_acquire(a_, "y").token;
    old_master_.try_acquire(b_, "z");
    for (int i = 0; i < 997; ++i) {  // tokens 1004 to 2000
      old_master_.try_acquire(c_, "t");
      old_master_.release(c_, "t");
    }
    old_master_.set_change_listener(nullptr);
    std::string bytes;
    EXPECT_TRUE(buffer.take(bytes));
    EXPECT_TRUE(replica_.applier.feed(bytes)) << replica_.applier.error();
  }

  const locks::LockInfo* find(const std::vector<locks::LockInfo>& locks, std::string_view name) {
    for (const locks::LockInfo& lock : locks) {
      if (lock.name == name) return &lock;
    }
    return nullptr;
  }

  store::ManualClock clock_;
  LockService old_master_;
  Replica replica_;
  std::shared_ptr<Session> a_, b_, c_;
  uint64_t x_token_ = 0, y_token_ = 0;
};

TEST_F(LockReplicationAdoptTest, ResumedSessionGetsItsLocksAndTokensGoOnAboveTheMark) {
  ASSERT_EQ(replica_.mirror.state().token_high_water, 2000u);
  LockService promoted({}, 1500);  // its own floor is below the old master's tokens
  std::vector<LockService::Adopted> in_grace;
  ASSERT_TRUE(promoted.adopt(replica_.mirror.state(), &in_grace));
  // b (grace 0) ended at once; a and c wait in grace.
  ASSERT_EQ(in_grace.size(), 2u);
  for (const LockService::Adopted& adopted : in_grace) {
    EXPECT_EQ(adopted.detachment, 1u);
    EXPECT_EQ(adopted.grace_ms, adopted.session->id == a_->id ? 5000 : 1000);
  }
  EXPECT_EQ(promoted.stats().sessions, 2u);
  EXPECT_EQ(promoted.stats().sessions_in_grace, 2u);
  EXPECT_EQ(promoted.stats().locks, 2u);
  EXPECT_EQ(promoted.resume_session(b_->id), nullptr);

  std::vector<locks::LockInfo> locks = promoted.list("");
  ASSERT_EQ(locks.size(), 2u);
  ASSERT_NE(find(locks, "x"), nullptr);
  EXPECT_EQ(find(locks, "x")->token, x_token_);
  EXPECT_EQ(find(locks, "y")->token, y_token_);
  EXPECT_EQ(find(locks, "x")->session, a_->public_id());

  std::shared_ptr<Session> a = promoted.resume_session(a_->id);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->held, (std::unordered_set<std::string>{"x", "y"}));
  EXPECT_EQ(promoted.resume_session(a_->id), nullptr);  // attached now
  auto again = promoted.try_acquire(a, "x");            // its own lock, its old token
  EXPECT_TRUE(again.granted);
  EXPECT_EQ(again.token, x_token_);
  auto other = promoted.create_session();
  EXPECT_FALSE(promoted.try_acquire(other, "y").granted);
  EXPECT_EQ(promoted.try_acquire(other, "z").token, 2001u);  // b's z is free, above the mark
  EXPECT_TRUE(promoted.release(a, "x"));
}

TEST_F(LockReplicationAdoptTest, TokensStayAboveTheNewMastersOwnFloor) {
  LockService promoted({}, 9000);
  std::vector<LockService::Adopted> in_grace;
  ASSERT_TRUE(promoted.adopt(replica_.mirror.state(), &in_grace));
  auto session = promoted.create_session();
  EXPECT_EQ(promoted.try_acquire(session, "new").token, 9001u);
}

TEST_F(LockReplicationAdoptTest, ExpiryAfterTheGraceReleasesAdoptedLocks) {
  LockService promoted;
  std::vector<LockService::Adopted> in_grace;
  ASSERT_TRUE(promoted.adopt(replica_.mirror.state(), &in_grace));
  std::atomic<uint64_t> high_water{0};
  auto waiter = promoted.create_session();
  ASSERT_FALSE(promoted.acquire_or_wait(ticket(waiter, "x", &high_water)).granted);
  for (const LockService::Adopted& adopted : in_grace)
    promoted.expire(adopted.session, adopted.detachment);  // the grace timers fire
  EXPECT_EQ(high_water.load(), 2001u);                     // the re-queued waiter got x
  EXPECT_EQ(promoted.resume_session(a_->id), nullptr);
  EXPECT_EQ(promoted.resume_session(c_->id), nullptr);
  std::vector<locks::LockInfo> locks = promoted.list("");
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(locks[0].session, waiter->public_id());
  EXPECT_EQ(promoted.stats().sessions, 1u);
  EXPECT_EQ(promoted.stats().sessions_in_grace, 0u);
}

// The new master's own sessions must not take an adopted session's serial:
// the serial is what a resume looks a session up by.
TEST_F(LockReplicationAdoptTest, NewSessionsTakeSerialsNoAdoptedSessionHas) {
  LockService promoted;
  std::vector<LockService::Adopted> in_grace;
  ASSERT_TRUE(promoted.adopt(replica_.mirror.state(), &in_grace));
  std::unordered_set<std::string> serials{std::string(a_->public_id()),
                                          std::string(c_->public_id())};
  for (int i = 0; i < 4; ++i) {
    auto fresh = promoted.create_session();
    EXPECT_TRUE(serials.emplace(fresh->public_id()).second) << fresh->id;
  }
  EXPECT_EQ(promoted.stats().sessions, 6u);
  ASSERT_NE(promoted.resume_session(a_->id), nullptr);
  ASSERT_NE(promoted.resume_session(c_->id), nullptr);
}

// Only a broken stream sends two sessions with one serial; the registry,
// keyed by serial, keeps one of them, and it alone can be resumed.
TEST(LockAdoptionTest, OfTwoSessionsWithOneSerialOneIsAdopted) {
  const std::string first = "5-" + std::string(32, 'a'), second = "5-" + std::string(32, 'b');
  LockState state;
  state.sessions[first] = {1000, {"p"}};
  state.sessions[second] = {1000, {"q"}};
  state.locks["p"] = {first, 7};
  state.locks["q"] = {second, 8};
  LockService promoted;
  std::vector<LockService::Adopted> in_grace;
  ASSERT_TRUE(promoted.adopt(state, &in_grace));
  ASSERT_EQ(in_grace.size(), 1u);
  EXPECT_EQ(promoted.stats().sessions, 1u);
  EXPECT_EQ(promoted.stats().locks, 1u);
  const std::string& kept = in_grace[0].session->id;
  EXPECT_EQ(promoted.resume_session(kept == first ? second : first), nullptr);
  EXPECT_EQ(promoted.resume_session(kept), in_grace[0].session);
}

// An id without a secret (an older server's) keeps its locks through its
// grace, but nothing can resume it: there is no secret to check.
TEST(LockAdoptionTest, AnIdWithoutASecretIsAdoptedButCannotBeResumed) {
  LockState state;
  state.sessions["k3f9q2a"] = {1000, {"old"}};
  state.locks["old"] = {"k3f9q2a", 7};
  LockService promoted;
  std::vector<LockService::Adopted> in_grace;
  ASSERT_TRUE(promoted.adopt(state, &in_grace));
  ASSERT_EQ(in_grace.size(), 1u);
  EXPECT_EQ(promoted.stats().locks, 1u);
  EXPECT_EQ(promoted.resume_session("k3f9q2a"), nullptr);
  auto other = promoted.create_session();
  EXPECT_FALSE(promoted.try_acquire(other, "old").granted);
  promoted.expire(in_grace[0].session, in_grace[0].detachment);
  EXPECT_TRUE(promoted.try_acquire(other, "old").granted);
}

TEST_F(LockReplicationAdoptTest, OnlyAnEmptyServiceAdopts) {
  LockService busy;
  auto session = busy.create_session();
  std::vector<LockService::Adopted> in_grace;
  EXPECT_FALSE(busy.adopt(replica_.mirror.state(), &in_grace));
  EXPECT_TRUE(in_grace.empty());
  EXPECT_EQ(busy.stats().sessions, 1u);
  EXPECT_TRUE(busy.list("").empty());
}

// The new master's own replicas learn the adopted state: a second failover
// loses nothing either.
TEST_F(LockReplicationAdoptTest, AdoptionIsReportedToTheNewMastersListener) {
  LockService promoted;
  ReplicaBuffer buffer(clock_, kBufferLimit);
  promoted.set_change_listener(&buffer);
  std::vector<LockService::Adopted> in_grace;
  ASSERT_TRUE(promoted.adopt(replica_.mirror.state(), &in_grace));
  promoted.set_change_listener(nullptr);
  Replica next;
  deliver(buffer, next);
  LockState expected = replica_.mirror.state();
  expected.locks.erase("z");  // b ended with the failover
  expected.sessions.erase(b_->id);
  EXPECT_EQ(next.mirror.state(), expected);
}

}  // namespace
}  // namespace lockcached::replication
