# Sourced by the sanitizer stages: builds everything (the bench tools too, for
# their warnings: stage 15) in $build with CMAKE_BUILD_TYPE=$build_type and
# the compiler of CC and CXX, and runs the ctest suite once for each
# LOCKCACHED_TEST_IO of $test_ios. The stage exports its sanitizer's options first, with log_path
# under $reports; any report file there fails the stage and is printed.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$build_type" -DLOCKCACHED_WERROR=ON
cmake --build "$build" -j2

rm -rf "$reports"
mkdir -p "$reports"
status=0
# $test_ios: how the servers run, one pass each (stages 20 and 30: auto, the
# default, which takes io_uring here; then refused, which makes it epoll).
# The first pass runs the whole suite; the later
# ones only the end-to-end tests (label e2e): the unit tests never open a
# socket, so they would run the same code again, and the external ones
# (real clients, side by side with memcached) reach the server through the
# same reads and writes as the end-to-end tests, at several times their
# time under a sanitizer. Only test/e2e/server_process.cc is recompiled
# between passes.
labels=
for test_io in ${test_ios:-auto}; do
  echo "== the suite with LOCKCACHED_TEST_IO=$test_io${labels:+ (labels $labels)}"
  cmake -S . -B "$build" -DLOCKCACHED_TEST_IO="$test_io" >/dev/null
  cmake --build "$build" -j2
  ctest --test-dir "$build" -j2 --output-on-failure ${labels:+-L "$labels"} || status=$?
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
