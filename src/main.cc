// lockcached: flags in, server up, signals handled, server down.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <glog/logging.h>
#ifdef LOCKCACHED_WITH_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "lockcached/config/configuration.h"
#include "lockcached/core/verbosity.h"
#include "lockcached/server/process.h"
#include "lockcached/server/server.h"
#include "lockcached/version.h"

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

namespace config = lockcached::config;
namespace server = lockcached::server;

// The moment's fault, e.g. a port still in use (lockcached(1), "EXIT
// STATUS"); a configuration mistake exits config::kUsageError.
constexpr int kStartFailure = 1;

// Blocked from the first instant, in every thread that will start (they
// inherit the mask): a SIGHUP during start-up must not kill the server.
sigset_t block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP, SIGUSR1})
    sigaddset(&signals, signal_number);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

void start_logging(const char* program) {
  google::InitGoogleLogging(program);
  lockcached::core::log_verbosity.store(FLAGS_v, std::memory_order_relaxed);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // A crash (SIGSEGV, SIGABRT, ...) flushes the buffered log lines and
  // writes a stack trace. Not under a sanitizer, whose own report must win.
  google::InstallFailureSignalHandler();
#endif
}

// The server's settings, once the process is made ready for them (after
// the fork of -d: mlockall is not inherited): its memory locked (-k), and
// descriptors for every connection.
server::Settings prepare_process(const config::Configuration& configuration) {
  const config::ProcessSettings& process = configuration.process;
  bool memory_locked = false;
  if (std::string why_not; process.lock_memory) {
    memory_locked = server::lock_all_memory(!process.user.empty() && geteuid() == 0, &why_not);
    LOG_IF(WARNING, !memory_locked) << "--lock_memory (-k): memory not locked: " << why_not;
  }
  server::Settings settings = config::server_settings(configuration.parsed, configuration.files);
  settings.memory_locked = memory_locked;
  unsigned long wanted_fds = static_cast<unsigned long>(settings.max_connections) +
                             static_cast<unsigned long>(settings.lock_max_connections) + 64;
  if (unsigned long got = server::raise_descriptor_limit(wanted_fds); got < wanted_fds) {
    LOG(WARNING) << "open files limited to " << got
                 << ": fewer connections than --max_connections plus --lock_max_connections "
                    "will be accepted";
  }
  return settings;
}

// After the ports are bound: the socket file and the process become
// --user's. False (logged) where that fails.
bool become_user(const std::string& user, const std::string& unix_socket) {
  std::string error;
  if (user.empty()) {
    LOG_IF(WARNING, geteuid() == 0) << "running as root; use --user to drop privileges";
    return true;
  }
  if ((!unix_socket.empty() && !server::give_to_user(unix_socket, user, &error)) ||
      !server::drop_privileges(user, &error)) {
    LOG(ERROR) << "cannot start: " << error;
    return false;
  }
  return true;
}

// Starts the server as the process settings ask; the exit status of a
// failure, or EXIT_SUCCESS.
int start(server::Server& server, const server::Settings& settings,
          const config::ProcessSettings& process, server::PidFile& pid_file) {
  std::string error;
  bool configuration_error = false;
  // The pid file between the two: after the bind, so that a start that
  // finds its port taken leaves a running server's pid file alone; before
  // the memory file is loaded (and removed), so that a failure to write it
  // leaves the warm restart for the next start. (config::load checked that
  // it can be written.)
  if (!server.bind(&error, &configuration_error) || !pid_file.write(process.pid_file, &error) ||
      !server.start(&error, &configuration_error)) {
    LOG(ERROR) << "cannot start: " << error;
    server.stop();
    server.keep_memory_file_for_the_next_start();
    return configuration_error ? config::kUsageError : kStartFailure;
  }
  if (!become_user(process.user, settings.unix_socket)) {
    server.stop();
    server.keep_memory_file_for_the_next_start();
    return kStartFailure;
  }
  // Linux stops a process that changed its user from dumping core; -r
  // asked for core files.
  if (process.enable_coredumps && !process.user.empty()) prctl(PR_SET_DUMPABLE, 1);
  return EXIT_SUCCESS;
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

void announce_ready(const server::Server& server, const server::Settings& settings) {
  LOG_IF(INFO, !settings.io_choice.empty()) << settings.io_choice;
  LOG(INFO) << "lockcached " << LOCKCACHED_VERSION << " ready";
  std::string status = "STATUS=memcached protocols on " +
                       (settings.unix_socket.empty() ? "port " + std::to_string(server.port())
                                                     : "unix:" + settings.unix_socket);
  if (server.lock_port() != 0) status += ", lock service on " + std::to_string(server.lock_port());
  notify_service_manager("READY=1\n" + status);
}

// Serves until a stop signal, which it returns; SIGHUP reloads. Signals are
// blocked in every thread (block_signals), so they arrive here and nowhere
// else, and the default actions that would kill the process without
// flushing the log never run.
int serve_until_stopped(server::Server& server, const config::Configuration& configuration,
                        const sigset_t& signals) {
  for (;;) {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    if (signal_number == SIGHUP) {
      server.reload(config::reloaded(configuration.args, configuration.parsed));
      google::FlushLogFiles(google::GLOG_INFO);
      continue;
    }
    LOG(INFO) << "Got " << strsignal(signal_number)
              << (signal_number == SIGUSR1 ? " (graceful shutdown)" : "") << ", shutting down";
    return signal_number;
  }
}

// memcached's rule: only a graceful stop (SIGUSR1) keeps the cache for the
// next start; SIGTERM and SIGINT stop without writing it.
void save_cache(server::Server& server, const std::string& memory_file, int stop_signal) {
  if (memory_file.empty()) return;
  if (stop_signal == SIGUSR1) {
    server.save_memory_file();
  } else {
    LOG(INFO) << "--memory_file " << memory_file << " not written: only SIGUSR1 keeps "
              << "the cache, the next start is cold";
  }
}

}  // namespace

int main(int argc, char** argv) {
  // glog converts every message's time with mktime(). With TZ unset, glibc
  // then frees and re-reads its zone for each call, from whichever thread
  // logs: a waste per message, and a race ThreadSanitizer reports (glibc's
  // own lock is invisible to it). Naming the zone it would use anyway makes
  // every call after the first a string compare. A TZ already set wins.
  setenv("TZ", ":/etc/localtime", /*overwrite=*/0);
  sigset_t signals = block_signals();
  config::Configuration configuration = config::load(argc, argv);
  start_logging(argv[0]);

  // Before any thread starts: fork copies only this one.
  server::Daemon daemon;
  if (std::string error; configuration.process.daemonize && !daemon.detach(&error)) {
    LOG(ERROR) << "cannot daemonize: " << error;
    return kStartFailure;
  }
  server::Settings settings = prepare_process(configuration);
  server::Server server(settings);
  server::PidFile pid_file;
  if (int status = start(server, settings, configuration.process, pid_file);
      status != EXIT_SUCCESS) {
    google::FlushLogFiles(google::GLOG_INFO);
    daemon.failed(status);
    return status;
  }
  announce_ready(server, settings);
  daemon.ready(/*keep_output=*/FLAGS_v > 0);

  int stop_signal = serve_until_stopped(server, configuration, signals);
  notify_service_manager("STOPPING=1");
  server.stop();
  save_cache(server, settings.memory_file, stop_signal);
  LOG(INFO) << "stopped";
  google::FlushLogFiles(google::GLOG_INFO);
  return EXIT_SUCCESS;
}
