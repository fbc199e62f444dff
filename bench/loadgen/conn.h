// A load generator connection: what both loops (engine.cc, uring.cc) keep
// per connection.
#pragma once

#include <sys/epoll.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "buffer.h"
#include "engine.h"
#include "protocol.h"
#include "tls.h"

namespace loadgen {

constexpr size_t kReadChunk = 64 * 1024;

struct Worker::Conn {
  Conn(int depth, int width)
      : in(kReadChunk * 2),
        out(16 * 1024),
        pending(depth),
        multi(depth * width),
        sending(16 * 1024) {}

  Transport stream;
  int index = 0;  // among all busy connections of the run
  Buffer in;
  Buffer out;
  size_t need = 0;               // bytes the front reply needs, when known
  std::vector<Request> pending;  // ring of requests in flight, oldest first
  size_t head = 0;
  size_t count = 0;
  std::vector<uint64_t> multi;  // multi-get keys, `width` per ring slot
  uint32_t opaque = 0;
  size_t step = 0;     // lock modes: the next step of the cycle
  bool retry = false;  // the step's lock is sent again, on the same name
  Session session;     // etcd and Redis
  uint64_t cycle_no = 0;
  uint64_t cycle_key = 0;
  int64_t cycle_start = 0;
  uint32_t events = EPOLLIN;  // what epoll waits for on this connection
  bool dead = false;
  // --io=uring: `out` collects requests while `sending` is in flight (its
  // bytes must stay put until the send completes).
  Buffer sending;
  bool in_send = false;
  bool receiving = false;  // a multishot receive is armed
  bool ready = false;      // on the list of connections to send to this turn
};

}  // namespace loadgen
