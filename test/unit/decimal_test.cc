// store/decimal.h: numbers as memcached's safe_strto* read them. Each case's
// expectation is what memcached 1.6.18 made of the same text (checked with
// its set, incr and cas; test/peers/compare_memcached.py's "number:"
// scenarios compare whole requests).
#include "lockcached/store/decimal.h"

#include <optional>
#include <string_view>

#include <gtest/gtest.h>

namespace lockcached::store {
namespace {

std::optional<uint64_t> as_unsigned(std::string_view text) {
  uint64_t value = 0;
  return read_unsigned_decimal(text, &value) ? std::optional(value) : std::nullopt;
}

std::optional<int64_t> as_signed(std::string_view text) {
  int64_t value = 0;
  return read_signed_decimal(text, &value) ? std::optional(value) : std::nullopt;
}

TEST(Decimal, WhitespaceASignAndWhatEndsTheDigits) {
  EXPECT_EQ(as_unsigned("5"), 5u);
  EXPECT_EQ(as_unsigned(" \t5"), 5u);
  EXPECT_EQ(as_unsigned("+5"), 5u);
  EXPECT_EQ(as_unsigned("5\r"), 5u);
  EXPECT_EQ(as_unsigned("5 junk"), 5u);
  EXPECT_EQ(as_unsigned(std::string_view("5\0junk", 6)), 5u);
  EXPECT_EQ(as_unsigned("5x"), std::nullopt);
  EXPECT_EQ(as_unsigned(""), std::nullopt);
  EXPECT_EQ(as_unsigned("+"), std::nullopt);
  EXPECT_EQ(as_unsigned("+-1"), std::nullopt);
  EXPECT_EQ(as_unsigned("0x10"), std::nullopt);
}

TEST(Decimal, AnUnsignedNumberRefusesAMinusOnlyWhereItMakesANegativeOne) {
  EXPECT_EQ(as_unsigned("-0"), 0u);
  EXPECT_EQ(as_unsigned("-1"), std::nullopt);
  EXPECT_EQ(as_unsigned("-18446744073709551615"), 1u);
  EXPECT_EQ(as_unsigned("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(as_unsigned("18446744073709551616"), std::nullopt);
}

TEST(Decimal, ASignedNumberIsWithin64Bits) {
  EXPECT_EQ(as_signed("-5"), -5);
  EXPECT_EQ(as_signed("+5"), 5);
  EXPECT_EQ(as_signed("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(as_signed("9223372036854775808"), std::nullopt);
  EXPECT_EQ(as_signed("-9223372036854775808"), INT64_MIN);
  EXPECT_EQ(as_signed("-9223372036854775809"), std::nullopt);
  EXPECT_EQ(as_signed("+-1"), std::nullopt);
}

}  // namespace
}  // namespace lockcached::store
