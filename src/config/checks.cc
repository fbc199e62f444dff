#include "lockcached/config/checks.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <glog/logging.h>

#include "lockcached/config/settings.h"
#include "lockcached/consensus/data_dir.h"
#include "lockcached/net/endpoint.h"
#include "lockcached/net/socket.h"
#include "lockcached/replication/virtual_ip.h"
#include "lockcached/server/process.h"

namespace lockcached::config {
namespace {

const FlagProblem kNoProblem;

bool is_problem(const FlagProblem& problem) {
  return !problem.flag.empty();
}

std::filesystem::path directory_of(const std::filesystem::path& path) {
  return path.parent_path().empty() ? "." : path.parent_path();
}

// A flag that means something only beside another: set alone, it means
// the operator believes the other is on.
FlagProblem set_without(std::initializer_list<const char*> names, const std::string& why) {
  for (const char* name : names) {
    if (!is_default(name)) return {name, "is set, but " + why};
  }
  return kNoProblem;
}

FlagProblem uring_sqpoll_needs_uring(const ParsedFlags&) {
  if (FLAGS_uring_sqpoll && FLAGS_io == "epoll") {
    return {"uring_sqpoll", "needs --io=uring or --io=auto"};
  }
  return kNoProblem;
}

// glog would carry on with every line lost ("COULD NOT CREATE A LOGGINGFILE").
FlagProblem log_dir_writable(const ParsedFlags&) {
  if (!FLAGS_logtostderr && !FLAGS_log_dir.empty() &&
      access(FLAGS_log_dir.c_str(), W_OK | X_OK) != 0) {
    return {"log_dir", "cannot write to " + FLAGS_log_dir + ": " + std::strerror(errno)};
  }
  return kNoProblem;
}

// memcached's rule (and exit status) for -m 2 -I 4m: such an item could
// never be stored.
FlagProblem item_fits_memory(const ParsedFlags&) {
  if (FLAGS_max_item_size > (int64_t{FLAGS_memory_limit_mb} << 20) / 2) {
    return {"max_item_size", "must be at most half of --memory_limit_mb (" +
                                 std::to_string(FLAGS_memory_limit_mb) + " MB)"};
  }
  return kNoProblem;
}

// memcached's rule: "'notls' option is valid only when SSL is enabled".
FlagProblem notls_needs_tls(const ParsedFlags& parsed) {
  const std::vector<server::ListenAddress>& addresses = parsed.listen;
  if (!FLAGS_tls && std::any_of(addresses.begin(), addresses.end(),
                                [](const auto& address) { return address.notls; })) {
    return {"listen", "notls: needs --tls (memcached's -Z); without it no port speaks TLS"};
  }
  return kNoProblem;
}

// With --virtual_ip, clients reach the master's cache on the virtual IP,
// which a replica does not hold yet: only a wildcard listener (of the
// address's family) answers there the moment keepalived moves it.
FlagProblem virtual_ip_listened(const ParsedFlags& parsed) {
  if (FLAGS_virtual_ip.empty()) return kNoProblem;
  if (!FLAGS_unix_socket.empty()) {
    return {"virtual_ip", "needs the cache on TCP, but --unix_socket serves it instead"};
  }
  const std::vector<server::ListenAddress>& addresses = parsed.listen;
  bool v6 = FLAGS_virtual_ip.find(':') != std::string::npos;
  std::string wildcard = v6 ? "::" : "0.0.0.0";
  if (std::any_of(addresses.begin(), addresses.end(),
                  [&](const auto& address) { return address.host == wildcard; })) {
    return kNoProblem;
  }
  return {"virtual_ip", FLAGS_virtual_ip + " is not covered by --listen=" + FLAGS_listen +
                            ": a replica must answer on it the moment it moves there (" +
                            (v6 ? "--listen=::" : "--listen=0.0.0.0") + ")"};
}

// A buffer must hold a few of the largest items, or one large set would
// drop every replica. Replication runs with --virtual_ip, and in a Raft
// cluster (whose leader serves the cache's replicas).
FlagProblem replica_buffer_holds_items(const ParsedFlags&) {
  bool replicates = !FLAGS_virtual_ip.empty() || !FLAGS_cluster.empty();
  if (replicates && (int64_t{FLAGS_repl_buffer_size} << 20) < 4 * FLAGS_max_item_size) {
    return {"repl_buffer_size", std::string("must hold at least 4 x --max_item_size with ") +
                                    (FLAGS_cluster.empty() ? "--virtual_ip" : "--cluster")};
  }
  return kNoProblem;
}

// What keeps `path` from naming a file to create or replace in a directory
// that exists; "" when nothing. Anything there but a regular file is
// refused: opening a FIFO would hang the start, a device is no place for it.
std::string file_path_problem(const std::filesystem::path& path) {
  std::error_code ignored;  // a path that cannot be looked at is no directory
  std::filesystem::file_status status = std::filesystem::status(path, ignored);
  if (!path.has_filename() || std::filesystem::is_directory(status)) {
    return "must name a file, not a directory: " + path.string();
  }
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    return "must name a regular file: " + path.string() + " is not one";
  }
  if (!std::filesystem::is_directory(directory_of(path), ignored)) {
    return "no such directory: " + directory_of(path).string();
  }
  return "";
}

// The file is written at the stop, maybe after weeks: a directory that
// cannot take it is a mistake to report now. (Started as root with --user,
// the user's permission is not known here; the save logs a failure.)
FlagProblem memory_file_writable(const ParsedFlags&) {
  if (FLAGS_memory_file.empty()) return kNoProblem;
  if (std::string problem = file_path_problem(FLAGS_memory_file); !problem.empty()) {
    return {"memory_file", problem};
  }
  std::filesystem::path directory = directory_of(FLAGS_memory_file);
  bool as_other_user = geteuid() == 0 && !FLAGS_user.empty();
  if (!as_other_user && access(directory.c_str(), W_OK | X_OK) != 0) {
    return {"memory_file", "cannot write in " + directory.string() + ": " + strerror(errno)};
  }
  return kNoProblem;
}

// Written once the ports are bound, before --user takes effect and before
// --memory_file is loaded (and so removed): a failure there would stop a
// start that had already used up the warm restart. As fopen writes it: the
// file where it is there, else a new one in its directory.
FlagProblem pid_file_writable(const ParsedFlags&) {
  if (FLAGS_pid_file.empty()) return kNoProblem;
  std::filesystem::path path(FLAGS_pid_file);
  if (std::string problem = file_path_problem(path); !problem.empty()) {
    return {"pid_file", problem};
  }
  std::error_code ignored;
  std::filesystem::path written =
      std::filesystem::exists(path, ignored) ? path : directory_of(path);
  if (access(written.c_str(), W_OK) != 0) {
    return {"pid_file", "cannot write " + written.string() + ": " + strerror(errno)};
  }
  return kNoProblem;
}

// --data_dir must be the server's own once it runs as --user.
FlagProblem data_dir_owned_by_user() {
  if (FLAGS_user.empty() || !server::user_exists(FLAGS_user)) return kNoProblem;
  std::string stranger = server::not_owned_by(FLAGS_user, FLAGS_data_dir);
  if (stranger.empty()) return kNoProblem;
  return {"data_dir", stranger + " is not owned by --user " + FLAGS_user + ": chown -R " +
                          FLAGS_user + " " + FLAGS_data_dir};
}

FlagProblem cluster_flags_agree(const ParsedFlags& parsed) {
  if (FLAGS_cluster.empty()) {
    return set_without({"node_id", "data_dir", "cluster_secret_file", "cluster_join"},
                       "--cluster is not");
  }
  const std::vector<consensus::Member>& members = parsed.cluster;
  if (std::none_of(members.begin(), members.end(),
                   [](const auto& member) { return member.id == FLAGS_node_id; })) {
    return {"node_id", "must be one of the ids in --cluster"};
  }
  if (FLAGS_data_dir.empty()) return {"data_dir", "is needed with --cluster"};
  if (!std::filesystem::is_directory(FLAGS_data_dir)) {
    return {"data_dir", "no such directory: " + FLAGS_data_dir};
  }
  if (FLAGS_cluster_secret_file.empty()) {
    return {"cluster_secret_file",
            "is needed with --cluster: the cluster port must let only "
            "members in"};
  }
  if (FlagProblem problem = data_dir_owned_by_user(); is_problem(problem)) return problem;
  if (std::string problem = consensus::data_dir_claim_problem(FLAGS_data_dir, FLAGS_node_id);
      !problem.empty()) {
    return {"data_dir", problem};
  }
  // One way to run a cluster: the leader is the master.
  if (!FLAGS_virtual_ip.empty()) return {"virtual_ip", "cannot be used with --cluster"};
  if (FLAGS_lock_port == 0) return {"lock_port", "cannot be 0 with --cluster"};
  return kNoProblem;
}

FlagProblem tls_flags_agree(const ParsedFlags&) {
  if (!tls_enabled()) {
    // A certificate nobody serves means the operator believes TLS is on.
    const std::string why = "no port speaks TLS (--tls, --tls_port or --lock_tls_port)";
    FlagProblem problem =
        set_without({"tls_cert_file", "tls_key_file", "tls_ca_file", "tls_ciphers"}, why);
    if (!is_problem(problem) && FLAGS_tls_verify_client) {
      problem = {"tls_verify_client", "is set, but " + why};
    }
    return problem;
  }
  if (FLAGS_tls_cert_file.empty()) return {"tls_cert_file", "is needed when a port speaks TLS"};
  if (FLAGS_tls_verify_client && FLAGS_tls_ca_file.empty()) {
    return {"tls_verify_client",
            "needs --tls_ca_file, the CA client certificates must be signed by"};
  }
  return kNoProblem;
}

FlagProblem sasl_needs_auth_file(const ParsedFlags&) {
  if (FLAGS_enable_sasl && FLAGS_auth_file.empty()) {
    return {"enable_sasl",
            "(memcached's -S) needs --auth_file (-Y): lockcached checks SASL "
            "PLAIN against that file"};
  }
  return kNoProblem;
}

// This member's cluster port (--cluster, --node_id); 0 without one.
int own_cluster_port(const ParsedFlags& parsed) {
  for (const consensus::Member& member : parsed.cluster) {
    if (member.id != FLAGS_node_id) continue;
    std::optional<net::Endpoint> own = net::parse_endpoint(member.address);
    return own ? own->port : 0;
  }
  return 0;
}

// Every listener binds a port of its own on the same hosts (the lock and
// TLS ports listen on each host the cache port does; with --virtual_ip the
// cache listens on every address, the virtual IP's replication port too; a
// cluster member's replication and cluster ports are on its host, which
// the cache's default address covers): one number twice would fail the
// second bind, after the first's (a cluster member's, after Raft started).
FlagProblem ports_distinct(const ParsedFlags& parsed) {
  std::vector<std::pair<int, std::string>> taken;  // the port, and whose
  if (FLAGS_unix_socket.empty()) {
    for (const server::ListenAddress& address : parsed.listen) {
      bool own = address.port != server::ListenAddress::kDefaultPort;
      taken.emplace_back(own ? address.port : FLAGS_port, own ? "listen" : "port");
    }
  }
  // A --lock_port that follows the cache port comes last: the port the
  // operator gave is the one to name.
  const bool lock_given = !parsed.lock_port_follows_cache;
  const std::pair<const char*, int> listeners[] = {
      {"lock_port", lock_given ? FLAGS_lock_port : 0},
      {"tls_port", FLAGS_tls_port},
      {"lock_tls_port", FLAGS_lock_tls_port},
      {"repl_port", FLAGS_virtual_ip.empty() && parsed.cluster.empty() ? 0 : FLAGS_repl_port},
      {"cluster", own_cluster_port(parsed)},
      {"lock_port", lock_given ? 0 : FLAGS_lock_port},
  };
  for (const auto& [flag, port] : listeners) {
    if (port <= 0) continue;
    for (const auto& [other, whose] : taken) {
      if (other != port) continue;
      std::string followed = lock_given ? "" : " (--lock_port follows the cache port: give one)";
      return {flag, std::to_string(port) + " is --" + whose + "'s too: each listener needs a " +
                        "port of its own" + (std::string(flag) == "lock_port" ? followed : "")};
    }
    taken.emplace_back(port, flag);
  }
  return kNoProblem;
}

// A rule between flags; it reads what it needs of the parsed flags (a rule
// that needs none ignores them). kOnSighup: it reads a flag that SIGHUP
// re-reads (flags.cc), so a reload checks it too, with the new values.
struct Rule {
  FlagProblem (*check)(const ParsedFlags& parsed);
  Reload reload = Reload::kAtStart;
};

// The rules, in the order they are checked.
const Rule kRules[] = {
    {uring_sqpoll_needs_uring},
    {log_dir_writable},
    {item_fits_memory, Reload::kOnSighup},  // --memory_limit_mb
    {notls_needs_tls},
    {ports_distinct},
    {virtual_ip_listened},
    {replica_buffer_holds_items},
    {memory_file_writable},
    {pid_file_writable},
    {cluster_flags_agree},
    {tls_flags_agree},
    {sasl_needs_auth_file},
};

}  // namespace

Check between(int64_t min, int64_t max) {
  return [=](const Value& value) -> std::string {
    int64_t number = std::get<int64_t>(value);
    if (number >= min && number <= max) return "";
    return "must be " + std::to_string(min) + ".." + std::to_string(max);
  };
}

Check at_least(int64_t min) {
  return [=](const Value& value) -> std::string {
    if (std::get<int64_t>(value) >= min) return "";
    return min == 0 ? "must be 0 or more" : "must be at least " + std::to_string(min);
  };
}

Check one_of(std::initializer_list<std::string_view> choices) {
  std::vector<std::string> allowed(choices.begin(), choices.end());
  std::string message = "must be ";
  for (size_t i = 0; i < allowed.size(); ++i)
    message += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + allowed[i];
  return [=](const Value& value) -> std::string {
    const std::string& text = std::get<std::string>(value);
    return std::find(allowed.begin(), allowed.end(), text) == allowed.end() ? message : "";
  };
}

Check text_check(std::string (*problem)(const std::string& text)) {
  return [=](const Value& value) { return problem(std::get<std::string>(value)); };
}

std::string unix_socket_problem(const std::string& path) {
  if (path.size() <= net::kMaxUnixPathLength) return "";
  return "a unix socket's path may have " + std::to_string(net::kMaxUnixPathLength) +
         " bytes at most";
}

std::string one_character_problem(const std::string& text) {
  return text.size() == 1 ? "" : "must be one character";
}

std::string virtual_ip_problem(const std::string& address) {
  if (address.empty() || replication::is_numeric_address(address)) return "";
  return "must be a numeric IPv4 or IPv6 address: " + address;
}

std::string user_problem(const std::string& user) {
  if (user.empty() || server::user_exists(user)) return "";
  return "no such user: " + user;
}

FlagProblem check_flags(const ParsedFlags& parsed) {
  for (const Flag& flag : flags()) {
    std::string message = parsed.problem_of(flag.name);
    if (message.empty() && flag.check) message = flag.check(value_of(flag));
    if (!message.empty()) return {std::string(flag.name), message};
  }
  for (const Rule& rule : kRules) {
    if (FlagProblem problem = rule.check(parsed); is_problem(problem)) return problem;
  }
  return kNoProblem;
}

FlagProblem check_reloaded_rules(const ParsedFlags& parsed) {
  for (const Rule& rule : kRules) {
    if (rule.reload != Reload::kOnSighup) continue;
    if (FlagProblem problem = rule.check(parsed); is_problem(problem)) return problem;
  }
  return kNoProblem;
}

}  // namespace lockcached::config
