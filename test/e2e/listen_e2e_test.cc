// Where the server listens, as memcached's options say it: a unix-domain
// socket (-s, -a), an address with a port of its own (-l HOST:PORT), an
// address that stays plain under TLS (-l notls:HOST). Bind failures and
// their exit statuses: configuration_e2e_test.cc.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::ServerProcess;

// A path for a test's unix socket, in a directory of its own.
class SocketPath {
 public:
  const std::string& path() const { return path_; }
  // A client connected to it (a test failure when it cannot connect).
  Client client() const {
    Client client;
    EXPECT_TRUE(client.connect_unix(path_));
    return client;
  }

 private:
  e2e::TempDir dir_;
  std::string path_ = (dir_.path() / "lockcached.sock").string();
};

// The server's output once it says it is ready: every "Listening on" line
// is in it (start() returns at the first).
std::string log_when_ready(const ServerProcess& server) {
  EXPECT_TRUE(e2e::eventually([&] { return server.log().find(" ready") != std::string::npos; },
                              e2e::kStartTimeout))
      << server.log();
  return server.log();
}

mode_t mode_of(const std::string& path) {
  struct stat info{};
  if (lstat(path.c_str(), &info) != 0) return 0;
  return info.st_mode;
}

// `stats conns` as {id: {field: value}}.
std::map<std::string, std::map<std::string, std::string>> connections(Client& asking) {
  std::map<std::string, std::map<std::string, std::string>> by_id;
  for (const auto& [name, value] : asking.stats("conns")) {
    size_t colon = name.find(':');
    by_id[name.substr(0, colon)][name.substr(colon + 1)] = value;
  }
  return by_id;
}

TEST(ListenE2e, AUnixSocketServesTheMemcachedProtocolsInsteadOfTcp) {
  SocketPath socket;
  ServerProcess server;
  ASSERT_TRUE(server.start({"--unix_socket=" + socket.path(), "--threads=2"}));
  EXPECT_EQ(server.port(), 0);
  std::string log = log_when_ready(server);
  EXPECT_EQ(log.find("(memcached protocol"), log.rfind("(memcached protocol"))
      << "a TCP cache port besides the socket:\n"
      << log;
  // memcached's default mask, 0700: only the server's user may connect.
  EXPECT_EQ(mode_of(socket.path()), S_IFSOCK | 0700);

  Client client = socket.client();
  EXPECT_EQ(client.store("set", "greeting", "hello"), "STORED");
  EXPECT_EQ(client.get("greeting"), "hello");
  // The binary protocol too: a Version request (opcode 0x0b).
  Client binary = socket.client();
  ASSERT_TRUE(binary.send(std::string("\x80\x0b\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 24)));
  std::optional<std::string> header = binary.read_exactly(24);
  ASSERT_TRUE(header);
  EXPECT_EQ(static_cast<unsigned char>((*header)[0]), 0x81u);

  std::map<std::string, std::string> settings = client.stats("settings");
  EXPECT_EQ(settings["domain_socket"], socket.path());
  EXPECT_EQ(settings["umask"], "700");
  EXPECT_EQ(settings["tcpport"], "0");
  // Every thread waits on the one socket: a listener per thread, none on TCP.
  int listeners = 0;
  for (auto& [id, fields] : connections(client)) {
    if (fields["state"] != "conn_listening") continue;
    ++listeners;
    EXPECT_EQ(fields["addr"], "unix:" + socket.path());
  }
  EXPECT_EQ(listeners, 2);
}

TEST(ListenE2e, MemcachedsOptionsSetTheSocketAndItsMask) {
  SocketPath socket;
  ServerProcess server;
  ASSERT_TRUE(server.start({"-s", socket.path(), "-a", "0770", "-t", "1"}));
  EXPECT_EQ(mode_of(socket.path()), S_IFSOCK | 0770);
  Client client = socket.client();
  EXPECT_EQ(client.stats("settings")["umask"], "770");
}

// memcached's -s turns the network off: with the socket alone, no lock port
// opens either unless --lock_port asks for one.
TEST(ListenE2e, TheSocketAloneOpensNoTcpPortAtAll) {
  SocketPath socket;
  ServerProcess server;
  ASSERT_TRUE(server.start_as_given({"--unix_socket=" + socket.path(), "--threads=1"}));
  Client client = socket.client();
  std::map<std::string, std::string> settings = client.stats("settings");
  EXPECT_EQ(settings["lock_port"], "0");
  EXPECT_EQ(settings["tcpport"], "0");
  std::string log = log_when_ready(server);
  EXPECT_EQ(log.find("Listening on 0.0.0.0"), std::string::npos) << log;

  ServerProcess asked;
  SocketPath other;
  ASSERT_TRUE(asked.start_as_given(
      {"--unix_socket=" + other.path(), "--threads=1", "--listen=127.0.0.1", "--lock_port=-1"}));
  std::optional<uint16_t> lock_port = asked.lock_port();
  ASSERT_TRUE(lock_port);
  Client locks;
  ASSERT_TRUE(locks.connect(*lock_port));
  EXPECT_EQ(locks.request("lock deploy 1").rfind("200 Acquired ", 0), 0u);
}

// As memcached shows them: the client as "?:<AF 0>" (memcached keeps no
// address for it), the socket as "unix:PATH"; watch says rip=unix rport=0
// transport=local.
TEST(ListenE2e, UnixClientsInStatsConnsAndWatch) {
  SocketPath socket;
  ServerProcess server;
  ASSERT_TRUE(server.start({"--unix_socket=" + socket.path(), "--threads=1"}));
  Client watcher = socket.client();
  ASSERT_EQ(watcher.request("watch connevents"), "OK");

  Client client = socket.client();
  std::optional<std::string> line = watcher.read_until("\n");
  ASSERT_TRUE(line) << watcher.last_error();
  EXPECT_NE(line->find(" type=conn_new rip=unix rport=0 transport=local cfd="), std::string::npos)
      << *line;

  int clients = 0;
  for (auto& [id, fields] : connections(client)) {
    if (fields["state"] == "conn_listening") continue;
    ++clients;
    EXPECT_EQ(fields["addr"], "?:<AF 0>");
    EXPECT_EQ(fields["listen_addr"], "unix:" + socket.path());
  }
  EXPECT_EQ(clients, 2);  // the watcher and this one

  client.close();
  line = watcher.read_until("\n");
  ASSERT_TRUE(line) << watcher.last_error();
  EXPECT_NE(line->find(" type=conn_close rip=unix rport=0 transport=local reason=normal cfd="),
            std::string::npos)
      << *line;
}

TEST(ListenE2e, CacheLocksOnTheUnixSocketEndWithTheirConnection) {
  SocketPath socket;
  ServerProcess server;
  ASSERT_TRUE(server.start({"--unix_socket=" + socket.path()}));
  Client holder = socket.client();
  Client other = socket.client();
  ASSERT_EQ(holder.store("set", "job", "queued"), "STORED");
  ASSERT_EQ(holder.request("lock job"), "OK");
  EXPECT_EQ(other.store("set", "job", "mine"), "LOCKED");
  holder.close();
  EXPECT_TRUE(e2e::eventually([&] { return other.request("lock job") == "OK"; }));
  EXPECT_EQ(other.store("set", "job", "mine"), "STORED");
}

// A socket file left by a server that was killed is replaced; one that a
// live server listens on is in use (exit 1, as a TCP port in use), and the
// live server keeps it. A clean stop removes the file.
TEST(ListenE2e, AStaleSocketIsReplacedALiveOneIsInUse) {
  SocketPath socket;
  {
    ServerProcess killed;
    ASSERT_TRUE(killed.start({"--unix_socket=" + socket.path(), "--threads=1"}));
    ASSERT_TRUE(killed.stop(SIGKILL));
  }
  ASSERT_NE(mode_of(socket.path()), 0u) << "SIGKILL leaves the socket file";

  ServerProcess server;
  ASSERT_TRUE(server.start({"--unix_socket=" + socket.path(), "--threads=1"}));
  ServerProcess second;
  EXPECT_FALSE(second.start({"--unix_socket=" + socket.path(), "--threads=1"}, 5s));
  std::optional<int> status = second.wait_for_exit(5s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << e2e::describe_wait_status(status);
  EXPECT_NE(second.log().find(socket.path() + ": Address already in use"), std::string::npos)
      << second.log();

  Client client = socket.client();
  EXPECT_EQ(client.request("version").rfind("VERSION ", 0), 0u);
  client.close();
  std::optional<int> stopped = server.stop(SIGTERM);
  ASSERT_TRUE(stopped);
  EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0);
  EXPECT_EQ(mode_of(socket.path()), 0u) << "the socket file outlived a clean stop";
}

// memcached's -l HOST:PORT: an address with its own port next to one on -p.
TEST(ListenE2e, AnAddressWithItsOwnPort) {
  uint16_t own = e2e::free_port();
  std::string list = "127.0.0.1:" + std::to_string(own) + ",127.0.0.2";
  ServerProcess server;
  ASSERT_TRUE(server.start({"-l", list, "--threads=1"}));
  Client on_own;
  ASSERT_TRUE(on_own.connect(own));
  std::map<std::string, std::string> settings = on_own.stats("settings");
  EXPECT_EQ(settings["inter"], list);
  // tcpport is --port's (0 here: a free one), where the other address listens.
  std::string shared = settings["tcpport"];
  EXPECT_NE(shared, std::to_string(own));
  std::string log = log_when_ready(server);
  EXPECT_NE(log.find("Listening on 127.0.0.2:" + shared + " (memcached protocol)"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("Listening on 127.0.0.1:" + shared), std::string::npos) << log;
  EXPECT_EQ(on_own.store("set", "k", "v"), "STORED");
}

// memcached's -l notls:HOST:PORT under -Z: that address speaks plain text,
// the others TLS; so does the lock port on a host whose entries are all
// notls:.
TEST(ListenE2e, NotlsKeepsAnAddressPlainUnderTls) {
  const std::string certs = std::string(LOCKCACHED_SOURCE_DIR) + "/test/certs";
  uint16_t plain = e2e::free_port();
  uint16_t tls = e2e::free_port();
  ServerProcess server;
  ASSERT_TRUE(server.start(
      {"--tls", "--tls_cert_file=" + certs + "/server.pem",
       "--tls_key_file=" + certs + "/server.key",
       "--listen=notls:127.0.0.1:" + std::to_string(plain) + ",127.0.0.2:" + std::to_string(tls),
       "--lock_port=-1", "--threads=1"}));
  std::string log = log_when_ready(server);
  EXPECT_NE(log.find("Listening on 127.0.0.1:" + std::to_string(plain) + " (memcached protocol)"),
            std::string::npos)
      << log;
  EXPECT_NE(
      log.find("Listening on 127.0.0.2:" + std::to_string(tls) + " (memcached protocol over TLS)"),
      std::string::npos)
      << log;
  std::optional<uint16_t> lock_port = server.lock_port();
  ASSERT_TRUE(lock_port);
  EXPECT_NE(log.find("Listening on 127.0.0.1:" + std::to_string(*lock_port) + " (lock service)"),
            std::string::npos)
      << log;
  EXPECT_NE(
      log.find("Listening on 127.0.0.2:" + std::to_string(*lock_port) + " (lock service over TLS)"),
      std::string::npos)
      << log;

  Client client;
  ASSERT_TRUE(client.connect(plain));
  EXPECT_EQ(client.request("version").rfind("VERSION ", 0), 0u);
  Client locks;
  ASSERT_TRUE(locks.connect(*lock_port));
  EXPECT_EQ(locks.request("lock deploy 1").rfind("200 Acquired ", 0), 0u);
}

}  // namespace
