#include "lock_service_client.h"

#include <charconv>
#include <chrono>
#include <optional>
#include <thread>
#include <tuple>
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

constexpr std::string_view kNotLeader = "503 not leader: ";

// What `ask` answers; or, when the node asked closed the connection before
// answering or could not be reached, an election's 503, with the reason in
// `failed`. A leader may be elected while this client asks: a member then
// closes its lock-service connections, one just opened too. Or the leader
// named a moment ago stopped leading since, and closed them as it did
// (test/ha/raft_faults.py caught a `cluster transfer` so), or its machine
// is gone. Nothing was answered: a cluster change is always answered once
// made, and a lock granted just then ends with its session. So the caller
// asks again, as in an election.
template <typename Ask>
std::string answer_or_election(Ask ask, std::optional<Failure>& failed) {
  try {
    std::string reply = ask();
    failed.reset();
    return reply;
  } catch (const Failure& failure) {
    if (failure.exit_code() != EX_UNAVAILABLE) throw;
    failed = failure;
    return std::string(kNotLeader) + "election";
  }
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
    : timeout_(timeout),
      tls_(options_for_nodes_named(tls, host)),
      login_(login),
      given_host_(host),
      given_port_(port) {
  connect(host, port);
}

void LockServiceClient::connect(const std::string& host, uint16_t port) {
  connection_.reset();
  connection_ = std::make_unique<Connection>(host, port, tls_, deadline_after(timeout_));
  host_ = host;
  port_ = port;
  if (login_) log_in(*login_);
}

std::pair<std::string, uint16_t> LockServiceClient::fallback_for(const std::string& host,
                                                                 uint16_t port) const {
  if (!naming_host_.empty() && (naming_host_ != host || naming_port_ != port)) {
    return {naming_host_, naming_port_};
  }
  if (given_host_ != host || given_port_ != port) return {given_host_, given_port_};
  return {host, port};
}

std::string LockServiceClient::change(const std::string& request, double extra_wait) {
  constexpr auto kElectionPause = std::chrono::milliseconds(100);
  // The node asked last: `reply` is its answer, or stands for its failure.
  std::string asked_host = host_;
  uint16_t asked_port = port_;
  std::optional<Failure> failed;  // why the last node asked did not answer
  std::optional<Failure> named_failed;  // why the last leader named did not
  Deadline give_up = deadline_after(timeout_);
  // A node that took the request and went only after holding it longer
  // than --timeout (a failover during a wait: its leader closed its
  // connections) was not down: --timeout for asking again counts from then.
  auto ask = [&](auto how) {
    auto asked = Clock::now();
    std::string answer = answer_or_election(how, failed);
    if (failed && Clock::now() - asked > std::chrono::duration<double>(timeout_)) {
      give_up = deadline_after(timeout_);
    }
    return answer;
  };
  std::string reply = ask([&] { return call(request, extra_wait); });
  while (reply.starts_with(kNotLeader) && !holds_ && Clock::now() < give_up) {
    std::string_view where = std::string_view(reply).substr(kNotLeader.size());
    size_t colon = where.rfind(':');
    uint16_t port = 0;
    std::string host;
    bool election = where == "election";
    if (election && !failed) {
      // No leader yet: ask the same node again, on a new connection, since
      // a member closes its lock-service connections once a leader is
      // known.
      std::this_thread::sleep_for(kElectionPause);
      host = asked_host;
      port = asked_port;
    } else if (election) {
      // The node asked did not answer: a leader that stopped leading or
      // died (during a wait too), or a node that just learnt of a leader.
      // The node that named the leader, or the one the user named, knows
      // who leads next; a dead leader never would.
      std::this_thread::sleep_for(kElectionPause);
      std::tie(host, port) = fallback_for(asked_host, asked_port);
    } else if (colon != std::string_view::npos && parse_number(where.substr(colon + 1), &port)) {
      host = where.substr(0, colon);
      naming_host_ = asked_host;
      naming_port_ = asked_port;
    } else {
      break;
    }
    bool named = !election;
    reply = ask([&] { return ask_anew(host, port, request, extra_wait); });
    asked_host = host;
    asked_port = port;
    if (failed && named) named_failed = failed;
  }
  // The timeout passed: the last node's reason; or, when a node's last word
  // was a leader that could not be asked, that leader's (a refused
  // connection, a certificate that does not verify).
  if (failed) throw *failed;
  if (named_failed && reply.starts_with(kNotLeader) && !reply.ends_with("election")) {
    throw *named_failed;
  }
  return reply;
}

// `request` on a new connection to host:port, with this client's grace set
// there first; a refused grace is the answer.
std::string LockServiceClient::ask_anew(const std::string& host, uint16_t port,
                                        const std::string& request, double extra_wait) {
  connect(host, port);
  if (grace_ms_) {
    std::string grace = call("set_timeout " + std::to_string(*grace_ms_));
    if (!grace.starts_with("200 ")) return grace;
  }
  return call(request, extra_wait);
}

std::string LockServiceClient::change_members(const std::string& request) {
  // A node added catches up before it votes: allow the cluster as long
  // again as a reply.
  return change(request, timeout_);
}

// A server without --auth_file answers 400 and serves without a login.
// Messages show the request without its password.
void LockServiceClient::log_in(const Login& login) {
  std::string reply = call("auth " + login.user + " " + login.password);
  if (reply.starts_with("200 ") || reply == "400 Authentication not enabled") return;
  if (reply.starts_with("401")) refuse_login(login, connection_->peer(), reply);
  unexpected("auth " + login.user + " (password hidden)", reply);
}

std::string LockServiceClient::call(const std::string& request, double extra_wait) {
  connection_->send(request + "\r\n", deadline_after(timeout_));
  return connection_->read_line(deadline_after(timeout_ + extra_wait));
}

void LockServiceClient::unexpected(std::string_view request, const std::string& reply) const {
  throw Failure(EX_UNAVAILABLE, "lock service at " + connection_->peer() + " answered \"" + reply +
                                    "\" to \"" + std::string(request) + "\"");
}

void LockServiceClient::set_grace_ms(uint64_t millis) {
  std::string request = "set_timeout " + std::to_string(millis);
  std::string reply = change(request);
  if (!reply.starts_with("200 ")) unexpected(request, reply);
  grace_ms_ = millis;
}

std::optional<uint64_t> LockServiceClient::lock(const std::string& name, double wait_seconds) {
  double left = wait_seconds;
  while (true) {
    double wait = std::min(left, kMaxWaitSeconds);
    std::string request = "lock " + name;
    if (wait > 0) request += " " + format_seconds(wait);
    std::string reply = change(request, wait);
    uint64_t token = 0;
    if (reply.starts_with("200 Acquired ") && parse_number(reply.substr(13), &token)) {
      holds_ = true;
      return token;
    }
    // A limit (docs/lock-service.md): the server said no, it is not down.
    if (reply.starts_with("429 ")) {
      throw Failure(kExitNo, "lock service at " + connection_->peer() + " refused \"" + request +
                                 "\": " + reply.substr(4));
    }
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
  for (reply = connection_->read_line(deadline_after(timeout_)); reply != "END";
       reply = connection_->read_line(deadline_after(timeout_))) {
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
