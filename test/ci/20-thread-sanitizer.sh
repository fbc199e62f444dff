# ThreadSanitizer: the ctest suite (unit, end-to-end, external clients and
# the CLI: stage 10's tests but the side-by-side ones of test/peers) with the
# server, the CLI and the unit tests built -DCMAKE_BUILD_TYPE=Tsan. The
# end-to-end and external tests, clients of the server, are stage 10's, run
# against this build's lockcached and lockcached-cli
# (test/ci/sanitized-suite.sh), so every request of the suite is served by
# the instrumented server.
#
# The servers run with their default, --io=auto, on io_uring (as in stage
# 10), then with io_uring refused, so on epoll (as in stage 22), for the
# suites whose code differs between the backends (test/ci/sanitized-suite.sh
# lists them): io_uring's completions and cross-thread wake-ups take other
# paths through the reactor.
#
# A report fails the stage wherever it happens. In a test it fails the test
# (halt_on_error: the process exits at the first race); but a server can
# also report after the test's last request, where no assertion looks. So
# every report also goes to a file under $reports, and any file there fails
# the stage (and is printed).
#
# Under a sanitizer the tests relax their RSS and latency bounds, never their
# functional assertions (test/e2e/sanitizer.h). The first pass leaves out
# only the side-by-side tests of test/peers (see first_pass_skips below).
# LOCKCACHED_TSAN_BUILD picks another build directory (to run this beside
# other work on one machine).
build=${LOCKCACHED_TSAN_BUILD:-build-tsan}
build_type=Tsan
reports=$PWD/$build/sanitizer-reports
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:log_path=$reports/tsan
test_ios="auto refused"
# The side-by-side tests of test/peers send one client's requests to
# lockcached and to memcached or yrmcds in turn and compare the answers:
# parsing and replies, which stage 30's AddressSanitizer watches, with no
# two threads sharing anything the end-to-end tests do not share too.
first_pass_skips=peers
source test/ci/sanitized-suite.sh
