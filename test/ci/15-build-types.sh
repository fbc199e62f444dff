# The build types a user may pick, with both compilers Debian ships, build
# without a warning: everything (the server, the CLI, the bench tools and the
# tests) with -Werror, which CI and developers turn on and a user's build
# leaves off (LOCKCACHED_WERROR). The suite itself runs in stage 10; a
# warning that only an optimization level or another compiler shows (GCC's
# -Wrestrict in Release, say) is caught here. GCC's other levels are built
# with -Werror elsewhere (-O2 RelWithDebInfo in stage 10, -O1 in the
# sanitizer stages 20 and 30), so GCC gets Release here. Clang's warnings
# come from its front end, which does not look at the optimization level:
# its Release build checks what a Debug build would, and a Debug build
# cost this stage a third of its time.
apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends clang >/dev/null

for build in gcc:Release clang:Release; do
  compiler=${build%%:*} build_type=${build#*:}
  if [ "$compiler" = gcc ]; then cc=gcc cxx=g++; else cc=clang cxx=clang++; fi
  {
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
  }
done
