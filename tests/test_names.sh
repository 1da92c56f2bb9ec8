#!/usr/bin/env bash
# Test names must survive catch_discover_tests and ctest: a name that starts
# with '-' is read by Catch2 as a flag, ctest splits a name at ';', and a
# bracket without its pair ("[0, 1)") makes CMake's list parsing join every
# later test of the binary into one entry that runs none of them. Either way
# tests silently stop running (or fail for the wrong reason).
set -u
root=${1:?usage: test_names.sh TESTS_DIR}
# (Files joined into one line: clang-format may break after `TEST_CASE(`.)
joined=$(find "$root" -name '*.cpp' -exec cat {} + | tr '\n' ' ')
names=$(printf '%s' "$joined" | grep -oE 'TEST_CASE\( *"[^"]*"' | sed -E 's/^TEST_CASE\( *"//; s/"$//')
bad=$( { printf '%s\n' "$names" | grep -E '^-|;';
         printf '%s\n' "$names" | awk '{ d = 0; ok = 1
           for (i = 1; i <= length($0); i++) { c = substr($0, i, 1)
             if (c == "[") d++; else if (c == "]") { d--; if (d < 0) ok = 0 } }
           if (d != 0 || !ok) print }'; } || true)
if [ -n "$bad" ]; then
  echo "test names that ctest cannot run as written (leading '-', ';' or an unpaired bracket):"
  printf '  %s\n' "$bad"
  exit 1
fi
count=$(printf '%s' "$joined" | grep -oE 'TEST_CASE\( *"' | wc -l)
echo "$count test names checked"
