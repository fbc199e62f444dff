// lockcached: flags in, server up, wait for SIGTERM/SIGINT, server down.
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>
#ifdef LOCKCACHED_WITH_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "lockcached/server/command_line.h"
#include "lockcached/server/server.h"
#include "lockcached/version.h"

DEFINE_int32(port, 11211, "TCP port of the memcached protocols (0: any free port)");
DEFINE_int32(lock_port, 11400, "TCP port of the named-lock service (0: off, -1: any free port)");
DEFINE_string(listen, "0.0.0.0", "Comma-separated addresses to listen on");
DEFINE_int32(threads, 0, "Reactor threads (0: one per CPU core)");
DEFINE_int32(memory_limit_mb, 1024, "Memory for items, in megabytes");
DEFINE_int64(max_item_size, 1048576, "Largest value accepted, in bytes");
DEFINE_int32(max_connections, 4096, "Simultaneous client connections");
DEFINE_int32(idle_timeout, 0, "Close connections idle for this many seconds (0: never)");
DEFINE_string(user, "", "Run as this user once the ports are bound (when started as root)");
DEFINE_uint64(lock_service_max_locks_per_session, 10000,
              "Named locks one lock-service session may hold plus wait for (0: no limit)");
DEFINE_uint64(lock_service_max_names, 1000000,
              "Named locks that may exist in the lock service at once (0: no limit)");

#ifdef LOCKCACHED_WITH_JEMALLOC
// jemalloc reads this at start-up. Freed pages stay for reuse about a
// second: a cache frees memory exactly when it stores something else, and
// giving a 100 KB item's pages back at once made every such store fault
// them in again (3.5x the CPU per request, measured). Keeping them for
// jemalloc's default 10 s let RSS reach three times the limit while item
// sizes shifted, so the memory governor has them given back whenever the
// heap is over its bound (docs/architecture.md, "Memory and eviction").
extern "C" const char* malloc_conf;
const char* malloc_conf = "dirty_decay_ms:1000,muzzy_decay_ms:0";
#endif

namespace {

constexpr int kUsageError = 64;  // EX_USAGE

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

// Returns an empty string when the flags make sense, else what is wrong.
std::string check_flags() {
  if (FLAGS_port < 0 || FLAGS_port > 65535) return "--port must be 0..65535";
  if (FLAGS_lock_port < -1 || FLAGS_lock_port > 65535) return "--lock_port must be -1..65535";
  if (FLAGS_threads < 0 || FLAGS_threads > 1024) return "--threads must be 0..1024";
  if (FLAGS_memory_limit_mb < 1) return "--memory_limit_mb must be at least 1";
  if (FLAGS_max_item_size < 1024 || FLAGS_max_item_size > (int64_t{1} << 30)) {
    return "--max_item_size must be 1024..1073741824";
  }
  if (FLAGS_max_connections < 1) return "--max_connections must be at least 1";
  if (FLAGS_idle_timeout < 0) return "--idle_timeout must be 0 or more";
  if (split_commas(FLAGS_listen).empty()) return "--listen needs at least one address";
  return "";
}

lockcached::server::Settings settings_from_flags() {
  lockcached::server::Settings settings;
  settings.listen = split_commas(FLAGS_listen);
  settings.port = static_cast<uint16_t>(FLAGS_port);
  settings.lock_port = FLAGS_lock_port;
  settings.threads = FLAGS_threads > 0 ? static_cast<unsigned>(FLAGS_threads)
                                       : std::max(1u, std::thread::hardware_concurrency());
  settings.memory_limit = static_cast<size_t>(FLAGS_memory_limit_mb) << 20;
  settings.max_item_size = static_cast<size_t>(FLAGS_max_item_size);
  settings.max_connections = FLAGS_max_connections;
  settings.idle_timeout_seconds = FLAGS_idle_timeout;
  settings.lock_service_max_locks_per_session = FLAGS_lock_service_max_locks_per_session;
  settings.lock_service_max_names = FLAGS_lock_service_max_names;
  settings.hash_seed = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  return settings;
}

// Every connection is a descriptor: make sure --max_connections can be
// reached, as far as the hard limit allows.
void raise_descriptor_limit(int max_connections) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  rlim_t wanted = static_cast<rlim_t>(max_connections) + 64;  // listeners, epoll, spares
  if (limit.rlim_cur >= wanted) return;
  limit.rlim_cur = std::min(wanted, limit.rlim_max);
  setrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < wanted) {
    LOG(WARNING) << "open files limited to " << limit.rlim_cur
                 << ": fewer than --max_connections=" << max_connections
                 << " connections will be accepted";
  }
}

// After the ports are bound: a cache needs no privileges to serve.
bool drop_privileges(const std::string& user) {
  if (user.empty()) {
    if (geteuid() == 0) LOG(WARNING) << "running as root; use --user to drop privileges";
    return true;
  }
  const passwd* entry = getpwnam(user.c_str());
  if (entry == nullptr) {
    LOG(ERROR) << "--user: no such user: " << user;
    return false;
  }
  if (initgroups(entry->pw_name, entry->pw_gid) != 0 || setgid(entry->pw_gid) != 0 ||
      setuid(entry->pw_uid) != 0) {
    PLOG(ERROR) << "--user: cannot become " << user;
    return false;
  }
  return true;
}

// gflags accepts "-name" as well as "--name", "no" before a boolean, and
// dashes for underscores; memcached's short options must not take those.
bool is_gflag(std::string_view name) {
  std::string normalized(name);
  std::replace(normalized.begin(), normalized.end(), '-', '_');
  gflags::CommandLineFlagInfo info;
  if (gflags::GetCommandLineFlagInfo(normalized.c_str(), &info)) return true;
  return normalized.starts_with("no") &&
         gflags::GetCommandLineFlagInfo(normalized.c_str() + 2, &info) && info.type == "bool";
}

// Tells systemd (Type=notify in lockcached.service) how the service is
// doing; without $NOTIFY_SOCKET, i.e. not under systemd, it does nothing.
void notify_service_manager(const std::string& state) {
#ifdef LOCKCACHED_WITH_SYSTEMD
  if (int result = sd_notify(0, state.c_str()); result < 0) {
    LOG(WARNING) << "sd_notify(" << state << "): " << strerror(-result);
  }
#else
  if (std::getenv("NOTIFY_SOCKET") != nullptr && state.starts_with("READY=1")) {
    LOG(ERROR) << "NOTIFY_SOCKET is set but lockcached was built without libsystemd: "
                  "systemd will not learn that it is ready";
  }
#endif
}

}  // namespace

int main(int argc, char** argv) {
  // glog converts every message's time with mktime(). With TZ unset, glibc
  // then frees and re-reads its zone for each call, from whichever thread
  // logs: a waste per message, and a race ThreadSanitizer reports (glibc's
  // own lock is invisible to it). Naming the zone it would use anyway makes
  // every call after the first a string compare. A TZ already set wins.
  setenv("TZ", ":/etc/localtime", /*overwrite=*/0);
  // A service logs to stderr (the journal under systemd) unless told otherwise.
  gflags::SetCommandLineOptionWithMode("logtostderr", "true", gflags::SET_FLAGS_DEFAULT);
  gflags::SetVersionString(LOCKCACHED_VERSION);
  gflags::SetUsageMessage(
      "memcached-compatible cache server with server-side locking.\n"
      "memcached's options -p -U -l -m -c -t -I -v -u (and --memory-limit, --conn-limit,\n"
      "--max-item-size, --udp-port) are accepted too and mean what they mean to memcached.");
  lockcached::server::TranslatedCommandLine command_line =
      lockcached::server::translate_memcached_options({argv, argv + argc}, is_gflag);
  if (!command_line.error.empty()) {
    std::cerr << "lockcached: " << command_line.error << "\n";
    return kUsageError;
  }
  std::vector<char*> translated;
  for (std::string& arg : command_line.args)
    translated.push_back(arg.data());
  translated.push_back(nullptr);
  int translated_count = static_cast<int>(command_line.args.size());
  char** translated_args = translated.data();
  gflags::ParseCommandLineFlags(&translated_count, &translated_args, true);
  google::InitGoogleLogging(argv[0]);
  for (const std::string& warning : command_line.warnings)
    LOG(WARNING) << warning;

  if (std::string problem = check_flags(); !problem.empty()) {
    LOG(ERROR) << problem;
    return kUsageError;
  }

  // Block the stop signals before any thread starts, so that every thread
  // inherits the mask and only sigwait() below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  raise_descriptor_limit(FLAGS_max_connections);
  lockcached::server::Server server(settings_from_flags());
  std::string error;
  if (!server.start(&error)) {
    LOG(ERROR) << "cannot start: " << error;
    return EXIT_FAILURE;
  }
  if (!drop_privileges(FLAGS_user)) {
    server.stop();
    return EXIT_FAILURE;
  }
  LOG(INFO) << "lockcached " << LOCKCACHED_VERSION << " ready";
  std::string status = "STATUS=memcached protocols on port " + std::to_string(server.port());
  if (server.lock_port() != 0) status += ", lock service on " + std::to_string(server.lock_port());
  notify_service_manager("READY=1\n" + status);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  LOG(INFO) << "Got " << strsignal(signal_number) << ", shutting down";
  notify_service_manager("STOPPING=1");
  server.stop();
  return EXIT_SUCCESS;
}
