#!/usr/bin/env bash
# Runs Maven quietly: its output goes to a log that is shown only on failure.
set -uo pipefail
log=$(mktemp -t mirrorstack-maven.XXXXXX)
trap 'rm -f "$log"' EXIT
echo "maven: $*" | sed 's/-D[a-z.]*dir=[^ ]* //'
if ! mvn -B -q -Dstyle.color=never "$@" >"$log" 2>&1; then
  cat "$log" >&2
  echo "maven failed: mvn $*" >&2
  exit 1
fi
