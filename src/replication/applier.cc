#include "lockcached/replication/applier.h"

#include <endian.h>

#include <algorithm>
#include <cstring>

#include "lockcached/replication/encoder.h"
#include "lockcached/replication/heartbeat.h"

namespace lockcached::replication {
namespace {

using protocol::binary::u32_at;

// Masters before issue 30 also streamed their lock service, under these
// opcodes (which memcached leaves unassigned), each frame at most 8 bytes
// of extras, a lock name and a session id. Such a master still sends them
// during a rolling upgrade: a replica skips them, so that it keeps the
// cache it follows (refusing them would make it resync from the old master
// forever), and counts their bytes in the position it acks, as the old
// master counts them.
constexpr uint8_t kOldLockFirst = 0xe0;
constexpr uint8_t kOldLockLast = 0xe4;
constexpr size_t kOldLockMaxBody = 8 + 2 * store::kMaxKeyLength;

bool is_old_lock_frame(uint8_t opcode) {
  return opcode >= kOldLockFirst && opcode <= kOldLockLast;
}

// What the body holds beyond extras and key; call once they fit in it.
size_t value_length(const protocol::binary::Header& h) {
  return size_t{h.body_length} - h.extras_length - h.key_length;
}

// Whether the lengths fit the opcode: nullptr when they do, else why not.
const char* check_shape(const protocol::binary::Header& h) {
  bool has_key = h.key_length >= 1 && h.key_length <= store::kMaxKeyLength;
  switch (h.opcode) {
    case wire::kSetQ:
      return h.extras_length == wire::kSetExtras && has_key ? nullptr : "malformed SetQ";
    case wire::kDeleteQ:
      return h.extras_length == 0 && has_key && value_length(h) == 0 ? nullptr : "malformed DeleteQ";
    case wire::kFlush:
    case wire::kFlushQ:
      return (h.extras_length == 0 || h.extras_length == wire::kFlushExtras) &&
                     h.key_length == 0 && value_length(h) == 0
                 ? nullptr
                 : "malformed Flush";
    case wire::kNoop:
      return h.body_length == 0 ? nullptr : "malformed Noop";
    default:
      if (!is_old_lock_frame(h.opcode)) return "opcode not in a replication stream";
      return h.body_length <= kOldLockMaxBody ? nullptr : "malformed lock frame";
  }
}

}  // namespace

// The largest valid body: SetQ extras, the longest key, the largest value
// (or an old lock frame's, should the store's items be smaller).
Applier::Applier(store::Store& store) : Applier(store, std::nullopt) {}

Applier::Applier(store::Store& store, MemoryFileFrames memory_file)
    : Applier(store, std::optional<MemoryFileFrames>(memory_file)) {}

// A snapshot that never came whole leaves the old items as they are.
Applier::~Applier() {
  end_snapshot_beside();
}

Applier::Applier(store::Store& store, std::optional<MemoryFileFrames> memory_file)
    : store_(store),
      memory_file_(memory_file),
      max_body_(std::max(wire::kSetExtras + store::kMaxKeyLength + store.max_item_size(),
                         kOldLockMaxBody)) {}

bool Applier::feed(std::string_view bytes) {
  if (*error_) return false;
  if (!pending_.empty()) {
    bytes = fill_pending(bytes);
    if (*error_) return false;
    if (!pending_.empty()) return true;  // everything went into the frame
  }
  // Whole frames straight from the input: no copy but into the item.
  while (bytes.size() >= wire::kHeaderSize) {
    size_t size = check_header(bytes.data());
    if (size == 0) return false;
    if (bytes.size() < size) break;
    apply(bytes.substr(0, size));
    if (*error_) return false;
    bytes.remove_prefix(size);
  }
  pending_.assign(bytes);  // at most one frame, its header (if whole) checked
  return true;
}

std::string_view Applier::fill_pending(std::string_view bytes) {
  auto move = [&](size_t wanted) {
    size_t take = std::min(wanted - pending_.size(), bytes.size());
    pending_.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
  };
  if (pending_.size() < wire::kHeaderSize) {
    move(wire::kHeaderSize);
    if (pending_.size() < wire::kHeaderSize) return bytes;
  }
  size_t size = check_header(pending_.data());
  if (size == 0) return {};
  move(size);
  if (pending_.size() == size) {
    apply(pending_);
    pending_.clear();
  }
  return bytes;
}

size_t Applier::check_header(const char* header) {
  protocol::binary::Header h = protocol::binary::decode_header(header);
  if (h.magic != wire::kRequestMagic) return reject("not a binary request (magic)");
  if (h.data_type != 0) return reject("data type is not raw");
  // A SetQ's CAS is the master's for the item (Encoder::append_set_with_cas);
  // in any other frame it would ask for a compare this replica does not do.
  if (h.cas != 0 && !memory_file_ && h.opcode != wire::kSetQ) {
    return reject("only a SetQ carries a CAS");
  }
  if (h.body_length > max_body_) return reject("frame larger than the largest item");
  if (size_t{h.extras_length} + h.key_length > h.body_length) {
    return reject("key and extras exceed body");
  }
  if (const char* why = check_shape(h)) return reject(why);
  if (value_length(h) > store_.max_item_size()) return reject("value larger than the largest item");
  return wire::kHeaderSize + h.body_length;
}

void Applier::apply(std::string_view frame) {
  protocol::binary::Header h = protocol::binary::decode_header(frame.data());
  std::string_view body = frame.substr(wire::kHeaderSize);
  std::string_view extras = body.substr(0, h.extras_length);
  std::string_view key = body.substr(h.extras_length, h.key_length);
  std::string_view value = body.substr(h.extras_length + h.key_length);
  bool is_delete = h.opcode == wire::kDeleteQ;
  bool is_mark = is_delete && be32toh(h.opaque) == kSnapshotMarkOpaque;
  if (!memory_file_ && !snapshot_started_ && h.opcode != wire::kNoop) {
    start_snapshot(is_mark && key == kSnapshotBeginKey);
  }
  switch (h.opcode) {
    case wire::kSetQ:
      apply_set(h, extras, key, value);
      break;
    case wire::kDeleteQ:
      store_.remove(key, 0, store::kNoOwner);  // already gone is fine
      break;
    case wire::kFlush:
    case wire::kFlushQ:
      apply_flush(extras);
      break;
    default:  // a Noop, or an old master's lock frame (check_shape): nothing to do
      break;
  }
  if (*error_) return;
  ++frames_applied_;
  // An older master marks the end by the key alone (heartbeat.h).
  if (is_delete && key == kSnapshotEndKey && (is_mark || !marked_)) {
    snapshot_received_ = true;
    if (snapshot_first_cas_ != 0) store_.flush_stored_before(snapshot_first_cas_);
    end_snapshot_beside();
  }
  // A Noop is the master's keep-alive, sent beside the buffered stream
  // (Master::heartbeat): the position an ack names counts the stream only.
  if (h.opcode != wire::kNoop) bytes_applied_ += frame.size();
}

// While a marked snapshot comes beside the old items, those are the ones
// to evict when it needs room: the new master has its own. A delayed
// flush_all the old stream left pending would, at its moment, take the new
// master's items with the old ones: then the store is emptied at once, as
// for an unmarked stream.
void Applier::start_snapshot(bool marked) {
  snapshot_started_ = true;
  marked_ = marked;
  if (marked && store_.pending_flush() == 0) {
    snapshot_first_cas_ = store_.cas_counter() + 1;
    store_.evict_first_stored_before(snapshot_first_cas_);
    return;
  }
  store_.flush_all(0);
  store_emptied_ = true;
}

void Applier::end_snapshot_beside() {
  if (snapshot_first_cas_ == 0) return;
  store_.evict_first_stored_before(0);
  snapshot_first_cas_ = 0;
}

// The master's exptime is a unix time (Encoder::wire_time); a relative one
// from another kind of master is taken as memcached would take it.
//
// The master's CAS, when the frame carries one, becomes the item's: the
// counter is raised to just below it first, so the store gives the item
// that CAS, or a larger one when the counter is already past it (an older
// item of another key arrives after a newer one, or this store counted
// further before this master). Never a smaller one: a CAS a client read
// from the master then never names another, newer version of the item
// here, after a failover. The CAS stays the store's own otherwise (a
// store's CASes grow in the order it links items: flush_all and the
// snapshot's beginning are CAS bounds, Store::flush_stored_before).
void Applier::apply_set(const protocol::binary::Header& header, std::string_view extras,
                        std::string_view key, std::string_view value) {
  uint32_t flags = u32_at(extras.data());
  store::RelTime exptime = store::to_rel_time(u32_at(extras.data() + 4), store_.clock());
  store::ItemRef item = store_.allocate(key, flags, exptime, value.size());
  if (!item) return fail("no memory for an item");
  std::memcpy(item->value(), value.data(), value.size());
  if (memory_file_) return restore(header, std::move(item));
  // The master's meta bits (Encoder::append_set: SavedState::meta_of; an
  // older master's opaque is 0, none set). The store keeps them (kSet).
  SavedState::from_opaque(be32toh(header.opaque)).apply_to(*item);
  // A replica refuses its clients' writes, so nothing can be locked here; a
  // store short of memory drops the old value (kSet), as the master's would.
  if (header.cas != 0) store_.raise_cas_counter(header.cas - 1);
  store_.store(store::StoreCommand::kSet, item, 0, store::kNoOwner);
}

// The item as it was saved; its exptime, a unix time, is already in the
// new clock's terms, so one that passed while the server was down is gone.
void Applier::restore(const protocol::binary::Header& header, store::ItemRef item) {
  SavedState state = SavedState::from_opaque(be32toh(header.opaque));
  item->cas = header.cas;
  state.apply_to(*item);
  store::RelTime now = store_.clock().now();
  uint64_t idle = uint64_t{state.idle_seconds} + memory_file_->seconds_down;
  // 1 at the oldest: 0 is "never" to the crawler's age (Store::crawl).
  store::RelTime atime = idle < now ? static_cast<store::RelTime>(now - idle) : 1;
  ++(store_.restore(item, atime, state.accessed) ? items_restored_ : items_dropped_);
}

void Applier::apply_flush(std::string_view extras) {
  uint32_t when = extras.empty() ? 0 : u32_at(extras.data());
  if (when == 0) return store_.flush_all(0);
  store::RelTime moment = store::to_rel_time(when, store_.clock());
  store::RelTime now = store_.clock().now();
  store_.flush_all(moment > now ? static_cast<int64_t>(moment - now) : 0);
}

}  // namespace lockcached::replication
