// End-to-end tests of who is connected and who holds what: `stats conns`
// (memcached 1.6's group, with the connection id where memcached has the
// file descriptor, plus `protocol` and `locks_held`) and `stats cachelocks`
// (every locked cache object with its holder); and -vv logging lock-service
// requests. (The holder's address in the lock service's `stats locks`:
// lock_service_e2e_test.cc.)
//
// A connection is found in `stats conns` by its address, which the test
// reads from its own socket (getsockname). Where the server must first
// notice something that happened on another connection (an accept, a
// partial request, a close), the test asks it again until it shows, with
// e2e::eventually; nothing sleeps.
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
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
namespace op = e2e::binary::op;
namespace st = e2e::binary::st;

// The fields memcached 1.6.18 prints per connection in `stats conns`, and
// per listening socket (checked against it side by side: a listener has no
// listen_addr).
const std::set<std::string> kMemcachedFields = {"addr", "listen_addr", "state",
                                                "secs_since_last_cmd"};
const std::set<std::string> kMemcachedListenerFields = {"addr", "state", "secs_since_last_cmd"};
// Ours, after memcached's.
const std::set<std::string> kOurFields = {"protocol", "locks_held"};

// memcached's form of the client's end of a connection: "tcp:127.0.0.1:PORT".
std::string address_of(const Client& client) {
  return "tcp:" + client.local_address();
}

// `stats conns` grouped: id -> field -> value.
using Connections = std::map<std::string, std::map<std::string, std::string>>;

Connections connections(Client& asking) {
  Connections grouped;
  for (const auto& [name, value] : asking.stats("conns")) {
    size_t colon = name.find(':');
    if (colon == std::string::npos || colon == 0) {
      ADD_FAILURE() << "stats conns: a stat without an id: " << name;
      continue;
    }
    grouped[name.substr(0, colon)][name.substr(colon + 1)] = value;
  }
  return grouped;
}

// The id of the connection whose client end is `address`; "" if not listed.
std::string id_of(const Connections& all, const std::string& address) {
  for (const auto& [id, fields] : all) {
    auto addr = fields.find("addr");
    if (addr != fields.end() && addr->second == address && fields.count("listen_addr")) return id;
  }
  return "";
}

// A connection publishes its state after it has replied (or read), on its
// own thread: asked until it shows `state`.
::testing::AssertionResult state_becomes(Client& asking, const std::string& id,
                                         const std::string& state) {
  std::string last;
  if (e2e::eventually([&] {
        Connections all = connections(asking);
        last = all.count(id) ? all[id]["state"] : "<not listed>";
        return last == state;
      })) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "connection " << id << " stayed " << last << ", not " << state;
}

std::set<std::string> names_of(const std::map<std::string, std::string>& fields) {
  std::set<std::string> names;
  for (const auto& [name, value] : fields)
    names.insert(name);
  return names;
}

std::set<std::string> united(std::set<std::string> a, const std::set<std::string>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

// One `stats cachelocks` line: "STAT <key> <holder id> <holder addr> <secs>[ b]".
struct CacheLock {
  std::string holder;
  std::string address;
  uint64_t seconds = 0;
  bool base64 = false;
};

std::map<std::string, CacheLock> cache_locks(Client& asking, std::string_view prefix = "") {
  std::map<std::string, CacheLock> locks;
  std::string group = prefix.empty() ? "cachelocks" : "cachelocks " + std::string(prefix);
  for (const auto& [key, value] : asking.stats(group)) {
    std::istringstream words(value);
    CacheLock lock;
    std::string flag;
    if (!(words >> lock.holder >> lock.address >> lock.seconds)) {
      ADD_FAILURE() << "stats cachelocks: bad line for " << key << ": " << value;
      continue;
    }
    if (words >> flag) {
      EXPECT_EQ(flag, "b") << value;
      lock.base64 = true;
    }
    locks[key] = lock;
  }
  return locks;
}

class ConnectionsE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.start({"--threads=2", "--lock_port=-1"}));
    std::optional<uint16_t> lock_port = server_.lock_port();
    ASSERT_TRUE(lock_port) << "no lock-service port in the log";
    lock_port_ = *lock_port;
  }

  Client connect(uint16_t port = 0) {
    Client client;
    EXPECT_TRUE(client.connect(port == 0 ? server_.port() : port));
    return client;
  }

  std::string port_text() const { return std::to_string(server_.port()); }

  ServerProcess server_;
  uint16_t lock_port_ = 0;
};

TEST_F(ConnectionsE2e, StatsConnsListsEveryConnectionAndListener) {
  Client asking = connect();
  Client holder = connect();
  ASSERT_EQ(holder.store("set", "k", "v"), "STORED");
  ASSERT_EQ(holder.request("lock k"), "OK");
  e2e::binary::BinClient binary;
  ASSERT_TRUE(binary.connect(server_.port()));
  ASSERT_TRUE(binary.noop_is_next());
  Client locker = connect(lock_port_);
  ASSERT_TRUE(locker.request("lock some-name").starts_with("200 Acquired ")) << "lock service";
  ASSERT_TRUE(locker.request("lock other-name").starts_with("200 Acquired "));
  ASSERT_EQ(asking.request("version").substr(0, 8), "VERSION ");

  Connections all = connections(asking);
  std::string asking_id = id_of(all, address_of(asking));
  std::string holder_id = id_of(all, address_of(holder));
  std::string binary_id = id_of(all, address_of(binary.raw()));
  std::string locker_id = id_of(all, address_of(locker));
  ASSERT_NE(asking_id, "") << "the asking connection is not listed";
  ASSERT_NE(holder_id, "");
  ASSERT_NE(binary_id, "");
  ASSERT_NE(locker_id, "");
  EXPECT_EQ(std::set<std::string>({asking_id, holder_id, binary_id, locker_id}).size(), 4u);

  std::string cache_listen = "tcp:127.0.0.1:" + port_text();
  std::string lock_listen = "tcp:127.0.0.1:" + std::to_string(lock_port_);
  std::map<std::string, std::string>& me = all[asking_id];
  EXPECT_EQ(names_of(me), united(kMemcachedFields, kOurFields));
  EXPECT_EQ(me["listen_addr"], cache_listen);
  EXPECT_EQ(me["state"], "conn_parse_cmd") << "as memcached shows the asking connection";
  EXPECT_EQ(me["protocol"], "text");
  EXPECT_EQ(me["locks_held"], "0");
  EXPECT_EQ(me["secs_since_last_cmd"].find_first_not_of("0123456789"), std::string::npos);

  EXPECT_EQ(names_of(all[holder_id]), united(kMemcachedFields, kOurFields));
  EXPECT_EQ(all[holder_id]["listen_addr"], cache_listen);
  EXPECT_TRUE(state_becomes(asking, holder_id, "conn_waiting"));
  EXPECT_EQ(all[holder_id]["protocol"], "text");
  EXPECT_EQ(all[holder_id]["locks_held"], "1");
  EXPECT_EQ(all[binary_id]["protocol"], "binary");
  EXPECT_EQ(all[binary_id]["locks_held"], "0");
  EXPECT_EQ(all[locker_id]["listen_addr"], lock_listen);
  EXPECT_EQ(all[locker_id]["protocol"], "lock_service");
  EXPECT_EQ(all[locker_id]["locks_held"], "2");
  EXPECT_TRUE(state_becomes(asking, locker_id, "conn_waiting"));

  // Two threads: each listens on both ports (SO_REUSEPORT), as memcached
  // lists its listening sockets.
  int cache_listeners = 0;
  int lock_listeners = 0;
  for (auto& [id, fields] : all) {
    if (fields["state"] != "conn_listening") continue;
    EXPECT_EQ(names_of(fields), kMemcachedListenerFields) << id;
    cache_listeners += fields["addr"] == cache_listen;
    lock_listeners += fields["addr"] == lock_listen;
  }
  EXPECT_EQ(cache_listeners, 2);
  EXPECT_EQ(lock_listeners, 2);

  ASSERT_EQ(holder.request("unlock k"), "OK");
  ASSERT_EQ(locker.request("unlock some-name"), "200 Released");
  all = connections(asking);
  EXPECT_EQ(all[holder_id]["locks_held"], "0");
  EXPECT_EQ(all[locker_id]["locks_held"], "1");

  // A connection leaves the list when it closes.
  holder.close();
  EXPECT_TRUE(e2e::eventually([&] { return connections(asking).count(holder_id) == 0; }));
  EXPECT_EQ(connections(asking).count(binary_id), 1u);
}

TEST_F(ConnectionsE2e, ANewConnectionHasChosenNoProtocolYet) {
  Client asking = connect();
  Client silent = connect();
  std::string address = address_of(silent);
  Connections all;
  // The server accepts it on its own time.
  ASSERT_TRUE(e2e::eventually([&] {
    all = connections(asking);
    return id_of(all, address) != "";
  }));
  std::string id = id_of(all, address);
  EXPECT_EQ(all[id]["protocol"], "undecided");
  EXPECT_EQ(all[id]["locks_held"], "0");
  EXPECT_TRUE(state_becomes(asking, id, "conn_waiting"));
}

// The states a connection shows between requests, in memcached's names
// (conn_read, conn_nread) and ours for a lock-service wait.
TEST_F(ConnectionsE2e, StatesShowPartialRequestsAndLockWaits) {
  Client asking = connect();
  Client partial_line = connect();
  Client partial_value = connect();
  ASSERT_TRUE(partial_line.send("get some"));
  ASSERT_TRUE(partial_value.send("set k 0 0 10\r\nabc"));
  Client holder = connect(lock_port_);
  ASSERT_TRUE(holder.request("lock busy").starts_with("200 Acquired "));
  Client waiter = connect(lock_port_);
  ASSERT_TRUE(waiter.send("lock busy 60\r\n"));

  // Each connection is listed once its first request was answered, or
  // once the server accepted it (the partial ones).
  auto id = [&](const Client& client) {
    std::string found;
    EXPECT_TRUE(e2e::eventually([&] {
      found = id_of(connections(asking), address_of(client));
      return !found.empty();
    })) << "never listed";
    return found;
  };
  std::string line_id = id(partial_line);
  std::string value_id = id(partial_value);
  std::string waiter_id = id(waiter);
  // The server shows a state once it has read the bytes: asked until then.
  EXPECT_TRUE(state_becomes(asking, line_id, "conn_read"));
  EXPECT_TRUE(state_becomes(asking, value_id, "conn_nread"));
  EXPECT_TRUE(state_becomes(asking, waiter_id, "conn_lock_wait"));
  EXPECT_TRUE(state_becomes(asking, id(holder), "conn_waiting"));

  // Once the request is complete, it is answered and the state goes back.
  ASSERT_TRUE(partial_value.send("defghij\r\n"));
  EXPECT_EQ(partial_value.read_line(), "STORED");
  EXPECT_TRUE(state_becomes(asking, value_id, "conn_waiting"));
  ASSERT_EQ(holder.request("unlock busy"), "200 Released");
  EXPECT_TRUE(waiter.read_line().starts_with("200 Acquired "));
  EXPECT_TRUE(state_becomes(asking, waiter_id, "conn_waiting"));
}

TEST_F(ConnectionsE2e, StatsCacheLocksNamesEachHolder) {
  Client asking = connect();
  Client first = connect();
  Client second = connect();
  for (const char* key : {"acct:1", "acct:2", "other", "free"})
    ASSERT_EQ(first.store("set", key, "v"), "STORED");
  ASSERT_EQ(first.request("lock acct:1"), "OK");
  ASSERT_EQ(first.request("lock other"), "OK");
  ASSERT_EQ(second.request("lock acct:2"), "OK");
  // A key no text command could name comes base64-encoded, as in `keys`.
  e2e::binary::BinClient binary;
  ASSERT_TRUE(binary.connect(server_.port()));
  binary.set("with space", "v");
  ASSERT_EQ(binary.status(op::kLock, "with space"), st::kSuccess);

  Connections all = connections(asking);
  std::string first_id = id_of(all, address_of(first));
  std::string second_id = id_of(all, address_of(second));
  std::string binary_id = id_of(all, address_of(binary.raw()));
  ASSERT_NE(first_id, "");
  ASSERT_NE(second_id, "");
  ASSERT_NE(binary_id, "");

  std::map<std::string, CacheLock> locks = cache_locks(asking);
  ASSERT_EQ(locks.size(), 4u);
  EXPECT_EQ(locks["acct:1"].holder, first_id);
  EXPECT_EQ(locks["acct:1"].address, address_of(first));
  EXPECT_FALSE(locks["acct:1"].base64);
  EXPECT_LT(locks["acct:1"].seconds, 3600u);
  EXPECT_EQ(locks["acct:2"].holder, second_id);
  EXPECT_EQ(locks["acct:2"].address, address_of(second));
  EXPECT_EQ(locks["other"].holder, first_id);
  EXPECT_EQ(locks["d2l0aCBzcGFjZQ=="].holder, binary_id);  // "with space"
  EXPECT_TRUE(locks["d2l0aCBzcGFjZQ=="].base64);
  EXPECT_EQ(locks.count("free"), 0u);

  std::map<std::string, CacheLock> acct = cache_locks(asking, "acct:");
  EXPECT_EQ(acct.size(), 2u);
  EXPECT_EQ(acct.count("acct:1"), 1u);
  EXPECT_EQ(acct.count("acct:2"), 1u);
  EXPECT_TRUE(cache_locks(asking, "nothing-like-it").empty());
  EXPECT_EQ(asking.request("stats cachelocks a b"), "ERROR");

  // Unlocked: gone. Disconnected: its locks go with it.
  ASSERT_EQ(first.request("unlock acct:1"), "OK");
  EXPECT_EQ(cache_locks(asking, "acct:").count("acct:1"), 0u);
  first.close();
  EXPECT_TRUE(e2e::eventually([&] { return cache_locks(asking, "other").empty(); }));
  locks = cache_locks(asking);
  EXPECT_EQ(locks.size(), 2u);
  EXPECT_EQ(locks.count("acct:2"), 1u);
}

// -vv logs every lock-service request after its connection's id, as it
// logs the cache's; but not a session id's secret, which would let a
// reader of the log take the session over.
TEST(ConnectionsVerboseE2e, VeryVerboseLogsLockServiceRequests) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"-vv", "--lock_port=-1"}));
  std::optional<uint16_t> lock_port = server.lock_port();
  ASSERT_TRUE(lock_port);
  std::string id;
  std::string session;
  {
    Client asking;
    ASSERT_TRUE(asking.connect(server.port()));
    Client locker;
    ASSERT_TRUE(locker.connect(*lock_port));
    ASSERT_TRUE(locker.request("lock vv-logged\x01name").starts_with("400 ")) << "bad name";
    ASSERT_TRUE(locker.request("lock vv-logged").starts_with("200 Acquired "));
    session = locker.request("conn_id").substr(4);
    ASSERT_NE(session.find('-'), std::string::npos) << session;
    ASSERT_EQ(locker.request("conn_id " + session), "200 Resumed");
    Connections all = connections(asking);
    id = id_of(all, address_of(locker));
    ASSERT_NE(id, "");
  }
  ASSERT_TRUE(server.stop().has_value());
  ASSERT_TRUE(server.wait_for_output_end(5s));
  std::string log = server.log();
  EXPECT_NE(log.find("<" + id + " lock vv-logged\n"), std::string::npos) << log;
  EXPECT_NE(log.find("<" + id + " lock vv-logged\\x01name"), std::string::npos)
      << "escaped, as the cache's requests: " << log;
  std::string serial = e2e::session_serial(session);
  EXPECT_NE(log.find("<" + id + " conn_id " + serial + "-<secret>\n"), std::string::npos) << log;
  EXPECT_EQ(log.find(session.substr(serial.size() + 1)), std::string::npos) << log;
}

// The timer the kernel runs for the server's end of `client`, from
// /proc/net/tcp's "tr" column: 0 none, 1 retransmission, 2 keepalive (the
// only other timer of an established socket), 4 window probe. -1 when the
// socket is not listed.
int server_end_timer(uint16_t server_port, const Client& client) {
  std::string local = client.local_address();
  unsigned client_port = static_cast<unsigned>(std::stoul(local.substr(local.rfind(':') + 1)));
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // the header
  char wanted_local[16], wanted_remote[16];
  std::snprintf(wanted_local, sizeof wanted_local, ":%04X", server_port);
  std::snprintf(wanted_remote, sizeof wanted_remote, ":%04X", client_port);
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local_address, remote_address, state, queues, timer;
    fields >> slot >> local_address >> remote_address >> state >> queues >> timer;
    if (local_address.ends_with(wanted_local) && remote_address.ends_with(wanted_remote)) {
      return std::stoi(timer.substr(0, timer.find(':')), nullptr, 16);
    }
  }
  return -1;
}

// --tcp_keepalive (on by default) arms the kernel's keepalive timer on every
// client connection of both ports, so that a client whose machine vanishes
// is found dead (test/ha/dead_client_test.py cuts one off); 0 turns it off.
// Between a reply and its acknowledgement the retransmission timer shows,
// hence the wait for the idle state.
TEST(ConnectionsKeepaliveE2e, EveryClientConnectionIsProbedUnlessTurnedOff) {
  for (const char* keepalive : {"15", "0"}) {
    SCOPED_TRACE(std::string("--tcp_keepalive=") + keepalive);
    ServerProcess server;
    ASSERT_TRUE(server.start({std::string("--tcp_keepalive=") + keepalive, "--lock_port=-1"}));
    std::optional<uint16_t> lock_port = server.lock_port();
    ASSERT_TRUE(lock_port);
    Client cache;
    ASSERT_TRUE(cache.connect(server.port()));
    EXPECT_EQ(cache.stats("settings")["tcp_keepalive"], keepalive);
    Client locks;
    ASSERT_TRUE(locks.connect(*lock_port));
    ASSERT_TRUE(locks.request("lock probed").starts_with("200 Acquired "));
    int wanted = std::string(keepalive) == "0" ? 0 : 2;
    int cache_timer = -1;
    int lock_timer = -1;
    EXPECT_TRUE(e2e::eventually([&] {
      cache_timer = server_end_timer(server.port(), cache);
      lock_timer = server_end_timer(*lock_port, locks);
      return cache_timer == wanted && lock_timer == wanted;
    })) << "timers: cache port " << cache_timer << ", lock port " << lock_timer;
  }
}

// TCP_USER_TIMEOUT, which --tcp_keepalive sets so that unacknowledged data
// ends a dead connection too, cannot tell a dead client from a live one
// that keeps its receive window shut: a client that reads nothing of the
// replies it asked for, for that long, is closed as dead (docs/locking.md).
TEST(ConnectionsKeepaliveE2e, AClientThatReadsNothingForTheWholeTimeIsClosed) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--tcp_keepalive=2"}));
  Client stalled;
  ASSERT_TRUE(stalled.connect(server.port()));
  int small = 4096;
  setsockopt(stalled.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ASSERT_EQ(stalled.store("set", "big", std::string(500000, 'x')), "STORED");
  std::string gets;
  for (int i = 0; i < 20; ++i)
    gets += "get big\r\n";
  ASSERT_TRUE(stalled.send(gets));
  Client asking;
  ASSERT_TRUE(asking.connect(server.port()));
  EXPECT_TRUE(e2e::eventually([&] { return e2e::stat_u64(asking.stats(), "conns_dead") == 1; },
                              std::chrono::seconds(10)));
  EXPECT_TRUE(stalled.wait_for_close());
}

}  // namespace
