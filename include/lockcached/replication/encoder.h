// The replication stream's frames: memcached binary requests (SetQ, DeleteQ,
// FlushQ), so that any memcached-compatible server can follow a lockcached
// master, as with yrmcds (../shared/specs/replication.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lockcached/protocol/binary_wire.h"
#include "lockcached/store/clock.h"
#include "lockcached/store/item.h"

namespace lockcached::replication {

// The stream speaks memcached's binary protocol (protocol/binary_wire.h:
// plain data, so this layer still sits below the protocols); these are
// the extras of the two requests that carry any.
namespace wire {
using namespace protocol::binary;
constexpr uint8_t kSetExtras = 8;    // flags, exptime
constexpr uint8_t kFlushExtras = 4;  // when (exptime rules)

// Appends a request header: data type raw, vbucket 0. `cas` and `opaque`
// are 0 in the stream's frames but these: a SetQ carries the item's meta
// bits in its opaque, and to a lockcached replica its CAS
// (Encoder::append_set_with_cas), the snapshot's marks their opaque
// (heartbeat.h), a memory file's items their CAS and SavedState.
void append_request_header(uint8_t opcode, size_t key_length, uint8_t extras_length,
                           size_t body_length, std::string& out, uint64_t cas = 0,
                           uint32_t opaque = 0);
}  // namespace wire

// What a warm restart keeps of an item beyond a replica's frame (which
// carries no last access, and a CAS only to a lockcached replica): a memory file's SetQ
// (memory_file.h) carries the item's CAS in the header's CAS field, as a
// binary Set with CAS does, and this in the opaque, the field memcached
// leaves to the sender: the meta-protocol bits and the CLOCK bit in the low
// byte, the seconds since the last access (at most 2^24 - 1, 194 days)
// above them, so that the CLOCK hand and `mg ... l` see the item as they
// did before the stop.
struct SavedState {
  bool accessed = false;
  bool fetched = false;
  bool stale = false;
  bool token_sent = false;
  bool key_binary = false;
  uint32_t idle_seconds = 0;

  static SavedState of(const store::Item& item, store::RelTime now);
  // The meta-protocol bits alone, what a replica's SetQ carries in its
  // opaque: an `md KEY I` or `ms ... I` (stale, the win token not yet
  // sent) holds on the replica too, and on it once promoted.
  static SavedState meta_of(const store::Item& item);
  static SavedState from_opaque(uint32_t opaque);
  uint32_t opaque() const;
  // Sets the item's meta bits (not the CLOCK bit nor the last access:
  // Store::restore puts those back once the item is linked).
  void apply_to(store::Item& item) const;
};

// Appends frames to a byte string.
class Encoder {
 public:
  explicit Encoder(const store::Clock& clock) : clock_(clock) {}

  // SetQ: flags and exptime as extras, the key, the value without the
  // "\r\n" that items keep after it; CAS 0, which any replica takes (a
  // CAS in a SetQ is a compare-and-swap to memcached, and an older
  // lockcached replica refuses it); the item's meta-protocol bits in the
  // opaque (SavedState::meta_of), which memcached and an older lockcached
  // replica ignore in a request.
  void append_set(const store::Item& item, std::string& out) const;
  // The same SetQ with the item's CAS in the header, for a replica whose
  // acks say it takes it (heartbeat.h: kTakesCasOpaque): it gives the item
  // that CAS (or a larger one), so that a CAS a client read from this
  // master never names another version of the item there.
  void append_set_with_cas(const store::Item& item, std::string& out) const;
  // The same SetQ for a memory file: CAS and SavedState in the header.
  void append_saved(const store::Item& item, store::RelTime now, std::string& out) const;
  void append_delete(std::string_view key, std::string& out) const;
  // FlushQ; `moment` as ChangeListener::on_flush gives it (0: at once).
  void append_flush(store::RelTime moment, std::string& out) const;

  // An exptime for the wire: 0 (never) or an absolute unix time, never a
  // relative one. A relative TTL would restart when the replica applies the
  // frame (late by the stream's lag, or by the whole snapshot for an item
  // sent in one), so the copy would outlive the original; a unix time means
  // the same moment on every node whose clock is in sync (NTP).
  uint32_t wire_time(store::RelTime time) const;

  static size_t set_size(const store::Item& item) {
    return wire::kHeaderSize + wire::kSetExtras + item.key_len + item.value_len;
  }

 private:
  void append_set(const store::Item& item, uint64_t cas, uint32_t opaque, std::string& out) const;

  const store::Clock& clock_;
};

}  // namespace lockcached::replication
