#!/usr/bin/env bash
# GPU benchmark (issue 10): pplab against the plain PyTorch reference on the
# same GPU, in one run, row by row: the same model shapes and batch, fp32 and
# bf16. The reference is ../shared/gpu/torch_anchor.py (eager on one GPU, or
# torch.distributed.pipelining with K ranks sharing it). Prints a Markdown
# table for docs/gpu.md: tokens/s of both, their ratio, and the MFU of both
# (the same model FLOPs, models/flops.h, over each one's step time and the
# GPU's peak for the precision, as pplab train --json reports them). A second
# table says where pplab's step goes, with the row's matrix products timed
# alone (tools/bench/gemm_floor.py): the floor under a step the GPU's
# arithmetic bounds.
#
# Usage, from the project's root on the GPU machine, after `bash .gpu/build.sh`:
#   bash tools/bench/gpu_bench.sh [--pplab build-cuda/pplab] [--steps 20] [--rows REGEX] [--dry-run]
#   --steps N   measured steps per run, after 3 warm-up steps (the reference's own rule)
#   --rows RE   only the rows whose label or precision matches RE (grep -E)
#   --pplab-args "A B"  more arguments for every pplab train (an A/B of one
#               feature, e.g. --no-flat-params), split at spaces
#   --traces DIR  keep each pplab run's measured trace of its last step (CUDA
#               events) in DIR, as row-R-PRECISION.json, R the row's place in
#               the table from 1 (pplab stats and explain read them; the
#               second table's last column is pplab stats' of each)
#   --run-timeout S  bound each run, the reference's and pplab's (default 240 s;
#               a run past it shows as n/a with the reason)
#   --deadline S  start no row's pair of runs S seconds or more after the bench
#               began (default 0: none); the rows left out are named under the
#               table, so a bounded device command still ends with its table
#   --dry-run   print the commands it would run, run nothing (no GPU needed)
#   --list-rows print the rows (label and precision) --rows picks and exit; a
#               pattern that matches none is refused, as it is before a run
#   PPLAB_BENCH_BACKEND=gloo   pplab's --backend for K=2 (default auto: NCCL)
#
# The reference script is never committed: the bench copies it next to itself
# (tools/bench/torch_anchor.py, git-ignored) from .gpu/ (where
# ../shared/gpu/prepare.sh puts it for the GPU machine) or ../shared/gpu/.
# pplab trains a JSON model config made from the reference's PRESETS, so both
# sides train the same shapes (the reference's "small" is not pplab's small
# preset). pplab's step time is the mean of its reported step times after the
# same 3 warm-up steps. bf16 rows pass --precision bf16 to pplab; a pplab
# without that flag shows them as n/a. pplab's K=2 runs pass --comm-timeout
# 30, so that a hung message ends the run in about 40 s.
#
# The copy of the reference gets one fix, said in the output: its eager run
# built the model without autocast, and the model's own autocast(enabled=
# False) turned off the step's bf16 autocast, so its eager bf16 rows ran in
# fp32. The copy builds the eager model with autocast on in bf16, as its
# pipelining run does.
#
# Without a CUDA GPU (nvidia-smi lists none, the python torch has no CUDA, or
# pplab was built without CUDA) it prints why and exits 0, running nothing.
# For its test: PPLAB_BENCH_ASSUME_NO_GPU=1 acts so on any machine;
# PPLAB_BENCH_FAKE_GPU=1 skips the GPU checks and runs PPLAB_ANCHOR and
# --pplab as given (stand-ins), with the reference copied into a temporary
# folder instead of tools/bench/; PPLAB_GEMM_FLOOR names a stand-in for
# gemm_floor.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=tools/bench
source "$here/gpu_others.sh"
pplab=build-cuda/pplab
steps=20
warmup=3  # torch_anchor.py's warm-up steps
rows_re=.
dry_run=0
list_rows=0
pplab_args=()
traces=""
run_timeout=240
deadline=0
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || case $1 in --pplab|--steps|--rows|--pplab-args|--traces|--run-timeout|--deadline) echo "gpu_bench: $1 needs a value" >&2; exit 2 ;; esac
  case $1 in
    --pplab) pplab=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rows) rows_re=$2; shift 2 ;;
    --pplab-args) read -r -a pplab_args <<< "$2"; shift 2 ;;
    --traces) traces=$2; shift 2 ;;
    --run-timeout) run_timeout=$2; shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --list-rows) list_rows=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $run_timeout =~ ^[1-9][0-9]*$ ]] || { echo "gpu_bench: --run-timeout must be a positive number of seconds, got '$run_timeout'" >&2; exit 2; }
[[ $deadline =~ ^[0-9]+$ ]] || { echo "gpu_bench: --deadline must be a whole number of seconds, got '$deadline'" >&2; exit 2; }
[[ $steps =~ ^[1-9][0-9]*$ ]] || { echo "gpu_bench: --steps must be a positive number of steps, got '$steps'" >&2; exit 2; }

# The table of issue 10: label | reference mode | K | schedule | model | batch | seq | M
rows=(
  "K=1, small, 16×128, M=1|eager|1|-|small|16|128|1"
  "K=1, default, 16×128, M=4|eager|1|-|default|16|128|4"
  "K=1, default, 64×512, M=8|eager|1|-|default|64|512|8"
  "K=2 1F1B, small, 16×128, M=8|pipe|2|1f1b|small|16|128|8"
  "K=2 1F1B, default, 16×128, M=8|pipe|2|1f1b|default|16|128|8"
  "K=2 GPipe, default, 16×128, M=8|pipe|2|gpipe|default|16|128|8"
  "K=2 1F1B, default, 64×512, M=8|pipe|2|1f1b|default|64|512|8"
)
# The rows --rows picks, checked before anything runs: a pattern grep
# cannot read, or one that matches no row, gave an empty table and exit 0.
picked=()
for row in "${rows[@]}"; do
  for precision in fp32 bf16; do
    code=0
    grep -qE -- "$rows_re" <<< "${row%%|*} $precision" 2> /dev/null || code=$?
    [ "$code" -le 1 ] || { echo "gpu_bench: --rows '$rows_re' is not an extended regular expression (grep -E)" >&2; exit 2; }
    [ "$code" = 0 ] && picked+=("${row%%|*} $precision")
  done
done
if [ ${#picked[@]} = 0 ]; then
  echo "gpu_bench: --rows '$rows_re' matches no row; the rows are:" >&2
  for row in "${rows[@]}"; do echo "  ${row%%|*} (fp32, bf16)" >&2; done
  exit 2
fi
if [ "$list_rows" = 1 ]; then
  printf '%s\n' "${picked[@]}"
  exit 0
fi
# Milliseconds of wall time (bash's EPOCHREALTIME; SECONDS counts whole
# seconds and can tick over just after it is read).
now_ms() { local t=${EPOCHREALTIME:-$SECONDS.000000}; t=${t/,/.}; echo $(( ${t%.*} * 1000 + 10#${t#*.} / 1000 )); }

# Why this machine cannot run the bench, or nothing.
no_gpu_reason() {
  if [ -n "${PPLAB_BENCH_ASSUME_NO_GPU:-}" ]; then echo "PPLAB_BENCH_ASSUME_NO_GPU is set"; return; fi
  if ! command -v nvidia-smi > /dev/null; then echo "no nvidia-smi on this machine"; return; fi
  if ! grep -q '^GPU ' <<< "$(nvidia-smi -L 2> /dev/null)"; then echo "nvidia-smi lists no GPU"; return; fi
  if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
    echo "python3's torch is missing or has no CUDA (the reference needs it)"; return
  fi
  local cache
  cache="$(dirname "$pplab")/CMakeCache.txt"
  if [ ! -x "$pplab" ]; then echo "no pplab at $pplab (bash .gpu/build.sh builds it; or pass --pplab)"; return; fi
  if [ -f "$cache" ] && ! grep -q 'PPLAB_WITH_CUDA:INTERNAL=ON' "$cache"; then
    echo "$pplab was built against a LibTorch without CUDA"; return
  fi
}

fake=${PPLAB_BENCH_FAKE_GPU:-}
# The matrix products alone (gemm_floor.py); a stand-in for the test.
# By its absolute path, which gpu_session.sh's clean-up between parts looks for.
gemm=${PPLAB_GEMM_FLOOR:-$PWD/$here/gemm_floor.py}
if [ "$dry_run" = 0 ] && [ -z "$fake" ]; then
  reason=$(no_gpu_reason)
  if [ -n "$reason" ]; then
    echo "gpu_bench: no CUDA GPU to benchmark on: $reason; nothing run"
    exit 0
  fi
fi

anchor_src=""
# The copy an earlier run left next to the bench comes last: the one in .gpu/
# or ../shared/gpu/ is the reference as shipped.
for f in "${PPLAB_ANCHOR:-}" .gpu/torch_anchor.py ../shared/gpu/torch_anchor.py "$here/torch_anchor.py"; do
  if [ -n "$f" ] && [ -f "$f" ]; then anchor_src=$f; break; fi
done
if [ -z "$anchor_src" ]; then
  echo "gpu_bench: no torch_anchor.py in $here/, .gpu/ or ../shared/gpu/ (run bash ../shared/gpu/prepare.sh here)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# By its absolute path, which gpu_session.sh's clean-up between parts looks for.
anchor=$PWD/$here/torch_anchor.py
[ -n "$fake" ] && anchor=$work/torch_anchor.py

# pplab model configs with the reference's shapes, read from its PRESETS
# without importing it (no torch needed).
python3 - "$anchor_src" "$work" <<'PY'
import ast, json, sys
src, out = sys.argv[1], sys.argv[2]
tree = ast.parse(open(src).read())
node = next(n.value for n in tree.body
            if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "PRESETS" for t in n.targets))
# A literal of dict(...) calls and numbers: evaluated with nothing else in scope.
presets = eval(compile(ast.Expression(node), src, "eval"), {"__builtins__": {}}, {"dict": dict})
names = {"vocab": "vocab_size", "hidden": "hidden_size", "inter": "intermediate_size", "layers": "num_hidden_layers",
         "heads": "num_attention_heads", "kv": "num_key_value_heads"}
for model, shape in presets.items():
    json.dump({names[k]: v for k, v in shape.items()}, open("%s/model-%s.json" % (out, model), "w"), sort_keys=True)
PY

backend=${PPLAB_BENCH_BACKEND:-auto}
has_precision=0
if [ "$dry_run" = 1 ] || grep -q -- '--precision' <<< "$("$pplab" train --help 2> /dev/null)"; then has_precision=1; fi


show() { printf '%q ' "$@" | sed 's/ $//'; echo; }

# One run, bounded by --run-timeout, its output in $1.out and $1.err; a failed
# run shows in its table cell through the last line of $1.err.
bounded() {
  local base=$1 rc=0
  shift
  timeout -k 5 "$run_timeout" "$@" > "$base.out" 2> "$base.err" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "still running after $run_timeout s (--run-timeout)" >> "$base.err"; fi
  return 0
}

# The reference's eager model gets autocast in bf16 runs (see the top); prints
# the line that says so, or nothing when the script has no such line to fix.
patch_eager_bf16() {
  python3 - "$1" << 'PY'
import sys
path = sys.argv[1]
text = open(path).read()
old = 'm = Stage(c, 0, c["layers"], True, True, args.seq).to(dev)'
new = 'm = Stage(c, 0, c["layers"], True, True, args.seq, amp=args.dtype == "bf16").to(dev)'
if text.count(old) == 1:
    open(path, "w").write(text.replace(old, new))
if new in text or text.count(old) == 1:
    print("The reference's eager model was built without autocast, which turned the step's bf16 autocast off; "
          "this run's copy builds it with autocast in bf16 (its pipelining model already was).")
PY
}

if [ "$dry_run" = 1 ]; then
  echo "# gpu_bench --dry-run: the commands of one bench run"
  show cp "$anchor_src" "$anchor"
  for f in "$work"/model-*.json; do
    echo "# $(basename "$f" .json | sed 's/^model-//') model for pplab: $(cat "$f")"
  done
else
  # An earlier run's copy may be the only one left: then it is its own source.
  [ "$anchor_src" -ef "$anchor" ] || cp "$anchor_src" "$anchor"
  anchor_note=$(patch_eager_bf16 "$anchor")
  [ -n "$traces" ] && mkdir -p "$traces"
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -n 1 || true)
  torch_version=$(python3 -c 'import torch; print(torch.__version__)' 2> /dev/null || true)
  echo "## pplab against PyTorch on one ${gpu:-GPU of unknown name}"
  echo
  echo "$(date -u +%Y-%m-%d), torch ${torch_version:-?}, pplab $(git rev-parse --short HEAD 2> /dev/null || echo '?'),"
  echo "$steps measured steps after $warmup warm-up steps per run, pplab --backend $backend${pplab_args[*]+ ${pplab_args[*]}}."
  gpu_others_line
  [ -n "$anchor_note" ] && echo "$anchor_note"
  echo
  echo "| run | precision | PyTorch | PyTorch tok/s | pplab tok/s | pplab / PyTorch | PyTorch MFU | pplab MFU |"
  echo "|---|---|---|---|---|---|---|---|"
fi

n=0
r=0
started=$(now_ms)
for row in "${rows[@]}"; do
  IFS='|' read -r label mode K schedule model batch seq micro <<< "$row"
  r=$((r + 1))
  for precision in fp32 bf16; do
    grep -qE -- "$rows_re" <<< "$label $precision" || continue
    n=$((n + 1))
    ref=(python3 "$anchor" "$mode" --model "$model" --batch "$batch" --seq "$seq" --micro "$micro" --steps "$steps"
         --dtype "$precision")
    run=("$pplab" train --device cuda -k "$K" -m "$micro" --model "$work/model-$model.json" --synthetic
         --batch-size "$batch" --seq-len "$seq" --steps $((steps + warmup)) --out '' -q --json)
    if [ "$mode" = pipe ]; then
      ref+=(--ranks "$K" --schedule "$schedule")
      # torch_anchor.py's pipelining step does not clip gradients; its eager step clips at 1.0, as pplab does.
      run+=(-s "$schedule" --backend "$backend" --clip-norm 0 --comm-timeout 30)
    fi
    [ "$precision" = bf16 ] && run+=(--precision bf16)
    [ -n "$traces" ] && run+=(--trace "$traces/row-$r-$precision.json")
    run+=(${pplab_args[@]+"${pplab_args[@]}"})
    floor=(python3 "$gemm" "$work/model-$model.json" --tokens $((batch * seq / micro)) --microbatches "$micro"
           --dtype "$precision" --seq-len "$seq")
    if [ "$dry_run" = 1 ]; then
      echo "# $label, $precision"
      show "${ref[@]}"
      show "${run[@]}"
      show "${floor[@]}"
      continue
    fi
    if [ "$deadline" -gt 0 ] && [ $(($(now_ms) - started)) -ge $((deadline * 1000)) ]; then
      echo "- $label, $precision" >> "$work/late.md"
      continue
    fi
    bounded "$work/ref-$n" "${ref[@]}"
    if [ "$precision" = fp32 ] || [ "$has_precision" = 1 ]; then
      bounded "$work/pplab-$n" "${run[@]}"
    else
      echo "this pplab has no --precision" > "$work/pplab-$n.err"
    fi
    # Rows of one model, microbatch and precision share their products (the
    # K=2 rows of a K=1 row's shapes, GPipe's of 1F1B's): timed once.
    gemm_base="$work/gemm-$model-$((batch * seq / micro))-$micro-$precision"
    [ -e "$gemm_base.out" ] || bounded "$gemm_base" "${floor[@]}"
    # The GPU's busy time in the run's last step, from its trace (pplab
    # stats): with two ranks on the GPU, also how long both computed at once.
    trace="$traces/row-$r-$precision.json"
    if [ -n "$traces" ] && [ -s "$trace" ]; then
      bounded "$work/stats-$n" "$pplab" stats --json "$trace"
    fi
    python3 - "$label" "$precision" "$mode" "$warmup" $((batch * seq)) "$work/ref-$n" "$work/pplab-$n" \
      "$work/peaks" "$work/where.md" "$gemm_base" "$work/stats-$n.out" >> "$work/table.md" <<'PY'
import json, statistics, sys
label, precision, mode, warmup, tokens, ref_base, got_base, peaks, where, gemm_base, stats_path = sys.argv[1:12]
warmup, tokens = int(warmup), int(tokens)
def last_json(path):
    try:
        lines = [l for l in open(path) if l.lstrip().startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None
def last_line(path):
    try:
        lines = [l.strip() for l in open(path) if l.strip()]
    except OSError:
        lines = []
    return lines[-1][:80].replace("|", "/") if lines else "no output"
ref, got = last_json(ref_base + ".out"), last_json(got_base + ".out")
ref_why = ref["error"][:80] if ref and "error" in ref else last_line(ref_base + ".err")
if ref is not None and "step_ms" not in ref: ref = None
ref_s = ref["step_ms"] / 1e3 if ref and ref["step_ms"] > 0 else None
got_s = flops = peak = None
# A run with no positive step time has no figure (a zero divided the row and
# lost every row after it).
if got is not None and not [t for t in got.get("step_times_ms") or [] if t > 0]:
    got = None
if got is not None:
    times = got["step_times_ms"][warmup:] or got["step_times_ms"]
    got_s = sum(times) / len(times) / 1e3
    if got_s <= 0:
        got_s = None
    flops, peak, source = got.get("model_flops_per_step"), got.get("peak_tflops"), got.get("peak_source", "")
    # A bf16 row needs the bf16 peak: a peak of another precision gives no MFU.
    if peak and precision not in source and source != "--peak-tflops":
        peak = None
    with open(peaks, "a") as f:
        f.write(source + "\n")
    # Where pplab's step goes, from the same run (rank 0's steps after the warm-up).
    def mean_of(key):
        v = (got.get(key) or [])[warmup:]
        return "%.2f" % (sum(v) / len(v)) if v else "n/a"
    lags = (got.get("device_lag_ms") or [])[warmup:]
    overhead = got.get("executor_overhead") or []
    gemm = last_json(gemm_base + ".out")
    if gemm and "ms_per_step" in gemm and got_s:
        floor = "%.2f (%.0f %%)" % (gemm["ms_per_step"], 100 * gemm["ms_per_step"] / (got_s * 1e3))
        if "attention_ms_per_step" in gemm:
            both = gemm["ms_per_step"] + gemm["attention_ms_per_step"]
            floor += "; %.2f (%.0f %%)" % (both, 100 * both / (got_s * 1e3))
    else:
        floor = "n/a (%s)" % last_line(gemm_base + ".err")
    try:
        stats = json.load(open(stats_path))
    except (OSError, ValueError):
        stats = None
    busy = "n/a"
    if stats and stats.get("shared_devices"):
        d = stats["shared_devices"][0]
        busy = "%.2f (%.2f)" % (d["busy"], d["over_slots"])
    elif stats and stats.get("per_rank"):
        busy = "%.2f" % stats["per_rank"][0]["busy"]
    with open(where, "a") as f:
        f.write("| %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s |\n" % (
            label, precision, got_s * 1e3, mean_of("step_clock_ms"), mean_of("host_issue_ms"),
            "%.3f" % statistics.median(lags) if lags else "n/a",
            "%.2f %%" % (100 * max(overhead)) if overhead else "n/a", mean_of("bubbles"), floor, busy))
def tok_s(s, why):
    return "{:,.0f}".format(tokens / s).replace(",", " ") if s else "n/a (%s)" % why
def mfu(s):
    return "%.1f %%" % (100 * flops / (s * peak * 1e12)) if (s and flops and peak) else "n/a"
ratio = "%.2f" % (ref_s / got_s) if (ref_s and got_s) else "n/a"
print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (label, precision, "eager" if mode == "eager" else "pipelining",
      tok_s(ref_s, ref_why), tok_s(got_s, last_line(got_base + ".err")), ratio, mfu(ref_s), mfu(got_s)))
PY
    tail -n 1 "$work/table.md"
    # The row's where-line now too, so a bench cut short keeps it.
    where_rows=$(wc -l 2> /dev/null < "$work/where.md" || echo 0)
    if [ "$where_rows" -gt "${where_seen:-0}" ]; then
      echo "  where: $(tail -n 1 "$work/where.md")"
      where_seen=$where_rows
    fi
  done
done

if [ "$dry_run" = 0 ]; then
  if [ -s "$work/late.md" ]; then
    echo
    echo "Not run, past --deadline $deadline s:"
    echo
    cat "$work/late.md"
  fi
  echo
  if [ -s "$work/where.md" ]; then
    echo "Where pplab's step goes (rank 0, mean over the measured steps):"
    echo
    echo "| run | precision | step ms | executor step on the GPU ms | host's issue of it ms | device lag ms (median) | executor overhead (worst rank) | bubble | matrix products alone ms (of the step); with attention | GPU computing ms (both ranks at once) |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    cat "$work/where.md"
    echo
    echo "The step is wall time (what tokens/s uses); the executor's step is its actions on CUDA events; the host's"
    echo "issue is the host's time from that step's first mark to its last. The device lag is how long after the host"
    echo "issued a compute action the GPU started it: near 0 the GPU waits for the host to queue kernels (launch-bound:"
    echo "fewer launches would pay), large the host runs ahead. Executor overhead: idle time with the data there, over"
    echo "the last step's makespan (pplab explain's \"other\"). The matrix products alone: the step's Linear layers'"
    echo "forward and backward products at the row's shapes, timed by themselves (tools/bench/gemm_floor.py): the floor"
    echo "under a step the GPU's arithmetic bounds; after the semicolon, with each layer's attention (SDPA, forward and"
    echo "backward) timed alone added. GPU computing: in the last step's trace (--traces, pplab stats), the"
    echo "time some rank computed; with two ranks on the GPU, in brackets the time both did at once, time-sliced."
    echo
  fi
  peaks=$(sort -u "$work/peaks" 2> /dev/null | paste -sd ';' - | sed 's/;/; /g' || true)
  echo "MFU: the model FLOPs of a step (6 x Linear weights x tokens, plus 6 x hidden x T(T+1) per sequence and"
  echo "layer for causal attention; docs/gpu.md) over the step time and the GPU's peak (${peaks:-none known})."
  echo "With K=2 both ranks share the one GPU, so the figure is the GPU's: all ranks' FLOPs over one GPU's peak."
fi
