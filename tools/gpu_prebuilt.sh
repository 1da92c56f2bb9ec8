#!/usr/bin/env bash
# Keeps a GPU build's two binaries between device commands. A lent GPU
# machine goes back after 30 s idle, so each device command starts bare and
# would rebuild (80-170 s of the session's 30 minutes). The first command
# packs `pplab`, `pplab-train` and SentencePiece's module with a stamp of the sources they were built
# from; the next ones carry the archive in .gpu/ and use it when the sources
# are unchanged (docs/gpu.md, "Measuring on a lent GPU machine").
#
#   bash tools/gpu_prebuilt.sh pack BUILD OUT.tgz   # after a build, on the GPU machine
#   bash tools/gpu_prebuilt.sh use IN.tgz BUILD     # exit 0: BUILD/pplab is ready;
#                                                   # exit 1: build instead (reason printed)
#   bash tools/gpu_prebuilt.sh stamp                # the sources' stamp
#
# `use` unpacks .gpu/debs into /opt/deps as .gpu/build.sh does (the binaries
# load SentencePiece from there), then runs `BUILD/pplab --version` and
# `BUILD/pplab-train --help` so that a binary that cannot load its libraries
# falls back to a build too.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "gpu_prebuilt: $*" >&2; exit 2; }

# Every file a binary is built from: the CMake files and the C++ sources of
# the layers, the tables they include (*.inc: appending to unicode_tables.inc
# left the stamp as it was) and any CUDA source (tools/bench holds scripts
# only).
stamp() {
  local paths=() p
  for p in CMakeLists.txt schedules sim traces models runtime tools; do [ -e "$p" ] && paths+=("$p"); done
  find "${paths[@]}" -type f \
    \( -name '*.cc' -o -name '*.cpp' -o -name '*.h' -o -name '*.inc' -o -name '*.cu' -o -name '*.cmake' \
    -o -name CMakeLists.txt \) \
    -not -path 'tools/bench/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
}

case "${1:-}" in
  stamp)
    stamp
    ;;
  pack)
    [ $# -eq 3 ] || die "usage: pack BUILD OUT.tgz"
    build=$2 out=$3
    for f in pplab pplab-train; do
      [ -x "$build/$f" ] || die "pack: no $build/$f (build first)"
    done
    stage=$(mktemp -d)
    trap 'rm -rf "$stage"' EXIT
    cp "$build/pplab" "$build/pplab-train" "$stage/"
    # SentencePiece's module, which the binaries load from beside them (its
    # build path is compiled in, but a bare machine has no build).
    [ -f "$build/libpplab_spm.so" ] && cp "$build/libpplab_spm.so" "$stage/"
    [ -f "$build/CMakeCache.txt" ] && cp "$build/CMakeCache.txt" "$stage/"
    stamp > "$stage/source-stamp"
    tar czf "$out" -C "$stage" .
    echo "gpu_prebuilt: packed $build/pplab and pplab-train ($(du -h "$out" | cut -f1), stamp $(cat "$stage/source-stamp")) into $out"
    ;;
  use)
    [ $# -eq 3 ] || die "usage: use IN.tgz BUILD"
    in=$2 build=$3
    if [ ! -f "$in" ]; then echo "gpu_prebuilt: no $in: building"; exit 1; fi
    want=$(stamp)
    have=$(tar xzf "$in" -O ./source-stamp 2> /dev/null || true)
    if [ "$have" != "$want" ]; then
      echo "gpu_prebuilt: $in was built from other sources (stamp ${have:-none}, here $want): building"
      exit 1
    fi
    if [ ! -d /opt/deps/usr ] && ls .gpu/debs/*.deb > /dev/null 2>&1; then
      mkdir -p /opt/deps
      for f in .gpu/debs/*.deb; do dpkg -x "$f" /opt/deps; done
    fi
    mkdir -p "$build"
    tar xzf "$in" -C "$build" ./pplab ./pplab-train
    tar xzf "$in" -C "$build" ./libpplab_spm.so 2> /dev/null || true  # (packed since 2026-12-07)
    # The CMake cache says which LibTorch the binaries were built against
    # (gpu_bench.sh reads it); an existing one belongs to a build here.
    # It is removed again if the binaries do not start: .gpu/build.sh would
    # take it for a configured build and skip configuring.
    cache_from_archive=0
    if [ ! -f "$build/CMakeCache.txt" ] && tar xzf "$in" -C "$build" ./CMakeCache.txt 2> /dev/null; then
      cache_from_archive=1
    fi
    if ! "$build/pplab" --version > /dev/null 2>&1 || ! "$build/pplab-train" --help > /dev/null 2>&1; then
      echo "gpu_prebuilt: the binaries from $in do not start on this machine: building"
      rm -f "$build/pplab" "$build/pplab-train"
      [ "$cache_from_archive" = 1 ] && rm -f "$build/CMakeCache.txt"
      exit 1
    fi
    echo "gpu_prebuilt: using $build/pplab and pplab-train from $in (stamp $want)"
    ;;
  *)
    die "usage: $0 pack BUILD OUT.tgz | use IN.tgz BUILD | stamp"
    ;;
esac
