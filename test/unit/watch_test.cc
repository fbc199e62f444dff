// The watch hub (core/watch.h) without sockets: which watcher gets which
// line, the bounded buffer and memcached's "skipped=N", wake-ups, removal,
// and the formats of the lines.
#include "lockcached/core/watch.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "lockcached/store/item.h"

namespace lockcached::core {
namespace {

net::ClientInfo client_at(const char* ip, uint16_t port, uint64_t id) {
  return {id, *net::parse_endpoint(std::string(ip) + ":" + std::to_string(port))};
}

// The lines of a buffer, each without its "ts=... gid=... " stamp.
std::vector<std::string> bodies(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    std::string line = text.substr(start, end - start);
    if (line.rfind("ts=", 0) == 0) line = line.substr(line.find(' ', line.find(" gid=") + 1) + 1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

std::string take_all(Watcher& watcher) {
  std::string text;
  watcher.take(text);
  return text;
}

struct TestItem {
  explicit TestItem(std::string_view key, size_t value_len, store::RelTime exptime = 0)
      : item(store::item_allocate(key, 0, exptime, value_len)) {}
  store::ItemRef item;
};

TEST(WatchHub, NobodyWatchingMeansEveryStreamIsOff) {
  WatchHub hub;
  EXPECT_FALSE(hub.watching(kWatchFetchers | kWatchMutations | kWatchEvictions |
                            kWatchConnEvents | kWatchLocks));
  hub.item_get(client_at("127.0.0.1", 1, 1), "k", nullptr);  // goes nowhere
  EXPECT_EQ(hub.stats().sent, 0u);
}

TEST(WatchHub, EachWatcherGetsOnlyItsStreams) {
  WatchHub hub;
  auto fetchers = hub.add(kWatchFetchers);
  auto both = hub.add(kWatchFetchers | kWatchConnEvents);
  ASSERT_TRUE(fetchers && both);
  EXPECT_TRUE(hub.watching(kWatchConnEvents));
  EXPECT_FALSE(hub.watching(kWatchMutations));

  net::ClientInfo client = client_at("10.1.2.3", 4567, 42);
  TestItem hit("foo", 3);
  hub.item_get(client, "foo", hit.item.get());
  hub.conn_new(client);
  hub.item_store(client, "foo", store::StoreStatus::kStored, store::StoreCommand::kSet,
                 *hit.item, 100);  // nobody watches mutations

  EXPECT_EQ(bodies(take_all(*fetchers)),
            std::vector<std::string>({"type=item_get key=foo status=found clsid=1 cfd=42 size=3"}));
  EXPECT_EQ(
      bodies(take_all(*both)),
      std::vector<std::string>({"type=item_get key=foo status=found clsid=1 cfd=42 size=3",
                                "type=conn_new rip=10.1.2.3 rport=4567 transport=tcp cfd=42"}));
  EXPECT_EQ(hub.stats().sent, 3u);
  EXPECT_EQ(hub.stats().watchers, 2u);
}

TEST(WatchHub, LinesCarryMemcachedsStampWithAGrowingGid) {
  WatchHub hub;
  auto watcher = hub.add(kWatchFetchers);
  net::ClientInfo client = client_at("127.0.0.1", 1, 1);
  hub.item_get(client, "a", nullptr);
  hub.item_get(client, "b", nullptr);
  std::string text = take_all(*watcher);
  size_t second = text.find('\n') + 1;
  EXPECT_EQ(text.rfind("ts=", 0), 0u) << text;
  EXPECT_NE(text.find(" gid=1 type=item_get key=a status=not_found clsid=0 cfd=1 size=0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" gid=2 type=item_get key=b ", second), std::string::npos) << text;
}

TEST(WatchHub, AFullBufferDropsLinesAndReportsThemBeforeTheNextOne) {
  WatchHub hub(400);
  auto watcher = hub.add(kWatchFetchers);
  net::ClientInfo client = client_at("127.0.0.1", 1, 1);
  // About 90 bytes a line: four fit in 400, the rest are dropped.
  for (int i = 0; i < 10; ++i)
    hub.item_get(client, "key" + std::to_string(i), nullptr);
  WatchStats stats = hub.stats();
  EXPECT_EQ(stats.sent + stats.skipped, 10u);
  EXPECT_GT(stats.skipped, 0u);
  EXPECT_EQ(watcher->skipped(), stats.skipped);
  EXPECT_LE(watcher->pending(), 400u);

  std::vector<std::string> first = bodies(take_all(*watcher));
  EXPECT_EQ(first.size(), stats.sent);
  EXPECT_NE(first.back().find("key=key" + std::to_string(stats.sent - 1) + " "), std::string::npos);

  hub.item_get(client, "after", nullptr);
  std::vector<std::string> next = bodies(take_all(*watcher));
  ASSERT_EQ(next.size(), 2u);
  EXPECT_EQ(next[0], "skipped=" + std::to_string(stats.skipped));
  EXPECT_NE(next[1].find("key=after "), std::string::npos);
  EXPECT_EQ(watcher->skipped(), 0u);
}

TEST(WatchHub, WakesOnlyWhenALineLandsInAnEmptyBuffer) {
  WatchHub hub;
  auto watcher = hub.add(kWatchFetchers);
  int wakes = 0;
  watcher->attach([&wakes] { ++wakes; });
  net::ClientInfo client = client_at("127.0.0.1", 1, 1);
  hub.item_get(client, "a", nullptr);
  hub.item_get(client, "b", nullptr);
  hub.item_get(client, "c", nullptr);
  EXPECT_EQ(wakes, 1);
  take_all(*watcher);
  hub.item_get(client, "d", nullptr);
  EXPECT_EQ(wakes, 2);
  watcher->detach();
  take_all(*watcher);
  hub.item_get(client, "e", nullptr);
  EXPECT_EQ(wakes, 2);
}

TEST(WatchHub, ARemovedWatcherGetsNothingMoreAndTurnsItsStreamsOff) {
  WatchHub hub;
  auto fetchers = hub.add(kWatchFetchers);
  auto locks = hub.add(kWatchLocks);
  hub.remove(fetchers);
  EXPECT_FALSE(hub.watching(kWatchFetchers));
  EXPECT_TRUE(hub.watching(kWatchLocks));
  hub.item_get(client_at("127.0.0.1", 1, 1), "k", nullptr);
  EXPECT_EQ(fetchers->pending(), 0u);
  hub.remove(locks);
  EXPECT_FALSE(hub.watching(kWatchLocks));
  EXPECT_EQ(hub.stats().watchers, 0u);
  hub.remove(locks);  // twice is harmless
}

TEST(WatchHub, RefusesMoreThanMemcachedsLimitOfWatchers) {
  WatchHub hub;
  std::vector<std::shared_ptr<Watcher>> watchers;
  for (size_t i = 0; i < WatchHub::kMaxWatchers; ++i) {
    watchers.push_back(hub.add(kWatchFetchers));
    ASSERT_TRUE(watchers.back());
  }
  EXPECT_EQ(hub.add(kWatchFetchers), nullptr);
  hub.remove(watchers.back());
  EXPECT_NE(hub.add(kWatchFetchers), nullptr);
}

TEST(WatchHub, EmittersRaceWithAWatcherComingAndGoing) {
  WatchHub hub(4096);
  std::atomic<bool> stop{false};
  std::vector<std::thread> emitters;
  for (int t = 0; t < 3; ++t) {
    emitters.emplace_back([&hub, &stop, t] {
      net::ClientInfo client = client_at("127.0.0.1", static_cast<uint16_t>(t), 1);
      while (!stop.load())
        hub.item_get(client, "key", nullptr);
    });
  }
  for (int round = 0; round < 200; ++round) {
    auto watcher = hub.add(kWatchFetchers);
    watcher->attach([] {});
    std::string text;
    watcher->take(text);
    watcher->detach();
    hub.remove(watcher);
  }
  stop = true;
  for (auto& emitter : emitters)
    emitter.join();
  EXPECT_EQ(hub.stats().watchers, 0u);
}

TEST(WatchFormat, StoreEvictionAndConnectionLinesAreMemcacheds) {
  WatchHub hub;
  auto watcher = hub.add(kWatchMutations | kWatchEvictions | kWatchConnEvents);
  net::ClientInfo client = client_at("192.168.0.9", 40000, 3);
  TestItem stored("k", 2, 1100);
  hub.item_store(client, "k", store::StoreStatus::kNotStored, store::StoreCommand::kAdd,
                 *stored.item, 100);
  hub.on_eviction({"old key", true, -1, 12, 100, 60});
  hub.on_eviction({"gone", false, 30, 0, 3000, 2900});
  hub.conn_close(client, CloseReason::kIdleTimeout);
  hub.conn_close(client, CloseReason::kDeadPeer);
  EXPECT_EQ(
      bodies(take_all(*watcher)),
      std::vector<std::string>({
          "type=item_store key=k status=not_stored cmd=add ttl=1000 clsid=1 cfd=3 size=2",
          "type=eviction key=old%20key fetch=yes ttl=-1 la=12 clsid=5 size=60",
          "type=eviction key=gone fetch=no ttl=30 la=0 clsid=24 size=2900",
          "type=conn_close rip=192.168.0.9 rport=40000 transport=tcp reason=idle_timeout cfd=3",
          "type=conn_close rip=192.168.0.9 rport=40000 transport=tcp reason=dead_peer cfd=3",
      }));
}

TEST(WatchFormat, LockLinesNameTheKeyTheConnectionAndItsAddress) {
  WatchHub hub;
  auto watcher = hub.add(kWatchLocks);
  net::ClientInfo client = client_at("127.0.0.1", 5555, 7);
  hub.item_lock(client, "k", store::LockStatus::kOk);
  hub.item_lock(client, "k", store::LockStatus::kLocked);
  hub.item_unlock(client, "k", true, UnlockReason::kDisconnect);
  hub.lock_service_event(client, "lock_grant", "job", "token=99", "abc");
  hub.lock_service_event(client, "session_detach", "", "grace_ms=30000 locks=1", "abc");
  const std::string who = " conn=7 rip=127.0.0.1 rport=5555 cfd=7";
  EXPECT_EQ(bodies(take_all(*watcher)),
            std::vector<std::string>({
                "type=item_lock key=k status=granted" + who,
                "type=item_lock key=k status=locked" + who,
                "type=item_unlock key=k status=released reason=disconnect" + who,
                "type=lock_grant name=job token=99 session=abc" + who,
                "type=session_detach grace_ms=30000 locks=1 session=abc" + who,
            }));
}

TEST(WatchFormat, KeysAreUriEncodedAsMemcachedDoes) {
  std::string out;
  append_uri_encoded(out, std::string_view("a-b.c_d~e!f:g%h\x01\xff", 17));
  EXPECT_EQ(out, "a-b.c_d~e%21f%3Ag%25h%01%FF");
}

TEST(WatchFormat, StreamNames) {
  EXPECT_EQ(watch_stream("fetchers"), kWatchFetchers);
  EXPECT_EQ(watch_stream("mutations"), kWatchMutations);
  EXPECT_EQ(watch_stream("evictions"), kWatchEvictions);
  EXPECT_EQ(watch_stream("connevents"), kWatchConnEvents);
  EXPECT_EQ(watch_stream("locks"), kWatchLocks);
  EXPECT_EQ(watch_stream("deletions"), 0u);  // memcached 1.6.18 has none
  EXPECT_EQ(watch_stream("rawcmds"), 0u);
}

}  // namespace
}  // namespace lockcached::core
