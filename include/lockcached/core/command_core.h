// The command core every protocol parser calls: one connection's view of the
// store, with the statistics bookkeeping done once for all protocols.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "lockcached/core/auth.h"
#include "lockcached/core/command_policy.h"
#include "lockcached/core/prefix_stats.h"
#include "lockcached/core/server_control.h"
#include "lockcached/core/stats.h"
#include "lockcached/core/watch.h"
#include "lockcached/store/store.h"

namespace lockcached::core {

class CommandCore {
 public:
  // `read_only`, when given, is true while this server is a replica
  // (replication::Node sets it): the protocols then refuse every write.
  // `watch`, when given, gets this connection's events, with `client` (the
  // connection's own, living as long as it) saying who did them.
  // `control`, when given, takes the commands that act on the whole server.
  // `authenticator`, when given, must pass the connection before anything
  // else is served (docs/authentication.md). `policy`, when given, says
  // which server-wide commands are allowed (else CommandPolicy's defaults).
  CommandCore(store::Store& store, ThreadStats& stats, StatsSource& stats_source,
              store::OwnerId owner, const std::atomic<bool>* read_only = nullptr,
              WatchHub* watch = nullptr, const net::ClientInfo* client = nullptr,
              ServerControl* control = nullptr, const Authenticator* authenticator = nullptr,
              const CommandPolicy* policy = nullptr)
      : auth_(authenticator),
        store_(store),
        stats_(stats),
        stats_source_(stats_source),
        prefix_stats_(stats_source.prefix_stats()),
        owner_(owner),
        read_only_(read_only),
        watch_(watch),
        watch_mask_(watch ? &watch->mask() : &kNobodyWatches),
        client_(client ? client : &net::kUnknownClient),
        control_(control),
        policy_(policy ? policy : &kDefaultPolicy) {}

  store::OwnerId owner() const { return owner_; }
  // True while the connection must authenticate first: the protocols then
  // answer every other request with their "unauthenticated" error.
  bool auth_required() const { return auth_.required(); }
  // Whether the server checks credentials at all (the SASL opcodes exist).
  bool auth_enabled() const { return auth_.enabled(); }
  // One attempt, counted in auth_cmds and (refused) auth_errors. A
  // malformed one (`user` and `password` unknown) goes to auth_malformed().
  AuthResult authenticate(std::string_view user, std::string_view password);
  AuthResult auth_malformed();
  bool read_only() const { return read_only_ && read_only_->load(std::memory_order_relaxed); }
  ThreadStats& thread_stats() { return stats_; }
  size_t max_item_size() const { return store_.max_item_size(); }
  const CommandPolicy& policy() const { return *policy_; }
  // The CAS a client is shown of `item` (0 under memcached's -C).
  uint64_t cas_of(const store::Item& item) const { return store_.client_cas(item); }
  bool cas_enabled() const { return store_.cas_enabled(); }
  // A client's exptime in server time (memcached rules, see store::to_rel_time).
  store::RelTime rel_time(int64_t exptime) const {
    return store::to_rel_time(exptime, store_.clock());
  }

  // exptime as the client sent it (memcached rules, see store::to_rel_time).
  store::ItemRef allocate(std::string_view key, uint32_t flags, int64_t exptime, size_t value_len);

  // A get: calls reader(item) under the store's lock (see Store::read).
  template <typename Reader>
  bool read(std::string_view key, Reader&& reader) {
    return read_hashed(key, key_hash(key), std::forward<Reader>(reader));
  }
  // read() of a key whose key_hash() the caller has (ReadAhead).
  template <typename Reader>
  bool read_hashed(std::string_view key, uint64_t hash, Reader&& reader) {
    if (watching(kWatchFetchers)) [[unlikely]] {
      return read_watched(key, [&reader](store::Item& item) { reader(item); });
    }
    bool hit = store_.read_hashed(key, hash, std::forward<Reader>(reader));
    count_get(key, hit);
    return hit;
  }
  // A multi-get: read() for each of `count` keys (key_at(i) gives the i-th),
  // in order, calling reader(i, item) for each hit (Store::read_each).
  template <typename KeyAt, typename Reader>
  void read_each(size_t count, KeyAt&& key_at, Reader&& reader) {
    // Watchers and per-prefix counters see each key: one at a time.
    if (watching(kWatchFetchers) || (prefix_stats_ && prefix_stats_->enabled())) [[unlikely]] {
      for (size_t i = 0; i < count; ++i) {
        read(key_at(i), [&reader, i](store::Item& item) { reader(i, item); });
      }
      return;
    }
    size_t hits = 0;
    store_.read_each(count, key_at, [&reader, &hits](size_t i, store::Item& item) {
      ++hits;
      reader(i, item);
    });
    stats_.cmd_get.add(count);
    stats_.get_hits.add(hits);
    stats_.get_misses.add(count - hits);
  }
  // A pipeline's gets, fetched into the cache ahead of their lookups
  // (store::Store::prefetch_item, protocol::ReadAhead).
  uint64_t key_hash(std::string_view key) const { return store_.key_hash(key); }
  void prefetch_bucket(uint64_t hash) const { store_.prefetch_bucket(hash); }
  void prefetch_item(uint64_t hash) const { store_.prefetch_item(hash); }
  store::ItemRef get_and_touch(std::string_view key, int64_t exptime);
  bool touch(std::string_view key, int64_t exptime);
  store::StoreResult store(store::StoreCommand command, const store::ItemRef& item,
                           uint64_t compare_cas, bool mark_stale = false);
  // Meta protocol (see store::Store::meta_get and invalidate).
  store::MetaGetResult meta_get(std::string_view key, const store::MetaGetRequest& request);
  store::DeleteStatus invalidate(std::string_view key, uint64_t compare_cas,
                                 const store::RelTime* exptime) {
    return store_.invalidate(key, compare_cas, owner_, exptime);
  }
  store::RelTime now() const { return store_.now(); }
  // A look at an item's meta state that changes and counts nothing ("me").
  store::MetaGetResult peek(std::string_view key) {
    store::MetaGetRequest request;
    request.bump = false;
    request.claims = false;
    return store_.meta_get(key, request);
  }
  // A set that cannot be stored (too large, no memory) must not leave the old
  // value behind: clients would read stale data (memcached does the same).
  void drop_stale(store::StoreCommand command, std::string_view key);
  store::DeleteStatus remove(std::string_view key, uint64_t compare_cas);
  store::ArithResult arith(std::string_view key, const store::ArithRequest& request);
  // `when` as the client sent it: a delay or an absolute unix time. False,
  // counted all the same as memcached counts it, where the policy refuses
  // flush_all (memcached's -F).
  bool flush_all(int64_t when);
  // False, changing nothing, below Store::smallest_memory_limit.
  bool set_memory_limit(size_t bytes) {
    if (bytes < store_.smallest_memory_limit()) return false;
    store_.set_memory_limit(bytes);
    return true;
  }

  // Server-side locks. The core remembers which keys this connection holds
  // so that release_all_locks() (unlock_all, disconnect) never scans the store.
  store::LockStatus lock(std::string_view key);
  store::ItemRef lock_and_get(std::string_view key, const int64_t* exptime,
                              store::LockStatus* status);
  store::LockStatus unlock(std::string_view key);
  store::StoreResult replace_and_unlock(const store::ItemRef& item, uint64_t compare_cas);
  // unlock_all, or (kDisconnect) the connection's end.
  void release_all_locks(UnlockReason reason = UnlockReason::kUnlockAll);

  // The `keys` walk, a piece at a time; see store::Store::scan_keys.
  uint64_t scan_keys(uint64_t cursor, std::string_view prefix,
                     const std::function<void(std::string_view)>& visit) {
    return store_.scan_keys(cursor, prefix, kScanBudget, visit);
  }
  static constexpr size_t kScanBudget = 1024;
  // The item dumps (stats cachedump, lru_crawler metadump), a piece at a
  // time; see store::Store::walk_items.
  uint64_t walk_items(uint64_t cursor, const std::function<void(const store::Item&)>& visit) {
    return store_.walk_items(cursor, kScanBudget, visit);
  }
  std::vector<store::SizeClassStats> class_stats() const { return store_.class_stats(); }
  // A server time (an exptime, a last access) as a unix time.
  int64_t unix_time(store::RelTime time) const {
    return store_.clock().unix_epoch_of_zero() + time;
  }
  size_t held_locks() const { return held_.size(); }

  void collect_stats(StatsGroup group, StatList& out) const { stats_source_.collect(group, out); }
  void collect_connections(StatList& out) const { stats_source_.collect_connections(owner_, out); }
  void collect_cache_locks(std::string_view prefix, StatList& out) const {
    stats_source_.collect_cache_locks(prefix, out);
  }
  void reset_stats() { stats_source_.reset(); }
  // memcached's refresh_certs (ServerControl); "Error TLS not enabled"
  // where nothing serves TLS.
  bool refresh_certs(std::string* error) {
    if (control_ != nullptr) return control_->refresh_certs(error);
    *error = "Error TLS not enabled";
    return false;
  }
  // The expiry crawler (`lru_crawler`); nullptr where there is none.
  store::Crawler* crawler() { return control_ != nullptr ? control_->crawler() : nullptr; }
  // memcached's `shutdown [graceful]`, once the policy allows it.
  void shutdown(bool graceful) {
    if (control_ != nullptr) control_->shutdown(graceful);
  }
  // `stats detail`; nullptr where the server keeps no per-prefix counters.
  PrefixStats* prefix_stats() { return prefix_stats_; }
  // memcached's `stats detail` counts what its classic commands (text and
  // binary) ask for, where they ask, and no meta command: a gat with its hit
  // (a get counts in read()), a storage command before its item is
  // allocated (one too large counts too), a delete.
  void detail_get(std::string_view key, bool hit) {
    if (prefix_stats_) prefix_stats_->record_get(key, hit);
  }
  void detail_set(std::string_view key) {
    if (prefix_stats_) prefix_stats_->record_set(key);
  }
  void detail_delete(std::string_view key) {
    if (prefix_stats_) prefix_stats_->record_delete(key);
  }
  void count_meta_command() { stats_.cmd_meta.add(); }

  // `watch`: makes this connection a watcher of `streams` (core/watch.h).
  // False when the server has no hub or enough watchers already; the
  // connection then goes on as before.
  bool start_watch(uint32_t streams);
  // The watcher this connection became, once start_watch succeeded: the
  // connection takes no more requests and streams its lines instead.
  const std::shared_ptr<Watcher>& watcher() const { return watcher_; }

 private:
  // Never written: the mask of a core without a hub.
  static constinit const std::atomic<uint32_t> kNobodyWatches;
  static constexpr CommandPolicy kDefaultPolicy{};

  bool watching(uint32_t streams) const {
    return (watch_mask_->load(std::memory_order_relaxed) & streams) != 0;
  }
  bool read_watched(std::string_view key, const std::function<void(store::Item&)>& reader);

  // memcached counts a set once its item is allocated; a store that finds
  // no room (the allocation here succeeds, the room is made later) is
  // memcached's failed allocation: store_no_memory, and no set.
  void count_set(store::StoreStatus status) {
    (status == store::StoreStatus::kNoMemory ? stats_.store_no_memory : stats_.cmd_set).add();
  }
  void count_get(std::string_view key, bool hit) {
    stats_.cmd_get.add();
    (hit ? stats_.get_hits : stats_.get_misses).add();
    if (prefix_stats_) prefix_stats_->record_get(key, hit);
  }

  AuthSession auth_;
  store::Store& store_;
  ThreadStats& stats_;
  StatsSource& stats_source_;
  PrefixStats* const prefix_stats_;
  const store::OwnerId owner_;
  const std::atomic<bool>* const read_only_;
  WatchHub* const watch_;
  const std::atomic<uint32_t>* const watch_mask_;
  const net::ClientInfo* const client_;
  ServerControl* const control_;
  const CommandPolicy* const policy_;
  std::shared_ptr<Watcher> watcher_;
  // Keys this connection has locked. A key may linger after its item was
  // deleted or replaced by the holder; unlocking it then is a harmless miss.
  std::unordered_set<std::string> held_;
};

}  // namespace lockcached::core
