#include "lockcached/replication/snapshot.h"

namespace lockcached::replication {

bool Snapshot::send_piece(size_t budget) {
  if (done()) return false;
  cursor_ = store_.walk_items(cursor_, budget, [this](const store::Item& item) {
    out_.on_store(item);
    ++items_sent_;
  });
  return !done();
}

}  // namespace lockcached::replication
