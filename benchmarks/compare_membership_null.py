"""`contamscope compare` on two membership runs: how often DeLong's paired AUC test calls a
difference between two models that tell the benchmark from the references equally well, and how
often it finds the one that tells them apart better.

Simulated pairs of runs on the same benchmark and reference items: per item a component both
models share (how familiar-looking its text is, ``N(0, 1)``) plus each model's own noise
(``N(0, 1)``); B's statistic is on another scale (``2 x + 1``), which AUCs ignore.

- ``clean``: benchmark and reference items drawn alike;
- ``both leaked alike``: the benchmark's shared component ``--lift`` higher (both models see
  the same leak; H0 of compare holds, though each run's own test finds it);
- ``B leaked more``: as ``both leaked alike``, and B's value of a share ``--share`` of the
  benchmark items ``--extra`` higher.

Printed per row and size (benchmark + reference items): the share of simulated pairs in which
the two-sided p is at most 5% and in which it points to B.

``--swap``: the sizes at most 16 items, where the paired swap test gives the p-value instead of
DeLong. The swap moves values between the models, so B's scale matters there: each row is run
with B on A's scale and on ``2 x + 1``.

    python benchmarks/compare_membership_null.py              # 1000 pairs of runs per row
    python benchmarks/compare_membership_null.py --runs 200   # quicker
    python benchmarks/compare_membership_null.py --swap --runs 400
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from contamscope.detectors.compare import paired_auc_difference

SIZES = ((10, 20), (30, 60), (100, 100), (500, 500))
SWAP_SIZES = ((4, 4), (6, 10))


def _pair(
    rng: np.random.Generator,
    nb: int,
    nr: int,
    lift: float,
    extra: float,
    share: float,
    scale: tuple[float, float] = (2.0, 1.0),
) -> dict[str, float]:
    shared_b, shared_r = rng.normal(lift, 1, nb), rng.normal(0, 1, nr)
    xa, ya = shared_b + rng.normal(0, 1, nb), shared_r + rng.normal(0, 1, nr)
    xb = shared_b + rng.normal(0, 1, nb) + extra * (rng.random(nb) < share)
    yb = shared_r + rng.normal(0, 1, nr)
    k, c = scale
    return paired_auc_difference(xa, ya, k * xb + c, k * yb + c)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1000, help="simulated pairs of runs per row")
    ap.add_argument("--lift", type=float, default=0.5, help="the benchmark's shared lift")
    ap.add_argument("--extra", type=float, default=1.0, help="B's further lift, leaked items")
    ap.add_argument("--share", type=float, default=0.3, help="share of items B leaked more")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--swap", action="store_true", help="the swap test's sizes (<= 16 items)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = (
        ("clean", 0.0, 0.0, 0.0),
        ("both leaked alike", args.lift, 0.0, 0.0),
        (f"B leaked more ({args.share:.0%} +{args.extra:g})", args.lift, args.extra, args.share),
    )
    start = time.perf_counter()
    print(f"{args.runs} simulated pairs of runs per row; share with p <= 0.05")
    print(f"{'scenario':48} {'items':>10} {'p<=0.05':>8} {'toward B':>9}")
    scales = (
        (("B on A's scale", (1.0, 0.0)), ("B 2x+1", (2.0, 1.0)))
        if args.swap
        else (("", (2.0, 1.0)),)
    )
    for name, lift, extra, share in rows:
        for label, scale in scales:
            for nb, nr in SWAP_SIZES if args.swap else SIZES:
                res = [_pair(rng, nb, nr, lift, extra, share, scale) for _ in range(args.runs)]
                hit = np.mean([r["two_sided"] <= 0.05 for r in res])
                toward = np.mean([r["two_sided"] <= 0.05 and r["difference"] > 0 for r in res])
                row = f"{name}, {label}" if label else name
                print(f"{row:48} {f'{nb}+{nr}':>10} {hit:>8.3f} {toward:>9.3f}", flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
