#include "consensus/authenticated_transport.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>
#include <mutex>
#include <unordered_set>
#include <vector>

#include <glog/logging.h>

namespace lockcached::consensus {
namespace {

constexpr std::string_view kMacLabel = "lockcached-cluster-2";

// libraft 0.15 parses an address with strtok (uv_ip.c) when its TCP
// transport listens or connects, and strtok's state is the process's: two
// members in one process (RaftNodeTest's) must not do either at once
// (ThreadSanitizer reported the race). A server runs one member, which never
// waits for this lock.
std::mutex address_parser_mutex;

// A peer that does not finish the exchange within this is cut off: a
// stranger must not hold a half-open connection for long.
constexpr uint64_t kExchangeTimeoutMs = 5000;

struct Transport;

// One connection between libraft's handshake and ours: an incoming one
// waits for the MAC, an outgoing one for the nonce (then sends the MAC).
struct Exchange {
  Transport* transport = nullptr;
  bool incoming = false;
  uv_stream_t* stream = nullptr;  // ours until handed to libraft or closed
  uv_timer_t timer{};
  uv_write_t write{};
  raft_id id = 0;
  std::string address;
  unsigned char nonce[kPeerNonceSize] = {};
  std::string sent;  // what `write` sends
  // The nonce (outgoing), or the MAC and the incarnation (incoming).
  unsigned char received[kPeerMacSize + kPeerIncarnationSize] = {};
  size_t expected_size = 0;
  size_t received_size = 0;
  raft_uv_connect* connect_request = nullptr;  // outgoing: libraft's request
  int open_handles = 0;                        // stream (while ours) and timer
  bool over = false;                           // finished or aborted
  int status = 0;                              // why it was aborted
};

struct Transport {
  struct raft_uv_transport inner{};  // libraft's TCP transport
  struct raft_uv_transport* outer = nullptr;
  uv_loop_t* loop = nullptr;
  std::string secret;
  std::string incarnation;  // this member's data directory's
  AdmitPeer admit;
  raft_id self_id = 0;        // who libraft's handshake says we are
  std::string self_address;
  raft_uv_accept_cb accept_cb = nullptr;
  std::unordered_set<Exchange*> exchanges;
  bool closing = false;
  bool inner_closed = false;
  raft_uv_transport_close_cb close_cb = nullptr;
};

// An outgoing connect request while libraft's transport makes it.
struct Connecting {
  struct raft_uv_connect inner{};
  raft_uv_connect* outer = nullptr;
  Transport* transport = nullptr;
};

Transport* impl(struct raft_uv_transport* t) {
  return static_cast<Transport*>(t->impl);
}

void maybe_closed(Transport* t) {
  if (t->closing && t->inner_closed && t->exchanges.empty() && t->close_cb) {
    raft_uv_transport_close_cb cb = t->close_cb;
    t->close_cb = nullptr;
    cb(t->outer);
  }
}

// Every handle of an exchange is closed: tell libraft of a failed
// connect, and free it.
void exchange_handle_closed(uv_handle_t* handle) {
  auto* exchange = static_cast<Exchange*>(handle->data);
  if (handle != reinterpret_cast<uv_handle_t*>(&exchange->timer)) raft_free(handle);
  if (--exchange->open_handles > 0) return;
  Transport* t = exchange->transport;
  t->exchanges.erase(exchange);
  if (exchange->connect_request && exchange->status != 0) {
    exchange->connect_request->cb(exchange->connect_request, nullptr, exchange->status);
  }
  delete exchange;
  maybe_closed(t);
}

void abort_exchange(Exchange* exchange, int status) {
  if (exchange->over) return;
  exchange->over = true;
  exchange->status = status;
  uv_timer_stop(&exchange->timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&exchange->timer), exchange_handle_closed);
  if (exchange->stream) {
    uv_read_stop(exchange->stream);
    uv_close(reinterpret_cast<uv_handle_t*>(exchange->stream), exchange_handle_closed);
    exchange->stream = nullptr;
  }
}

// Done: the stream goes to libraft, the timer closes and frees the rest.
void finish_exchange(Exchange* exchange) {
  exchange->over = true;
  uv_stream_t* stream = exchange->stream;
  exchange->stream = nullptr;
  --exchange->open_handles;  // the stream is libraft's now
  uv_timer_stop(&exchange->timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&exchange->timer), exchange_handle_closed);
  Transport* t = exchange->transport;
  if (exchange->incoming) {
    t->accept_cb(t->outer, exchange->id, exchange->address.c_str(), stream);
  } else {
    exchange->connect_request->cb(exchange->connect_request, stream, 0);
  }
}

void exchange_timed_out(uv_timer_t* timer) {
  auto* exchange = static_cast<Exchange*>(timer->data);
  if (exchange->incoming) {
    LOG(WARNING) << "cluster port: a peer calling itself node " << exchange->id << " at "
                 << exchange->address << " did not authenticate in time; closed";
  }
  abort_exchange(exchange, RAFT_NOCONNECTION);
}

// Reads exactly the bytes the exchange waits for, never one of libraft's.
void alloc_exactly(uv_handle_t* handle, size_t, uv_buf_t* buffer) {
  auto* exchange = static_cast<Exchange*>(handle->data);
  buffer->base = reinterpret_cast<char*>(exchange->received) + exchange->received_size;
  buffer->len = exchange->expected_size - exchange->received_size;
}

void on_sent(uv_write_t* write, int status) {
  auto* exchange = static_cast<Exchange*>(write->data);
  if (exchange->over) return;  // aborted meanwhile
  if (status != 0) return abort_exchange(exchange, RAFT_NOCONNECTION);
  if (!exchange->incoming) finish_exchange(exchange);  // the MAC went out
}

void send(Exchange* exchange, std::string bytes) {
  exchange->sent = std::move(bytes);
  uv_buf_t buffer = uv_buf_init(exchange->sent.data(), static_cast<unsigned>(exchange->sent.size()));
  exchange->write.data = exchange;
  if (uv_write(&exchange->write, exchange->stream, &buffer, 1, on_sent) != 0) {
    abort_exchange(exchange, RAFT_NOCONNECTION);
  }
}

void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t*) {
  auto* exchange = static_cast<Exchange*>(stream->data);
  if (nread == 0) return;
  if (nread < 0) return abort_exchange(exchange, RAFT_NOCONNECTION);
  exchange->received_size += static_cast<size_t>(nread);
  if (exchange->received_size < exchange->expected_size) return;
  uv_read_stop(stream);
  Transport* t = exchange->transport;
  if (!exchange->incoming) {
    // The listener's nonce: answer with the MAC over it and who we are.
    return send(exchange, peer_mac(t->secret, exchange->received, exchange->id,
                                   exchange->address, t->incarnation) +
                              t->incarnation);
  }
  std::string incarnation(reinterpret_cast<const char*>(exchange->received) + kPeerMacSize,
                          kPeerIncarnationSize);
  std::string expected =
      peer_mac(t->secret, exchange->nonce, exchange->id, exchange->address, incarnation);
  if (CRYPTO_memcmp(expected.data(), exchange->received, kPeerMacSize) != 0) {
    LOG(WARNING) << "cluster port: refused a peer calling itself node " << exchange->id << " at "
                 << exchange->address << ": it does not know the cluster's secret";
    return abort_exchange(exchange, RAFT_UNAUTHORIZED);
  }
  if (!t->admit(exchange->id, incarnation)) {
    LOG_EVERY_N(WARNING, 20)
        << "cluster port: refused node " << exchange->id << " at " << exchange->address
        << ": its data directory is not the one this member knew for it (a node that lost its "
           "disk comes back under a new id, with --cluster_join; one given another node's or "
           "another cluster's directory must get its own back)";
    return abort_exchange(exchange, RAFT_UNAUTHORIZED);
  }
  finish_exchange(exchange);
}

// `connect_request`: an outgoing exchange's libraft request, set before
// anything can fail, so that a failure reaches it.
void start_exchange(Exchange* exchange, uv_stream_t* stream) {
  Transport* t = exchange->transport;
  exchange->stream = stream;
  stream->data = exchange;
  exchange->timer.data = exchange;
  uv_timer_init(t->loop, &exchange->timer);
  exchange->open_handles = 2;
  exchange->expected_size =
      exchange->incoming ? kPeerMacSize + kPeerIncarnationSize : kPeerNonceSize;
  t->exchanges.insert(exchange);
  uv_timer_start(&exchange->timer, exchange_timed_out, kExchangeTimeoutMs, 0);
  if (uv_read_start(stream, alloc_exactly, on_read) != 0) {
    return abort_exchange(exchange, RAFT_NOCONNECTION);
  }
  if (!exchange->incoming) return;  // waits for the listener's nonce
  if (RAND_bytes(exchange->nonce, sizeof exchange->nonce) != 1) {
    LOG(ERROR) << "cluster port: no random bytes for a nonce; connection refused";
    return abort_exchange(exchange, RAFT_NOCONNECTION);
  }
  send(exchange, std::string(reinterpret_cast<char*>(exchange->nonce), sizeof exchange->nonce));
}

void on_accepted(struct raft_uv_transport* inner, raft_id id, const char* address,
                 uv_stream_t* stream) {
  auto* t = static_cast<Transport*>(inner->data);
  auto* exchange = new Exchange;
  exchange->transport = t;
  exchange->incoming = true;
  exchange->id = id;  // who the peer says it is; the MAC proves it knows the secret
  exchange->address = address;
  start_exchange(exchange, stream);
}

void on_connected(struct raft_uv_connect* inner, uv_stream_t* stream, int status) {
  auto* connecting = static_cast<Connecting*>(inner->data);
  raft_uv_connect* outer = connecting->outer;
  Transport* t = connecting->transport;
  delete connecting;
  if (status != 0) return outer->cb(outer, nullptr, status);
  auto* exchange = new Exchange;
  exchange->transport = t;
  exchange->connect_request = outer;
  // The MAC covers who we are, as libraft's handshake just told the peer.
  exchange->id = t->self_id;
  exchange->address = t->self_address;
  start_exchange(exchange, stream);
}

void on_inner_closed(struct raft_uv_transport* inner) {
  auto* t = static_cast<Transport*>(inner->data);
  t->inner_closed = true;
  maybe_closed(t);
}

int transport_init(struct raft_uv_transport* outer, raft_id id, const char* address) {
  Transport* t = impl(outer);
  t->self_id = id;
  t->self_address = address;
  int rv = t->inner.init(&t->inner, id, address);
  if (rv != 0) std::memcpy(outer->errmsg, t->inner.errmsg, sizeof outer->errmsg);
  return rv;
}

int transport_listen(struct raft_uv_transport* outer, raft_uv_accept_cb cb) {
  Transport* t = impl(outer);
  t->accept_cb = cb;
  int rv;
  {
    std::lock_guard lock(address_parser_mutex);
    rv = t->inner.listen(&t->inner, on_accepted);
  }
  if (rv != 0) std::memcpy(outer->errmsg, t->inner.errmsg, sizeof outer->errmsg);
  return rv;
}

int transport_connect(struct raft_uv_transport* outer, struct raft_uv_connect* req, raft_id id,
                      const char* address, raft_uv_connect_cb cb) {
  Transport* t = impl(outer);
  req->cb = cb;
  auto* connecting = new Connecting;
  connecting->outer = req;
  connecting->transport = t;
  connecting->inner.data = connecting;
  int rv;
  {
    std::lock_guard lock(address_parser_mutex);
    rv = t->inner.connect(&t->inner, &connecting->inner, id, address, on_connected);
  }
  if (rv != 0) {
    std::memcpy(outer->errmsg, t->inner.errmsg, sizeof outer->errmsg);
    delete connecting;
  }
  return rv;
}

void transport_close(struct raft_uv_transport* outer, raft_uv_transport_close_cb cb) {
  Transport* t = impl(outer);
  t->closing = true;
  t->close_cb = cb;
  // Copied: an abort may end an exchange (and erase it) before we move on.
  std::vector<Exchange*> exchanges(t->exchanges.begin(), t->exchanges.end());
  for (Exchange* exchange : exchanges)
    abort_exchange(exchange, RAFT_CANCELED);
  t->inner.close(&t->inner, on_inner_closed);
}

}  // namespace

std::string peer_mac(const std::string& secret, const unsigned char* nonce, raft_id id,
                     const std::string& address, const std::string& incarnation) {
  std::string message(kMacLabel);
  message.append(reinterpret_cast<const char*>(nonce), kPeerNonceSize);
  for (int shift = 56; shift >= 0; shift -= 8)
    message.push_back(static_cast<char>((id >> shift) & 0xff));
  message += address;
  message += incarnation;  // of a fixed length, last: no two fields read alike
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &length);
  return std::string(reinterpret_cast<char*>(mac), length);
}

int authenticated_transport_init(struct raft_uv_transport* transport, uv_loop_t* loop,
                                 std::string secret, std::string incarnation, AdmitPeer admit) {
  auto* t = new Transport;
  t->outer = transport;
  t->loop = loop;
  t->secret = std::move(secret);
  t->incarnation = std::move(incarnation);
  t->admit = std::move(admit);
  t->inner.data = t;
  int rv = raft_uv_tcp_init(&t->inner, loop);
  if (rv != 0) {
    std::memcpy(transport->errmsg, t->inner.errmsg, sizeof transport->errmsg);
    delete t;
    return rv;
  }
  transport->impl = t;
  transport->init = transport_init;
  transport->listen = transport_listen;
  transport->connect = transport_connect;
  transport->close = transport_close;
  return 0;
}

void authenticated_transport_free(struct raft_uv_transport* transport) {
  Transport* t = impl(transport);
  raft_uv_tcp_close(&t->inner);
  delete t;
  transport->impl = nullptr;
}

}  // namespace lockcached::consensus
