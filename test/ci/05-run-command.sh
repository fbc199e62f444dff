#!/usr/bin/env bash
# The README's run command installs every package the server's build needs.
# CI's own command installs more (tests, peers), so a library the run
# command forgot would never show here otherwise: a fresh machine that
# follows the README would stop at cmake (as it once did without
# liburing-dev). Every library CMake finds for the run command's build
# (no tests, the optional libsystemd left out) must belong to a package
# that the run command installs, to one of their dependencies, or to
# Debian's required base.
#
#   test/ci/05-run-command.sh [PACKAGE...]   check PACKAGE... instead of the
#                                            README's list (to see it fail)
set -euo pipefail

if [ $# -gt 0 ]; then
  packages="$*"
else
  command=$(awk '/<!-- run-command -->/ {found=1; next} found && /^apt-get/ {print; exit}' README.md)
  packages=$(sed -n 's/.*apt-get install -y --no-install-recommends \([^&]*\)&&.*/\1/p' <<<"$command")
fi
[ -n "$packages" ] || { echo "05-run-command: no package list in README.md's run command" >&2; exit 1; }

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
cmake -S . -B "$build" -DLOCKCACHED_BUILD_TESTS=OFF -DLOCKCACHED_BUILD_BENCH=OFF \
  -DLOCKCACHED_SYSTEMD=OFF >/dev/null
# find_library results, and the directories of find_package's config files.
found=$(grep -E '^[A-Za-z0-9_]+(_LIBRARY:FILEPATH=/|_DIR:PATH=/.*/cmake/)' "$build/CMakeCache.txt" |
  grep -v '^CMAKE_' | cut -d= -f2-)

# shellcheck disable=SC2086 # the list is words
available=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances $packages | grep -E '^[a-z0-9]' | sort -u)
available+=$'\n'$(dpkg-query -W -f='${Package} ${Priority} ${Essential}\n' |
  awk '$2 == "required" || $3 == "yes" {print $1}')

missing=0
for path in $found; do
  owner=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1) || true
  if [ -z "$owner" ]; then
    echo "05-run-command: $path belongs to no package" >&2
    missing=1
  elif ! grep -qx "$owner" <<<"$available"; then
    echo "05-run-command: the build uses $path from $owner, which the README's run command" \
      "does not install" >&2
    missing=1
  fi
done
[ "$missing" = 0 ] || exit 1
echo "05-run-command: the run command's packages hold every library the build finds:" $found
