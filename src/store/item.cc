#include "lockcached/store/item.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace lockcached::store {

Item* item_allocate(std::string_view key, uint32_t flags, RelTime exptime, size_t value_len) {
  void* memory = std::malloc(Item::size_for(key.size(), value_len));
  if (memory == nullptr) return nullptr;
  Item* item = new (memory) Item;
  item->flags = flags;
  item->exptime = exptime;
  item->value_len = static_cast<uint32_t>(value_len);
  item->key_len = static_cast<uint8_t>(key.size());
  std::memcpy(item->key_data(), key.data(), key.size());
  item->value()[value_len] = '\r';
  item->value()[value_len + 1] = '\n';
  return item;
}

void item_release(Item* item) {
  if (item->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    item->~Item();
    std::free(item);
  }
}

}  // namespace lockcached::store
