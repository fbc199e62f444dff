// What one load generator run does, read from the command line (gflags).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loadgen {

// kText and kBinary are memcached's; kEtcd and kRedis drive what users pick
// instead of a lock service (--mode=lockservice only): etcd's v3 lock API
// through its JSON gateway, Redis's SET NX PX with WAIT (lock_apis.h).
enum class Protocol { kText, kBinary, kEtcd, kRedis };

// How a worker thread moves bytes: an epoll loop with read and write calls,
// or io_uring (one io_uring_enter per loop turn for all its sends and
// receives).
enum class Io { kEpoll, kUring };

enum class Mode {
  kKv,           // gets (single or multi) and sets, --get_ratio of them gets
  kLockCycle,    // per connection, its own keys: lock, get, RaU (binary) / set + unlock (text)
  kLockService,  // named-lock service: lock + unlock, distinct names or --hot_names
};

struct Options {
  std::string host;
  int port = 0;
  Protocol protocol = Protocol::kText;
  Io io = Io::kEpoll;
  Mode mode = Mode::kKv;
  int connections = 0;
  int threads = 0;
  int depth = 0;
  double get_ratio = 0;
  int multiget = 0;
  uint64_t keys = 0;
  std::string key_prefix;
  bool zipf = false;
  double zipf_theta = 0;
  size_t value_size = 0;
  double duration_s = 0;
  uint64_t ops = 0;  // 0: run for duration_s
  bool preload = false;
  bool preload_only = false;
  int idle_connections = 0;
  int hot_names = 0;
  double lock_wait_s = 0;
  std::vector<int> server_pids;  // --server_pid and --more_server_pids: CPU time summed
  uint64_t seed = 0;
  bool quiet = false;
  bool tls = false;
  std::string tls_ca_file;  // empty: do not verify the server
};

// Parses and checks the flags; prints the problem and exits 2 when they do
// not make sense together.
Options parse_options(int* argc, char*** argv);

const char* to_string(Protocol protocol);
const char* to_string(Mode mode);
const char* to_string(Io io);

}  // namespace loadgen
