// Replication on one machine, without root: the role a server takes from
// the virtual IP (docs/high-availability.md). A server whose --virtual_ip is
// an address of this host is a writable master; one whose virtual IP is
// elsewhere is a read-only replica. Streams between servers, and failover,
// need several hosts: test/ha/replication_test.py (CI stage 25).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "server_process.h"

namespace {

using e2e::Client;
using e2e::ServerProcess;

// On loopback's network (127.0.0.0/8 stays on this host) but not an address
// of any interface: a virtual IP held elsewhere, and nothing a replica's
// connection attempts could reach outside the machine.
constexpr const char* kElsewhere = "--virtual_ip=127.0.0.2";
constexpr const char* kReadOnly = "SERVER_ERROR read-only replica: writes go to the master";

// A port nobody listens on now (the kernel's pick, given back at once).
uint16_t free_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  close(fd);
  return ntohs(address.sin_port);
}

// Any memcached-compatible program can follow a master (yrmcds's design):
// connected to the replication port, it gets the data as binary SetQ
// requests, then Noops to answer.
TEST(ReplicationE2e, AServerHoldingTheVirtualIpIsAMasterThatStreamsSetQs) {
  uint16_t repl_port = free_port();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--virtual_ip=127.0.0.1", "--repl_port=" + std::to_string(repl_port)}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  EXPECT_EQ(client.stats("replication")["role"], "master");
  EXPECT_EQ(client.stats("replication")["replicas"], "0");
  ASSERT_EQ(client.store("set", "key", "value", 5), "STORED");

  Client replica;
  ASSERT_TRUE(replica.connect(repl_port));
  std::optional<std::string> header = replica.read_exactly(24);
  ASSERT_TRUE(header);
  EXPECT_EQ(static_cast<uint8_t>((*header)[0]), 0x80);  // a request
  EXPECT_EQ(static_cast<uint8_t>((*header)[1]), 0x11);  // SetQ
  EXPECT_EQ((*header)[3], 3);                          // key length
  EXPECT_EQ((*header)[4], 8);                          // extras: flags, exptime
  std::optional<std::string> body = replica.read_exactly(8 + 3 + 5);
  ASSERT_TRUE(body);
  EXPECT_EQ(body->substr(8), "keyvalue");
  EXPECT_EQ(body->substr(0, 4), std::string("\0\0\0\5", 4));  // the flags
  EXPECT_TRUE(e2e::eventually([&] { return client.stats("replication")["replicas"] == "1"; }));
  // A change after the snapshot follows.
  ASSERT_EQ(client.request("delete key"), "DELETED");
  std::optional<std::string> next = replica.read_exactly(24 + 3);
  ASSERT_TRUE(next);
  // Noops (keep-alives, once a second) may come first; the delete follows.
  while (static_cast<uint8_t>((*next)[1]) == 0x0a) {
    *next = next->substr(24);
    std::optional<std::string> more = replica.read_exactly(24);
    ASSERT_TRUE(more);
    *next += *more;
  }
  EXPECT_EQ(static_cast<uint8_t>((*next)[1]), 0x14);  // DeleteQ
  EXPECT_EQ(next->substr(24, 3), "key");
}

TEST(ReplicationE2e, AServerWithoutTheVirtualIpIsAReadOnlyReplica) {
  uint16_t repl_port = free_port();
  ServerProcess server;
  ASSERT_TRUE(server.start({kElsewhere, "--repl_port=" + std::to_string(repl_port), "--lock_port=-1"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  std::map<std::string, std::string> replication = client.stats("replication");
  EXPECT_EQ(replication["role"], "replica");
  EXPECT_EQ(replication["master"], "127.0.0.2:" + std::to_string(repl_port));
  EXPECT_EQ(client.stats()["replication_role"], "replica");
  EXPECT_EQ(client.store("set", "k", "v"), kReadOnly);
  EXPECT_EQ(client.store("set", "k", "v", 0, 0, "noreply"), kReadOnly);
  EXPECT_EQ(client.request("delete k"), kReadOnly);
  EXPECT_EQ(client.request("flush_all"), kReadOnly);
  EXPECT_EQ(client.request("lock k"), kReadOnly);
  EXPECT_EQ(client.request("md k"), kReadOnly);
  // Reads are served: a miss, since nothing was stored.
  EXPECT_EQ(client.get("k"), std::nullopt);
  EXPECT_EQ(client.request("version").substr(0, 8), "VERSION ");
  std::optional<uint16_t> lock_port = server.lock_port();
  ASSERT_TRUE(lock_port);
  Client locks;
  ASSERT_TRUE(locks.connect(*lock_port));
  EXPECT_EQ(locks.request("lock name"), "503 read-only replica: writes go to the master");
  EXPECT_EQ(locks.request("conn_id"), "503 read-only replica: writes go to the master");
}

}  // namespace
