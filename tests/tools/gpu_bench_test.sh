#!/usr/bin/env bash
# tools/bench/gpu_bench.sh, checked without a GPU:
#  1. on a machine without CUDA it says why in one line, exits 0 and runs nothing
#     (a fake pplab that would leave a file behind is never started);
#  2. --dry-run's commands use only flags that `pplab train` and torch_anchor.py
#     accept (--precision only where pplab has it: the bench gates bf16 on it),
#     and pplab trains the model configs it makes from the reference's shapes;
#  3. with stand-ins for the GPU, the reference and pplab (PPLAB_BENCH_FAKE_GPU),
#     the table's cells are the tokens/s, ratio and MFU of the given step times,
#     and a failed run shows its reason in its cell.
# Usage: gpu_bench_test.sh SOURCE_DIR PPLAB. Exits 77 (skipped) when the
# reference script (../shared/gpu/torch_anchor.py) is not on this machine.
set -euo pipefail
src=$1
pplab=$2
bench=$src/tools/bench/gpu_bench.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. No GPU: one line, exit 0, nothing run.
printf '#!/bin/sh\ntouch "%s/ran"\n' "$tmp" > "$tmp/fake-pplab"
chmod +x "$tmp/fake-pplab"
no_gpu=()
command -v nvidia-smi > /dev/null && no_gpu=(PPLAB_BENCH_ASSUME_NO_GPU=1)  # a GPU machine: act as if none
out=$(env "${no_gpu[@]}" bash "$bench" --pplab "$tmp/fake-pplab") || fail "exit code $? without a GPU"
echo "$out"
[ "$(echo "$out" | wc -l)" -eq 1 ] || fail "expected one line without a GPU"
[[ $out == "gpu_bench: no CUDA GPU to benchmark on: "*"; nothing run" ]] || fail "unexpected line: $out"
[ ! -e "$tmp/ran" ] || fail "pplab was started without a GPU"

# 2. The dry run's commands against the two command lines.
anchor=""
for f in "$src/.gpu/torch_anchor.py" "$src/../shared/gpu/torch_anchor.py"; do [ -f "$f" ] && anchor=$f && break; done
if [ -z "$anchor" ]; then echo "skipped: no torch_anchor.py next to the project"; exit 77; fi
# --pplab-args reaches every pplab command (and its flags are checked below).
bash "$bench" --dry-run --pplab "$pplab" --pplab-args "--no-flat-params" > "$tmp/dry.txt" || fail "--dry-run failed"
[ "$(grep -c -- "^$pplab train .* --no-flat-params\$" "$tmp/dry.txt")" -eq 14 ] || fail "--pplab-args not on every pplab line"
help=$("$pplab" train --help)
has_precision=0
grep -q -- '--precision' <<< "$help" && has_precision=1
# The words of the help between spaces, commas, '=' and line ends: each
# flag it names (one lookup a word below, not one grep a word).
declare -A known=()
while read -r -a help_words; do
  for h in "${help_words[@]}"; do known[$h]=1; done
done <<< "$(tr ',=' '  ' <<< "$help")"
anchor_text=$(< "$anchor")
[[ $anchor_text == *'choices=["eager", "pipe"]'* ]] || fail "torch_anchor.py's modes changed"
pplab_lines=0
anchor_lines=0
while IFS= read -r line; do
  read -r -a words <<< "$line"
  case $line in
    "$pplab train "*)
      pplab_lines=$((pplab_lines + 1))
      for w in "${words[@]}"; do
        [[ $w == -* && ! $w =~ ^-[0-9] ]] || continue
        if [ "$w" = --precision ] && [ "$has_precision" = 0 ]; then continue; fi
        [ -n "${known[$w]:-}" ] || fail "pplab train has no $w: $line"
      done
      ;;
    "python3 "*torch_anchor.py*)
      anchor_lines=$((anchor_lines + 1))
      [[ ${words[2]} == eager || ${words[2]} == pipe ]] || fail "mode ${words[2]}: $line"
      for ((i = 3; i < ${#words[@]}; i++)); do
        w=${words[i]}
        if [[ $w == --* ]]; then
          [[ $anchor_text == *"add_argument(\"$w\""* ]] || fail "torch_anchor.py has no $w: $line"
          v=${words[i + 1]}
          case $w in
            --schedule|--dtype) [[ $anchor_text == *"\"$v\""* ]] || fail "torch_anchor.py knows no $w $v: $line" ;;
          esac
        fi
      done
      ;;
  esac
done < "$tmp/dry.txt"
[ "$pplab_lines" -eq 14 ] && [ "$anchor_lines" -eq 14 ] || fail "expected 14 rows, got $pplab_lines and $anchor_lines"
[ "$has_precision" = 1 ] || echo "note: this pplab has no --precision: the bench shows its bf16 rows as n/a"

# pplab trains one step of each model config the bench makes (batch 1 x 8 tokens, CPU).
grep -E '^# [a-z]+ model for pplab: ' "$tmp/dry.txt" | while IFS= read -r line; do
  name=$(sed -E 's/^# ([a-z]+) model.*/\1/' <<< "$line")
  sed -E 's/^# [a-z]+ model for pplab: //' <<< "$line" > "$tmp/$name.json"
  "$pplab" train --model "$tmp/$name.json" --synthetic --steps 1 -k 1 -m 1 --batch-size 1 --seq-len 8 --out '' -q \
    --json > "$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out"; fail "pplab refuses the $name config"; }
  echo "pplab trains the $name config: $(cat "$tmp/$name.json")"
done
# Each row times its matrix products alone, in its precision, and its
# attention at its sequence length; gemm_floor.py counts the products' FLOPs
# as pplab does, less attention's: pplab's model FLOPs of batch 1 x 8 tokens
# minus 6 x hidden x 8 x 9 x layers.
[ "$(grep -c -- '^python3 .*gemm_floor\.py .* --dtype fp32 --seq-len \(128\|512\)$' "$tmp/dry.txt")" -eq 7 ] &&
  [ "$(grep -c -- '^python3 .*gemm_floor\.py .* --dtype bf16 --seq-len \(128\|512\)$' "$tmp/dry.txt")" -eq 7 ] ||
  fail "expected 7 fp32 and 7 bf16 lines of gemm_floor.py, each with its row's --seq-len"
for f in "$tmp"/*.json; do
  name=$(basename "$f" .json)
  [ -f "$tmp/$name.out" ] || continue
  python3 - "$f" "$tmp/$name.out" "$src/tools/bench/gemm_floor.py" << 'PY' || fail "gemm_floor.py's FLOPs for $name"
import json, subprocess, sys
model = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
pplab = json.loads(text[text.index("{"):])["model_flops_per_step"]
attention = 6 * model["hidden_size"] * 8 * 9 * model["num_hidden_layers"]
out = subprocess.run([sys.executable, sys.argv[3], sys.argv[1], "--tokens", "8", "--microbatches", "1", "--dtype", "fp32",
                      "--count-only"], check=True, capture_output=True, text=True).stdout
got = json.loads(out)["tflop_per_step"] * 1e12
print("gemm_floor.py counts %.0f FLOPs, pplab %.0f of which attention %.0f" % (got, pplab, attention))
sys.exit(0 if abs(got - (pplab - attention)) <= 1e-9 * pplab else 1)
PY
done
echo "ok: $pplab_lines pplab and $anchor_lines reference commands use flags both accept"

# 3. The table from stand-ins: the reference takes 10 ms a step (GPipe fails);
# pplab 50 ms for each of the 3 warm-up steps, then 8 ms, 1e11 FLOPs a step,
# out of memory on the K=1 64x512 fp32 row.
cat > "$tmp/anchor.py" <<'PY'
import json, sys
PRESETS = {"small": dict(vocab=2048, hidden=128, inter=512, layers=8, heads=4, kv=2)}
args = sys.argv[1:]
if "gpipe" in args:
    print(json.dumps({"what": "torch-pipelining", "error": "TimeoutError()"}))
else:
    print(json.dumps({"what": "torch-eager", "step_ms": 10.0, "tok_s": 0}))
def eager_model(c, args, dev):  # the reference's line that the bench's copy fixes
    m = Stage(c, 0, c["layers"], True, True, args.seq).to(dev)
PY
cat > "$tmp/pplab" <<'SH'
#!/usr/bin/env bash
case " $* " in
  *" --help "*) echo "  --precision TEXT"; exit 0 ;;
esac
# stats of a trace: rank 0 computed 5.5 ms; on the K=2 rows (4 to 7) the
# shared GPU computed 7.25 ms, 1.5 ms of it for both ranks at once.
if [ "$1" = stats ]; then
  case "$3" in
    */row-[4-7]-*) echo '{"per_rank": [{"busy": 5.5}], "shared_devices": [{"busy": 7.25, "over_slots": 1.5}]}' ;;
    *) echo '{"per_rank": [{"busy": 5.5}]}' ;;
  esac
  exit 0
fi
if [[ " $* " == *" -k 1 -m 8 "* && " $* " != *" --precision "* ]]; then
  echo "pplab: error: CUDA out of memory" >&2
  exit 2
fi
if [[ " $* " == *" --precision bf16 "* ]]; then peak=989.5 source="H100 SXM bf16 tensor, dense, datasheet"
else peak=67 source="H100 SXM fp32 (non-tensor), dense, datasheet"; fi
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[i]}" = --trace ] && echo '{"traceEvents": []}' > "${args[i + 1]}"
done
printf '{"step_times_ms": [50, 50, 50, 8, 8, 8, 8], "model_flops_per_step": 1e11, '
printf '"step_clock_ms": [40, 40, 40, 6, 6, 6, 6], "host_issue_ms": [30, 30, 30, 2, 2, 2, 2], '
printf '"device_lag_ms": [0, 0, 0, 1.5, 0.5, 1, 2], "executor_overhead": [0.01, 0.02], '
printf '"bubbles": [0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25], '
printf '"peak_tflops": %s, "peak_source": "%s"}\n' "$peak" "$source"
SH
chmod +x "$tmp/pplab"
# The matrix products alone take 4 ms a step, attention 1 ms (gemm_floor.py's stand-in).
cat > "$tmp/gemm.py" <<'PY'
import json
print(json.dumps({"ms_per_step": 4.0, "tflop_per_step": 1e-1, "tflops": 25.0, "attention_ms_per_step": 1.0}))
PY
# (Twice, under ctest -j2, this run exited non-zero with nothing on stderr:
# gpu_session_test's session, running beside it, killed every process
# named like torch_anchor.py, the stand-in's patch step among them. The
# session now stops only its own tree's. On a failure this test shows the
# exit code, the end of stdout and the bench's trace.)
rc=0
PPLAB_BENCH_FAKE_GPU=1 PPLAB_ANCHOR="$tmp/anchor.py" PPLAB_GEMM_FLOOR="$tmp/gemm.py" bash -x "$bench" \
  --pplab "$tmp/pplab" --steps 4 --traces "$tmp/traces" > "$tmp/table.md" 2> "$tmp/table.trace" || rc=$?
if [ "$rc" != 0 ]; then
  tail -n 5 "$tmp/table.md"
  tail -n 40 "$tmp/table.trace"
  fail "the bench failed on stand-ins (exit $rc)"
fi
cat "$tmp/table.md"
expect() { grep -qxF -- "$1" "$tmp/table.md" || fail "no line: $1"; }
# 2048 tokens: 10 ms is 204 800 tok/s, 8 ms 256 000; MFU 1e11 / (0.010 x 67e12) and 1e11 / (0.008 x 67e12).
expect "| K=1, small, 16×128, M=1 | fp32 | eager | 204 800 | 256 000 | 1.25 | 14.9 % | 18.7 % |"
expect "| K=1, small, 16×128, M=1 | bf16 | eager | 204 800 | 256 000 | 1.25 | 1.0 % | 1.3 % |"
expect "| K=1, default, 64×512, M=8 | fp32 | eager | 3 276 800 | n/a (pplab: error: CUDA out of memory) | n/a | n/a |\
 n/a |"
expect "| K=2 GPipe, default, 16×128, M=8 | fp32 | pipelining | n/a (TimeoutError()) | 256 000 | n/a | n/a | 18.7 % |"
# Where pplab's step goes, from the steps after the 3 warm-up ones: the wall
# step 8 ms, the executor's 6 ms on the GPU, issued in 2 ms, the median lag of
# 1.5, 0.5, 1 and 2 ms, the worse rank's overhead, the mean bubble, and the
# matrix products' 4 ms alone, half the step, and the GPU's computing time
# from the trace (pplab stats; both ranks at once on K=2 rows). The OOM run
# has no such row.
expect "| K=1, small, 16×128, M=1 | fp32 | 8.00 | 6.00 | 2.00 | 1.250 | 2.00 % | 0.25 | 4.00 (50 %); 5.00 (62 %) | 5.50 |"
expect "| K=2 GPipe, default, 16×128, M=8 | bf16 | 8.00 | 6.00 | 2.00 | 1.250 | 2.00 % | 0.25 | 4.00 (50 %); 5.00 (62 %) | 7.25 (1.50) |"
[ "$(grep -c '^| K=' "$tmp/table.md")" -eq $((14 + 13)) ] || fail "expected 14 rows and 13 rows of where the step goes"
# --traces: one trace per pplab run that finished (the OOM run wrote none),
# named by row (1..7) and precision.
[ "$(find "$tmp/traces" -name 'row-*.json' | wc -l)" -eq 13 ] || fail "expected 13 traces in --traces"
[ ! -e "$tmp/traces/row-3-fp32.json" ] || fail "a trace of the run that failed"
[ -f "$tmp/traces/row-7-bf16.json" ] || fail "no trace of the last row's bf16 run"
grep -qF "H100 SXM bf16 tensor, dense, datasheet; H100 SXM fp32 (non-tensor), dense, datasheet" "$tmp/table.md" \
  || fail "the peaks are not named under the table"
grep -qF "this run's copy builds it with autocast in bf16" "$tmp/table.md" || fail "the reference's fix is not said"
echo "ok: the table from stand-ins"

# 4. A run past --run-timeout shows as such, and the bench goes on.
cat > "$tmp/slow-pplab" <<'SH'
#!/usr/bin/env bash
case " $* " in *" --help "*) echo "  --precision TEXT"; exit 0 ;; esac
exec sleep 60
SH
chmod +x "$tmp/slow-pplab"
PPLAB_BENCH_FAKE_GPU=1 PPLAB_ANCHOR="$tmp/anchor.py" bash "$bench" --pplab "$tmp/slow-pplab" --steps 4 \
  --rows 'K=1, small.*fp32' --run-timeout 1 > "$tmp/slow.md" || fail "the bench failed on a slow stand-in"
# (The reference's cell is not checked: its stand-in runs under the same 1 s
# bound, which a loaded machine's python3 start-up may pass.)
grep -qE "^\| K=1, small, 16×128, M=1 \| fp32 \| eager \| [^|]+ \| n/a \(still running after 1 s \(--run-timeout\)\) \|" \
  "$tmp/slow.md" || fail "the bounded run is not named: $(cat "$tmp/slow.md")"
echo "ok: a run past --run-timeout"

# 5. --deadline: the first row starts, and after its run of 1 s (the bound
# stops the slow stand-in) the next is past a deadline of 1 s: it is named
# under the table, not run.
PPLAB_BENCH_FAKE_GPU=1 PPLAB_ANCHOR="$tmp/anchor.py" bash "$bench" --pplab "$tmp/slow-pplab" --steps 4 \
  --rows 'K=1, small' --run-timeout 1 --deadline 1 > "$tmp/late.md" || fail "the bench failed with --deadline"
grep -qF "| K=1, small, 16×128, M=1 | fp32 | eager |" "$tmp/late.md" || fail "the first row did not run: $(cat "$tmp/late.md")"
grep -qF "| K=1, small, 16×128, M=1 | bf16 |" "$tmp/late.md" && fail "a row past --deadline ran: $(cat "$tmp/late.md")"
grep -qxF -- "- K=1, small, 16×128, M=1, bf16" "$tmp/late.md" || fail "the row past --deadline is not named: $(cat "$tmp/late.md")"
for bad in "--deadline soon" "--deadline -3"; do
  # shellcheck disable=SC2086
  if PPLAB_BENCH_FAKE_GPU=1 bash "$bench" $bad > "$tmp/bad.txt" 2>&1; then fail "accepted $bad"; fi
  grep -q -- "--deadline must be" "$tmp/bad.txt" || fail "no reason for $bad: $(cat "$tmp/bad.txt")"
done
echo "ok: --deadline"

# 6. A run whose step times are all 0 has no figure, and the rows after it
#    stay (a zero divided its row and ended the table); bad --rows and
#    --steps are refused before anything runs.
cat > "$tmp/zero-pplab" <<'SH'
#!/usr/bin/env bash
case " $* " in *" --help "*) echo "  --precision TEXT"; exit 0 ;; esac
echo '{"step_times_ms": [0, 0, 0, 0, 0, 0, 0], "model_flops_per_step": 1e11}'
SH
chmod +x "$tmp/zero-pplab"
PPLAB_BENCH_FAKE_GPU=1 PPLAB_ANCHOR="$tmp/anchor.py" PPLAB_GEMM_FLOOR="$tmp/gemm.py" bash "$bench" \
  --pplab "$tmp/zero-pplab" --steps 4 --rows 'K=1, small' > "$tmp/zero.md" || fail "the bench failed on zero times"
[ "$(grep -c '^| K=1, small, 16×128, M=1 | \(fp32\|bf16\) | eager | [^|]* | n/a' "$tmp/zero.md")" -eq 2 ] ||
  fail "both rows, with no pplab figure: $(cat "$tmp/zero.md")"
for bad in "--rows K=9" "--rows K=(1" "--steps abc" "--steps 0" "--steps"; do
  # shellcheck disable=SC2086
  if PPLAB_BENCH_FAKE_GPU=1 bash "$bench" $bad > "$tmp/bad.txt" 2>&1; then fail "accepted $bad"; fi
  [ "$(wc -l < "$tmp/bad.txt")" -ge 1 ] && grep -q "^gpu_bench: --\(rows\|steps\)" "$tmp/bad.txt" ||
    fail "no reason for $bad: $(cat "$tmp/bad.txt")"
done
echo "ok: zero step times, bad --rows and --steps"
