// End-to-end tests of the meta protocol (mn, mg, ms, md, ma, me): the real
// lockcached binary over TCP on 127.0.0.1, each test with its own server on
// a port the kernel picks.
//
// Expected replies are memcached 1.6.18's (see test/unit/meta_commands_test.cc
// and test/peers/compare_memcached.py, which check them side by side);
// the lock interaction follows docs/locking.md ("Meta protocol").
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <latch>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::ServerProcess;

// "ms KEY LEN[ FLAGS]\r\nDATA\r\n"
std::string ms(std::string_view key, std::string_view data, std::string_view flags = "") {
  std::string bytes = "ms " + std::string(key) + " " + std::to_string(data.size());
  if (!flags.empty()) bytes += " " + std::string(flags);
  return bytes + "\r\n" + std::string(data) + "\r\n";
}

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string bytes(n, '\0');
  for (char& c : bytes)
    c = static_cast<char>(byte(generator));
  return bytes;
}

// The number after `flag` in a reply line ("VA 1 c42 t-1" -> 42 for 'c').
std::optional<uint64_t> token_number(std::string_view line, char flag) {
  size_t pos = 0;
  while ((pos = line.find(' ', pos)) != std::string_view::npos) {
    ++pos;
    if (pos < line.size() && line[pos] == flag) {
      size_t end = line.find(' ', pos);
      std::string number(line.substr(pos + 1, end == std::string_view::npos ? end : end - pos - 1));
      if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) break;
      return std::stoull(number);
    }
  }
  return std::nullopt;
}

class MetaE2e : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start({"--threads=2"})); }
  uint16_t port() const { return server_.port(); }

  // A connected client; fails the test when the connection fails.
  Client connect() {
    Client client;
    EXPECT_TRUE(client.connect(port()));
    return client;
  }
  // Sends `bytes` (a whole request, data block included) and returns the
  // first reply line without its CRLF.
  static std::string send_line(Client& client, std::string_view bytes) {
    if (!client.send(bytes)) return "<send failed: " + client.last_error() + ">";
    return client.read_line();
  }
  // Sends `bytes` and reads through the terminator (e.g. "MN\r\n").
  static std::string exchange_until(Client& client, std::string_view bytes,
                                    std::string_view terminator) {
    if (!client.send(bytes)) return "<send failed: " + client.last_error() + ">";
    std::optional<std::string> reply = client.read_until(terminator);
    return reply ? *reply : "<no reply: " + client.last_error() + ">";
  }

  ServerProcess server_;
};

TEST_F(MetaE2e, NoOp) {
  Client c = connect();
  EXPECT_EQ(c.request("mn"), "MN");
  EXPECT_EQ(c.request("mn ignored words"), "MN");
  EXPECT_EQ(c.request("mz"), "ERROR");
}

TEST_F(MetaE2e, GetMissAndHitWithFlags) {
  Client c = connect();
  EXPECT_EQ(c.request("mg k v"), "EN");
  EXPECT_EQ(c.request("mg k v k O42"), "EN kk O42");
  EXPECT_EQ(c.store("set", "k", "hello", 7, 0), "STORED");
  EXPECT_EQ(c.request("mg k"), "HD");
  ASSERT_TRUE(c.send("mg k v f s k O1 t h\r\n"));
  EXPECT_EQ(c.read_until("hello\r\n"), "VA 5 f7 s5 kk O1 t-1 h1\r\nhello\r\n");
  // h: fetched before; u: without bumping.
  EXPECT_EQ(c.request("mg k h u"), "HD h1");
  // c: the same CAS as gets.
  ASSERT_TRUE(c.send("gets k\r\n"));
  std::optional<std::vector<e2e::Value>> values = c.read_values();
  ASSERT_TRUE(values && values->size() == 1 && (*values)[0].cas) << c.last_error();
  EXPECT_EQ(c.request("mg k c"), "HD c" + std::to_string(*(*values)[0].cas));
  // Errors.
  EXPECT_EQ(c.request("mg"), "ERROR");
  EXPECT_EQ(c.request("mg k zz"), "CLIENT_ERROR invalid flag");
  EXPECT_EQ(c.request("mg k v v"), "CLIENT_ERROR duplicate flag");
  EXPECT_EQ(c.request("mg k Nx"), "CLIENT_ERROR bad token in command line format");
  EXPECT_EQ(c.request("mg k O" + std::string(32, 'o')), "CLIENT_ERROR opaque token too long");
  EXPECT_EQ(c.request("mg " + std::string(251, 'k')), "CLIENT_ERROR bad command line format");
}

TEST_F(MetaE2e, GetTouchAndTtl) {
  Client c = connect();
  EXPECT_EQ(send_line(c, ms("k", "v", "T0")), "HD");
  EXPECT_EQ(c.request("mg k t"), "HD t-1");
  // Large TTLs: a second passing between the two commands could make it
  // 999, never more.
  std::string touched = c.request("mg k T1000 t");
  EXPECT_TRUE(touched == "HD t1000" || touched == "HD t999") << touched;
  std::string later = c.request("mg k t");
  EXPECT_TRUE(later == "HD t1000" || later == "HD t999") << later;
  // A negative TTL expires the item at once.
  EXPECT_EQ(c.request("mg k T-1"), "HD");
  EXPECT_EQ(c.request("mg k"), "EN");
}

TEST_F(MetaE2e, QuietGetSaysNothingOnAMiss) {
  Client c = connect();
  EXPECT_EQ(c.store("set", "hit", "x"), "STORED");
  EXPECT_EQ(exchange_until(c, "mg a q v\r\nmg hit q v\r\nmg b q k\r\nmn\r\n", "MN\r\n"),
            "VA 1\r\nx\r\nMN\r\n");
}

TEST_F(MetaE2e, SetModesAndFlags) {
  Client c = connect();
  EXPECT_EQ(send_line(c, ms("k", "hi", "F5 T0 k O7")), "HD kk O7");
  EXPECT_EQ(c.get("k"), "hi");
  EXPECT_EQ(send_line(c, ms("k", "no", "ME")), "NS");
  EXPECT_EQ(send_line(c, ms("k", "++", "MA")), "HD");
  EXPECT_EQ(send_line(c, ms("k", "--", "MP")), "HD");
  EXPECT_EQ(send_line(c, ms("r", "x", "MR")), "NS");
  EXPECT_EQ(send_line(c, ms("k", "new", "MR F9")), "HD");
  ASSERT_TRUE(c.send("get k r\r\n"));
  EXPECT_EQ(c.read_values(), (std::vector<e2e::Value>{{"k", 9, "new", std::nullopt}}));
  EXPECT_EQ(send_line(c, ms("k", "set", "MS")), "HD");
  EXPECT_EQ(c.get("k"), "set");
  // An invalid mode: the data is skipped, not run as a command.
  EXPECT_EQ(send_line(c, ms("k", "mn", "MX")), "CLIENT_ERROR invalid mode for ms M token");
  EXPECT_EQ(c.request("mn"), "MN");
  EXPECT_EQ(c.get("k"), "set");
  // Bad data chunk.
  // Bad data chunk: the block is the 3 bytes "ab\r"; the "\n" left over is
  // an empty line, an ERROR (as memcached).
  EXPECT_EQ(send_line(c, "ms k 1\r\nab\r\n"), "CLIENT_ERROR bad data chunk");
  EXPECT_EQ(c.read_line(), "ERROR");
  EXPECT_EQ(c.request("mn"), "MN");
  EXPECT_EQ(c.get("k"), "set");
}

TEST_F(MetaE2e, SetCompareAndSwapAndReturnedCas) {
  Client c = connect();
  EXPECT_EQ(send_line(c, ms("k", "v", "C1")), "NF");
  std::string stored = c.request("ms k 1 c\r\na");
  ASSERT_TRUE(stored.starts_with("HD c")) << stored;
  std::optional<uint64_t> cas = token_number(stored, 'c');
  ASSERT_TRUE(cas.has_value()) << stored;
  EXPECT_EQ(c.request("mg k c"), "HD c" + std::to_string(*cas));
  EXPECT_EQ(c.request("ms k 1 c C" + std::to_string(*cas + 1) + "\r\nb"), "EX c0");
  EXPECT_EQ(c.get("k"), "a");
  std::string swapped = c.request("ms k 1 c C" + std::to_string(*cas) + "\r\nb");
  std::optional<uint64_t> new_cas = token_number(swapped, 'c');
  ASSERT_TRUE(new_cas.has_value()) << swapped;
  EXPECT_NE(*new_cas, *cas);
  EXPECT_EQ(c.get("k"), "b");
  // I with an older CAS: stored, but stale.
  EXPECT_EQ(c.request("ms k 1 I C" + std::to_string(*cas) + "\r\nc"), "HD");
  EXPECT_EQ(c.request("mg k"), "HD X W");
}

TEST_F(MetaE2e, QuietSetShowsOnlyFailures) {
  Client c = connect();
  EXPECT_EQ(exchange_until(c,
                           ms("a", "1", "q") + ms("a", "2", "q ME") + ms("b", "3", "q MR") +
                               ms("a", "4", "q C999999999") + "mn\r\n",
                           "MN\r\n"),
            "NS\r\nNS\r\nEX\r\nMN\r\n");
  EXPECT_EQ(c.get("a"), "1");
}

TEST_F(MetaE2e, DeleteWithFlags) {
  Client c = connect();
  EXPECT_EQ(c.request("md k"), "NF");
  EXPECT_EQ(c.store("set", "k", "v"), "STORED");
  EXPECT_EQ(c.request("md k C999999999 O1 k"), "EX O1 kk");
  EXPECT_EQ(c.request("md k O2 k"), "HD O2 kk");
  EXPECT_EQ(c.get("k"), std::nullopt);
  EXPECT_EQ(c.store("set", "k", "v"), "STORED");
  EXPECT_EQ(exchange_until(c, "md k q\r\nmd k q\r\nmn\r\n", "MN\r\n"), "NF\r\nMN\r\n");
  EXPECT_EQ(c.request("md k zz"), "CLIENT_ERROR invalid or duplicate flag");
}

TEST_F(MetaE2e, StaleWhileRevalidateAcrossConnections) {
  Client writer = connect();
  Client first = connect();
  Client second = connect();
  EXPECT_EQ(writer.store("set", "k", "old"), "STORED");
  EXPECT_EQ(writer.request("md k I T1000"), "HD");
  // One client wins the recache; everyone gets the stale value meanwhile.
  ASSERT_TRUE(first.send("mg k v\r\n"));
  EXPECT_EQ(first.read_until("old\r\n"), "VA 3 X W\r\nold\r\n");
  ASSERT_TRUE(second.send("mg k v\r\n"));
  EXPECT_EQ(second.read_until("old\r\n"), "VA 3 Z X\r\nold\r\n");
  EXPECT_EQ(first.request("mg k"), "HD Z X");
  // The winner stores the new value: plain again for all.
  EXPECT_EQ(send_line(first, ms("k", "new")), "HD");
  ASSERT_TRUE(second.send("mg k v\r\n"));
  EXPECT_EQ(second.read_until("new\r\n"), "VA 3\r\nnew\r\n");
}

// memcached 1.6.18: a stale write ("ms ... I" with a CAS older than the
// invalidated item's) keeps the item's TTL and its stale mark, and does not
// hand the win token out again, so a second client does not recache too.
TEST_F(MetaE2e, StaleWriteKeepsTheTtlAndTheTokenThatWentOut) {
  Client c = connect();
  Client other = connect();
  EXPECT_EQ(send_line(c, ms("toinv", "hi", "T100")), "HD");
  std::optional<uint64_t> old_cas = token_number(c.request("mg toinv c"), 'c');
  ASSERT_TRUE(old_cas);
  EXPECT_EQ(c.request("md toinv I T30"), "HD");
  ASSERT_TRUE(c.send("mg toinv t v\r\n"));
  EXPECT_EQ(c.read_until("hi\r\n"), "VA 2 t30 X W\r\nhi\r\n");
  EXPECT_EQ(send_line(c, ms("toinv", "x", "I T90 C" + std::to_string(*old_cas))), "HD");
  ASSERT_TRUE(other.send("mg toinv s t v\r\n"));
  EXPECT_EQ(other.read_until("x\r\n"), "VA 1 s1 t30 Z X\r\nx\r\n");
  // A CAS of 0 is no older CAS: refused, as every C0 (it matches no item).
  EXPECT_EQ(send_line(c, ms("toinv", "y", "I C0")), "EX");
  EXPECT_EQ(c.request("md toinv C0"), "EX");
  EXPECT_EQ(c.request("md toinv I C0"), "EX");
  EXPECT_EQ(c.request("md missing C0"), "NF");
  ASSERT_TRUE(c.send("mg toinv v\r\n"));
  EXPECT_EQ(c.read_until("x\r\n"), "VA 1 Z X\r\nx\r\n");
}

// memcached applies mg's T, N and R in the order given, and t reads the TTL
// as of its place.
TEST_F(MetaE2e, GetAppliesTtlFlagsInTheOrderGiven) {
  Client c = connect();
  EXPECT_EQ(c.request("mg a T60 N30 t"), "HD t30 W");
  EXPECT_EQ(c.request("mg b N30 T60 t"), "HD t60 W");
  EXPECT_EQ(c.request("mg c t N30"), "HD t-1 W");
  EXPECT_EQ(send_line(c, ms("k", "v", "T100")), "HD");
  // R compares the TTL left before T shortens it: no win.
  EXPECT_EQ(c.request("mg k R30 T10 t"), "HD t10");
  EXPECT_EQ(send_line(c, ms("k", "v", "T100")), "HD");
  EXPECT_EQ(c.request("mg k T10 R30 t"), "HD t10 W");
  EXPECT_EQ(c.request("mg k t T100 t"), "CLIENT_ERROR duplicate flag");
}

TEST_F(MetaE2e, VivifyHandsOutOneWinAmongConcurrentClients) {
  constexpr int kClients = 8;
  std::vector<Client> clients;
  for (int i = 0; i < kClients; ++i)
    clients.push_back(connect());
  std::vector<std::string> replies(kClients);
  std::latch start(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      replies[i] = clients[i].request("mg hot N30 v");
      clients[i].read_line();  // the empty data block
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  int wins = 0;
  for (const std::string& reply : replies) {
    if (reply == "VA 0 W") {
      ++wins;
    } else {
      EXPECT_EQ(reply, "VA 0 Z");
    }
  }
  EXPECT_EQ(wins, 1);
}

TEST_F(MetaE2e, ArithmeticWithFlags) {
  Client c = connect();
  EXPECT_EQ(c.request("ma n"), "NF");
  EXPECT_EQ(c.request("ma n N0 J10 v"), "VA 2");
  EXPECT_EQ(c.read_line(), "10");
  EXPECT_EQ(c.request("ma n D5 v"), "VA 2");
  EXPECT_EQ(c.read_line(), "15");
  EXPECT_EQ(c.request("ma n MD D20 v"), "VA 1");
  EXPECT_EQ(c.read_line(), "0");
  EXPECT_EQ(c.request("ma n M+ D7 v k O9 t"), "VA 1 kn O9 t-1");
  EXPECT_EQ(c.read_line(), "7");
  EXPECT_EQ(c.request("ma n T1000"), "HD");
  std::string ttl = c.request("mg n t");
  EXPECT_TRUE(ttl == "HD t1000" || ttl == "HD t999") << ttl;
  std::string with_cas = c.request("ma n c");
  std::optional<uint64_t> cas = token_number(with_cas, 'c');
  ASSERT_TRUE(cas.has_value()) << with_cas;
  EXPECT_EQ(c.request("ma n C" + std::to_string(*cas + 1)), "EX");
  EXPECT_EQ(c.request("ma n C" + std::to_string(*cas) + " M- v"), "VA 1");
  EXPECT_EQ(c.read_line(), "8");
  EXPECT_EQ(exchange_until(c, "ma n q\r\nma n q D2\r\nma x q\r\nmn\r\n", "MN\r\n"), "NF\r\nMN\r\n");
  EXPECT_EQ(c.get("n"), "11");
  EXPECT_EQ(c.store("set", "s", "abc"), "STORED");
  EXPECT_EQ(c.request("ma s"), "CLIENT_ERROR cannot increment or decrement non-numeric value");
  EXPECT_EQ(c.request("ma n MX"), "CLIENT_ERROR invalid mode for ma M token");
  EXPECT_EQ(c.request("ma n Dx"), "CLIENT_ERROR invalid or duplicate flag");
}

TEST_F(MetaE2e, Debug) {
  Client c = connect();
  EXPECT_EQ(c.request("me k"), "EN");
  EXPECT_EQ(c.store("set", "k", "v"), "STORED");
  std::string line = c.request("me k");
  EXPECT_TRUE(line.starts_with("ME k exp=-1 la=")) << line;
  EXPECT_NE(line.find(" cas="), std::string::npos) << line;
  EXPECT_NE(line.find(" fetch=no cls=1 size="), std::string::npos) << line;
  EXPECT_EQ(c.request("me"), "CLIENT_ERROR bad command line format");
}

TEST_F(MetaE2e, Base64Keys) {
  Client c = connect();
  EXPECT_EQ(send_line(c, ms("aGVsbG8=", "hi", "b k")), "HD kaGVsbG8= b");
  EXPECT_EQ(c.get("hello"), "hi");
  ASSERT_TRUE(c.send("mg aGVsbG8= b k v\r\n"));
  EXPECT_EQ(c.read_until("hi\r\n"), "VA 2 kaGVsbG8= b\r\nhi\r\n");
  EXPECT_EQ(c.request("mg aGVsbG8 b"), "CLIENT_ERROR error decoding key");
  // As memcached's decoder: characters outside the alphabet are skipped,
  // and the first padded group ends the key.
  EXPECT_EQ(send_line(c, ms("aG!Vs*bG8=", "hey", "b k")), "HD kaGVsbG8= b");
  EXPECT_EQ(c.get("hello"), "hey");
  EXPECT_EQ(c.request("md YQ==aGVsbG8= b k"), "NF kYQ== b");
  EXPECT_EQ(c.request("mg @@@@ b"), "CLIENT_ERROR error decoding key");
  // md and ma name the same fault (not "invalid or duplicate flag").
  EXPECT_EQ(c.request("md aGVsbG8 b"), "CLIENT_ERROR error decoding key");
  EXPECT_EQ(c.request("ma aGVsbG8 b"), "CLIENT_ERROR error decoding key");
  // A binary key with bytes no text key may hold.
  EXPECT_EQ(send_line(c, ms("AAEC/w==", "x", "b")), "HD");
  EXPECT_EQ(c.request("md AAEC/w== b k"), "HD kAAEC/w== b");
  EXPECT_EQ(c.request("mg AAEC/w== b"), "EN");
}

TEST_F(MetaE2e, PipelinedMixInOneWriteIsAnsweredInOrder) {
  Client c = connect();
  std::string requests;
  std::string expected;
  auto add = [&](std::string request, std::string reply) {
    requests += request;
    expected += reply;
  };
  add("set a 1 0 5\r\nalpha\r\n", "STORED\r\n");
  add("get a\r\n", "VALUE a 1 5\r\nalpha\r\nEND\r\n");
  add("mg a q v k\r\n", "VA 5 ka\r\nalpha\r\n");
  add("mg missing q v\r\n", "");
  add(ms("b", "mg a v\r\n", "q T0"), "");
  add("get b\r\n", "VALUE b 0 8\r\nmg a v\r\n\r\nEND\r\n");
  add(ms("b", "x", "q ME"), "NS\r\n");
  add("md b q\r\n", "");
  add("md b q\r\n", "NF\r\n");
  add("delete a noreply\r\n", "");
  add("mg a q v\r\n", "");
  add("ma n q N0 J3\r\n", "HD\r\n");
  add("ma n q\r\n", "");
  add("incr n 10\r\n", "14\r\n");
  add("mg n v O5\r\n", "VA 2 O5\r\n14\r\n");
  add("bogus\r\n", "ERROR\r\n");
  add("mg c q N30\r\n", "HD W\r\n");
  add("md c q I\r\n", "");
  add("mg c q\r\n", "HD X W\r\n");
  add("gets missing\r\n", "END\r\n");
  add(ms("c", "done", "q"), "");
  add("get c\r\n", "VALUE c 0 4\r\ndone\r\nEND\r\n");
  add("mn\r\n", "MN\r\n");
  ASSERT_TRUE(c.send(requests));
  std::optional<std::string> reply = c.read_exactly(expected.size());
  ASSERT_TRUE(reply.has_value()) << c.last_error() << "; got " << e2e::escape(c.buffered(), 2000);
  EXPECT_EQ(e2e::escape(*reply, 5000), e2e::escape(expected, 5000));
  // Nothing more was sent.
  EXPECT_EQ(c.request("mn"), "MN");
}

TEST_F(MetaE2e, RequestsSentByteByByte) {
  Client c = connect();
  c.set_nodelay();
  const std::string requests = ms("k", "a\r\nb", "F3 k O1") + "mg k v f\r\n" + ms("k", "zz", "MX") +
                               "mg k q v s\r\nmg none q\r\nmn\r\n";
  const std::string expected =
      "HD kk O1\r\nVA 4 f3\r\na\r\nb\r\n"
      "CLIENT_ERROR invalid mode for ms M token\r\nVA 4 s4\r\na\r\nb\r\nMN\r\n";
  for (char byte : requests)
    ASSERT_TRUE(c.send(std::string_view(&byte, 1))) << c.last_error();
  std::optional<std::string> reply = c.read_exactly(expected.size());
  ASSERT_TRUE(reply.has_value()) << c.last_error();
  EXPECT_EQ(*reply, expected);
}

TEST_F(MetaE2e, OneMebibyteValue) {
  Client c = connect();
  const std::string value = random_bytes(size_t{1} << 20, 42);
  EXPECT_EQ(send_line(c, ms("big", value, "F1 T0")), "HD");
  ASSERT_TRUE(c.send("mg big v s f\r\n"));
  std::string header = c.read_line();
  EXPECT_EQ(header, "VA 1048576 s1048576 f1");
  std::optional<std::string> data = c.read_exactly(value.size() + 2);
  ASSERT_TRUE(data.has_value()) << c.last_error();
  EXPECT_TRUE(*data == value + "\r\n") << "the 1 MiB value came back different";
  // The text protocol sees the same bytes.
  EXPECT_EQ(c.get("big"), value);
  // One byte more is refused, its data skipped, the old value dropped.
  EXPECT_EQ(send_line(c, ms("big", value + "x")), "SERVER_ERROR object too large for cache");
  EXPECT_EQ(c.request("mg big"), "EN");
}

TEST_F(MetaE2e, TextLockMakesMetaWritesOfOthersAnswerEx) {
  Client holder = connect();
  Client other = connect();
  EXPECT_EQ(holder.store("set", "k", "100", 3), "STORED");
  EXPECT_EQ(holder.request("lock k"), "OK");

  EXPECT_EQ(send_line(other, ms("k", "0")), "EX");
  EXPECT_EQ(send_line(other, ms("k", "0", "O1 k")), "EX O1 kk");
  EXPECT_EQ(send_line(other, ms("k", "0", "q MA")), "EX");
  EXPECT_EQ(other.request("md k"), "EX");
  EXPECT_EQ(other.request("md k I q"), "EX");
  EXPECT_EQ(other.request("ma k"), "EX");
  EXPECT_EQ(other.request("ma k q O2"), "EX O2");
  // Reads still work, and see the unchanged value.
  ASSERT_TRUE(other.send("mg k v f\r\n"));
  EXPECT_EQ(other.read_until("100\r\n"), "VA 3 f3\r\n100\r\n");
  EXPECT_EQ(other.get("k"), "100");
  EXPECT_EQ(other.request("mg k"), "HD");  // not made stale by the md I

  // The holder writes; the lock stays.
  EXPECT_EQ(send_line(holder, ms("k", "101", "F3")), "HD");
  EXPECT_EQ(send_line(other, ms("k", "0")), "EX");
  EXPECT_EQ(holder.request("unlock k"), "OK");
  EXPECT_EQ(other.request("ma k v"), "VA 3");
  EXPECT_EQ(other.read_line(), "102");
  EXPECT_EQ(send_line(other, ms("k", "0")), "HD");
  EXPECT_EQ(other.request("md k"), "HD");
}

TEST_F(MetaE2e, LockIsReleasedWhenTheHolderDisconnects) {
  Client other = connect();
  {
    Client holder = connect();
    EXPECT_EQ(holder.store("set", "k", "v"), "STORED");
    EXPECT_EQ(holder.request("lock k"), "OK");
    EXPECT_EQ(other.request("md k"), "EX");
  }
  // The server notices the close in its own time: ask until it has.
  EXPECT_TRUE(e2e::eventually([&] { return other.request("md k") == "HD"; }));
  EXPECT_EQ(other.request("mg k"), "EN");
}

}  // namespace

// A negative TTL expires the item at once, so every flag of the reply says
// so: t0 (no time left), never t-1 ("never expires"); the next request
// misses. On a miss, N with a negative TTL still makes this client the
// winner (W), as any vivifying miss does.
TEST_F(MetaE2e, NegativeTtlExpiresAtOnceAndTheReplySaysSo) {
  Client c = connect();
  ASSERT_TRUE(c.send("mg k N30 T-1 t v\r\n"));
  EXPECT_EQ(c.read_until("\r\n\r\n"), "VA 0 t0 W\r\n\r\n");
  EXPECT_EQ(c.request("mg k t"), "EN");
  EXPECT_EQ(c.request("mg j N-1 t"), "HD t0 W");
  EXPECT_EQ(c.request("mg j t"), "EN");
  EXPECT_EQ(send_line(c, ms("h", "x", "T100")), "HD");
  EXPECT_EQ(c.request("mg h T-1 t"), "HD t0");
  EXPECT_EQ(c.request("mg h t"), "EN");
}
