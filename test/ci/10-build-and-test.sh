# The normal build (RelWithDebInfo, jemalloc) and the whole ctest suite:
# unit, end-to-end against the real binary, external clients and peers.
cmake -S . -B build -DLOCKCACHED_WERROR=ON
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2
