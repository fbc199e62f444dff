#!/usr/bin/env bash
# The whole CI run, stage by stage (README's test command ends here).
# Each stage is a script beside this one, run in its order from the
# repository root; the first that fails stops the run. A stage installs the
# Debian packages it needs beyond the README's base list itself. At the end
# (or at the failure) every stage run so far is listed with its time.
#
#   test/ci/all.sh            every stage
#   test/ci/all.sh 10 30      only the stages whose number is given
set -euo pipefail
cd "$(dirname "$0")/../.."

export DEBIAN_FRONTEND=noninteractive
stages=(test/ci/[0-9][0-9]-*.sh)
times=()
run_start=$SECONDS
summary() {
  echo "==== stage times"
  printf '%s\n' "${times[@]}"
  echo "==== total $((SECONDS - run_start)) s"
}
trap summary EXIT
for stage in "${stages[@]}"; do
  number=$(basename "$stage" | cut -c1-2)
  if [ $# -gt 0 ] && [[ " $* " != *" $number "* ]]; then continue; fi
  echo "==== stage $(basename "$stage") ($(date -u +%T))"
  start=$SECONDS
  status=0
  bash -euo pipefail "$stage" || status=$?
  result=passed
  [ "$status" = 0 ] || result="FAILED (exit $status)"
  times+=("$(printf '%6d s  %s  %s' $((SECONDS - start)) "$(basename "$stage")" "$result")")
  echo "==== stage $(basename "$stage") $result in $((SECONDS - start)) s"
  [ "$status" = 0 ] || exit "$status"
done
