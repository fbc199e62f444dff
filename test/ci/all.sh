#!/usr/bin/env bash
# The whole CI run, stage by stage (README's test command ends here).
# Each stage is a script beside this one, run in its order from the
# repository root; the first that fails stops the run. A stage installs the
# Debian packages it needs beyond the README's base list itself. At the end
# (or at the failure) every stage run so far is listed with its time.
#
#   test/ci/all.sh            every stage
#   test/ci/all.sh 10 30      only the stages whose number is given
#
# Building ahead: some stages leave the CPUs partly idle (the end-to-end
# tests wait on their servers' replies; stage 25's clusters wait on timers,
# a fault run used about a third of two CPUs), so while they run, the
# builds of later stages run beside them at the lowest priority
# (builds_beside below: the stage scripts with LOCKCACHED_CI_BUILD_ONLY
# set: install, build, check the build's warnings, stop). Those stages then
# find their builds done. The first of them waits for the builds; their
# output comes before its own.
set -euo pipefail
cd "$(dirname "$0")/../.."

export DEBIAN_FRONTEND=noninteractive
stages=(test/ci/[0-9][0-9]-*.sh)
# Stage 10's tests leave about half of the CPUs idle: stage 15's build goes
# there. Stages 20 to 25 run servers under test, TSan's and then the plain
# ones, and the clusters: stage 30's and 35's builds go there.
declare -A builds_beside=([10]="15" [20]="30 35")
times=()
run_start=$SECONDS
ahead_pid=
ahead_stages=  # the stages the builds ahead are for
ahead_log=$(mktemp)
summary() {
  if [ -n "$ahead_pid" ]; then kill -- "-$ahead_pid" 2>/dev/null || true; fi
  rm -f "$ahead_log"
  echo "==== stage times"
  printf '%s\n' "${times[@]}"
  echo "==== total $((SECONDS - run_start)) s"
}
trap summary EXIT

chosen=" $* "
# Whether stage $1 runs: every stage when none was named.
selected() {
  [ "$chosen" = "  " ] || [[ $chosen == *" $1 "* ]]
}

# The builds of the later stages listed beside stage $1, in the background.
build_ahead() {
  local later=() number
  for number in ${builds_beside[$1]:-}; do
    if selected "$number"; then later+=(test/ci/"$number"-*.sh); fi
  done
  [ ${#later[@]} -gt 0 ] || return 0
  wait_for_builds_ahead  # one batch at a time
  echo "==== building ahead, beside stage $1: ${later[*]}"
  ahead_stages=" ${builds_beside[$1]} "
  set -m  # its own process group, which summary() can stop whole
  (
    for stage in "${later[@]}"; do
      echo "==== build ahead: $stage ($(date -u +%T))"
      LOCKCACHED_CI_BUILD_ONLY=1 nice -n 19 bash -euo pipefail "$stage" || exit
    done
  ) >"$ahead_log" 2>&1 &
  ahead_pid=$!
  set +m
}

# Waits for the builds ahead, if any, and prints what they printed: before
# stage $1 when they are for it (or before the end, with no argument).
wait_for_builds_ahead() {
  [ -n "$ahead_pid" ] || return 0
  if [ $# -gt 0 ] && [[ $ahead_stages != *" $1 "* ]]; then return 0; fi
  local status=0
  wait "$ahead_pid" || status=$?
  ahead_pid=
  cat "$ahead_log"
  if [ "$status" != 0 ]; then
    echo "==== the builds ahead FAILED (exit $status)"
    return "$status"
  fi
  echo "==== the builds ahead are done"
}

for stage in "${stages[@]}"; do
  number=$(basename "$stage" | cut -c1-2)
  selected "$number" || continue
  echo "==== stage $(basename "$stage") ($(date -u +%T))"
  start=$SECONDS
  status=0
  wait_for_builds_ahead "$number" || status=$?
  if [ "$status" = 0 ]; then
    build_ahead "$number"
    bash -euo pipefail "$stage" || status=$?
  fi
  result=passed
  [ "$status" = 0 ] || result="FAILED (exit $status)"
  times+=("$(printf '%6d s  %s  %s' $((SECONDS - start)) "$(basename "$stage")" "$result")")
  echo "==== stage $(basename "$stage") $result in $((SECONDS - start)) s"
  [ "$status" = 0 ] || exit "$status"
done
wait_for_builds_ahead
