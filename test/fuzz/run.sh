#!/usr/bin/env bash
# Builds the libFuzzer harnesses in build-fuzz (clang, ASan + UBSan) and runs
# each for SECONDS (default 30) on a copy of its seed corpus, as many side by
# side as there are CPUs. Exits non-zero if any of them finds a crash, a leak,
# a timeout or runs out of memory; the input that did it is left in
# build-fuzz/fuzz-runs/NAME/artifacts/.
#
#   test/fuzz/run.sh [SECONDS]
#   test/fuzz/run.sh --build-only     builds them and stops
#
# Environment: CC and CXX (default clang and clang++), FUZZERS (default
# "text binary lock_service"), BUILD_DIR (default build-fuzz), FUZZ_ARGS
# (more libFuzzer flags, e.g. -jobs=4).
set -uo pipefail

duration=${1:-30}
build_only=
if [ "$duration" = --build-only ]; then
  build_only=1
elif ! [[ $duration =~ ^[0-9]+$ ]] || [ "$duration" -lt 1 ]; then
  echo "usage: $0 [SECONDS | --build-only]" >&2
  exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$root/build-fuzz}
fuzzers=${FUZZERS:-text binary lock_service}

generator=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$build/CMakeCache.txt" ]; then
  generator=(-G Ninja)
fi

echo "== configuring and building in $build"
mkdir -p "$build"
CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S "$here" -B "$build" "${generator[@]}" >"$build/configure.log" 2>&1 || {
  cat "$build/configure.log" >&2
  echo "configure failed" >&2
  exit 2
}
targets=()
for name in $fuzzers; do targets+=("${name}_fuzz"); done
cmake --build "$build" --target "${targets[@]}" -j "$(nproc)" || {
  echo "build failed" >&2
  exit 2
}
if [ -n "$build_only" ]; then exit 0; fi

# What CI logs keep of a finding: where the input is, how to replay it, and
# the input itself (a reproducer can be rebuilt from the hex dump alone).
show_reproducers() {
  local name=$1 file
  shift
  for file in "$@"; do
    echo "-- reproducer $file ($(stat -c %s "$file") bytes); replay:"
    echo "   $build/${name}_fuzz $file"
    echo "   LOCKCACHED_FUZZ_TRACE=1 $build/${name}_fuzz $file"
    od -A x -t x1z -v "$file" | head -64
    # The whole input as one hex string: `xxd -r -p` turns it back into the file.
    echo "-- hex (xxd -r -p):"
    od -A n -t x1 -v "$file" | tr -d ' \n'
    echo
  done
}

# What a harness's run in $1 left behind: the inputs of its findings.
artifacts() {
  find "$1/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) | sort
}

# One harness's run: its log, and the line for the summary in result.
fuzz_one() {
  local name=$1 binary="$build/${1}_fuzz" work="$build/fuzz-runs/$1" max_len rc found
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp "$here/corpus/$name/"* "$work/corpus/"
  # Longer inputs for the cache protocols: filling the small stores and
  # `keys` walks over many items need a few KB.
  max_len=4096
  case $name in text | binary) max_len=16384 ;; esac
  (
    cd "$work" &&
      "$binary" "$work/corpus" \
        -max_total_time="$duration" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
        -dict="$here/$name.dict" -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
        ${FUZZ_ARGS:-}
  ) >"$work/log" 2>&1
  rc=$?
  found=$(artifacts "$work")
  if [ $rc -ne 0 ] || [ -n "$found" ]; then
    echo "$name: FAILED (exit $rc) ${found:-(no artifact)}" >"$work/result"
  else
    echo "$name: ok (corpus now $(find "$work/corpus" -type f | wc -l) inputs in $work/corpus)" \
      >"$work/result"
  fi
}

# The harnesses run side by side, as many at a time as there are CPUs (each
# is one process), so each still has a CPU of its own for its SECONDS.
running=0
for name in $fuzzers; do
  if [ "$running" -ge "$(nproc)" ]; then
    wait -n
    running=$((running - 1))
  fi
  echo "== $name: ${duration}s"
  fuzz_one "$name" &
  running=$((running + 1))
done
wait

status=0
summary=()
for name in $fuzzers; do
  work="$build/fuzz-runs/$name"
  result=$(cat "$work/result")
  summary+=("$result")
  echo "== $name"
  # libFuzzer's own summary lines, for the record.
  grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)' "$work/log" | tail -2
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$work/log"
  if [[ $result == *FAILED* ]]; then
    status=1
    echo "-- $name failed; the report:"
    grep -E -A40 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|FUZZ INVARIANT' \
      "$work/log" | head -80
    # shellcheck disable=SC2046 # the artifacts' paths are words
    show_reproducers "$name" $(artifacts "$work")
  fi
done

echo "== summary"
printf '%s\n' "${summary[@]}"
exit $status
