#!/usr/bin/env bash
# The test binaries are unity builds (tests/CMakeLists.txt): a batch of test
# sources compiles as one unit, so two sources that define a helper of the
# same name in pplab's namespace collide, or one calls the other's. Which
# sources share a batch changes as files are added, so this check holds the
# rule for every test source instead: its namespaces are pplab::<file name>
# (pplab::cli::<file name> for the cli's), never bare pplab or pplab::cli.
#   usage: bash tests/own_namespaces.sh TESTS_DIR
set -euo pipefail
dir=${1:?usage: own_namespaces.sh TESTS_DIR}
bad=0
count=0
while IFS= read -r f; do
  stem=$(basename "$f" .cpp)
  count=$((count + 1))
  opens=$(grep -E '^namespace [A-Za-z_:]+ \{' "$f" | grep -v '^namespace \(pplab\|pplab::cli\)::'"$stem"' {$' || true)
  if [ -n "$opens" ]; then
    echo "$f: a namespace other than pplab::$stem: $(head -n 1 <<< "$opens")"
    bad=$((bad + 1))
  elif ! grep -qE '^namespace (pplab|pplab::cli)::'"$stem"' \{$' "$f"; then
    echo "$f: no namespace pplab::$stem"
    bad=$((bad + 1))
  fi
done < <(find "$dir" -name '*_test.cpp' ! -name main_test.cpp | sort)
[ "$bad" = 0 ] || { echo "$bad test source(s) outside their own namespace"; exit 1; }
echo "$count test sources, each in its own namespace"
