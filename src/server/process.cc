#include "lockcached/server/process.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

namespace lockcached::server {

bool Daemon::detach(std::string* error) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  pid_t child = fork();
  if (child < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return false;
  }
  if (child > 0) {
    // The starter: wait for the child's word. No word (the child died
    // before ready) is a failure; its own exit status says more.
    close(pipe_fds[1]);
    unsigned char status = 1;
    ssize_t got;
    do {
      got = read(pipe_fds[0], &status, 1);
    } while (got < 0 && errno == EINTR);
    if (got != 1) {
      int wait_status = 0;
      if (waitpid(child, &wait_status, 0) == child && WIFEXITED(wait_status)) {
        status = static_cast<unsigned char>(WEXITSTATUS(wait_status));
      }
      if (status == 0) status = 1;
    }
    _exit(status);
  }
  close(pipe_fds[0]);
  report_fd_ = pipe_fds[1];
  setsid();  // no controlling terminal: a closed shell sends no SIGHUP
  return true;
}

void Daemon::ready(bool keep_output) {
  if (!detached()) return;
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    if (!keep_output) {
      dup2(null_fd, STDOUT_FILENO);
      dup2(null_fd, STDERR_FILENO);
    }
    close(null_fd);
  }
  report(0);
}

void Daemon::failed(int status) {
  if (detached()) report(static_cast<unsigned char>(status));
}

void Daemon::report(unsigned char status) {
  ssize_t ignored = write(report_fd_, &status, 1);
  (void)ignored;  // the starter is gone: nobody left to tell
  close(report_fd_);
  report_fd_ = -1;
}

PidFile::~PidFile() {
  // After --user the directory may no longer be ours; memcached also
  // leaves the file then.
  if (!path_.empty()) unlink(path_.c_str());
}

bool PidFile::write(const std::string& path, std::string* error) {
  if (path.empty()) return true;
  FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    *error = "--pid_file " + path + ": " + std::strerror(errno);
    return false;
  }
  std::fprintf(file, "%ld\n", static_cast<long>(getpid()));
  if (std::fclose(file) != 0) {
    *error = "--pid_file " + path + ": " + std::strerror(errno);
    return false;
  }
  path_ = path;
  return true;
}

bool user_exists(const std::string& user) {
  return getpwnam(user.c_str()) != nullptr;
}

std::string not_owned_by(const std::string& user, const std::string& dir) {
  const passwd* entry = getpwnam(user.c_str());
  if (entry == nullptr) return dir;
  auto owned = [uid = entry->pw_uid](const std::filesystem::path& path) {
    struct stat info{};
    return lstat(path.c_str(), &info) == 0 && info.st_uid == uid;
  };
  if (!owned(dir)) return dir;
  std::error_code error;
  for (const auto& file : std::filesystem::directory_iterator(dir, error))
    if (!owned(file.path())) return file.path().string();
  return error ? dir : "";
}

bool give_to_user(const std::string& path, const std::string& user, std::string* error) {
  const passwd* entry = getpwnam(user.c_str());
  if (entry == nullptr || chown(path.c_str(), entry->pw_uid, entry->pw_gid) != 0) {
    *error = "--user: cannot give " + path + " to " + user + ": " +
             (entry == nullptr ? "no such user" : std::strerror(errno));
    return false;
  }
  return true;
}

bool drop_privileges(const std::string& user, std::string* error) {
  const passwd* entry = getpwnam(user.c_str());
  if (entry == nullptr) {
    *error = "--user: no such user: " + user;
    return false;
  }
  if (initgroups(entry->pw_name, entry->pw_gid) != 0 || setgid(entry->pw_gid) != 0 ||
      setuid(entry->pw_uid) != 0) {
    *error = "--user: cannot become " + user + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

unsigned long raise_descriptor_limit(unsigned long wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur >= wanted) return limit.rlim_cur;
  limit.rlim_cur = std::min<rlim_t>(wanted, limit.rlim_max);
  setrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

namespace {

// Whether the effective capabilities (/proc/self/status CapEff) hold `cap`.
bool has_capability(int cap) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (!line.starts_with("CapEff:")) continue;
    uint64_t caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (caps >> cap) & 1;
  }
  return false;
}

}  // namespace

bool enable_core_dumps(std::string* error) {
  rlimit limit{RLIM_INFINITY, RLIM_INFINITY};
  if (setrlimit(RLIMIT_CORE, &limit) != 0 && getrlimit(RLIMIT_CORE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;  // as far as an unprivileged process may
    setrlimit(RLIMIT_CORE, &limit);
  }
  if (getrlimit(RLIMIT_CORE, &limit) != 0 || limit.rlim_cur == 0) {
    *error = "the hard limit on core files is 0 (ulimit -Hc; LimitCORE= under systemd)";
    return false;
  }
  return true;
}

bool lock_all_memory(bool dropping_privileges, std::string* why_not) {
  rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
  bool unbounded = setrlimit(RLIMIT_MEMLOCK, &unlimited) == 0;
  if (!unbounded && (dropping_privileges || !has_capability(CAP_IPC_LOCK))) {
    rlimit limit{};
    getrlimit(RLIMIT_MEMLOCK, &limit);
    *why_not = "RLIMIT_MEMLOCK is " + std::to_string(limit.rlim_cur) +
               " bytes and cannot be raised (LimitMEMLOCK=infinity under systemd, ulimit -l "
               "unlimited): the cache could not grow past it";
    return false;
  }
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    *why_not = std::string("mlockall: ") + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace lockcached::server
