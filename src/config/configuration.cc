#include "lockcached/config/configuration.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string_view>

#include <gflags/gflags.h>

#include "lockcached/config/checks.h"
#include "lockcached/config/command_line.h"
#include "lockcached/config/flag_loader.h"
#include "lockcached/config/flags.h"
#include "lockcached/config/usage.h"
#include "lockcached/server/process.h"
#include "lockcached/version.h"
#include "lockcached_license.h"

namespace lockcached::config {
namespace {

constexpr const char* kUsageIntro =
    "lockcached: memcached-compatible cache server with server-side locking.\n"
    "Usage: lockcached [--flag=value ...] [--flagfile=FILE]";
constexpr const char* kUsageOutro =
    "memcached's options work too, short and long: -p -U -l -s -a -m -M -c -k -t -I -v\n"
    "-vv -u -d -P -r -A -C -F -X -W -B -b -R -D -Y -S -Z -e -h -V -i, and -o with\n"
    "idle_timeout, lru_crawler, no_lru_crawler, watcher_logbuf_size and the TLS\n"
    "settings (UDP stays off). Those that tune memcached's own machinery (-f -n -L\n"
    "-N, -o hashpower, slab_*, the other lru_*, ext_* and the like) are accepted\n"
    "with a warning that says why they change nothing here. A flagfile holds one\n"
    "--flag=value per line; an unknown flag or a bad value anywhere stops the server\n"
    "with exit status 64, as does an address it may never listen on (not this\n"
    "host's, a privileged port); an address in use exits 1.\n"
    "Signals: SIGTERM, SIGINT and SIGUSR1 stop it cleanly, SIGUSR1 after writing\n"
    "the cache to --memory_file (-e) when it is set; SIGHUP re-reads the flagfile\n"
    "for --memory_limit_mb, --idle_timeout and --v, reloads the TLS certificates\n"
    "and re-reads --auth_file.\n"
    "--helpfull lists every flag, glog's and gflags' included.\n";

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "lockcached: " << message << "\n";
  std::exit(kUsageError);
}

// --help, --helpfull, --version and --license (memcached's -i): the answer,
// then exit 0. Nothing for a normal start.
void answer_info_request(const std::string& request, const char* program) {
  if (request.empty()) return;
  if (request == "version") {
    std::cout << "lockcached " << LOCKCACHED_VERSION << "\n";
  } else if (request == "license") {
    std::cout << "lockcached " << LOCKCACHED_VERSION << "\n\n" << kLicenseText;
  } else if (request == "help") {
    std::cout << usage_text(kUsageIntro, flags(), kUsageOutro);
  } else {
    gflags::ShowUsageWithFlags(program);
  }
  std::exit(EXIT_SUCCESS);
}

// Where the lock service listens when --lock_port is not given: beside the
// cache port, so that instances on different cache ports (as memcached's
// operators run them, -p 11211, -p 11212...) never share one.
constexpr int kLockPortOffset = 11400 - 11211;

// The cache port as Server::listen_cache binds it: --port, unless every
// --listen address has a port of its own (memcached's -l HOST:PORT); the
// first address's then.
int cache_port(const std::vector<server::ListenAddress>& addresses) {
  bool own_ports = !addresses.empty() && std::none_of(addresses.begin(), addresses.end(),
                                                      [](const auto& address) {
                                                        return address.port ==
                                                               server::ListenAddress::kDefaultPort;
                                                      });
  return own_ports ? addresses.front().port : FLAGS_port;
}

// Sets --lock_port from the cache port where it was not given; a warning
// when that leaves the lock service off.
std::string follow_cache_port(ParsedFlags& parsed) {
  if (!is_default("lock_port")) return "";
  parsed.lock_port_follows_cache = true;
  // --unix_socket is memcached's -s, which turns the network off: no lock
  // port either, unless asked for (or --cluster, whose leader serves it).
  if (!FLAGS_unix_socket.empty() && FLAGS_cluster.empty()) {
    FLAGS_lock_port = server::kLockServiceOff;
    return "";
  }
  int port = cache_port(parsed.listen);
  if (port == 0) {
    FLAGS_lock_port = server::kAnyFreePort;
    return "";
  }
  FLAGS_lock_port = port + kLockPortOffset;
  if (FLAGS_lock_port <= 65535) return "";
  FLAGS_lock_port = server::kLockServiceOff;
  return "no lock service: the cache port " + std::to_string(port) + " plus " +
         std::to_string(kLockPortOffset) + " is no port (give --lock_port)";
}

// --auth_file, read at start: a bad file stops the server as a bad flag
// does. nullptr without the flag.
std::shared_ptr<core::Authenticator> load_auth_file() {
  if (FLAGS_auth_file.empty()) return nullptr;
  auto authenticator = std::make_shared<core::Authenticator>();
  if (std::string error; !authenticator->load(FLAGS_auth_file, &error)) {
    usage_error("--auth_file: " + error);
  }
  return authenticator;
}

// --cluster_secret_file's first line, at least 16 bytes; "" without the
// flag. A file that does not give one stops the server as a bad flag does.
std::string load_cluster_secret() {
  if (FLAGS_cluster_secret_file.empty()) return "";
  std::ifstream file(FLAGS_cluster_secret_file);
  std::string secret;
  if (!file || !std::getline(file, secret)) {
    usage_error("--cluster_secret_file: " + FLAGS_cluster_secret_file + ": cannot read it");
  }
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  if (secret.size() < 16) {
    usage_error("--cluster_secret_file: " + FLAGS_cluster_secret_file +
                ": the secret must be 16 bytes or more");
  }
  return secret;
}

// The files the flags name, loaded now: one that does not load is a
// configuration mistake like a bad flag.
LoadedFiles load_files(const ParsedFlags& parsed) {
  LoadedFiles files;
  files.authenticator = load_auth_file();
  files.cluster_secret = load_cluster_secret();
  // Certificate, key and CA files that do not load are a configuration
  // mistake like a bad flag (memcached exits 64 for them too). Loaded once:
  // the server starts with them, and loads them again only at SIGHUP and
  // refresh_certs.
  if (std::string error; tls_enabled() && !(files.tls = tls::Context::load(parsed.tls, &error))) {
    usage_error("TLS: " + error);
  }
  return files;
}

// Options that change nothing here, and ports that --unix_socket leaves unused.
void warn(const std::vector<std::string>& warnings,
          const std::vector<server::ListenAddress>& addresses) {
  for (const std::string& warning : warnings)
    std::cerr << "lockcached: warning: " << warning << "\n";
  if (!FLAGS_unix_socket.empty() &&
      (!is_default("port") || std::any_of(addresses.begin(), addresses.end(), [](auto& address) {
        return address.port != server::ListenAddress::kDefaultPort;
      }))) {
    std::cerr << "lockcached: warning: --port and the ports of --listen are not used: "
                 "--unix_socket serves the memcached protocols instead of TCP (memcached's -s)\n";
  }
}

ProcessSettings process_settings() {
  ProcessSettings process;
  process.daemonize = FLAGS_daemonize;
  process.pid_file = FLAGS_pid_file;
  process.user = FLAGS_user;
  process.lock_memory = FLAGS_lock_memory;
  process.enable_coredumps = FLAGS_enable_coredumps;
  return process;
}

}  // namespace

Configuration load(int argc, char** argv) {
  // A service logs to stderr (the journal under systemd) unless told otherwise.
  gflags::SetCommandLineOptionWithMode("logtostderr", "true", gflags::SET_FLAGS_DEFAULT);
  gflags::SetVersionString(LOCKCACHED_VERSION);
  // gflags takes "-name" as well as "--name"; memcached's short options
  // must leave those alone.
  FlagRegistry registry = gflags_registry();
  TranslatedCommandLine command_line = translate_memcached_options(
      {argv, argv + argc}, [&](std::string_view name) { return names_flag(registry, name); });
  if (!command_line.error.empty()) usage_error(command_line.error);
  LoadedFlags loaded = load_flags(command_line.args, registry);
  if (!loaded.error.empty()) usage_error(loaded.error);
  answer_info_request(loaded.info_request, argv[0]);
  ParsedFlags parsed = parse_flags();
  if (std::string warning = follow_cache_port(parsed); !warning.empty()) {
    command_line.warnings.push_back(warning);
  }
  if (FlagProblem problem = check_flags(parsed); !problem.flag.empty()) {
    std::string origin = loaded.origin_of(problem.flag);
    usage_error("--" + problem.flag + ": " + problem.message +
                (origin.empty() ? "" : " (" + origin + ")"));
  }
  // Inherited by the daemon -d forks, and checked before it: a limit that
  // allows no core file stops the start as memcached's -r does.
  if (std::string error; FLAGS_enable_coredumps && !server::enable_core_dumps(&error)) {
    usage_error("--enable_coredumps: " + error);
  }
  Configuration configuration;
  configuration.files = load_files(parsed);
  warn(command_line.warnings, parsed.listen);
  configuration.parsed = std::move(parsed);
  configuration.args = std::move(command_line.args);
  configuration.process = process_settings();
  return configuration;
}

}  // namespace lockcached::config
