#!/bin/sh
# What help2man runs in place of $HELP2MAN_PROGRAM (cmake/manpages.cmake):
# the program with help2man's --help or --version, stderr included.
#
# help2man takes whatever text it gets, exit status or not, so a crash would
# make a page of half a help text. This passes the text on only after exit
# status 0 (both binaries' --help and --version exit 0); after anything
# else it prints nothing, and help2man fails the build with "can't get
# `--help' info".
#
# Two touches so that help2man reads the text as it is laid out:
# - it finds the synopsis only after "Usage:", and lockcached-cli says
#   "usage:";
# - it takes a line indented like the one before as that line's
#   continuation, so "  delete KEY" then "  lock KEY   lock an object"
#   became one paragraph: every line indented by two spaces (an item) is
#   made a paragraph of its own, unless a heading ("...:") leads into it.
set -u
output=$("$HELP2MAN_PROGRAM" "$@" 2>&1)
status=$?
if [ "$status" -ne 0 ]; then exit "$status"; fi
printf '%s\n' "$output" | sed '1s/^usage:/Usage:/' |
  awk '/^  [^ ]/ && previous != "" && previous !~ /:$/ { print "" } { print; previous = $0 }'
