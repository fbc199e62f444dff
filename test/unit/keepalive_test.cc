// net::keepalive_times: how --tcp_keepalive becomes the kernel's keepalive
// settings, and the bound on finding a vanished peer that the docs state
// (docs/locking.md, docs/lock-service.md): at most the setting plus one
// probe interval, which is max(1, seconds / 16).
#include <algorithm>

#include <gtest/gtest.h>

#include "lockcached/net/socket.h"

namespace {

using lockcached::net::kMaxKeepaliveSeconds;
using lockcached::net::keepalive_times;
using lockcached::net::KeepaliveTimes;

TEST(KeepaliveTimes, TheDefaultProbesFromHalfTimeOnceASecond) {
  KeepaliveTimes times = keepalive_times(15);
  EXPECT_EQ(times.idle_s, 7);
  EXPECT_EQ(times.interval_s, 1);
  EXPECT_EQ(times.count, 8);
  EXPECT_EQ(times.user_timeout_ms, 15000u);
  EXPECT_EQ(times.bound_s(), 15);
}

TEST(KeepaliveTimes, EverySettingIsFoundWithinItsStatedBound) {
  for (int seconds = 1; seconds <= kMaxKeepaliveSeconds; ++seconds) {
    KeepaliveTimes times = keepalive_times(seconds);
    SCOPED_TRACE(seconds);
    ASSERT_GE(times.idle_s, 1);
    ASSERT_GE(times.interval_s, 1);
    ASSERT_LE(times.idle_s, kMaxKeepaliveSeconds);
    ASSERT_LE(times.interval_s, kMaxKeepaliveSeconds);
    ASSERT_GE(times.count, 1);
    ASSERT_LE(times.count, 127);  // TCP_KEEPCNT's bound
    ASSERT_EQ(times.user_timeout_ms, static_cast<unsigned>(seconds) * 1000);
    ASSERT_GE(times.bound_s(), seconds);
    ASSERT_LE(times.bound_s(), seconds + std::max(1, seconds / 16));
    // The probes a dead peer leaves unanswered before it is given up.
    ASSERT_GE(times.idle_s + times.count * times.interval_s, std::min(seconds, times.bound_s()));
  }
}

TEST(KeepaliveTimes, TheBoundIsTheFirstProbeThatReachesTheUserTimeout) {
  KeepaliveTimes times{.idle_s = 50, .interval_s = 6, .count = 8, .user_timeout_ms = 100000};
  EXPECT_EQ(times.bound_s(), 104);  // probes at 50, 56, ..., 98, 104
  times.user_timeout_ms = 20000;    // shorter than the silence before the first probe
  EXPECT_EQ(times.bound_s(), 56);   // the first probe must go unanswered
}

}  // namespace
