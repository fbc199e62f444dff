#include "options.h"

#include <gflags/gflags.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

DEFINE_string(host, "127.0.0.1", "server address (IPv4)");
DEFINE_int32(port, 11211, "server port (the lock port for --mode=lockservice)");
DEFINE_string(protocol, "text",
              "text or binary (memcached); with --mode=lockservice also etcd (v3 lock API with "
              "a lease, HTTP/1.1 JSON gateway on the client port) or redis (SET NX PX + WAIT 1, "
              "compare-and-delete script + WAIT 1)");
DEFINE_string(io, "epoll",
              "epoll: each thread an epoll loop with read and write calls; uring: each thread "
              "an io_uring loop, all sends of a turn and multishot receives into provided "
              "buffers, one io_uring_enter per turn (plain connections only, not --tls)");
DEFINE_string(mode, "kv",
              "kv: gets and sets; lock: lock cycles on distinct keys (binary: Lock, Get, "
              "RaU; text: lock, get, set, unlock); lockservice: lock + unlock on the named-lock "
              "service");
DEFINE_int32(connections, 32, "busy connections");
DEFINE_int32(threads, 1,
             "threads (one epoll or io_uring loop each); connections are spread over them");
DEFINE_int32(depth, 1, "requests in flight per connection (pipeline depth; 1 in lock modes)");
DEFINE_double(get_ratio, 0.9, "kv: fraction of requests that are gets, the rest are sets");
DEFINE_int32(multiget, 1, "kv: keys per get (text: one get line; binary: GetKQ... Noop)");
DEFINE_uint64(keys, 100000, "key space size");
DEFINE_string(key_prefix, "key:", "key names are this prefix and a fixed-width number");
DEFINE_string(distribution, "uniform", "key distribution: uniform or zipf");
DEFINE_double(zipf_theta, 0.99, "zipf exponent (not 1)");
DEFINE_uint64(value_size, 32, "value size in bytes");
DEFINE_double(duration_s, 10, "measured run length in seconds (when --ops is 0)");
DEFINE_uint64(ops, 0, "run exactly this many requests instead of for --duration_s");
DEFINE_bool(preload, true, "store every key once before the measured run (kv and lock modes)");
DEFINE_bool(preload_only, false, "store every key once, then exit");
DEFINE_int32(idle_connections, 0,
             "connections opened (each answers one version request) and held idle during the run");
DEFINE_int32(hot_names, 0,
             "lockservice: 0 for distinct names per connection, else every cycle locks one of "
             "this many names, waiting for it (text: lock NAME --lock_wait_s; etcd: its lock "
             "call waits; redis: a refused SET NX is sent again at once)");
DEFINE_double(lock_wait_s, 10, "lockservice with --hot_names: how long a lock request waits");
DEFINE_int32(server_pid, 0, "report this process's CPU time (/proc/PID/stat) over the run");
DEFINE_string(more_server_pids, "",
              "with --server_pid: also these processes (comma-separated), their CPU time added "
              "to its: every node of a cluster");
DEFINE_uint64(seed, 1, "random seed");
DEFINE_bool(quiet, false, "print only the RESULT line");
DEFINE_bool(tls, false,
            "speak TLS (OpenSSL) on every connection; the handshakes are done before the "
            "preload and the measured run");
DEFINE_string(tls_ca_file, "",
              "with --tls: verify the server's certificate against this CA file (PEM) and "
              "--host. Empty (the default): no verification, which is fine for a load "
              "generator on 127.0.0.1 talking to a server it was pointed at: it measures "
              "the encryption, not the trust");

namespace loadgen {
namespace {

[[noreturn]] void usage_error(const char* message) {
  std::fprintf(stderr, "lockcached-loadgen: %s\n", message);
  std::exit(2);
}

Protocol protocol_from_flag() {
  if (FLAGS_protocol == "text") return Protocol::kText;
  if (FLAGS_protocol == "binary") return Protocol::kBinary;
  if (FLAGS_protocol == "etcd") return Protocol::kEtcd;
  if (FLAGS_protocol == "redis") return Protocol::kRedis;
  usage_error("--protocol must be text, binary, etcd or redis");
}

Io io_from_flag() {
  if (FLAGS_io == "epoll") return Io::kEpoll;
  if (FLAGS_io == "uring") return Io::kUring;
  usage_error("--io must be epoll or uring");
}

Mode mode_from_flag() {
  if (FLAGS_mode == "kv") return Mode::kKv;
  if (FLAGS_mode == "lock") return Mode::kLockCycle;
  if (FLAGS_mode == "lockservice") return Mode::kLockService;
  usage_error("--mode must be kv, lock or lockservice");
}

std::vector<int> server_pids_from_flags() {
  std::vector<int> pids;
  if (FLAGS_server_pid > 0) pids.push_back(FLAGS_server_pid);
  std::istringstream list(FLAGS_more_server_pids);
  for (std::string pid; std::getline(list, pid, ',');) {
    pids.push_back(std::atoi(pid.c_str()));
    if (pids.back() <= 0) usage_error("--more_server_pids must list process ids");
  }
  if (pids.size() > 1 && FLAGS_server_pid <= 0) {
    usage_error("--more_server_pids needs --server_pid");
  }
  return pids;
}

void check(const Options& o) {
  if (o.connections < 1 || o.threads < 1 || o.depth < 1) {
    usage_error("--connections, --threads and --depth must be at least 1");
  }
  if (o.threads > o.connections) usage_error("--threads must not exceed --connections");
  if (o.mode != Mode::kKv && o.depth != 1) usage_error("lock modes run with --depth=1");
  if (o.multiget < 1 || o.multiget > 1000) usage_error("--multiget must be in 1..1000");
  if (o.get_ratio < 0 || o.get_ratio > 1) usage_error("--get_ratio must be in 0..1");
  if (o.keys < 1) usage_error("--keys must be at least 1");
  if (o.mode == Mode::kLockCycle && o.keys < static_cast<uint64_t>(o.connections)) {
    usage_error("--mode=lock needs --keys >= --connections (each connection owns its keys)");
  }
  if (o.key_prefix.size() > 200) usage_error("--key_prefix is too long");
  if (o.value_size < 1) usage_error("--value_size must be at least 1");
  if (o.zipf && (o.zipf_theta <= 0 || o.zipf_theta == 1)) {
    usage_error("--zipf_theta must be positive and not 1");
  }
  if (o.ops == 0 && o.duration_s <= 0) usage_error("give --duration_s > 0 or --ops");
  const bool lock_api = o.protocol == Protocol::kEtcd || o.protocol == Protocol::kRedis;
  if (o.mode == Mode::kLockService && o.protocol == Protocol::kBinary) {
    usage_error("the lock service speaks text only");
  }
  if (lock_api && o.mode != Mode::kLockService) {
    usage_error("--protocol=etcd and redis need --mode=lockservice");
  }
  if (lock_api && (o.tls || o.idle_connections > 0)) {
    usage_error("--protocol=etcd and redis run without --tls and --idle_connections");
  }
  if (!o.tls && !o.tls_ca_file.empty()) usage_error("--tls_ca_file needs --tls");
  if (o.tls && o.io == Io::kUring) {
    usage_error("--tls works with --io=epoll only (OpenSSL does the socket I/O); drop --io=uring");
  }
}

}  // namespace

Options parse_options(int* argc, char*** argv) {
  gflags::SetUsageMessage("load generator for lockcached, memcached and yrmcds (bench/README.md)");
  gflags::ParseCommandLineFlags(argc, argv, true);
  if (*argc > 1) usage_error("unexpected argument (flags are --name=value)");
  if (FLAGS_distribution != "uniform" && FLAGS_distribution != "zipf") {
    usage_error("--distribution must be uniform or zipf");
  }
  Options o;
  o.host = FLAGS_host;
  o.port = FLAGS_port;
  o.protocol = protocol_from_flag();
  o.io = io_from_flag();
  o.mode = mode_from_flag();
  o.connections = FLAGS_connections;
  o.threads = FLAGS_threads;
  o.depth = FLAGS_depth;
  o.get_ratio = FLAGS_get_ratio;
  o.multiget = FLAGS_multiget;
  o.keys = FLAGS_keys;
  o.key_prefix = FLAGS_key_prefix;
  o.zipf = FLAGS_distribution == "zipf";
  o.zipf_theta = FLAGS_zipf_theta;
  o.value_size = FLAGS_value_size;
  o.duration_s = FLAGS_duration_s;
  o.ops = FLAGS_ops;
  o.preload = FLAGS_preload && o.mode != Mode::kLockService;
  o.preload_only = FLAGS_preload_only;
  o.idle_connections = FLAGS_idle_connections;
  o.hot_names = FLAGS_hot_names;
  o.lock_wait_s = FLAGS_lock_wait_s;
  o.server_pids = server_pids_from_flags();
  o.seed = FLAGS_seed;
  o.quiet = FLAGS_quiet;
  o.tls = FLAGS_tls;
  o.tls_ca_file = FLAGS_tls_ca_file;
  check(o);
  return o;
}

const char* to_string(Protocol protocol) {
  switch (protocol) {
    case Protocol::kText:
      return "text";
    case Protocol::kBinary:
      return "binary";
    case Protocol::kEtcd:
      return "etcd";
    case Protocol::kRedis:
      return "redis";
  }
  return "?";
}

const char* to_string(Io io) {
  return io == Io::kEpoll ? "epoll" : "uring";
}

const char* to_string(Mode mode) {
  switch (mode) {
    case Mode::kKv:
      return "kv";
    case Mode::kLockCycle:
      return "lock";
    case Mode::kLockService:
      return "lockservice";
  }
  return "?";
}

}  // namespace loadgen
