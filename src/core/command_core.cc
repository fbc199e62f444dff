#include "lockcached/core/command_core.h"

namespace lockcached::core {

using store::ItemRef;

constinit const std::atomic<uint32_t> CommandCore::kNobodyWatches{0};

bool CommandCore::read_watched(std::string_view key,
                               const std::function<void(store::Item&)>& reader) {
  // The hub formats after the store's lock is released: keep a reference.
  ItemRef found;
  bool hit = store_.read(key, [&](store::Item& item) {
    found = ItemRef::share(&item);
    reader(item);
  });
  count_get(key, hit);
  watch_->item_get(*client_, key, found.get());
  return hit;
}

bool CommandCore::start_watch(uint32_t streams) {
  if (!watch_ || watcher_) return false;
  watcher_ = watch_->add(streams);
  return watcher_ != nullptr;
}

AuthResult CommandCore::authenticate(std::string_view user, std::string_view password) {
  stats_.auth_cmds.add();
  AuthResult result = auth_.attempt(user, password);
  if (result != AuthResult::kAccepted) stats_.auth_errors.add();
  return result;
}

AuthResult CommandCore::auth_malformed() {
  stats_.auth_cmds.add();
  stats_.auth_errors.add();
  return auth_.fail();
}

ItemRef CommandCore::allocate(std::string_view key, uint32_t flags, int64_t exptime,
                              size_t value_len) {
  ItemRef item =
      store_.allocate(key, flags, store::to_rel_time(exptime, store_.clock()), value_len);
  if (!item) (value_len > store_.max_item_size() ? stats_.store_too_large : stats_.store_no_memory).add();
  return item;
}

ItemRef CommandCore::get_and_touch(std::string_view key, int64_t exptime) {
  ItemRef item = store_.touch(key, store::to_rel_time(exptime, store_.clock()));
  stats_.cmd_touch.add();
  (item ? stats_.touch_hits : stats_.touch_misses).add();
  // memcached logs a touch and a gat as fetches.
  if (watching(kWatchFetchers)) watch_->item_get(*client_, key, item.get());
  return item;
}

store::MetaGetResult CommandCore::meta_get(std::string_view key,
                                           const store::MetaGetRequest& request) {
  store::MetaGetResult result = store_.meta_get(key, request);
  bool hit = static_cast<bool>(result.item);
  // As memcached: a touch that misses counts as a get.
  if (request.touches() && hit) {
    stats_.cmd_touch.add();
    (hit ? stats_.touch_hits : stats_.touch_misses).add();
  } else {
    // memcached's `stats detail` counts the classic gets only.
    stats_.cmd_get.add();
    (hit ? stats_.get_hits : stats_.get_misses).add();
  }
  if (watching(kWatchFetchers)) watch_->item_get(*client_, key, result.item.get());
  return result;
}

bool CommandCore::touch(std::string_view key, int64_t exptime) {
  return static_cast<bool>(get_and_touch(key, exptime));
}

store::StoreResult CommandCore::store(store::StoreCommand command, const ItemRef& item,
                                      uint64_t compare_cas, bool mark_stale) {
  store::StoreResult result = store_.store(command, item, compare_cas, owner_, mark_stale);
  count_set(result.status);
  if (command == store::StoreCommand::kCas) {
    switch (result.status) {
      case store::StoreStatus::kStored:
        stats_.cas_hits.add();
        break;
      case store::StoreStatus::kExists:
        stats_.cas_badval.add();
        break;
      case store::StoreStatus::kNotFound:
        stats_.cas_misses.add();
        break;
      default:
        break;
    }
  }
  if (watching(kWatchMutations)) {
    watch_->item_store(*client_, item->key(), result.status, command, *item, store_.now());
  }
  return result;
}

// Not counted in cmd_set: memcached counts a set once an item was allocated
// for it (store_too_large or store_no_memory count this one). A locked
// item stays, and so does its lock, also when its holder's set failed: as
// yrmcds does (test/peers/compare_yrmcds.py, "holder's oversized set").
void CommandCore::drop_stale(store::StoreCommand command, std::string_view key) {
  if (command == store::StoreCommand::kSet) store_.remove(key, 0, store::kNoOwner);
}

store::DeleteStatus CommandCore::remove(std::string_view key, uint64_t compare_cas) {
  store::DeleteStatus status = store_.remove(key, compare_cas, owner_);
  (status == store::DeleteStatus::kDeleted ? stats_.delete_hits : stats_.delete_misses).add();
  // Deleting a locked item also ends the lock (its holder's delete: others
  // get kLocked), which a watcher of locks is told of.
  if (status == store::DeleteStatus::kDeleted && !held_.empty() &&
      held_.erase(std::string(key)) > 0 && watching(kWatchLocks)) {
    watch_->item_unlock(*client_, key, true, UnlockReason::kDelete);
  }
  return status;
}

store::ArithResult CommandCore::arith(std::string_view key, const store::ArithRequest& request) {
  store::ArithResult result = store_.arith(key, request, owner_);
  // As memcached: a hit is a change of an existing number; a creation, a
  // CAS mismatch or a non-number counts as neither.
  if (result.status == store::ArithStatus::kNotFound) {
    (request.increment ? stats_.incr_misses : stats_.decr_misses).add();
  } else if (result.status == store::ArithStatus::kOk && !result.created) {
    (request.increment ? stats_.incr_hits : stats_.decr_hits).add();
  }
  return result;
}

store::LockStatus CommandCore::lock(std::string_view key) {
  store::LockStatus status;
  lock_and_get(key, nullptr, &status);
  return status;
}

store::ItemRef CommandCore::lock_and_get(std::string_view key, const int64_t* exptime,
                                         store::LockStatus* status) {
  store::RelTime rel_exptime = exptime ? store::to_rel_time(*exptime, store_.clock()) : 0;
  ItemRef item = store_.lock_and_get(key, owner_, exptime ? &rel_exptime : nullptr, status);
  stats_.cmd_lock.add();
  if (watching(kWatchLocks)) watch_->item_lock(*client_, key, *status);
  switch (*status) {
    case store::LockStatus::kOk:
      stats_.lock_hits.add();
      held_.emplace(key);
      break;
    case store::LockStatus::kLocked:
      stats_.lock_contended.add();
      break;
    default:
      stats_.lock_misses.add();
      break;
  }
  return item;
}

store::LockStatus CommandCore::unlock(std::string_view key) {
  store::LockStatus status = store_.unlock(key, owner_);
  if (status == store::LockStatus::kOk) held_.erase(std::string(key));
  if (watching(kWatchLocks)) {
    watch_->item_unlock(*client_, key, status == store::LockStatus::kOk, UnlockReason::kUnlock);
  }
  return status;
}

store::StoreResult CommandCore::replace_and_unlock(const ItemRef& item, uint64_t compare_cas) {
  store::StoreResult result = store_.replace_and_unlock(item, compare_cas, owner_);
  count_set(result.status);
  bool stored = result.status == store::StoreStatus::kStored;
  if (stored) held_.erase(std::string(item->key()));
  if (watching(kWatchMutations)) {
    watch_->item_store(*client_, item->key(), result.status, store::StoreCommand::kReplace, *item,
                       store_.now());
  }
  if (watching(kWatchLocks)) {
    watch_->item_unlock(*client_, item->key(), stored, UnlockReason::kReplace);
  }
  return result;
}

void CommandCore::release_all_locks(UnlockReason reason) {
  for (const std::string& key : held_) {
    bool released = store_.unlock(key, owner_) == store::LockStatus::kOk;
    // A key whose item was deleted or replaced meanwhile held nothing.
    if (released && watching(kWatchLocks)) watch_->item_unlock(*client_, key, true, reason);
  }
  held_.clear();
}

// memcached reads the time as it reads an exptime: a delay, or past 30 days
// an absolute unix time; one already past (or negative) flushes now.
bool CommandCore::flush_all(int64_t when) {
  stats_.cmd_flush.add();
  if (!policy_->flush_all) return false;
  store::RelTime now = store_.now();
  store::RelTime moment = store::to_rel_time(when, store_.clock());
  store_.flush_all(moment > now ? moment - now : 0);
  return true;
}

}  // namespace lockcached::core
