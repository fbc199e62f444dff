// Multi-threaded stress test of server-side locking across reactor threads.
//
// A server with four reactor threads; eight client threads, each with its own
// connection (text or binary, switching at every reconnect), run a random mix
// of lock, unlock, set, add, get, delete, incr, RaU and disconnects (clean
// close, quit, TCP reset) on eight shared keys, and check invariants that hold
// whatever the interleaving:
//
//   * mutual exclusion: a lock is granted only when no other client holds it;
//   * a holder reads back its own token every time, however many writes the
//     others attempt meanwhile, and the holder's own writes, unlock and delete
//     always succeed;
//   * a modification (or lock) by a non-holder on a key that was locked from
//     before the request was sent until after its reply came answers LOCKED;
//   * after every client has gone, no lock remains (curr_locks 0, every key
//     lockable), the server still answers and exits 0 on SIGTERM, and its
//     output holds no sanitizer report.
//
// Who holds what is published in `Shared::holder`: a holder stores a fresh
// epoch there after its lock was granted and clears it before it sends
// anything that may end the lock, so a published epoch always lies inside the
// server-side hold.
//
// CI runs it against a ThreadSanitizer build of the server too; see
// server_binary() in server_process.h.
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <latch>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "binary_client.h"
#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::ServerProcess;
using e2e::stat_u64;

constexpr int kClientThreads = 8;
constexpr int kOpsPerThread = 300;
constexpr int kKeys = 8;
constexpr std::string_view kNotLockedError = "CLIENT_ERROR object is not locked or not found";

std::string key_name(int k) {
  return "stress:" + std::to_string(k);
}

// op::, st::, the codec and BinClient: binary_client.h.
using namespace e2e::binary;

// --- One client connection, either protocol ---------------------------------------

enum class Outcome { kOk, kLocked, kNotFound, kNotLocked, kNotStored, kBad };

const char* name(Outcome o) {
  switch (o) {
    case Outcome::kOk:
      return "OK";
    case Outcome::kLocked:
      return "LOCKED";
    case Outcome::kNotFound:
      return "NOT_FOUND";
    case Outcome::kNotLocked:
      return "NOT_LOCKED";
    case Outcome::kNotStored:
      return "NOT_STORED";
    case Outcome::kBad:
      return "BAD REPLY";
  }
  return "?";
}

class Connection {
 public:
  virtual ~Connection() = default;
  virtual const char* protocol() const = 0;
  virtual Outcome lock(const std::string& key) = 0;
  virtual Outcome unlock(const std::string& key) = 0;
  virtual Outcome set(const std::string& key, const std::string& value) = 0;
  virtual Outcome add(const std::string& key, const std::string& value) = 0;
  virtual Outcome remove(const std::string& key) = 0;
  virtual Outcome incr(const std::string& key) = 0;
  // kOk and the value, kNotFound, or kBad.
  virtual Outcome get(const std::string& key, std::string* value) = 0;
  // Ends the session politely; true when the server closed after it.
  virtual bool quit() = 0;

  bool connect(uint16_t port) {
    ::testing::AssertionResult ok = client_.connect(port);
    if (ok) client_.set_nodelay();
    last_ = ok ? "" : ok.message();
    return ok;
  }
  Client& client() { return client_; }
  // The last reply, for failure messages.
  const std::string& last() const { return last_; }

 protected:
  Client client_;
  std::string last_;
};

class TextConnection final : public Connection {
 public:
  const char* protocol() const override { return "text"; }

  Outcome lock(const std::string& key) override {
    return classify(
        client_.request("lock " + key),
        {{"OK", Outcome::kOk}, {"LOCKED", Outcome::kLocked}, {"NOT_FOUND", Outcome::kNotFound}});
  }
  Outcome unlock(const std::string& key) override {
    return classify(client_.request("unlock " + key),
                    {{"OK", Outcome::kOk}, {std::string(kNotLockedError), Outcome::kNotLocked}});
  }
  Outcome set(const std::string& key, const std::string& value) override {
    return classify(client_.store("set", key, value),
                    {{"STORED", Outcome::kOk}, {"LOCKED", Outcome::kLocked}});
  }
  Outcome add(const std::string& key, const std::string& value) override {
    return classify(client_.store("add", key, value), {{"STORED", Outcome::kOk},
                                                       {"NOT_STORED", Outcome::kNotStored},
                                                       {"LOCKED", Outcome::kLocked}});
  }
  Outcome remove(const std::string& key) override {
    return classify(client_.request("delete " + key), {{"DELETED", Outcome::kOk},
                                                       {"NOT_FOUND", Outcome::kNotFound},
                                                       {"LOCKED", Outcome::kLocked}});
  }
  Outcome incr(const std::string& key) override {
    std::string reply = client_.request("incr " + key + " 1");
    if (!reply.empty() && reply.find_first_not_of("0123456789") == std::string::npos) {
      last_ = reply;
      return Outcome::kOk;
    }
    return classify(reply, {{"NOT_FOUND", Outcome::kNotFound}, {"LOCKED", Outcome::kLocked}});
  }
  Outcome get(const std::string& key, std::string* value) override {
    if (!client_.send("get " + key + "\r\n")) {
      last_ = "<send failed: " + client_.last_error() + ">";
      return Outcome::kBad;
    }
    std::optional<std::vector<e2e::Value>> values = client_.read_values();
    if (!values || values->size() > 1 || (values->size() == 1 && (*values)[0].key != key)) {
      last_ = "<get " + key + ": " + client_.last_error() + ">";
      return Outcome::kBad;
    }
    if (values->empty()) {
      last_ = "END";
      return Outcome::kNotFound;
    }
    *value = (*values)[0].data;
    last_ = "VALUE " + *value;
    return Outcome::kOk;
  }
  bool quit() override { return client_.send("quit\r\n") && client_.wait_for_close(); }

 private:
  Outcome classify(const std::string& reply,
                   const std::vector<std::pair<std::string, Outcome>>& known) {
    last_ = reply;
    for (const auto& [text, outcome] : known) {
      if (reply == text) return outcome;
    }
    return Outcome::kBad;
  }
};

class BinaryConnection final : public Connection {
 public:
  const char* protocol() const override { return "binary"; }

  Outcome lock(const std::string& key) override { return call(op::kLock, key); }
  Outcome unlock(const std::string& key) override { return call(op::kUnlock, key); }
  Outcome set(const std::string& key, const std::string& value) override {
    return call(op::kSet, key, store_extras(0, 0), value);
  }
  Outcome add(const std::string& key, const std::string& value) override {
    Outcome o = call(op::kAdd, key, store_extras(0, 0), value);
    return status_ == st::kExists ? Outcome::kNotStored : o;
  }
  Outcome remove(const std::string& key) override { return call(op::kDelete, key); }
  Outcome incr(const std::string& key) override {
    // No auto-create, as the text incr.
    return call(op::kIncrement, key, arith_extras(1, 0, kNoAutoCreate));
  }
  Outcome get(const std::string& key, std::string* value) override {
    Outcome o = call(op::kGet, key);
    if (o == Outcome::kOk) *value = value_;
    return o;
  }
  // Replace and unlock (RaU); text has no counterpart.
  Outcome replace_and_unlock(const std::string& key, const std::string& value) {
    return call(op::kRaU, key, store_extras(0, 0), value);
  }
  bool quit() override { return call(op::kQuit, "") == Outcome::kOk && client_.wait_for_close(); }

 private:
  Outcome call(uint8_t opcode, const std::string& key, const std::string& extras = {},
               const std::string& value = {}) {
    uint32_t opaque = ++opaque_;
    status_ = 0xffff;
    if (!client_.send(encode_request(opcode, key, extras, value, 0, opaque))) {
      last_ = "<send failed: " + client_.last_error() + ">";
      return Outcome::kBad;
    }
    std::optional<Response> r = read_response(client_);
    if (!r) {
      last_ = "<no reply to opcode " + std::to_string(opcode) + ": " + client_.last_error() + ">";
      return Outcome::kBad;
    }
    status_ = r->status;
    value_ = r->value;
    last_ = "binary status " + std::to_string(status_) + " \"" + e2e::escape(value_, 40) + "\"";
    if (r->magic != kResponseMagic || r->opcode != opcode || r->opaque != opaque) {
      last_ += " answering another request: " + ::testing::PrintToString(*r);
      return Outcome::kBad;
    }
    switch (status_) {
      case st::kSuccess:
        return Outcome::kOk;
      case st::kNotFound:
        return Outcome::kNotFound;
      case st::kLocked:
        return Outcome::kLocked;
      case st::kNotLocked:
        return Outcome::kNotLocked;
      case st::kExists:
        return opcode == op::kAdd ? Outcome::kNotStored : Outcome::kBad;
      default:
        return Outcome::kBad;
    }
  }

  uint32_t opaque_ = 0;
  uint16_t status_ = 0;
  std::string value_;
};

// --- What the client threads share -------------------------------------------------

struct Shared {
  // Per key: 0, or the epoch of the lock a client thread holds now.
  std::array<std::atomic<uint64_t>, kKeys> holder{};
  std::atomic<uint64_t> next_epoch{1};
  // Evidence that the interesting cases happened.
  std::atomic<uint64_t> locks_granted{0};
  std::atomic<uint64_t> refused_while_held{0};
  std::atomic<uint64_t> token_checks{0};
  std::atomic<uint64_t> reconnects{0};
};

class ClientThread {
 public:
  ClientThread(int id, uint16_t port, Shared& shared)
      : id_(id), port_(port), shared_(shared), random_(static_cast<uint32_t>(1000 + id)) {}

  // Runs the mix; returns what went wrong (empty when nothing did).
  std::vector<std::string> run() {
    if (!reconnect()) return errors_;
    for (op_ = 0; op_ < kOpsPerThread && errors_.empty(); ++op_)
      step();
    // Leave: half the threads politely, half by closing or resetting.
    release_all_published();
    if (errors_.empty()) {
      if (id_ % 4 == 0) {
        if (!connection_->quit()) fail("quit did not close the connection");
      } else if (id_ % 4 == 1) {
        connection_->client().abort();
      } else {
        connection_->client().close();
      }
    }
    connection_.reset();
    return errors_;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(random_); }

  void fail(const std::string& what) {
    errors_.push_back("client " + std::to_string(id_) + " (" +
                      (connection_ ? connection_->protocol() : "-") + "), op " +
                      std::to_string(op_) + ": " + what +
                      "; last reply: " + (connection_ ? connection_->last() : std::string("-")));
    release_all_published();
  }

  bool expect(Outcome got, std::initializer_list<Outcome> allowed, const std::string& what) {
    for (Outcome o : allowed) {
      if (got == o) return true;
    }
    fail(what + " answered " + name(got));
    return false;
  }

  bool reconnect() {
    ++generation_;
    if ((id_ + generation_) % 2 == 0) {
      connection_ = std::make_unique<TextConnection>();
    } else {
      connection_ = std::make_unique<BinaryConnection>();
    }
    if (!connection_->connect(port_)) {
      fail("connect");
      return false;
    }
    return true;
  }

  // Forgets every lock this thread published (before anything that may end
  // them server-side).
  void release_all_published() {
    for (const auto& [k, token] : held_)
      shared_.holder[k].store(0);
    held_.clear();
  }

  std::string new_token() {
    return std::to_string((id_ + 1) * 1'000'000'000ull + shared_.next_epoch.fetch_add(1));
  }

  int random_key_not_held() {
    for (int tries = 0; tries < 100; ++tries) {
      int k = pick(kKeys);
      if (!held_.count(k)) return k;
    }
    return -1;
  }

  int random_held_key() {
    auto it = held_.begin();
    std::advance(it, pick(static_cast<int>(held_.size())));
    return it->first;
  }

  // The holder must read its own token.
  void check_token(int k) {
    std::string value;
    Outcome o = connection_->get(key_name(k), &value);
    if (o != Outcome::kOk || value != held_[k]) {
      fail("holder of " + key_name(k) + " expected its token " + held_[k] + ", got " + name(o) +
           " \"" + value + "\"");
      return;
    }
    shared_.token_checks.fetch_add(1);
  }

  void try_lock() {
    int k = random_key_not_held();
    if (k < 0) return;
    std::string key = key_name(k);
    uint64_t before = shared_.holder[k].load();
    Outcome o = connection_->lock(key);
    uint64_t after = shared_.holder[k].load();
    if (!expect(o, {Outcome::kOk, Outcome::kLocked, Outcome::kNotFound}, "lock " + key)) return;
    if (before != 0 && before == after && o != Outcome::kLocked) {
      fail("lock " + key + " while another client held it throughout answered " + name(o));
      return;
    }
    if (o == Outcome::kNotFound) {
      expect(connection_->add(key, "0"), {Outcome::kOk, Outcome::kNotStored, Outcome::kLocked},
             "add " + key);
      return;
    }
    if (o != Outcome::kOk) return;
    uint64_t epoch = shared_.next_epoch.fetch_add(1);
    uint64_t expected = 0;
    if (!shared_.holder[k].compare_exchange_strong(expected, epoch)) {
      fail("lock " + key + " granted while another client holds it (epoch " +
           std::to_string(expected) + ")");
      return;
    }
    shared_.locks_granted.fetch_add(1);
    held_[k] = new_token();
    if (!expect(connection_->set(key, held_[k]), {Outcome::kOk}, "holder's set " + key)) return;
    check_token(k);
  }

  // A modification by a non-holder: LOCKED whenever a lock was held all along.
  void modify_other() {
    int k = random_key_not_held();
    if (k < 0) return;
    std::string key = key_name(k);
    int which = pick(4);
    uint64_t before = shared_.holder[k].load();
    Outcome o;
    std::string what;
    if (which == 0 || which == 1) {
      what = "set " + key;
      o = connection_->set(key, std::to_string(pick(1000)));
      if (!expect(o, {Outcome::kOk, Outcome::kLocked}, what)) return;
    } else if (which == 2) {
      what = "incr " + key;
      o = connection_->incr(key);
      if (!expect(o, {Outcome::kOk, Outcome::kNotFound, Outcome::kLocked}, what)) return;
    } else {
      what = "delete " + key;
      o = connection_->remove(key);
      if (!expect(o, {Outcome::kOk, Outcome::kNotFound, Outcome::kLocked}, what)) return;
    }
    uint64_t after = shared_.holder[k].load();
    if (before != 0 && before == after) {
      if (o != Outcome::kLocked) {
        fail(what + " by a non-holder while the key was locked throughout answered " + name(o));
        return;
      }
      shared_.refused_while_held.fetch_add(1);
    }
  }

  void read_any() {
    std::string value;
    int k = pick(kKeys);
    if (held_.count(k)) return check_token(k);
    Outcome o = connection_->get(key_name(k), &value);
    if (!expect(o, {Outcome::kOk, Outcome::kNotFound}, "get " + key_name(k))) return;
    if (o == Outcome::kOk && value.find_first_not_of("0123456789") != std::string::npos) {
      fail("get " + key_name(k) + " returned a value nobody wrote: \"" + value + "\"");
    }
  }

  void unlock_not_held() {
    int k = random_key_not_held();
    if (k < 0) return;
    Outcome o = connection_->unlock(key_name(k));
    expect(o, {Outcome::kNotLocked, Outcome::kNotFound}, "unlock of a key not held");
    if (o == Outcome::kNotFound && connection_->protocol() == std::string_view("text")) {
      fail("text unlock answered NOT_FOUND");
    }
  }

  void relock_held() {
    if (held_.empty()) return;
    int k = random_held_key();
    expect(connection_->lock(key_name(k)), {Outcome::kLocked}, "lock by the holder itself");
  }

  void rewrite_held() {
    if (held_.empty()) return;
    int k = random_held_key();
    held_[k] = new_token();
    if (!expect(connection_->set(key_name(k), held_[k]), {Outcome::kOk}, "holder's rewrite")) {
      return;
    }
    check_token(k);
  }

  void release_one() {
    if (held_.empty()) return;
    int k = random_held_key();
    std::string key = key_name(k);
    check_token(k);
    if (!errors_.empty()) return;
    held_.erase(k);
    shared_.holder[k].store(0);
    int how = pick(3);
    if (how == 0) {
      expect(connection_->remove(key), {Outcome::kOk}, "holder's delete " + key);
    } else if (how == 1 && std::string_view(connection_->protocol()) == "binary") {
      auto& binary = static_cast<BinaryConnection&>(*connection_);
      expect(binary.replace_and_unlock(key, new_token()), {Outcome::kOk}, "holder's RaU " + key);
    } else {
      expect(connection_->unlock(key), {Outcome::kOk}, "holder's unlock " + key);
    }
  }

  void disconnect() {
    release_all_published();
    int how = pick(3);
    if (how == 0) {
      connection_->client().abort();
    } else if (how == 1) {
      connection_->client().close();
    } else if (!connection_->quit()) {
      fail("quit did not close the connection");
      return;
    }
    shared_.reconnects.fetch_add(1);
    reconnect();
  }

  void step() {
    int r = pick(100);
    if (r < 22) {
      try_lock();
    } else if (r < 42) {
      modify_other();
    } else if (r < 57) {
      read_any();
    } else if (r < 67) {
      if (!held_.empty()) check_token(random_held_key());
    } else if (r < 79) {
      release_one();
    } else if (r < 84) {
      rewrite_held();
    } else if (r < 88) {
      unlock_not_held();
    } else if (r < 91) {
      relock_held();
    } else if (r < 95) {
      // Holders stay a little longer: more of the others' writes meet a lock.
      if (!held_.empty()) check_token(random_held_key());
    } else {
      disconnect();
    }
  }

  const int id_;
  const uint16_t port_;
  Shared& shared_;
  std::mt19937 random_;
  int op_ = 0;
  int generation_ = 0;
  std::unique_ptr<Connection> connection_;
  std::map<int, std::string> held_;  // key index -> the token this thread wrote
  std::vector<std::string> errors_;
};

TEST(LockStressE2e, LocksHoldAcrossReactorThreadsAndProtocols) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--threads=4"}));

  {
    Client setup;
    ASSERT_TRUE(setup.connect(server.port()));
    for (int k = 0; k < kKeys; ++k)
      ASSERT_EQ(setup.store("set", key_name(k), "0"), "STORED");
  }

  Shared shared;
  std::vector<std::vector<std::string>> errors(kClientThreads);
  {
    std::latch start(kClientThreads);
    std::vector<std::thread> threads;
    for (int id = 0; id < kClientThreads; ++id) {
      threads.emplace_back([&, id] {
        ClientThread client(id, server.port(), shared);
        start.arrive_and_wait();
        errors[id] = client.run();
      });
    }
    for (std::thread& thread : threads)
      thread.join();
  }
  for (int id = 0; id < kClientThreads; ++id) {
    for (const std::string& error : errors[id])
      ADD_FAILURE() << error;
  }
  RecordProperty("locks_granted", std::to_string(shared.locks_granted.load()));
  RecordProperty("refused_while_held", std::to_string(shared.refused_while_held.load()));
  RecordProperty("token_checks", std::to_string(shared.token_checks.load()));
  RecordProperty("reconnects", std::to_string(shared.reconnects.load()));
  EXPECT_GT(shared.locks_granted.load(), 50u);
  EXPECT_GT(shared.refused_while_held.load(), 0u);
  EXPECT_GT(shared.token_checks.load(), 100u);
  EXPECT_GT(shared.reconnects.load(), 10u);

  // Every client is gone: so are their locks.
  ASSERT_FALSE(server.wait_for_exit(0ms).has_value()) << "the server died";
  Client observer;
  ASSERT_TRUE(observer.connect(server.port()));
  EXPECT_TRUE(e2e::eventually([&] { return stat_u64(observer.stats(), "curr_locks") == 0; }, 10s))
      << "curr_locks " << stat_u64(observer.stats(), "curr_locks");
  for (int k = 0; k < kKeys; ++k) {
    std::string reply = observer.request("lock " + key_name(k));
    EXPECT_TRUE(reply == "OK" || reply == "NOT_FOUND") << key_name(k) << ": " << reply;
  }
  EXPECT_EQ(observer.request("unlock_all"), "OK");
  EXPECT_TRUE(observer.request("version").starts_with("VERSION "));
  observer.close();

  std::optional<int> status = server.stop(SIGTERM, 10s);
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << e2e::describe_wait_status(status);
  EXPECT_TRUE(server.wait_for_output_end(10s));
  std::string log = server.log();
  EXPECT_EQ(log.find("ThreadSanitizer"), std::string::npos) << log;
  EXPECT_EQ(log.find("AddressSanitizer"), std::string::npos) << log;
  EXPECT_EQ(log.find("runtime error"), std::string::npos) << log;  // UBSan
}

}  // namespace
