# ThreadSanitizer: the whole ctest suite (unit, end-to-end, external clients
# and peers: the same tests as stage 10) with the server, the CLI and the
# unit tests built -DCMAKE_BUILD_TYPE=Tsan. The end-to-end and external
# tests, clients of the server, are stage 10's, run against this build's
# lockcached and lockcached-cli (test/ci/sanitized-suite.sh), so every
# request of the suite is served by the instrumented server.
#
# The servers run with their default, --io=auto, on io_uring (as in stage
# 10), then (the tests that start a server again) with io_uring refused, so
# on epoll (as in stage 22): io_uring's completions and cross-thread
# wake-ups take other paths through the reactor.
#
# A report fails the stage wherever it happens. In a test it fails the test
# (halt_on_error: the process exits at the first race); but a server can
# also report after the test's last request, where no assertion looks. So
# every report also goes to a file under $reports, and any file there fails
# the stage (and is printed).
#
# Under a sanitizer the tests relax their RSS and latency bounds, never their
# functional assertions (test/e2e/sanitizer.h). Nothing is excluded.
# LOCKCACHED_TSAN_BUILD picks another build directory (to run this beside
# other work on one machine).
build=${LOCKCACHED_TSAN_BUILD:-build-tsan}
build_type=Tsan
reports=$PWD/$build/sanitizer-reports
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:log_path=$reports/tsan
test_ios="auto refused"
source test/ci/sanitized-suite.sh
