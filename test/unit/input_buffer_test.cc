// Unit tests of server::InputBuffer: where a connection's next bytes land,
// and what it keeps of them.
#include "lockcached/server/input_buffer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>

namespace lockcached::server {
namespace {

constexpr size_t kScratchSize = 64 * 1024;

TEST(InputBuffer, HoldsNothingUntilSomethingIsLeftOver) {
  std::string scratch(kScratchSize, '\0');
  InputBuffer input(scratch.data(), scratch.size());
  InputRoom room = input.room(InputBuffer::kMinCapacity);
  EXPECT_EQ(room.data, scratch.data());
  EXPECT_EQ(room.size, scratch.size());

  std::string_view rest = "get par";
  input.keep(rest);
  EXPECT_EQ(input.kept(), rest);
  room = input.room(InputBuffer::kMinCapacity);
  EXPECT_NE(room.data, scratch.data());
  EXPECT_GE(room.size, InputBuffer::kMinCapacity);
  EXPECT_EQ(input.room(InputBuffer::kMinCapacity).data, room.data) << "the same room twice";

  input.keep({});
  EXPECT_TRUE(input.empty());
  EXPECT_EQ(input.room(1).data, scratch.data());
}

TEST(InputBuffer, AppendCopiesOnlyWhatLandedElsewhere) {
  std::string scratch(kScratchSize, '\0');
  InputBuffer input(scratch.data(), scratch.size());
  input.keep("get ");
  InputRoom room = input.room(InputBuffer::kMinCapacity);
  std::memcpy(room.data, "ke", 2);
  input.append({room.data, 2});  // in place
  input.append("y\r\n");         // elsewhere: copied
  EXPECT_EQ(input.kept(), "get key\r\n");

  // What the protocol leaves of the kept bytes moves to their front.
  input.keep(input.kept().substr(4));
  EXPECT_EQ(input.kept(), "key\r\n");
}

TEST(InputBuffer, GrowsForALargeAppend) {
  std::string scratch(kScratchSize, '\0');
  InputBuffer input(scratch.data(), scratch.size());
  input.keep("x");
  std::string large(3 * InputBuffer::kMinCapacity, 'v');
  input.append(large);
  EXPECT_EQ(input.kept(), "x" + large);
}

}  // namespace
}  // namespace lockcached::server
