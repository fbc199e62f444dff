// The binary header's 24 bytes, written once for the protocol and the
// replication stream alike (binary_wire.h).
#include "lockcached/protocol/binary_wire.h"

#include <gtest/gtest.h>

#include <string>

#include "lockcached/replication/heartbeat.h"

namespace lockcached::protocol::binary {
namespace {

Header sample() {
  return {.magic = kResponseMagic,
          .opcode = kGetK,
          .key_length = 0x0102,
          .extras_length = 4,
          .data_type = 0,
          .status = kNotFound,
          .body_length = 0x01020304,
          .opaque = 0xa1b2c3d4,  // copied as it is: the client's byte order
          .cas = 0x0102030405060708};
}

TEST(BinaryWireTest, EncodeHeaderWritesTheWireOrder) {
  char bytes[kHeaderSize];
  encode_header(sample(), bytes);
  uint32_t opaque = sample().opaque;
  std::string expected = std::string("\x81\x0c\x01\x02\x04\x00\x00\x01\x01\x02\x03\x04", 12) +
                         std::string(reinterpret_cast<const char*>(&opaque), 4) +
                         std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  EXPECT_EQ(std::string(bytes, kHeaderSize), expected);
}

TEST(BinaryWireTest, DecodeHeaderReadsWhatEncodeHeaderWrote) {
  std::string out = "prefix";
  append_header(sample(), out);
  ASSERT_EQ(out.size(), 6 + kHeaderSize);
  Header back = decode_header(out.data() + 6);
  EXPECT_EQ(back.magic, kResponseMagic);
  EXPECT_EQ(back.opcode, kGetK);
  EXPECT_EQ(back.key_length, 0x0102);
  EXPECT_EQ(back.extras_length, 4);
  EXPECT_EQ(back.data_type, 0);
  EXPECT_EQ(back.status, kNotFound);
  EXPECT_EQ(back.body_length, 0x01020304u);
  EXPECT_EQ(back.opaque, 0xa1b2c3d4u);
  EXPECT_EQ(back.cas, 0x0102030405060708u);
}

// A replica's ack: a Noop response carrying the position in its CAS, and
// in its opaque ("lcCs", in wire order as a request's) that this replica
// takes each item's CAS.
TEST(BinaryWireTest, TheReplicaAckIsANoopResponse) {
  std::string ack;
  replication::append_noop_response(1234, ack);
  ASSERT_EQ(ack.size(), kHeaderSize);
  Header header = decode_header(ack.data());
  EXPECT_EQ(header.magic, kResponseMagic);
  EXPECT_EQ(header.opcode, kNoop);
  EXPECT_EQ(header.status, kSuccess);
  EXPECT_EQ(header.body_length, 0u);
  EXPECT_EQ(ack.substr(12, 4), "lcCs");
  EXPECT_EQ(header.cas, 1234u);
  replication::ResponseReader reader;
  EXPECT_FALSE(reader.answered());
  ASSERT_TRUE(reader.feed(ack));
  EXPECT_EQ(reader.bytes_applied(), 1234u);
  EXPECT_TRUE(reader.answered());
  EXPECT_TRUE(reader.takes_cas());

  // memcached's answer to the master's Noop: opaque 0 (the request's).
  std::string answer(kHeaderSize, '\0');
  answer[0] = static_cast<char>(kResponseMagic);
  answer[1] = static_cast<char>(kNoop);
  replication::ResponseReader memcached;
  ASSERT_TRUE(memcached.feed(answer));
  EXPECT_TRUE(memcached.answered());
  EXPECT_FALSE(memcached.takes_cas());
}

}  // namespace
}  // namespace lockcached::protocol::binary
