#!/usr/bin/env bash
# Regenerates the golden traces that tests/traces/chrome_trace_test.cpp
# compares against. Run from the repository root after building:
#   bash tests/data/golden/regenerate.sh [path/to/pplab]
set -euo pipefail
pplab=${1:-build/pplab}
dir=tests/data/golden
flags=(--f-time 1 --b-time 2 --comm-latency 0.1 --activation-bytes 1000 --message-bytes 100)
"$pplab" simulate --schedule 1f1b --ranks 2 --microbatches 3 "${flags[@]}" --trace $dir/1f1b_k2_m3.json >/dev/null
"$pplab" simulate --schedule zb-h1 --ranks 2 --microbatches 3 "${flags[@]}" --trace $dir/zb-h1_k2_m3.json >/dev/null
"$pplab" simulate --schedule interleaved-1f1b --ranks 2 --microbatches 2 --virtual 2 "${flags[@]}" \
  --trace $dir/interleaved-1f1b_k2_m2_v2.json >/dev/null
echo "regenerated: $(ls $dir/*.json | tr '\n' ' ')"
