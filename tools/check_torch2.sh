#!/usr/bin/env bash
# Compiles every LibTorch translation unit of pplab syntax-only (-fsyntax-only)
# against the LibTorch 2.11 headers (the GPU machine's pip torch), the CUDA and
# NCCL sources included, so API drift shows without a GPU. .ci/run calls it.
#   usage: bash tools/check_torch2.sh [HEADERS.tgz]
# The headers default to ../shared/torch2/libtorch-2.11-include.tgz; CUDA's
# (nccl.h among them) are taken from /usr/local/cuda/include. When either is
# missing it says so in one line and exits 0. One precompiled <torch/torch.h>
# makes each file take seconds instead of half a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
tgz=${1:-../shared/torch2/libtorch-2.11-include.tgz}
cuda=/usr/local/cuda/include
if [ ! -f "$tgz" ]; then echo "check_torch2: skipped: no LibTorch 2.x headers at $tgz"; exit 0; fi
if [ ! -f "$cuda/nccl.h" ]; then echo "check_torch2: skipped: no CUDA headers with nccl.h in $cuda"; exit 0; fi
work=${PPLAB_TORCH2_DIR:-/tmp/pplab-torch2-check}
# The headers' content, not their file's time: a copy of the same archive
# (a machine set up again) keeps the units that passed.
stamp="$(sha256sum < "$tgz" | cut -c1-64)"
if [ ! -f "$work/include.stamp" ] || [ "$(cat "$work/include.stamp")" != "$stamp" ]; then
  rm -rf "$work" && mkdir -p "$work"
  tar xzf "$tgz" -C "$work"
  echo "$stamp" > "$work/include.stamp"
fi
inc="$work/include"
flags=(-std=c++17 -w -D_GLIBCXX_USE_CXX11_ABI=1 -DUSE_C10D_GLOO -DUSE_C10D_NCCL -DUSE_DISTRIBUTED
       -DPPLAB_WITH_CUDA -DPPLAB_WITH_NCCL -I. -I"$inc" -I"$inc/torch/csrc/api/include" -I"$cuda"
       # what tests/CMakeLists.txt passes the tests
       -DPPLAB_TEST_DATA_DIR='"tests/data"' -DPPLAB_TEST_TMP_DIR='"/tmp"' -DPPLAB_BINARY='"pplab"')
if [ ! -f "$work/pch/torch_all.h.gch" ]; then
  mkdir -p "$work/pch" && printf '#include <torch/torch.h>\n' > "$work/pch/torch_all.h"
  g++ "${flags[@]}" -x c++-header "$work/pch/torch_all.h" -o "$work/pch/torch_all.h.gch"
fi
# The LibTorch translation units: every source that includes a torch, c10 or
# ATen header, or a header of the LibTorch half (runtime/comm, exec, train, models/llama.h and the models/ headers it is built from,
# the train command's tools/train_*.h).
files=$(grep -lE '#include *[<"]((torch|c10|ATen)/|runtime/(comm|exec|train)/|models/(llama|llama_ops|projections)\.h|tools/train_[a-z]+\.h)' \
          runtime/*/*.cc models/*.cc tools/*.cpp tools/*.cc tests/*/*.cpp tests/*/*/*.cpp 2>/dev/null | sort)
count=$(echo "$files" | wc -l)
# The sources that CMake compiles without the precompiled header
# (PPLAB_NO_TORCH_PCH and PPLAB_NO_TORCH_PCH_TESTS) are compiled so here too,
# so that what they include themselves is checked.
no_pch=$( { sed -n '/set(PPLAB_NO_TORCH_PCH$/,/)/p' CMakeLists.txt
            sed -n '/set(PPLAB_NO_TORCH_PCH_TESTS$/,/)/p' tests/CMakeLists.txt | tr ' ' '\n' | sed 's|^\([a-z]\)|tests/\1|'
          } | tr ' ' '\n' | grep -E '\.(cc|cpp)$' | sort -u)
start=$(date +%s)
# A unit that passed before with the same text, the same project headers, the
# same flags and the same LibTorch headers passes again: its key names all
# four, and $work/passed/ holds the keys of units that compiled (ccache's idea,
# for a check that writes no object). The project headers are the ones the
# unit includes, directly or through each other (every `#include "..."` of
# pplab names a path from the repository's root), so a header that changes
# recompiles only the units that include it.
declare -A includes
while IFS=: read -r from line; do
  to=${line#*\"}; to=${to%%\"*}
  [ -f "$to" ] && includes[$from]+="$to "
done < <(grep -rHE '^#include *"' --include='*.h' --include='*.cc' --include='*.cpp' \
           schedules sim traces models runtime tools tests)
# project_headers FILE: the project headers FILE includes, transitively, one a line.
project_headers() {
  local -A seen=()
  local todo=("$1") f h
  while [ ${#todo[@]} -gt 0 ]; do
    f=${todo[-1]}; unset 'todo[-1]'
    for h in ${includes[$f]:-}; do
      [ -n "${seen[$h]:-}" ] && continue
      seen[$h]=1; todo+=("$h")
    done
  done
  printf '%s\n' "${!seen[@]}" | grep . | sort || true
}
mkdir -p "$work/passed" "$work/batches"
# The jobs, one a line: "pch|file:key file:key ...". A library source is a
# job of its own (its helpers live in anonymous namespaces, which would
# collide with another source's). The test sources that take the precompiled
# header go in batches of 8, each compiled as one unit that includes them:
# every test source keeps its helpers in a namespace named after the file, and
# one unit loads the 0.7 GB header once, not 8 times (a batch of 6 took 10 s,
# its files one by one 27 s).
batch=()
jobs=()
for f in $files; do
  pch=yes
  grep -qxF "$f" <<< "$no_pch" && pch=no
  deps=$(project_headers "$f")
  key=$( { echo "$stamp ${flags[*]} pch=$pch"; cat "$f"; for h in $deps; do echo "== $h"; cat "$h"; done; } |
         sha256sum | cut -c1-64)
  [ -f "$work/passed/$key" ] && continue
  if [ "$pch" = yes ] && [[ "$f" == tests/* ]]; then
    batch+=("$f:$key")
    [ ${#batch[@]} = 8 ] && { jobs=("yes|${batch[*]}" "${jobs[@]}"); batch=(); }
  else
    jobs+=("$pch|$f:$key")
  fi
done
[ ${#batch[@]} -gt 0 ] && jobs=("yes|${batch[*]}" "${jobs[@]}")
todo=$(printf '%s' "${jobs[@]}" | tr -cd ':' | wc -c)
# check_job JOB: prints the files that do not compile, their errors on stderr.
# A batch that fails is compiled again a file at a time, so that only the
# files that fail alone are named: two test sources that share a name are not
# API drift (the CMake build's own unity batches would say so).
check_job() {
  local pch=${1%%|*} files=() keys=() u i src log
  for u in ${1#*|}; do files+=("${u%%:*}"); keys+=("${u##*:}"); done
  local args=(-I"$work/pch")
  mapfile -t -O 1 args <<< "$CHECK_FLAGS"
  [ "$pch" = yes ] && args+=(-include torch_all.h -Winvalid-pch)
  src=${files[0]}
  if [ ${#files[@]} -gt 1 ]; then
    src=$(mktemp -p "$work/batches" XXXXXX.cpp)
    for u in "${files[@]}"; do echo "#include \"$PWD/$u\""; done > "$src"
  fi
  log=$(mktemp)
  if g++ "${args[@]}" -fsyntax-only "$src" > "$log" 2>&1; then
    for u in "${keys[@]}"; do touch "$work/passed/$u"; done
  elif [ ${#files[@]} -gt 1 ]; then
    echo "check_torch2: a batch of ${#files[@]} test sources failed as one unit; compiling them one by one" >&2
    for i in "${!files[@]}"; do check_job "$pch|${files[i]}:${keys[i]}"; done
  else
    echo "${files[0]}"
    head -n 20 "$log" >&2
  fi
  rm -f "$log"
  [ ${#files[@]} -gt 1 ] && rm -f "$src"
  return 0
}
CHECK_FLAGS=$(printf '%s\n' "${flags[@]}")
export -f check_job
export work CHECK_FLAGS
failed=$(printf '%s\n' "${jobs[@]}" | grep . | xargs -P 2 -I{} bash -c 'check_job "$1"' _ {} || true)
if [ -n "$failed" ]; then
  echo "check_torch2: these files do not compile against the LibTorch 2.11 headers:" $failed
  exit 1
fi
echo "check_torch2: $count LibTorch translation units compile against the LibTorch 2.11 headers" \
     "($todo compiled, $((count - todo)) unchanged since they passed; $(( $(date +%s) - start )) s)"
