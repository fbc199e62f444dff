// The cache commands of lockcached-cli, spoken in either memcached protocol.
// Answers the server may legitimately give come back as Answer; anything
// else (an error reply, a malformed one, a lost connection) is a Failure.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "connection.h"
#include "login.h"

namespace lockcached::cli {

enum class Answer { kOk, kNotFound, kNotStored, kExists, kLocked, kNotLocked };
std::string_view describe(Answer answer);

struct Item {
  std::string value;
  uint32_t flags = 0;
};

using KeyCallback = std::function<void(std::string_view key)>;
using StatCallback = std::function<void(std::string_view name, std::string_view value)>;
// A reply line of a stats group that is not a statistic, whole (`stats
// detail dump`'s PREFIX lines, `stats cachedump`'s ITEM lines).
using LineCallback = std::function<void(std::string_view line)>;

class CacheClient {
 public:
  virtual ~CacheClient() = default;

  // One entry per key, in the order given; nullopt for a miss.
  virtual std::vector<std::optional<Item>> get(const std::vector<std::string>& keys) = 0;
  virtual Answer set(const std::string& key, std::string_view value, uint32_t flags,
                     int64_t exptime) = 0;
  virtual Answer remove(const std::string& key) = 0;
  virtual Answer lock(const std::string& key) = 0;
  virtual Answer unlock(const std::string& key) = 0;
  virtual void unlock_all() = 0;
  // Every key starting with `prefix`, as the text protocol lists it: a key
  // that is no valid text key comes base64-encoded and marked " b".
  virtual void keys(const std::string& prefix, const KeyCallback& each) = 0;
  // A group's statistics to `each`. Its other reply lines, where the text
  // protocol answers some (the binary protocol has none), go to `other`;
  // without one, such a line is an answer this client does not know.
  // `stats reset` and `stats detail on|off` call neither.
  virtual void stats(const std::string& group, const StatCallback& each,
                     const LineCallback& other) = 0;
  // A request with a reply and no effect: keeps the connection from counting
  // as idle and proves the server still answers.
  virtual void ping() = 0;

  virtual Connection& connection() = 0;
};

// `timeout` bounds connecting (the TLS handshake included) and each reply.
// With `login`, logs in before returning (a refusal: Failure with
// kExitLoginRefused); a server without authentication is used without.
std::unique_ptr<CacheClient> connect_text(const std::string& host, uint16_t port,
                                          const TlsOptions& tls, double timeout,
                                          const std::optional<Login>& login);
std::unique_ptr<CacheClient> connect_binary(const std::string& host, uint16_t port,
                                            const TlsOptions& tls, double timeout,
                                            const std::optional<Login>& login);

// Whether the text protocol can carry `key` as it is (1 to 250 bytes, no
// spaces or control characters).
bool valid_text_key(std::string_view key);
// Throw UsageError for a key the protocol cannot carry.
void require_text_key(const std::string& key);
void require_binary_key(const std::string& key);
std::string base64_encode(std::string_view bytes);

}  // namespace lockcached::cli
