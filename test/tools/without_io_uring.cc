// without-io-uring PROGRAM [ARG...]: runs PROGRAM with the kernel refusing
// io_uring to it, as a container's seccomp profile does, or a systemd unit
// whose SystemCallFilter= leaves io_uring out: io_uring_setup fails with
// EPERM (SystemCallErrorNumber=EPERM). The tests run lockcached through it to
// see what its default, --io=auto, does where io_uring is refused
// (test/CMakeLists.txt, LOCKCACHED_TEST_IO=refused). The filter outlives
// exec and holds for every thread PROGRAM starts.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>

namespace {

#if defined(__x86_64__)
constexpr uint32_t kArchitecture = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kArchitecture = AUDIT_ARCH_AARCH64;
#else
#error "without-io-uring: name this machine's AUDIT_ARCH_*"
#endif

bool refuse_io_uring() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      // A system call of another ABI has other numbers: let it be.
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArchitecture, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program = {static_cast<unsigned short>(std::size(filter)), filter};
  // Without new privileges an unprivileged process may install a filter.
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: without-io-uring PROGRAM [ARG...]\n");
    return 2;
  }
  if (!refuse_io_uring()) {
    std::perror("without-io-uring: installing the seccomp filter");
    return 1;
  }
  execv(argv[1], argv + 1);
  std::perror("without-io-uring: execv");
  return 127;
}
