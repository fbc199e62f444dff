// The cache commands in memcached's binary protocol, with lockcached's
// locking opcodes (docs/locking.md).
#include <cstdint>
#include <cstdio>
#include <limits>

#include "cache_client.h"
#include "failure.h"

namespace lockcached::cli {
namespace {

namespace op {
constexpr uint8_t kGet = 0x00, kSet = 0x01, kDelete = 0x04, kNoop = 0x0a, kStat = 0x10,
                  kSaslAuth = 0x21, kLock = 0x40, kUnlock = 0x42, kUnlockAll = 0x44, kKeys = 0x50;
}  // namespace op

namespace status {
constexpr uint16_t kSuccess = 0x00, kNotFound = 0x01, kExists = 0x02, kNotStored = 0x05,
                   kLocked = 0x10, kNotLocked = 0x11, kAuthError = 0x20, kUnknownCommand = 0x81;
}  // namespace status

constexpr uint8_t kRequestMagic = 0x80;
constexpr uint8_t kResponseMagic = 0x81;
constexpr size_t kHeaderSize = 24;
constexpr size_t kMaxKeyLength = 250;

void put_be(std::string& out, uint64_t value, int bytes) {
  for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8)
    out += static_cast<char>((value >> shift) & 0xff);
}

uint64_t get_be(std::string_view bytes, size_t at, int n) {
  uint64_t value = 0;
  for (int i = 0; i < n; ++i)
    value = value << 8 | static_cast<uint8_t>(bytes[at + i]);
  return value;
}

struct Response {
  uint8_t opcode = 0;
  uint16_t status = 0;
  uint32_t opaque = 0;
  std::string extras;
  std::string key;
  std::string value;
};

class BinaryCacheClient : public CacheClient {
 public:
  BinaryCacheClient(const std::string& host, uint16_t port, const TlsOptions& tls, double timeout,
                    const std::optional<Login>& login)
      : timeout_(timeout), connection_(host, port, tls, deadline_after(timeout)) {
    if (login) log_in(*login);
  }

  std::vector<std::optional<Item>> get(const std::vector<std::string>& keys) override {
    std::vector<std::optional<Item>> items;
    for (const std::string& key : keys) {
      require_binary_key(key);
      Response r = call(op::kGet, key);
      if (r.status == status::kNotFound) {
        items.push_back(std::nullopt);
        continue;
      }
      if (r.status != status::kSuccess || r.extras.size() != 4) fail("get", r);
      items.push_back(Item{std::move(r.value), static_cast<uint32_t>(get_be(r.extras, 0, 4))});
    }
    return items;
  }

  Answer set(const std::string& key, std::string_view value, uint32_t flags,
             int64_t exptime) override {
    require_binary_key(key);
    if (exptime < 0 || exptime > std::numeric_limits<uint32_t>::max()) {
      throw UsageError("the binary protocol takes an exptime of 0 to 4294967295");
    }
    std::string extras;
    put_be(extras, flags, 4);
    put_be(extras, static_cast<uint64_t>(exptime), 4);
    return answer(call(op::kSet, key, extras, value), "set");
  }

  Answer remove(const std::string& key) override {
    require_binary_key(key);
    return answer(call(op::kDelete, key), "delete");
  }

  Answer lock(const std::string& key) override {
    require_binary_key(key);
    return answer(call(op::kLock, key), "lock");
  }

  Answer unlock(const std::string& key) override {
    require_binary_key(key);
    return answer(call(op::kUnlock, key), "unlock");
  }

  void unlock_all() override {
    Response r = call(op::kUnlockAll);
    if (r.status != status::kSuccess) fail("unlock_all", r);
  }

  void keys(const std::string& prefix, const KeyCallback& each) override {
    if (prefix.size() > kMaxKeyLength) throw UsageError("a prefix has at most 250 bytes");
    uint32_t opaque = send(op::kKeys, prefix);
    while (true) {
      Response r = receive(op::kKeys, opaque);
      if (r.status != status::kSuccess) fail("keys", r);
      if (r.key.empty()) return;
      each(valid_text_key(r.key) ? r.key : base64_encode(r.key) + " b");
    }
  }

  void stats(const std::string& group, const StatCallback& each, const LineCallback&) override {
    if (group.size() > kMaxKeyLength) throw UsageError("a stats group has at most 250 bytes");
    uint32_t opaque = send(op::kStat, group);
    while (true) {
      Response r = receive(op::kStat, opaque);
      if (r.status != status::kSuccess) fail("stats", r);
      if (r.key.empty()) return;
      each(r.key, r.value);
    }
  }

  void ping() override {
    Response r = call(op::kNoop);
    if (r.status != status::kSuccess) fail("noop", r);
  }

  Connection& connection() override { return connection_; }

 private:
  uint32_t send(uint8_t opcode, std::string_view key = {}, std::string_view extras = {},
                std::string_view value = {}) {
    uint32_t opaque = next_opaque_++;
    std::string packet;
    packet += static_cast<char>(kRequestMagic);
    packet += static_cast<char>(opcode);
    put_be(packet, key.size(), 2);
    put_be(packet, extras.size(), 1);
    put_be(packet, 0, 3);  // data type, vbucket
    put_be(packet, extras.size() + key.size() + value.size(), 4);
    put_be(packet, opaque, 4);
    put_be(packet, 0, 8);  // CAS
    packet.append(extras).append(key).append(value);
    connection_.send(packet, deadline_after(timeout_));
    return opaque;
  }

  // The reply to (opcode, opaque); a reply to anything else ends the program.
  Response receive(uint8_t opcode, uint32_t opaque) {
    Deadline deadline = deadline_after(timeout_);
    std::string header = connection_.read_exactly(kHeaderSize, deadline);
    Response r;
    r.opcode = static_cast<uint8_t>(header[1]);
    size_t key_length = get_be(header, 2, 2);
    size_t extras_length = get_be(header, 4, 1);
    r.status = static_cast<uint16_t>(get_be(header, 6, 2));
    size_t body_length = get_be(header, 8, 4);
    r.opaque = static_cast<uint32_t>(get_be(header, 12, 4));
    if (static_cast<uint8_t>(header[0]) != kResponseMagic || r.opcode != opcode ||
        r.opaque != opaque || key_length + extras_length > body_length) {
      throw Failure(EX_UNAVAILABLE, "malformed binary reply from " + connection_.peer());
    }
    std::string body = connection_.read_exactly(body_length, deadline);
    r.extras = body.substr(0, extras_length);
    r.key = body.substr(extras_length, key_length);
    r.value = body.substr(extras_length + key_length);
    return r;
  }

  Response call(uint8_t opcode, std::string_view key = {}, std::string_view extras = {},
                std::string_view value = {}) {
    return receive(opcode, send(opcode, key, extras, value));
  }

  // SASL PLAIN (RFC 4616): "\0USER\0PASSWORD". A server without
  // authentication does not know the opcode and serves without a login.
  void log_in(const Login& login) {
    std::string message = '\0' + login.user + '\0' + login.password;
    Response r = call(op::kSaslAuth, "PLAIN", {}, message);
    if (r.status == status::kSuccess || r.status == status::kUnknownCommand) return;
    if (r.status == status::kAuthError) refuse_login(login, connection_.peer(), r.value);
    fail("sasl_auth", r);
  }

  Answer answer(const Response& r, std::string_view command) {
    switch (r.status) {
      case status::kSuccess:
        return Answer::kOk;
      case status::kNotFound:
        return Answer::kNotFound;
      case status::kExists:
        return Answer::kExists;
      case status::kNotStored:
        return Answer::kNotStored;
      case status::kLocked:
        return Answer::kLocked;
      case status::kNotLocked:
        return Answer::kNotLocked;
    }
    fail(command, r);
  }

  // An error reply carries memcached's message as its value. A refusal of
  // this request (too large, invalid, unknown command: the text protocol's
  // CLIENT_ERROR and ERROR) is a "no"; out of memory and anything else mean
  // server trouble.
  [[noreturn]] void fail(std::string_view command, const Response& r) {
    char code[8];
    std::snprintf(code, sizeof code, "0x%02x", r.status);
    std::string what = std::string(command) + ": the server answered status " + code;
    if (!r.value.empty()) what += " (" + r.value + ")";
    bool refused = (r.status >= 0x03 && r.status <= 0x06) || r.status == 0x81;
    throw Failure(refused ? kExitNo : EX_UNAVAILABLE, what);
  }

  double timeout_;
  Connection connection_;
  uint32_t next_opaque_ = 1;
};

}  // namespace

std::unique_ptr<CacheClient> connect_binary(const std::string& host, uint16_t port,
                                            const TlsOptions& tls, double timeout,
                                            const std::optional<Login>& login) {
  return std::make_unique<BinaryCacheClient>(host, port, tls, timeout, login);
}

}  // namespace lockcached::cli
