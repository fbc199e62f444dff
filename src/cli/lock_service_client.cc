#include "lock_service_client.h"

#include <charconv>
#include <vector>

#include "failure.h"

namespace lockcached::cli {
namespace {

// The longest wait the server takes in one request.
constexpr double kMaxWaitSeconds = 365.0 * 24 * 3600;

std::string format_seconds(double seconds) {
  char text[64];
  auto [end, error] = std::to_chars(text, text + sizeof text, seconds);
  return error == std::errc() ? std::string(text, end) : std::to_string(seconds);
}

template <typename Number>
bool parse_number(std::string_view word, Number* number) {
  auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), *number);
  return error == std::errc() && end == word.data() + word.size();
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> words;
  for (size_t start = 0; start <= line.size();) {
    size_t space = line.find(' ', start);
    if (space == std::string_view::npos) space = line.size();
    words.push_back(line.substr(start, space - start));
    start = space + 1;
  }
  return words;
}

}  // namespace

bool valid_lock_name(std::string_view name) {
  if (name.empty() || name.size() > 250) return false;
  for (unsigned char c : name) {
    if (c <= 0x20 || c == 0x7f) return false;
  }
  return true;
}

LockServiceClient::LockServiceClient(const std::string& host, uint16_t port, const TlsOptions& tls,
                                     double timeout, const std::optional<Login>& login)
    : timeout_(timeout), connection_(host, port, tls, deadline_after(timeout)) {
  if (login) log_in(*login);
}

// A server without --auth_file answers 400 and serves without a login.
// Messages show the request without its password.
void LockServiceClient::log_in(const Login& login) {
  std::string reply = call("auth " + login.user + " " + login.password);
  if (reply.starts_with("200 ") || reply == "400 Authentication not enabled") return;
  if (reply.starts_with("401")) refuse_login(login, connection_.peer(), reply);
  unexpected("auth " + login.user + " (password hidden)", reply);
}

std::string LockServiceClient::call(const std::string& request, double extra_wait) {
  connection_.send(request + "\r\n", deadline_after(timeout_));
  return connection_.read_line(deadline_after(timeout_ + extra_wait));
}

void LockServiceClient::unexpected(std::string_view request, const std::string& reply) const {
  throw Failure(EX_UNAVAILABLE, "lock service at " + connection_.peer() + " answered \"" + reply +
                                    "\" to \"" + std::string(request) + "\"");
}

void LockServiceClient::set_grace_ms(uint64_t millis) {
  std::string request = "set_timeout " + std::to_string(millis);
  std::string reply = call(request);
  if (!reply.starts_with("200 ")) unexpected(request, reply);
}

std::optional<uint64_t> LockServiceClient::lock(const std::string& name, double wait_seconds) {
  double left = wait_seconds;
  while (true) {
    double wait = std::min(left, kMaxWaitSeconds);
    std::string request = "lock " + name;
    if (wait > 0) request += " " + format_seconds(wait);
    std::string reply = call(request, wait);
    uint64_t token = 0;
    if (reply.starts_with("200 Acquired ") && parse_number(reply.substr(13), &token)) return token;
    if (!reply.starts_with("409")) unexpected(request, reply);
    // A wait longer than the server takes in one request goes on in the next.
    left -= wait;
    if (left <= 0) return std::nullopt;
  }
}

bool LockServiceClient::unlock(const std::string& name) {
  std::string request = "unlock " + name;
  std::string reply = call(request);
  if (reply.starts_with("200 ")) return true;
  if (reply.starts_with("403")) return false;
  unexpected(request, reply);
}

void LockServiceClient::list(const std::string& prefix,
                             const std::function<void(const LockInfo&)>& each) {
  std::string request = prefix.empty() ? "stats locks" : "stats locks " + prefix;
  std::string reply = call(request);
  if (reply != "200 LOCKS") unexpected(request, reply);
  for (reply = connection_.read_line(deadline_after(timeout_)); reply != "END";
       reply = connection_.read_line(deadline_after(timeout_))) {
    std::vector<std::string_view> words = split(reply);
    LockInfo info;
    // A seventh field, the holder's address, came later: both forms are read.
    if ((words.size() != 6 && words.size() != 7) || words[0] != "LOCK" ||
        !parse_number(words[3], &info.held_ms) || !parse_number(words[4], &info.waiters) ||
        !parse_number(words[5], &info.token)) {
      unexpected(request, reply);
    }
    info.name = words[1];
    info.session = words[2];
    if (words.size() == 7) info.client = words[6];
    each(info);
  }
}

void LockServiceClient::ping() {
  std::string reply = call("conn_id");
  if (!reply.starts_with("200 ")) unexpected("conn_id", reply);
}

void LockServiceClient::quit() {
  std::string reply = call("quit");
  if (!reply.starts_with("200 ")) unexpected("quit", reply);
}

}  // namespace lockcached::cli
