#!/usr/bin/env bash
# Close the loop, plan by plan: pplab profile -> simulate (the prediction) ->
# train (the measurement) -> diff, and the predicted step time and peak
# activation memory against the measured ones; then the run's own costs
# (stats --cost-out of its trace) simulated against the trace's makespan,
# the simulator's error without the profile's. Prints a Markdown report;
# docs/fidelity.md holds the CPU one, and the GPU one once it has run.
#
# Usage, from the project's root (after building):
#   bash tools/bench/fidelity.sh [options] [PPLAB [RUNS]]
#   --pplab P      the binary (default build/pplab; build-cuda/pplab with --device cuda)
#   --runs N       repeat the whole loop N times (default 3 on the CPU, 1 on a GPU)
#   --device D     cpu (default) or cuda
#   --model M      preset or config (default: small on the CPU, default on a GPU)
#   --shapes LIST  batch x sequence, comma-separated (default 16x128 on the CPU;
#                  16x128,64x512 on a GPU)
#   --configs LIST pipeline ranks : microbatches, comma-separated (default 2:8 on
#                  the CPU; 1:1,1:4,1:8,2:8 on a GPU, where the 2 ranks share it)
#   --plans LIST   schedules, comma-separated; "interleaved-1f1b" and "zb-v"
#                  run 2 stages per rank (default gpipe,1f1b,interleaved-1f1b,zb-h1;
#                  zb-v added on a GPU)
#   --tp T         T tensor-parallel ranks per pipeline rank (default 1), in the
#                  profile and in training alike: K x T processes
#   --sequence-parallel  with --tp 2 or more, split the positions over them too
#   --steps N      training steps per plan; the measured step time is the median
#                  after the first 2 (default 12: 10 measured)
#   --out DIR      keep the cost files, traces and rows.jsonl there
#   --run-timeout S  bound each command (default 300 s); a profile, train or diff
#                  that fails or passes it loses its row (or its configuration's
#                  rows, for a profile), named under the table, and the loop goes
#                  on; a failed own-costs stats or simulate leaves its row, n/a
#                  in the last column
#   --deadline S   start no configuration and no plan after S seconds from the
#                  start (default 0: none), so that a bounded command still prints
#                  the table of what finished; the skipped ones are named under it
#   --dry-run      print the commands of one run, run nothing
#
# Each (shape, ranks, microbatches) is profiled once per stage count
# (microbatch = batch / M sequences; `-v 2` for the 2-stage-per-rank plans).
# Ranks that share a device past its slots are profiled in turns and
# simulated queueing for it on the CPU; on a GPU (2 ranks over NCCL) they are
# profiled together, each time holding the other's time slices, and simulated
# side by side (profile --shared-device, docs/profile.md). The memory columns
# need --measure-memory, which the GPU runs pass (the CUDA caching allocator's
# statistics cost nothing); the CPU runs do not (its counting allocator is in
# the hot path), so their memory is tools/bench/profile_bench.sh's table.
set -euo pipefail
cd "$(dirname "$0")/../.."
pplab="" runs="" device=cpu model="" shapes="" configs="" plans="" steps=12 out="" dry_run=0
run_timeout=300 deadline=0 tp=1 sequence_parallel=0
positional=()
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || case $1 in --pplab|--runs|--device|--model|--shapes|--configs|--plans|--steps|--tp|--out|--run-timeout|--deadline) echo "fidelity: $1 needs a value" >&2; exit 2 ;; esac
  case $1 in
    --pplab) pplab=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --plans) plans=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --tp) tp=$2; shift 2 ;;
    --sequence-parallel) sequence_parallel=1; shift ;;
    --out) out=$2; shift 2 ;;
    --run-timeout) run_timeout=$2; shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fidelity: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) positional+=("$1"); shift ;;
  esac
done
[ ${#positional[@]} -ge 1 ] && pplab=${positional[0]}
[ ${#positional[@]} -ge 2 ] && runs=${positional[1]}
[ ${#positional[@]} -ge 3 ] && { echo "fidelity: at most 2 positional arguments, PPLAB and RUNS" >&2; exit 2; }
case $device in
  cpu)
    : "${pplab:=build/pplab}" "${runs:=3}" "${model:=small}" "${shapes:=16x128}" "${configs:=2:8}"
    : "${plans:=gpipe,1f1b,interleaved-1f1b,zb-h1}"
    memory=() shared=() ;;
  cuda)
    : "${pplab:=build-cuda/pplab}" "${runs:=1}" "${model:=default}" "${shapes:=16x128,64x512}"
    : "${configs:=1:1,1:4,1:8,2:8}" "${plans:=gpipe,1f1b,interleaved-1f1b,zb-h1,zb-v}"
    memory=(--measure-memory --comm-timeout 30) shared=(--shared-device together) ;;
  *) echo "fidelity: --device must be cpu or cuda, got '$device'" >&2; exit 2 ;;
esac
for n in "$runs" "$steps" "$run_timeout" "$tp"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] ||
    { echo "fidelity: --runs, --steps, --run-timeout and --tp must be positive integers, got '$n'" >&2; exit 2; }
done
tp_flags=()
[ "$tp" -gt 1 ] && tp_flags=(--tp "$tp")
if [ "$sequence_parallel" = 1 ]; then
  [ "$tp" -gt 1 ] || { echo "fidelity: --sequence-parallel needs --tp 2 or more" >&2; exit 2; }
  tp_flags+=(--sequence-parallel)
fi
[[ $deadline =~ ^[0-9]+$ ]] || { echo "fidelity: --deadline must be a whole number of seconds, got '$deadline'" >&2; exit 2; }
[ "$steps" -ge 3 ] || { echo "fidelity: --steps must be at least 3 (2 warm-up steps, then the measured ones)" >&2; exit 2; }
IFS=, read -r -a shape_list <<< "$shapes"
IFS=, read -r -a config_list <<< "$configs"
IFS=, read -r -a plan_list <<< "$plans"
for shape in "${shape_list[@]}"; do
  [[ $shape =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || { echo "fidelity: --shapes: '$shape' is not BATCHxSEQ" >&2; exit 2; }
done
for config in "${config_list[@]}"; do
  [[ $config =~ ^[1-9][0-9]*:[1-9][0-9]*$ ]] || { echo "fidelity: --configs: '$config' is not K:M" >&2; exit 2; }
  for shape in "${shape_list[@]}"; do
    if [ $((${shape%x*} % ${config#*:})) != 0 ]; then
      echo "fidelity: batch ${shape%x*} of shape $shape does not split into ${config#*:} microbatches" >&2
      exit 2
    fi
  done
done
# Plans that place 2 stages on each rank need a profile of 2K stages.
two_stage() { [ "$1" = interleaved-1f1b ] || [ "$1" = zb-v ]; }
plan_flags() { if [ "$1" = interleaved-1f1b ]; then echo "-s $1 -v 2"; else echo "-s $1"; fi; }

show() { printf '%q ' "$@" | sed 's/ $//'; echo; }
if [ "$dry_run" = 1 ]; then
  runs=1
  work=${out:-/tmp/fidelity}
else
  [ -x "$pplab" ] || { echo "fidelity: no pplab at $pplab (build it, or pass --pplab)" >&2; exit 2; }
  # One bounded run, its stdout to $1; on failure, a line naming it (and the
  # end of its stderr) goes to the notes under the table, and it returns 1.
  # In the background, waited for: a TERM to this script (gpu_session.sh's
  # bound) then runs its trap at once, which stops the run and still prints
  # the table of the rows that finished (it waited for the run before, and
  # was killed with the table unprinted).
  child=""
  bounded() {
    local to=$1 what=$2 rc=0
    shift 2
    timeout -k 5 "$run_timeout" "$@" > "$to" 2> "$to.err" &
    child=$!
    wait "$child" || rc=$?
    child=""
    [ "$rc" = 0 ] && return 0
    local why
    why=$(grep -v '^[[:space:]]*$' "$to.err" | tail -n 1 | cut -c1-160 || true)
    [ "$rc" = 124 ] && why="still running after $run_timeout s (--run-timeout)"
    echo "- $what: exit $rc: ${why:-no message}" >> "$work/notes.md"
    return 1
  }
  if [ -n "$out" ]; then
    mkdir -p "$out"
    work=$out
  else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
  fi
  : > "$work/rows.jsonl"
  : > "$work/notes.md"
fi
started=$SECONDS

# The table of the rows that finished, and what was left out.
report() {
  local where=$device
  [ "$device" = cuda ] && where=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -n 1 || echo cuda)
  echo "## $(date -u +%F), $where, $(nproc) cores, model $model, $runs run(s), pplab $(git rev-parse --short HEAD 2> /dev/null || echo '?')"
  echo
  if [ -n "$others_at_start" ]; then
    echo "$others_at_start"
    echo
  fi
  echo "Reproduce: \`bash tools/bench/fidelity.sh --device $device --model $model --shapes $shapes --configs $configs" \
    "--plans $plans --steps $steps --runs $runs${tp_flags[*]:+ ${tp_flags[*]}}\`"
  echo
  if [ -s "$work/rows.jsonl" ]; then
    python3 tools/bench/fidelity_table.py table "$work/rows.jsonl"
  else
    echo "No row finished."
  fi
  if [ -s "$work/notes.md" ]; then
    echo
    echo "Left out:"
    echo
    cat "$work/notes.md"
  fi
}
# Stopped from outside (a bound, ^C): the run going on is stopped, and the
# table holds what finished.
stopped() {
  trap - TERM INT
  if [ -n "${child:-}" ]; then kill -TERM "$child" 2> /dev/null || true; wait "$child" 2> /dev/null || true; fi
  echo "- stopped by a signal after $((SECONDS - started)) s: only the rows that had finished are in the table" >> "$work/notes.md"
  report
  exit 143
}
[ "$dry_run" = 1 ] || trap stopped TERM INT

# Whether the GPU was shared when the loop started (printed with the table).
others_at_start=""
if [ "$device" = cuda ] && [ "$dry_run" = 0 ]; then
  source tools/bench/gpu_others.sh
  others_at_start=$(gpu_others_line)
fi
for run in $(seq 1 "$runs"); do
  for shape in "${shape_list[@]}"; do
    batch=${shape%x*} seq=${shape#*x}
    for config in "${config_list[@]}"; do
      K=${config%:*} M=${config#*:}
      mb=$((batch / M))
      tag="r$run-$shape-k$K-m$M"
      prof=(profile --model "$model" -k "$K" --device "$device" --microbatch-size "$mb" --seq-len "$seq"
            --warmup 3 --repeats 15 "${tp_flags[@]}" "${shared[@]}")
      [ "$device" = cuda ] && prof+=(--comm-timeout 30)
      if [ "$dry_run" = 1 ]; then
        echo "# run $run, $shape, K=$K, M=$M"
      elif [ "$deadline" -gt 0 ] && [ $((SECONDS - started)) -ge "$deadline" ]; then
        echo "- run $run, $shape, K=$K, M=$M: not started, past --deadline $deadline s" >> "$work/notes.md"
        continue
      fi
      needs_v1=0 needs_v2=0 have_v1=1 have_v2=1
      for plan in "${plan_list[@]}"; do if two_stage "$plan"; then needs_v2=1; else needs_v1=1; fi; done
      if [ "$dry_run" = 1 ]; then
        [ "$needs_v1" = 1 ] && show "$pplab" "${prof[@]}" -o "$work/cost-$tag.json"
        [ "$needs_v2" = 1 ] && show "$pplab" "${prof[@]}" --virtual 2 -o "$work/cost-$tag-v2.json"
      else
        if [ "$needs_v1" = 1 ]; then
          bounded "$work/profile-$tag.out" "profile, run $run, $shape, K=$K, M=$M" \
            "$pplab" "${prof[@]}" -o "$work/cost-$tag.json" || have_v1=0
        fi
        if [ "$needs_v2" = 1 ]; then
          bounded "$work/profile-$tag-v2.out" "profile --virtual 2, run $run, $shape, K=$K, M=$M" \
            "$pplab" "${prof[@]}" --virtual 2 -o "$work/cost-$tag-v2.json" || have_v2=0
        fi
      fi
      for plan in "${plan_list[@]}"; do
        if [ "$dry_run" = 0 ] && [ "$deadline" -gt 0 ] && [ $((SECONDS - started)) -ge "$deadline" ]; then
          echo "- run $run, $shape, K=$K, M=$M, $plan: not started, past --deadline $deadline s" >> "$work/notes.md"
          continue
        fi
        cost=$work/cost-$tag.json
        two_stage "$plan" && cost=$work/cost-$tag-v2.json
        if two_stage "$plan"; then [ "$have_v2" = 1 ] || continue; else [ "$have_v1" = 1 ] || continue; fi
        # shellcheck disable=SC2046
        flags=($(plan_flags "$plan"))
        sim=("$pplab" simulate "${flags[@]}" -k "$K" -m "$M" --cost "$cost" --samples 100 --json
             --trace "$work/sim-$tag-$plan.json")
        train=("$pplab" train "${flags[@]}" -k "$K" -m "$M" --model "$model" --device "$device"
               --batch-size "$batch" --seq-len "$seq" --steps "$steps" --seed 1 --json --synthetic --out '' -q
               --eval-every 0 --warmup-steps 0 "${tp_flags[@]}" "${memory[@]}" --trace "$work/real-$tag-$plan.json")
        diff=("$pplab" diff "$work/sim-$tag-$plan.json" "$work/real-$tag-$plan.json" --json)
        # The run's own costs (each stage's mean times in its trace, the
        # messages' latency as its receivers saw it), simulated: against the
        # trace's makespan, the simulator's error alone, without the profile's.
        own=("$pplab" stats "$work/real-$tag-$plan.json" --cost-out "$work/own-$tag-$plan.json" --json)
        own_sim=("$pplab" simulate "${flags[@]}" -k "$K" -m "$M" --cost "$work/own-$tag-$plan.json" --json)
        # With more than one rank: the profile's stage times with the run's
        # own message times, to tell the link's error from the stages'.
        mixed_sim=("$pplab" simulate "${flags[@]}" -k "$K" -m "$M" --cost "$work/mixed-$tag-$plan.json" --json)
        if [ "$dry_run" = 1 ]; then
          show "${sim[@]}"
          show "${train[@]}"
          show "${diff[@]}"
          show "${own[@]}"
          show "${own_sim[@]}"
          [ "$K" -gt 1 ] && show "${mixed_sim[@]}"
          continue
        fi
        what="run $run, $shape, K=$K, M=$M, $plan"
        bounded "$work/sim-$tag-$plan.out" "simulate, $what" "${sim[@]}" || continue
        bounded "$work/train-$tag-$plan.out" "train, $what" "${train[@]}" || continue
        bounded "$work/diff-$tag-$plan.out" "diff, $what" "${diff[@]}" || continue
        # Without them the row stands, its own-costs column n/a.
        rm -f "$work/own-$tag-$plan.out" "$work/own-sim-$tag-$plan.out" "$work/mixed-sim-$tag-$plan.out"
        bounded "$work/own-$tag-$plan.out" "stats --cost-out, $what" "${own[@]}" &&
          bounded "$work/own-sim-$tag-$plan.out" "simulate of the run's own costs, $what" "${own_sim[@]}" || true
        mixed=()
        if [ "$K" -gt 1 ] && [ -s "$work/own-$tag-$plan.json" ] &&
          python3 tools/bench/fidelity_table.py mix "$cost" "$work/own-$tag-$plan.json" \
            > "$work/mixed-$tag-$plan.json" &&
          bounded "$work/mixed-sim-$tag-$plan.out" "simulate of the profile with the run's links, $what" \
            "${mixed_sim[@]}"; then
          mixed=("$work/mixed-sim-$tag-$plan.out")
        fi
        python3 tools/bench/fidelity_table.py row "$run" "$shape" "$K" "$M" "$plan" "$work/sim-$tag-$plan.out" \
          "$work/train-$tag-$plan.out" "$work/diff-$tag-$plan.out" "$work/own-$tag-$plan.out" \
          "$work/own-sim-$tag-$plan.out" "${mixed[@]}" >> "$work/rows.jsonl"
      done
    done
  done
done
[ "$dry_run" = 1 ] && exit 0
report

