// What `stats conns` shows of a connection or a listening socket, as plain
// data: a connection stores its state as it changes, and the worker copies
// it out for the stats report (server/stats_report.h), which names it.
#pragma once

#include <cstdint>

#include "lockcached/net/endpoint.h"
#include "lockcached/server/settings.h"

namespace lockcached::server {

// What a connection is doing, in memcached's names where one fits (the
// stats report's). Set by the connection's thread as of its last turn of
// I/O, read by any.
enum class ConnState : uint8_t {
  kWaiting,   // conn_waiting: nothing pending, waiting for a request
  kRead,      // conn_read: part of a request line or header has arrived
  kNread,     // conn_nread: a storage command's data block is arriving
  kWrite,     // conn_mwrite: replies the socket has not taken yet, or a long `keys`
  kLockWait,  // conn_lock_wait: a lock-service `lock NAME SECONDS` waits
  kReplWait,  // conn_repl_wait: a lock-service reply waits for the replicas
  kClosing,   // conn_closing: closed, or closing once its replies are sent
  kWatch,     // conn_watch: a `watch` connection, streaming its lines
};

// The protocol a connection speaks: a cache connection chooses by its
// first byte (meta commands are part of the text protocol).
enum class ConnProtocol : uint8_t { kUndecided, kText, kBinary, kLockService };

// A copy of one connection's or listener's (Worker::list_connections).
struct ConnectionStatus {
  uint64_t id = 0;
  PortKind kind = PortKind::kCache;
  bool listening = false;  // a listening socket: no peer, no state but that
  net::Endpoint address;   // the client's (a listener's own)
  net::Endpoint local_address;
  ConnState state = ConnState::kWaiting;
  ConnProtocol protocol = ConnProtocol::kUndecided;
  int64_t last_active_ms = 0;  // monotonic: the last request, or a lock wait ended (a listener: its opening)
};

}  // namespace lockcached::server
