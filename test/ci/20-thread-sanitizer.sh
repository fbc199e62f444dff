# ThreadSanitizer: the concurrency unit tests, then the lock stress and
# lock-service end-to-end suites against a TSan-built server.
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Tsan
cmake --build build-tsan -j2 --target lockcached unit_tests
build-tsan/test/unit_tests --gtest_filter='*Concurrency*:LockService*'
LOCKCACHED_SERVER_BINARY=$PWD/build-tsan/lockcached TSAN_OPTIONS=halt_on_error=1 \
  ctest --test-dir build -R 'LockStress|LockService' --output-on-failure
