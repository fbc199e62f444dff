// The replica's side of the stream: parses memcached binary SetQ, DeleteQ
// and Flush(Q) requests (and Noop, for keep-alives) from a byte stream cut
// anywhere, and applies them to a Store. A SetQ may carry the master's CAS
// for the item, which the item then gets (or a larger one: apply_set). The
// lock-service frames an older master sends (opcodes 0xe0..0xe4) are
// skipped: see applier.cc.
//
// What the store held before a master's stream: a lockcached master begins
// with a mark (heartbeat.h: kSnapshotBeginKey), and its snapshot is then
// applied beside the old items, which go only at the snapshot's end (those
// the snapshot did not bring again). Any other first frame empties the
// store before it is applied, as the stream's snapshot.h requires.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lockcached/protocol/binary_wire.h"
#include "lockcached/store/store.h"

namespace lockcached::replication {

// A memory file's frames (memory_file.h): SetQs that carry the item's CAS
// and SavedState (encoder.h), restored as they were (Store::restore).
struct MemoryFileFrames {
  // Seconds between the file's writing and now, added to each item's idle
  // time: the last access stays where it was on the clock.
  uint32_t seconds_down = 0;
};

class Applier {
 public:
  // Frames whose value exceeds store.max_item_size() are refused.
  explicit Applier(store::Store& store);
  // Frames of a memory file instead of a master's stream.
  Applier(store::Store& store, MemoryFileFrames memory_file);
  ~Applier();
  Applier(const Applier&) = delete;
  Applier& operator=(const Applier&) = delete;

  // Applies every complete frame in `bytes` and keeps an incomplete one for
  // the next call. Returns false once a frame is malformed (error() says
  // how); the applier then refuses everything, and the caller must drop the
  // connection and resync (a new snapshot): the stream's position is lost.
  // At most one frame is ever buffered, and a header that declares a body
  // larger than any valid frame's is refused before its body is read.
  bool feed(std::string_view bytes);

  // Why feed failed; empty while it has not.
  std::string_view error() const { return error_; }
  uint64_t frames_applied() const { return frames_applied_; }
  // A memory file's items: linked, and not linked (expired or flushed
  // meanwhile, or no room).
  uint64_t items_restored() const { return items_restored_; }
  uint64_t items_dropped() const { return items_dropped_; }
  // A master's stream: its first frame (not a Noop) came.
  bool snapshot_started() const { return snapshot_started_; }
  // That frame was not a snapshot's beginning, so the store was emptied
  // before it; or a delayed flush_all was pending (start_snapshot).
  bool store_emptied() const { return store_emptied_; }
  // The master said its snapshot is whole (heartbeat.h: kSnapshotEndKey).
  bool snapshot_received() const { return snapshot_received_; }
  // Stream bytes of the frames applied so far, Noops (keep-alives) not
  // counted: the position the master's ReplicaBuffer::appended gives, what
  // the replica acks.
  uint64_t bytes_applied() const { return bytes_applied_; }
  // Bytes of an incomplete frame waiting for the rest.
  size_t buffered() const { return pending_.size(); }

 private:
  Applier(store::Store& store, std::optional<MemoryFileFrames> memory_file);
  // The frame's whole size when the 24 header bytes at `header` start a
  // frame we accept; 0 (and error_ set) when not.
  size_t check_header(const char* header);
  // Moves bytes into pending_ up to the end of its frame and applies it once
  // complete; returns the bytes left over.
  std::string_view fill_pending(std::string_view bytes);
  // A whole, checked frame.
  void apply(std::string_view frame);
  void apply_set(const protocol::binary::Header& header, std::string_view extras,
                 std::string_view key, std::string_view value);
  void restore(const protocol::binary::Header& header, store::ItemRef item);
  void apply_flush(std::string_view extras);
  // At a master's first frame: `marked`, it begins a snapshot that comes
  // beside the store's items; else the store is emptied.
  void start_snapshot(bool marked);
  // The old items evicted like any others again (Store::evict_first_stored_before).
  void end_snapshot_beside();
  void fail(const char* why) { error_ = why; }
  size_t reject(const char* why) {
    fail(why);
    return 0;
  }

  store::Store& store_;
  const std::optional<MemoryFileFrames> memory_file_;
  const size_t max_body_;
  std::string pending_;
  const char* error_ = "";
  uint64_t frames_applied_ = 0;
  uint64_t bytes_applied_ = 0;
  bool snapshot_started_ = false;
  bool marked_ = false;  // the stream began with the begin mark (a lockcached master)
  bool store_emptied_ = false;
  // A marked snapshot's: the first CAS the store gave it. Items with a
  // smaller one are evicted first while it comes, and go at its end. 0:
  // none, or it ended.
  uint64_t snapshot_first_cas_ = 0;
  bool snapshot_received_ = false;
  uint64_t items_restored_ = 0;
  uint64_t items_dropped_ = 0;
};

}  // namespace lockcached::replication
