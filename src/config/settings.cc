#include "lockcached/config/settings.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include <glog/logging.h>

#include "lockcached/config/flags.h"
#include "lockcached/net/reactor.h"

namespace lockcached::config {
namespace {

server::CacheProtocol cache_protocol() {
  if (FLAGS_protocol == "ascii") return server::CacheProtocol::kText;
  if (FLAGS_protocol == "binary") return server::CacheProtocol::kBinary;
  return server::CacheProtocol::kAuto;
}

// io_uring is the faster backend (bench/RESULTS.md), so --io=auto, the
// default, takes it wherever the kernel allows it, and says in one line
// which backend it took and why (Settings::io_choice). A kernel without
// io_uring (too old, or turned off by sysctl or a seccomp filter such as a
// container's) still gets a working server on epoll: a warning when
// --io=uring asked for io_uring by name, an ordinary line for --io=auto. One that refuses only
// SQPOLL gets io_uring without it. Each probe builds a ring: a granted
// SQPOLL one settles both questions.
void choose_io(server::Settings* settings) {
  settings->io = FLAGS_io == "epoll" ? net::IoBackend::kEpoll : net::IoBackend::kUring;
  settings->uring.sqpoll = FLAGS_uring_sqpoll;
  if (settings->io == net::IoBackend::kEpoll) return;
  using net::Reactor;
  bool uring_granted = false;
  if (std::string why; settings->uring.sqpoll) {
    uring_granted = Reactor::uring_available(settings->uring, &why);
    if (!uring_granted) {
      LOG(WARNING) << "--uring_sqpoll: " << why << "; submitting from the reactor threads";
      settings->uring.sqpoll = false;
    }
  }
  std::string why;
  if (!uring_granted && !Reactor::uring_available(settings->uring, &why)) {
    settings->io = net::IoBackend::kEpoll;
    if (FLAGS_io == "uring") {
      LOG(WARNING) << "--io=uring: " << why << "; using epoll";
    } else {
      settings->io_choice = "--io=auto: epoll, because the kernel refuses io_uring (" + why + ")";
    }
  } else if (FLAGS_io == "auto") {
    settings->io_choice = "--io=auto: io_uring, which the kernel allows";
  }
}

void set_commands(server::Settings* settings) {
  settings->commands.flush_all = !FLAGS_disable_flush_all;
  settings->commands.dumps = !FLAGS_disable_dumping;
  settings->commands.watch = !FLAGS_disable_watch;
  settings->commands.shutdown = FLAGS_enable_shutdown;
  settings->commands.requests_per_event = static_cast<uint32_t>(FLAGS_max_reqs_per_event);
}

void set_cluster(server::Settings* settings, const ParsedFlags& parsed, const LoadedFiles& files) {
  settings->cluster = parsed.cluster;
  settings->node_id = FLAGS_node_id;
  settings->cluster_join = FLAGS_cluster_join;
  settings->data_dir = FLAGS_data_dir;
  settings->cluster_secret = files.cluster_secret;
  settings->election_timeout_ms = static_cast<unsigned>(FLAGS_election_timeout_ms);
}

void set_replication(server::Settings* settings) {
  settings->virtual_ip = FLAGS_virtual_ip;
  settings->repl_port = static_cast<uint16_t>(FLAGS_repl_port);
  settings->repl_buffer_size = static_cast<size_t>(FLAGS_repl_buffer_size) << 20;
  settings->repl_timeout_seconds = FLAGS_repl_timeout;
}

void set_tls(server::Settings* settings, const ParsedFlags& parsed, const LoadedFiles& files) {
  settings->tls = FLAGS_tls;
  settings->tls_port = FLAGS_tls_port;
  settings->lock_tls_port = FLAGS_lock_tls_port;
  settings->tls_files = parsed.tls;
  settings->tls_context = files.tls;
  settings->tls_handshake_timeout_seconds = FLAGS_tls_handshake_timeout;
}

}  // namespace

bool tls_enabled() {
  return FLAGS_tls || FLAGS_tls_port != 0 || FLAGS_lock_tls_port != 0;
}

server::Settings server_settings(const ParsedFlags& parsed, const LoadedFiles& files) {
  server::Settings settings;
  settings.authenticator = files.authenticator;
  settings.listen = parsed.listen;
  settings.port = static_cast<uint16_t>(FLAGS_port);
  settings.unix_socket = FLAGS_unix_socket;
  settings.unix_socket_mask = parsed.unix_socket_mask;
  settings.lock_port = FLAGS_lock_port;
  settings.threads = FLAGS_threads > 0 ? static_cast<unsigned>(FLAGS_threads)
                                       : std::max(1u, std::thread::hardware_concurrency());
  settings.memory_limit = static_cast<size_t>(FLAGS_memory_limit_mb) << 20;
  settings.max_item_size = static_cast<size_t>(FLAGS_max_item_size);
  settings.memory_file = FLAGS_memory_file;
  choose_io(&settings);
  settings.max_connections = FLAGS_max_connections;
  settings.lock_max_connections = FLAGS_lock_max_connections;
  settings.idle_timeout_seconds = FLAGS_idle_timeout;
  settings.listen_backlog = FLAGS_listen_backlog;
  settings.protocol = cache_protocol();
  set_commands(&settings);
  settings.cas_enabled = !FLAGS_disable_cas;
  settings.evictions = !FLAGS_disable_evictions;
  settings.lru_crawler = FLAGS_lru_crawler;
  settings.stats_prefix_delimiter = FLAGS_stats_prefix_delimiter[0];
  settings.stats_detail = FLAGS_stats_detail;
  settings.watch_buffer_bytes = static_cast<size_t>(FLAGS_watch_buffer_kb) << 10;
  settings.coredumps_enabled = FLAGS_enable_coredumps;
  settings.tcp_keepalive_seconds = FLAGS_tcp_keepalive;
  settings.lock_service_max_locks_per_session = FLAGS_lock_service_max_locks_per_session;
  settings.lock_service_max_names = FLAGS_lock_service_max_names;
  settings.hash_seed = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  settings.fencing_token_floor =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
  set_cluster(&settings, parsed, files);
  set_replication(&settings);
  set_tls(&settings, parsed, files);
  return settings;
}

}  // namespace lockcached::config
