# Sourced by the sanitizer stages (20, 30). Builds the server, the CLI and
# the unit tests in $build with CMAKE_BUILD_TYPE=$build_type and the
# compiler of CC and CXX, runs those unit tests, then runs the end-to-end
# and external tests of stage 10's build directory against this build's
# server and CLI (LOCKCACHED_TEST_SERVER_DIR): those tests are clients of the
# server, so building them with the sanitizer would check nothing more. The
# stage exports its sanitizer's options first, with log_path under
# $reports; any report file there fails the stage and is printed.
# $front_end_only: folders whose sources this build leaves out but whose
# warnings it checks, with the compiler's front end alone (stage 30).
# $first_pass_skips: labels of tests the first pass leaves out (stage 20).
# With LOCKCACHED_CI_BUILD_ONLY set, the stage stops once its build and the
# front end's check are done (test/ci/all.sh builds ahead so).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$build_type" -DLOCKCACHED_WERROR=ON
cmake --build "$build" -j2 --target lockcached lockcached-cli unit_tests
# A build ahead leaves front-end-checked for the run that follows it.
checked=$build/front-end-checked
if [ -n "${front_end_only:-}" ]; then
  if [ -e "$checked" ] && [ -z "${LOCKCACHED_CI_BUILD_ONLY:-}" ]; then
    echo "== the front end's check: done by the build ahead"
  else
    # shellcheck disable=SC2086 # the folders are words
    python3 test/ci/clang-front-end.py "$build" $front_end_only
  fi
fi
rm -f "$checked"
if [ -n "${LOCKCACHED_CI_BUILD_ONLY:-}" ]; then
  touch "$checked"
  exit 0
fi

server_dir=$(cd "$build" && pwd)

# Stage 10's build, whose tests run here (built if this stage runs alone);
# LOCKCACHED_TESTS_BUILD picks another. Left as stage 10 made it.
# Which server the tests run is written when that directory is configured
# (test/servers-under-test), so the passes below only configure it.
tests=${LOCKCACHED_TESTS_BUILD:-build}
cmake -S . -B "$tests" -DLOCKCACHED_WERROR=ON >/dev/null
cmake --build "$tests" -j2 >/dev/null
restore_tests() {
  cmake -S . -B "$tests" -DLOCKCACHED_TEST_IO=auto -DLOCKCACHED_TEST_SERVER_DIR= >/dev/null
}
trap restore_tests EXIT

rm -rf "$reports"
mkdir -p "$reports"
status=0
echo "== the unit tests, built with the sanitizer"
"$build/test/unit_tests" --gtest_brief=1 || status=$?
# $test_ios: how the servers run, one pass each (stages 20 and 30: auto, the
# default, which takes io_uring here; then refused, which makes it epoll).
# The first pass runs every end-to-end and external test (but those labelled
# $first_pass_skips). The later ones run
# the end-to-end suites whose code differs between the two backends, the
# reactor's and the connection's: reads, writes and closes (hostile and slow
# clients, connections closed every way, keepalive), streams (watch,
# replication, a large value to slow readers), wake-ups from another thread
# (lock-service waits, the CLI, the cluster's clients), TLS, listening and
# shutdown. The suites of commands, options and statistics parse and answer
# a request the same way on both once it is read; stage 22 runs every test
# on epoll without a sanitizer.
backend_suites=(Auth Connections ConnectionsVerbose ConnectionsKeepalive Hostile IoBackend Uring
  Listen LockService LockServiceLimits LockServiceContention LockStress Cli Cluster Replication
  Watch WatchEvictions WatchLockService)
backend_tests="^($(IFS='|'; echo "${backend_suites[*]}"))E2e\\.|^(Ways/LockRelease|Signals/SignalShutdown)E2e\\.|^MemoryE2e\\.LargeValueGoesToSlowReaders"
selection=(-L 'e2e|external')
if [ -n "${first_pass_skips:-}" ]; then selection+=(-LE "$first_pass_skips"); fi
for test_io in ${test_ios:-auto}; do
  echo "== the tests with LOCKCACHED_TEST_IO=$test_io (${selection[*]})"
  cmake -S . -B "$tests" -DLOCKCACHED_TEST_IO="$test_io" \
    -DLOCKCACHED_TEST_SERVER_DIR="$server_dir" >/dev/null
  ctest --test-dir "$tests" -j2 --output-on-failure "${selection[@]}" || status=$?
  selection=(-L e2e -R "$backend_tests")
done
if compgen -G "$reports/*" >/dev/null; then
  for report in "$reports"/*; do
    echo "==== sanitizer report $report"
    cat "$report"
  done
  status=1
fi
exit "$status"
