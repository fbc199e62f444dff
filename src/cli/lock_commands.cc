// `run` (a distributed flock) and `locks`, on the named-lock service.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "failure.h"
#include "lock_service_client.h"
#include "supervise.h"

namespace lockcached::cli {
namespace {

constexpr const char* kTokenVariable = "LOCKCACHED_FENCING_TOKEN";

// A named lock held while the command runs.
class ServiceLockHolder : public LockHolder {
 public:
  ServiceLockHolder(LockServiceClient& client, std::string name, uint64_t token)
      : client_(client), name_(std::move(name)), token_(token) {}
  Connection& connection() override { return client_.connection(); }
  void ping() override { client_.ping(); }
  bool release() override {
    bool held = client_.unlock(name_);
    client_.quit();
    return held;
  }
  std::string what() const override {
    return "lock \"" + name_ + "\" (fencing token " + std::to_string(token_) + ")";
  }

 private:
  LockServiceClient& client_;
  std::string name_;
  uint64_t token_;
};

std::string describe_wait(double wait) {
  if (wait == 0) return "without waiting (--wait 0)";
  std::ostringstream text;
  text << "after waiting " << wait << " s";
  return text.str();
}

// Who holds `name`, for the message of a lock not had; empty if unknown.
std::string describe_holder(LockServiceClient& client, const std::string& name) {
  std::string text;
  try {
    client.list(name, [&](const LockInfo& lock) {
      if (lock.name != name) return;
      std::ostringstream line;
      line << " (held by session " << lock.session;
      if (!lock.client.empty()) {
        line << (lock.client == "detached" ? ", detached," : " from " + lock.client);
      }
      line << " for " << static_cast<double>(lock.held_ms) / 1000 << " s, " << lock.waiters
           << " waiting)";
      text = line.str();
    });
  } catch (const Failure&) {
    // Only decoration: the lock was not had either way.
  }
  return text;
}

void check_run_args(const Options& options) {
  if (options.args.size() != 2 || !options.program) {
    throw UsageError(
        "usage: lockcached-cli run NAME [--wait SECONDS] [--lock-port P] [--host H] -- COMMAND "
        "[ARGS...]");
  }
  if (!valid_lock_name(options.args[1])) {
    throw UsageError("a lock name has 1 to 250 bytes and no spaces or control characters: \"" +
                     options.args[1] + "\"");
  }
}

}  // namespace

int run_locked(const Options& options) {
  check_run_args(options);
  const std::string& name = options.args[1];
  LockServiceClient client(options.host, options.lock_port, options.tls, options.timeout,
                           options.login);
  // No grace period: if this process dies, its lock must go at once, not
  // 30 s later. Nothing here would resume the session anyway.
  client.set_grace_ms(0);
  std::optional<uint64_t> token = client.lock(name, options.wait);
  if (!token) {
    throw Failure(EX_TEMPFAIL, "lock \"" + name + "\" is busy" + describe_holder(client, name) +
                                   "; not acquired " + describe_wait(options.wait));
  }
  setenv(kTokenVariable, std::to_string(*token).c_str(), 1);
  ServiceLockHolder holder(client, name, *token);
  return run_holding_lock(*options.program, holder, {options.ping, options.kill_on_loss});
}

int list_locks(const Options& options) {
  if (options.args.size() > 2 || options.program) {
    throw UsageError("usage: lockcached-cli locks [PREFIX] [--lock-port P] [--host H]");
  }
  LockServiceClient client(options.host, options.lock_port, options.tls, options.timeout,
                           options.login);
  client.list(options.args.size() > 1 ? options.args[1] : "", [](const LockInfo& lock) {
    std::cout << lock.name << ' ' << lock.session << ' ' << lock.held_ms << ' ' << lock.waiters
              << ' ' << lock.token;
    if (!lock.client.empty()) std::cout << ' ' << lock.client;
    std::cout << '\n';
  });
  std::cout.flush();
  if (!std::cout) throw Failure(EX_IOERR, "cannot write to standard output");
  return EX_OK;
}

int change_members(const Options& options) {
  const std::vector<std::string>& args = options.args;
  bool shaped = (args[1] == "add" && args.size() == 4) ||
                (args[1] == "remove" && args.size() == 3) ||
                (args[1] == "transfer" && args.size() <= 3);
  if (!shaped || options.program) {
    throw UsageError("usage: lockcached-cli cluster add ID IPV4:PORT | cluster remove ID | "
                     "cluster transfer [ID] [--lock-port P] [--host H]");
  }
  LockServiceClient client(options.host, options.lock_port, options.tls, options.timeout,
                           options.login);
  std::string request;
  for (const std::string& word : args)
    request += (request.empty() ? "" : " ") + word;
  // No quit: after a transfer or a removal the server closes the connection.
  std::string reply = client.change_members(request);
  if (reply.starts_with("200 ")) return EX_OK;
  // 503: no leader within the timeout; else the cluster or the server said no.
  throw Failure(reply.starts_with("503 ") ? EX_UNAVAILABLE : kExitNo, request + ": " + reply);
}

}  // namespace lockcached::cli
