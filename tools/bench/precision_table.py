#!/usr/bin/env python3
"""The table of tools/bench/precision_curve.sh: two `pplab train --json`
outputs, fp32 then bf16, compared step by step.

Usage: precision_table.py FP32_JSON BF16_JSON DEVICE STEPS

The relative difference of step i is |bf16[i] - fp32[i]| / fp32[i]. The
table gives its maximum, its mean, its maximum over the last tenth of the
steps, and its maximum between the two curves' 10-step trailing means.
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


def main(fp32_path, bf16_path, device, steps):
    a, b = load(fp32_path), load(bf16_path)
    fa, fb = a["losses"], b["losses"]
    if len(fa) != len(fb) or not fa:
        sys.exit("precision_table: the runs have %d and %d losses" % (len(fa), len(fb)))
    rel = relative(fa, fb)
    tail = rel[-max(1, len(rel) // 10):]
    smooth = max(relative(trailing_means(fa), trailing_means(fb)))
    print("| device | steps | fp32 loss first -> last | bf16 loss first -> last | max diff | mean diff "
          "| max diff, last tenth | max diff, 10-step means | fp32 tok/s | bf16 tok/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("| %s (%s) | %s | %.4f -> %.4f | %.4f -> %.4f | %.2f %% | %.2f %% | %.2f %% | %.2f %% | %.0f | %.0f |" % (
        device, a.get("device_name", "?"), steps, fa[0], fa[-1], fb[0], fb[-1], 100 * max(rel),
        100 * sum(rel) / len(rel), 100 * max(tail), 100 * smooth, a["tokens_per_s"], b["tokens_per_s"]))
    worst = max(range(len(rel)), key=lambda i: rel[i])
    print()
    print("Largest difference at step %d: fp32 %.4f, bf16 %.4f. Target: at most %g %% at every step: %s." % (
        worst, fa[worst], fb[worst], 100 * TARGET, "met" if max(rel) <= TARGET else "missed"))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__.strip())
    main(*sys.argv[1:])
