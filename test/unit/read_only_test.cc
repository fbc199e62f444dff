// What a read-only replica refuses, command by command, in every protocol
// (docs/high-availability.md, "Replicas serve reads, never writes"): each
// protocol decides it from its command table, a command not marked as a
// read being refused.
#include <endian.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lockcached/core/command_core.h"
#include "lockcached/core/stats.h"
#include "lockcached/locks/coordinator.h"
#include "lockcached/net/reactor.h"
#include "lockcached/net/reactor_scheduler.h"
#include "lockcached/protocol/binary_protocol.h"
#include "lockcached/protocol/lock_service_protocol.h"
#include "lockcached/protocol/output_queue.h"
#include "lockcached/protocol/text_protocol.h"
#include "lockcached/store/clock.h"
#include "lockcached/store/store.h"
#include "lockcached/version.h"

namespace lockcached::protocol {
namespace {

const std::string kRefused = "SERVER_ERROR read-only replica: writes go to the master\r\n";

class NoStats : public core::StatsSource {
 public:
  void collect(core::StatsGroup, core::StatList&) const override {}
  void reset() override {}
};

store::StoreConfig small_store() {
  store::StoreConfig config;
  config.memory_limit = size_t{16} << 20;
  config.max_item_size = 4096;
  config.shard_count = 1;
  return config;
}

// A replica's store, holding key "k" (as the master's stream put it there),
// and a connection's command core on it.
class ReplicaTest : public ::testing::Test {
 protected:
  ReplicaTest() {
    store::ItemRef item = store_.allocate("k", 0, 0, 1);
    item->value()[0] = 'v';
    std::memcpy(item->value() + 1, "\r\n", 2);
    store_.store(store::StoreCommand::kSet, item, 0, store::kNoOwner);
  }

  store::ManualClock clock_;
  store::Store store_{small_store(), clock_};
  NoStats stats_source_;
  core::ThreadStats stats_;
  std::atomic<bool> read_only_{true};
  core::CommandCore core_{store_, stats_, stats_source_, 1, &read_only_};
  OutputQueue out_;
};

class TextReplicaTest : public ReplicaTest {
 protected:
  // The reply to one request, on a connection of its own.
  std::string answer(std::string_view request) {
    TextProtocol protocol(core_);
    std::string input(request);
    input.erase(0, protocol.consume(input, out_));
    while (protocol.has_unfinished_work())
      protocol.continue_work(out_);
    return out_.take_all();
  }
};

TEST_F(TextReplicaTest, EveryChangeIsRefusedEvenWithNoreply) {
  for (const char* request :
       {"delete k\r\n", "delete k noreply\r\n", "incr k 1\r\n", "decr k 1 noreply\r\n",
        "touch k 10\r\n", "gat 10 k\r\n", "gats 10 k\r\n", "flush_all\r\n", "flush_all noreply\r\n",
        "lock k\r\n", "unlock k\r\n", "unlock_all\r\n",
        // Refused before their arguments are looked at.
        "delete\r\n", "incr\r\n", "lock a b c\r\n"}) {
    EXPECT_EQ(answer(request), kRefused) << request;
  }
}

// The data block is skipped, then the command refused: nothing of the
// block is taken for a command.
TEST_F(TextReplicaTest, StorageCommandsSkipTheirDataBlock) {
  for (const char* command : {"set", "add", "replace", "append", "prepend"}) {
    EXPECT_EQ(answer(std::string(command) + " k 0 0 5\r\nquit!\r\nversion\r\n"),
              kRefused + "VERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n")
        << command;
    EXPECT_EQ(answer(std::string(command) + " k 0 0 1 noreply\r\nx\r\n"), kRefused) << command;
  }
  EXPECT_EQ(answer("cas k 0 0 1 5\r\nx\r\n"), kRefused);
  // A storage line that is malformed gets its own error first, as on a master.
  EXPECT_EQ(answer("set k 0 0\r\n"), "ERROR\r\n");
  EXPECT_EQ(answer("set k x 0 1\r\n"), "CLIENT_ERROR bad command line format\r\n");
}

TEST_F(TextReplicaTest, ReadsAndServerCommandsAreServed) {
  EXPECT_EQ(answer("get k\r\n"), "VALUE k 0 1\r\nv\r\nEND\r\n");
  EXPECT_EQ(answer("bget k\r\n"), "VALUE k 0 1\r\nv\r\nEND\r\n");
  EXPECT_EQ(answer("gets missing\r\n"), "END\r\n");
  EXPECT_EQ(answer("version\r\n"), "VERSION " LOCKCACHED_PROTOCOL_VERSION "\r\n");
  EXPECT_EQ(answer("verbosity 0\r\n"), "OK\r\n");
  EXPECT_EQ(answer("cache_memlimit 64\r\n"), "OK\r\n");
  EXPECT_EQ(answer("lru mode flat\r\n"), "OK\r\n");
  EXPECT_EQ(answer("lru_crawler sleep 10\r\n"), "OK\r\n");
  EXPECT_EQ(answer("keys\r\n"), "VALUE k\r\nEND\r\n");
  EXPECT_EQ(answer("stats nonsense\r\n"), "ERROR\r\n");
  EXPECT_EQ(answer("shutdown\r\n"), "ERROR: shutdown not enabled\r\n");
  EXPECT_EQ(answer("refresh_certs\r\n").substr(0, 6), "Error ");  // no TLS here
  EXPECT_EQ(answer("quit\r\n"), "");
  // Unknown commands are unknown, on a replica as anywhere.
  EXPECT_EQ(answer("sett k\r\n"), "ERROR\r\n");
  EXPECT_EQ(answer("x\r\n"), "ERROR\r\n");
}

TEST_F(TextReplicaTest, MetaCommandsThatWriteAreRefused) {
  EXPECT_EQ(answer("ms k 5\r\nquit!\r\nmn\r\n"), kRefused + "MN\r\n");
  EXPECT_EQ(answer("ms k S5 T0\r\n"), kRefused);
  EXPECT_EQ(answer("md k q\r\n"), kRefused);
  EXPECT_EQ(answer("ma k\r\n"), kRefused);
  EXPECT_EQ(answer("mg k v N30\r\n"), kRefused);
  EXPECT_EQ(answer("mg k T30\r\n"), kRefused);
  EXPECT_EQ(answer("mg k v\r\n"), "VA 1\r\nv\r\n");
  EXPECT_EQ(answer("mg k s t R30\r\n"), "HD s1 t-1\r\n");
  EXPECT_EQ(answer("mn\r\n"), "MN\r\n");
  EXPECT_EQ(answer("me k\r\n").substr(0, 5), "ME k ");
  EXPECT_EQ(answer("mz k\r\n"), "ERROR\r\n");
}

// ---- binary ----

class BinaryReplicaTest : public ReplicaTest {
 protected:
  struct Reply {
    uint16_t status = 0xffff;  // none
    bool closed = false;
  };

  // Sends one request and a Noop; the first reply's status (quiet opcodes
  // answer a refusal too), or none when only the Noop answered.
  Reply answer(uint8_t opcode, size_t extras, std::string_view key, size_t value) {
    BinaryProtocol protocol(core_);
    std::string input = header(opcode, extras, key.size(), value) + std::string(extras, '\0') +
                        std::string(key) + std::string(value, 'x') + header(binary::kNoop, 0, 0, 0);
    protocol.consume(input, out_);
    std::string replies = out_.take_all();
    Reply reply;
    reply.closed = protocol.wants_close();
    if (replies.size() >= binary::kHeaderSize && static_cast<uint8_t>(replies[1]) == opcode) {
      reply.status = binary::decode_header(replies.data()).status;
    }
    return reply;
  }

  static std::string header(uint8_t opcode, size_t extras, size_t key, size_t value) {
    char bytes[binary::kHeaderSize];
    binary::encode_header({.magic = binary::kRequestMagic,
                           .opcode = opcode,
                           .key_length = static_cast<uint16_t>(key),
                           .extras_length = static_cast<uint8_t>(extras),
                           .data_type = 0,
                           .status = 0,
                           .body_length = static_cast<uint32_t>(extras + key + value),
                           .opaque = 0,
                           .cas = 0},
                          bytes);
    return {bytes, binary::kHeaderSize};
  }
};

// A well-formed request of every opcode there is: the reads are served,
// everything else is refused (0x86), quiet or not; unknown opcodes stay
// unknown.
TEST_F(BinaryReplicaTest, EveryOpcodeButTheReadsIsRefused) {
  using namespace binary;
  const std::set<uint8_t> reads = {kGet,   kGetQ,     kGetK,          kGetKQ,   kQuit,
                                   kQuitQ, kNoop,     kVersion,       kStat,    kVerbosity,
                                   kKeys,  kSaslAuth, kSaslListMechs, kSaslStep};
  struct Shape {
    size_t extras;
    std::string_view key;
    size_t value;
    std::vector<uint8_t> opcodes;
  };
  const Shape shapes[] = {
      {0,
       "k",
       0,
       {kGet, kGetQ, kGetK, kGetKQ, kDelete, kDeleteQ, kLock, kLockQ, kUnlock, kUnlockQ}},
      {8, "k", 1, {kSet, kSetQ, kAdd, kAddQ, kReplace, kReplaceQ, kRaU, kRaUQ}},
      {0, "k", 1, {kAppend, kAppendQ, kPrepend, kPrependQ}},
      {20, "k", 0, {kIncrement, kIncrementQ, kDecrement, kDecrementQ}},
      {0,
       "",
       0,
       {kQuit, kQuitQ, kNoop, kVersion, kUnlockAll, kUnlockAllQ, kFlush, kFlushQ, kStat, kKeys,
        kSaslListMechs}},
      {4, "", 0, {kVerbosity}},
      {4, "k", 0, {kTouch, kGat, kGatQ, kGatK, kGatKQ}},
      {0, "k", 0, {kLaG, kLaGQ, kLaGK, kLaGKQ}},
      {0, "PLAIN", 3, {kSaslAuth, kSaslStep}},
  };
  std::set<uint8_t> known;
  for (const Shape& shape : shapes) {
    for (uint8_t opcode : shape.opcodes) {
      known.insert(opcode);
      Reply reply = answer(opcode, shape.extras, shape.key, shape.value);
      if (reads.contains(opcode)) {
        EXPECT_NE(reply.status, kTemporaryFailure) << "opcode " << int{opcode};
      } else {
        EXPECT_EQ(reply.status, kTemporaryFailure) << "opcode " << int{opcode};
        EXPECT_FALSE(reply.closed) << "opcode " << int{opcode};
      }
    }
  }
  for (int opcode = 0; opcode < 256; ++opcode) {
    if (known.contains(static_cast<uint8_t>(opcode))) continue;
    EXPECT_EQ(answer(static_cast<uint8_t>(opcode), 0, "k", 0).status, kUnknownCommand)
        << "opcode " << opcode;
  }
}

// A refused value is skipped, not read as requests: the Quit inside it
// closes nothing.
TEST_F(BinaryReplicaTest, ARefusedValueIsSkipped) {
  BinaryProtocol protocol(core_);
  std::string value = header(binary::kQuit, 0, 0, 0);
  std::string input = header(binary::kSetQ, 8, 1, value.size()) + std::string(8, '\0') + "k" +
                      value + header(binary::kVersion, 0, 0, 0);
  protocol.consume(input, out_);
  std::string replies = out_.take_all();
  ASSERT_GE(replies.size(), binary::kHeaderSize);
  binary::Header first = binary::decode_header(replies.data());
  EXPECT_EQ(first.opcode, binary::kSetQ);
  EXPECT_EQ(first.status, binary::kTemporaryFailure);
  size_t second = binary::kHeaderSize + first.body_length;
  ASSERT_GE(replies.size(), second + binary::kHeaderSize);
  EXPECT_EQ(binary::decode_header(replies.data() + second).opcode, binary::kVersion);
  EXPECT_FALSE(protocol.wants_close());
}

// ---- lock service ----

class LockServiceReplicaTest : public ::testing::Test {
 protected:
  std::string answer(std::string_view line) {
    LockServiceProtocol protocol(
        LockServiceContext{std::make_shared<locks::LocalCoordinator>(service_, timers_), reactor_,
                           out_, [] {}, &read_only_});
    std::string input(line);
    protocol.consume(input, out_);
    return out_.take_all();
  }

  std::shared_ptr<locks::LockService> service_ = std::make_shared<locks::LockService>();
  net::Reactor reactor_;
  net::ReactorScheduler timers_{reactor_};
  OutputQueue out_;
  std::atomic<bool> read_only_{true};
};

TEST_F(LockServiceReplicaTest, OnlyStatsClusterAuthAndQuitAreServed) {
  const std::string refused = "503 read-only replica: writes go to the master\r\n";
  for (const char* line : {"lock a\r\n", "unlock a\r\n", "unlock_all\r\n", "conn_id\r\n",
                           "set_timeout 10\r\n", "nonsense\r\n", "lock\r\n"}) {
    EXPECT_EQ(answer(line), refused) << line;
  }
  EXPECT_EQ(answer("stats\r\n").substr(0, 12), "200 STATS\r\nS");
  EXPECT_EQ(answer("cluster add 2 127.0.0.1:1\r\n"), "400 Not a cluster member\r\n");
  EXPECT_EQ(answer("auth a b\r\n"), "400 Authentication not enabled\r\n");
  EXPECT_EQ(answer("quit\r\n"), "200 Bye\r\n");
  EXPECT_EQ(answer("\r\n"), "400 Unknown command\r\n");
}

}  // namespace
}  // namespace lockcached::protocol
