#include "supervise.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <optional>

#include "failure.h"

namespace lockcached::cli {
namespace {

constexpr int kPassedOn[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP};

void warn(const std::string& message) {
  std::cerr << "lockcached-cli: warning: " << message << std::endl;
}

// Forks and execs `command` with `child_mask` as its signal mask and
// `child_sigchld` as its SIGCHLD disposition. With `die_with_parent`, the
// command gets SIGTERM if lockcached-cli dies first.
pid_t start_command(const std::vector<std::string>& command, const sigset_t& child_mask,
                    const struct sigaction& child_sigchld, bool die_with_parent) {
  std::vector<char*> argv;
  for (const std::string& word : command)
    argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  std::string exec_failed = "lockcached-cli: cannot run " + command[0] + ": ";
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw Failure(EX_OSERR, std::string("fork: ") + strerror(errno));
  if (pid > 0) return pid;
  if (die_with_parent) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(EX_UNAVAILABLE);  // died before prctl took hold
  }
  sigaction(SIGCHLD, &child_sigchld, nullptr);
  sigprocmask(SIG_SETMASK, &child_mask, nullptr);
  execvp(argv[0], argv.data());
  int error = errno;
  exec_failed += strerror(error);
  exec_failed += "\n";
  ssize_t ignored = write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
  (void)ignored;
  _exit(error == ENOENT ? kExitCommandNotFound : kExitCannotExecute);
}

int shell_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return EX_SOFTWARE;
}

int remaining_ms(Deadline deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 3'600'000));
}

class Supervisor {
 public:
  Supervisor(LockHolder& holder, const SuperviseOptions& options)
      : holder_(holder), options_(options) {
    // A SIGCHLD ignored by the parent (a daemon may) is ignored here too,
    // and the kernel would reap the command unseen: no SIGCHLD, waitpid
    // ECHILD, and the lock held forever. The default here; the command gets
    // what lockcached-cli was given.
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(SIGCHLD, &default_action, &saved_sigchld_);
    sigemptyset(&handled_);
    sigaddset(&handled_, SIGCHLD);
    for (int signal : kPassedOn)
      sigaddset(&handled_, signal);
    // Blocked before the fork, so that no SIGCHLD can slip by unseen.
    sigprocmask(SIG_BLOCK, &handled_, &saved_mask_);
    signal_fd_ = signalfd(-1, &handled_, SFD_CLOEXEC | SFD_NONBLOCK);
    if (signal_fd_ < 0) throw Failure(EX_OSERR, std::string("signalfd: ") + strerror(errno));
  }

  ~Supervisor() {
    close(signal_fd_);
    sigprocmask(SIG_SETMASK, &saved_mask_, nullptr);
    sigaction(SIGCHLD, &saved_sigchld_, nullptr);
  }

  int run(const std::vector<std::string>& command) {
    child_ = start_command(command, saved_mask_, saved_sigchld_, options_.kill_on_loss);
    schedule_ping();
    while (!wait_status_)
      step();
    if (connected_) release();
    return shell_status(*wait_status_);
  }

 private:
  void step() {
    bool ping_due = connected_ && options_.ping_seconds > 0;
    pollfd fds[2] = {{signal_fd_, POLLIN, 0},
                     {connected_ ? holder_.connection().fd() : -1, POLLIN, 0}};
    int ready = poll(fds, 2, ping_due ? remaining_ms(next_ping_) : -1);
    if (ready < 0 && errno != EINTR) warn(std::string("poll: ") + strerror(errno));
    if (fds[0].revents != 0) handle_signals();
    // COMMAND ended: release at once, without a ping that is due first (it
    // may wait up to --timeout), and signal nothing (its PID is reaped, and
    // may be another process's soon).
    if (wait_status_) return;
    try {
      if (connected_ && fds[1].revents != 0) holder_.connection().check_open();
      if (ping_due && Clock::now() >= next_ping_) {
        holder_.ping();
        schedule_ping();
      }
    } catch (const Failure& failure) {
      lose(failure.what());
    }
  }

  void schedule_ping() {
    if (options_.ping_seconds > 0) next_ping_ = deadline_after(options_.ping_seconds);
  }

  void handle_signals() {
    signalfd_siginfo info;
    while (read(signal_fd_, &info, sizeof info) == sizeof info) {
      int signal = static_cast<int>(info.ssi_signo);
      // The terminal signals the whole foreground process group, the command
      // included; only what was sent to lockcached-cli alone is passed on.
      if (signal != SIGCHLD && info.ssi_code != SI_KERNEL) kill(child_, signal);
    }
    int status = 0;
    if (waitpid(child_, &status, WNOHANG) == child_) wait_status_ = status;
  }

  // The server went away or stopped answering: its lock is gone.
  void lose(const std::string& why) {
    connected_ = false;
    // Hung up on, not just left: a server that was only slow (paused, cut
    // off for a while) then sees the connection end and lets the lock go,
    // instead of holding it for a client that said it lost it until
    // COMMAND ends.
    shutdown(holder_.connection().fd(), SHUT_RDWR);
    std::string message = "lost " + holder_.what() + " (" + why + "); ";
    if (options_.kill_on_loss) {
      warn(message + "stopping the command with SIGTERM (--kill-on-loss)");
      kill(child_, SIGTERM);
    } else {
      warn(message + "the command keeps running without it");
    }
  }

  void release() {
    try {
      if (!holder_.release()) warn(holder_.what() + " was no longer held when the command ended");
    } catch (const Failure& failure) {
      warn("could not release " + holder_.what() + ": " + failure.what());
    }
  }

  LockHolder& holder_;
  SuperviseOptions options_;
  sigset_t handled_;
  sigset_t saved_mask_;
  struct sigaction saved_sigchld_ {};
  int signal_fd_ = -1;
  pid_t child_ = -1;
  bool connected_ = true;
  Deadline next_ping_{};
  std::optional<int> wait_status_;
};

}  // namespace

int run_holding_lock(const std::vector<std::string>& command, LockHolder& holder,
                     const SuperviseOptions& options) {
  Supervisor supervisor(holder, options);
  return supervisor.run(command);
}

}  // namespace lockcached::cli
