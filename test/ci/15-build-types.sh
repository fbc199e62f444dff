# A warning that only one optimization level or one compiler shows must fail
# CI too (-Werror, which CI and developers turn on and a user's build leaves
# off: LOCKCACHED_WERROR). Every build of the run is a check of this kind:
#   stage 10   GCC, RelWithDebInfo (-O2): everything (the user's default)
#   stage 15   GCC, Release (-O3): the server, the CLI and the unit tests,
#              whose tests then run (this stage)
#   stage 20   GCC, ThreadSanitizer (-O1): the server, the CLI and the
#              unit tests
#   stage 30   Clang, AddressSanitizer (-O1): the server, the CLI and the
#              unit tests, Clang's front end over the rest, and the whole
#              suite runs on Clang's build (Clang once found an
#              order-of-evaluation bug that GCC's build hid)
#   stage 35   Clang, libFuzzer: the core and the harnesses
# In every build the tests' own code is compiled at -O0 (test/CMakeLists.txt):
# the level above is the product's.
# Clang's warnings come from its front end, which does not look at the
# optimization level, so one Clang build covers them. GCC's come partly from
# its optimizer (inlining at -O3 shows what -O2 does not), hence this stage;
# the end-to-end tests and the bench tools hold no code that -O3 reaches
# differently from -O2, and building them again would double the stage.
build=build-gcc-Release
start=$SECONDS
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DLOCKCACHED_WERROR=ON >/dev/null
cmake --build "$build" -j2 --target lockcached lockcached-cli unit_tests >"$build/build.log" 2>&1 || {
  grep -B2 -A8 -E 'error|warning' "$build/build.log" | head -80
  echo "15-build-types: gcc Release failed" >&2
  exit 1
}
echo "   built in $((SECONDS - start)) s"
# LOCKCACHED_CI_BUILD_ONLY: build, and stop (test/ci/all.sh builds ahead so).
if [ -n "${LOCKCACHED_CI_BUILD_ONLY:-}" ]; then exit 0; fi
"$build/test/unit_tests" --gtest_brief=1
rm -rf "$build"
