// Unit tests of protocol::OutputQueue: what gather() describes, what
// consume() releases, and that item memory stays alive until it is sent.
#include "lockcached/protocol/output_queue.h"

#include <gtest/gtest.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "lockcached/store/item.h"

namespace lockcached::protocol {
namespace {

using store::ItemRef;

// Well past any copy threshold: sent by reference from the item.
constexpr size_t kLargeValue = 64 * 1024;
constexpr size_t kSmallValue = 10;

ItemRef make_item(std::string_view key, size_t value_len, char fill_from = 'a') {
  ItemRef item(store::item_allocate(key, 0, 0, value_len));
  for (size_t i = 0; i < value_len; ++i)
    item->value()[i] = static_cast<char>(fill_from + i % 26);
  return item;
}

// Value and the CRLF behind it, as the text protocol sends them.
std::string_view value_and_crlf(const ItemRef& item) {
  return {item->value(), item->value_len + size_t{2}};
}

void append_value(OutputQueue& queue, const ItemRef& item) {
  queue.append_item(item.get(), item->value(), item->value_len + size_t{2});
}

std::vector<iovec> gather_all(const OutputQueue& queue, int max = 64) {
  std::vector<iovec> iov(static_cast<size_t>(max));
  int count = queue.gather(iov.data(), max);
  EXPECT_GE(count, 0);
  EXPECT_LE(count, max);
  iov.resize(static_cast<size_t>(count));
  return iov;
}

std::string joined(const std::vector<iovec>& iov) {
  std::string bytes;
  for (const iovec& piece : iov)
    bytes.append(static_cast<const char*>(piece.iov_base), piece.iov_len);
  return bytes;
}

// Drains the queue as a connection would: gather, "send" up to `chunk`
// bytes of what was described, consume what was sent; returns all the bytes
// sent.
std::string drain(OutputQueue& queue, size_t chunk, int max_iov = 64) {
  std::string sent;
  while (!queue.empty()) {
    std::vector<iovec> iov = gather_all(queue, max_iov);
    EXPECT_FALSE(iov.empty());
    if (iov.empty()) break;
    size_t n = 0;
    for (const iovec& piece : iov) {
      size_t take = std::min(chunk - n, piece.iov_len);
      sent.append(static_cast<const char*>(piece.iov_base), take);
      n += take;
      if (n == chunk) break;
    }
    queue.consume(n);
  }
  return sent;
}

TEST(OutputQueueTest, StartsEmpty) {
  OutputQueue queue;
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.pending(), 0u);
  EXPECT_TRUE(gather_all(queue).empty());
  EXPECT_EQ(queue.take_all(), "");
}

TEST(OutputQueueTest, AppendedBytesComeOutInOrder) {
  OutputQueue queue;
  queue.append("STORED\r\n");
  queue.append("");
  queue.append("END\r\n");
  EXPECT_FALSE(queue.empty());
  EXPECT_EQ(queue.pending(), 13u);
  EXPECT_EQ(joined(gather_all(queue)), "STORED\r\nEND\r\n");
  // gather() only describes: nothing was taken.
  EXPECT_EQ(queue.pending(), 13u);
  EXPECT_EQ(queue.take_all(), "STORED\r\nEND\r\n");
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.pending(), 0u);
}

// What the io_uring connection does with its spare queue once a client
// stops pipelining: the memory goes, the queue stays usable.
TEST(OutputQueueTest, ReleasedMemoryLeavesAnEmptyUsableQueue) {
  OutputQueue queue;
  queue.append(std::string(100 * 1024, 'x'));
  queue.release_memory();
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.pending(), 0u);
  EXPECT_TRUE(gather_all(queue).empty());
  queue.append("END\r\n");
  EXPECT_EQ(queue.take_all(), "END\r\n");
}

TEST(OutputQueueTest, AdjacentBytesShareOnePiece) {
  OutputQueue queue;
  queue.append("VALUE ");
  queue.append("k");
  queue.append_number(5);
  queue.append("\r\n");
  EXPECT_EQ(gather_all(queue).size(), 1u);
}

TEST(OutputQueueTest, AppendNumber) {
  OutputQueue queue;
  for (uint64_t value : {uint64_t{0}, uint64_t{7}, uint64_t{42}, uint64_t{1000000007},
                         std::numeric_limits<uint64_t>::max()}) {
    queue.append_number(value);
    queue.append(" ");
  }
  EXPECT_EQ(queue.take_all(), "0 7 42 1000000007 " + std::to_string(UINT64_MAX) + " ");
}

TEST(OutputQueueTest, ReservedRoomKeepsWhatWasWrittenBeforeCommit) {
  OutputQueue queue;
  queue.append("a");
  char* at = queue.reserve(100000);  // more than the buffer holds yet
  std::memcpy(at, "bcd", 3);
  queue.commit(at + 2);  // "d" was written but not committed
  queue.append("e");
  EXPECT_EQ(queue.pending(), 4u);
  EXPECT_EQ(queue.take_all(), "abce");
}

TEST(OutputQueueTest, CopiesSmallRangesUntilMuchIsBuffered) {
  OutputQueue queue;
  EXPECT_TRUE(queue.copies(kSmallValue));
  EXPECT_FALSE(queue.copies(kLargeValue));
  queue.append(std::string(512 * 1024, 'x'));
  EXPECT_FALSE(queue.copies(kSmallValue));
}

TEST(OutputQueueTest, SmallItemRangeIsCopied) {
  OutputQueue queue;
  ItemRef item = make_item("k", kSmallValue);
  std::string expected(value_and_crlf(item));
  append_value(queue, item);
  EXPECT_EQ(item->refs.load(), 1u);
  EXPECT_EQ(queue.pending(), expected.size());
  item = ItemRef();  // freed: the queue holds its own copy
  EXPECT_EQ(queue.take_all(), expected);
}

TEST(OutputQueueTest, LargeItemRangeIsSentFromTheItem) {
  OutputQueue queue;
  ItemRef item = make_item("k", kLargeValue);
  queue.append("VALUE k 0 65536\r\n");
  append_value(queue, item);
  queue.append("END\r\n");
  EXPECT_EQ(item->refs.load(), 2u);

  std::vector<iovec> iov = gather_all(queue);
  ASSERT_EQ(iov.size(), 3u);
  EXPECT_EQ(iov[1].iov_base, item->value());
  EXPECT_EQ(iov[1].iov_len, kLargeValue + 2);
  EXPECT_EQ(joined(iov), "VALUE k 0 65536\r\n" + std::string(value_and_crlf(item)) + "END\r\n");
}

TEST(OutputQueueTest, QueueKeepsTheItemAlive) {
  OutputQueue queue;
  ItemRef item = make_item("k", kLargeValue);
  std::string expected(value_and_crlf(item));
  append_value(queue, item);
  store::Item* raw = item.get();
  item = ItemRef();  // the queue's reference is the last one
  EXPECT_EQ(raw->refs.load(), 1u);
  EXPECT_EQ(queue.take_all(), expected);
}

TEST(OutputQueueTest, ConsumeInPiecesIncludingMidSegment) {
  OutputQueue queue;
  ItemRef item = make_item("key", kLargeValue);
  const std::string header = "VALUE key 0 65536\r\n";
  const std::string trailer = "END\r\n";
  queue.append(header);
  append_value(queue, item);
  queue.append(trailer);
  const std::string all = header + std::string(value_and_crlf(item)) + trailer;
  ASSERT_EQ(queue.pending(), all.size());

  // Part of the header.
  queue.consume(3);
  EXPECT_EQ(queue.pending(), all.size() - 3);
  std::vector<iovec> iov = gather_all(queue);
  ASSERT_EQ(iov.size(), 3u);
  EXPECT_EQ(iov[0].iov_len, header.size() - 3);
  EXPECT_EQ(joined(iov), all.substr(3));
  EXPECT_EQ(item->refs.load(), 2u);

  // The rest of the header and half the value: the item is still needed.
  size_t sent = header.size() + kLargeValue / 2;
  queue.consume(sent - 3);
  EXPECT_EQ(queue.pending(), all.size() - sent);
  iov = gather_all(queue);
  ASSERT_EQ(iov.size(), 2u);
  EXPECT_EQ(iov[0].iov_base, item->value() + kLargeValue / 2);
  EXPECT_EQ(joined(iov), all.substr(sent));
  EXPECT_EQ(item->refs.load(), 2u);

  // Up to the last byte of the value's CRLF: still needed.
  queue.consume(kLargeValue / 2 + 1);
  sent += kLargeValue / 2 + 1;
  EXPECT_EQ(item->refs.load(), 2u);
  EXPECT_EQ(joined(gather_all(queue)), all.substr(sent));

  // The last byte of the item: released.
  queue.consume(1);
  sent += 1;
  EXPECT_EQ(item->refs.load(), 1u);
  iov = gather_all(queue);
  ASSERT_EQ(iov.size(), 1u);
  EXPECT_EQ(joined(iov), trailer);

  queue.consume(trailer.size());
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.pending(), 0u);
  EXPECT_TRUE(gather_all(queue).empty());
}

TEST(OutputQueueTest, ConsumeExactlyOneSegmentReleasesIt) {
  OutputQueue queue;
  ItemRef first = make_item("a", kLargeValue, 'a');
  ItemRef second = make_item("b", kLargeValue, 'b');
  append_value(queue, first);
  append_value(queue, second);
  EXPECT_EQ(first->refs.load(), 2u);
  EXPECT_EQ(second->refs.load(), 2u);
  queue.consume(kLargeValue + 2);
  EXPECT_EQ(first->refs.load(), 1u);
  EXPECT_EQ(second->refs.load(), 2u);
  std::vector<iovec> iov = gather_all(queue);
  ASSERT_EQ(iov.size(), 1u);
  EXPECT_EQ(iov[0].iov_base, second->value());
  queue.consume(kLargeValue + 2);
  EXPECT_EQ(second->refs.load(), 1u);
  EXPECT_TRUE(queue.empty());
}

TEST(OutputQueueTest, GatherRespectsMax) {
  OutputQueue queue;
  std::vector<ItemRef> items;
  std::string expected;
  for (int i = 0; i < 5; ++i) {
    items.push_back(make_item("k" + std::to_string(i), kLargeValue, static_cast<char>('a' + i)));
    queue.append("header\r\n");
    append_value(queue, items.back());
    expected += "header\r\n" + std::string(value_and_crlf(items.back()));
  }
  EXPECT_EQ(gather_all(queue).size(), 10u);
  std::vector<iovec> two = gather_all(queue, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(joined(two), expected.substr(0, 8 + kLargeValue + 2));
  // Sending only what fits in two pieces at a time still sends everything.
  EXPECT_EQ(drain(queue, expected.size(), 2), expected);
  for (const ItemRef& item : items)
    EXPECT_EQ(item->refs.load(), 1u);
}

TEST(OutputQueueTest, AppendAfterPartialConsume) {
  OutputQueue queue;
  queue.append("first line\r\n");
  queue.consume(6);
  queue.append("second\r\n");
  EXPECT_EQ(queue.pending(), 6u + 8u);
  EXPECT_EQ(joined(gather_all(queue)), "line\r\nsecond\r\n");
  ItemRef item = make_item("k", kLargeValue);
  append_value(queue, item);
  queue.append("END\r\n");
  EXPECT_EQ(queue.take_all(), "line\r\nsecond\r\n" + std::string(value_and_crlf(item)) + "END\r\n");
  EXPECT_EQ(item->refs.load(), 1u);
}

TEST(OutputQueueTest, ReusableAfterDraining) {
  OutputQueue queue;
  queue.append("one\r\n");
  queue.consume(5);
  EXPECT_TRUE(queue.empty());
  queue.append("two\r\n");
  EXPECT_EQ(queue.pending(), 5u);
  EXPECT_EQ(joined(gather_all(queue)), "two\r\n");
  queue.consume(5);
  EXPECT_TRUE(queue.empty());
}

TEST(OutputQueueTest, TakeAllAfterPartialConsumeReleasesItems) {
  OutputQueue queue;
  ItemRef item = make_item("k", kLargeValue);
  queue.append("xy");
  append_value(queue, item);
  queue.consume(2 + 100);
  EXPECT_EQ(queue.take_all(), std::string(value_and_crlf(item)).substr(100));
  EXPECT_EQ(item->refs.load(), 1u);
  EXPECT_TRUE(queue.empty());
}

TEST(OutputQueueTest, ClearReleasesItemsAndEmpties) {
  OutputQueue queue;
  ItemRef first = make_item("a", kLargeValue);
  ItemRef second = make_item("b", kLargeValue);
  queue.append("bytes");
  append_value(queue, first);
  append_value(queue, second);
  queue.consume(5 + 10);  // partway into the first item
  queue.clear();
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.pending(), 0u);
  EXPECT_TRUE(gather_all(queue).empty());
  EXPECT_EQ(first->refs.load(), 1u);
  EXPECT_EQ(second->refs.load(), 1u);
  queue.append("again");
  EXPECT_EQ(queue.take_all(), "again");
}

TEST(OutputQueueTest, DestructorReleasesItems) {
  ItemRef item = make_item("k", kLargeValue);
  {
    OutputQueue queue;
    append_value(queue, item);
    append_value(queue, item);
    EXPECT_EQ(item->refs.load(), 3u);
  }
  EXPECT_EQ(item->refs.load(), 1u);
}

TEST(OutputQueueTest, PartOfAnItem) {
  OutputQueue queue;
  ItemRef item = make_item("k", kLargeValue);
  // Any range inside the item, not only the whole value.
  queue.append_item(item.get(), item->value() + 1000, 5000);
  EXPECT_EQ(queue.take_all(), std::string(item->value_view().substr(1000, 5000)));
  EXPECT_EQ(item->refs.load(), 1u);
}

// Many segments of both kinds, sent in every chunk size from 1 byte up:
// what comes out is always the concatenation, and every item is released.
TEST(OutputQueueTest, AnySendPatternDeliversEverything) {
  std::vector<ItemRef> items;
  for (size_t size : {size_t{1}, kSmallValue, size_t{700}, size_t{5000}, kLargeValue}) {
    items.push_back(make_item("key" + std::to_string(size), size, 'A'));
  }
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{512}, size_t{4093}, size_t{1} << 20}) {
    SCOPED_TRACE(chunk);
    OutputQueue queue;
    std::string expected;
    for (int round = 0; round < 3; ++round) {
      for (const ItemRef& item : items) {
        std::string header = "VALUE " + std::string(item->key()) + " ";
        queue.append(header);
        queue.append_number(item->value_len);
        queue.append("\r\n");
        append_value(queue, item);
        expected +=
            header + std::to_string(item->value_len) + "\r\n" + std::string(value_and_crlf(item));
      }
    }
    queue.append("END\r\n");
    expected += "END\r\n";
    EXPECT_EQ(queue.pending(), expected.size());
    EXPECT_EQ(drain(queue, chunk), expected);
    EXPECT_EQ(queue.pending(), 0u);
    for (const ItemRef& item : items)
      EXPECT_EQ(item->refs.load(), 1u);
  }
}

// A client that reads slowly while new replies keep coming: the queue never
// drains, so the buffer moves its unsent bytes forward as it grows, and the
// item ranges between them must move along.
TEST(OutputQueueTest, AppendsBetweenPartialSendsKeepTheOrder) {
  ItemRef large = make_item("large", kLargeValue, 'a');
  OutputQueue queue;
  std::string expected;
  std::string sent;
  for (int round = 0; round < 200; ++round) {
    std::string line = "line " + std::to_string(round) + std::string(round % 37, '.') + "\r\n";
    queue.append(line);
    expected += line;
    if (round % 9 == 0) {
      append_value(queue, large);
      expected += std::string(value_and_crlf(large));
    }
    // Send a little less than arrived, so something is always left.
    std::vector<iovec> iov = gather_all(queue, 3);
    size_t n = 0;
    for (const iovec& piece : iov) {
      size_t take = std::min<size_t>(piece.iov_len, 50 - n);
      sent.append(static_cast<const char*>(piece.iov_base), take);
      n += take;
      if (n == 50) break;
    }
    queue.consume(n);
    EXPECT_FALSE(queue.empty());
  }
  sent += drain(queue, 4093);
  EXPECT_EQ(sent, expected);
  EXPECT_EQ(large->refs.load(), 1u);
}

}  // namespace
}  // namespace lockcached::protocol
