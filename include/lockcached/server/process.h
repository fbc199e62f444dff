// What a Unix daemon does around the server: detach (-d), keep a pid file
// (-P), drop root (-u), and open enough descriptors. main wires these up.
#pragma once

#include <string>

namespace lockcached::server {

// memcached's -d, done so that the starting command learns the outcome: the
// process forks; the parent waits until the child calls ready() or fails()
// (or dies) and exits with that status, so `lockcached -d` exits 0 only once
// every port is bound, and with the child's error code otherwise. Call
// detach() before any thread starts: fork() copies only the calling thread.
class Daemon {
 public:
  // Forks, and in the parent never returns. In the child: a new session.
  // False (with *error) when fork or pipe fails; nothing was forked then.
  bool detach(std::string* error);
  // The server serves: the starter exits 0. Standard input becomes
  // /dev/null, and standard output and error too unless `keep_output` (as
  // memcached keeps them with -v, so that a starter that redirected them to
  // a log file keeps getting the log).
  void ready(bool keep_output);
  // The server will not start: the starter exits `status`.
  void failed(int status);
  bool detached() const { return report_fd_ >= 0; }

 private:
  void report(unsigned char status);

  int report_fd_ = -1;  // the child's end of the pipe to the waiting parent
};

// memcached's -P: the pid in a file, removed again at a clean stop.
class PidFile {
 public:
  PidFile() = default;
  ~PidFile();
  PidFile(const PidFile&) = delete;
  PidFile& operator=(const PidFile&) = delete;

  // Writes getpid() to `path` (nothing for an empty path).
  bool write(const std::string& path, std::string* error);

 private:
  std::string path_;
};

// --user: the user must exist, checked before anything starts.
bool user_exists(const std::string& user);
// --user with --unix_socket: the socket file becomes the user's, and its
// group the user's group, as memcached's is (it binds after it became the
// user), so that -a's group bits mean what they mean there.
bool give_to_user(const std::string& path, const std::string& user, std::string* error);
// Becomes `user` (after the ports are bound); empty: stays, warning as root.
bool drop_privileges(const std::string& user, std::string* error);
// The first of `dir` and the files in it that `user` does not own; empty
// when it owns them all. A server that drops to --user after it opened its
// Raft data directory as root could not write its next log segment there.
std::string not_owned_by(const std::string& user, const std::string& dir);
// Every connection is a descriptor: raise the soft limit towards `wanted`.
// Returns the limit in force.
unsigned long raise_descriptor_limit(unsigned long wanted);
// memcached's -r: the core-file size limit raised as far as the hard limit
// allows (unlimited where it can be). False, with *error, when it stays 0:
// no core file could be written (memcached refuses to start then too).
bool enable_core_dumps(std::string* error);
// memcached's -k: every page, present and future, locked into RAM. False,
// with *why_not, when mlockall fails, or when the locked memory could not
// grow with the cache: RLIMIT_MEMLOCK cannot be made unlimited and the
// process lacks CAP_IPC_LOCK (or loses it at `dropping_privileges`), so a
// later allocation past the limit would fail rather than stay unlocked.
bool lock_all_memory(bool dropping_privileges, std::string* why_not);

}  // namespace lockcached::server
