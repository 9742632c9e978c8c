"""The membership test's AUC interval and dataset p-value on simulated data.

Benchmark statistics ~ N(shift, 1), reference statistics ~ N(0, 1): the true AUC is
Phi(shift / sqrt(2)) (0.5 at shift 0, where the dataset H0 holds). For each benchmark size, the
script prints how often the plain and the expanded bootstrap percentile intervals (both from the
same resamples) cover the true AUC; at shift 0 also how often the one-sided Mann-Whitney p-value
is <= 0.05 (should be at most 5%) and how often the shipped interval lies above 0.5 while that
p-value is above 0.05 (an interval that contradicts the test).

    python benchmarks/membership_null.py              # 400 sets per row, 1,000 resamples
    python benchmarks/membership_null.py --sets 100   # quicker
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import stats as sps

from contamscope.detectors.membership import MIN_CI_ITEMS, bootstrap_aucs, mann_whitney
from contamscope.detectors.stats import expanded_tail

SIZES = (2, 3, 5, 8, 10, 20, 50)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", type=int, default=400, help="simulated data sets per row")
    ap.add_argument("--references", type=int, default=40)
    ap.add_argument("--boot", type=int, default=1000, help="bootstrap resamples")
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    m = args.references
    print(f"{args.sets} sets per row, {m} references, {args.boot} resamples; the interval is "
          f"shipped from {MIN_CI_ITEMS} items")  # fmt: skip
    print(f"{'shift':>5} {'AUC':>5} {'items':>5} {'plain covers':>12} {'expanded covers':>15} "
          f"{'p <= 0.05':>9} {'CI above 0.5, p > 0.05':>22}")  # fmt: skip
    for shift in (0.0, 1.0):
        true = float(sps.norm.cdf(shift / math.sqrt(2)))
        for n in SIZES:
            plain = expanded = rejected = contradicts = 0
            tail = expanded_tail(min(n, m))
            for _ in range(args.sets):
                x, y = rng.normal(shift, 1, n), rng.normal(0, 1, m)
                boots = bootstrap_aucs(x, y, args.boot, int(rng.integers(2**31)))
                lo, hi = np.quantile(boots, [0.025, 0.975])
                plain += lo <= true <= hi
                lo, hi = np.quantile(boots, [tail, 1 - tail])
                expanded += lo <= true <= hi
                if shift == 0.0:
                    p = mann_whitney(x, y, n_boot=1).p_value  # the p-value needs no resamples
                    rejected += p <= 0.05
                    contradicts += n >= MIN_CI_ITEMS and p > 0.05 and lo > 0.5
            s = args.sets
            null = f"{rejected / s:9.3f} {contradicts / s:22.3f}" if shift == 0.0 else ""
            print(f"{shift:5.1f} {true:5.3f} {n:5d} {plain / s:12.3f} {expanded / s:15.3f} {null}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
