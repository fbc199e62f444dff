// The cache commands in memcached's text protocol.
#include <charconv>
#include <map>

#include "cache_client.h"
#include "failure.h"

namespace lockcached::cli {
namespace {

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> words;
  size_t start = 0;
  while (start < line.size()) {
    size_t space = line.find(' ', start);
    if (space == std::string_view::npos) space = line.size();
    if (space > start) words.push_back(line.substr(start, space - start));
    start = space + 1;
  }
  return words;
}

template <typename Number>
bool parse_number(std::string_view word, Number* number) {
  auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), *number);
  return error == std::errc() && end == word.data() + word.size();
}

class TextCacheClient : public CacheClient {
 public:
  TextCacheClient(const std::string& host, uint16_t port, const TlsOptions& tls, double timeout,
                  const std::optional<Login>& login)
      : timeout_(timeout), connection_(host, port, tls, deadline_after(timeout)) {
    if (login) log_in(*login);
  }

  std::vector<std::optional<Item>> get(const std::vector<std::string>& keys) override {
    std::string request = "get";
    for (const std::string& key : keys) {
      require_text_key(key);
      request += " " + key;
    }
    std::map<std::string, Item, std::less<>> found = read_values(call(request));
    std::vector<std::optional<Item>> items;
    for (const std::string& key : keys) {
      auto it = found.find(key);
      items.push_back(it == found.end() ? std::nullopt : std::optional<Item>(it->second));
    }
    return items;
  }

  Answer set(const std::string& key, std::string_view value, uint32_t flags,
             int64_t exptime) override {
    require_text_key(key);
    std::string request = "set " + key + " " + std::to_string(flags) + " " +
                          std::to_string(exptime) + " " + std::to_string(value.size()) + "\r\n";
    request += value;
    std::string reply = call(request);
    if (reply == "STORED") return Answer::kOk;
    return answer_or_fail("set", reply);
  }

  Answer remove(const std::string& key) override {
    require_text_key(key);
    std::string reply = call("delete " + key);
    if (reply == "DELETED") return Answer::kOk;
    return answer_or_fail("delete", reply);
  }

  Answer lock(const std::string& key) override {
    require_text_key(key);
    std::string reply = call("lock " + key);
    if (reply == "OK") return Answer::kOk;
    return answer_or_fail("lock", reply);
  }

  Answer unlock(const std::string& key) override {
    require_text_key(key);
    std::string reply = call("unlock " + key);
    if (reply == "OK") return Answer::kOk;
    if (reply.starts_with("CLIENT_ERROR object is not locked")) return Answer::kNotLocked;
    return answer_or_fail("unlock", reply);
  }

  void unlock_all() override {
    std::string reply = call("unlock_all");
    if (reply != "OK") answer_or_fail("unlock_all", reply);
  }

  void keys(const std::string& prefix, const KeyCallback& each) override {
    if (!prefix.empty()) require_text_key(prefix);
    std::string reply = call(prefix.empty() ? "keys" : "keys " + prefix);
    for (; reply != "END"; reply = read_line()) {
      if (!reply.starts_with("VALUE ")) answer_or_fail("keys", reply);
      each(std::string_view(reply).substr(6));
    }
  }

  // STAT lines up to END, as most groups answer; `stats reset` answers
  // RESET, `stats detail on|off` OK, and `stats detail dump` and `stats
  // cachedump` lines of their own (PREFIX, ITEM) up to END, as memcached's.
  void stats(const std::string& group, const StatCallback& each,
             const LineCallback& other) override {
    std::string request = group.empty() ? "stats" : "stats " + group;
    std::string reply = call(request);
    if (reply == "RESET" || reply == "OK") return;
    for (; reply != "END"; reply = read_line()) {
      size_t name_end = reply.find(' ', 5);
      if (reply.starts_with("STAT ") && name_end != std::string::npos) {
        std::string_view line = reply;
        each(line.substr(5, name_end - 5), line.substr(name_end + 1));
      } else if (other && !reply.starts_with("STAT ") && !is_error(reply)) {
        other(reply);
      } else {
        answer_or_fail(request, reply);
      }
    }
  }

  void ping() override {
    std::string reply = call("version");
    if (!reply.starts_with("VERSION ")) answer_or_fail("version", reply);
  }

  Connection& connection() override { return connection_; }

 private:
  // Sends `request` and "\r\n"; returns the first reply line.
  std::string call(const std::string& request) {
    connection_.send(request + "\r\n", deadline_after(timeout_));
    return read_line();
  }

  std::string read_line() { return connection_.read_line(deadline_after(timeout_)); }

  // memcached's -Y login: a set whose data is "USER PASSWORD". A server
  // without authentication would store that as an item, password and all,
  // so the set goes only to one that refuses `version` unauthenticated.
  void log_in(const Login& login) {
    std::string reply = call("version");
    if (reply.starts_with("VERSION ")) return;
    if (reply != "CLIENT_ERROR unauthenticated") answer_or_fail("version", reply);
    std::string token = login.user + " " + login.password;
    reply = call("set auth 0 0 " + std::to_string(token.size()) + "\r\n" + token);
    if (reply.starts_with("CLIENT_ERROR")) refuse_login(login, connection_.peer(), reply);
    if (reply != "STORED") {
      throw Failure(EX_UNAVAILABLE, "login: the server answered \"" + reply + "\"");
    }
  }

  // The VALUE blocks of a get reply whose first line is `line`, up to END.
  std::map<std::string, Item, std::less<>> read_values(std::string line) {
    std::map<std::string, Item, std::less<>> found;
    for (; line != "END"; line = read_line()) {
      std::vector<std::string_view> words = split(line);
      Item item;
      size_t length = 0;
      if (words.size() < 4 || words[0] != "VALUE" || !parse_number(words[2], &item.flags) ||
          !parse_number(words[3], &length)) {
        answer_or_fail("get", line);
      }
      std::string data = connection_.read_exactly(length + 2, deadline_after(timeout_));
      if (!data.ends_with("\r\n")) answer_or_fail("get", "a data block without \\r\\n");
      data.resize(length);
      item.value = std::move(data);
      found.emplace(std::string(words[1]), std::move(item));
    }
    return found;
  }

  // memcached's error replies: ERROR, CLIENT_ERROR ..., SERVER_ERROR ....
  static bool is_error(std::string_view reply) {
    return reply == "ERROR" || reply.starts_with("CLIENT_ERROR") ||
           reply.starts_with("SERVER_ERROR");
  }

  // The negative answers every storage and lock command may give; anything
  // else ends the program.
  Answer answer_or_fail(std::string_view command, const std::string& reply) {
    if (reply == "NOT_FOUND") return Answer::kNotFound;
    if (reply == "NOT_STORED") return Answer::kNotStored;
    if (reply == "EXISTS") return Answer::kExists;
    if (reply == "LOCKED") return Answer::kLocked;
    std::string what = std::string(command) + ": the server answered \"" + reply + "\"";
    // ERROR and CLIENT_ERROR refuse this request; anything else means the
    // server is in trouble or is not lockcached.
    if (reply == "ERROR" || reply.starts_with("CLIENT_ERROR")) throw Failure(kExitNo, what);
    throw Failure(EX_UNAVAILABLE, what);
  }

  double timeout_;
  Connection connection_;
};

}  // namespace

std::string_view describe(Answer answer) {
  switch (answer) {
    case Answer::kOk:
      return "ok";
    case Answer::kNotFound:
      return "not found";
    case Answer::kNotStored:
      return "not stored";
    case Answer::kExists:
      return "exists (CAS mismatch)";
    case Answer::kLocked:
      return "locked by another connection";
    case Answer::kNotLocked:
      return "not locked by this connection";
  }
  return "?";
}

void require_text_key(const std::string& key) {
  if (!valid_text_key(key)) {
    throw UsageError("key \"" + key +
                     "\" cannot be sent in the text protocol (1 to 250 bytes, no spaces or "
                     "control characters); --binary takes any key");
  }
}

void require_binary_key(const std::string& key) {
  if (key.empty() || key.size() > 250) {
    throw UsageError("a key must have 1 to 250 bytes: \"" + key + "\"");
  }
}

bool valid_text_key(std::string_view key) {
  if (key.empty() || key.size() > 250) return false;
  for (unsigned char c : key) {
    if (c <= 0x20 || c == 0x7f) return false;
  }
  return true;
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string text;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t group = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) group |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) group |= static_cast<uint8_t>(bytes[i + 2]);
    text += kAlphabet[(group >> 18) & 63];
    text += kAlphabet[(group >> 12) & 63];
    text += i + 1 < bytes.size() ? kAlphabet[(group >> 6) & 63] : '=';
    text += i + 2 < bytes.size() ? kAlphabet[group & 63] : '=';
  }
  return text;
}

std::unique_ptr<CacheClient> connect_text(const std::string& host, uint16_t port,
                                          const TlsOptions& tls, double timeout,
                                          const std::optional<Login>& login) {
  return std::make_unique<TextCacheClient>(host, port, tls, timeout, login);
}

}  // namespace lockcached::cli
