// --auth_file against the real binary (docs/authentication.md): every
// protocol refuses requests before authenticating, accepts the right
// password, closes after the third wrong one, and SIGHUP picks up a changed
// password. The text replies are memcached 1.6.18's with -Y.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "binary_client.h"
#include "server_process.h"

namespace {

using e2e::Client;
using e2e::ServerProcess;
using e2e::binary::BinClient;
namespace op = e2e::binary::op;

constexpr uint8_t kSaslListMechs = 0x20, kSaslAuth = 0x21, kSaslStep = 0x22;
constexpr uint16_t kAuthError = 0x20;

std::string plain(std::string_view user, std::string_view password) {
  return std::string(1, '\0') + std::string(user) + '\0' + std::string(password);
}

// A server with a users file of its own; the file is rewritten by reload tests.
class AuthE2e : public testing::Test {
 protected:
  void SetUp() override {
    write_users("alice:secret\nbob:hunter2\n");
    ASSERT_TRUE(server_.start({"--auth_file=" + users_, "--lock_port=-1"}));
  }
  ~AuthE2e() override { std::remove(users_.c_str()); }

  void write_users(const std::string& text) { std::ofstream(users_, std::ios::trunc) << text; }

  // "set" with the token as data: memcached's text authentication.
  static std::string text_auth(Client& client, std::string_view token) {
    return client.store("set", "auth", token);
  }

  uint16_t lock_port() {
    std::optional<uint16_t> port = server_.lock_port();
    EXPECT_TRUE(port.has_value());
    return port.value_or(0);
  }

  std::string users_ = testing::TempDir() + "auth_e2e_users." + std::to_string(getpid());
  ServerProcess server_;
};

TEST_F(AuthE2e, TextRefusesEverythingUntilTheSetOfUserAndPassword) {
  Client client;
  ASSERT_TRUE(client.connect(server_.port()));
  EXPECT_EQ(client.request("get k"), "CLIENT_ERROR unauthenticated");
  EXPECT_EQ(client.request("version"), "CLIENT_ERROR unauthenticated");
  EXPECT_EQ(client.request("quit"), "CLIENT_ERROR unauthenticated");
  EXPECT_EQ(text_auth(client, "alice"), "CLIENT_ERROR bad authentication token format");
  EXPECT_EQ(text_auth(client, "alice wrong"), "CLIENT_ERROR authentication failure");
  EXPECT_EQ(text_auth(client, "alice secret"), "STORED");
  EXPECT_EQ(client.get("auth"), std::nullopt);  // the auth set stored nothing
  EXPECT_EQ(client.store("set", "k", "v"), "STORED");
  EXPECT_EQ(client.get("k"), "v");
  auto stats = client.stats();
  EXPECT_EQ(e2e::stat_u64(stats, "auth_cmds"), 3u);
  EXPECT_EQ(e2e::stat_u64(stats, "auth_errors"), 2u);
  auto settings = client.stats("settings");
  EXPECT_EQ(settings["auth_enabled_ascii"], "yes");
  EXPECT_EQ(settings["auth_enabled_sasl"], "yes");
}

TEST_F(AuthE2e, TextClosesAfterTheThirdFailure) {
  Client client;
  ASSERT_TRUE(client.connect(server_.port()));
  EXPECT_EQ(text_auth(client, "alice a"), "CLIENT_ERROR authentication failure");
  EXPECT_EQ(text_auth(client, "mallory secret"), "CLIENT_ERROR authentication failure");
  EXPECT_EQ(text_auth(client, "alice b"), "CLIENT_ERROR authentication failure");
  EXPECT_TRUE(client.wait_for_close());
}

TEST_F(AuthE2e, MetaCommandsNeedTheTextAuthenticationFirst) {
  Client client;
  ASSERT_TRUE(client.connect(server_.port()));
  EXPECT_EQ(client.request("mg k v"), "CLIENT_ERROR unauthenticated");
  ASSERT_TRUE(client.send("ms k 2\r\nhi\r\n"));
  EXPECT_EQ(client.read_line(), "CLIENT_ERROR unauthenticated");  // the "ms" line
  EXPECT_EQ(client.read_line(), "CLIENT_ERROR unauthenticated");  // its data, read as a line
  EXPECT_EQ(text_auth(client, "bob hunter2"), "STORED");
  ASSERT_TRUE(client.send("ms k 2\r\nhi\r\n"));
  EXPECT_EQ(client.read_line(), "HD");
  EXPECT_EQ(client.request("mg k v"), "VA 2");
  EXPECT_EQ(client.read_line(), "hi");
}

TEST_F(AuthE2e, BinarySaslPlainAsMemcachedAnswersIt) {
  BinClient client;
  ASSERT_TRUE(client.connect(server_.port()));
  EXPECT_EQ(client.status(op::kGet, "k"), kAuthError);
  EXPECT_EQ(client.status(op::kSet, "k", e2e::binary::store_extras(0, 0), "v"), kAuthError);
  auto mechs = client.call(kSaslListMechs);
  EXPECT_EQ(mechs.status, 0);
  EXPECT_EQ(mechs.value, "PLAIN");
  auto refused = client.call(kSaslAuth, "PLAIN", {}, plain("alice", "wrong"));
  EXPECT_EQ(refused.status, kAuthError);
  EXPECT_EQ(refused.value, "Auth failure.");
  EXPECT_EQ(client.status(kSaslStep, "PLAIN", {}, plain("alice", "secret")), kAuthError);
  auto accepted = client.call(kSaslAuth, "PLAIN", {}, plain("alice", "secret"));
  EXPECT_EQ(accepted.status, 0);
  EXPECT_EQ(accepted.value, "Authenticated");
  client.set("k", "v");
  EXPECT_EQ(client.call(op::kGet, "k").value, "v");
}

TEST_F(AuthE2e, BinaryClosesAfterTheThirdFailure) {
  BinClient client;
  ASSERT_TRUE(client.connect(server_.port()));
  EXPECT_EQ(client.status(kSaslAuth, "PLAIN", {}, plain("alice", "a")), kAuthError);
  EXPECT_EQ(client.status(kSaslAuth, "CRAM-MD5", {}, "x"), kAuthError);  // not offered
  EXPECT_EQ(client.status(kSaslAuth, "PLAIN", {}, plain("alice", "b")), kAuthError);
  EXPECT_TRUE(client.raw().wait_for_close());
}

TEST_F(AuthE2e, LockServiceNeedsAuthBeforeAnythingAndBeforeAResume) {
  Client holder;
  ASSERT_TRUE(holder.connect(lock_port()));
  EXPECT_EQ(holder.request("lock job"), "401 Authentication required");
  EXPECT_EQ(holder.request(""), "401 Authentication required");
  EXPECT_EQ(holder.request("  "), "401 Authentication required");
  EXPECT_EQ(holder.request("auth alice wrong"), "401 Authentication failed");
  EXPECT_EQ(holder.request("auth alice"), "400 auth takes USER PASSWORD");
  EXPECT_EQ(holder.request("auth alice secret"), "200 Authenticated");
  EXPECT_EQ(holder.request("lock job").rfind("200 Acquired ", 0), 0u);
  std::string session = holder.request("conn_id").substr(4);
  holder.close();

  Client stranger;
  ASSERT_TRUE(stranger.connect(lock_port()));
  EXPECT_EQ(stranger.request("conn_id " + session), "401 Authentication required");
  EXPECT_EQ(stranger.request("auth bob hunter2"), "200 Authenticated");
  // The holder's close reaches the server on its own time, and until then
  // the session is still in use (403, which changes nothing).
  std::string resumed;
  EXPECT_TRUE(e2e::eventually([&] {
    resumed = stranger.request("conn_id " + session);
    return resumed == "200 Resumed";
  })) << resumed;
}

// A session is opened only once its client authenticated: clients that
// never do make no state (in a cluster, no log entries).
TEST_F(AuthE2e, AnUnauthenticatedLockServiceConnectionOpensNoSession) {
  std::vector<Client> strangers(3);
  for (Client& stranger : strangers) {
    ASSERT_TRUE(stranger.connect(lock_port()));
    EXPECT_EQ(stranger.request("lock job"), "401 Authentication required");
  }
  Client user;
  ASSERT_TRUE(user.connect(lock_port()));
  EXPECT_EQ(user.request("auth alice secret"), "200 Authenticated");
  EXPECT_EQ(user.request("lock job").rfind("200 Acquired ", 0), 0u);
  ASSERT_EQ(user.request("stats"), "200 STATS");
  std::string clients;
  for (std::string line = user.read_line(); line != "END"; line = user.read_line()) {
    if (line.starts_with("STAT clients ")) clients = line.substr(13);
  }
  EXPECT_EQ(clients, "1");
}

TEST_F(AuthE2e, LockServiceClosesAfterTheThirdFailure) {
  Client client;
  ASSERT_TRUE(client.connect(lock_port()));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(client.request("auth alice x" + std::to_string(i)), "401 Authentication failed");
  EXPECT_TRUE(client.wait_for_close());
}

TEST_F(AuthE2e, SighupRereadsTheFileAndKeepsItWhenItIsBad) {
  write_users("alice:changed\n");
  ASSERT_EQ(kill(server_.pid(), SIGHUP), 0);
  // Nothing answers a SIGHUP: try until the new password is taken.
  EXPECT_TRUE(e2e::eventually([&] {
    Client client;
    return client.connect(server_.port()) && text_auth(client, "alice changed") == "STORED";
  }));
  Client old;
  ASSERT_TRUE(old.connect(server_.port()));
  EXPECT_EQ(text_auth(old, "alice secret"), "CLIENT_ERROR authentication failure");

  write_users("alice\n");  // a mistake: the users stay as they were
  ASSERT_EQ(kill(server_.pid(), SIGHUP), 0);
  EXPECT_TRUE(e2e::eventually(
      [&] { return server_.log().find("--auth_file unchanged") != std::string::npos; }));
  Client after;
  ASSERT_TRUE(after.connect(server_.port()));
  EXPECT_EQ(text_auth(after, "alice changed"), "STORED");

  // The file replaced by a directory: logged, and the server serves on
  // (it aborted before).
  std::filesystem::remove(users_);
  std::filesystem::create_directory(users_);
  ASSERT_EQ(kill(server_.pid(), SIGHUP), 0);
  EXPECT_TRUE(e2e::eventually(
      [&] { return server_.log().find("Is a directory") != std::string::npos; }));
  Client still;
  ASSERT_TRUE(still.connect(server_.port()));
  EXPECT_EQ(text_auth(still, "alice changed"), "STORED");
}

// Without --auth_file nothing changes: SASL is unknown, as in memcached
// without -S, and the lock service has nothing to check.
TEST(NoAuthE2e, SaslIsUnknownAndAuthIsRefused) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--lock_port=-1"}));
  BinClient binary;
  ASSERT_TRUE(binary.connect(server.port()));
  EXPECT_EQ(binary.status(kSaslListMechs), e2e::binary::st::kUnknownCommand);
  EXPECT_EQ(binary.status(op::kVersion), 0);
  Client text;
  ASSERT_TRUE(text.connect(server.port()));
  EXPECT_EQ(text.stats("settings")["auth_enabled_ascii"], "no");
  Client lock;
  ASSERT_TRUE(lock.connect(server.lock_port().value_or(0)));
  EXPECT_EQ(lock.request("auth alice secret"), "400 Authentication not enabled");
  EXPECT_EQ(lock.request("lock job").rfind("200 Acquired ", 0), 0u);
}

}  // namespace
