// The harness behind text_fuzz and binary_fuzz: two client connections
// (each a CommandCore and a protocol of its own, as server::Connection has)
// over one small Store with a ManualClock. The input is split into chunks
// and fed to the current connection the way Connection does it: the
// unconsumed tail is kept and offered again with the next bytes, a `keys`
// walk is continued before more requests are offered, replies are drained
// (partly or fully) through gather()/consume().
//
// Directives (0xFF + op, see fuzz_util.h):
//   A / B     switch to connection 0 / 1
//   K         chunk boundary, nothing else
//   T n       advance the clock n seconds;  H n: n hours
//   D         drain the current connection's output completely
//   G         run the expiry crawler over the whole store (Store::crawl)
//   X         the current client hangs up (its locks are released);
//             later bytes for it open a new connection with a new owner id
//   W         continue the current connection's `keys` walk to its end
//   N n       the current connection sets (n % 64 + 1) * 32 small numeric
//             items "n<serial>" through its CommandCore: enough items for
//             the hash tables to grow (1.5 per bucket), e.g. during a walk
//   Y         memcached's -Y: connections opened from now on must
//             authenticate (users alice:secret and bob:hunter2)
// Header byte: bits 0-1 pick the store size (4 MB in 4 shards, 1 MB in 2,
// 32 KB in 1, 4 KB in 2; items up to 64 KB, so large declared values are
// refused); bit 7 a second hash seed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "fuzz_util.h"
#include "lockcached/core/auth.h"
#include "lockcached/core/command_core.h"
#include "lockcached/core/size_class_stats.h"
#include "lockcached/core/stats.h"
#include "lockcached/protocol/binary_protocol.h"
#include "lockcached/protocol/output_queue.h"
#include "lockcached/store/clock.h"
#include "lockcached/store/store.h"

namespace lockcached::fuzz {

// What `stats` reports: a few numbers from the store, no server behind it.
class FakeStatsSource : public core::StatsSource {
 public:
  explicit FakeStatsSource(store::Store& store) : store_(store) {}
  void collect(core::StatsGroup group, core::StatList& out) const override {
    store::StoreStats stats = store_.stats();
    if (group == core::StatsGroup::kGeneral) {
      out.emplace_back("pid", "4242");
      out.emplace_back("curr_items", std::to_string(stats.curr_items));
      out.emplace_back("bytes", std::to_string(stats.bytes));
      out.emplace_back("resets", std::to_string(resets_));
    } else if (group == core::StatsGroup::kItems || group == core::StatsGroup::kSlabs ||
               group == core::StatsGroup::kSizes) {
      core::collect_size_classes(group, store_.class_stats(), out);
    } else {
      out.emplace_back("maxbytes", std::to_string(stats.limit_bytes));
      out.emplace_back("evictions", "on");
    }
  }
  // As the server's: `stats reset` clears the store's counters too.
  void reset() override {
    ++resets_;
    store_.reset_stats();
  }

 private:
  store::Store& store_;
  int resets_ = 0;
};

inline store::StoreConfig cache_config(const Header& header) {
  // The small ones let an input of a few KB fill the store and evict.
  static constexpr size_t kLimits[4] = {size_t{4} << 20, size_t{1} << 20, size_t{32} << 10,
                                        size_t{4} << 10};
  // Few shards: every shard costs 1024 buckets to set up and walk per input.
  static constexpr unsigned kShards[4] = {4, 2, 1, 2};
  store::StoreConfig config;
  config.memory_limit = kLimits[header.config];
  config.max_item_size = size_t{64} << 10;
  config.shard_count = kShards[header.config];
  config.hash_seed = header.extra ? 0x5eed5eed5eed5eedull : 0;
  return config;
}

// How the replies of each protocol are framed.
template <typename Protocol>
constexpr ReplyStream::Kind kReplyKind = ReplyStream::Kind::kLines;
template <>
constexpr ReplyStream::Kind kReplyKind<protocol::BinaryProtocol> = ReplyStream::Kind::kBinary;

template <typename Protocol>
class CacheHarness {
 public:
  CacheHarness(const uint8_t* data, size_t size)
      : data_(data),
        size_(size),
        header_(data[0]),
        rng_(0x1234567ull * (data[0] + 1) + size),
        store_(cache_config(header_), clock_),
        stats_source_(store_) {}

  ~CacheHarness() {
    for (int slot = 0; slot < kSlots; ++slot)
      close(slot, false);
  }

  void run() {
    parse_script(
        data_, size_, "ABKTHDGXWNY", "THN",
        [this](std::string_view bytes) {
          for_each_chunk(bytes, header_.chunk_mode, rng_,
                         [this](std::string_view chunk) { feed(current_, chunk); });
        },
        [this](char op, uint8_t arg) { directive(op, arg); });
    finish();
  }

 private:
  static constexpr int kSlots = 2;

  struct Conn {
    Conn(store::Store& store, core::StatsSource& source, store::OwnerId owner,
         const core::Authenticator* authenticator)
        : core(store, stats, source, owner, nullptr, nullptr, nullptr, nullptr, authenticator),
          protocol(core) {}
    core::ThreadStats stats;
    core::CommandCore core;
    Protocol protocol;
    protocol::OutputQueue out;
    std::string pending;  // the unconsumed tail, offered again with new bytes
    ReplyStream replies{kReplyKind<Protocol>};
  };

  Conn& conn(int slot) {
    if (!conns_[slot]) {
      conns_[slot] = std::make_unique<Conn>(store_, stats_source_, ++last_owner_,
                                            auth_on_ ? &authenticator() : nullptr);
    }
    return *conns_[slot];
  }

  void feed(int slot, std::string_view bytes) {
    Conn& c = conn(slot);
    trace(">>", slot, bytes);
    c.pending.append(bytes);
    offer(slot);
    if (conns_[slot]) {
      Conn& open = *conns_[slot];
      drain_some(open.out, slot, open.replies, open.protocol, header_, rng_);
    }
    check_invariants();
  }

  // Connection::on_writable's continue_work(), a few steps or to the end.
  void step_work(Conn& c, bool to_the_end) {
    uint64_t steps = to_the_end || !header_.bounded_steps ? ~uint64_t{0} : 1 + rng_.below(4);
    while (c.protocol.has_unfinished_work() && steps-- > 0)
      c.protocol.continue_work(c.out);
  }

  void offer(int slot) {
    Conn& c = *conns_[slot];
    for (;;) {
      if (c.protocol.has_unfinished_work()) {
        step_work(c, false);
        // Unfinished: the connection reads nothing more until it is done.
        if (c.protocol.has_unfinished_work()) {
          // (Were it offered requests now, it would take none: handler.h.)
          if (!c.pending.empty() && rng_.below(4) == 0) {
            size_t queued = c.out.pending();
            FUZZ_CHECK(c.protocol.consume(c.pending, c.out) == 0);
            FUZZ_CHECK(c.out.pending() == queued);
          }
          return;
        }
      }
      if (c.pending.empty()) return;
      size_t consumed = c.protocol.consume(c.pending, c.out);
      FUZZ_CHECK(consumed <= c.pending.size());
      c.pending.erase(0, consumed);
      if (c.protocol.wants_close()) {
        close(slot, true);
        return;
      }
      if (c.protocol.has_unfinished_work()) continue;
      // Idle: what is left must be an incomplete request, so offering it
      // again without new bytes (Connection::resume_input does) does nothing.
      if (!c.pending.empty()) {
        size_t queued = c.out.pending();
        size_t again = c.protocol.consume(c.pending, c.out);
        FUZZ_CHECK(again == 0);
        FUZZ_CHECK(c.out.pending() == queued);
        FUZZ_CHECK(!c.protocol.wants_close());
        FUZZ_CHECK(!c.protocol.has_unfinished_work());
      }
      return;
    }
  }

  // Connection::close: the replies are dropped (or, after quit, sent
  // first), the client's locks released, the protocol told.
  void close(int slot, bool send_first) {
    if (!conns_[slot]) return;
    Conn& c = *conns_[slot];
    if (send_first) drain_all(c.out, slot, c.replies, c.protocol);
    trace("closed", slot, {});
    c.out.clear();
    c.core.release_all_locks();
    FUZZ_CHECK(c.core.held_locks() == 0);
    c.protocol.connection_closed(lockcached::core::CloseReason::kNormal);
    conns_[slot].reset();
  }

  void directive(char op, uint8_t arg) {
    if (trace_enabled()) {
      std::fprintf(stderr, "[%c] directive %c %u\n", 'A' + current_, op, arg);
    }
    switch (op) {
      case 'A':
        current_ = 0;
        break;
      case 'B':
        current_ = 1;
        break;
      case 'K':
        break;
      case 'T':
        clock_.advance(arg);
        break;
      case 'H':
        clock_.advance(store::RelTime{arg} * 3600);
        break;
      case 'D':
        if (Conn* c = conns_[current_].get()) drain_all(c->out, current_, c->replies, c->protocol);
        break;
      case 'G':
        crawl();
        break;
      case 'X':
        close(current_, false);
        break;
      case 'W':
        if (conns_[current_]) {
          step_work(*conns_[current_], true);
          offer(current_);
        }
        break;
      case 'N':
        bulk_set(conn(current_), (arg % 64 + 1) * 32);
        break;
      case 'Y':
        auth_on_ = true;
        break;
    }
    check_invariants();
  }

  void bulk_set(Conn& c, unsigned count) {
    for (unsigned i = 0; i < count; ++i) {
      std::string value = std::to_string(++bulk_serial_);
      std::string key = "n" + value;
      store::ItemRef item = c.core.allocate(key, 0, 0, value.size());
      if (!item) continue;
      std::memcpy(item->value(), value.data(), value.size());
      c.core.store(store::StoreCommand::kSet, item, 0);
    }
  }

  void crawl() {
    uint64_t cursor = 0;
    while (cursor != store::Store::kScanDone)
      cursor = store_.crawl(cursor, 1 + rng_.below(1024));
  }

  size_t held_locks() const {
    size_t held = 0;
    for (const auto& c : conns_) {
      if (c) held += c->core.held_locks();
    }
    return held;
  }

  void check_invariants() {
    store::StoreStats stats = store_.stats();
    // A lower limit (cache_memlimit) is reached by later evictions only.
    highest_limit_ = std::max(highest_limit_, stats.limit_bytes);
    FUZZ_CHECK(stats.bytes <= highest_limit_);
    FUZZ_CHECK(stats.locked_items <= stats.curr_items);
    // Every locked item's key is in its owner's held set (which may also
    // keep keys whose items are gone).
    FUZZ_CHECK(stats.locked_items <= held_locks());
    FUZZ_CHECK(stats.curr_items == 0 || stats.bytes > 0);
  }

  // Every client hangs up; then the store must be consistent: no locks
  // left, and (after a crawl has taken out the dead) its item count and
  // byte count are those of the keys a walk finds.
  void finish() {
    for (int slot = 0; slot < kSlots; ++slot) {
      if (Conn* c = conns_[slot].get()) drain_all(c->out, slot, c->replies, c->protocol);
      close(slot, false);
    }
    store::StoreStats stats = store_.stats();
    FUZZ_CHECK(stats.locked_items == 0);
    crawl();
    std::vector<std::string> keys;
    uint64_t cursor = 0;
    while (cursor != store::Store::kScanDone) {
      cursor = store_.scan_keys(cursor, "", 1 + rng_.below(2048),
                                [&keys](std::string_view key) { keys.emplace_back(key); });
    }
    // (A hash set, not a sort: libFuzzer traces every memcmp.)
    std::unordered_set<std::string_view> distinct;
    uint64_t bytes = 0;
    for (const std::string& key : keys) {
      FUZZ_CHECK(distinct.insert(key).second);
      store::ItemRef item = store_.get(key);
      FUZZ_CHECK(item);
      FUZZ_CHECK(item->key() == key);
      FUZZ_CHECK(!item->locked);
      bytes += item->total_size();
    }
    stats = store_.stats();
    FUZZ_CHECK(stats.curr_items == keys.size());
    FUZZ_CHECK(stats.bytes == bytes);
  }

  const uint8_t* data_;
  size_t size_;
  Header header_;
  Rng rng_;
  store::ManualClock clock_;
  store::Store store_;
  FakeStatsSource stats_source_;
  std::unique_ptr<Conn> conns_[kSlots];
  store::OwnerId last_owner_ = 0;
  bool auth_on_ = false;  // `Y`: new connections must authenticate
  int current_ = 0;
  uint64_t highest_limit_ = 0;
  uint64_t bulk_serial_ = 0;
};

}  // namespace lockcached::fuzz
