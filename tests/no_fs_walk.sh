#!/usr/bin/env bash
# pplab's binaries load LibTorch, and the pip torch exports its own copy of
# std::filesystem: directory_iterator and remove_all bound to it segfault on
# LibTorch 2.11 (schedules/file_io.h). This check fails when a source file
# uses them; ListDirectory and RemoveTree do the same through POSIX.
#   usage: bash tests/no_fs_walk.sh PROJECT_ROOT
set -euo pipefail
root=${1:?usage: no_fs_walk.sh PROJECT_ROOT}
hits=$(cd "$root" && grep -rnE '(fs|filesystem)::(recursive_)?directory_iterator|(fs|filesystem)::remove_all' --include='*.cc' --include='*.cpp' --include='*.h' \
         schedules sim traces models runtime tools tests || true)
if [ -n "$hits" ]; then
  echo "std::filesystem directory walks crash in processes that load the pip LibTorch; use ListDirectory/RemoveTree:"
  echo "$hits"
  exit 1
fi
echo "no std::filesystem directory walks in the sources"
