#include "lockcached/core/watch.h"

#include <algorithm>
#include <charconv>
#include <ctime>

#include "lockcached/core/uri_encode.h"
#include "lockcached/store/size_classes.h"

namespace lockcached::core {
namespace {

// "skipped=" and 20 digits and '\n'.
constexpr size_t kMaxSkippedLine = 32;

std::string_view status_name(store::StoreStatus status) {
  switch (status) {
    case store::StoreStatus::kStored:
      return "stored";
    case store::StoreStatus::kNotStored:
      return "not_stored";
    case store::StoreStatus::kExists:
      return "exists";
    case store::StoreStatus::kNotFound:
      return "not_found";
    case store::StoreStatus::kNoMemory:
      return "no_memory";
    // Ours: memcached has no locks.
    case store::StoreStatus::kLocked:
      return "locked";
    case store::StoreStatus::kNotLocked:
      return "not_locked";
  }
  return "na";
}

std::string_view command_name(store::StoreCommand command) {
  switch (command) {
    case store::StoreCommand::kSet:
      return "set";
    case store::StoreCommand::kAdd:
      return "add";
    case store::StoreCommand::kReplace:
      return "replace";
    case store::StoreCommand::kAppend:
      return "append";
    case store::StoreCommand::kPrepend:
      return "prepend";
    case store::StoreCommand::kCas:
      return "cas";
  }
  return "na";
}

std::string_view reason_name(CloseReason reason) {
  switch (reason) {
    case CloseReason::kError:
      return "error";
    case CloseReason::kNormal:
      return "normal";
    case CloseReason::kIdleTimeout:
      return "idle_timeout";
    case CloseReason::kShutdown:
      return "shutdown";
    case CloseReason::kDeadPeer:
      return "dead_peer";
  }
  return "error";
}

std::string_view unlock_reason_name(UnlockReason reason) {
  switch (reason) {
    case UnlockReason::kUnlock:
      return "unlock";
    case UnlockReason::kUnlockAll:
      return "unlock_all";
    case UnlockReason::kDisconnect:
      return "disconnect";
    case UnlockReason::kReplace:
      return "replace";
    case UnlockReason::kDelete:
      return "delete";
  }
  return "unlock";
}

template <typename Number>
void append_number(std::string& out, Number value) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, static_cast<size_t>(end - digits));
}

// " rip=IP rport=PORT": where a client is, as memcached's streams say it.
void append_address(std::string& out, const net::Endpoint& address) {
  out += " rip=";
  out += net::ip_text(address);
  out += " rport=";
  append_number(out, address.port);
}

// memcached's transport names: "local" for a unix-domain socket.
std::string_view transport(const net::ClientInfo& client) {
  return client.address.family == net::Endpoint::Family::kUnix ? " transport=local"
                                                               : " transport=tcp";
}

// " conn=ID rip=IP rport=PORT cfd=ID": who, on the locks stream (cfd= as
// memcached's streams print the connection, conn= as before it did).
void append_client(std::string& out, const net::ClientInfo& client) {
  out += " conn=";
  append_number(out, client.id);
  append_address(out, client.address);
  out += " cfd=";
  append_number(out, client.id);
}

}  // namespace

uint32_t watch_stream(std::string_view name) {
  if (name == "fetchers") return kWatchFetchers;
  if (name == "mutations") return kWatchMutations;
  if (name == "evictions") return kWatchEvictions;
  if (name == "connevents") return kWatchConnEvents;
  if (name == "locks") return kWatchLocks;
  return 0;
}

void append_uri_encoded(std::string& out, std::string_view bytes) {
  size_t start = out.size();
  out.resize(start + 3 * bytes.size());
  out.resize(static_cast<size_t>(uri_encode(bytes, out.data() + start) - out.data()));
}

void Watcher::attach(std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  wake_ = std::move(wake);
}

void Watcher::detach() {
  std::lock_guard lock(mutex_);
  wake_ = nullptr;
}

bool Watcher::offer(std::string_view line) {
  std::function<void()> wake;
  {
    std::lock_guard lock(mutex_);
    size_t needed = line.size() + (skipped_ > 0 ? kMaxSkippedLine : 0);
    if (buffer_.size() + needed > capacity_) {
      ++skipped_;
      return false;
    }
    // Only a line into an empty buffer wakes the connection: until it has
    // taken the buffer, the wake-up already posted covers the rest.
    if (buffer_.empty()) wake = wake_;
    if (skipped_ > 0) {
      buffer_ += "skipped=";
      append_number(buffer_, skipped_);
      buffer_ += '\n';
      skipped_ = 0;
    }
    buffer_.append(line);
  }
  if (wake) wake();
  return true;
}

size_t Watcher::take(std::string& out) {
  std::lock_guard lock(mutex_);
  size_t taken = buffer_.size();
  if (out.empty()) {
    out.swap(buffer_);
  } else {
    out.append(buffer_);
    buffer_.clear();
  }
  return taken;
}

size_t Watcher::pending() const {
  std::lock_guard lock(mutex_);
  return buffer_.size();
}

uint64_t Watcher::skipped() const {
  std::lock_guard lock(mutex_);
  return skipped_;
}

std::shared_ptr<Watcher> WatchHub::add(uint32_t streams) {
  std::lock_guard lock(mutex_);
  size_t count = watchers_ ? watchers_->size() : 0;
  if (count >= kMaxWatchers) return nullptr;
  auto watcher = std::make_shared<Watcher>(streams, buffer_bytes_);
  auto list = std::make_shared<std::vector<std::shared_ptr<Watcher>>>();
  if (watchers_) *list = *watchers_;
  list->push_back(watcher);
  watchers_ = std::move(list);
  update_mask_locked();
  return watcher;
}

void WatchHub::remove(const std::shared_ptr<Watcher>& watcher) {
  std::lock_guard lock(mutex_);
  if (!watchers_) return;
  auto list = std::make_shared<std::vector<std::shared_ptr<Watcher>>>(*watchers_);
  list->erase(std::remove(list->begin(), list->end(), watcher), list->end());
  watchers_ = std::move(list);
  update_mask_locked();
}

void WatchHub::update_mask_locked() {
  uint32_t mask = 0;
  for (const auto& watcher : *watchers_)
    mask |= watcher->streams();
  mask_.store(mask, std::memory_order_relaxed);
}

WatchStats WatchHub::stats() const {
  WatchStats stats;
  {
    std::lock_guard lock(mutex_);
    stats.watchers = watchers_ ? watchers_->size() : 0;
  }
  stats.sent = sent_.load(std::memory_order_relaxed);
  stats.skipped = skipped_.load(std::memory_order_relaxed);
  return stats;
}

void WatchHub::reset_stats() {
  sent_.store(0, std::memory_order_relaxed);
  skipped_.store(0, std::memory_order_relaxed);
}

void WatchHub::publish(uint32_t stream, std::string_view body) {
  std::shared_ptr<const std::vector<std::shared_ptr<Watcher>>> watchers;
  {
    std::lock_guard lock(mutex_);
    watchers = watchers_;
  }
  if (!watchers) return;
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  // memcached's stamp, microseconds unpadded as it prints them ("%lld.%d").
  std::string line;
  line.reserve(body.size() + 64);
  line += "ts=";
  append_number(line, static_cast<long long>(now.tv_sec));
  line += '.';
  append_number(line, static_cast<int>(now.tv_nsec / 1000));
  line += " gid=";
  append_number(line, gid_.fetch_add(1, std::memory_order_relaxed) + 1);
  line += ' ';
  line.append(body);
  line += '\n';
  for (const auto& watcher : *watchers) {
    if ((watcher->streams() & stream) == 0) continue;
    (watcher->offer(line) ? sent_ : skipped_).fetch_add(1, std::memory_order_relaxed);
  }
}

void WatchHub::item_get(const net::ClientInfo& client, std::string_view key,
                        const store::Item* item) {
  if (!watching(kWatchFetchers)) return;
  std::string body = "type=item_get key=";
  append_uri_encoded(body, key);
  body += item ? " status=found clsid=" : " status=not_found clsid=";
  append_number(body, item ? store::size_class_of(item->total_size()) : 0u);
  body += " cfd=";
  append_number(body, client.id);
  body += " size=";
  append_number(body, item ? item->value_len : 0u);
  publish(kWatchFetchers, body);
}

void WatchHub::item_store(const net::ClientInfo& client, std::string_view key,
                          store::StoreStatus status, store::StoreCommand command,
                          const store::Item& item, store::RelTime now) {
  if (!watching(kWatchMutations)) return;
  std::string body = "type=item_store key=";
  append_uri_encoded(body, key);
  body += " status=";
  body += status_name(status);
  body += " cmd=";
  body += command_name(command);
  // As memcached: the seconds left, unsigned (an exptime already past
  // wraps around), 0 for none.
  body += " ttl=";
  append_number(body, item.exptime == 0 ? 0u : static_cast<uint32_t>(item.exptime - now));
  body += " clsid=";
  append_number(body, store::size_class_of(item.total_size()));
  body += " cfd=";
  append_number(body, client.id);
  body += " size=";
  append_number(body, item.value_len);
  publish(kWatchMutations, body);
}

void WatchHub::conn_new(const net::ClientInfo& client) {
  if (!watching(kWatchConnEvents)) return;
  std::string body = "type=conn_new";
  append_address(body, client.address);
  body += transport(client);
  body += " cfd=";
  append_number(body, client.id);
  publish(kWatchConnEvents, body);
}

void WatchHub::conn_close(const net::ClientInfo& client, CloseReason reason) {
  if (!watching(kWatchConnEvents)) return;
  std::string body = "type=conn_close";
  append_address(body, client.address);
  body += transport(client);
  body += " reason=";
  body += reason_name(reason);
  body += " cfd=";
  append_number(body, client.id);
  publish(kWatchConnEvents, body);
}

void WatchHub::on_eviction(const store::Eviction& eviction) {
  if (!watching(kWatchEvictions)) return;
  std::string body = "type=eviction key=";
  append_uri_encoded(body, eviction.key);
  body += eviction.fetched ? " fetch=yes ttl=" : " fetch=no ttl=";
  append_number(body, eviction.ttl);
  body += " la=";
  append_number(body, eviction.idle);
  body += " clsid=";
  append_number(body, store::size_class_of(eviction.total_size));
  body += " size=";
  append_number(body, eviction.value_len);
  publish(kWatchEvictions, body);
}

void WatchHub::item_lock(const net::ClientInfo& client, std::string_view key,
                         store::LockStatus status) {
  if (!watching(kWatchLocks)) return;
  std::string body = "type=item_lock key=";
  append_uri_encoded(body, key);
  switch (status) {
    case store::LockStatus::kOk:
      body += " status=granted";
      break;
    case store::LockStatus::kLocked:
      body += " status=locked";
      break;
    case store::LockStatus::kNotFound:
    case store::LockStatus::kNotLocked:
      body += " status=not_found";
      break;
  }
  append_client(body, client);
  publish(kWatchLocks, body);
}

void WatchHub::item_unlock(const net::ClientInfo& client, std::string_view key, bool released,
                           UnlockReason reason) {
  if (!watching(kWatchLocks)) return;
  std::string body = "type=item_unlock key=";
  append_uri_encoded(body, key);
  body += released ? " status=released reason=" : " status=not_locked reason=";
  body += unlock_reason_name(reason);
  append_client(body, client);
  publish(kWatchLocks, body);
}

void WatchHub::lock_service_event(const net::ClientInfo& client, std::string_view type,
                                  std::string_view name, std::string_view details,
                                  std::string_view session) {
  if (!watching(kWatchLocks)) return;
  std::string body = "type=";
  body += type;
  if (!name.empty()) {
    body += " name=";
    append_uri_encoded(body, name);
  }
  if (!details.empty()) {
    body += ' ';
    body += details;
  }
  body += " session=";
  append_uri_encoded(body, session);
  append_client(body, client);
  publish(kWatchLocks, body);
}

}  // namespace lockcached::core
