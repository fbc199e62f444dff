# The ctest suite's tests that start a server (end-to-end, external clients
# and peers: labels e2e and external; the unit tests open no socket and ran
# in stage 10) with every server running on the io_uring backend
# (--io=uring, added by the wrapper that -DLOCKCACHED_TEST_IO=uring makes). Reuses stage 10's build directory: only
# the end-to-end tests, which name the server at compile time, are rebuilt.
# IoBackendE2e fails the stage if the kernel refused io_uring and the
# server fell back to epoll.
build=${LOCKCACHED_URING_BUILD:-build}
cmake -S . -B "$build" -DLOCKCACHED_WERROR=ON -DLOCKCACHED_TEST_IO=uring
cmake --build "$build" -j2
status=0
ctest --test-dir "$build" --output-on-failure -j2 -L 'e2e|external' || status=$?
# Leave the directory as stage 10 made it, for whoever runs stages by hand.
cmake -S . -B "$build" -DLOCKCACHED_TEST_IO=epoll >/dev/null
exit "$status"
