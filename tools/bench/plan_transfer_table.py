"""The table of tools/bench/plan_transfer.sh: measured step times against
plan's predictions from one profile and from several fitted together.

Usage: plan_transfer_table.py MEASURED.jsonl PLAN_ONE.json PLAN_SEVERAL.json SCHEDULE

MEASURED.jsonl holds one {"M": m, "step_ms": t} a line; the plans are
`pplab plan --json` outputs. A plan's prediction for M is its candidate of
SCHEDULE at M with the fewest stages a rank it has (v = 1, or 2 for
interleaved-1f1b, whose candidates start at 2: what `train` runs by
default), the uniform partition and no recomputation. Errors are
(predicted - measured) / measured. A measured time that is not a positive
number is shown and compared with nothing.
"""
import json
import math
import sys


def predictions(path, schedule):
    plan = json.load(open(path))
    rows = {}
    kept = [c for c in plan["candidates"]
            if c["schedule"] == schedule and c["partition"] == "uniform" and c["recompute"] == "none"]
    if kept:
        v = min(c["virtual_stages"] for c in kept)
        for c in kept:
            if c["virtual_stages"] == v:
                rows[c["microbatches"]] = (c["step_time"], c["measured_costs"], c["microbatch_size"])
    return plan, rows


def cell(prediction, measured):
    if prediction is None:
        return "-", "-"
    ms, verbatim, _ = prediction
    return "%.1f%s" % (ms, "*" if verbatim else ""), "%+.1f %%" % (100.0 * (ms - measured) / measured)


def main(argv):
    if len(argv) != 5:
        sys.exit(__doc__)
    measured = [json.loads(line) for line in open(argv[1]) if line.strip()]
    one_plan, one = predictions(argv[2], argv[4])
    two_plan, two = predictions(argv[3], argv[4])
    print("| M | microbatch | measured ms | one profile ms | error | %d profiles ms | error |" %
          len(two_plan["costs"]))
    print("|---|---|---|---|---|---|---|")
    worst_one = worst_two = None  # None: nothing compared
    for row in sorted(measured, key=lambda r: r["M"]):
        m, t = row["M"], row["step_ms"]
        if not (isinstance(t, (int, float)) and math.isfinite(t) and t > 0):
            print("| %d | ? | %s | - | - | - | - |" % (m, t))
            continue
        p1, p2 = one.get(m), two.get(m)
        size = (p1 or p2 or (0, False, "?"))[2]
        c1, e1 = cell(p1, t)
        c2, e2 = cell(p2, t)
        if p1:
            worst_one = max(worst_one or 0.0, abs(p1[0] - t) / t)
        if p2:
            worst_two = max(worst_two or 0.0, abs(p2[0] - t) / t)
        print("| %d | %s | %.1f | %s | %s | %s | %s |" % (m, size, t, c1, e1, c2, e2))
    print()
    ranges = []
    for r in two_plan.get("size_ranges") or []:
        fixed = r["fixed_ms_per_layer"]
        ranges.append("%d-%d: F %.3f, B %.3f" % (r["microbatch_sizes"][0], r["microbatch_sizes"][1],
                                                 fixed["forward"], fixed["backward"]))
    print("One profile: %s. Several: %s; fixed ms a layer by microbatch sizes: %s." %
          (", ".join(one_plan["costs"]), ", ".join(two_plan["costs"]), "; ".join(ranges) or "none"))
    def worst(w):
        return "none compared" if w is None else "%.1f %%" % (100 * w)
    print("Largest error: %s from one profile, %s from %d; * a profile's own size (measured stages)." %
          (worst(worst_one), worst(worst_two), len(two_plan["costs"])))
    if worst_one is None and worst_two is None:
        sys.exit("plan_transfer_table: no measured M has a prediction of %s to compare with" % argv[4])


if __name__ == "__main__":
    main(sys.argv)
