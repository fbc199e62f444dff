// lockcached's flags, one table: a row per flag that --help shows, with
// its --help group, the check of its value alone, whether SIGHUP re-reads
// it, and memcached's spelling of it. gflags stores the values (their
// DEFINE_* and defaults are in flags.cc, next to the table); --help, the
// start-up checks, memcached's options (command_line.cc) and SIGHUP
// (configuration.cc) all read this table, so that a flag is added in one
// place.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <gflags/gflags.h>

DECLARE_int32(port);
DECLARE_int32(lock_port);
DECLARE_string(listen);
DECLARE_string(unix_socket);
DECLARE_string(unix_socket_mask);
DECLARE_int32(listen_backlog);
DECLARE_int32(threads);
DECLARE_string(io);
DECLARE_bool(uring_sqpoll);
DECLARE_int32(memory_limit_mb);
DECLARE_int64(max_item_size);
DECLARE_string(memory_file);
DECLARE_bool(disable_evictions);
DECLARE_bool(lru_crawler);
DECLARE_bool(lock_memory);
DECLARE_int32(max_connections);
DECLARE_int32(lock_max_connections);
DECLARE_int32(idle_timeout);
DECLARE_int32(max_reqs_per_event);
DECLARE_string(protocol);
DECLARE_bool(disable_cas);
DECLARE_bool(disable_flush_all);
DECLARE_bool(disable_dumping);
DECLARE_bool(disable_watch);
DECLARE_bool(enable_shutdown);
DECLARE_int32(watch_buffer_kb);
DECLARE_string(stats_prefix_delimiter);
DECLARE_bool(stats_detail);
DECLARE_int32(tcp_keepalive);
DECLARE_string(user);
DECLARE_bool(daemonize);
DECLARE_string(pid_file);
DECLARE_bool(enable_coredumps);
DECLARE_uint64(lock_service_max_locks_per_session);
DECLARE_uint64(lock_service_max_names);
DECLARE_string(virtual_ip);
DECLARE_int32(repl_port);
DECLARE_int32(repl_buffer_size);
DECLARE_int32(repl_timeout);
DECLARE_bool(tls);
DECLARE_int32(tls_port);
DECLARE_int32(lock_tls_port);
DECLARE_string(tls_cert_file);
DECLARE_string(tls_key_file);
DECLARE_string(tls_ca_file);
DECLARE_bool(tls_verify_client);
DECLARE_string(tls_min_version);
DECLARE_string(tls_ciphers);
DECLARE_int32(tls_handshake_timeout);
DECLARE_string(auth_file);
DECLARE_bool(enable_sasl);
DECLARE_string(cluster);
DECLARE_uint64(node_id);
DECLARE_string(data_dir);
DECLARE_string(cluster_secret_file);
DECLARE_bool(cluster_join);
DECLARE_int32(election_timeout_ms);

namespace lockcached::config {

// A flag's value as its check sees it: the integer types widened.
using Value = std::variant<bool, int64_t, uint64_t, std::string>;

// What is wrong with a value of one flag, whatever the others say ("must
// be 0..65535"); "" when nothing. checks.h makes them, and has the rules
// between flags.
using Check = std::function<std::string(const Value& value)>;

// Where gflags keeps a flag's value (FLAGS_name); nothing for gflags' own
// --flagfile, which the flag loader reads itself.
using Storage =
    std::variant<std::monostate, bool*, int32_t*, int64_t*, uint64_t*, std::string*>;

// Whether SIGHUP re-reads a flag from the flagfile while serving.
enum class Reload : bool { kAtStart, kOnSighup };

struct Flag {
  // A row of the table: the columns a flag has, in order.
  Flag(std::string_view name, Storage storage, std::string_view group, Check check = {},
       Reload reload = Reload::kAtStart, std::string_view memcached = {},
       std::string_view help = {})
      : name(name),
        storage(storage),
        group(group),
        check(std::move(check)),
        reload(reload),
        memcached(memcached),
        help(help) {}

  std::string_view name;
  Storage storage;
  std::string_view group;  // its --help group's title
  Check check;             // none: any value gflags takes, or one that parse_flags parses
  Reload reload;
  // memcached's option for it, as memcached's -h names it ("-p",
  // "-o idle_timeout"); command_line.cc translates by it. Empty: none.
  std::string_view memcached;
  // What --help says of it where gflags' own description is not ours
  // (glog's flags); empty: gflags' description.
  std::string_view help;
};

// Every row, in --help's order: the groups as they come, and the flags
// in each. glog's and gflags' flags that --help shows have rows too.
std::span<const Flag> flags();

// The row of `name`, or nullptr.
const Flag* find_flag(std::string_view name);
// The row memcached spells `option` ("-d", "-o ssl_key"), or nullptr.
const Flag* flag_spelled(std::string_view option);

// The value gflags holds for the flag now.
Value value_of(const Flag& flag);
// The value gflags would give the flag `name` (any flag gflags knows,
// glog's too) for `text`, by gflags' own rules for its type, without
// setting it; nullopt where gflags would refuse the text or knows no such
// flag. A double's value is its text. For SIGHUP, which checks a file
// while the server runs on the flags in force.
std::optional<Value> value_from_text(std::string_view name, const std::string& text);
bool is_bool(const Flag& flag);
// Whether the flag still has its default (given nowhere, or set by nobody).
bool is_default(std::string_view name);

}  // namespace lockcached::config
