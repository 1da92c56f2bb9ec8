#!/usr/bin/env python3
"""The rows and the table of tools/bench/fidelity.sh.

  fidelity_table.py row RUN SHAPE K M PLAN SIM.json TRAIN.json DIFF.json [STATS.json OWN.json [MIXED.json]]
      one JSON line: the prediction (simulate --json), the measurement
      (train --json: the median step after the first 2), the first drift,
      and with the next two the measured trace's makespan (stats --json)
      and the simulated one from the run's own costs (simulate --json of
      stats --cost-out; either file missing or empty: n/a); MIXED.json is
      simulate --json of the profile with the run's own message times
      (below)
  fidelity_table.py mix PROFILE.json OWN.json
      prints the profile's cost model with its link and links replaced by
      those the run's own costs give (stats --cost-out): the profile's
      stage times with the messages' times as the run saw them, so that a
      step error that this removes is the link's
  fidelity_table.py table ROWS.jsonl
      the Markdown table, the plan order of each group, and the counts
      against issue 12's targets (step time within 5 %, memory within 10 %,
      the same order wherever measured plans differ by more than 5 %)
"""
import json
import statistics
import sys

WARMUP_STEPS = 2
STEP_TOLERANCE = 0.05
MEMORY_TOLERANCE = 0.10


def makespan_of(path):
    """The makespan a stats or simulate --json file gives, or None."""
    try:
        return json.load(open(path))["makespan"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def mix(profile_path, own_path):
    profile, own = json.load(open(profile_path)), json.load(open(own_path))
    profile.pop("links", None)
    profile["link"] = own.get("link", {"latency_ms": 0.0})
    if "links" in own:
        profile["links"] = own["links"]
    return profile


def row(run, shape, K, M, plan, sim_path, train_path, diff_path, stats_path=None, own_path=None, mixed_path=None):
    sim, train, diff = (json.load(open(p)) for p in (sim_path, train_path, diff_path))
    times = train["step_times_ms"]
    step = statistics.median(times[WARMUP_STEPS:] if len(times) > WARMUP_STEPS else times)
    drift = diff.get("first_drift")
    samples = sim.get("samples", {})
    return {
        "run": int(run), "shape": shape, "K": int(K), "M": int(M), "plan": plan,
        "predicted": sim["makespan"], "p10": samples.get("p10"), "p90": samples.get("p90"),
        "step": step, "steps": len(times) - WARMUP_STEPS,
        "predicted_peak": [r["peak_activation_bytes"] for r in sim["per_rank"]],
        "measured_peak": train.get("measured_peak_activation_bytes"),
        "drift": "%s on rank %d" % (drift["action"], drift["rank"]) if drift else "none",
        "trace_makespan": makespan_of(stats_path) if stats_path else None,
        "own_predicted": makespan_of(own_path) if own_path else None,
        "links_predicted": makespan_of(mixed_path) if mixed_path else None,
    }


def error(predicted, measured):
    return (predicted - measured) / measured


def memory_error(r):
    """The worst rank's relative error of the predicted peak, or None."""
    if not r["measured_peak"]:
        return None
    errors = [error(p, m) for p, m in zip(r["predicted_peak"], r["measured_peak"]) if m > 0]
    return max(errors, key=abs) if errors else None


def own_error(r):
    """The simulated makespan from the run's own costs against its trace's, or None."""
    if r.get("own_predicted") is None or not r.get("trace_makespan"):
        return None
    return error(r["own_predicted"], r["trace_makespan"])


def mb(values):
    return "/".join("%.1f" % (v / 1e6) for v in values) if values else "n/a"


def table(rows_path):
    rows = [json.loads(line) for line in open(rows_path) if line.strip()]
    print("| run | shape | K | M | plan | predicted step ms | sampled p10..p90 | measured median step ms | error"
          " | predicted peak MB by rank | measured peak MB | memory error | first drift > 5 %"
          " | own costs: simulated / trace makespan ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        spread = "%.1f..%.1f" % (r["p10"], r["p90"]) if r["p10"] is not None else "n/a"
        mem = memory_error(r)
        own = own_error(r)
        print("| %d | %s | %d | %d | %s | %.2f | %s | %.2f | %+.1f %% | %s | %s | %s | %s | %s |" % (
            r["run"], r["shape"], r["K"], r["M"], r["plan"], r["predicted"], spread, r["step"],
            100 * error(r["predicted"], r["step"]), mb(r["predicted_peak"]), mb(r["measured_peak"]),
            "%+.1f %%" % (100 * mem) if mem is not None else "n/a", r["drift"],
            "%.2f / %.2f (%+.1f %%)" % (r["own_predicted"], r["trace_makespan"], 100 * own) if own is not None
            else "n/a"))
    print()
    within = sum(abs(error(r["predicted"], r["step"])) <= STEP_TOLERANCE for r in rows)
    print("- Step time within 5 %%: %d of %d rows." % (within, len(rows)))
    owns = [e for e in (own_error(r) for r in rows) if e is not None]
    if owns:
        # The simulator's own error: the run's costs read off its trace, so
        # what is left is the model (queues, messages, order), not the profile.
        print("- From the run's own costs (pplab stats --cost-out of its trace), the simulated makespan is within"
              " 5 %% of the trace's in %d of %d rows (errors %+.1f %% to %+.1f %%)." % (
                  sum(abs(e) <= STEP_TOLERANCE for e in owns), len(owns), 100 * min(owns), 100 * max(owns)))
    mixed = [(r, error(r["links_predicted"], r["step"])) for r in rows if r.get("links_predicted")]
    if mixed:
        # The profile's stage times with the run's message times: what the
        # link alone costs the prediction.
        errors = [e for _, e in mixed]
        print("- With the profile's stage times and the run's own message times (its links in place of the"
              " profile's), the step is within 5 %% in %d of %d rows (errors %+.1f %% to %+.1f %%; %s)." % (
                  sum(abs(e) <= STEP_TOLERANCE for e in errors), len(errors), 100 * min(errors), 100 * max(errors),
                  ", ".join("%s K=%d %s %+.1f %%" % (r["shape"], r["K"], r["plan"], 100 * e) for r, e in mixed)))
    mems = [m for m in (memory_error(r) for r in rows) if m is not None]
    if mems:
        print("- Peak activation memory within 10 %% (worst rank): %d of %d rows." % (
            sum(abs(m) <= MEMORY_TOLERANCE for m in mems), len(mems)))
    # Order: every pair of plans of one group whose measured steps differ by
    # more than 5 % must be predicted in the same order.
    pairs = right = 0
    print("- Order by predicted and by measured step time, per group:")
    groups = {}
    for r in rows:
        groups.setdefault((r["run"], r["shape"], r["K"], r["M"]), []).append(r)
    for (run, shape, K, M), mine in groups.items():
        wrong = []
        for i, a in enumerate(mine):
            for b in mine[i + 1:]:
                if abs(a["step"] - b["step"]) <= STEP_TOLERANCE * min(a["step"], b["step"]):
                    continue
                pairs += 1
                # A predicted tie does not order them.
                if a["predicted"] != b["predicted"] and (a["predicted"] < b["predicted"]) == (a["step"] < b["step"]):
                    right += 1
                else:
                    wrong.append("%s/%s" % (a["plan"], b["plan"]))
        predicted = " < ".join(r["plan"] for r in sorted(mine, key=lambda r: r["predicted"]))
        measured = " < ".join(r["plan"] for r in sorted(mine, key=lambda r: r["step"]))
        print("  - run %d, %s, K=%d, M=%d: predicted %s; measured %s%s" % (
            run, shape, K, M, predicted, measured, "; wrong pairs apart by > 5 %: " + ", ".join(wrong) if wrong else ""))
    print("- Pairs of plans measured more than 5 %% apart: %d, predicted in the measured order: %d." % (pairs, right))


def main(argv):
    if len(argv) in (10, 12, 13) and argv[1] == "row":
        print(json.dumps(row(*argv[2:])))
    elif len(argv) == 4 and argv[1] == "mix":
        print(json.dumps(mix(argv[2], argv[3])))
    elif len(argv) == 3 and argv[1] == "table":
        table(argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
