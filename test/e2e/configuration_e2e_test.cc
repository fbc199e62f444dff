// Operations against the real binary: a configuration mistake stops the
// server with exit status 64 and one line naming it; signals; memcached's
// -d and -P as Debian's /etc/memcached.conf uses them; the lock port's own
// connection budget; glog's files across SIGHUP, logrotate and a stop.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <poll.h>
#include <pwd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server_process.h"

namespace {

using namespace std::chrono_literals;
using e2e::Client;
using e2e::ServerProcess;
using e2e::TempDir;
using e2e::free_port;
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// What a command printed and how it ended.
struct Outcome {
  std::optional<int> wait_status;  // nullopt: still running after the timeout
  std::string output;              // stdout and stderr
  bool exited_with(int code) const {
    return wait_status && WIFEXITED(*wait_status) && WEXITSTATUS(*wait_status) == code;
  }
};

// Runs `program args` to its end. Output goes to a file, not a pipe: a
// daemon keeps its inherited descriptors, and a pipe would not end while it
// lives.
Outcome run(const std::vector<std::string>& command, std::chrono::milliseconds timeout = 20s) {
  TempDir dir;
  fs::path output = dir.path() / "output";
  pid_t child = fork();
  if (child == 0) {
    int fd = open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    std::vector<char*> argv;
    for (const std::string& arg : command)
      argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  Outcome outcome;
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  pollfd poll_fd{pidfd, POLLIN, 0};
  if (pidfd >= 0 && poll(&poll_fd, 1, static_cast<int>(timeout.count())) == 1) {
    int status = 0;
    if (waitpid(child, &status, 0) == child) outcome.wait_status = status;
  } else {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  if (pidfd >= 0) close(pidfd);
  outcome.output = read_file(output);
  return outcome;
}

Outcome run_server(std::vector<std::string> args) {
  args.insert(args.begin(), e2e::server_binary());
  return run(args);
}

// Starting with these arguments must fail with EX_USAGE and say `message`
// in one line.
void expect_configuration_error(const std::vector<std::string>& args,
                                const std::string& message) {
  Outcome outcome = run_server(args);
  EXPECT_TRUE(outcome.exited_with(64)) << e2e::describe_wait_status(outcome.wait_status) << "\n"
                                       << outcome.output;
  EXPECT_NE(outcome.output.find(message), std::string::npos) << outcome.output;
  EXPECT_EQ(std::count(outcome.output.begin(), outcome.output.end(), '\n'), 1) << outcome.output;
}

TEST(ConfigurationE2e, AnUnknownFlagInTheFlagfileStopsTheStartNamingFileAndLine) {
  TempDir dir;
  fs::path conf = dir.path() / "lockcached.conf";
  write_file(conf, "# the packaged file, with a typo\n--port=0\n\n--listne=127.0.0.1\n");
  expect_configuration_error({"--flagfile=" + conf.string()},
                             "lockcached: unknown flag --listne (" + conf.string() + ":4)");
  write_file(conf, "--memory_limt_mb=64\n");
  expect_configuration_error({"--port=0", "--flagfile", conf.string()},
                             "unknown flag --memory_limt_mb (" + conf.string() + ":1)");
}

TEST(ConfigurationE2e, AnUnknownFlagOnTheCommandLineStopsTheStart) {
  expect_configuration_error({"--port=0", "--bogus=1"}, "unknown flag --bogus (command line)");
  expect_configuration_error({"--port=0", "stray"}, "unexpected argument 'stray'");
}

TEST(ConfigurationE2e, ABadValueStopsTheStartNamingFlagAndOrigin) {
  TempDir dir;
  fs::path conf = dir.path() / "lockcached.conf";
  write_file(conf, "--port=0\n--memory_limit_mb=lots\n");
  expect_configuration_error({"--flagfile=" + conf.string()},
                             "bad value 'lots' for --memory_limit_mb (" + conf.string() + ":2)");
  write_file(conf, "--port=0\n--max_connections=0\n");
  expect_configuration_error({"--flagfile=" + conf.string()},
                             "--max_connections: must be at least 1 (" + conf.string() + ":2)");
  expect_configuration_error({"--port=70000"}, "--port: must be 0..65535 (command line)");
  expect_configuration_error({"-p", "0", "--daemonize=maybe"}, "bad value 'maybe' for --daemonize");
  expect_configuration_error({"--port=0", "--io=poll"}, "--io: must be auto, epoll or uring (command line)");
  expect_configuration_error({"--port=0", "--tcp_keepalive=-1"},
                             "--tcp_keepalive: must be 0..32767 (command line)");
  expect_configuration_error({"--port=0", "--tcp_keepalive=32768"},
                             "--tcp_keepalive: must be 0..32767 (command line)");
  // memcached refuses it too (exit 64): no such item could be stored.
  expect_configuration_error({"--port=0", "-m", "2", "-I", "4m"},
                             "--max_item_size: must be at most half of --memory_limit_mb (2 MB)");
  expect_configuration_error({"--port=0", "--logtostderr=false", "--log_dir=/nonexistent/logs"},
                             "--log_dir: cannot write to /nonexistent/logs: No such file or "
                             "directory (command line)");
  expect_configuration_error({"--port=0", "--io=epoll", "--uring_sqpoll"},
                             "--uring_sqpoll: needs --io=uring or --io=auto (command line)");
}

// An environment variable for the servers this test starts, unset after.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedVariable() { unsetenv(name_); }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  const char* name_;
};

// gflags' --fromenv sets flags from $FLAGS_name; what gflags calls an
// error there (a variable not set, an unknown flag, a bad value) stops
// the start as any bad flag does, instead of a start with the default.
TEST(ConfigurationE2e, FromenvMistakesStopTheStart) {
  expect_configuration_error({"--port=0", "--fromenv=memory_limit_mb"},
                             "lockcached: --fromenv=memory_limit_mb (command line): "
                             "FLAGS_memory_limit_mb not found in environment");
  expect_configuration_error({"--port=0", "--fromenv=bogusflag"},
                             "lockcached: unknown flag --bogusflag (--fromenv=bogusflag, command "
                             "line)");
  ScopedVariable variable("FLAGS_memory_limit_mb", "abc");
  expect_configuration_error({"--port=0", "--fromenv=memory_limit_mb"},
                             "lockcached: bad value 'abc' for --memory_limit_mb "
                             "(FLAGS_memory_limit_mb in the environment)");
}

TEST(ConfigurationE2e, FromenvAndTryfromenvSetFlags) {
  ScopedVariable variable("FLAGS_memory_limit_mb", "32");
  for (const char* option : {"--fromenv=memory_limit_mb", "--tryfromenv=memory_limit_mb,v"}) {
    ServerProcess server;
    ASSERT_TRUE(server.start({option}));
    Client client;
    ASSERT_TRUE(client.connect(server.port()));
    EXPECT_EQ(client.stats("settings")["maxbytes"], std::to_string(32 << 20)) << option;
  }
}

// A users file that cannot be read or parsed stops the start, naming file
// and line; memcached's -S means nothing without one.
TEST(ConfigurationE2e, AuthFileMistakesStopTheStart) {
  TempDir dir;
  fs::path users = dir.path() / "users";
  write_file(users, "alice:secret\nbob\n");
  expect_configuration_error({"--port=0", "-Y", users.string()},
                             "--auth_file: " + users.string() +
                                 ", line 2: no ':' between user and password");
  expect_configuration_error({"--port=0", "--auth_file=" + users.string() + ".missing"},
                             "--auth_file: " + users.string() + ".missing: cannot read it");
  // A directory: the read fails (libstdc++ throws there; it aborted the
  // server before).
  expect_configuration_error({"--port=0", "--auth_file=" + dir.path().string()},
                             "--auth_file: " + dir.path().string() + ": cannot read it: Is a directory");
  expect_configuration_error({"--port=0", "-S"},
                             "--enable_sasl: (memcached's -S) needs --auth_file (-Y): lockcached "
                             "checks SASL PLAIN against that file");
}

// A virtual IP is an address, never a name: DNS must not decide who is master.
TEST(ConfigurationE2e, ReplicationFlagsAreChecked) {
  expect_configuration_error({"--port=0", "--virtual_ip=lockcached.example"},
                             "--virtual_ip: must be a numeric IPv4 or IPv6 address: "
                             "lockcached.example (command line)");
  expect_configuration_error({"--port=0", "--repl_port=0"}, "--repl_port: must be 1..65535");
  expect_configuration_error({"--port=0", "--repl_timeout=1"}, "--repl_timeout: must be 2..3600");
  expect_configuration_error(
      {"--port=0", "--virtual_ip=192.0.2.100", "--max_item_size=16777216"},
      "--repl_buffer_size: must hold at least 4 x --max_item_size with --virtual_ip");
  // Clients reach the master on the virtual IP: --listen must answer there.
  expect_configuration_error({"--port=0", "--virtual_ip=192.0.2.100", "--listen=127.0.0.1"},
                             "--virtual_ip: 192.0.2.100 is not covered by --listen=127.0.0.1: a "
                             "replica must answer on it the moment it moves there "
                             "(--listen=0.0.0.0)");
  expect_configuration_error({"--port=0", "--virtual_ip=2001:db8::1", "--listen=0.0.0.0"},
                             "--virtual_ip: 2001:db8::1 is not covered by --listen=0.0.0.0: a "
                             "replica must answer on it the moment it moves there "
                             "(--listen=::)");
  expect_configuration_error({"--port=0", "--virtual_ip=192.0.2.100", "-s", "/tmp/lc.sock"},
                             "--virtual_ip: needs the cache on TCP, but --unix_socket serves it "
                             "instead");
}

// A cluster member that would start wrong does not start: one line, exit 64.
TEST(ConfigurationE2e, ClusterFlagsAreChecked) {
  TempDir dir;
  fs::path secret = dir.path() / "secret";
  write_file(secret, "sixteen bytes or more\n");
  fs::path short_secret = dir.path() / "short";
  write_file(short_secret, "short\n");
  std::string cluster = "--cluster=1@127.0.0.1:21501,2@127.0.0.1:21502";
  std::vector<std::string> good = {"--port=0", cluster, "--node_id=1",
                                   "--data_dir=" + dir.path().string(),
                                   "--cluster_secret_file=" + secret.string()};
  auto with = [&](std::vector<std::string> args, const std::string& extra) {
    args.push_back(extra);
    return args;
  };
  expect_configuration_error(with(good, "--cluster=1@db.example:1"),
                             "--cluster: '1@db.example:1' is not ID@IPV4:PORT (ID 1 or more)");
  expect_configuration_error(with(good, "--node_id=3"),
                             "--node_id: must be one of the ids in --cluster");
  expect_configuration_error(with(good, "--data_dir=/nonexistent/lockcached"),
                             "--data_dir: no such directory: /nonexistent/lockcached");
  expect_configuration_error(with(good, "--cluster_secret_file=" + short_secret.string()),
                             "--cluster_secret_file: " + short_secret.string() +
                                 ": the secret must be 16 bytes or more");
  expect_configuration_error(with(good, "--virtual_ip=192.0.2.100"),
                             "--virtual_ip: cannot be used with --cluster");
  // Its leader serves the cache's replicas, with the same buffers.
  expect_configuration_error(with(good, "--max_item_size=16777216"),
                             "--repl_buffer_size: must hold at least 4 x --max_item_size with "
                             "--cluster");
  expect_configuration_error({"--port=0", "--data_dir=" + dir.path().string()},
                             "--data_dir: is set, but --cluster is not");
  expect_configuration_error({"--port=0", cluster, "--node_id=1",
                              "--data_dir=" + dir.path().string()},
                             "--cluster_secret_file: is needed with --cluster");

  // --user: the server opens its log as root and writes it as that user.
  fs::path data = dir.path() / "data";
  fs::create_directories(data / "raft");
  std::vector<std::string> as_nobody = {"--port=0", cluster, "--node_id=1",
                                        "--data_dir=" + data.string(), "--user=nobody",
                                        "--cluster_secret_file=" + short_secret.string()};
  expect_configuration_error(as_nobody, "--data_dir: " + data.string() +
                                            " is not owned by --user nobody: chown -R nobody " +
                                            data.string());
  ASSERT_EQ(chown(data.c_str(), getpwnam("nobody")->pw_uid, 0), 0);
  expect_configuration_error(as_nobody, "--data_dir: " + (data / "raft").string() +
                                            " is not owned by --user nobody: chown -R nobody " +
                                            data.string());
  ASSERT_EQ(chown((data / "raft").c_str(), getpwnam("nobody")->pw_uid, 0), 0);
  // Past the check: the next problem is the secret's.
  expect_configuration_error(as_nobody, "--cluster_secret_file: " + short_secret.string() +
                                            ": the secret must be 16 bytes or more");
}

// A cluster's data directory is one node's, at one address: a start that
// would speak for another node with it, or put the node where the stored
// configuration says it is not, stops at once instead of joining with
// votes and entries the node never cast or wrote.
TEST(ConfigurationE2e, AClusterDataDirectoryIsOneNodesAtOneAddress) {
  TempDir dir;
  fs::path secret = dir.path() / "secret";
  write_file(secret, "sixteen bytes or more\n");
  fs::path data = dir.path() / "data";
  fs::create_directories(data);
  std::vector<uint16_t> ports = e2e::free_ports(3);
  auto node = [&](int id, uint16_t cluster_port) {
    return std::vector<std::string>{
        "--port=0", "--lock_port=-1", "--repl_port=" + std::to_string(ports[2]),
        "--cluster=" + std::to_string(id) + "@127.0.0.1:" + std::to_string(cluster_port),
        "--node_id=" + std::to_string(id), "--data_dir=" + data.string(),
        "--cluster_secret_file=" + secret.string()};
  };
  {
    ServerProcess first;  // a cluster of one, which claims the directory
    ASSERT_TRUE(first.start(node(1, ports[0])));
    ASSERT_TRUE(first.stop(SIGTERM, 20s).has_value());
  }
  EXPECT_EQ(read_file(data / "member").rfind("lockcached member 1 incarnation ", 0), 0u);
  expect_configuration_error(node(2, ports[0]), "--data_dir: " + data.string() +
                                                     " holds node 1's state, not node 2's");
  Outcome moved = run_server(node(1, ports[1]));
  EXPECT_TRUE(moved.exited_with(64)) << e2e::describe_wait_status(moved.wait_status);
  EXPECT_NE(moved.output.find("node 1 is at 127.0.0.1:" + std::to_string(ports[0]) +
                              " in its configuration, not at 127.0.0.1:" +
                              std::to_string(ports[1]) + " (--cluster)"),
            std::string::npos)
      << moved.output;
  // Without the claim (a directory from before it): the configuration
  // still tells that node 3 was never in it.
  fs::remove(data / "member");
  Outcome stranger = run_server(node(3, ports[0]));
  EXPECT_TRUE(stranger.exited_with(64)) << e2e::describe_wait_status(stranger.wait_status);
  EXPECT_NE(stranger.output.find("node 3 is not in its configuration"), std::string::npos)
      << stranger.output;
  EXPECT_FALSE(fs::exists(data / "member")) << "claimed for a node refused";
}

TEST(ConfigurationE2e, AMissingFlagfileStopsTheStart) {
  expect_configuration_error({"--flagfile=/nonexistent/lockcached.conf"},
                             "cannot read flagfile /nonexistent/lockcached.conf (command line): "
                             "No such file or directory");
}

TEST(ConfigurationE2e, AnUnknownUserStopsTheStart) {
  expect_configuration_error({"--port=0", "-u", "no-such-user-here"},
                             "--user: no such user: no-such-user-here");
}

// Not a configuration mistake: its own status, 1, so that systemd retries
// (a server that is stopping still holds its port for a moment).
TEST(ConfigurationE2e, APortInUseExitsOne) {
  ServerProcess first;
  ASSERT_TRUE(first.start());
  Outcome outcome = run_server({"--port=" + std::to_string(first.port()), "--lock_port=0",
                                "--listen=127.0.0.1"});
  EXPECT_TRUE(outcome.exited_with(1)) << e2e::describe_wait_status(outcome.wait_status);
  EXPECT_NE(outcome.output.find("cannot start: 127.0.0.1:" + std::to_string(first.port()) +
                                ": Address already in use"),
            std::string::npos)
      << outcome.output;
}

// A cluster member's own port too: libraft alone said "start: I/O error".
TEST(ConfigurationE2e, AClusterPortInUseExitsOneWithTheReason) {
  ServerProcess holder;  // its cache port is the cluster port taken
  ASSERT_TRUE(holder.start());
  TempDir dir;
  fs::path secret = dir.path() / "secret";
  write_file(secret, "sixteen bytes or more\n");
  std::string taken = "127.0.0.1:" + std::to_string(holder.port());
  std::vector<uint16_t> others = e2e::free_ports(2);
  Outcome outcome = run_server(
      {"--port=0", "--lock_port=-1", "--repl_port=" + std::to_string(others[0]),
       "--cluster=1@" + taken + ",2@127.0.0.1:" + std::to_string(others[1]), "--node_id=1",
       "--data_dir=" + dir.path().string(), "--cluster_secret_file=" + secret.string()});
  EXPECT_TRUE(outcome.exited_with(1)) << e2e::describe_wait_status(outcome.wait_status);
  EXPECT_NE(outcome.output.find("cannot start: --cluster: " + taken + ": Address already in use"),
            std::string::npos)
      << outcome.output;
}

// Two of the server's own listeners on one port: the configuration is at
// fault, not a port somebody else holds (exit 1 above).
TEST(ConfigurationE2e, TwoListenersOnOnePortStopTheStart) {
  std::string port = std::to_string(free_port());
  expect_configuration_error({"--port=" + port, "--lock_port=" + port},
                             "--lock_port: " + port + " is --port's too");
  expect_configuration_error({"--listen=127.0.0.1:" + port, "--lock_port=1", "--tls_port=" + port},
                             "--tls_port: " + port + " is --listen's too");
  // The lock port that follows the cache port is the one named (checked
  // before the TLS flags, so no certificate is needed to see it).
  std::string beside = std::to_string(std::stoi(port) + 189);
  expect_configuration_error({"--port=" + port, "--lock_tls_port=" + beside},
                             "--lock_port: " + beside + " is --lock_tls_port's too");
  // A cluster member's own cluster port too (it failed only once Raft had
  // started and written its directory).
  expect_configuration_error({"--port=0", "--lock_port=-1", "--repl_port=" + port,
                              "--cluster=1@127.0.0.1:" + port, "--node_id=1"},
                             "--cluster: " + port + " is --repl_port's too");
}

// Where the server may never listen, the configuration is at fault: exit
// 64 (lockcached.service does not restart) with the kernel's own reason.
TEST(ConfigurationE2e, AnAddressNotOnThisHostExits64) {
  std::string port = std::to_string(free_port());
  expect_configuration_error(
      {"--listen=192.0.2.1", "--port=" + port, "--lock_port=0"},
      "cannot start: 192.0.2.1:" + port + ": Cannot assign requested address");
  // memcached's -d: the starting command exits with the server's status.
  Outcome daemon = run_server({"-d", "-l", "192.0.2.1", "-p", port, "--lock_port=0"});
  EXPECT_TRUE(daemon.exited_with(64)) << e2e::describe_wait_status(daemon.wait_status) << "\n"
                                      << daemon.output;
}

TEST(ConfigurationE2e, AUnixSocketWhereNoneCanBeMadeExits64) {
  TempDir dir;
  expect_configuration_error({"--unix_socket=" + (dir.path() / "no/such/dir.sock").string()},
                             "no/such/dir.sock: No such file or directory");
  write_file(dir.path() / "file", "not a socket");
  expect_configuration_error({"--unix_socket=" + (dir.path() / "file").string()},
                             "file: exists and is not a socket");
  expect_configuration_error({"--unix_socket=/" + std::string(200, 'x')},
                             "--unix_socket: a unix socket's path may have 107 bytes at most");
  expect_configuration_error({"--unix_socket=/tmp/x.sock", "--unix_socket_mask=0800"},
                             "--unix_socket_mask: must be octal permission bits, 0 to 0777");
  expect_configuration_error({"-l", "notls:127.0.0.1"},
                             "--listen: notls: needs --tls (memcached's -Z)");
}

// `command` as the user nobody where this process can become it (root,
// with setpriv); else as it is, when it is not root itself. Empty when
// neither works.
std::vector<std::string> unprivileged(std::vector<std::string> command) {
  if (geteuid() != 0) return command;
  if (access("/usr/bin/setpriv", X_OK) != 0) return {};
  command.insert(command.begin(), {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                   "--clear-groups", "--inh-caps=-all"});
  return command;
}

TEST(ConfigurationE2e, APrivilegedPortOrPathWithoutPermissionExits64) {
  std::ifstream start_file("/proc/sys/net/ipv4/ip_unprivileged_port_start");
  int unprivileged_start = 1024;
  start_file >> unprivileged_start;
  std::vector<std::string> command =
      unprivileged({e2e::server_binary(), "--port=1", "--lock_port=0", "--listen=127.0.0.1"});
  if (command.empty() || unprivileged_start <= 1) {
    GTEST_SKIP() << "cannot run the server without the right to bind port 1 here (root without "
                    "setpriv, or net.ipv4.ip_unprivileged_port_start is "
                 << unprivileged_start << ")";
  }
  Outcome port = run(command);
  EXPECT_TRUE(port.exited_with(64)) << e2e::describe_wait_status(port.wait_status) << "\n"
                                    << port.output;
  EXPECT_NE(port.output.find("cannot start: 127.0.0.1:1: Permission denied"), std::string::npos)
      << port.output;

  // A directory the user may not write in (mkdtemp's are 0700; as nobody,
  // root's is out of reach, and a user's own made read-only).
  TempDir dir;
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  std::string socket = (dir.path() / "lockcached.sock").string();
  Outcome path = run(unprivileged({e2e::server_binary(), "--unix_socket=" + socket}));
  EXPECT_TRUE(path.exited_with(64)) << e2e::describe_wait_status(path.wait_status) << "\n"
                                    << path.output;
  EXPECT_NE(path.output.find("cannot start: " + socket + ": Permission denied"), std::string::npos)
      << path.output;
  fs::permissions(dir.path(), fs::perms::owner_all);
}

TEST(ConfigurationE2e, HelpListsOurFlagsFirstInGroupsAndExitsZero) {
  for (const char* flag : {"--help", "-h", "--helpshort"}) {
    Outcome outcome = run_server({flag});
    EXPECT_TRUE(outcome.exited_with(0)) << flag << ": "
                                        << e2e::describe_wait_status(outcome.wait_status);
    const std::string& help = outcome.output;
    size_t ports = help.find("Ports and addresses:");
    size_t port = help.find("--port=11211");
    size_t logging = help.find("Logging (glog):");
    ASSERT_NE(ports, std::string::npos) << help;
    EXPECT_LT(ports, port);
    EXPECT_LT(port, logging);
    EXPECT_NE(help.find("--lock_max_connections=1024"), std::string::npos);
    EXPECT_EQ(help.find("No modules matched"), std::string::npos);
    // glog's many flags are behind --helpfull, not here.
    EXPECT_EQ(help.find("alsologtoemail"), std::string::npos);
  }
  Outcome full = run_server({"--helpfull"});
  EXPECT_TRUE(full.exited_with(0));
  EXPECT_NE(full.output.find("alsologtoemail"), std::string::npos);
  Outcome version = run_server({"--version"});
  EXPECT_TRUE(version.exited_with(0));
  EXPECT_EQ(version.output.rfind("lockcached ", 0), 0u) << version.output;
}

// Waits until `stats settings` shows `name` = `value` (SIGHUP is answered
// by nothing a client could await).
bool setting_becomes(uint16_t port, const std::string& name, const std::string& value) {
  return e2e::eventually([&] {
    Client client;
    if (!client.connect(port)) return false;
    auto settings = client.stats("settings");
    auto found = settings.find(name);
    return found != settings.end() && found->second == value;
  });
}

// Rewrites the flagfile `conf` to `text`, then sends SIGHUP.
void sighup_with(const ServerProcess& server, const fs::path& conf, const std::string& text) {
  write_file(conf, text);
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
}

// Whether the server comes to log `text` (SIGHUP's only answer).
::testing::AssertionResult comes_to_log(const ServerProcess& server, const std::string& text) {
  if (e2e::eventually([&] { return server.log().find(text) != std::string::npos; })) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no \"" << text << "\" in\n" << server.log();
}

TEST(ConfigurationE2e, SighupKeepsServingAndRereadsTheRunTimeSettings) {
  TempDir dir;
  fs::path conf = dir.path() / "lockcached.conf";
  write_file(conf, "--memory_limit_mb=64\n--idle_timeout=0\n");
  ServerProcess server;
  ASSERT_TRUE(server.start({"--flagfile=" + conf.string()}));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  ASSERT_EQ(client.store("set", "kept", "value"), "STORED");
  EXPECT_EQ(client.stats("settings")["maxbytes"], std::to_string(64 << 20));

  sighup_with(server, conf, "--memory_limit_mb=32\n--idle_timeout=600\n--v=1\n");
  EXPECT_TRUE(setting_becomes(server.port(), "maxbytes", std::to_string(32 << 20)));
  EXPECT_TRUE(setting_becomes(server.port(), "idle_timeout", "600"));
  // Alive, same process, same data, same connection.
  EXPECT_EQ(client.get("kept"), "value");
  EXPECT_TRUE(comes_to_log(server, "SIGHUP: --memory_limit_mb 64 -> 32"));
  // --v=1 is in force: a new connection is logged.
  Client another;
  ASSERT_TRUE(another.connect(server.port()));
  EXPECT_TRUE(comes_to_log(server, " new cache connection"));

  // A mistake in the file at SIGHUP changes nothing and stops nothing.
  sighup_with(server, conf, "--memory_limit_mb=16\n--memory_limt=1\n");
  EXPECT_TRUE(comes_to_log(server, "SIGHUP: configuration unchanged: unknown flag --memory_limt"));
  EXPECT_EQ(client.stats("settings")["maxbytes"], std::to_string(32 << 20));
  EXPECT_EQ(client.get("kept"), "value");

  // A bad value names its file and line, as at start.
  sighup_with(server, conf, "--idle_timeout=0\n--memory_limit_mb=lots\n");
  EXPECT_TRUE(comes_to_log(server, "SIGHUP: configuration unchanged: bad value 'lots' for "
                                   "--memory_limit_mb (" + conf.string() + ":2)"));
}

// SIGHUP applies no value that the start would refuse: the rules between
// flags hold at a reload as at the start.
TEST(ConfigurationE2e, SighupRefusesWhatTheStartWouldRefuse) {
  TempDir dir;
  fs::path conf = dir.path() / "lockcached.conf";
  write_file(conf, "--memory_limit_mb=64\n");
  ServerProcess server;
  ASSERT_TRUE(server.start({"--flagfile=" + conf.string(), "--max_item_size=4194304"}));
  sighup_with(server, conf, "--memory_limit_mb=2\n");
  EXPECT_TRUE(comes_to_log(server, "SIGHUP: configuration unchanged: --max_item_size: must be at "
                                   "most half of --memory_limit_mb (2 MB)"));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  EXPECT_EQ(client.stats("settings")["maxbytes"], std::to_string(64 << 20));
  EXPECT_EQ(server.log().find("SIGHUP: --memory_limit_mb"), std::string::npos) << server.log();

  // A flag SIGHUP does not apply is checked all the same, as the start
  // checks it: the next start would refuse the file (exit 64, and systemd
  // would leave the service down), so SIGHUP applies nothing of it. Its
  // type, its range, the parse of its text.
  const std::pair<std::string, std::string> refused[] = {
      {"--max_item_size=abc",
       "bad value 'abc' for --max_item_size (" + conf.string() + ":2): expected a number"},
      {"--tls=bogus",
       "bad value 'bogus' for --tls (" + conf.string() + ":2): expected true or false"},
      {"--port=70000", "--port: must be 0..65535 (" + conf.string() + ":2)"},
      {"--io=fast", "--io: must be "},
      {"--listen=127.0.0.1:notaport", "--listen: "},
      {"--unix_socket_mask=999", "--unix_socket_mask: must be octal permission bits"},
  };
  for (const auto& [line, logged] : refused) {
    sighup_with(server, conf, "--memory_limit_mb=32\n" + line + "\n--idle_timeout=7\n");
    EXPECT_TRUE(comes_to_log(server, "SIGHUP: configuration unchanged: " + logged)) << line;
  }
  EXPECT_EQ(client.stats("settings")["maxbytes"], std::to_string(64 << 20));
  EXPECT_EQ(client.stats("settings")["idle_timeout"], "0");
  EXPECT_EQ(server.log().find("SIGHUP: --memory_limit_mb"), std::string::npos) << server.log();
  EXPECT_EQ(server.log().find("SIGHUP: --idle_timeout"), std::string::npos) << server.log();
  // The file mended, SIGHUP applies it.
  sighup_with(server, conf, "--memory_limit_mb=32\n--max_item_size=1048576\n");
  EXPECT_TRUE(setting_becomes(server.port(), "maxbytes", std::to_string(32 << 20)));
}

// A limit the start would take, but below what the shards the start made
// need for the largest items (Store::smallest_memory_limit: 16 shards of a
// 64 MB start, 1 MB items), waits for the next start; SIGHUP says so.
TEST(ConfigurationE2e, SighupKeepsALimitTooLowForTheShardsForTheNextStart) {
  TempDir dir;
  fs::path conf = dir.path() / "lockcached.conf";
  write_file(conf, "--memory_limit_mb=64\n");
  ServerProcess server;
  ASSERT_TRUE(server.start({"--flagfile=" + conf.string()}));
  sighup_with(server, conf, "--memory_limit_mb=8\n");
  EXPECT_TRUE(comes_to_log(server, "SIGHUP: --memory_limit_mb 8 takes effect at the next start"));
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  EXPECT_EQ(client.stats()["limit_maxbytes"], std::to_string(64 << 20));
  const std::string large(1000 * 1000, 'L');
  EXPECT_EQ(client.store("set", "large", large), "STORED");
}

// A comment may follow a value after a blank; a '#' inside a value stays.
TEST(ConfigurationE2e, AFlagfileLineMayEndInAComment) {
  TempDir dir;
  fs::path conf = dir.path() / "lockcached.conf";
  write_file(conf, "--listen=127.0.0.1  # loopback only\n"
                   "--memory_limit_mb=32\t# small\n"
                   "--pid_file=" + (dir.path() / "a#b.pid").string() + "\n");
  ServerProcess server;
  ASSERT_TRUE(server.start({"--flagfile=" + conf.string()})) << server.log();
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  std::map<std::string, std::string> settings = client.stats("settings");
  EXPECT_EQ(settings["maxbytes"], std::to_string(32 << 20));
  EXPECT_EQ(settings["inter"], "127.0.0.1");
  EXPECT_TRUE(e2e::eventually([&] { return fs::exists(dir.path() / "a#b.pid"); }));
}

TEST(ConfigurationE2e, SigusrOneStopsCleanly) {
  ServerProcess server;
  ASSERT_TRUE(server.start());
  Client client;
  ASSERT_TRUE(client.connect(server.port()));
  ASSERT_EQ(client.store("set", "k", "v"), "STORED");
  std::optional<int> status = server.stop(SIGUSR1);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << e2e::describe_wait_status(status);
  EXPECT_TRUE(server.wait_for_output_end(5s));
  EXPECT_NE(server.log().find("graceful shutdown"), std::string::npos) << server.log();
  EXPECT_NE(server.log().find("] stopped"), std::string::npos) << server.log();
}

// The single glog INFO file in `dir` (not the symlink, not rotated copies).
std::optional<fs::path> info_log(const fs::path& dir) {
  std::optional<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_symlink() && entry.is_regular_file() &&
        entry.path().filename().string().find(".log.INFO.") != std::string::npos) {
      found = entry.path();
    }
  }
  return found;
}

// glog buffers INFO lines in files for --logbufsecs (30 s by default): a
// signal must flush them, and the file logrotate rotated keeps receiving
// lines. Uses the logrotate configuration the package installs, pointed
// at a scratch directory.
TEST(ConfigurationE2e, LogFilesSurviveSighupLogrotateAndStop) {
  const char* logrotate = "/usr/sbin/logrotate";
  ASSERT_EQ(access(logrotate, X_OK), 0) << "logrotate is part of the test command's packages";
  TempDir dir;
  fs::path logs = dir.path() / "logs";
  fs::create_directory(logs);
  ServerProcess server;
  // alsologtostderr: the harness reads the "Listening on" line from stderr.
  ASSERT_TRUE(server.start({"--logtostderr=false", "--alsologtostderr", "--log_dir=" + logs.string(),
                            "--v=1"}));
  std::optional<fs::path> live = info_log(logs);
  ASSERT_TRUE(live);

  // A buffered line (a connection opening) reaches the file at SIGHUP.
  Client first;
  ASSERT_TRUE(first.connect(server.port()));
  ASSERT_EQ(first.request("version").rfind("VERSION", 0), 0u);
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  EXPECT_TRUE(e2e::eventually([&] {
    std::string text = read_file(*live);
    return text.find(" new cache connection") != std::string::npos &&
           text.find("SIGHUP: configuration re-read") != std::string::npos;
  }));

  // The shipped rotation (copytruncate), with its path made this test's.
  std::string shipped = read_file(fs::path(LOCKCACHED_SOURCE_DIR) / "etc/lockcached.logrotate");
  size_t path_at = shipped.find("/var/log/lockcached/");
  ASSERT_NE(path_at, std::string::npos);
  shipped.replace(path_at, std::string("/var/log/lockcached/").size(), logs.string() + "/");
  size_t group_at = shipped.find("createolddir 0750 root adm");
  ASSERT_NE(group_at, std::string::npos);
  shipped.replace(group_at, std::string("createolddir 0750 root adm").size(),
                  "createolddir 0750");
  write_file(dir.path() / "logrotate.conf", shipped);
  chmod((dir.path() / "logrotate.conf").c_str(), 0644);
  Outcome rotated = run({logrotate, "--force", "--state", (dir.path() / "state").string(),
                         (dir.path() / "logrotate.conf").string()});
  ASSERT_TRUE(rotated.exited_with(0)) << rotated.output;
  fs::path copy = logs / "old" / (live->filename().string() + ".1");
  ASSERT_TRUE(fs::exists(copy)) << rotated.output;
  EXPECT_NE(read_file(copy).find(" new cache connection"), std::string::npos);

  // After the rotation: new lines land in the live file, and the stop
  // flushes what glog still buffered.
  Client second;
  ASSERT_TRUE(second.connect(server.port()));
  ASSERT_EQ(second.request("version").rfind("VERSION", 0), 0u);
  std::optional<int> status = server.stop(SIGTERM);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  std::string after = read_file(*live);
  EXPECT_NE(after.find(" new cache connection"), std::string::npos) << after;
  EXPECT_NE(after.find("] stopped"), std::string::npos) << after;
  EXPECT_NE(after[0], '\0') << "copytruncate left a hole at the start of the file";
}

// Debian's /etc/memcached.conf, as start-memcached passes it on: -d and -P
// with the usual -m -p -u -l.
TEST(ConfigurationE2e, DebianMemcachedConfDaemonizesAndWritesThePidFile) {
  TempDir dir;
  // Writable by the user it becomes, so that it can remove its pid file.
  chmod(dir.path().c_str(), 0777);
  fs::path pid_path = dir.path() / "memcached.pid";
  uint16_t port = free_port();
  std::vector<std::string> args = {"-d", "-m", "64", "-p", std::to_string(port), "-l",
                                   "127.0.0.1", "-P", pid_path.string(), "--lock_port=0"};
  bool as_root = geteuid() == 0;
  if (as_root) {
    args.insert(args.end(), {"-u", "nobody"});
  }
  Outcome started = run_server(args);
  // The starter returns once the daemon serves.
  ASSERT_TRUE(started.exited_with(0)) << e2e::describe_wait_status(started.wait_status) << "\n"
                                      << started.output;
  ASSERT_TRUE(fs::exists(pid_path));
  pid_t pid = static_cast<pid_t>(std::stol(read_file(pid_path)));
  ASSERT_GT(pid, 1);
  Client client;
  ASSERT_TRUE(client.connect(port));
  EXPECT_EQ(client.store("set", "k", "daemonized"), "STORED");
  EXPECT_EQ(client.get("k"), "daemonized");
  EXPECT_EQ(e2e::stat_u64(client.stats(), "pid"), static_cast<uint64_t>(pid));
  if (as_root) {
    EXPECT_NE(e2e::uid_of(pid), 0u);
  }
  // Detached: its own session, not a child of the starter's.
  EXPECT_EQ(getsid(pid), pid);

  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_TRUE(e2e::eventually([&] { return kill(pid, 0) != 0; }, 10s));
  EXPECT_TRUE(e2e::eventually([&] { return !fs::exists(pid_path); }));
}

// memcached only warns and runs without its pid file; here, as for any
// other flag, the mistake stops the start, named as the checks name flags.
TEST(ConfigurationE2e, APidFileThatCannotBeWrittenStopsTheStart) {
  TempDir dir;
  std::string missing = (dir.path() / "missing" / "x.pid").string();
  expect_configuration_error({"--port=0", "--pid_file=" + missing},
                             "lockcached: --pid_file: no such directory: " +
                                 (dir.path() / "missing").string() + " (command line)");
  expect_configuration_error({"-p", "0", "-P", missing}, "lockcached: --pid_file: no such directory");
  expect_configuration_error({"--port=0", "--pid_file=" + dir.path().string()},
                             "lockcached: --pid_file: must name a file, not a directory");
  // fopen would wait for a reader.
  fs::path fifo = dir.path() / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_configuration_error({"--port=0", "--pid_file=" + fifo.string()},
                             "lockcached: --pid_file: must name a regular file");
}

TEST(ConfigurationE2e, ADaemonThatCannotStartFailsItsStarter) {
  ServerProcess holder;
  ASSERT_TRUE(holder.start());
  TempDir dir;
  fs::path pid_path = dir.path() / "pid";
  Outcome started = run_server({"-d", "-p", std::to_string(holder.port()), "-l", "127.0.0.1",
                                "-P", pid_path.string(), "--lock_port=0"});
  EXPECT_TRUE(started.exited_with(1)) << e2e::describe_wait_status(started.wait_status);
  EXPECT_NE(started.output.find("Address already in use"), std::string::npos) << started.output;
  EXPECT_FALSE(fs::exists(pid_path));
}

// A cache port P for which P + 1 and the lock ports of both (+ 189) are
// free too; 0 when none is found.
uint16_t free_ports_for_two_instances() {
  for (int attempt = 0; attempt < 200; ++attempt) {
    uint16_t port = free_port();
    if (port > 65000) continue;
    bool all_free = true;
    for (int offset : {1, 189, 190})
      all_free = all_free && e2e::port_is_free(static_cast<uint16_t>(port + offset));
    if (all_free) return port;
  }
  return 0;
}

// The server on cache port `port` has its lock service beside it, on
// `port` + 189, and serves a lock there.
void expect_lock_port_beside(uint16_t port) {
  Client cache, locks;
  ASSERT_TRUE(cache.connect(port));
  uint16_t lock_port = static_cast<uint16_t>(port + 189);
  EXPECT_EQ(e2e::stat_u64(cache.stats("settings"), "lock_port"), lock_port);
  ASSERT_TRUE(locks.connect(lock_port));
  EXPECT_EQ(locks.request("lock deploy 0").rfind("200 Acquired", 0), 0u) << port;
}

// memcached's operators run instances side by side, each started with
// memcached's options alone: each gets the lock port beside its own cache
// port (cache port + 189), so the second starts as the first did.
TEST(ConfigurationE2e, TwoInstancesOnMemcachedsOptionsRunSideBySide) {
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  uint16_t first = free_ports_for_two_instances();
  ASSERT_NE(first, 0);
  std::vector<fs::path> pid_files;
  for (uint16_t port : {first, static_cast<uint16_t>(first + 1)}) {
    pid_files.push_back(dir.path() / ("memcached-" + std::to_string(port) + ".pid"));
    std::vector<std::string> args = {"-d", "-p", std::to_string(port), "-m", "64", "-l",
                                     "127.0.0.1", "-P", pid_files.back().string()};
    if (geteuid() == 0) args.insert(args.end(), {"-u", "nobody"});
    Outcome started = run_server(args);
    ASSERT_TRUE(started.exited_with(0)) << e2e::describe_wait_status(started.wait_status) << "\n"
                                        << started.output;
  }
  for (uint16_t port : {first, static_cast<uint16_t>(first + 1)})
    expect_lock_port_beside(port);
  for (const fs::path& pid_file : pid_files) {
    pid_t pid = static_cast<pid_t>(std::stol(read_file(pid_file)));
    ASSERT_GT(pid, 1);
    EXPECT_EQ(kill(pid, SIGTERM), 0);
    EXPECT_TRUE(e2e::eventually([&] { return kill(pid, 0) != 0; }, 10s));
  }
}

// The same with the cache port in memcached's -l HOST:PORT instead of -p:
// the lock port follows the port the server listens on.
TEST(ConfigurationE2e, TwoInstancesOnListenPortsRunSideBySide) {
  uint16_t first = free_ports_for_two_instances();
  ASSERT_NE(first, 0);
  ServerProcess servers[2];
  for (uint16_t i : {0, 1}) {
    uint16_t port = static_cast<uint16_t>(first + i);
    ASSERT_TRUE(servers[i].start_as_given({"-l", "127.0.0.1:" + std::to_string(port), "-m", "64"}));
    expect_lock_port_beside(port);
  }
}

// Cache clients filling --max_connections must not keep lock-service
// clients out: the lock port counts against --lock_max_connections.
TEST(ConfigurationE2e, TheLockPortAcceptsAClientWhileTheCachePortIsFull) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"--max_connections=2", "--lock_max_connections=2", "--lock_port=-1"}));
  std::optional<uint16_t> lock_port = server.lock_port();
  ASSERT_TRUE(lock_port);
  Client cache1, cache2, refused;
  ASSERT_TRUE(cache1.connect(server.port()));
  ASSERT_TRUE(cache2.connect(server.port()));
  ASSERT_EQ(cache1.request("version").rfind("VERSION", 0), 0u);
  ASSERT_EQ(cache2.request("version").rfind("VERSION", 0), 0u);
  ASSERT_TRUE(refused.connect(server.port()));
  EXPECT_EQ(refused.read_line(), "ERROR Too many open connections");

  Client locks;
  ASSERT_TRUE(locks.connect(*lock_port));
  EXPECT_EQ(locks.request("lock deploy 0").rfind("200 Acquired", 0), 0u);
  EXPECT_EQ(locks.request("unlock deploy"), "200 Released");
  auto stats = cache1.stats();
  EXPECT_EQ(e2e::stat_u64(stats, "curr_connections"), 3u);
  EXPECT_EQ(e2e::stat_u64(stats, "curr_lock_connections"), 1u);
  // The lock port has its own limit too.
  Client locks2, locks3;
  ASSERT_TRUE(locks2.connect(*lock_port));
  ASSERT_EQ(locks2.request("conn_id").rfind("200 ", 0), 0u);
  ASSERT_TRUE(locks3.connect(*lock_port));
  EXPECT_EQ(locks3.read_line(), "ERROR Too many open connections");
}

}  // namespace
