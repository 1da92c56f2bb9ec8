#!/usr/bin/env bash
# Test names must survive catch_discover_tests and ctest: a name that starts
# with '-' is read by Catch2 as a flag, and ctest splits a name at ';'. Either
# way the test silently stops running (or fails for the wrong reason).
set -u
root=${1:?usage: test_names.sh TESTS_DIR}
bad=$(grep -rhoE 'TEST_CASE\("[^"]*"' "$root" --include='*.cpp' \
        | sed -E 's/^TEST_CASE\("//; s/"$//' | grep -E '^-|;' || true)
if [ -n "$bad" ]; then
  echo "test names that ctest cannot run as written (leading '-' or ';'):"
  printf '  %s\n' "$bad"
  exit 1
fi
count=$(grep -rhoE 'TEST_CASE\("' "$root" --include='*.cpp' | wc -l)
echo "$count test names checked"
