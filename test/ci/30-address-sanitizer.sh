# AddressSanitizer + UndefinedBehaviorSanitizer: the whole ctest suite (unit,
# end-to-end, external clients and peers: the same tests as stage 10) with
# the server, the CLI and the unit tests built -DCMAKE_BUILD_TYPE=Asan by
# Clang. The end-to-end and external tests, clients of the server, are
# stage 10's, run against this build's lockcached and lockcached-cli
# (test/ci/sanitized-suite.sh), so every request of the suite is served by
# the instrumented server. The sources this build leaves out (the end-to-end
# tests, the test tools, the bench tools) go through Clang's front end for
# its warnings (test/ci/clang-front-end.py): with this build, the run's
# Clang check of everything (stage 15).
#
# A report fails the stage wherever it happens. In a test it fails the test;
# but a server can also report after the test's last request, or a leak when
# it exits cleanly, where no assertion looks. So every report also goes to a
# file under $reports, and any file there fails the stage (and is printed).
#
# The servers run with their default, --io=auto, on io_uring (as in stage
# 10), where the kernel holds pointers into a connection's replies until a
# send completes, then with io_uring refused, so on epoll (as in stage 22),
# for the suites whose code differs between the backends
# (test/ci/sanitized-suite.sh lists them).
#
# Under a sanitizer the tests relax their RSS and latency bounds, never their
# functional assertions (test/e2e/sanitizer.h). The first pass excludes
# nothing.
# LOCKCACHED_ASAN_BUILD picks another build directory (to run this beside
# other work on one machine).
# libclang-rt: Clang's sanitizer runtimes; llvm-14: the symbolizer.
apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends \
  clang libclang-rt-14-dev llvm-14 >/dev/null
export CC=clang CXX=clang++ ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
build=${LOCKCACHED_ASAN_BUILD:-build-asan}
build_type=Asan
reports=$PWD/$build/sanitizer-reports
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:log_path=$reports/asan
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan
test_ios="auto refused"
front_end_only="test/e2e test/tools bench"
source test/ci/sanitized-suite.sh
