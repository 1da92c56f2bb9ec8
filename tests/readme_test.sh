#!/usr/bin/env bash
# Runs every command of a Markdown file's shell blocks, in order, twice (or
# once), in a fresh temporary folder whose build/ and tests/ are this
# checkout's, and checks each exit code: 0, or the code a "# exits N" comment
# on the line promises. `bash tools/setup.sh && X` lines run X (the test runs
# after the set-up), except the test command itself (X = ctest ...), which is
# what runs this. With --marked, only the blocks whose fence follows a line
# starting "<!-- tested:" run (a page whose other blocks are synopses), and a
# command with `--device cuda` is skipped, saying so: it needs a GPU. With
# --once, one round only (a page held to "works as written", not "twice").
#   usage: tests/readme_test.sh FILE.md BUILD_DIR [--marked] [--once]
set -uo pipefail
readme=$(realpath "$1")
build=$(realpath "$2")
marked=0
rounds=2
for flag in "${@:3}"; do
  case $flag in
    --marked) marked=1 ;;
    --once) rounds=1 ;;
    *) echo "readme_test.sh: unknown flag $flag"; exit 2 ;;
  esac
done
name=$(basename "$readme")
root=$(cd "$(dirname "$0")/.." && pwd)  # the checkout: its tests/ go beside build/
work=$(mktemp -d /tmp/pplab-readme.XXXXXX)
trap 'rm -rf "$work"' EXIT
ln -s "$build" "$work/build"
ln -s "$root/tests" "$work/tests"
# The commands: lines of ```sh blocks, with continuation lines joined.
mapfile -t commands < <(awk -v marked="$marked" '
  /^```sh$/ { inside = !marked || tested; tested = 0; next }
  /^```/    { inside = 0; tested = 0; next }
  inside {
    if (sub(/\\$/, "")) { pending = pending $0; next }
    print pending $0; pending = ""
    next
  }
  { tested = /^<!-- tested:/ }' "$readme")
[ "${#commands[@]}" -gt 0 ] || { echo "$name: no commands to run"; exit 1; }
failures=0
for ((round = 1; round <= rounds; round++)); do
  for line in "${commands[@]}"; do
    command=${line#bash tools/setup.sh && }
    [ "$command" = "bash tools/setup.sh" ] && continue
    [[ "$command" == ctest* ]] && continue
    if [ "$marked" = 1 ] && [[ "$command" == *"--device cuda"* ]]; then
      echo "skipped (round $round, needs a GPU): $command"
      continue
    fi
    want=0
    if [[ "$line" =~ \#\ exits\ ([0-9]+) ]]; then want=${BASH_REMATCH[1]}; fi
    out=$(cd "$work" && bash -c "$command" 2>&1 < /dev/null)
    got=$?
    if [ "$got" != "$want" ]; then
      echo "$name command (round $round) exited $got, expected $want: $command"
      echo "$out" | tail -n 5
      failures=$((failures + 1))
    else
      echo "ok (round $round, exit $got): $command"
    fi
  done
done
[ "$failures" = 0 ] || { echo "$failures $name command(s) failed"; exit 1; }
times=("" "once" "twice in a row")
echo "every $name command works as written, ${times[rounds]} (${#commands[@]} commands)"
