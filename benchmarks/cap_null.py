"""CAP's statistics on simulated splits, by split size: coverage of the 95% CI of PCR_ref -
PCR_other, the permutation test's rejections, and the verdict's rate.

Per-item performance M and consistency C are Bernoulli draws (0/1 per item, as for
multiple-choice answers), tanh scale, alpha 0.01:

- ``clean``: both splits M ~ Bernoulli(0.6), C ~ Bernoulli(0.5): H0 (equal exposure) holds and
  the true difference is 0. Every rate but the coverage should be at most 5%.
- ``trained``: the reference split M ~ Bernoulli(0.9), C ~ Bernoulli(0.5), the other as in
  ``clean`` (true difference +0.113): coverage away from H0, and power.
- ``saturated``: the reference split M ~ Bernoulli(0.9), C ~ Bernoulli(0.1), the other M ~
  Bernoulli(0.3), C ~ Bernoulli(0.15): both PCRs near tanh's ceiling (1.000 and 0.959), while
  M - C differs by 0.65 (a memorised split: right answers that do not survive the edit).

Columns, all from the same resamples per run:
- ``plain`` / ``expanded``: how often the plain percentile interval and the expanded percentile
  interval the verdict uses (Hesterberg 2015, at the smaller split's size) cover the truth;
- ``|d| test`` / ``equal-tailed``: how often the split-label permutation p-value is <= 0.05,
  counting relabellings with |difference| >= |observed| (contamscope's earlier test), and the
  equal-tailed p-value the verdict uses;
- ``verdict``: any split named (clean), or "fine-tuned on" the reference (trained, saturated);
- ``M-C p`` / ``M-C verdict``: the same for the excess comparison, (M - C)_ref - (M - C)_other
  (beyond the paper; same relabellings and resamples).

    python benchmarks/cap_null.py              # 1,000 runs per size
    python benchmarks/cap_null.py --runs 300   # quicker
"""

from __future__ import annotations

import argparse

import numpy as np

from contamscope.detectors.cap import _boot_pcr, _relabel, compare_splits, pcr, split_score
from contamscope.detectors.stats import expanded_tail

SIZES = ((3, 3), (5, 5), (12, 12), (30, 30), (100, 100), (5, 50), (12, 100), (30, 300), (50, 5))
SHAPES = {
    "clean": ((0.6, 0.5), (0.6, 0.5)),
    "trained": ((0.9, 0.5), (0.6, 0.5)),
    "saturated": ((0.9, 0.1), (0.3, 0.15)),  # both PCRs near tanh's ceiling
}


def abs_p(
    ref: tuple[np.ndarray, np.ndarray],
    other: tuple[np.ndarray, np.ndarray],
    seed: int,
    n_perm: int,
    observed: float,
) -> float:
    """The |difference| permutation p-value, from the relabellings the verdict's test draws."""
    m, c = np.concatenate([ref[0], other[0]]), np.concatenate([ref[1], other[1]])
    d = _relabel(np.random.default_rng(seed), m, c, len(ref[0]), n_perm, 0.01, "tanh")
    d = d[np.isfinite(d)]
    return float((1 + np.count_nonzero(np.abs(d) >= abs(observed) - 1e-12)) / (1 + len(d)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000, help="simulated runs per size")
    ap.add_argument("--bootstrap", type=int, default=1000, help="resamples per CI and test")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.runs} runs per size; rates over runs")
    print(
        f"{'shape':8} {'items':>7} {'plain':>6} {'expanded':>8} {'|d| test':>8} "
        f"{'equal-tailed':>12} {'verdict':>7} {'M-C p':>6} {'M-C verdict':>11}"
    )
    for shape, ((m1, c1), (m2, c2)) in SHAPES.items():
        true = pcr(m1, c1) - pcr(m2, c2)
        for n1, n2 in SIZES:
            plain = expanded = old_p = new_p = named = ex_p = ex_named = 0
            tail = expanded_tail(min(n1, n2))
            for run in range(args.runs):
                ref = ((rng.random(n1) < m1) * 1.0, (rng.random(n1) < c1) * 1.0)
                other = ((rng.random(n2) < m2) * 1.0, (rng.random(n2) < c2) * 1.0)
                boot = np.random.default_rng(run)  # the resamples compare_splits draws
                d = _boot_pcr(boot, *ref, args.bootstrap, 0.01, "tanh") - _boot_pcr(
                    boot, *other, args.bootstrap, 0.01, "tanh"
                )
                lo, hi = np.quantile(d, [0.025, 0.975])
                plain += lo <= true <= hi
                lo, hi = np.quantile(d, [tail, 1 - tail])
                expanded += lo <= true <= hi
                a, b = (
                    split_score(*(x.tolist() for x in ref)),
                    split_score(*(x.tolist() for x in other)),
                )
                comp = compare_splits(
                    "ref", "other", ref, other, a, b, n_boot=args.bootstrap, seed=run
                )
                old_p += abs_p(ref, other, run, args.bootstrap, comp.pcr_diff) <= 0.05
                new_p += comp.p_value <= 0.05
                named += (
                    comp.verdict.startswith(("fine-tuned", "contaminated"))
                    if shape == "clean"
                    else comp.verdict == "fine-tuned on ref"
                )
                ex_p += comp.excess_p_value is not None and comp.excess_p_value <= 0.05
                ex_named += (
                    str(comp.excess_verdict).startswith(("fine-tuned", "contaminated"))
                    if shape == "clean"
                    else comp.excess_verdict == "fine-tuned on ref"
                )
            r = args.runs
            print(
                f"{shape:8} {f'{n1}/{n2}':>7} {plain / r:6.3f} {expanded / r:8.3f} "
                f"{old_p / r:8.3f} {new_p / r:12.3f} {named / r:7.3f} {ex_p / r:6.3f} "
                f"{ex_named / r:11.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
