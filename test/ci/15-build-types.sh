# Every build type a user may pick, with both compilers Debian ships, builds
# without a warning: GCC 12 and clang 14, Release and Debug, everything (the
# server, the CLI, the bench tools and the tests) with -Werror, which CI and
# developers turn on and a user's build leaves off (LOCKCACHED_WERROR). The
# suite itself runs in stage 10; a warning that only an optimization level
# or another compiler shows (GCC's -Wrestrict in Release, say) is caught here.
apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends clang >/dev/null

for compiler in gcc clang; do
  if [ "$compiler" = gcc ]; then cc=gcc cxx=g++; else cc=clang cxx=clang++; fi
  for build_type in Release Debug; do
    build=build-$compiler-$build_type
    echo "== $compiler $build_type"
    start=$SECONDS
    CC=$cc CXX=$cxx cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=$build_type \
      -DLOCKCACHED_WERROR=ON >/dev/null
    cmake --build "$build" -j2 >"$build/build.log" 2>&1 || {
      grep -B2 -A8 -E 'error|warning' "$build/build.log" | head -80
      echo "15-build-types: $compiler $build_type failed" >&2
      exit 1
    }
    echo "   built in $((SECONDS - start)) s"
    rm -rf "$build"
  done
done
