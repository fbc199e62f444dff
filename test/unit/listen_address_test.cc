// --listen's entries, as memcached's -l reads them.
#include "lockcached/server/listen_address.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lockcached::server {
namespace {

constexpr int kDefault = ListenAddress::kDefaultPort;

std::vector<ListenAddress> parsed(std::string_view list) {
  std::vector<ListenAddress> addresses;
  std::string error;
  EXPECT_TRUE(parse_listen_addresses(list, &addresses, &error)) << list << ": " << error;
  return addresses;
}

std::string error_of(std::string_view list) {
  std::vector<ListenAddress> addresses;
  std::string error;
  EXPECT_FALSE(parse_listen_addresses(list, &addresses, &error)) << list;
  return error;
}

TEST(ListenAddressTest, HostsWithAndWithoutTheirOwnPort) {
  EXPECT_EQ(parsed("127.0.0.1"),
            (std::vector<ListenAddress>{{"127.0.0.1", kDefault, false, "127.0.0.1"}}));
  EXPECT_EQ(parsed("127.0.0.1:32402;localhost"),
            (std::vector<ListenAddress>{{"127.0.0.1", 32402, false, "127.0.0.1:32402"},
                                        {"localhost", kDefault, false, "localhost"}}));
  EXPECT_EQ(parsed("127.0.0.1:0"),
            (std::vector<ListenAddress>{{"127.0.0.1", 0, false, "127.0.0.1:0"}}));
}

// memcached's rule: brackets for an IPv6 address with a port; a bare one
// has more than one ':' and no port.
TEST(ListenAddressTest, Ipv6) {
  EXPECT_EQ(parsed("::1"), (std::vector<ListenAddress>{{"::1", kDefault, false, "::1"}}));
  EXPECT_EQ(parsed("[::1]"), (std::vector<ListenAddress>{{"::1", kDefault, false, "[::1]"}}));
  EXPECT_EQ(parsed("[::1]:11211"),
            (std::vector<ListenAddress>{{"::1", 11211, false, "[::1]:11211"}}));
}

TEST(ListenAddressTest, NotlsAndEveryAddress) {
  EXPECT_EQ(parsed("notls:127.0.0.1:32402,notls:[::1]"),
            (std::vector<ListenAddress>{{"127.0.0.1", 32402, true, "notls:127.0.0.1:32402"},
                                        {"::1", kDefault, true, "notls:[::1]"}}));
  EXPECT_EQ(parsed("*:5"),
            (std::vector<ListenAddress>{{"0.0.0.0", 5, false, "*:5"}, {"::", 5, false, ""}}));
  EXPECT_EQ(listen_text(parsed("*:5,,notls:10.0.0.1")), "*:5,notls:10.0.0.1");
}

TEST(ListenAddressTest, MistakesNameTheEntry) {
  EXPECT_EQ(error_of(""), "needs at least one address");
  EXPECT_EQ(error_of(",;"), "needs at least one address");
  EXPECT_EQ(error_of("127.0.0.1:"), "127.0.0.1:: expected a port after ':'");
  EXPECT_EQ(error_of("127.0.0.1:http"),
            "127.0.0.1:http: the port must be a number from 0 to 65535");
  EXPECT_EQ(error_of("10.0.0.1,127.0.0.1:70000"),
            "127.0.0.1:70000: the port must be a number from 0 to 65535");
  EXPECT_EQ(error_of("[::1"), "[::1: missing ']'");
  EXPECT_EQ(error_of("[::1]x"), "[::1]x: expected :PORT after ']'");
  EXPECT_EQ(error_of(":11211"), ":11211: no host");
  EXPECT_EQ(error_of("notls:"), "notls:: no host");
}

}  // namespace
}  // namespace lockcached::server
