#!/usr/bin/env bash
# Runs every command of README.md's shell blocks, in order, twice, in a fresh
# temporary folder whose build/ and tests/ are this checkout's, and checks
# each exit code: 0, or the code a "# exits N" comment on the line promises.
# `bash tools/setup.sh && X` lines run X (the test runs after the set-up),
# except the test command itself (X = ctest ...), which is what runs this.
#   usage: tests/readme_test.sh README.md BUILD_DIR
set -uo pipefail
readme=$(realpath "$1")
build=$(realpath "$2")
root=$(dirname "$readme")
work=$(mktemp -d /tmp/pplab-readme.XXXXXX)
trap 'rm -rf "$work"' EXIT
ln -s "$build" "$work/build"
ln -s "$root/tests" "$work/tests"
# The commands: lines of ```sh blocks, with continuation lines joined.
mapfile -t commands < <(awk '
  /^```sh$/ { inside = 1; next }
  /^```/    { inside = 0; next }
  inside {
    if (sub(/\\$/, "")) { pending = pending $0; next }
    print pending $0; pending = ""
  }' "$readme")
failures=0
for round in 1 2; do
  for line in "${commands[@]}"; do
    command=${line#bash tools/setup.sh && }
    [ "$command" = "bash tools/setup.sh" ] && continue
    [[ "$command" == ctest* ]] && continue
    want=0
    if [[ "$line" =~ \#\ exits\ ([0-9]+) ]]; then want=${BASH_REMATCH[1]}; fi
    out=$(cd "$work" && bash -c "$command" 2>&1 < /dev/null)
    got=$?
    if [ "$got" != "$want" ]; then
      echo "README command (round $round) exited $got, expected $want: $command"
      echo "$out" | tail -n 5
      failures=$((failures + 1))
    else
      echo "ok (round $round, exit $got): $command"
    fi
  done
done
[ "$failures" = 0 ] || { echo "$failures README command(s) failed"; exit 1; }
echo "every README command works as written, twice in a row (${#commands[@]} commands)"
