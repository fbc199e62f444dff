// End-to-end tests of server-side locking (../shared/specs/locking.md and
// docs/locking.md) in the text and the binary protocol, with two and three
// connections to the real lockcached binary.
//
// Where the spec is silent, the expected replies are yrmcds's (docs/locking.md
// says so, and test/peers/compare_yrmcds.py checks them side by side).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "binary_client.h"
#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::ServerProcess;
using e2e::stat_u64;

constexpr std::string_view kNotLockedError = "CLIENT_ERROR object is not locked or not found";

// op::, st::, the codec and BinClient: binary_client.h.
using namespace e2e::binary;

// "gets KEY" -> its CAS; nullopt on a miss.
std::optional<uint64_t> gets_cas(Client& c, std::string_view key) {
  EXPECT_TRUE(c.send("gets " + std::string(key) + "\r\n"));
  std::optional<std::vector<e2e::Value>> values = c.read_values();
  if (!values || values->size() > 1) {
    ADD_FAILURE() << "gets " << key << ": " << c.last_error();
    return std::nullopt;
  }
  if (values->empty()) return std::nullopt;
  return (*values)[0].cas;
}

class LockE2e : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start({"--threads=2"})); }
  uint16_t port() const { return server_.port(); }

  // Polls `lock KEY` from `c` until OK: only for the server to process another
  // connection's close. Any reply but OK or LOCKED fails at once.
  ::testing::AssertionResult lock_once_released(Client& c, std::string_view key) {
    std::string last;
    bool ok = e2e::eventually(
        [&] {
          last = c.request("lock " + std::string(key));
          return last != "LOCKED";
        },
        10s, 20ms);
    if (!ok) return ::testing::AssertionFailure() << key << " still LOCKED after 10 s";
    if (last != "OK") return ::testing::AssertionFailure() << "lock " << key << ": " << last;
    return ::testing::AssertionSuccess();
  }

  ServerProcess server_;
};

// ---------------------------------------------------------------------------
// Text: lock, unlock, unlock_all

TEST_F(LockE2e, TextLockUnlockReplies) {
  Client a, b;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_EQ(a.store("set", "k", "v"), "STORED");

  EXPECT_EQ(a.request("lock k"), "OK");
  EXPECT_EQ(a.request("lock k"), "LOCKED");  // not re-entrant
  EXPECT_EQ(b.request("lock k"), "LOCKED");
  EXPECT_EQ(a.request("lock missing"), "NOT_FOUND");
  EXPECT_EQ(b.request("lock missing"), "NOT_FOUND");

  EXPECT_EQ(b.request("unlock k"), kNotLockedError);  // not the holder
  EXPECT_EQ(b.request("unlock missing"), kNotLockedError);
  EXPECT_EQ(a.request("unlock k"), "OK");
  EXPECT_EQ(a.request("unlock k"), kNotLockedError);  // no longer locked

  EXPECT_EQ(b.request("lock k"), "OK");
  EXPECT_EQ(a.request("lock k"), "LOCKED");
  EXPECT_EQ(b.request("unlock_all"), "OK");
  EXPECT_EQ(b.request("unlock k"), kNotLockedError);
  EXPECT_EQ(a.request("lock k"), "OK");
  EXPECT_EQ(b.request("unlock_all"), "OK");  // always OK, even holding nothing
  EXPECT_EQ(b.request("lock k"), "LOCKED");  // and it released nothing of a's

  // Malformed, as yrmcds: one key exactly, no noreply.
  EXPECT_EQ(b.request("lock"), "ERROR");
  EXPECT_EQ(b.request("lock a b"), "ERROR");
  EXPECT_EQ(b.request("lock k noreply"), "ERROR");
  EXPECT_EQ(b.request("unlock"), "ERROR");
  EXPECT_EQ(b.request("lock " + std::string(251, 'x')), "CLIENT_ERROR bad command line format");
}

TEST_F(LockE2e, TextUnlockAllReleasesEveryLockOfTheConnection) {
  Client a, b, c;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_TRUE(c.connect(port()));
  for (const char* key : {"k1", "k2", "k3"})
    ASSERT_EQ(a.store("set", key, "v"), "STORED");
  EXPECT_EQ(a.request("lock k1"), "OK");
  EXPECT_EQ(a.request("lock k2"), "OK");
  EXPECT_EQ(c.request("lock k3"), "OK");
  EXPECT_EQ(a.request("unlock_all"), "OK");
  EXPECT_EQ(b.request("lock k1"), "OK");
  EXPECT_EQ(b.request("lock k2"), "OK");
  EXPECT_EQ(b.request("lock k3"), "LOCKED");  // c's lock is c's
  EXPECT_EQ(a.request("lock k1"), "LOCKED");
}

// ---------------------------------------------------------------------------
// Text: modifications by others answer LOCKED and change nothing

TEST_F(LockE2e, TextModificationsByOthersAnswerLocked) {
  Client a, b, c;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_TRUE(c.connect(port()));
  ASSERT_EQ(a.store("set", "k", "100", 7), "STORED");
  std::optional<uint64_t> cas = gets_cas(a, "k");
  ASSERT_TRUE(cas);
  ASSERT_EQ(a.request("lock k"), "OK");

  for (Client* other : {&b, &c}) {
    EXPECT_EQ(other->store("set", "k", "1"), "LOCKED");
    EXPECT_EQ(other->store("add", "k", "1"), "LOCKED");
    EXPECT_EQ(other->store("replace", "k", "1"), "LOCKED");
    EXPECT_EQ(other->store("append", "k", "1"), "LOCKED");
    EXPECT_EQ(other->store("prepend", "k", "1"), "LOCKED");
    // The right CAS: the refusal is the lock's, not a CAS mismatch.
    EXPECT_EQ(other->store("cas", "k", "1", 0, 0, std::to_string(*cas)), "LOCKED");
    EXPECT_EQ(other->store("cas", "k", "1", 0, 0, std::to_string(*cas + 1)), "LOCKED");
    EXPECT_EQ(other->request("delete k"), "LOCKED");
    EXPECT_EQ(other->request("delete k 0"), "LOCKED");
    EXPECT_EQ(other->request("incr k 1"), "LOCKED");
    EXPECT_EQ(other->request("decr k 1"), "LOCKED");
    // noreply: nothing sent, nothing changed; the get behind it is answered first.
    ASSERT_TRUE(
        other->send("set k 0 0 1 noreply\r\nx\r\ndelete k noreply\r\nincr k 5 noreply\r\n"));
    ASSERT_TRUE(other->send("get k\r\n"));
    EXPECT_EQ(other->read_values(), (std::vector<e2e::Value>{{"k", 7, "100", std::nullopt}}));
  }
  EXPECT_EQ(gets_cas(c, "k"), cas);
  EXPECT_EQ(b.get("k"), "100");

  // Once unlocked, the same commands work.
  EXPECT_EQ(a.request("unlock k"), "OK");
  EXPECT_EQ(b.request("incr k 1"), "101");
  EXPECT_EQ(c.store("append", "k", "0"), "STORED");
  EXPECT_EQ(b.request("delete k"), "DELETED");
}

TEST_F(LockE2e, TextReadsByOthersSucceed) {
  Client a, b;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_EQ(a.store("set", "k", "value", 3), "STORED");
  ASSERT_EQ(a.store("set", "other", "o"), "STORED");
  std::optional<uint64_t> cas = gets_cas(a, "k");
  ASSERT_EQ(a.request("lock k"), "OK");

  EXPECT_EQ(b.get("k"), "value");
  ASSERT_TRUE(b.send("gets k other\r\n"));
  std::optional<std::vector<e2e::Value>> values = b.read_values();
  ASSERT_TRUE(values && values->size() == 2) << b.last_error();
  EXPECT_EQ((*values)[0], (e2e::Value{"k", 3, "value", cas}));
  ASSERT_TRUE(b.send("gat 0 k\r\n"));
  EXPECT_EQ(b.read_values(), (std::vector<e2e::Value>{{"k", 3, "value", std::nullopt}}));
  ASSERT_TRUE(b.send("gats 3600 k\r\n"));
  EXPECT_EQ(b.read_values(), (std::vector<e2e::Value>{{"k", 3, "value", cas}}));
  EXPECT_EQ(b.request("touch k 0"), "TOUCHED");
  // Still locked after all that.
  EXPECT_EQ(b.store("set", "k", "x"), "LOCKED");
  EXPECT_EQ(b.request("lock k"), "LOCKED");
}

TEST_F(LockE2e, HolderModifiesAndKeepsTheLockUntilDelete) {
  Client a, b, c;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_TRUE(c.connect(port()));
  ASSERT_EQ(a.store("set", "k", "1"), "STORED");
  ASSERT_EQ(a.request("lock k"), "OK");

  EXPECT_EQ(a.store("set", "k", "10", 5), "STORED");
  EXPECT_EQ(b.store("set", "k", "x"), "LOCKED");  // the holder's set kept the lock
  EXPECT_EQ(a.request("incr k 5"), "15");
  EXPECT_EQ(a.request("decr k 1"), "14");
  EXPECT_EQ(c.request("incr k 1"), "LOCKED");
  EXPECT_EQ(a.store("append", "k", "0"), "STORED");
  EXPECT_EQ(a.store("prepend", "k", "9"), "STORED");
  EXPECT_EQ(a.store("replace", "k", "20", 6), "STORED");
  EXPECT_EQ(a.store("add", "k", "x"), "NOT_STORED");
  std::optional<uint64_t> cas = gets_cas(a, "k");
  ASSERT_TRUE(cas);
  EXPECT_EQ(a.store("cas", "k", "30", 6, 0, std::to_string(*cas)), "STORED");
  EXPECT_EQ(a.store("cas", "k", "31", 6, 0, std::to_string(*cas)), "EXISTS");
  EXPECT_EQ(b.get("k"), "30");
  EXPECT_EQ(b.store("set", "k", "x"), "LOCKED");
  EXPECT_EQ(c.request("lock k"), "LOCKED");
  EXPECT_EQ(a.request("lock k"), "LOCKED");

  // Delete by the holder removes the object and the lock with it.
  EXPECT_EQ(a.request("delete k"), "DELETED");
  EXPECT_EQ(b.get("k"), std::nullopt);
  EXPECT_EQ(a.request("unlock k"), kNotLockedError);
  EXPECT_EQ(b.store("set", "k", "new"), "STORED");
  EXPECT_EQ(c.request("lock k"), "OK");
  EXPECT_EQ(a.store("set", "k", "x"), "LOCKED");  // a has no claim on the new object
}

// ---------------------------------------------------------------------------
// Binary: modifications by others answer 0x10

TEST_F(LockE2e, BinaryModificationsByOthersAnswerLocked) {
  Client a;
  BinClient b;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_EQ(a.store("set", "k", "100", 7), "STORED");
  std::optional<uint64_t> cas = gets_cas(a, "k");
  ASSERT_TRUE(cas);
  ASSERT_EQ(a.request("lock k"), "OK");

  std::string fe = store_extras(0, 0);
  EXPECT_EQ(b.status(op::kSet, "k", fe, "x"), st::kLocked);
  EXPECT_EQ(b.status(op::kSet, "k", fe, "x", *cas), st::kLocked);
  EXPECT_EQ(b.status(op::kAdd, "k", fe, "x"), st::kLocked);
  EXPECT_EQ(b.status(op::kReplace, "k", fe, "x"), st::kLocked);
  EXPECT_EQ(b.status(op::kAppend, "k", {}, "x"), st::kLocked);
  EXPECT_EQ(b.status(op::kPrepend, "k", {}, "x"), st::kLocked);
  EXPECT_EQ(b.status(op::kDelete, "k"), st::kLocked);
  EXPECT_EQ(b.status(op::kDelete, "k", {}, {}, *cas), st::kLocked);
  EXPECT_EQ(b.status(op::kIncrement, "k", arith_extras(1, 0, 0)), st::kLocked);
  EXPECT_EQ(b.status(op::kDecrement, "k", arith_extras(1, 0, 0)), st::kLocked);
  Response locked = b.call(op::kSet, "k", fe, "x");
  EXPECT_EQ(locked.value, "Locked");
  EXPECT_EQ(locked.cas, 0u);

  // Quiet forms report the refusal.
  std::vector<std::pair<uint8_t, uint32_t>> quiet = {
      {op::kSetQ, b.send(op::kSetQ, "k", fe, "x")},
      {op::kAddQ, b.send(op::kAddQ, "k", fe, "x")},
      {op::kReplaceQ, b.send(op::kReplaceQ, "k", fe, "x")},
      {op::kAppendQ, b.send(op::kAppendQ, "k", {}, "x")},
      {op::kPrependQ, b.send(op::kPrependQ, "k", {}, "x")},
      {op::kDeleteQ, b.send(op::kDeleteQ, "k")},
      {op::kIncrementQ, b.send(op::kIncrementQ, "k", arith_extras(1, 0, 0))},
      {op::kDecrementQ, b.send(op::kDecrementQ, "k", arith_extras(1, 0, 0))},
  };
  for (auto [opcode, opaque] : quiet)
    EXPECT_EQ(b.expect_reply(opcode, opaque).status, st::kLocked) << int{opcode};
  EXPECT_TRUE(b.noop_is_next());

  // Reads succeed.
  Response get = b.call(op::kGet, "k");
  EXPECT_EQ(get.status, st::kSuccess);
  EXPECT_EQ(get.value, "100");
  EXPECT_EQ(get.cas, *cas);
  EXPECT_EQ(b.call(op::kGetK, "k").value, "100");
  EXPECT_EQ(b.status(op::kTouch, "k", be32(0)), st::kSuccess);
  EXPECT_EQ(b.call(op::kGat, "k", be32(0)).value, "100");
  EXPECT_EQ(b.call(op::kGatK, "k", be32(0)).key, "k");
  EXPECT_EQ(a.get("k"), "100");
  EXPECT_EQ(gets_cas(a, "k"), cas);

  // The binary holder is refused nothing; a text other is refused.
  EXPECT_EQ(a.request("unlock k"), "OK");
  EXPECT_EQ(b.status(op::kLock, "k"), st::kSuccess);
  EXPECT_EQ(a.store("set", "k", "x"), "LOCKED");
  EXPECT_EQ(b.status(op::kSet, "k", fe, "200"), st::kSuccess);
  Response incr = b.call(op::kIncrement, "k", arith_extras(5, 0, 0));
  EXPECT_EQ(incr.status, st::kSuccess);
  EXPECT_EQ(incr.value, be64(205));
  EXPECT_EQ(a.request("decr k 1"), "LOCKED");
  EXPECT_EQ(b.status(op::kDelete, "k"), st::kSuccess);
  EXPECT_EQ(a.store("set", "k", "free"), "STORED");
}

// ---------------------------------------------------------------------------
// Binary: Lock, Unlock, UnlockAll

TEST_F(LockE2e, BinaryLockUnlockStatuses) {
  BinClient a, b;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  std::string fe = store_extras(0, 0);
  ASSERT_EQ(a.status(op::kSet, "k", fe, "v"), st::kSuccess);
  ASSERT_EQ(a.status(op::kSet, "k2", fe, "v"), st::kSuccess);

  Response lock = a.call(op::kLock, "k");
  EXPECT_EQ(lock.status, st::kSuccess);
  EXPECT_EQ(lock.extras + lock.key + lock.value, "");
  EXPECT_EQ(a.status(op::kLock, "k"), st::kLocked);  // not re-entrant
  EXPECT_EQ(b.status(op::kLock, "k"), st::kLocked);
  EXPECT_EQ(a.status(op::kLock, "missing"), st::kNotFound);

  Response not_locked = b.call(op::kUnlock, "k");
  EXPECT_EQ(not_locked.status, st::kNotLocked);
  EXPECT_EQ(not_locked.value, "Not locked");
  EXPECT_EQ(b.status(op::kUnlock, "missing"), st::kNotFound);
  EXPECT_EQ(b.status(op::kUnlock, "k2"), st::kNotLocked);  // exists, unlocked
  Response unlock = a.call(op::kUnlock, "k");
  EXPECT_EQ(unlock.status, st::kSuccess);
  EXPECT_EQ(unlock.extras + unlock.key + unlock.value, "");
  EXPECT_EQ(a.status(op::kUnlock, "k"), st::kNotLocked);

  // Quiet forms: silent on success only.
  a.send(op::kLockQ, "k");
  a.send(op::kLockQ, "k2");
  EXPECT_TRUE(a.noop_is_next());
  EXPECT_EQ(b.status(op::kLock, "k"), st::kLocked);
  uint32_t q1 = b.send(op::kLockQ, "k");
  uint32_t q2 = b.send(op::kLockQ, "missing");
  uint32_t q3 = b.send(op::kUnlockQ, "k");
  uint32_t q4 = b.send(op::kUnlockQ, "missing");
  EXPECT_EQ(b.expect_reply(op::kLockQ, q1).status, st::kLocked);
  EXPECT_EQ(b.expect_reply(op::kLockQ, q2).status, st::kNotFound);
  EXPECT_EQ(b.expect_reply(op::kUnlockQ, q3).status, st::kNotLocked);
  EXPECT_EQ(b.expect_reply(op::kUnlockQ, q4).status, st::kNotFound);
  EXPECT_TRUE(b.noop_is_next());
  a.send(op::kUnlockQ, "k");
  EXPECT_TRUE(a.noop_is_next());
  EXPECT_EQ(b.status(op::kLock, "k"), st::kSuccess);

  // UnlockAll: success, always; releases only the caller's locks.
  Response all = a.call(op::kUnlockAll);
  EXPECT_EQ(all.status, st::kSuccess);
  EXPECT_EQ(all.extras + all.key + all.value, "");
  EXPECT_EQ(b.status(op::kLock, "k2"), st::kSuccess);  // a held k2 until UnlockAll
  EXPECT_EQ(a.status(op::kLock, "k"), st::kLocked);    // b's lock stays
  EXPECT_EQ(a.status(op::kUnlockAll), st::kSuccess);   // holding nothing
  b.send(op::kUnlockAllQ);
  EXPECT_TRUE(b.noop_is_next());
  EXPECT_EQ(a.status(op::kLock, "k"), st::kSuccess);
  EXPECT_EQ(a.status(op::kLock, "k2"), st::kSuccess);

  // Lock and Unlock carry a key and nothing else. A malformed request of
  // the locking extension is refused and the connection goes on, its locks
  // held, as yrmcds does; closing it would end them all.
  EXPECT_EQ(a.status(op::kLock, "k3", be32(0)), st::kInvalid);
  EXPECT_EQ(a.status(op::kUnlockAll, "key"), st::kInvalid);
  EXPECT_EQ(a.status(op::kLock, std::string(251, 'x')), st::kInvalid);
  EXPECT_EQ(a.status(op::kLaG, "k", be32(0) + be32(0)), st::kInvalid);
  EXPECT_EQ(b.status(op::kLock, "k"), st::kLocked);  // still a's
  EXPECT_EQ(a.status(op::kNoop), st::kSuccess);
  // memcached's own opcodes: a malformed one closes the connection, as
  // memcached does.
  BinClient bad;
  ASSERT_TRUE(bad.connect(port()));
  EXPECT_EQ(bad.status(op::kGet, "k", be32(0)), st::kInvalid);
  EXPECT_TRUE(bad.raw().wait_for_close());
}

// Binary and text locks are the same locks.
TEST_F(LockE2e, BinaryAndTextLocksAreShared) {
  Client t;
  BinClient b;
  ASSERT_TRUE(t.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_EQ(t.store("set", "k", "v"), "STORED");
  EXPECT_EQ(b.status(op::kLock, "k"), st::kSuccess);
  EXPECT_EQ(t.request("lock k"), "LOCKED");
  EXPECT_EQ(t.request("unlock k"), kNotLockedError);
  EXPECT_EQ(b.status(op::kUnlock, "k"), st::kSuccess);
  EXPECT_EQ(t.request("lock k"), "OK");
  EXPECT_EQ(b.status(op::kLock, "k"), st::kLocked);
  EXPECT_EQ(b.status(op::kUnlock, "k"), st::kNotLocked);
}

// ---------------------------------------------------------------------------
// Binary: LaG, LaGQ, LaGK, LaGKQ

TEST_F(LockE2e, LockAndGetFamily) {
  BinClient a, b;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  uint64_t cas = a.call(op::kSet, "k", store_extras(5, 0), "value").cas;
  ASSERT_NE(cas, 0u);
  for (const char* key : {"k2", "k3", "k4"})
    ASSERT_EQ(a.status(op::kSet, key, store_extras(6, 0), key), st::kSuccess);

  Response lag = a.call(op::kLaG, "k");
  EXPECT_EQ(lag.status, st::kSuccess);
  EXPECT_EQ(lag.extras, be32(5));
  EXPECT_EQ(lag.key, "");
  EXPECT_EQ(lag.value, "value");
  EXPECT_EQ(lag.cas, cas);
  // It is locked now.
  EXPECT_EQ(b.status(op::kSet, "k", store_extras(0, 0), "x"), st::kLocked);
  EXPECT_EQ(a.status(op::kLaG, "k"), st::kLocked);
  EXPECT_EQ(b.status(op::kLaG, "k"), st::kLocked);
  EXPECT_EQ(b.status(op::kLaGK, "k"), st::kLocked);
  uint32_t lq = b.send(op::kLaGQ, "k");
  uint32_t lkq = b.send(op::kLaGKQ, "k");
  EXPECT_EQ(b.expect_reply(op::kLaGQ, lq).status, st::kLocked);
  EXPECT_EQ(b.expect_reply(op::kLaGKQ, lkq).status, st::kLocked);

  Response lagk = a.call(op::kLaGK, "k2");
  EXPECT_EQ(lagk.status, st::kSuccess);
  EXPECT_EQ(lagk.extras, be32(6));
  EXPECT_EQ(lagk.key, "k2");
  EXPECT_EQ(lagk.value, "k2");
  // Quiet forms answer a hit (they are gets) ...
  uint32_t hq = a.send(op::kLaGQ, "k3");
  uint32_t hkq = a.send(op::kLaGKQ, "k4");
  Response lagq = a.expect_reply(op::kLaGQ, hq);
  EXPECT_EQ(lagq.status, st::kSuccess);
  EXPECT_EQ(lagq.key, "");
  EXPECT_EQ(lagq.value, "k3");
  Response lagkq = a.expect_reply(op::kLaGKQ, hkq);
  EXPECT_EQ(lagkq.status, st::kSuccess);
  EXPECT_EQ(lagkq.key, "k4");
  EXPECT_EQ(lagkq.value, "k4");
  EXPECT_TRUE(a.noop_is_next());
  for (const char* key : {"k2", "k3", "k4"})
    EXPECT_EQ(b.status(op::kLock, key), st::kLocked) << key;

  // ... and a miss, even quietly: the client must learn it has no lock.
  EXPECT_EQ(a.status(op::kLaG, "missing"), st::kNotFound);
  Response missk = a.call(op::kLaGK, "missing");
  EXPECT_EQ(missk.status, st::kNotFound);
  uint32_t mq = a.send(op::kLaGQ, "missing");
  uint32_t mkq = a.send(op::kLaGKQ, "missing");
  EXPECT_EQ(a.expect_reply(op::kLaGQ, mq).status, st::kNotFound);
  EXPECT_EQ(a.expect_reply(op::kLaGKQ, mkq).status, st::kNotFound);
  EXPECT_TRUE(a.noop_is_next());

  // The optional exptime extra renews the expiry: a past time takes effect
  // as soon as the lock is gone.
  ASSERT_EQ(a.status(op::kSet, "e", store_extras(0, 0), "x"), st::kSuccess);
  Response renew = a.call(op::kLaG, "e", be32(kPastAbsolute));
  EXPECT_EQ(renew.status, st::kSuccess);
  EXPECT_EQ(renew.value, "x");
  EXPECT_EQ(b.call(op::kGet, "e").value, "x");  // locked: does not expire
  EXPECT_EQ(a.status(op::kUnlock, "e"), st::kSuccess);
  EXPECT_EQ(b.status(op::kGet, "e"), st::kNotFound);
  // Without it, the expiry is left alone.
  ASSERT_EQ(a.status(op::kSet, "f", store_extras(0, 0), "y"), st::kSuccess);
  EXPECT_EQ(a.call(op::kLaGK, "f").value, "y");
  EXPECT_EQ(a.status(op::kUnlock, "f"), st::kSuccess);
  EXPECT_EQ(b.call(op::kGet, "f").value, "y");

  // Extras other than none or 4 bytes are invalid (refused; the connection
  // goes on, as yrmcds's does).
  EXPECT_EQ(a.status(op::kLaG, "k", be64(0)), st::kInvalid);
  EXPECT_EQ(a.status(op::kNoop), st::kSuccess);
}

TEST_F(LockE2e, LockAndGetExptimeExtraKeepsAnItemThatWouldExpire) {
  BinClient a, b;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  // An exptime of 1 s may pass right after the set, before the LaG: then
  // start again.
  std::chrono::steady_clock::time_point start;
  Response lag;
  for (int attempt = 0; attempt < 5 && lag.status != st::kSuccess; ++attempt) {
    start = std::chrono::steady_clock::now();
    ASSERT_EQ(a.status(op::kSet, "renewed", store_extras(0, 1), "r"), st::kSuccess);
    lag = a.call(op::kLaG, "renewed", be32(3600));
    ASSERT_TRUE(lag.status == st::kSuccess || lag.status == st::kNotFound)
        << ::testing::PrintToString(lag);
  }
  ASSERT_EQ(lag.status, st::kSuccess);
  EXPECT_EQ(lag.value, "r");
  ASSERT_EQ(a.status(op::kSet, "control", store_extras(0, 1), "c"), st::kSuccess);
  EXPECT_EQ(a.status(op::kUnlock, "renewed"), st::kSuccess);
  ASSERT_TRUE(e2e::eventually([&] { return std::chrono::steady_clock::now() - start >= 2500ms; },
                              10s, 50ms));
  EXPECT_EQ(b.call(op::kGet, "renewed").value, "r");
  EXPECT_EQ(b.status(op::kGet, "control"), st::kNotFound);
}

// ---------------------------------------------------------------------------
// Binary: RaU, RaUQ

TEST_F(LockE2e, ReplaceAndUnlock) {
  BinClient a, b;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  uint64_t old_cas = a.call(op::kSet, "k", store_extras(1, 0), "v1").cas;

  // Without the lock.
  Response not_locked = a.call(op::kRaU, "k", store_extras(0, 0), "x");
  EXPECT_EQ(not_locked.status, st::kNotLocked);
  EXPECT_EQ(not_locked.value, "Not locked");
  EXPECT_EQ(a.status(op::kRaU, "missing", store_extras(0, 0), "x"), st::kNotFound);
  EXPECT_EQ(a.call(op::kGet, "k").value, "v1");

  ASSERT_EQ(a.status(op::kLock, "k"), st::kSuccess);
  EXPECT_EQ(b.status(op::kRaU, "k", store_extras(0, 0), "x"), st::kNotLocked);  // a holds it
  EXPECT_EQ(b.call(op::kGet, "k").value, "v1");
  // A CAS that does not match: refused, still locked.
  EXPECT_EQ(a.status(op::kRaU, "k", store_extras(0, 0), "x", old_cas + 1), st::kExists);
  EXPECT_EQ(b.status(op::kLock, "k"), st::kLocked);

  // locking.md: RaU MUST have a value. Refused as yrmcds refuses it, and
  // the connection, the lock and the item stay as they were.
  EXPECT_EQ(a.status(op::kRaU, "k", store_extras(0, 0), ""), st::kInvalid);
  EXPECT_EQ(b.status(op::kLock, "k"), st::kLocked);
  EXPECT_EQ(b.call(op::kGet, "k").value, "v1");

  Response rau = a.call(op::kRaU, "k", store_extras(9, 0), "v2", old_cas);
  EXPECT_EQ(rau.status, st::kSuccess);
  EXPECT_NE(rau.cas, 0u);
  EXPECT_NE(rau.cas, old_cas);
  EXPECT_EQ(rau.extras + rau.key + rau.value, "");
  Response got = b.call(op::kGet, "k");
  EXPECT_EQ(got.value, "v2");
  EXPECT_EQ(got.extras, be32(9));
  EXPECT_EQ(got.cas, rau.cas);
  // Unlocked: a cannot do it again, b can lock.
  EXPECT_EQ(a.status(op::kRaU, "k", store_extras(0, 0), "x"), st::kNotLocked);
  EXPECT_EQ(a.status(op::kUnlock, "k"), st::kNotLocked);
  EXPECT_EQ(b.status(op::kLock, "k"), st::kSuccess);

  // RaUQ: silent on success, failures answered.
  ASSERT_EQ(a.status(op::kSet, "q", store_extras(0, 0), "q1"), st::kSuccess);
  ASSERT_EQ(a.status(op::kLock, "q"), st::kSuccess);
  a.send(op::kRaUQ, "q", store_extras(0, 0), "q2");
  EXPECT_TRUE(a.noop_is_next());
  EXPECT_EQ(b.call(op::kGet, "q").value, "q2");
  EXPECT_EQ(b.status(op::kLock, "q"), st::kSuccess);
  uint32_t f1 = a.send(op::kRaUQ, "q", store_extras(0, 0), "x");
  uint32_t f2 = a.send(op::kRaUQ, "missing", store_extras(0, 0), "x");
  EXPECT_EQ(a.expect_reply(op::kRaUQ, f1).status, st::kNotLocked);
  EXPECT_EQ(a.expect_reply(op::kRaUQ, f2).status, st::kNotFound);
  EXPECT_TRUE(a.noop_is_next());
  EXPECT_EQ(a.call(op::kGet, "q").value, "q2");

  // RaU needs the Replace extras (refused; the connection goes on, its
  // body skipped).
  EXPECT_EQ(a.status(op::kRaU, "k", {}, "x"), st::kInvalid);
  EXPECT_EQ(a.status(op::kNoop), st::kSuccess);
}

// ---------------------------------------------------------------------------
// Disconnecting releases every lock

class LockReleaseE2e : public LockE2e, public ::testing::WithParamInterface<std::string> {};

TEST_P(LockReleaseE2e, EveryLockOfTheConnectionIsReleased) {
  const std::string how = GetParam();
  bool binary = how.starts_with("binary");
  Client holder;
  BinClient bin_holder;
  Client other, third;
  ASSERT_TRUE(other.connect(port()));
  ASSERT_TRUE(third.connect(port()));
  for (const char* key : {"k1", "k2", "k3", "mine"})
    ASSERT_EQ(other.store("set", key, "v"), "STORED");
  ASSERT_EQ(third.request("lock mine"), "OK");

  if (binary) {
    ASSERT_TRUE(bin_holder.connect(port()));
    EXPECT_EQ(bin_holder.status(op::kLock, "k1"), st::kSuccess);
    EXPECT_EQ(bin_holder.status(op::kLock, "k2"), st::kSuccess);
    EXPECT_EQ(bin_holder.call(op::kLaG, "k3").status, st::kSuccess);
  } else {
    ASSERT_TRUE(holder.connect(port()));
    EXPECT_EQ(holder.request("lock k1"), "OK");
    EXPECT_EQ(holder.request("lock k2"), "OK");
    EXPECT_EQ(holder.request("lock k3"), "OK");
  }
  EXPECT_EQ(other.request("lock k1"), "LOCKED");
  EXPECT_EQ(stat_u64(other.stats(), "curr_locks"), 4u);

  if (how == "close") {
    holder.close();
  } else if (how == "reset") {
    holder.abort();
  } else if (how == "quit") {
    ASSERT_TRUE(holder.send("quit\r\n"));
    EXPECT_TRUE(holder.wait_for_close());
  } else if (how == "half-close") {
    ASSERT_TRUE(holder.shutdown_send());
    EXPECT_TRUE(holder.wait_for_close());
  } else if (how == "binary-quit") {
    uint32_t opaque = bin_holder.send(op::kQuit);
    EXPECT_EQ(bin_holder.expect_reply(op::kQuit, opaque).status, st::kSuccess);
    EXPECT_TRUE(bin_holder.raw().wait_for_close());
  } else if (how == "binary-quitq") {
    bin_holder.send(op::kQuitQ);
    EXPECT_TRUE(bin_holder.raw().wait_for_close());
  } else if (how == "binary-reset") {
    bin_holder.raw().abort();
  } else if (how == "binary-invalid") {
    // A malformed request of memcached's own (a lock-extension one is only
    // refused): the server answers 0x04 and hangs up.
    uint32_t opaque = bin_holder.send(op::kGet, "k1", be32(0));
    EXPECT_EQ(bin_holder.expect_reply(op::kGet, opaque).status, st::kInvalid);
    EXPECT_TRUE(bin_holder.raw().wait_for_close());
  } else {
    FAIL() << how;
  }

  EXPECT_TRUE(lock_once_released(other, "k1"));
  EXPECT_TRUE(lock_once_released(third, "k2"));
  EXPECT_TRUE(lock_once_released(other, "k3"));
  EXPECT_EQ(third.store("set", "k3", "changed"), "LOCKED");  // other's now
  EXPECT_EQ(other.store("set", "k3", "changed"), "STORED");
  // Another connection's lock stays.
  EXPECT_EQ(other.request("lock mine"), "LOCKED");
  EXPECT_EQ(stat_u64(other.stats(), "curr_locks"), 4u);  // mine, k1, k2, k3 by others
}

INSTANTIATE_TEST_SUITE_P(Ways, LockReleaseE2e,
                         ::testing::Values("close", "reset", "quit", "half-close", "binary-quit",
                                           "binary-quitq", "binary-reset", "binary-invalid"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// ---------------------------------------------------------------------------
// Values over --max_item_size meet a lock

class LockSmallItemsE2e : public LockE2e {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start({"--threads=2", "--max_item_size=2048"})); }
};

// RaU is a Replace (locking.md: "the same as that of Replace"), and a Replace
// that is too large leaves the old value, in memcached as in yrmcds. It must
// not delete the locked object, nor let anyone delete an unlocked one.
TEST_F(LockSmallItemsE2e, OversizedReplaceAndUnlockKeepsTheItemAndTheLock) {
  BinClient a, b;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_EQ(a.status(op::kSet, "k", store_extras(0, 0), "old"), st::kSuccess);
  ASSERT_EQ(a.status(op::kSet, "free", store_extras(0, 0), "unlocked"), st::kSuccess);
  ASSERT_EQ(a.status(op::kLock, "k"), st::kSuccess);
  std::string too_large(4096, 'x');

  EXPECT_EQ(a.status(op::kRaU, "k", store_extras(0, 0), too_large), st::kTooLarge);
  EXPECT_TRUE(a.noop_is_next());
  EXPECT_EQ(b.call(op::kGet, "k").value, "old");
  EXPECT_EQ(b.status(op::kLock, "k"), st::kLocked);
  EXPECT_EQ(b.status(op::kSet, "k", store_extras(0, 0), "x"), st::kLocked);
  EXPECT_EQ(a.status(op::kRaU, "k", store_extras(0, 0), "new"), st::kSuccess);
  EXPECT_EQ(b.call(op::kGet, "k").value, "new");

  // Someone who holds no lock cannot delete an item with it either.
  EXPECT_EQ(b.status(op::kRaU, "free", store_extras(0, 0), too_large), st::kTooLarge);
  uint32_t quiet = b.send(op::kRaUQ, "free", store_extras(0, 0), too_large);
  EXPECT_EQ(b.expect_reply(op::kRaUQ, quiet).status, st::kTooLarge);
  EXPECT_EQ(a.call(op::kGet, "free").value, "unlocked");
}

TEST_F(LockSmallItemsE2e, OversizedWritesByOthersLeaveALockedItem) {
  Client a, b;
  BinClient bin;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_TRUE(bin.connect(port()));
  ASSERT_EQ(a.store("set", "k", "v"), "STORED");
  ASSERT_EQ(a.request("lock k"), "OK");
  std::string too_large(4096, 'x');
  EXPECT_EQ(b.store("set", "k", too_large), "SERVER_ERROR object too large for cache");
  EXPECT_EQ(bin.status(op::kSet, "k", store_extras(0, 0), too_large), st::kTooLarge);
  EXPECT_EQ(b.get("k"), "v");
  EXPECT_EQ(b.request("lock k"), "LOCKED");
}

// The holder's own set that fails (too large here) leaves the locked item
// and its lock, as yrmcds does (test/peers/compare_yrmcds.py), in every
// protocol: memcached drops the stale value, but the lock's object is not
// stale to its holder, and the lock must not end unasked.
TEST_F(LockSmallItemsE2e, AHoldersOversizedSetLeavesItsItemAndItsLock) {
  Client a, b;
  BinClient bin;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_TRUE(bin.connect(port()));
  std::string too_large(4096, 'x');
  ASSERT_EQ(a.store("set", "text", "v"), "STORED");
  ASSERT_EQ(a.request("lock text"), "OK");
  EXPECT_EQ(a.store("set", "text", too_large), "SERVER_ERROR object too large for cache");
  ASSERT_TRUE(a.send("ms text 4096 T0\r\n" + too_large + "\r\n"));
  EXPECT_EQ(a.read_line(), "SERVER_ERROR object too large for cache");
  EXPECT_EQ(b.get("text"), "v");
  EXPECT_EQ(b.request("lock text"), "LOCKED");
  EXPECT_EQ(a.request("unlock text"), "OK");

  ASSERT_EQ(bin.status(op::kSet, "bin", store_extras(0, 0), "v"), st::kSuccess);
  ASSERT_EQ(bin.status(op::kLock, "bin"), st::kSuccess);
  EXPECT_EQ(bin.status(op::kSet, "bin", store_extras(0, 0), too_large), st::kTooLarge);
  EXPECT_EQ(b.get("bin"), "v");
  EXPECT_EQ(b.request("lock bin"), "LOCKED");
  EXPECT_EQ(bin.status(op::kUnlock, "bin"), st::kSuccess);
}

// ---------------------------------------------------------------------------
// Expiry, flush_all

TEST_F(LockE2e, LockedItemDoesNotExpireUntilUnlocked) {
  Client a, b;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  // An exptime of 1 s may pass right after the set, before the lock: then
  // start again.
  std::chrono::steady_clock::time_point start;
  std::string lock;
  for (int attempt = 0; attempt < 5 && lock != "OK"; ++attempt) {
    start = std::chrono::steady_clock::now();
    ASSERT_EQ(a.store("set", "k", "v", 0, 1), "STORED");
    lock = a.request("lock k");
    ASSERT_TRUE(lock == "OK" || lock == "NOT_FOUND") << lock;
  }
  ASSERT_EQ(lock, "OK");
  ASSERT_EQ(a.store("set", "control", "c", 0, 1), "STORED");
  ASSERT_TRUE(e2e::eventually([&] { return std::chrono::steady_clock::now() - start >= 2500ms; },
                              10s, 50ms));
  EXPECT_EQ(b.get("control"), std::nullopt);  // the clock did move past the exptime
  EXPECT_EQ(b.get("k"), "v");
  EXPECT_EQ(a.get("k"), "v");
  EXPECT_EQ(b.store("set", "k", "x"), "LOCKED");
  EXPECT_EQ(a.request("unlock k"), "OK");
  // The exptime that passed while locked applies at once.
  EXPECT_EQ(b.get("k"), std::nullopt);
  EXPECT_EQ(b.request("lock k"), "NOT_FOUND");
}

TEST_F(LockE2e, LockedItemSurvivesFlushAll) {
  Client a, b;
  BinClient bin;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_TRUE(bin.connect(port()));
  ASSERT_EQ(a.store("set", "k", "v", 4), "STORED");
  ASSERT_EQ(a.store("set", "k2", "v2"), "STORED");
  ASSERT_EQ(a.store("set", "plain", "p"), "STORED");
  std::optional<uint64_t> cas = gets_cas(a, "k");
  ASSERT_EQ(a.request("lock k"), "OK");
  ASSERT_EQ(a.request("lock k2"), "OK");

  EXPECT_EQ(b.request("flush_all"), "OK");
  EXPECT_EQ(b.get("plain"), std::nullopt);
  EXPECT_EQ(b.get("k"), "v");
  EXPECT_EQ(bin.call(op::kGet, "k2").value, "v2");
  EXPECT_EQ(bin.status(op::kFlush), st::kSuccess);
  EXPECT_EQ(bin.call(op::kGet, "k").value, "v");
  EXPECT_EQ(b.store("set", "k", "x"), "LOCKED");
  EXPECT_EQ(b.request("lock k"), "LOCKED");

  // Unlocked, it stays, with a new CAS (it counts as stored now).
  EXPECT_EQ(a.request("unlock k"), "OK");
  ASSERT_TRUE(b.send("gets k\r\n"));
  std::optional<std::vector<e2e::Value>> values = b.read_values();
  ASSERT_TRUE(values && values->size() == 1) << b.last_error();
  EXPECT_EQ((*values)[0].data, "v");
  EXPECT_EQ((*values)[0].flags, 4u);
  EXPECT_NE((*values)[0].cas, cas);
  EXPECT_EQ(b.request("lock k"), "OK");
  // Released by a disconnect, likewise.
  a.close();
  EXPECT_TRUE(lock_once_released(b, "k2"));
  EXPECT_EQ(b.get("k2"), "v2");
}

// What flush_all spared comes back from the unlock as it was, meta state
// included: the key's base64 encoding ("a b" stored as YSBi with b) and a
// stale mark (md I), not only the value and flags.
TEST_F(LockE2e, AnItemFlushAllSparedKeepsItsMetaStateThroughTheUnlock) {
  Client a, b;
  BinClient bin;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_TRUE(bin.connect(port()));
  ASSERT_EQ(a.request("ms YSBi 1 b\r\nx"), "HD");
  ASSERT_EQ(a.request("ms plain 1\r\np"), "HD");
  ASSERT_EQ(a.request("md plain I"), "HD");
  ASSERT_EQ(bin.status(op::kLock, "a b"), st::kSuccess);
  ASSERT_EQ(bin.status(op::kLock, "plain"), st::kSuccess);
  EXPECT_EQ(b.request("flush_all"), "OK");
  EXPECT_EQ(bin.status(op::kUnlock, "a b"), st::kSuccess);
  EXPECT_EQ(bin.status(op::kUnlock, "plain"), st::kSuccess);
  EXPECT_EQ(b.request("mg YSBi b k v"), "VA 1 kYSBi b");
  EXPECT_EQ(b.read_line(), "x");
  EXPECT_EQ(b.request("mg plain"), "HD X W");  // memcached 1.6.18's order
}

// ---------------------------------------------------------------------------
// Statistics

TEST_F(LockE2e, StatsCountLocks) {
  Client a, b, observer;
  BinClient bin;
  ASSERT_TRUE(a.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  ASSERT_TRUE(observer.connect(port()));
  ASSERT_TRUE(bin.connect(port()));
  for (const char* key : {"k1", "k2", "k3"})
    ASSERT_EQ(a.store("set", key, "v"), "STORED");

  std::map<std::string, std::string> before = observer.stats();
  auto delta = [&](const std::string& name) {
    std::map<std::string, std::string> now = observer.stats();
    return static_cast<int64_t>(stat_u64(now, name) - stat_u64(before, name));
  };
  EXPECT_EQ(stat_u64(before, "curr_locks"), 0u);

  EXPECT_EQ(a.request("lock k1"), "OK");                     // hit
  EXPECT_EQ(b.request("lock k1"), "LOCKED");                 // contended
  EXPECT_EQ(a.request("lock k1"), "LOCKED");                 // contended (the holder)
  EXPECT_EQ(a.request("lock nope"), "NOT_FOUND");            // miss
  EXPECT_EQ(bin.call(op::kLaG, "k2").status, st::kSuccess);  // hit
  EXPECT_EQ(bin.status(op::kLaGK, "nope"), st::kNotFound);   // miss
  EXPECT_EQ(bin.status(op::kLock, "k1"), st::kLocked);       // contended
  EXPECT_EQ(delta("cmd_lock"), 7);
  EXPECT_EQ(delta("lock_hits"), 2);
  EXPECT_EQ(delta("lock_misses"), 2);
  EXPECT_EQ(delta("lock_contended"), 3);
  EXPECT_EQ(stat_u64(observer.stats(), "curr_locks"), 2u);
  EXPECT_EQ(stat_u64(bin.stats(), "curr_locks"), 2u);

  // Unlocking counts no lock request; curr_locks follows every way out.
  EXPECT_EQ(a.request("unlock k1"), "OK");
  EXPECT_EQ(stat_u64(observer.stats(), "curr_locks"), 1u);
  EXPECT_EQ(b.request("lock k3"), "OK");
  EXPECT_EQ(stat_u64(observer.stats(), "curr_locks"), 2u);
  EXPECT_EQ(b.request("delete k3"), "DELETED");
  EXPECT_EQ(stat_u64(observer.stats(), "curr_locks"), 1u);
  EXPECT_EQ(bin.status(op::kRaU, "k2", store_extras(0, 0), "new"), st::kSuccess);
  EXPECT_EQ(stat_u64(observer.stats(), "curr_locks"), 0u);
  EXPECT_EQ(a.request("lock k1"), "OK");
  EXPECT_EQ(a.store("set", "k1", "holder"), "STORED");  // the lock moves to the new version
  EXPECT_EQ(stat_u64(observer.stats(), "curr_locks"), 1u);
  a.close();
  EXPECT_TRUE(e2e::eventually([&] { return stat_u64(observer.stats(), "curr_locks") == 0; }));
  EXPECT_EQ(delta("cmd_lock"), 9);
  EXPECT_EQ(delta("lock_hits"), 4);
}

// ---------------------------------------------------------------------------
// keys (yrmcds's debugging aid)

class KeysE2e : public LockE2e {
 protected:
  static constexpr int kKeys = 5000;

  static std::string key_name(int i) {
    char name[32];
    std::snprintf(name, sizeof name, "key:%05d", i);
    return name;
  }

  void fill(Client& c) {
    std::string batch;
    for (int i = 0; i < kKeys; ++i)
      batch += "set " + key_name(i) + " 0 0 1 noreply\r\nv\r\n";
    for (int i = 0; i < 100; ++i)
      batch += "set other:" + std::to_string(i) + " 0 0 1 noreply\r\nv\r\n";
    ASSERT_TRUE(c.send(batch));
    ASSERT_EQ(c.request("version").substr(0, 8), "VERSION ");
  }

  // Reads "VALUE key" lines up to END.
  static std::optional<std::vector<std::string>> read_keys(Client& c) {
    std::vector<std::string> keys;
    while (true) {
      std::string line = c.read_line();
      if (line == "END") return keys;
      if (!line.starts_with("VALUE ")) {
        ADD_FAILURE() << "unexpected line \"" << e2e::escape(line) << "\"";
        return std::nullopt;
      }
      keys.push_back(line.substr(6));
    }
  }

  static std::vector<std::string> text_keys(Client& c, std::string_view command) {
    EXPECT_TRUE(c.send(std::string(command) + "\r\n"));
    std::optional<std::vector<std::string>> keys = read_keys(c);
    if (!keys) return {};
    std::sort(keys->begin(), keys->end());
    return *keys;
  }

  // Reads Keys replies up to the empty one.
  static std::vector<std::string> binary_keys(BinClient& b, std::string_view prefix) {
    uint32_t opaque = b.send(op::kKeys, prefix);
    std::vector<std::string> keys;
    while (true) {
      Response r = b.expect_reply(op::kKeys, opaque);
      if (r.status != st::kSuccess) {
        ADD_FAILURE() << ::testing::PrintToString(r);
        return {};
      }
      if (r.key.empty()) break;
      EXPECT_EQ(r.extras + r.value, "");
      keys.push_back(r.key);
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  }

  std::vector<std::string> expected(int from, int to) {
    std::vector<std::string> keys;
    for (int i = from; i < to; ++i)
      keys.push_back(key_name(i));
    return keys;
  }
};

TEST_F(KeysE2e, TextKeysListsEveryKeyOnce) {
  Client c;
  ASSERT_TRUE(c.connect(port()));
  fill(c);
  std::vector<std::string> all = text_keys(c, "keys");
  EXPECT_EQ(all.size(), static_cast<size_t>(kKeys + 100));
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), all.size()) << "duplicates";
  EXPECT_EQ(text_keys(c, "keys key:"), expected(0, kKeys));
  EXPECT_EQ(text_keys(c, "keys key:0004"), expected(40, 50));
  EXPECT_EQ(text_keys(c, "keys key:04999"), expected(4999, 5000));
  EXPECT_EQ(text_keys(c, "keys nothing"), std::vector<std::string>{});
  EXPECT_EQ(c.request("keys a b"), "ERROR");

  // A request pipelined behind the walk is answered after its END.
  ASSERT_TRUE(c.send("keys key:\r\nget key:00001\r\nversion\r\n"));
  std::optional<std::vector<std::string>> keys = read_keys(c);
  ASSERT_TRUE(keys);
  EXPECT_EQ(keys->size(), static_cast<size_t>(kKeys));
  EXPECT_EQ(c.read_values(), (std::vector<e2e::Value>{{"key:00001", 0, "v", std::nullopt}}));
  EXPECT_TRUE(c.read_line().starts_with("VERSION "));

  // Several walks pipelined: each one in turn.
  ASSERT_TRUE(c.send("keys key:0001\r\nkeys nothing\r\nkeys key:0002\r\nget key:00003\r\n"));
  std::optional<std::vector<std::string>> first = read_keys(c);
  std::optional<std::vector<std::string>> none = read_keys(c);
  std::optional<std::vector<std::string>> second = read_keys(c);
  ASSERT_TRUE(first && none && second);
  std::sort(first->begin(), first->end());
  std::sort(second->begin(), second->end());
  EXPECT_EQ(*first, expected(10, 20));
  EXPECT_EQ(*none, std::vector<std::string>{});
  EXPECT_EQ(*second, expected(20, 30));
  EXPECT_EQ(c.read_values(), (std::vector<e2e::Value>{{"key:00003", 0, "v", std::nullopt}}));

  // Only live keys: flushed and deleted ones are left out, locked ones stay.
  Client holder;
  ASSERT_TRUE(holder.connect(port()));
  EXPECT_EQ(holder.request("lock key:00007"), "OK");
  EXPECT_EQ(c.request("delete other:3"), "DELETED");
  EXPECT_EQ(text_keys(c, "keys other:3"),
            (std::vector<std::string>{"other:30", "other:31", "other:32", "other:33", "other:34",
                                      "other:35", "other:36", "other:37", "other:38", "other:39"}));
  EXPECT_EQ(c.request("flush_all"), "OK");
  EXPECT_EQ(text_keys(c, "keys"), (std::vector<std::string>{"key:00007"}));
}

TEST_F(KeysE2e, BinaryKeysListsEveryKeyThenAnEmptyReply) {
  Client c;
  BinClient b;
  ASSERT_TRUE(c.connect(port()));
  ASSERT_TRUE(b.connect(port()));
  fill(c);
  std::vector<std::string> all = binary_keys(b, "");
  EXPECT_EQ(all.size(), static_cast<size_t>(kKeys + 100));
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), all.size()) << "duplicates";
  EXPECT_EQ(binary_keys(b, "key:"), expected(0, kKeys));
  EXPECT_EQ(binary_keys(b, "key:0012"), expected(120, 130));
  EXPECT_EQ(binary_keys(b, "nothing"), std::vector<std::string>{});

  // Pipelined behind the walk: answered after the empty reply.
  std::string batch = encode_request(op::kKeys, "key:", {}, {}, 0, 77) +
                      encode_request(op::kGetK, "key:00002", {}, {}, 0, 78) +
                      encode_request(op::kNoop, {}, {}, {}, 0, 79);
  ASSERT_TRUE(b.raw().send(batch));
  size_t listed = 0;
  while (true) {
    std::optional<Response> r = read_response(b.raw());
    ASSERT_TRUE(r) << b.raw().last_error();
    ASSERT_EQ(r->opcode, op::kKeys) << ::testing::PrintToString(*r);
    EXPECT_EQ(r->opaque, 77u);
    if (r->key.empty()) break;
    ++listed;
  }
  EXPECT_EQ(listed, static_cast<size_t>(kKeys));
  std::optional<Response> get = read_response(b.raw());
  ASSERT_TRUE(get);
  EXPECT_EQ(get->opcode, op::kGetK);
  EXPECT_EQ(get->opaque, 78u);
  EXPECT_EQ(get->key, "key:00002");
  EXPECT_EQ(get->value, "v");
  std::optional<Response> noop = read_response(b.raw());
  ASSERT_TRUE(noop);
  EXPECT_EQ(noop->opcode, op::kNoop);
  EXPECT_EQ(noop->opaque, 79u);
}

}  // namespace
