#!/usr/bin/env bash
# tools/gpu_prebuilt.sh on a copy of the sources:
#  1. pack then use gives back the same two binaries, and they run;
#  2. a changed source file makes `use` refuse (exit 1) and leaves nothing;
#  3. a binary that does not start makes `use` refuse and removes it;
#  4. bad arguments: one line, exit 2.
# Usage: gpu_prebuilt_test.sh SOURCE_DIR PPLAB
set -euo pipefail
src=$1
pplab=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# `use ARCHIVE OUT` must refuse with exit 1, saying WHY (a grep pattern),
# and leave no FILE under OUT: refused WHAT ARCHIVE OUT WHY FILE.
refused() {
  local what=$1 archive=$2 out=$3 why=$4 file=$5 rc
  set +e
  bash tools/gpu_prebuilt.sh use "$archive" "$out" > "$out.txt" 2>&1
  rc=$?
  set -e
  [ "$rc" = 1 ] || fail "use $what: exit $rc, expected 1"
  grep -q "$why" "$out.txt" || fail "no reason given for $what: $(cat "$out.txt")"
  [ ! -e "$out/$file" ] || fail "$what: $file was left in $out"
}

tree=$tmp/tree
mkdir -p "$tree/tools" "$tree/build"
cp "$src/tools/gpu_prebuilt.sh" "$tree/tools/"
cp -r "$src/CMakeLists.txt" "$src/schedules" "$src/runtime" "$tree/"
cp "$pplab" "$tree/build/pplab"
cp "$(dirname "$pplab")/pplab-train" "$tree/build/pplab-train"
cp "$(dirname "$pplab")/libpplab_spm.so" "$tree/build/libpplab_spm.so"
echo "PPLAB_WITH_CUDA:INTERNAL=ON" > "$tree/build/CMakeCache.txt"
cd "$tree"

# 1. Round trip.
bash tools/gpu_prebuilt.sh pack build "$tmp/bin.tgz" > "$tmp/pack.txt"
grep -q "stamp $(bash tools/gpu_prebuilt.sh stamp)" "$tmp/pack.txt" || fail "pack does not print the stamp: $(cat "$tmp/pack.txt")"
bash tools/gpu_prebuilt.sh use "$tmp/bin.tgz" "$tmp/out" > "$tmp/use.txt" || fail "use refused unchanged sources: $(cat "$tmp/use.txt")"
cmp -s build/pplab "$tmp/out/pplab" || fail "pplab differs after the round trip"
cmp -s build/pplab-train "$tmp/out/pplab-train" || fail "pplab-train differs after the round trip"
cmp -s build/libpplab_spm.so "$tmp/out/libpplab_spm.so" || fail "SentencePiece's module did not come along"
grep -q "PPLAB_WITH_CUDA:INTERNAL=ON" "$tmp/out/CMakeCache.txt" || fail "the CMake cache did not come along"
"$tmp/out/pplab" --version | grep -q pplab || fail "the unpacked pplab does not run"

# 2. One source byte more: another stamp, refused, nothing unpacked; a
#    table a source includes counts too.
echo "// changed" >> runtime/exec/executor.cc
refused "after a source change" "$tmp/bin.tgz" "$tmp/out2" "other sources" pplab
cp "$src/runtime/exec/executor.cc" runtime/exec/executor.cc
[ "$(bash tools/gpu_prebuilt.sh stamp)" = "$(tar xzf "$tmp/bin.tgz" -O ./source-stamp)" ] ||
  fail "the sources as packed give another stamp"
echo "// changed" >> runtime/data/unicode_tables.inc
refused "after a change to an included table" "$tmp/bin.tgz" "$tmp/out2b" "other sources" pplab
cp "$src/runtime/data/unicode_tables.inc" runtime/data/unicode_tables.inc

# 3. A pplab-train that cannot start (here: not an executable format).
stamp_before=$(bash tools/gpu_prebuilt.sh stamp)
printf 'not a program' > build/pplab-train
chmod +x build/pplab-train
bash tools/gpu_prebuilt.sh pack build "$tmp/bad.tgz" > /dev/null
refused "of a broken binary" "$tmp/bad.tgz" "$tmp/out3" "do not start" pplab-train
[ "$(bash tools/gpu_prebuilt.sh stamp)" = "$stamp_before" ] || fail "the stamp depends on the build folder"

# 4. Bad arguments, and a missing archive.
set +e
bash tools/gpu_prebuilt.sh > "$tmp/e1.txt" 2>&1; rc1=$?
bash tools/gpu_prebuilt.sh pack build > "$tmp/e2.txt" 2>&1; rc2=$?
bash tools/gpu_prebuilt.sh use "$tmp/none.tgz" "$tmp/out4" > "$tmp/e3.txt" 2>&1; rc3=$?
set -e
[ "$rc1" = 2 ] && [ "$(wc -l < "$tmp/e1.txt")" = 1 ] || fail "no verb: exit $rc1, $(cat "$tmp/e1.txt")"
[ "$rc2" = 2 ] && grep -q "usage: pack" "$tmp/e2.txt" || fail "pack without OUT: exit $rc2, $(cat "$tmp/e2.txt")"
[ "$rc3" = 1 ] && grep -q "no $tmp/none.tgz" "$tmp/e3.txt" || fail "missing archive: exit $rc3, $(cat "$tmp/e3.txt")"
echo "gpu_prebuilt: round trip, stale sources, broken binary and bad arguments all behave"
