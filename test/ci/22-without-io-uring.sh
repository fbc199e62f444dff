# The ctest suite's tests that start a server (end-to-end, external clients
# and peers: labels e2e and external; the unit tests open no socket and ran
# in stage 10) with the kernel refusing io_uring to every server
# (-DLOCKCACHED_TEST_IO=refused: a seccomp filter, test/tools/
# without_io_uring.cc, through a wrapper script), so that their default,
# --io=auto, takes epoll, as it does in a container that refuses io_uring.
# Stage 10 ran the same tests where the kernel allows io_uring, which the
# default then takes. Reuses stage 10's build directory: configuring it
# rewrites which server the tests run (test/servers-under-test) and
# rebuilds nothing.
# IoBackendE2e fails the stage if a server took io_uring all the same.
build=${LOCKCACHED_REFUSED_BUILD:-build}
cmake -S . -B "$build" -DLOCKCACHED_WERROR=ON -DLOCKCACHED_TEST_IO=refused
cmake --build "$build" -j2
status=0
ctest --test-dir "$build" --output-on-failure -j2 -L 'e2e|external' || status=$?
# Leave the directory as stage 10 made it, for whoever runs stages by hand.
cmake -S . -B "$build" -DLOCKCACHED_TEST_IO=auto >/dev/null
exit "$status"
