"""The table of tools/bench/plan_transfer.sh: measured step times against
plan's predictions from one profile and from several fitted together.

Usage: plan_transfer_table.py MEASURED.jsonl PLAN_ONE.json PLAN_SEVERAL.json SCHEDULE

MEASURED.jsonl holds one {"M": m, "step_ms": t} a line; the plans are
`pplab plan --json` outputs. A plan's prediction for M is its candidate of
SCHEDULE at M with v = 1, the uniform partition and no recomputation (what
`train` runs by default). Errors are (predicted - measured) / measured.
"""
import json
import sys


def predictions(path, schedule):
    plan = json.load(open(path))
    rows = {}
    for c in plan["candidates"]:
        if (c["schedule"] == schedule and c["virtual_stages"] == 1 and c["partition"] == "uniform"
                and c["recompute"] == "none"):
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
    worst_one = worst_two = 0.0
    for row in sorted(measured, key=lambda r: r["M"]):
        m, t = row["M"], row["step_ms"]
        p1, p2 = one.get(m), two.get(m)
        size = (p1 or p2 or (0, False, "?"))[2]
        c1, e1 = cell(p1, t)
        c2, e2 = cell(p2, t)
        if p1:
            worst_one = max(worst_one, abs(p1[0] - t) / t)
        if p2:
            worst_two = max(worst_two, abs(p2[0] - t) / t)
        print("| %d | %s | %.1f | %s | %s | %s | %s |" % (m, size, t, c1, e1, c2, e2))
    print()
    ranges = []
    for r in two_plan.get("size_ranges") or []:
        fixed = r["fixed_ms_per_layer"]
        ranges.append("%d-%d: F %.3f, B %.3f" % (r["microbatch_sizes"][0], r["microbatch_sizes"][1],
                                                 fixed["forward"], fixed["backward"]))
    print("One profile: %s. Several: %s; fixed ms a layer by microbatch sizes: %s." %
          (", ".join(one_plan["costs"]), ", ".join(two_plan["costs"]), "; ".join(ranges) or "none"))
    print("Largest error: %.1f %% from one profile, %.1f %% from %d; * a profile's own size (measured stages)." %
          (100 * worst_one, 100 * worst_two, len(two_plan["costs"])))


if __name__ == "__main__":
    main(sys.argv)
