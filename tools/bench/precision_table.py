#!/usr/bin/env python3
"""The table of tools/bench/precision_curve.sh: `pplab train --json` outputs
compared step by step with an fp32 run's.

Usage: precision_table.py FP32_JSON BF16_JSON DEVICE STEPS [FLOOR_JSON]

The relative difference of step i is |run[i] - fp32[i]| / fp32[i]. A row
gives its maximum, its mean, its maximum over the last tenth of the steps,
and its maximum between the two curves' 10-step trailing means. The first
row is bf16's. FLOOR_JSON, when given, is fp32 again with the batch split
into more microbatches: the same sums in another order, so its row is how
far rounding alone moves the curve, the floor under any precision's row.
"""
import json
import sys

TARGET = 0.02  # issue 10: within 2 % at every step


def load(path):
    text = open(path).read()
    return json.loads(text[text.index("{"):])


def trailing_means(values, n=10):
    out = []
    for i in range(len(values)):
        window = values[max(0, i - n + 1):i + 1]
        out.append(sum(window) / len(window))
    return out


def relative(reference, other):
    return [abs(y - x) / x for x, y in zip(reference, other)]


class Comparison:
    def __init__(self, reference, other):
        self.rel = relative(reference, other)
        self.tail = self.rel[-max(1, len(self.rel) // 10):]
        self.smooth = max(relative(trailing_means(reference), trailing_means(other)))
        self.worst = max(range(len(self.rel)), key=lambda i: self.rel[i])


def main(fp32_path, bf16_path, device, steps, floor_path=None):
    runs = [("bf16", load(bf16_path))]
    if floor_path:
        runs.append(("fp32, 2 microbatches", load(floor_path)))
    a = load(fp32_path)
    fa = a["losses"]
    for name, r in runs:
        if len(r["losses"]) != len(fa) or not fa:
            sys.exit("precision_table: the fp32 and %s runs have %d and %d losses" % (name, len(fa), len(r["losses"])))
    print("| device | against fp32 | steps | fp32 loss first -> last | its loss first -> last | max diff | mean diff "
          "| max diff, last tenth | max diff, 10-step means | fp32 tok/s | its tok/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    found = []
    for name, r in runs:
        fb = r["losses"]
        c = Comparison(fa, fb)
        found.append((name, c))
        print("| %s (%s) | %s | %s | %.4f -> %.4f | %.4f -> %.4f | %.2f %% | %.2f %% | %.2f %% | %.2f %% | %.0f | %.0f |" % (
            device, a.get("device_name", "?"), name, steps, fa[0], fa[-1], fb[0], fb[-1], 100 * max(c.rel),
            100 * sum(c.rel) / len(c.rel), 100 * max(c.tail), 100 * c.smooth, a["tokens_per_s"], r["tokens_per_s"]))
    name, c = found[0]
    bf16 = runs[0][1]["losses"]
    print()
    print("Largest difference at step %d: fp32 %.4f, bf16 %.4f. Target: at most %g %% at every step: %s; "
          "on 10-step means: %s." % (c.worst + 1, fa[c.worst], bf16[c.worst], 100 * TARGET,
                                     "met" if max(c.rel) <= TARGET else "missed",
                                     "met" if c.smooth <= TARGET else "missed"))
    if len(found) > 1:
        f = found[1][1]
        print("Rounding alone (fp32 with the batch in 2 microbatches) moves a step's loss by up to %.2f %%, "
              "its 10-step means by up to %.2f %%." % (100 * max(f.rel), 100 * f.smooth))


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__.strip())
    main(*sys.argv[1:])
