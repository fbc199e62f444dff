// memcached's `watch`: a text connection turned into a stream of log lines
// about what other clients do.
//
// The WatchHub is shared by every thread; the server owns it. An event is
// formatted on the thread where it happens and offered to each watcher
// whose streams include it; a watcher's connection writes its lines from
// its own thread. Nobody watching costs the emitting path one relaxed
// atomic load (WatchHub::watching). A watcher is a bounded buffer: when it
// is full a line is dropped and counted, and the watcher gets memcached's
// "skipped=N" line before its next line, so a stalled watcher never holds
// up anybody else.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "lockcached/core/close_reason.h"
#include "lockcached/net/endpoint.h"
#include "lockcached/store/eviction_observer.h"
#include "lockcached/store/item.h"
#include "lockcached/store/store.h"

namespace lockcached::core {

// The streams, as bits of a mask. memcached's names, and our `locks`.
constexpr uint32_t kWatchFetchers = 1u << 0;
constexpr uint32_t kWatchMutations = 1u << 1;
constexpr uint32_t kWatchEvictions = 1u << 2;
constexpr uint32_t kWatchConnEvents = 1u << 3;
constexpr uint32_t kWatchLocks = 1u << 4;

// The stream a `watch` argument names; 0 when it names none we have.
uint32_t watch_stream(std::string_view name);

// How a cache-object lock ended.
enum class UnlockReason : uint8_t { kUnlock, kUnlockAll, kDisconnect, kReplace, kDelete };

// One watching connection's pending lines. Shared by the hub (emitters
// append from any thread) and the connection (it takes them on its thread).
class Watcher {
 public:
  Watcher(uint32_t streams, size_t capacity) : streams_(streams), capacity_(capacity) {}

  uint32_t streams() const { return streams_; }
  // Sets what to call when a line lands in an empty buffer: the watcher's
  // connection posts itself a turn to write. Called without the watcher's
  // lock held, from the emitting thread.
  void attach(std::function<void()> wake);
  // No more wake-ups (the connection is closing).
  void detach();

  // Appends a whole line (ending in '\n'), or drops it when it does not
  // fit. Returns whether it was appended. A line that follows dropped
  // ones comes after memcached's "skipped=N" line.
  bool offer(std::string_view line);
  // Moves every pending byte to the end of `out`; returns how many.
  size_t take(std::string& out);
  size_t pending() const;
  uint64_t skipped() const;

 private:
  const uint32_t streams_;
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::string buffer_;
  uint64_t skipped_ = 0;  // dropped since the last line that got through
  std::function<void()> wake_;
};

struct WatchStats {
  uint64_t watchers = 0;
  uint64_t sent = 0;     // lines appended to a watcher's buffer
  uint64_t skipped = 0;  // lines dropped because a buffer was full
};

class WatchHub final : public store::EvictionObserver {
 public:
  // memcached's watcher_logbuf_size and its limit on watchers.
  static constexpr size_t kDefaultBufferBytes = 256 * 1024;
  static constexpr size_t kMaxWatchers = 20;

  explicit WatchHub(size_t buffer_bytes = kDefaultBufferBytes) : buffer_bytes_(buffer_bytes) {}
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // The one check on the hot path.
  bool watching(uint32_t streams) const {
    return (mask_.load(std::memory_order_relaxed) & streams) != 0;
  }
  const std::atomic<uint32_t>& mask() const { return mask_; }

  // A new watcher of `streams`; nullptr when kMaxWatchers already watch.
  std::shared_ptr<Watcher> add(uint32_t streams);
  void remove(const std::shared_ptr<Watcher>& watcher);

  // The events. Each formats its line only when some watcher wants it.
  // `item` is the item found, or nullptr for a miss.
  void item_get(const net::ClientInfo& client, std::string_view key, const store::Item* item);
  void item_store(const net::ClientInfo& client, std::string_view key, store::StoreStatus status,
                  store::StoreCommand command, const store::Item& item, store::RelTime now);
  void conn_new(const net::ClientInfo& client);
  void conn_close(const net::ClientInfo& client, CloseReason reason);
  void on_eviction(const store::Eviction& eviction) override;
  // Cache-object locks (text lock/unlock/unlock_all, binary 0x40-0x4b).
  void item_lock(const net::ClientInfo& client, std::string_view key, store::LockStatus status);
  void item_unlock(const net::ClientInfo& client, std::string_view key, bool released,
                   UnlockReason reason);
  // The lock service: `type` is lock_grant, lock_busy, lock_refused,
  // lock_wait, lock_timeout, lock_release or session_detach; `details` the
  // fields between the name and the session (may be empty); `session` the
  // session's public id, since any watcher sees it (locks/session_id.h).
  void lock_service_event(const net::ClientInfo& client, std::string_view type,
                          std::string_view name, std::string_view details,
                          std::string_view session);

  WatchStats stats() const;
  // `stats reset`: log_watcher_sent and log_watcher_skipped start again.
  void reset_stats();

 private:
  // Stamps `body` with memcached's "ts=... gid=... " and offers the line
  // to every watcher of `stream`.
  void publish(uint32_t stream, std::string_view body);
  void update_mask_locked();

  const size_t buffer_bytes_;
  std::atomic<uint32_t> mask_{0};
  std::atomic<uint64_t> gid_{0};
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> skipped_{0};
  mutable std::mutex mutex_;  // guards watchers_ (the pointer, not the list)
  // Replaced, never changed, on add and remove: an emitter copies the
  // pointer under mutex_ and offers its line without any lock of the hub.
  std::shared_ptr<const std::vector<std::shared_ptr<Watcher>>> watchers_;
};

// memcached's uriencode of keys: letters, digits and "-._~" as they are,
// every other byte as %XX.
void append_uri_encoded(std::string& out, std::string_view bytes);

}  // namespace lockcached::core
