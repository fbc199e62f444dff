# libFuzzer: builds the three harnesses of test/fuzz (clang, ASan + UBSan,
# each driving the real protocol, CommandCore and Store or LockService) and
# runs each for a bounded time from its seed corpus. Any crash, sanitizer
# report, leak, broken harness invariant, timeout or OOM fails the stage;
# test/fuzz/run.sh then prints the report, the reproducer's path and a hex
# dump of it (see test/fuzz/README.md, "Reproducing a finding").
#
# FUZZ_SECONDS (default 60) is each fuzzer's budget. -seed=1 makes a run on
# the same binary try the same inputs, so a finding here replays; the time
# bound (not a run count) keeps the stage's length independent of how fast
# the machine is.
apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends \
  clang-14 libclang-rt-14-dev llvm-14 >/dev/null

# Debian's clang-14 has no unversioned names unless the `clang` package is
# installed; run.sh takes the compiler from CC and CXX. (Names that stay:
# the build directory keeps them, and a build ahead's directory is reused.)
export CC=clang-14 CXX=clang++-14
# Symbolized stack traces in the reports.
export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
export UBSAN_OPTIONS=print_stacktrace=1

# LOCKCACHED_CI_BUILD_ONLY: build, and stop (test/ci/all.sh builds ahead so).
run=("${FUZZ_SECONDS:-60}")
if [ -n "${LOCKCACHED_CI_BUILD_ONLY:-}" ]; then run=(--build-only); fi
FUZZ_ARGS="-seed=1 ${FUZZ_ARGS:-}" BUILD_DIR="${FUZZ_BUILD_DIR:-$PWD/build-fuzz}" \
  test/fuzz/run.sh "${run[@]}"
