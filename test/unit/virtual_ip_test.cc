// Who holds the virtual IP: the interfaces of this network namespace.
#include "lockcached/replication/virtual_ip.h"

#include <gtest/gtest.h>

namespace lockcached::replication {
namespace {

TEST(VirtualIpTest, LoopbackIsLocal) {
  std::string error;
  EXPECT_EQ(address_ownership("127.0.0.1", &error), AddressOwnership::kLocal) << error;
}

// 192.0.2.0/24 is TEST-NET-1 (RFC 5737): assigned to no real interface.
TEST(VirtualIpTest, AnAddressOnNoInterfaceIsRemote) {
  std::string error;
  EXPECT_EQ(address_ownership("192.0.2.77", &error), AddressOwnership::kRemote) << error;
  // 127.0.0.2 answers on lo but is not assigned to it: not held.
  EXPECT_EQ(address_ownership("127.0.0.2", &error), AddressOwnership::kRemote) << error;
  EXPECT_EQ(address_ownership("2001:db8::77", &error), AddressOwnership::kRemote) << error;
}

TEST(VirtualIpTest, ANameOrGarbageIsInvalid) {
  for (const char* text : {"localhost", "", "300.1.1.1", "10.0.0.1/24", "::1%lo"}) {
    std::string error;
    EXPECT_EQ(address_ownership(text, &error), AddressOwnership::kInvalid) << text;
    EXPECT_FALSE(error.empty()) << text;
  }
}

}  // namespace
}  // namespace lockcached::replication
