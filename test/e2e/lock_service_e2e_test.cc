// End-to-end tests of the named-lock service (../shared/specs/lock-service.md):
// the real lockcached binary, spoken to over TCP on its lock port. Every test
// starts its own server on ports the kernel picks (--lock_port=-1), so that
// ctest may run them in parallel.
//
// Where a test needs a request to be waiting in the server before it goes on,
// it asks the server (the `waiters` stat) instead of sleeping.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <latch>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using e2e::Client;
using e2e::eventually;
using e2e::ServerProcess;
using e2e::session_serial;

// The server's timers count whole milliseconds: one may fire up to a
// millisecond before the exact instant the client measures from.
constexpr auto kTimerSlack = 2ms;
// How much later than asked a timed wait or a grace period may end.
constexpr auto kLateness = 3s;

std::chrono::milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
    return std::nullopt;
  }
  return value;
}

// The token of a "200 Acquired <token>" reply.
std::optional<uint64_t> acquired_token(std::string_view reply) {
  constexpr std::string_view kPrefix = "200 Acquired ";
  if (reply.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  return parse_u64(reply.substr(kPrefix.size()));
}

// As acquired_token, failing the current test on any other reply.
uint64_t expect_acquired(const std::string& reply) {
  std::optional<uint64_t> token = acquired_token(reply);
  if (!token) {
    ADD_FAILURE() << "expected \"200 Acquired <token>\", got \"" << e2e::escape(reply) << "\"";
    return 0;
  }
  return *token;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// One "LOCK <name> <session> <held_ms> <waiters> <token> <client>" line.
struct LockLine {
  std::string name;
  std::string session;
  uint64_t held_ms = 0;
  uint64_t waiters = 0;
  uint64_t token = 0;
  std::string client;  // the holder's "IP:PORT", or "detached"
};

std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> words;
  size_t start = 0;
  while (start <= line.size()) {
    size_t space = line.find(' ', start);
    if (space == std::string_view::npos) space = line.size();
    words.emplace_back(line.substr(start, space - start));
    start = space + 1;
  }
  return words;
}

class LockServiceE2e : public ::testing::Test {
 protected:
  void SetUp() override { start_server({"--threads=2"}); }

  void start_server(std::vector<std::string> flags) {
    // A later flag overrides the harness's --lock_port=0 (off).
    flags.insert(flags.begin(), "--lock_port=-1");
    ASSERT_TRUE(server_.start(flags));
    lock_port_ = server_.lock_port().value_or(0);
    ASSERT_NE(lock_port_, 0) << "no \"Listening on ...(lock service)\" line";
    ASSERT_NE(lock_port_, server_.port());
  }

  Client connect() {
    Client client;
    EXPECT_TRUE(client.connect(lock_port_));
    client.set_nodelay();
    return client;
  }

  // The session id, from "200 <id>".
  static std::string session_id(Client& client) {
    std::string reply = client.request("conn_id");
    EXPECT_TRUE(starts_with(reply, "200 ") && reply.size() > 4 &&
                reply.find(' ', 4) == std::string::npos)
        << reply;
    return reply.size() > 4 ? reply.substr(4) : "";
  }

  // What `stats locks` shows of the client's session: its serial.
  static std::string public_id(Client& client) { return session_serial(session_id(client)); }

  // "stats": the STAT lines in order, as name -> value; fails the test on a
  // malformed reply.
  static std::vector<std::pair<std::string, uint64_t>> stat_lines(Client& client) {
    std::vector<std::pair<std::string, uint64_t>> stats;
    std::string first = client.request("stats");
    EXPECT_EQ(first, "200 STATS");
    if (first != "200 STATS") return stats;
    while (true) {
      std::string line = client.read_line();
      if (line == "END") return stats;
      std::vector<std::string> words = split(line);
      std::optional<uint64_t> value = words.size() == 3 ? parse_u64(words[2]) : std::nullopt;
      if (words[0] != "STAT" || !value) {
        ADD_FAILURE() << "stats: unexpected line \"" << e2e::escape(line) << "\"";
        return stats;
      }
      // A plain copy: GCC 12 -O3 thinks *value may be uninitialized here.
      uint64_t number = value.value_or(0);
      stats.emplace_back(words[1], number);
    }
  }

  static std::map<std::string, uint64_t> stats(Client& client) {
    std::vector<std::pair<std::string, uint64_t>> lines = stat_lines(client);
    return {lines.begin(), lines.end()};
  }

  static uint64_t stat(Client& client, const std::string& name) {
    std::map<std::string, uint64_t> all = stats(client);
    auto found = all.find(name);
    if (found == all.end()) {
      ADD_FAILURE() << "no STAT " << name;
      return UINT64_MAX;
    }
    return found->second;
  }

  // Polls `observer` until STAT `name` is `value`.
  static ::testing::AssertionResult stat_becomes(Client& observer, const std::string& name,
                                                 uint64_t value) {
    uint64_t last = 0;
    if (eventually([&] { return (last = stat(observer, name)) == value; }, 10s, 20ms)) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "STAT " << name << " stayed " << last << ", expected " << value;
  }

  // "stats locks[ PREFIX]" parsed; fails the test on a malformed reply.
  static std::vector<LockLine> lock_list(Client& client, std::string_view prefix = "") {
    std::vector<LockLine> locks;
    std::string command = "stats locks";
    if (!prefix.empty()) command += " " + std::string(prefix);
    std::string first = client.request(command);
    EXPECT_EQ(first, "200 LOCKS") << command;
    if (first != "200 LOCKS") return locks;
    while (true) {
      std::string line = client.read_line();
      if (line == "END") return locks;
      std::vector<std::string> words = split(line);
      LockLine lock;
      bool ok = words.size() == 7 && words[0] == "LOCK";
      if (ok) {
        lock.name = words[1];
        lock.session = words[2];
        lock.client = words[6];
        std::optional<uint64_t> held_ms = parse_u64(words[3]);
        std::optional<uint64_t> waiters = parse_u64(words[4]);
        std::optional<uint64_t> token = parse_u64(words[5]);
        ok = held_ms && waiters && token;
        if (ok) {
          lock.held_ms = *held_ms;
          lock.waiters = *waiters;
          lock.token = *token;
        }
      }
      if (!ok) {
        ADD_FAILURE() << command << ": unexpected line \"" << e2e::escape(line) << "\"";
        return locks;
      }
      locks.push_back(lock);
    }
  }

  // The holder of `name` per "stats locks", or "" when it is free.
  static std::string holder_of(Client& client, const std::string& name) {
    for (const LockLine& lock : lock_list(client, name)) {
      if (lock.name == name) return lock.session;
    }
    return "";
  }

  // Sends a waiting lock request and returns once the server counts
  // `waiters_after` waiters in all, so that waits queue in a known order.
  static ::testing::AssertionResult queue_wait(Client& waiter, Client& observer,
                                               const std::string& name, std::string_view seconds,
                                               uint64_t waiters_after) {
    if (!waiter.send("lock " + name + " " + std::string(seconds) + "\r\n")) {
      return ::testing::AssertionFailure() << waiter.last_error();
    }
    return stat_becomes(observer, "waiters", waiters_after);
  }

  ServerProcess server_;
  uint16_t lock_port_ = 0;
};

// --- lock / unlock / unlock_all ------------------------------------------------

TEST_F(LockServiceE2e, LockAndUnlockReplies) {
  Client alice = connect();
  Client bob = connect();

  uint64_t token = expect_acquired(alice.request("lock x"));
  EXPECT_GT(token, 0u);
  EXPECT_EQ(alice.request("lock x"), "200 Acquired " + std::to_string(token))
      << "the holder acquires again, same grant";
  EXPECT_EQ(alice.request("lock x 5"), "200 Acquired " + std::to_string(token))
      << "a holder's wait is granted at once";
  EXPECT_EQ(bob.request("lock x"), "409 Unavailable");
  EXPECT_EQ(bob.request("lock x 0"), "409 Unavailable");
  EXPECT_EQ(bob.request("unlock x"), "403 Not held");
  EXPECT_EQ(bob.request("unlock free"), "403 Not held");
  EXPECT_EQ(alice.request("unlock x"), "200 Released");
  EXPECT_EQ(alice.request("unlock x"), "403 Not held") << "already released";
  uint64_t bobs = expect_acquired(bob.request("lock x"));
  EXPECT_GT(bobs, token);
  EXPECT_EQ(alice.request("lock x"), "409 Unavailable");
  EXPECT_TRUE(starts_with(alice.request("lock y 0"), "200 Acquired ")) << "0: a free lock";
}

TEST_F(LockServiceE2e, UnlockGrantsNextWaiterAtOnce) {
  Client holder = connect();
  Client waiter = connect();
  Client observer = connect();
  uint64_t first = expect_acquired(holder.request("lock n"));
  ASSERT_TRUE(queue_wait(waiter, observer, "n", "30", 1));

  Clock::time_point unlocked = Clock::now();
  EXPECT_EQ(holder.request("unlock n"), "200 Released");
  uint64_t second = expect_acquired(waiter.read_line());
  EXPECT_LT(since(unlocked), 2s) << "the wait ends with the unlock, not its timeout";
  EXPECT_GT(second, first);
  EXPECT_EQ(holder.request("lock n"), "409 Unavailable") << "never free in between";
  EXPECT_EQ(holder_of(observer, "n"), public_id(waiter));
  EXPECT_EQ(stat(observer, "waiters"), 0u);
}

TEST_F(LockServiceE2e, UnlockAllReleasesEverythingAndGrantsWaiters) {
  Client holder = connect();
  Client waiter = connect();
  Client other = connect();
  for (const char* name : {"u1", "u2", "u3"})
    expect_acquired(holder.request(std::string("lock ") + name));
  ASSERT_TRUE(queue_wait(waiter, other, "u2", "30", 1));

  EXPECT_EQ(holder.request("unlock_all"), "200 Released");
  expect_acquired(waiter.read_line());
  expect_acquired(other.request("lock u1"));
  expect_acquired(other.request("lock u3"));
  EXPECT_EQ(holder.request("unlock u1"), "403 Not held");
  EXPECT_EQ(holder.request("unlock_all"), "200 Released") << "nothing held is fine too";
  EXPECT_EQ(stat(other, "locks"), 3u);
}

// --- timed waits -----------------------------------------------------------------

TEST_F(LockServiceE2e, TimedWaitGivesUpAfterItsTimeout) {
  Client holder = connect();
  Client waiter = connect();
  expect_acquired(holder.request("lock t"));

  Clock::time_point start = Clock::now();
  EXPECT_EQ(waiter.request("lock t 1.5", 30s), "409 Unavailable");
  std::chrono::milliseconds elapsed = since(start);
  EXPECT_GE(elapsed, 1500ms - kTimerSlack);
  EXPECT_LT(elapsed, 1500ms + kLateness);

  start = Clock::now();
  EXPECT_EQ(waiter.request("lock t 0.25", 30s), "409 Unavailable") << "fractions allowed";
  elapsed = since(start);
  EXPECT_GE(elapsed, 250ms - kTimerSlack);
  EXPECT_LT(elapsed, 250ms + kLateness);

  start = Clock::now();
  EXPECT_EQ(waiter.request("lock t 0"), "409 Unavailable");
  EXPECT_LT(since(start), 1s) << "0 does not wait";

  // The connection is usable after its waits ran out, and the holder kept
  // the lock throughout.
  expect_acquired(waiter.request("lock other"));
  EXPECT_EQ(holder_of(waiter, "t"), public_id(holder));
  std::map<std::string, uint64_t> counters = stats(waiter);
  EXPECT_EQ(counters["timeouts"], 2u);
  EXPECT_EQ(counters["waiters"], 0u);
}

TEST_F(LockServiceE2e, WaitersAreGrantedInFifoOrder) {
  Client holder = connect();
  Client observer = connect();
  Client other = connect();
  std::vector<Client> waiters;
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    waiters.push_back(connect());
    ids.push_back(public_id(waiters.back()));
  }
  uint64_t last = expect_acquired(holder.request("lock q"));
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(queue_wait(waiters[i], observer, "q", "30", i + 1)) << "waiter " << i;
    // Other connections are served while the waits go on.
    expect_acquired(other.request("lock other" + std::to_string(i)));
    EXPECT_EQ(other.request("lock q"), "409 Unavailable");
  }
  std::vector<LockLine> locks = lock_list(observer, "q");
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(locks[0].waiters, 3u);

  EXPECT_EQ(holder.request("unlock q"), "200 Released");
  for (size_t i = 0; i < 3; ++i) {
    uint64_t token = expect_acquired(waiters[i].read_line());
    EXPECT_GT(token, last) << "waiter " << i;
    last = token;
    // Exactly this waiter holds it; the later ones still wait.
    locks = lock_list(observer, "q");
    ASSERT_EQ(locks.size(), 1u);
    EXPECT_EQ(locks[0].session, ids[i]) << "waiter " << i << " was to be granted";
    EXPECT_EQ(locks[0].waiters, 2 - i);
    EXPECT_EQ(locks[0].token, token);
    EXPECT_EQ(other.request("lock q"), "409 Unavailable") << "no barging past the queue";
    EXPECT_EQ(waiters[i].request("unlock q"), "200 Released");
  }
  EXPECT_TRUE(lock_list(observer, "q").empty());
}

TEST_F(LockServiceE2e, WaiterThatDisconnectsIsSkipped) {
  Client holder = connect();
  Client observer = connect();
  Client quitter = connect();
  Client resetter = connect();
  Client patient = connect();
  std::string patient_id = public_id(patient);
  expect_acquired(holder.request("lock w"));
  ASSERT_TRUE(queue_wait(quitter, observer, "w", "30", 1));
  ASSERT_TRUE(queue_wait(resetter, observer, "w", "30", 2));
  ASSERT_TRUE(queue_wait(patient, observer, "w", "30", 3));

  quitter.close();
  resetter.abort();
  ASSERT_TRUE(stat_becomes(observer, "waiters", 1)) << "the closed waits drop out";

  EXPECT_EQ(holder.request("unlock w"), "200 Released");
  expect_acquired(patient.read_line());
  EXPECT_EQ(holder_of(observer, "w"), patient_id);
  EXPECT_EQ(stat(observer, "locks"), 1u);
}

// The waiter hangs up just as the lock is released: whichever the server sees
// first, the next waiter must get the lock (the gone one's grace is 0, so a
// grant that reached it before it left ends with it).
TEST_F(LockServiceE2e, WaiterThatDisconnectsDuringReleaseDoesNotStrandTheLock) {
  Client holder = connect();
  Client observer = connect();
  Client leaving = connect();
  Client next = connect();
  EXPECT_EQ(leaving.request("set_timeout 0"), "200 Timeout set");
  std::string next_id = public_id(next);
  expect_acquired(holder.request("lock race"));
  ASSERT_TRUE(queue_wait(leaving, observer, "race", "30", 1));
  ASSERT_TRUE(queue_wait(next, observer, "race", "30", 2));

  leaving.abort();
  EXPECT_EQ(holder.request("unlock race"), "200 Released");
  expect_acquired(next.read_line());
  EXPECT_EQ(holder_of(observer, "race"), next_id);
}

// --- sessions ----------------------------------------------------------------------

TEST_F(LockServiceE2e, ConnIdReturnsAStableSessionId) {
  Client alice = connect();
  Client bob = connect();
  std::string id = session_id(alice);
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(session_id(alice), id);
  EXPECT_NE(session_id(bob), id);
  EXPECT_EQ(alice.request("conn_id " + id), "200 Resumed") << "one's own session";
  EXPECT_EQ(session_id(alice), id);
}

TEST_F(LockServiceE2e, ResumeWithinGracePeriodKeepsLocks) {
  constexpr auto kGrace = 1500ms;
  Client observer = connect();
  Client other = connect();
  Client first = connect();
  EXPECT_EQ(first.request("set_timeout " + std::to_string(kGrace.count())), "200 Timeout set");
  std::string id = session_id(first);
  uint64_t r1 = expect_acquired(first.request("lock r1"));
  uint64_t r2 = expect_acquired(first.request("lock r2"));
  std::string first_address = first.local_address();
  ASSERT_EQ(lock_list(observer, "r1").size(), 1u);
  EXPECT_EQ(lock_list(observer, "r1")[0].client, first_address);
  first.close();
  Clock::time_point closed = Clock::now();
  ASSERT_TRUE(stat_becomes(observer, "sessions_in_grace", 1));
  EXPECT_EQ(other.request("lock r1"), "409 Unavailable") << "held through the grace period";
  std::vector<LockLine> in_grace = lock_list(observer, "r1");
  ASSERT_EQ(in_grace.size(), 1u);
  EXPECT_EQ(in_grace[0].client, "detached");

  Client second = connect();
  ASSERT_EQ(second.request("conn_id " + id), "200 Resumed");
  EXPECT_EQ(session_id(second), id);
  std::vector<LockLine> resumed = lock_list(observer, "r1");
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0].client, second.local_address());
  EXPECT_NE(resumed[0].client, first_address);
  std::map<std::string, uint64_t> counters = stats(observer);
  EXPECT_EQ(counters["sessions_in_grace"], 0u);
  EXPECT_EQ(counters["clients"], 3u) << "observer, other, second";
  EXPECT_EQ(second.request("lock r2"), "200 Acquired " + std::to_string(r2)) << "still held";
  EXPECT_EQ(holder_of(observer, "r1"), session_serial(id));

  // The first disconnect's grace period passes: the resumed session keeps
  // its locks.
  std::this_thread::sleep_until(closed + kGrace + 1s);
  EXPECT_EQ(other.request("lock r1"), "409 Unavailable");
  EXPECT_EQ(holder_of(observer, "r1"), session_serial(id));
  EXPECT_EQ(stat(observer, "locks"), 2u);
  EXPECT_EQ(second.request("unlock r1"), "200 Released");
  EXPECT_GT(expect_acquired(other.request("lock r1")), r1);
}

TEST_F(LockServiceE2e, LocksAreReleasedAfterGracePeriod) {
  constexpr auto kGrace = 300ms;
  Client observer = connect();
  Client waiter = connect();
  Client gone = connect();
  EXPECT_EQ(gone.request("set_timeout " + std::to_string(kGrace.count())), "200 Timeout set");
  std::string id = session_id(gone);
  uint64_t token = expect_acquired(gone.request("lock g"));
  expect_acquired(gone.request("lock g2"));
  ASSERT_TRUE(queue_wait(waiter, observer, "g", "30", 1));

  gone.close();
  Clock::time_point closed = Clock::now();
  uint64_t granted = expect_acquired(waiter.read_line());
  std::chrono::milliseconds elapsed = since(closed);
  EXPECT_GE(elapsed, kGrace - kTimerSlack) << "released before the grace period ended";
  EXPECT_LT(elapsed, kGrace + kLateness);
  EXPECT_GT(granted, token);

  EXPECT_EQ(holder_of(observer, "g2"), "") << "every lock of the session went";
  expect_acquired(observer.request("lock g2"));
  EXPECT_EQ(stat(observer, "sessions_in_grace"), 0u);
  Client late = connect();
  EXPECT_EQ(late.request("conn_id " + id), "403 Cannot resume") << "the session expired";
}

TEST_F(LockServiceE2e, DefaultGraceKeepsLocksAfterDisconnect) {
  Client observer = connect();
  Client gone = connect();
  std::string id = session_id(gone);
  expect_acquired(gone.request("lock d"));
  gone.close();
  ASSERT_TRUE(stat_becomes(observer, "sessions_in_grace", 1));
  // Default 30 s: still held a second later.
  EXPECT_EQ(observer.request("lock d 1", 30s), "409 Unavailable");
  EXPECT_EQ(holder_of(observer, "d"), session_serial(id));
}

TEST_F(LockServiceE2e, ZeroGraceReleasesAtDisconnect) {
  Client observer = connect();
  Client waiter = connect();
  Client gone = connect();
  EXPECT_EQ(gone.request("set_timeout 0"), "200 Timeout set");
  expect_acquired(gone.request("lock z"));
  ASSERT_TRUE(queue_wait(waiter, observer, "z", "30", 1));
  gone.close();
  Clock::time_point closed = Clock::now();
  expect_acquired(waiter.read_line());
  EXPECT_LT(since(closed), 2s);
  EXPECT_EQ(stat(observer, "sessions_in_grace"), 0u);
}

TEST_F(LockServiceE2e, HijackIsRefused) {
  Client alice = connect();
  Client bob = connect();
  Client observer = connect();
  std::string alice_id = session_id(alice);
  std::string bob_id = session_id(bob);
  expect_acquired(alice.request("lock h"));

  EXPECT_EQ(bob.request("conn_id " + alice_id), "403 Cannot resume") << "alice is connected";
  EXPECT_EQ(session_id(bob), bob_id) << "bob keeps his own session";
  EXPECT_EQ(bob.request("unlock h"), "403 Not held");
  EXPECT_EQ(bob.request("conn_id nosuchsession"), "403 Cannot resume");
  EXPECT_EQ(session_id(bob), bob_id);

  // A detached session cannot be taken by a connection whose own session
  // holds locks; once it holds none, it can.
  Client carol = connect();
  EXPECT_EQ(carol.request("set_timeout 10000"), "200 Timeout set");
  std::string carol_id = session_id(carol);
  uint64_t carols = expect_acquired(carol.request("lock c"));
  carol.close();
  ASSERT_TRUE(stat_becomes(observer, "sessions_in_grace", 1));
  expect_acquired(bob.request("lock b"));
  EXPECT_EQ(bob.request("conn_id " + carol_id), "403 Cannot resume") << "bob holds b";
  EXPECT_EQ(session_id(bob), bob_id);
  EXPECT_EQ(holder_of(observer, "c"), session_serial(carol_id));
  EXPECT_EQ(bob.request("unlock b"), "200 Released");
  EXPECT_EQ(bob.request("conn_id " + carol_id), "200 Resumed");
  EXPECT_EQ(session_id(bob), carol_id);
  EXPECT_EQ(bob.request("lock c"), "200 Acquired " + std::to_string(carols));

  // Now that bob uses it, nobody else can.
  Client dave = connect();
  EXPECT_EQ(dave.request("conn_id " + carol_id), "403 Cannot resume");
  EXPECT_EQ(dave.request("conn_id " + bob_id), "403 Cannot resume") << "bob's old session is gone";
  EXPECT_EQ(bob.request("unlock c"), "200 Released");
}

// "<1 to 13 base-36 digits>-<32 lowercase hex digits>". (No std::regex:
// GCC 12 warns inside it under -fsanitize=thread, and warnings are errors.)
bool has_session_id_shape(std::string_view id) {
  size_t dash = id.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 13 || id.size() != dash + 33) {
    return false;
  }
  auto all_in = [](std::string_view part, std::string_view digits) {
    return part.find_first_not_of(digits) == std::string_view::npos;
  };
  return all_in(id.substr(0, dash), "0123456789abcdefghijklmnopqrstuvwxyz") &&
         all_in(id.substr(dash + 1), "0123456789abcdef");
}

// An id is "<serial>-<secret>", the secret 128 random bits that only its
// client learns: others see the serial alone (`stats locks`), and a resume
// needs the whole id, to the last digit.
TEST_F(LockServiceE2e, SessionIdsCarryASecretThatStatsLocksNeverShows) {
  Client observer = connect();
  Client first = connect();
  EXPECT_EQ(first.request("set_timeout 10000"), "200 Timeout set");
  std::string id = session_id(first);
  ASSERT_TRUE(has_session_id_shape(id)) << id;
  const std::string secret = id.substr(id.find('-') + 1);
  uint64_t token = expect_acquired(first.request("lock vault"));
  first.close();
  ASSERT_TRUE(stat_becomes(observer, "sessions_in_grace", 1));

  ASSERT_EQ(observer.request("stats locks"), "200 LOCKS");
  std::string listing;
  for (std::string line; (line = observer.read_line()) != "END" && starts_with(line, "LOCK ");)
    listing += line + "\n";
  EXPECT_NE(listing.find("LOCK vault " + session_serial(id) + " "), std::string::npos) << listing;
  EXPECT_EQ(listing.find(secret), std::string::npos) << listing;
  EXPECT_EQ(listing.find(secret.substr(0, 8)), std::string::npos) << listing;

  Client second = connect();
  std::string wrong_digit = id;
  wrong_digit.back() = wrong_digit.back() == '0' ? '1' : '0';
  for (const std::string& guess :
       {wrong_digit, session_serial(id), session_serial(id) + "-", id + "0"})
    EXPECT_EQ(second.request("conn_id " + guess), "403 Cannot resume") << guess;
  ASSERT_EQ(second.request("conn_id " + id), "200 Resumed");
  EXPECT_EQ(session_id(second), id);
  EXPECT_EQ(second.request("lock vault"), "200 Acquired " + std::to_string(token));
}

// --- fencing tokens --------------------------------------------------------------

// A restarted server must not hand out a token its previous run gave: a
// resource that refuses smaller tokens would lock the real owner out, one
// that trusts them would accept a stale holder. Many grants just before the
// restart, and a restart as fast as the harness can make it.
TEST_F(LockServiceE2e, FencingTokensKeepGrowingAcrossARestart) {
  uint64_t last = 0;
  {
    Client a = connect();
    for (int i = 0; i < 2000; ++i) {
      uint64_t token = expect_acquired(a.request("lock r" + std::to_string(i % 10)));
      ASSERT_GT(token, last);
      last = token;
      ASSERT_EQ(a.request("unlock r" + std::to_string(i % 10)), "200 Released");
    }
  }
  std::optional<int> status = server_.stop(SIGTERM);
  ASSERT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  for (int restart = 0; restart < 2; ++restart) {
    ServerProcess restarted;
    ASSERT_TRUE(restarted.start({"--lock_port=-1"}));
    std::optional<uint16_t> port = restarted.lock_port();
    ASSERT_TRUE(port);
    Client b;
    ASSERT_TRUE(b.connect(*port));
    uint64_t first = expect_acquired(b.request("lock r0"));
    EXPECT_GT(first, last) << "restart " << restart;
    last = first;
    status = restarted.stop(SIGTERM);
    ASSERT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  }
}

TEST_F(LockServiceE2e, FencingTokensIncreaseOverSuccessiveGrants) {
  Client a = connect();
  Client b = connect();
  Client c = connect();
  Client observer = connect();
  std::vector<uint64_t> tokens;

  tokens.push_back(expect_acquired(a.request("lock f")));
  EXPECT_EQ(expect_acquired(a.request("lock f")), tokens.back()) << "not a new grant";

  // To a waiter, on unlock.
  ASSERT_TRUE(queue_wait(b, observer, "f", "30", 1));
  EXPECT_EQ(a.request("unlock f"), "200 Released");
  tokens.push_back(expect_acquired(b.read_line()));

  ASSERT_TRUE(queue_wait(a, observer, "f", "30", 1));
  EXPECT_EQ(b.request("unlock f"), "200 Released");
  tokens.push_back(expect_acquired(a.read_line()));
  EXPECT_EQ(a.request("unlock f"), "200 Released");

  // A plain lock of a free name.
  tokens.push_back(expect_acquired(c.request("lock f")));
  // Other names' grants in between do not matter.
  expect_acquired(c.request("lock unrelated"));
  // To a waiter, when the holder's grace period ends.
  EXPECT_EQ(c.request("set_timeout 100"), "200 Timeout set");
  ASSERT_TRUE(queue_wait(b, observer, "f", "30", 1));
  c.close();
  tokens.push_back(expect_acquired(b.read_line()));

  for (size_t i = 1; i < tokens.size(); ++i)
    EXPECT_GT(tokens[i], tokens[i - 1]) << "grant " << i;
  std::vector<LockLine> locks = lock_list(observer, "f");
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(locks[0].token, tokens.back());
}

// --- quit, stats -------------------------------------------------------------------

TEST_F(LockServiceE2e, QuitRepliesThenCloses) {
  Client alice = connect();
  EXPECT_EQ(alice.request("quit"), "200 Bye");
  EXPECT_TRUE(alice.wait_for_close());
  EXPECT_EQ(alice.buffered(), "");

  // Pipelined: what comes after quit is not executed.
  Client bob = connect();
  EXPECT_EQ(bob.request("set_timeout 0"), "200 Timeout set");
  ASSERT_TRUE(bob.send("lock qq\r\nquit\r\nlock zz\r\n"));
  expect_acquired(bob.read_line());
  EXPECT_EQ(bob.read_line(), "200 Bye");
  EXPECT_TRUE(bob.wait_for_close());
  EXPECT_EQ(bob.buffered(), "") << "no reply after 200 Bye";

  Client carol = connect();
  // Bob's lock ended with his connection.
  expect_acquired(carol.request("lock qq 5"));
  EXPECT_EQ(holder_of(carol, "zz"), "");
}

TEST_F(LockServiceE2e, StatsReportsCounters) {
  Client observer = connect();
  std::vector<std::pair<std::string, uint64_t>> fresh = stat_lines(observer);
  std::vector<std::pair<std::string, uint64_t>> expected = {
      {"clients", 1},           {"locks", 0},  {"monitoring", 0}, {"waiters", 0},
      {"sessions_in_grace", 0}, {"grants", 0}, {"timeouts", 0},   {"limit_refusals", 0}};
  EXPECT_EQ(fresh, expected);

  Client a = connect();
  Client b = connect();
  Client c = connect();
  session_id(c);  // c is certainly accepted
  expect_acquired(a.request("lock s1"));
  expect_acquired(a.request("lock s2"));
  ASSERT_TRUE(queue_wait(b, observer, "s1", "30", 1));
  EXPECT_EQ(c.request("lock s1 0.1"), "409 Unavailable");

  std::map<std::string, uint64_t> counters = stats(observer);
  EXPECT_EQ(counters["clients"], 4u);
  EXPECT_EQ(counters["locks"], 2u);
  EXPECT_EQ(counters["monitoring"], 0u);
  EXPECT_EQ(counters["waiters"], 1u);
  EXPECT_EQ(counters["sessions_in_grace"], 0u);
  EXPECT_EQ(counters["grants"], 2u);
  EXPECT_EQ(counters["timeouts"], 1u);

  EXPECT_EQ(a.request("unlock s1"), "200 Released");
  expect_acquired(b.read_line());
  counters = stats(observer);
  EXPECT_EQ(counters["locks"], 2u);
  EXPECT_EQ(counters["waiters"], 0u);
  EXPECT_EQ(counters["grants"], 3u);

  EXPECT_EQ(b.request("set_timeout 10000"), "200 Timeout set");
  b.close();
  ASSERT_TRUE(stat_becomes(observer, "sessions_in_grace", 1));
  counters = stats(observer);
  EXPECT_EQ(counters["clients"], 3u) << "a session in grace is not a client";
  EXPECT_EQ(counters["locks"], 2u);
}

TEST_F(LockServiceE2e, StatsLocksListsHeldLocks) {
  Client a = connect();
  Client b = connect();
  Client c = connect();
  Client observer = connect();
  std::string a_id = session_id(a);
  std::string b_id = session_id(b);
  uint64_t t1 = expect_acquired(a.request("lock app.1"));
  uint64_t t2 = expect_acquired(a.request("lock app.2"));
  uint64_t t3 = expect_acquired(b.request("lock zzz"));
  ASSERT_TRUE(queue_wait(c, observer, "app.1", "30", 1));

  std::vector<LockLine> all = lock_list(observer);
  std::sort(all.begin(), all.end(),
            [](const LockLine& x, const LockLine& y) { return x.name < y.name; });
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].name, "app.1");
  EXPECT_EQ(all[0].session, session_serial(a_id));
  EXPECT_EQ(all[0].waiters, 1u);
  EXPECT_EQ(all[0].token, t1);
  EXPECT_LT(all[0].held_ms, 60000u);
  EXPECT_EQ(all[0].client, a.local_address());
  EXPECT_EQ(all[1].name, "app.2");
  EXPECT_EQ(all[1].session, session_serial(a_id));
  EXPECT_EQ(all[1].waiters, 0u);
  EXPECT_EQ(all[1].token, t2);
  EXPECT_EQ(all[1].client, a.local_address());
  EXPECT_EQ(all[2].name, "zzz");
  EXPECT_EQ(all[2].session, session_serial(b_id));
  EXPECT_EQ(all[2].token, t3);
  EXPECT_EQ(all[2].client, b.local_address());
  EXPECT_NE(a.local_address(), b.local_address());

  std::vector<LockLine> app = lock_list(observer, "app.");
  EXPECT_EQ(app.size(), 2u);
  for (const LockLine& lock : app)
    EXPECT_TRUE(starts_with(lock.name, "app.")) << lock.name;
  EXPECT_EQ(lock_list(observer, "app.2").size(), 1u);
  EXPECT_TRUE(lock_list(observer, "nomatch").empty());

  EXPECT_TRUE(starts_with(observer.request("stats locks a b"), "400 "));
  EXPECT_TRUE(starts_with(observer.request("stats nonsense"), "400 "));
  EXPECT_EQ(session_id(observer).empty(), false) << "still usable";
}

// --- errors ------------------------------------------------------------------------

TEST_F(LockServiceE2e, BadArgumentsKeepTheConnectionUsable) {
  Client client = connect();
  const std::string long_name(251, 'n');
  const std::vector<std::string> bad = {
      "bogus",
      "",
      "LOCK x",
      "lock",
      "lock x -1",
      "lock x abc",
      "lock x 1s",
      "lock x nan",
      "lock x inf",
      "lock x 1 2",
      "lock " + long_name,
      "lock " + long_name + " 1",
      "unlock",
      "unlock " + long_name,
      "unlock a b",
      "unlock_all now",
      "conn_id a b",
      "set_timeout",
      "set_timeout -5",
      "set_timeout abc",
      "set_timeout 1.5",
  };
  for (const std::string& request : bad) {
    std::string reply = client.request(request);
    EXPECT_TRUE(starts_with(reply, "400 ")) << "\"" << request << "\" -> \"" << reply << "\"";
    EXPECT_FALSE(client.peer_closed()) << request;
  }
  EXPECT_EQ(client.request("bogus"), "400 Unknown command");
  EXPECT_EQ(client.request("lock"), "400 Missing lock name");
  EXPECT_EQ(client.request("unlock"), "400 Missing lock name");
  EXPECT_EQ(client.request("unlock a b"), "400 Too many arguments");
  // None of them took a lock, and the connection still works.
  EXPECT_TRUE(lock_list(client).empty());
  std::map<std::string, uint64_t> counters = stats(client);
  EXPECT_EQ(counters["locks"], 0u);
  EXPECT_EQ(counters["grants"], 0u);
  expect_acquired(client.request("lock x"));
  expect_acquired(client.request("lock " + std::string(250, 'n')));  // 250 bytes is allowed
  EXPECT_EQ(client.request("set_timeout 1000"), "200 Timeout set");
}

// The replies a client has not read are bounded here as on the cache port:
// 60 `stats locks` of 1000 long names (about 16 MB) and a `lock`, in one
// write, are not all run while the client reads nothing. Before, every
// line of a read ran, before any reply went out: 40 MB queued for one
// client in a review. Once it reads, all come.
TEST_F(LockServiceE2e, AClientThatReadsNothingGetsAFewMegabytesQueuedAtMost) {
  Client holder = connect();
  std::string locks;
  for (int i = 0; i < 1000; ++i)
    locks += "lock " + std::to_string(i) + std::string(240, 'n') + "\r\n";
  ASSERT_TRUE(holder.send(locks));
  for (int i = 0; i < 1000; ++i)
    ASSERT_TRUE(starts_with(holder.read_line(), "200 Acquired ")) << i;
  Client hog = connect();
  std::string requests;
  for (int i = 0; i < 60; ++i)
    requests += "stats locks\r\n";
  ASSERT_TRUE(hog.send(requests + "lock marker\r\n"));
  // Its first reply has come: the read holding every request was taken.
  ASSERT_EQ(hog.read_line(10s), "200 LOCKS");
  Client observer = connect();
  EXPECT_EQ(observer.request("stats locks marker"), "200 LOCKS");
  EXPECT_EQ(observer.read_line(), "END") << "the lock after 16 MB of replies ran unread";
  for (int i = 0; i < 60; ++i) {
    if (i > 0) {
      ASSERT_EQ(hog.read_line(10s), "200 LOCKS") << i;
    }
    for (std::string line = hog.read_line(); line != "END"; line = hog.read_line())
      ASSERT_TRUE(starts_with(line, "LOCK ")) << line;
  }
  EXPECT_TRUE(starts_with(hog.read_line(), "200 Acquired "));
}

// A waiter has no reply owed yet: its end of stream is a hang-up. It leaves
// the queue, and what it pipelined behind the wait is not run
// (docs/reliability.md); the holder's release grants nobody.
TEST_F(LockServiceE2e, AWaiterThatHalfClosesLeavesTheQueue) {
  Client holder = connect();
  expect_acquired(holder.request("lock held"));
  Client waiter = connect();
  ASSERT_TRUE(waiter.send("lock held 30\r\nlock other\r\n"));
  Client observer = connect();
  ASSERT_TRUE(eventually([&] {
    std::vector<LockLine> held = lock_list(observer, "held");
    return held.size() == 1 && held[0].waiters == 1;
  }));
  ASSERT_TRUE(waiter.shutdown_send());
  EXPECT_TRUE(waiter.wait_for_close());
  EXPECT_TRUE(eventually([&] { return lock_list(observer, "held")[0].waiters == 0; }));
  EXPECT_TRUE(lock_list(observer, "other").empty());
  EXPECT_EQ(holder.request("unlock held"), "200 Released");
  EXPECT_TRUE(lock_list(observer, "held").empty());
}

// A wait is at most a year, a grace seven days (docs/lock-service.md).
TEST_F(LockServiceE2e, AWaitOverAYearAndAGraceOverSevenDaysAreRefused) {
  Client client = connect();
  EXPECT_EQ(client.request("lock a 31536000.5"), "400 Bad timeout");
  EXPECT_EQ(client.request("set_timeout 604800001"), "400 Bad timeout");
  EXPECT_EQ(client.request("set_timeout 604800000"), "200 Timeout set");
  expect_acquired(client.request("lock a 31536000"));
}

TEST_F(LockServiceE2e, LineOverLimitIsRefusedAndClosed) {
  Client client = connect();
  expect_acquired(client.request("lock before"));
  // 3000 bytes and no end of line yet.
  ASSERT_TRUE(client.send("lock " + std::string(2995, 'x')));
  EXPECT_EQ(client.read_line(), "400 Line too long");
  EXPECT_TRUE(client.wait_for_close());
}

TEST_F(LockServiceE2e, CompleteLineOverLimitIsRefusedAndClosed) {
  Client client = connect();
  // 3000 bytes, end of line included, in one write.
  ASSERT_TRUE(client.send("stats locks " + std::string(2988, 'x') + "\r\n"));
  std::string reply = client.read_line();
  EXPECT_TRUE(starts_with(reply, "400")) << reply;
  EXPECT_TRUE(client.wait_for_close(3s)) << "replied \"" << reply << "\" and kept the connection";
}

TEST_F(LockServiceE2e, LineAtLimitIsAccepted) {
  Client client = connect();
  // 2048 bytes before the end of line.
  std::string line = "stats locks " + std::string(2048 - 12, 'x');
  ASSERT_EQ(line.size(), 2048u);
  EXPECT_EQ(client.request(line), "200 LOCKS");
  EXPECT_EQ(client.read_line(), "END");
  expect_acquired(client.request("lock after"));
}

// --- pipelining --------------------------------------------------------------------

TEST_F(LockServiceE2e, RequestsBehindAWaitingLockAreAnsweredAfterItInOrder) {
  Client holder = connect();
  Client observer = connect();
  Client waiter = connect();
  std::string waiter_id = session_id(waiter);
  expect_acquired(holder.request("lock p"));

  ASSERT_TRUE(
      waiter.send("lock p 30\r\nconn_id\r\nlock other\r\nunlock other\r\nstats locks p\r\n"));
  ASSERT_TRUE(stat_becomes(observer, "waiters", 1));
  EXPECT_FALSE(waiter.read_until("\r\n", 300ms))
      << "answered while the lock waits: \"" << e2e::escape(waiter.buffered()) << "\"";
  EXPECT_EQ(holder_of(observer, "other"), "") << "a request behind the wait ran";

  EXPECT_EQ(holder.request("unlock p"), "200 Released");
  uint64_t token = expect_acquired(waiter.read_line());
  EXPECT_EQ(waiter.read_line(), "200 " + waiter_id);
  expect_acquired(waiter.read_line());
  EXPECT_EQ(waiter.read_line(), "200 Released");
  EXPECT_EQ(waiter.read_line(), "200 LOCKS");
  std::string line = waiter.read_line();
  EXPECT_TRUE(starts_with(line, "LOCK p " + session_serial(waiter_id) + " ")) << line;
  std::vector<std::string> words = split(line);
  ASSERT_EQ(words.size(), 7u) << line;
  EXPECT_EQ(words[5], std::to_string(token)) << line;
  EXPECT_EQ(words[6], waiter.local_address()) << line;
  EXPECT_EQ(waiter.read_line(), "END");

  // Behind a wait that runs out.
  expect_acquired(holder.request("lock p2"));
  ASSERT_TRUE(waiter.send("lock p2 0.3\r\nlock next\r\nconn_id\r\n"));
  EXPECT_EQ(waiter.read_line(), "409 Unavailable");
  expect_acquired(waiter.read_line());
  EXPECT_EQ(waiter.read_line(), "200 " + waiter_id);
}

// A connection waiting for a lock reads no further request, so it never has
// more than one wait queued: the second of two pipelined waits queues only
// once the first is answered.
TEST_F(LockServiceE2e, AConnectionWaitsForOneLockAtATime) {
  Client holder = connect();
  Client observer = connect();
  Client waiter = connect();
  expect_acquired(holder.request("lock w1"));
  expect_acquired(holder.request("lock w2"));

  ASSERT_TRUE(waiter.send("lock w1 30\r\nlock w2 30\r\n"));
  ASSERT_TRUE(stat_becomes(observer, "waiters", 1));
  std::vector<LockLine> locks = lock_list(observer, "w");
  ASSERT_EQ(locks.size(), 2u);
  std::sort(locks.begin(), locks.end(),
            [](const LockLine& x, const LockLine& y) { return x.name < y.name; });
  EXPECT_EQ(locks[0].waiters, 1u) << "w1";
  EXPECT_EQ(locks[1].waiters, 0u) << "w2 queued behind a wait of the same connection";

  EXPECT_EQ(holder.request("unlock w1"), "200 Released");
  expect_acquired(waiter.read_line());
  ASSERT_TRUE(stat_becomes(observer, "waiters", 1)) << "the second wait, now read";
  EXPECT_EQ(holder.request("unlock w2"), "200 Released");
  expect_acquired(waiter.read_line());
  EXPECT_EQ(stat(observer, "waiters"), 0u);
}

// --- limits --------------------------------------------------------------------------

class LockServiceLimitsE2e : public LockServiceE2e {
 protected:
  void SetUp() override {
    start_server(
        {"--threads=2", "--lock_service_max_locks_per_session=3", "--lock_service_max_names=5"});
  }
};

constexpr std::string_view kSessionFull = "429 Too many locks for this session";
constexpr std::string_view kServerFull = "429 Too many locks in the server";

TEST_F(LockServiceLimitsE2e, SessionLimitIsRefusedWith429AndTheConnectionStaysUsable) {
  Client alice = connect();
  Client bob = connect();
  Client observer = connect();
  for (const char* name : {"s1", "s2", "s3"})
    expect_acquired(alice.request(std::string("lock ") + name));
  EXPECT_EQ(alice.request("lock s4"), kSessionFull);
  EXPECT_EQ(alice.request("lock s4 5"), kSessionFull) << "refused at once, not waited for";
  expect_acquired(alice.request("lock s3"));  // held already: no new lock
  expect_acquired(bob.request("lock s4"));    // another session has a count of its own

  // A wait counts: two held and one waited for are three.
  EXPECT_EQ(alice.request("unlock s1"), "200 Released");
  ASSERT_TRUE(queue_wait(alice, observer, "s4", "30", 1));
  EXPECT_EQ(bob.request("unlock s4"), "200 Released");
  expect_acquired(alice.read_line());
  EXPECT_EQ(alice.request("lock s5"), kSessionFull);
  EXPECT_EQ(stat(observer, "limit_refusals"), 3u);
  EXPECT_EQ(stat(observer, "locks"), 3u) << "refused locks were not created";

  EXPECT_EQ(alice.request("unlock_all"), "200 Released");
  for (const char* name : {"s5", "s6", "s7"})
    expect_acquired(alice.request(std::string("lock ") + name));
}

TEST_F(LockServiceLimitsE2e, NamesLimitIsServerWide) {
  Client alice = connect();
  Client bob = connect();
  Client carol = connect();
  Client observer = connect();
  for (const char* name : {"n1", "n2", "n3"})
    expect_acquired(alice.request(std::string("lock ") + name));
  expect_acquired(bob.request("lock n4"));
  expect_acquired(bob.request("lock n5"));
  EXPECT_EQ(carol.request("lock n6"), kServerFull);
  EXPECT_EQ(carol.request("lock n6 5"), kServerFull) << "refused at once, not waited for";
  EXPECT_EQ(bob.request("lock n2"), "409 Unavailable") << "a held name is still just taken";

  // Waiting for a name that exists creates none; passing it on keeps the count.
  ASSERT_TRUE(queue_wait(carol, observer, "n1", "30", 1));
  EXPECT_EQ(alice.request("unlock n1"), "200 Released");
  expect_acquired(carol.read_line());
  EXPECT_EQ(bob.request("lock n6"), kServerFull);
  // A name that goes makes room for one.
  EXPECT_EQ(alice.request("unlock n2"), "200 Released");
  expect_acquired(bob.request("lock n6"));
  EXPECT_EQ(carol.request("lock n7"), kServerFull);
  EXPECT_EQ(stat(observer, "locks"), 5u);
  EXPECT_EQ(stat(observer, "limit_refusals"), 4u);
}

// --- contention ----------------------------------------------------------------------

class LockServiceContentionE2e : public LockServiceE2e {
 protected:
  void SetUp() override { start_server({"--threads=4"}); }
};

// 8 clients x 1000 times: lock hot, read-modify-write a counter in the cache,
// unlock. No 409 (a lost wake-up would run a wait out), no overlap (the
// counter ends at 8000), and every grant's token is new.
TEST_F(LockServiceContentionE2e, EightClientsTakeTurnsWithoutOverlapOrLostWakeUp) {
  constexpr int kClients = 8;
  constexpr int kIterations = 1000;

  Client setup;
  ASSERT_TRUE(setup.connect(server_.port()));
  ASSERT_EQ(setup.store("set", "counter", "0"), "STORED");

  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::mutex errors_mutex;
  std::vector<std::string> errors;
  std::vector<std::vector<uint64_t>> tokens(kClients);
  std::latch start(kClients + 1);

  auto fail = [&](int client, int iteration, const std::string& what) {
    std::lock_guard lock(errors_mutex);
    errors.push_back("client " + std::to_string(client) + ", iteration " +
                     std::to_string(iteration) + ": " + what);
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      Client locks;
      Client cache;
      bool ready = locks.connect(lock_port_) && cache.connect(server_.port());
      if (ready) {
        locks.set_nodelay();
        cache.set_nodelay();
        // A client that fails mid-way must not leave the lock held.
        std::string reply = locks.request("set_timeout 0");
        if (reply != "200 Timeout set") {
          fail(t, -1, "set_timeout 0 -> " + reply);
          ready = false;
        }
      } else {
        fail(t, -1, "cannot connect");
      }
      start.arrive_and_wait();
      if (!ready) return;
      tokens[t].reserve(kIterations);
      for (int i = 0; i < kIterations; ++i) {
        std::string reply = locks.request("lock hot 30", 40s);
        std::optional<uint64_t> token = acquired_token(reply);
        if (!token) return fail(t, i, "lock hot 30 -> " + reply);
        tokens[t].push_back(*token);
        if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        std::optional<std::string> value = cache.get("counter");
        std::optional<uint64_t> counter = value ? parse_u64(*value) : std::nullopt;
        reply = counter ? cache.store("set", "counter", std::to_string(*counter + 1)) : "";
        inside.fetch_sub(1);
        if (!counter) return fail(t, i, "get counter -> " + value.value_or("(miss)"));
        if (reply != "STORED") return fail(t, i, "set counter -> " + reply);
        reply = locks.request("unlock hot");
        if (reply != "200 Released") return fail(t, i, "unlock hot -> " + reply);
      }
    });
  }
  start.arrive_and_wait();
  Clock::time_point started = Clock::now();
  for (std::thread& thread : threads)
    thread.join();
  std::chrono::milliseconds elapsed = since(started);
  std::cout << "[ contention ] " << kClients << " clients x " << kIterations
            << " lock/unlock: " << elapsed.count() << " ms\n";
  RecordProperty("contention_ms", static_cast<int>(elapsed.count()));

  for (const std::string& error : errors)
    ADD_FAILURE() << error;
  EXPECT_EQ(overlaps.load(), 0);
  std::optional<std::string> counter = setup.get("counter");
  EXPECT_EQ(counter, std::to_string(kClients * kIterations));

  std::set<uint64_t> distinct;
  for (int t = 0; t < kClients; ++t) {
    EXPECT_EQ(tokens[t].size(), size_t{kIterations}) << "client " << t;
    for (size_t i = 1; i < tokens[t].size(); ++i) {
      if (tokens[t][i] <= tokens[t][i - 1]) {
        ADD_FAILURE() << "client " << t << ": token " << tokens[t][i] << " after "
                      << tokens[t][i - 1];
        break;
      }
    }
    distinct.insert(tokens[t].begin(), tokens[t].end());
  }
  EXPECT_EQ(distinct.size(), size_t{kClients} * kIterations) << "a token was granted twice";

  Client observer = connect();
  std::map<std::string, uint64_t> counters = stats(observer);
  EXPECT_EQ(counters["timeouts"], 0u);
  EXPECT_EQ(counters["grants"], uint64_t{kClients} * kIterations);
  EXPECT_EQ(counters["locks"], 0u);
  EXPECT_EQ(counters["waiters"], 0u);
  EXPECT_LT(elapsed, 60s);
}

}  // namespace
