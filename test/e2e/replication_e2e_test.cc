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
#include <string_view>

#include <gtest/gtest.h>

#include "played_master.h"
#include "server_process.h"

namespace {

using e2e::Client;
using e2e::free_port;
using e2e::ServerProcess;
using test_peers::PlayedMaster;

// On loopback's network (127.0.0.0/8 stays on this host) but not an address
// of any interface: a virtual IP held elsewhere, and nothing a replica's
// connection attempts could reach outside the machine.
constexpr const char* kElsewhere = "--virtual_ip=127.0.0.2";
// A --virtual_ip node listens on every address (the start refuses less), on
// this test's ephemeral ports.
constexpr const char* kEveryAddress = "--listen=0.0.0.0";
constexpr const char* kReadOnly = "SERVER_ERROR read-only replica: writes go to the master";

// One request of the replication stream, as a raw follower reads it.
struct Frame {
  uint8_t opcode = 0;
  uint32_t opaque = 0;
  uint64_t cas = 0;
  std::string extras;
  std::string key;
  std::string value;
};

constexpr uint8_t kNoop = 0x0a;
// What a snapshot's marks carry (a client's delete of the same key carries 0).
constexpr uint32_t kMarkOpaque = 0x6c634d6b;  // "lcMk"

std::optional<Frame> read_frame(Client& replica) {
  std::optional<std::string> header = replica.read_exactly(24);
  if (!header || static_cast<uint8_t>((*header)[0]) != 0x80) return std::nullopt;
  auto byte = [&](size_t i) { return static_cast<uint8_t>((*header)[i]); };
  Frame frame;
  frame.opcode = byte(1);
  frame.opaque = uint32_t{byte(12)} << 24 | uint32_t{byte(13)} << 16 | uint32_t{byte(14)} << 8 |
                 byte(15);
  for (size_t i = 16; i < 24; ++i)
    frame.cas = frame.cas << 8 | byte(i);
  size_t key_length = size_t{byte(2)} << 8 | byte(3);
  size_t extras_length = byte(4);
  size_t body_length =
      size_t{byte(8)} << 24 | size_t{byte(9)} << 16 | size_t{byte(10)} << 8 | byte(11);
  std::string body;
  if (body_length > 0) {
    std::optional<std::string> read = replica.read_exactly(body_length);
    if (!read) return std::nullopt;
    body = *read;
  }
  frame.extras = body.substr(0, extras_length);
  frame.key = body.substr(extras_length, key_length);
  frame.value = body.substr(extras_length + key_length);
  return frame;
}

// A Noop response, as a replica answers the master: `opaque` "lcCs" says
// it takes each item's CAS (a lockcached replica's), 0 is what memcached
// answers the master's Noop with (and an older lockcached replica acks).
std::string noop_response(uint32_t opaque) {
  std::string response(24, '\0');
  response[0] = static_cast<char>(0x81);
  response[1] = static_cast<char>(kNoop);
  for (int i = 0; i < 4; ++i)
    response[12 + i] = static_cast<char>(opaque >> (24 - 8 * i));
  return response;
}
constexpr uint32_t kTakesCas = 0x6c634373;  // "lcCs"

// A raw follower, which reads the stream and never acks. It answers once,
// at once, as memcached answers the master's first Noop (the master begins
// the stream when a replica answers, or a second later), or as a
// lockcached replica does, saying it takes each item's CAS.
class RawReplica {
 public:
  bool connect(uint16_t port, bool takes_cas = false) {
    return client_.connect(port) && client_.send(noop_response(takes_cas ? kTakesCas : 0));
  }
  // One that never answers: its stream begins a second or two later.
  bool connect_silently(uint16_t port) { return client_.connect(port); }
  // The next frame other than a Noop (a keep-alive, not part of the stream).
  std::optional<Frame> next() {
    for (;;) {
      std::optional<Frame> frame = read_frame(client_);
      if (!frame || frame->opcode != kNoop) return frame;
    }
  }

 private:
  Client client_;
};

// A master on this host's loopback virtual IP, its replicas' port
// `repl_port`, with `more` flags.
::testing::AssertionResult start_master(ServerProcess& server, uint16_t repl_port,
                                        std::vector<std::string> more = {}) {
  std::vector<std::string> flags = {"--virtual_ip=127.0.0.1", kEveryAddress,
                                    "--repl_port=" + std::to_string(repl_port)};
  flags.insert(flags.end(), more.begin(), more.end());
  return server.start(flags);
}

// The stream is memcached binary requests (yrmcds's design): the
// snapshot's beginning, the data as SetQ, the snapshot's end, then each
// change, with Noops to answer.
TEST(ReplicationE2e, AServerHoldingTheVirtualIpIsAMasterThatStreamsSetQs) {
  uint16_t repl_port = free_port();
  ServerProcess server;
  ASSERT_TRUE(start_master(server, repl_port));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  EXPECT_EQ(client.stats("replication")["role"], "master");
  EXPECT_EQ(client.stats("replication")["replicas"], "0");
  // In bytes, as memcached shows maxbytes for -m (docs/observability.md).
  EXPECT_EQ(client.stats("settings")["repl_buffer_size"], "31457280");
  ASSERT_EQ(client.store("set", "key", "value", 5), "STORED");

  RawReplica replica;
  ASSERT_TRUE(replica.connect(repl_port));
  // Marked as a delete of a key no text client can write: a lockcached
  // replica applies the snapshot beside what it holds (any other empties
  // its store first, and deletes nothing with it).
  std::optional<Frame> begin = replica.next();
  ASSERT_TRUE(begin);
  EXPECT_EQ(begin->opcode, 0x14);
  EXPECT_EQ(begin->key, std::string("\0lockcached snapshot begin\0", 27));
  EXPECT_EQ(begin->opaque, kMarkOpaque);
  std::optional<Frame> set = replica.next();
  ASSERT_TRUE(set);
  EXPECT_EQ(set->opcode, 0x11);  // SetQ
  EXPECT_EQ(set->key, "key");
  EXPECT_EQ(set->value, "value");
  EXPECT_EQ(set->extras.substr(0, 4), std::string("\0\0\0\5", 4));  // the flags
  EXPECT_TRUE(e2e::eventually([&] { return client.stats("replication")["replicas"] == "1"; }));
  // The snapshot's end, marked the same way (a Raft member may lead only
  // once its cache saw one).
  std::optional<Frame> end = replica.next();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->opcode, 0x14);
  EXPECT_EQ(end->key, std::string("\0lockcached snapshot end\0", 25));
  EXPECT_EQ(end->opaque, kMarkOpaque);
  // A change after the snapshot follows.
  ASSERT_EQ(client.request("delete key"), "DELETED");
  std::optional<Frame> deleted = replica.next();
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->opcode, 0x14);  // DeleteQ
  EXPECT_EQ(deleted->key, "key");
  EXPECT_EQ(deleted->opaque, 0u);
}

// flush_all spares a locked object on the master; a replica holds no
// locks, so the object follows the flush again, or a failover while it is
// locked would lose it.
TEST(ReplicationE2e, ALockedObjectThatFlushAllSparesFollowsTheFlush) {
  uint16_t repl_port = free_port();
  ServerProcess server;
  // 16 shards, not the default's 64: flush_all with a listener holds every
  // shard's lock and then the replica buffer's, and ThreadSanitizer's
  // deadlock detector follows at most 64 locks held at once (its own
  // CHECK fails beyond them; stage 20 runs this test under it).
  ASSERT_TRUE(start_master(server, repl_port, {"--memory_limit_mb=64"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  ASSERT_EQ(client.store("set", "held", "kept", 7), "STORED");
  ASSERT_EQ(client.store("set", "free", "gone"), "STORED");
  ASSERT_EQ(client.request("lock held"), "OK");
  RawReplica replica;
  ASSERT_TRUE(replica.connect(repl_port));
  for (std::optional<Frame> frame = replica.next();
       frame && frame->key != std::string("\0lockcached snapshot end\0", 25);
       frame = replica.next()) {
  }
  ASSERT_EQ(client.request("flush_all"), "OK");
  std::optional<Frame> flush = replica.next();
  ASSERT_TRUE(flush);
  EXPECT_EQ(flush->opcode, 0x18);  // FlushQ
  std::optional<Frame> again = replica.next();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->opcode, 0x11);  // SetQ
  EXPECT_EQ(again->key, "held");
  EXPECT_EQ(again->value, "kept");
  EXPECT_EQ(again->extras.substr(0, 4), std::string("\0\0\0\7", 4));
  EXPECT_EQ(client.get("held"), "kept");
  EXPECT_EQ(client.get("free"), std::nullopt);
}

// A snapshot larger than a small --repl_buffer_size (1 MiB, with the
// largest items a quarter of it) comes whole: the master adds pieces only
// while less than half the buffer waits, so a piece never overflows it
// (pieces added up to 1 MiB dropped the replica, which resynced forever).
TEST(ReplicationE2e, ASnapshotLargerThanASmallBufferComesWhole) {
  uint16_t repl_port = free_port();
  ServerProcess server;
  ASSERT_TRUE(
      start_master(server, repl_port, {"--repl_buffer_size=1", "--max_item_size=262144"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  constexpr int kItems = 6000;  // about 3 MiB of frames
  const std::string value(500, 'v');
  std::string sets;
  for (int i = 0; i < kItems; ++i) {
    sets += "set k" + std::to_string(i) + " 0 0 " + std::to_string(value.size()) + " noreply\r\n" +
            value + "\r\n";
  }
  ASSERT_TRUE(client.send(sets));
  ASSERT_EQ(client.request("version").substr(0, 8), "VERSION ");

  RawReplica replica;
  ASSERT_TRUE(replica.connect(repl_port));
  int items = 0;
  for (;;) {
    std::optional<Frame> frame = replica.next();
    ASSERT_TRUE(frame) << "dropped after " << items << " items";
    if (frame->opcode == 0x11) ++items;
    if (frame->opcode == 0x14 && frame->key == std::string("\0lockcached snapshot end\0", 25)) {
      break;
    }
  }
  EXPECT_EQ(items, kItems);
  std::map<std::string, std::string> replication = client.stats("replication");
  EXPECT_EQ(replication["replicas_dropped"], "0");
  EXPECT_EQ(replication["replica:0:state"], "streaming");
}

// A replica that says it takes CASes (a lockcached one's acks) gets each
// item's CAS in its SetQ, the one a client's `gets` reads, so a CAS a
// client read stays true on it after a failover, and names no other
// version of the item there. One that does not (memcached, to which a
// SetQ's CAS is a compare-and-swap; an older lockcached, which refuses it)
// gets CAS 0, as before; so does one that says nothing.
TEST(ReplicationE2e, AReplicaThatTakesCasesGetsEachItemsCas) {
  uint16_t repl_port = free_port();
  ServerProcess server;
  ASSERT_TRUE(start_master(server, repl_port));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(client.store("set", "other", "v"), "STORED");
  ASSERT_EQ(client.store("set", "key", "value"), "STORED");
  auto cas_of = [&client](const char* key) {
    std::string line = client.request(std::string("mg ") + key + " c");  // HD c<CAS>
    size_t at = line.find(" c");
    return at == std::string::npos ? uint64_t{0} : std::stoull(line.substr(at + 2));
  };
  uint64_t snapshot_cas = cas_of("key");
  ASSERT_GT(snapshot_cas, 10u);

  for (const char* kind : {"takes CASes", "memcached", "silent"}) {
    SCOPED_TRACE(kind);
    bool takes_cas = kind == std::string_view("takes CASes");
    RawReplica replica;
    ASSERT_TRUE(kind == std::string_view("silent") ? replica.connect_silently(repl_port)
                                                   : replica.connect(repl_port, takes_cas));
    std::optional<Frame> frame;
    do {
      frame = replica.next();
      ASSERT_TRUE(frame);
    } while (frame->key != "key");
    EXPECT_EQ(frame->opcode, 0x11);
    EXPECT_EQ(frame->cas, takes_cas ? snapshot_cas : 0u);
    do {
      frame = replica.next();
      ASSERT_TRUE(frame);
    } while (frame->key != std::string("\0lockcached snapshot end\0", 25));
    // A change after the snapshot: its new CAS.
    ASSERT_EQ(client.store("set", "key", "newer"), "STORED");
    frame = replica.next();
    ASSERT_TRUE(frame);
    EXPECT_EQ(frame->value, "newer");
    EXPECT_EQ(frame->cas, takes_cas ? cas_of("key") : 0u);
  }
}

// The lock service is not replicated (--cluster replicates it): a master's
// lock changes are answered at once, whatever its replicas ack, and the
// stream carries the cache alone.
TEST(ReplicationE2e, AMastersLockServiceIsNotInTheStream) {
  uint16_t repl_port = free_port();
  ServerProcess server;
  ASSERT_TRUE(start_master(server, repl_port, {"--lock_port=-1"}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  // Served once every listener is open, the replication port's too.
  ASSERT_EQ(client.stats("replication")["role"], "master");
  RawReplica replica;  // never acks
  ASSERT_TRUE(replica.connect(repl_port));
  // The (empty) snapshot first: the master counts the replica before it
  // takes the snapshot, and a change made before then is in it.
  std::optional<Frame> begin = replica.next();
  ASSERT_TRUE(begin);
  EXPECT_EQ(begin->key, std::string("\0lockcached snapshot begin\0", 27));
  std::optional<Frame> end = replica.next();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->key, std::string("\0lockcached snapshot end\0", 25));
  std::optional<uint16_t> lock_port = server.lock_port();
  ASSERT_TRUE(lock_port);
  Client locks;
  ASSERT_TRUE(locks.connect(*lock_port));

  EXPECT_EQ(locks.request("lock door").substr(0, 13), "200 Acquired ");
  EXPECT_EQ(locks.request("conn_id").substr(0, 4), "200 ");
  EXPECT_EQ(locks.request("set_timeout 5"), "200 Timeout set");
  EXPECT_EQ(locks.request("unlock door"), "200 Released");
  ASSERT_EQ(client.store("set", "after", "locks"), "STORED");
  std::optional<Frame> frame = replica.next();
  ASSERT_TRUE(frame);
  EXPECT_EQ(frame->opcode, 0x11);  // the SetQ, and nothing of the lock service before it
  EXPECT_EQ(frame->key, "after");
  EXPECT_EQ(client.stats("replication")["replicas"], "1");
}

TEST(ReplicationE2e, AServerWithoutTheVirtualIpIsAReadOnlyReplica) {
  uint16_t repl_port = free_port();
  ServerProcess server;
  ASSERT_TRUE(server.start(
      {kElsewhere, kEveryAddress, "--repl_port=" + std::to_string(repl_port), "--lock_port=-1"}));
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

// Reads the replica's acks (24-byte Noop responses) until `count` came
// (false after 5 s without one). The replica acks as it connects, what it
// applied within 10 ms, and once a tick in any case: a second ack after the
// one for the last frame means a tick saw the link up, and so counts it as
// streaming. Each says the replica takes CASes.
bool await_acks(PlayedMaster& master, int count) {
  for (int seen = 0; seen < count; ++seen) {
    std::optional<std::string> ack = master.read(24);
    if (!ack || *ack != noop_response(kTakesCas).substr(0, 16) + ack->substr(16)) return false;
  }
  return true;
}

// A binary request header: magic, opcode, lengths, `opaque`; CAS 0.
std::string request(uint8_t opcode, std::string_view extras, std::string_view key,
                    std::string_view value, uint32_t opaque = 0) {
  std::string frame(24, '\0');
  frame[0] = static_cast<char>(0x80);
  frame[1] = static_cast<char>(opcode);
  frame[2] = static_cast<char>(key.size() >> 8);
  frame[3] = static_cast<char>(key.size() & 0xff);
  frame[4] = static_cast<char>(extras.size());
  uint32_t body = static_cast<uint32_t>(extras.size() + key.size() + value.size());
  for (int i = 0; i < 4; ++i) {
    frame[8 + i] = static_cast<char>(body >> (24 - 8 * i));
    frame[12 + i] = static_cast<char>(opaque >> (24 - 8 * i));
  }
  return frame.append(extras).append(key).append(value);
}

std::string set_q(std::string_view key, std::string_view value) {
  return request(0x11, std::string(8, '\0'), key, value);  // flags 0, never expires
}

const std::string kSnapshotBegin =
    request(0x14, "", std::string("\0lockcached snapshot begin\0", 27), "", kMarkOpaque);
const std::string kSnapshotEnd =
    request(0x14, "", std::string("\0lockcached snapshot end\0", 25), "", kMarkOpaque);
// A client's delete of a key with the end mark's bytes (a base64 or binary
// key may hold them), as the master forwards it.
const std::string kClientDeletesTheEndKey =
    request(0x14, "", std::string("\0lockcached snapshot end\0", 25), "");

// A master that dies before its snapshot's end leaves a replica the data it
// had: a lockcached master marks its snapshot's beginning, and the replica
// applies it beside its items, dropping those the snapshot did not bring
// only at the end. Nothing else empties it meanwhile, nor while it waits
// for the virtual IP before it resyncs. A master that marks nothing (an older lockcached) makes
// the replica empty its store at the first frame, as before.
TEST(ReplicationE2e, AMasterThatDiesMidSnapshotLeavesTheReplicaItsData) {
  uint16_t repl_port = free_port();
  PlayedMaster master("127.0.0.2", repl_port);  // the virtual IP
  ASSERT_TRUE(master.bound());
  ServerProcess server;
  ASSERT_TRUE(server.start({kElsewhere, kEveryAddress, "--repl_port=" + std::to_string(repl_port),
                            "--repl_timeout=2", "--lock_port=-1"}));
  Client reader;
  ASSERT_TRUE(reader.connect(server.port()));
  auto has = [&reader](const char* key, const char* value) {
    return e2e::eventually([&] { return reader.get(key) == std::optional<std::string>(value); });
  };

  ASSERT_TRUE(master.accept_replica());
  ASSERT_TRUE(master.send(kSnapshotBegin + set_q("a", "1") + set_q("b", "1") + kSnapshotEnd));
  ASSERT_TRUE(has("b", "1"));

  // The next master goes half-way through its snapshot, in which a client
  // deleted a key with the end mark's bytes: that is no end.
  ASSERT_TRUE(master.accept_replica());
  ASSERT_TRUE(master.send(kSnapshotBegin + set_q("a", "2") + kClientDeletesTheEndKey +
                          set_q("c", "2")));
  ASSERT_TRUE(has("c", "2"));
  ASSERT_TRUE(await_acks(master, 3));  // streaming: its loss makes it wait for the address
  master.hang_up();
  EXPECT_EQ(reader.get("a"), "2");
  EXPECT_EQ(reader.get("b"), "1");  // not sent again, and kept
  // Kept through the wait for the virtual IP (--repl_timeout) too, until
  // the next master's stream says otherwise.
  ASSERT_TRUE(master.accept_replica());
  EXPECT_EQ(reader.get("b"), "1");

  // One that marks nothing: emptied at its first frame.
  ASSERT_TRUE(master.send(set_q("d", "3")));
  ASSERT_TRUE(has("d", "3"));
  EXPECT_EQ(reader.get("b"), std::nullopt);
  EXPECT_EQ(reader.get("a"), std::nullopt);

  // A whole snapshot over what is there: only what it brought is left.
  ASSERT_TRUE(master.accept_replica());
  ASSERT_TRUE(master.send(kSnapshotBegin + set_q("e", "4") + kSnapshotEnd));
  EXPECT_TRUE(e2e::eventually([&] { return !reader.get("d"); }));
  EXPECT_EQ(reader.get("e"), "4");
  EXPECT_EQ(reader.stats("replication")["resyncs"], "4");
}

}  // namespace
