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

// Appends a request header: data type raw, vbucket and opaque 0. `cas` is 0
// in every frame of the stream (a replica assigns its own); only the
// replica's ack (heartbeat.h) carries a number there.
void append_request_header(uint8_t opcode, size_t key_length, uint8_t extras_length,
                           size_t body_length, std::string& out, uint64_t cas = 0);
}  // namespace wire

// Appends frames to a byte string. Opaque and CAS are 0: a CAS in a SetQ
// would make it a compare-and-swap on the replica, which assigns its own.
class Encoder {
 public:
  explicit Encoder(const store::Clock& clock) : clock_(clock) {}

  // SetQ: flags and exptime as extras, the key, the value without the
  // "\r\n" that items keep after it.
  void append_set(const store::Item& item, std::string& out) const;
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
  const store::Clock& clock_;
};

}  // namespace lockcached::replication
