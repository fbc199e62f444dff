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
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$build_type" -DLOCKCACHED_WERROR=ON
cmake --build "$build" -j2 --target lockcached lockcached-cli unit_tests
if [ -n "${front_end_only:-}" ]; then
  # shellcheck disable=SC2086 # the folders are words
  python3 test/ci/clang-front-end.py "$build" $front_end_only
fi

server_dir=$(cd "$build" && pwd)

# Stage 10's build, whose tests run here (built if this stage runs alone);
# LOCKCACHED_TESTS_BUILD picks another. Left as stage 10 made it.
tests=${LOCKCACHED_TESTS_BUILD:-build}
cmake -S . -B "$tests" -DLOCKCACHED_WERROR=ON >/dev/null
restore_tests() {
  cmake -S . -B "$tests" -DLOCKCACHED_TEST_IO=auto -DLOCKCACHED_TEST_SERVER_DIR= >/dev/null
  cmake --build "$tests" -j2 >/dev/null
}
trap restore_tests EXIT

rm -rf "$reports"
mkdir -p "$reports"
status=0
echo "== the unit tests, built with the sanitizer"
"$build/test/unit_tests" --gtest_brief=1 || status=$?
# $test_ios: how the servers run, one pass each (stages 20 and 30: auto, the
# default, which takes io_uring here; then refused, which makes it epoll).
# The first pass runs the end-to-end and external tests; the later ones
# only the end-to-end tests (label e2e): the external ones (real clients,
# side by side with memcached) reach the server through the same reads and
# writes as the end-to-end tests, at several times their time under a
# sanitizer. Only test/e2e/server_process.cc is recompiled between passes.
labels='e2e|external'
for test_io in ${test_ios:-auto}; do
  echo "== the tests with LOCKCACHED_TEST_IO=$test_io (labels $labels)"
  cmake -S . -B "$tests" -DLOCKCACHED_TEST_IO="$test_io" \
    -DLOCKCACHED_TEST_SERVER_DIR="$server_dir" >/dev/null
  cmake --build "$tests" -j2
  ctest --test-dir "$tests" -j2 --output-on-failure -L "$labels" || status=$?
  labels=e2e
done
if compgen -G "$reports/*" >/dev/null; then
  for report in "$reports"/*; do
    echo "==== sanitizer report $report"
    cat "$report"
  done
  status=1
fi
exit "$status"
