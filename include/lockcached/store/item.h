// One cached object: header, key and value in a single allocation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "lockcached/store/clock.h"

namespace lockcached::store {

// Connection id that owns a lock; 0 means nobody.
using OwnerId = uint64_t;
constexpr OwnerId kNoOwner = 0;

// Layout: [header][key bytes][value bytes]["\r\n"]. The trailing CRLF lets
// the text protocol send value and terminator with one reference into the
// item. The header is 30 bytes: every byte here is paid once per cached
// object, so what few items need (a lock's owner) lives in a side table of
// the shard, and the hash table's slots, not the items, link an item into
// its shard. The key begins right after the last field, in what would
// otherwise be the struct's 2 bytes of tail padding (`key_start`): with a
// 16-byte key and a 32-byte value that puts the item in jemalloc's 80-byte
// class instead of the 96-byte one. Every item is at least sizeof(Item)
// bytes, since the CRLF alone fills those 2 bytes.
// Once linked, key, value, flags and cas never change (a change links a new
// item); the other fields change only under the shard lock.
struct Item {
  uint64_t cas = 0;
  std::atomic<uint32_t> refs{1};
  RelTime exptime = 0;  // 0: never
  RelTime atime = 0;    // last access (meta "l")
  uint32_t flags = 0;
  uint32_t value_len = 0;  // without the trailing "\r\n"
  uint8_t key_len = 0;
  bool linked : 1 = false;    // in the hash table
  bool accessed : 1 = false;  // CLOCK bit: used since the hand last passed
  bool locked : 1 = false;    // its owner is in the shard's lock table
  // Meta-protocol state.
  bool fetched : 1 = false;     // read at least once (meta "h")
  bool stale : 1 = false;       // invalidated by "md KEY I" or "ms ... I"
  bool token_sent : 1 = false;  // a client was told it won the recache (W)
  bool key_binary : 1 = false;  // stored with a base64 key ("ms ... b")
  // The key's first bytes (or the CRLF, for a short key and value): a
  // member rather than padding, so that no write of the header may touch
  // them. Reached through key_data(), never by name.
  char key_start[2];

  static constexpr size_t kHeaderSize = 30;  // offsetof(Item, key_start)

  char* key_data() { return reinterpret_cast<char*>(this) + kHeaderSize; }
  const char* key_data() const { return reinterpret_cast<const char*>(this) + kHeaderSize; }
  std::string_view key() const { return {key_data(), key_len}; }
  char* value() { return key_data() + key_len; }
  const char* value() const { return key_data() + key_len; }
  std::string_view value_view() const { return {value(), value_len}; }
  // Bytes an item of this key and value takes in memory (with the CRLF),
  // as the memory limit counts them.
  static constexpr size_t size_for(size_t key_length, size_t value_length) {
    return kHeaderSize + key_length + value_length + 2;
  }
  size_t total_size() const { return size_for(key_len, value_len); }
  bool is_locked() const { return locked; }
};
static_assert(offsetof(Item, key_start) == Item::kHeaderSize);
static_assert(sizeof(Item) == Item::kHeaderSize + 2,
              "the header is paid per object: keep it small, and the smallest item "
              "(no key, no value, CRLF) must still hold the whole struct");

// Creates an unlinked item with one reference; nullptr if memory is short.
Item* item_allocate(std::string_view key, uint32_t flags, RelTime exptime, size_t value_len);
void item_release(Item* item);

// Intrusive reference: an item stays alive while a reply still points into it.
class ItemRef {
 public:
  ItemRef() = default;
  // Adopts a reference the caller already holds.
  explicit ItemRef(Item* item) : item_(item) {}
  ItemRef(const ItemRef& other) : item_(other.item_) { retain(); }
  ItemRef(ItemRef&& other) noexcept : item_(std::exchange(other.item_, nullptr)) {}
  ItemRef& operator=(ItemRef other) noexcept {
    std::swap(item_, other.item_);
    return *this;
  }
  ~ItemRef() {
    if (item_) item_release(item_);
  }

  static ItemRef share(Item* item) {
    item->refs.fetch_add(1, std::memory_order_relaxed);
    return ItemRef(item);
  }

  Item* get() const { return item_; }
  Item* operator->() const { return item_; }
  Item& operator*() const { return *item_; }
  explicit operator bool() const { return item_ != nullptr; }
  Item* release() { return std::exchange(item_, nullptr); }

 private:
  void retain() {
    if (item_) item_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  Item* item_ = nullptr;
};

}  // namespace lockcached::store
