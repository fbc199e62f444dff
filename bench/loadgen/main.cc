// lockcached-loadgen: drives a memcached-protocol server (or lockcached's
// named-lock service) and checks every reply; see bench/README.md.
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine.h"
#include "options.h"
#include "protocol.h"
#include "tls.h"

namespace loadgen {
namespace {

constexpr int kIdleBatch = 256;

// As many descriptors as allowed: 10,000 idle connections need them.
void raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

// utime + stime of a process in seconds; negative when it cannot be read.
double cpu_seconds(int pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(close_paren + 2));
  std::string field;
  double ticks = 0;
  for (int i = 0; i < 13 && fields >> field; ++i) {
    if (i == 11 || i == 12) ticks += std::stod(field);  // fields 14 and 15 of stat(5)
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The sum over the server's processes; negative when there are none or one
// cannot be read.
double cpu_seconds(const std::vector<int>& pids) {
  double sum = pids.empty() ? -1 : 0;
  for (const int pid : pids) {
    const double seconds = cpu_seconds(pid);
    if (seconds < 0) return -1;
    sum += seconds;
  }
  return sum;
}

bool read_exactly(Transport& stream, std::string& into, size_t size) {
  while (into.size() < size) {
    char chunk[512];
    const ssize_t n = stream.read(chunk, std::min(sizeof chunk, size - into.size()));
    if (n <= 0) return false;
    into.append(chunk, static_cast<size_t>(n));
  }
  return true;
}

// One version round trip, so that the server has surely accepted the
// connection before the measured run.
bool answers_version(Transport& stream, const Options& options, const Codec& codec) {
  Buffer request(64);
  codec.write(Request{Op::kVersion}, nullptr, request);
  if (stream.write(request.head(), request.size()) != static_cast<ssize_t>(request.size())) {
    return false;
  }
  std::string reply;
  if (options.protocol == Protocol::kBinary) {
    if (!read_exactly(stream, reply, 24)) return false;
    size_t body = 0;
    for (int i = 8; i < 12; ++i)
      body = body << 8 | static_cast<uint8_t>(reply[i]);
    return read_exactly(stream, reply, 24 + body) && static_cast<uint8_t>(reply[0]) == 0x81;
  }
  while (reply.size() < 2 || reply.compare(reply.size() - 2, 2, "\r\n") != 0) {
    if (!read_exactly(stream, reply, reply.size() + 1)) return false;
  }
  return reply.rfind("VERSION ", 0) == 0;
}

// Opens the idle connections in batches (connect all, then a version round
// trip on each), so the server's accept queue never overflows. With TLS each
// handshakes as it connects, on its blocking socket.
bool open_idle(const Options& options, const Codec& codec, ssl_ctx_st* tls,
               std::vector<Transport>& idle, std::string& error) {
  const timeval timeout{10, 0};
  while (static_cast<int>(idle.size()) < options.idle_connections) {
    const size_t first = idle.size();
    const int batch = std::min(kIdleBatch, options.idle_connections - static_cast<int>(first));
    for (int i = 0; i < batch; ++i) {
      Transport stream(connect_to(options, error));
      if (stream.fd() < 0) return false;
      setsockopt(stream.fd(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
      if (tls != nullptr && !stream.start_tls(tls, error)) return false;
      idle.push_back(std::move(stream));
    }
    for (size_t i = first; i < idle.size(); ++i) {
      if (!answers_version(idle[i], options, codec)) {
        error = "an idle connection got no VERSION reply (connection " + std::to_string(i) + ")";
        return false;
      }
    }
  }
  return true;
}

struct Run {
  Stats stats;
  double seconds = 0;
  double server_cpu = -1;
  double own_cpu = 0;  // this process's CPU seconds: near threads x seconds means saturated
  std::string tls;     // the TLS version and cipher, "" when plain
};

double own_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

Run run_phase(std::vector<std::unique_ptr<Worker>>& workers, const Options& options, Phase phase) {
  const bool timed = phase == Phase::kMeasure && options.ops == 0;
  const auto threads = static_cast<uint64_t>(options.threads);
  const double cpu_before = cpu_seconds(options.server_pids);
  const double own_before = own_cpu_seconds();
  const int64_t start = now_ns();
  const int64_t deadline = timed ? start + static_cast<int64_t>(options.duration_s * 1e9) : 0;
  std::vector<Stats> stats(workers.size());
  std::vector<std::thread> threads_running;
  for (size_t t = 0; t < workers.size(); ++t) {
    uint64_t quota = 0;
    if (phase == Phase::kMeasure && options.ops > 0) {
      quota = options.ops / threads + (t < options.ops % threads ? 1 : 0);
    }
    threads_running.emplace_back(
        [&, t, quota] { stats[t] = workers[t]->run(phase, deadline, quota); });
  }
  Run run;
  if (timed) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(deadline - now_ns()));
    run.server_cpu = cpu_seconds(options.server_pids) - cpu_before;
  }
  for (auto& thread : threads_running)
    thread.join();
  run.own_cpu = own_cpu_seconds() - own_before;
  if (!timed) run.server_cpu = cpu_seconds(options.server_pids) - cpu_before;
  run.seconds = static_cast<double>((timed ? deadline : now_ns()) - start) / 1e9;
  run.tls = workers.front()->tls_name();
  if (cpu_before < 0) run.server_cpu = -1;
  for (const Stats& s : stats)
    run.stats.merge(s);
  return run;
}

double us(uint64_t ns) {
  return static_cast<double>(ns) / 1000.0;
}

void print_human(const Options& o, const Run& run) {
  const Stats& s = run.stats;
  std::printf("lockcached-loadgen: %s %s, %d connections x depth %d, %d thread(s) (%s), %.2f s\n",
              to_string(o.mode), to_string(o.protocol), o.connections, o.depth, o.threads,
              to_string(o.io), run.seconds);
  std::printf("  requests %" PRIu64 " (%.0f/s)", s.ops, static_cast<double>(s.ops) / run.seconds);
  if (s.cycles > 0) {
    std::printf("  cycles %" PRIu64 " (%.0f/s)", s.cycles,
                static_cast<double>(s.cycles) / run.seconds);
  }
  if (s.retries > 0) std::printf("  lock retries %" PRIu64, s.retries);
  std::printf("  hits %" PRIu64 " misses %" PRIu64 "  errors %" PRIu64 " mismatches %" PRIu64 "\n",
              s.hits, s.misses, s.errors, s.mismatches);
  std::printf("  latency us: p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  mean %.1f\n",
              us(s.latency.percentile(0.5)), us(s.latency.percentile(0.99)),
              us(s.latency.percentile(0.999)), us(s.latency.max()), s.latency.mean() / 1000);
  if (s.cycle_latency.count() > 0) {
    std::printf("  cycle latency us: p50 %.1f  p99 %.1f  p99.9 %.1f\n",
                us(s.cycle_latency.percentile(0.5)), us(s.cycle_latency.percentile(0.99)),
                us(s.cycle_latency.percentile(0.999)));
  }
  if (run.server_cpu >= 0 && s.ops > 0) {
    std::printf("  server cpu %.2f s, %.2f us per request\n", run.server_cpu,
                run.server_cpu * 1e6 / static_cast<double>(s.ops));
  }
  std::printf("  load generator cpu %.2f s (%.0f%% of its %d thread(s))", run.own_cpu,
              100 * run.own_cpu / (run.seconds * o.threads), o.threads);
  if (s.ops > 0) {
    std::printf(", %.2f us per request", run.own_cpu * 1e6 / static_cast<double>(s.ops));
  }
  std::printf("\n");
  if (!run.tls.empty()) std::printf("  tls %s\n", run.tls.c_str());
  if (!s.first_problem.empty()) std::printf("  first problem: %s\n", s.first_problem.c_str());
}

void print_json(const Options& o, const Run& run, bool preload) {
  const Stats& s = run.stats;
  const double per_op =
      run.server_cpu >= 0 && s.ops > 0 ? run.server_cpu * 1e6 / static_cast<double>(s.ops) : -1;
  const double own_per_op = s.ops > 0 ? run.own_cpu * 1e6 / static_cast<double>(s.ops) : -1;
  std::printf(
      "RESULT {\"phase\":\"%s\",\"mode\":\"%s\",\"protocol\":\"%s\",\"connections\":%d,"
      "\"idle_connections\":%d,\"threads\":%d,\"depth\":%d,\"multiget\":%d,\"value_size\":%zu,"
      "\"keys\":%" PRIu64 ",\"seconds\":%.4f,\"ops\":%" PRIu64
      ",\"ops_per_s\":%.1f,"
      "\"cycles\":%" PRIu64 ",\"cycles_per_s\":%.1f,\"retries\":%" PRIu64 ",\"hits\":%" PRIu64
      ",\"misses\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"mismatches\":%" PRIu64
      ",\"bytes_out\":%" PRIu64 ",\"bytes_in\":%" PRIu64
      ",\"p50_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,\"max_us\":%.2f,\"mean_us\":%.2f,"
      "\"cycle_p50_us\":%.2f,\"cycle_p99_us\":%.2f,\"cycle_p999_us\":%.2f,\"cycle_mean_us\":%.2f,"
      "\"server_cpu_s\":%.4f,\"server_cpu_us_per_op\":%.4f,\"loadgen_cpu_s\":%.4f,"
      "\"loadgen_cpu_us_per_op\":%.4f,\"io\":\"%s\",\"tls\":\"%s\"}\n",
      preload ? "preload" : "measure", to_string(o.mode), to_string(o.protocol), o.connections,
      o.idle_connections, o.threads, o.depth, o.multiget, o.value_size, o.keys, run.seconds, s.ops,
      static_cast<double>(s.ops) / run.seconds, s.cycles,
      static_cast<double>(s.cycles) / run.seconds, s.retries, s.hits, s.misses, s.errors,
      s.mismatches, s.bytes_out, s.bytes_in, us(s.latency.percentile(0.5)),
      us(s.latency.percentile(0.99)), us(s.latency.percentile(0.999)), us(s.latency.max()),
      s.latency.mean() / 1000, us(s.cycle_latency.percentile(0.5)),
      us(s.cycle_latency.percentile(0.99)), us(s.cycle_latency.percentile(0.999)),
      s.cycle_latency.mean() / 1000, run.server_cpu, per_op, run.own_cpu, own_per_op,
      to_string(o.io), run.tls.c_str());
}

int fail(const std::string& message) {
  std::fprintf(stderr, "lockcached-loadgen: %s\n", message.c_str());
  return 1;
}

int run_main(int argc, char** argv) {
  const Options options = parse_options(&argc, &argv);
  raise_descriptor_limit();
  const Codec codec(options);
  std::string error;
  TlsContext tls;
  if (options.tls) {
    tls = make_tls_context(options, error);
    if (tls == nullptr) return fail(error);
  }
  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < options.threads; ++t) {
    workers.push_back(std::make_unique<Worker>(options, codec, tls.get(), t));
    if (!workers.back()->connect(error)) return fail(error);
  }
  if (options.preload || options.preload_only) {
    const Run preload = run_phase(workers, options, Phase::kPreload);
    if (preload.stats.errors + preload.stats.mismatches > 0) {
      return fail("preload failed: " + preload.stats.first_problem);
    }
    if (options.preload_only) {
      print_json(options, preload, true);
      return 0;
    }
  }
  if (codec.needs_setup()) {
    const Run setup = run_phase(workers, options, Phase::kSetup);
    if (setup.stats.errors + setup.stats.mismatches > 0) {
      return fail("setup failed: " + setup.stats.first_problem);
    }
  }
  std::vector<Transport> idle;
  if (!open_idle(options, codec, tls.get(), idle, error)) {
    return fail("idle connections: " + error);
  }
  const Run run = run_phase(workers, options, Phase::kMeasure);
  idle.clear();
  if (!options.quiet) print_human(options, run);
  print_json(options, run, false);
  std::fflush(stdout);
  const Stats& s = run.stats;
  if (s.errors + s.mismatches > 0) return fail("FAILED: " + s.first_problem);
  if (s.ops == 0) return fail("FAILED: no request was answered");
  return 0;
}

}  // namespace
}  // namespace loadgen

int main(int argc, char** argv) {
  return loadgen::run_main(argc, argv);
}
