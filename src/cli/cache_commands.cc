// get, set, delete, lock, unlock, unlock_all, keys, stats, cluster.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <iterator>

#include "cache_client.h"
#include "commands.h"
#include "failure.h"
#include "supervise.h"

namespace lockcached::cli {
namespace {

using Args = std::vector<std::string>;

struct Shape {
  std::string_view command;
  size_t min_args;
  size_t max_args;
  std::string_view usage;
};

constexpr Shape kShapes[] = {
    {"get", 1, SIZE_MAX, "get KEY..."},
    {"set", 2, 2, "set KEY VALUE [--flags F] [--exptime E]   (VALUE - reads standard input)"},
    {"delete", 1, 1, "delete KEY"},
    {"lock", 1, 1, "lock KEY [-- COMMAND [ARGS...]]"},
    {"unlock", 1, 1, "unlock KEY"},
    {"unlock_all", 0, 0, "unlock_all"},
    {"keys", 0, 1, "keys [PREFIX]"},
    {"stats", 0, SIZE_MAX, "stats [GROUP]"},
    {"cluster", 1, 1, "cluster status|leads"},
};

// Before connecting, so that a usage error never waits for a server.
void check_shape(const Options& options) {
  const Args& args = options.args;
  for (const Shape& shape : kShapes) {
    if (shape.command != args[0]) continue;
    size_t given = args.size() - 1;
    if (given < shape.min_args || given > shape.max_args) {
      throw UsageError("usage: lockcached-cli [OPTIONS] " + std::string(shape.usage));
    }
  }
  if (args[0] == "cluster" && args[1] != "status" && args[1] != "leads") {
    throw UsageError("usage: lockcached-cli [OPTIONS] cluster status|leads");
  }
  // A key the protocol cannot carry is a usage error too.
  bool keyed = args[0] != "stats" && args[0] != "unlock_all" && args[0] != "keys" &&
               args[0] != "cluster";
  size_t last_key = args[0] == "get" ? args.size() - 1 : std::min<size_t>(1, args.size() - 1);
  for (size_t i = 1; keyed && i <= last_key; ++i)
    options.binary ? require_binary_key(args[i]) : require_text_key(args[i]);
  if (options.program && args[0] != "lock") {
    throw UsageError("only run and lock take a command after \"--\"");
  }
}

// The exit status for a "no" from the server, with a message naming the key.
int refused(const std::string& command, const std::string& key, Answer answer) {
  std::cerr << "lockcached-cli: " << command << " " << key << ": " << describe(answer) << "\n";
  return kExitNo;
}

std::string read_stdin() {
  std::string value{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  if (std::cin.bad()) throw Failure(EX_IOERR, "cannot read the value from standard input");
  return value;
}

int get(CacheClient& client, const Args& args) {
  Args keys(args.begin() + 1, args.end());
  std::vector<std::optional<Item>> items = client.get(keys);
  int status = EX_OK;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!items[i]) {
      status = refused("get", keys[i], Answer::kNotFound);
      continue;
    }
    std::cout.write(items[i]->value.data(), static_cast<std::streamsize>(items[i]->value.size()));
    std::cout << '\n';
  }
  return status;
}

int set(CacheClient& client, const Options& options, const std::string& value) {
  const std::string& key = options.args[1];
  Answer answer = client.set(key, value, options.flags, options.exptime);
  return answer == Answer::kOk ? EX_OK : refused("set", key, answer);
}

// A cache lock held while a command runs.
class CacheLockHolder : public LockHolder {
 public:
  CacheLockHolder(CacheClient& client, std::string key) : client_(client), key_(std::move(key)) {}
  Connection& connection() override { return client_.connection(); }
  void ping() override { client_.ping(); }
  bool release() override { return client_.unlock(key_) == Answer::kOk; }
  std::string what() const override { return "the cache lock on \"" + key_ + "\""; }

 private:
  CacheClient& client_;
  std::string key_;
};

int lock(CacheClient& client, const Options& options) {
  const std::string& key = options.args[1];
  Answer answer = client.lock(key);
  if (answer == Answer::kLocked) {
    throw Failure(EX_TEMPFAIL, "lock " + key + ": locked by another connection");
  }
  if (answer != Answer::kOk) return refused("lock", key, answer);
  // Without a command the lock ends with this process, a moment from now.
  if (!options.program) return EX_OK;
  CacheLockHolder holder(client, key);
  return run_holding_lock(*options.program, holder, {options.ping, options.kill_on_loss});
}

int keyed(CacheClient& client, const Args& args) {
  const std::string& key = args[1];
  Answer answer = args[0] == "delete" ? client.remove(key) : client.unlock(key);
  return answer == Answer::kOk ? EX_OK : refused(args[0], key, answer);
}

int keys(CacheClient& client, const Args& args) {
  client.keys(args.size() > 1 ? args[1] : "", [](std::string_view key) {
    std::cout.write(key.data(), static_cast<std::streamsize>(key.size()));
    std::cout << '\n';
  });
  return EX_OK;
}

int stats(CacheClient& client, const Args& args) {
  std::string group;
  for (size_t i = 1; i < args.size(); ++i)
    group += (i > 1 ? " " : "") + args[i];
  client.stats(
      group, [](std::string_view name, std::string_view value) {
        std::cout << name << ' ' << value << '\n';
      },
      [](std::string_view line) { std::cout << line << '\n'; });
  return EX_OK;
}

// `cluster status`: the node's view of its Raft cluster (`stats cluster`);
// `cluster leads`: exit 0 when the node leads, 1 when it does not (a
// keepalived track script's question), nothing printed.
int cluster(CacheClient& client, const Args& args) {
  bool print = args[1] == "status";
  std::string role;
  client.stats(
      "cluster",
      [&](std::string_view name, std::string_view value) {
        if (name == "role") role = value;
        if (print) std::cout << name << ' ' << value << '\n';
      },
      {});
  if (print) return EX_OK;
  return role == "leader" ? EX_OK : kExitNo;
}

}  // namespace

int run_cache_command(const Options& options) {
  const Args& args = options.args;
  const std::string& command = args[0];
  check_shape(options);
  // Read before connecting, so that no connection idles while a pipe fills.
  std::string value = command == "set" ? (args[2] == "-" ? read_stdin() : args[2]) : "";
  std::unique_ptr<CacheClient> client =
      options.binary
          ? connect_binary(options.host, options.port, options.tls, options.timeout, options.login)
          : connect_text(options.host, options.port, options.tls, options.timeout, options.login);
  int status = EX_OK;
  if (command == "get") {
    status = get(*client, args);
  } else if (command == "set") {
    status = set(*client, options, value);
  } else if (command == "delete" || command == "unlock") {
    status = keyed(*client, args);
  } else if (command == "lock") {
    status = lock(*client, options);
  } else if (command == "unlock_all") {
    client->unlock_all();
  } else if (command == "keys") {
    status = keys(*client, args);
  } else if (command == "cluster") {
    status = cluster(*client, args);
  } else {
    status = stats(*client, args);
  }
  std::cout.flush();
  if (!std::cout) throw Failure(EX_IOERR, "cannot write to standard output");
  return status;
}

}  // namespace lockcached::cli
