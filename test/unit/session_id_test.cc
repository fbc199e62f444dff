// Unit tests of locks/session_id.h: the shape of lock-service session ids,
// the randomness of their secret, and the comparison that resumes them.
#include "lockcached/locks/session_id.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>

namespace lockcached::locks {
namespace {

// The secret's bytes, from its hex digits (nullopt: not 32 lowercase hex digits).
std::optional<std::array<uint8_t, kSessionSecretBytes>> decode(const std::string& secret) {
  if (secret.size() != 2 * kSessionSecretBytes) return std::nullopt;
  std::array<uint8_t, kSessionSecretBytes> bytes{};
  for (size_t i = 0; i < secret.size(); ++i) {
    char c = secret[i];
    int nibble = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (nibble < 0) return std::nullopt;
    bytes[i / 2] = static_cast<uint8_t>(bytes[i / 2] << 4 | nibble);
  }
  return bytes;
}

TEST(SessionIdTest, SecretIsSixteenBytesAsLowercaseHex) {
  static_assert(kSessionSecretBytes * 8 >= 128);
  std::string secret = make_session_secret();
  EXPECT_EQ(secret.size(), kSessionSecretDigits);
  EXPECT_TRUE(decode(secret).has_value()) << secret;
}

// Every one of the 128 bits varies from secret to secret, about half the
// time each (a generator of fewer random bits, padded, would leave some
// fixed); 10,000 secrets are distinct. With fair bits, a count outside
// 40-60% is 20 standard deviations out: this test does not flake.
TEST(SessionIdTest, EverySecretBitIsRandom) {
  constexpr int kSecrets = 10000;
  std::unordered_set<std::string> seen;
  std::array<int, kSessionSecretBytes * 8> ones{};
  for (int i = 0; i < kSecrets; ++i) {
    std::string secret = make_session_secret();
    auto bytes = decode(secret);
    ASSERT_TRUE(bytes) << secret;
    for (size_t bit = 0; bit < ones.size(); ++bit)
      ones[bit] += (*bytes)[bit / 8] >> (bit % 8) & 1;
    seen.insert(std::move(secret));
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kSecrets));
  for (size_t bit = 0; bit < ones.size(); ++bit) {
    EXPECT_GT(ones[bit], kSecrets * 4 / 10) << "bit " << bit;
    EXPECT_LT(ones[bit], kSecrets * 6 / 10) << "bit " << bit;
  }
}

TEST(SessionIdTest, SerialIsLowercaseBase36) {
  EXPECT_EQ(session_serial(0), "0");
  EXPECT_EQ(session_serial(35), "z");
  EXPECT_EQ(session_serial(36), "10");
  EXPECT_EQ(session_serial(UINT64_MAX), "3w5e11264sgsf");
}

TEST(SessionIdTest, SplitAcceptsOnlyTheShape) {
  const std::string secret = "0123456789abcdef0123456789abcdef";
  const std::string id = "k3-" + secret;  // the parts are views into it
  std::optional<SessionIdParts> parts = split_session_id(id);
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->serial, "k3");
  EXPECT_EQ(parts->secret, secret);
  EXPECT_TRUE(split_session_id("3w5e11264sgsf-" + secret)) << "the longest serial";

  for (const std::string& bad :
       {std::string(), std::string("-"), std::string("k3"), std::string("k3-"), "-" + secret,
        "k3" + secret, "K3-" + secret, std::string("k3-0123456789ABCDEF0123456789abcdef"),
        "k3-" + secret.substr(1), "k3-" + secret + "0", "k3-" + secret.substr(1) + "g",
        "k3--" + secret.substr(1), "k 3-" + secret, "k3-" + secret + " ",
        "3w5e11264sgsf0-" + secret}) {
    EXPECT_FALSE(split_session_id(bad)) << '"' << bad << '"';
  }
}

TEST(SessionIdTest, PublicPartIsTheSerial) {
  EXPECT_EQ(public_session_id("k3-0123456789abcdef0123456789abcdef"), "k3");
  EXPECT_EQ(public_session_id("k3f9q2a"), "k3f9q2a") << "an id of an older shape";
  EXPECT_EQ(public_session_id(""), "");
}


}  // namespace
}  // namespace lockcached::locks
