#!/usr/bin/env bash
# bf16 against fp32 numerics (issue 10's target): trains the small preset on
# text twice, in fp32 and in --precision bf16, from the same seed and data,
# and compares the two loss curves step by step. Prints a Markdown table row
# (the per-step relative difference |bf16 - fp32| / fp32: its maximum, its
# mean, and its maximum over the last tenth of the run; then the same maximum
# for the curves' 10-step trailing means, the curve as a loss plot smooths it)
# and both curves' first and last losses. The target is 2 % at every step.
# A third run, fp32 with the batch in 2 microbatches, gives a second row: the
# same sums in another order, so how far rounding alone moves the curve, the
# floor under bf16's row (--no-floor leaves it out).
#
# Usage, from the project's root after building:
#   bash tools/bench/precision_curve.sh [--pplab build/pplab] [--steps 200] [--device cpu|cuda]
#                                       [--data FILE] [--threads N] [--keep DIR]
#   --steps N    steps of each run (default 200)
#   --device D   cpu (default; LibTorch autocasts to bf16 on the CPU) or cuda
#   --data FILE  the text to train on (default tests/data/text/fortunes.txt)
#   --threads N  compute threads per run on the CPU (default 1: deterministic
#                and not stretched by a loaded machine)
#   --keep DIR   keep the runs' --json output there (losses and all):
#                fp32.json, bf16.json and fp32-m2.json
#   --no-floor   no third run
set -euo pipefail
cd "$(dirname "$0")/../.."
pplab=build/pplab
steps=200
device=cpu
data=tests/data/text/fortunes.txt
threads=1
keep=""
floor=1
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || case $1 in --pplab|--steps|--device|--data|--threads|--keep) echo "precision_curve: $1 needs a value" >&2; exit 2 ;; esac
  case $1 in
    --pplab) pplab=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --no-floor) floor=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "precision_curve: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case $steps in ''|*[!0-9]*|0) echo "precision_curve: --steps '$steps' is not a positive whole number" >&2; exit 2 ;; esac
case $threads in ''|*[!0-9]*|0) echo "precision_curve: --threads '$threads' is not a positive whole number" >&2; exit 2 ;; esac
[ -x "$pplab" ] || { echo "precision_curve: no pplab at $pplab (build it, or pass --pplab)" >&2; exit 2; }
[ -f "$data" ] || { echo "precision_curve: --data $data: no such file" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${keep:-$work}
mkdir -p "$out"
args=(train -q --out '' --model small --data "$data" --vocab-size 200 --cache-dir "$work/cache"
      --batch-size 8 --seq-len 64 -k 1 --steps "$steps" --lr 3e-3 --warmup-steps 5 --seed 2
      --eval-every 0 --device "$device" --json)
for p in fp32 bf16; do
  OMP_NUM_THREADS=$threads "$pplab" "${args[@]}" -m 1 --precision "$p" > "$out/$p.json"
done
floor_json=()
if [ "$floor" = 1 ]; then
  OMP_NUM_THREADS=$threads "$pplab" "${args[@]}" -m 2 --precision fp32 > "$out/fp32-m2.json"
  floor_json=("$out/fp32-m2.json")
fi
python3 tools/bench/precision_table.py "$out/fp32.json" "$out/bf16.json" "$device" "$steps" ${floor_json[@]+"${floor_json[@]}"}
