"""`contamscope compare`'s paired tests: how often they call a difference between two models that
are equally drawn to the published orders, and how often they find one that is more drawn.

Simulated pairs of runs on the same items (4 options, 24 orders): per item a shared component
``c`` (the item's own order preferences, the same for both models) plus each model's own noise,
``lp_A = c + e_A`` and ``lp_B = c + e_B`` with ``e ~ N(0, 1)`` and ``c ~ N(0, s)``.

- ``clean``: nothing leaked (``s = 1``).
- ``both leaked alike``: both models favour the published order of every item by the same
  ``--lift`` nats (put into ``c``): H0 of compare holds (equal familiarity), though a single-run
  test of either model finds leakage.
- ``B leaked more``: as ``both leaked alike``, and B's published order is lifted by a further
  ``--extra`` nats on a share ``--share`` of the items.

Printed per row and number of items: the share of simulated pairs in which the verdict (the
smallest of the three two-sided p-values x 3) is at most 5%, and in which each test is.

    python benchmarks/compare_null.py              # 300 pairs of runs per row
    python benchmarks/compare_null.py --runs 100   # quicker
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from contamscope.detectors.compare import PairedItem, beaten_share, compare_pairs

SIZES = (20, 100, 500)


def _values(lp: np.ndarray) -> tuple[bool, float, float]:
    return bool(lp[0] > lp[1:].max()), beaten_share(lp), float(lp[0] - lp[1:].mean())


def _pairs(
    rng: np.random.Generator, n: int, lift: float, extra: float, share: float
) -> list[PairedItem]:
    out = []
    for i in range(n):
        c = rng.normal(size=24)
        c[0] += lift
        a = c + rng.normal(size=24)
        b = c + rng.normal(size=24)
        if rng.random() < share:
            b[0] += extra
        (a1, sa, ga), (b1, sb, gb) = _values(a), _values(b)
        out.append(PairedItem(f"q{i}", None, a1, b1, sa, sb, ga, gb))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=300, help="simulated pairs of runs per row")
    ap.add_argument("--lift", type=float, default=2.0, help="shared lift of the published order")
    ap.add_argument("--extra", type=float, default=2.0, help="B's further lift, leaked items")
    ap.add_argument("--share", type=float, default=0.2, help="share of items B leaked more")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = (
        ("clean", 0.0, 0.0, 0.0),
        ("both leaked alike", args.lift, 0.0, 0.0),
        (
            f"B leaked more ({args.share:.0%} of items +{args.extra:g})",
            args.lift,
            args.extra,
            args.share,
        ),
    )
    start = time.perf_counter()
    print(f"{args.runs} simulated pairs of runs per row; share with p <= 0.05")
    print(
        f"{'scenario':44} {'items':>6} {'verdict':>8} {'alg1':>6} {'share':>6} {'gap':>6} {'B side':>7}"
    )
    for name, lift, extra, share in rows:
        for n in SIZES:
            hits = {"verdict": 0, "alg1": 0, "share": 0, "gap": 0, "toward_b": 0}
            for _ in range(args.runs):
                res = compare_pairs(_pairs(rng, n, lift, extra, share))
                hits["verdict"] += res["p_value"] <= 0.05
                hits["toward_b"] += res["direction"] == "B"
                for k in ("alg1", "share", "gap"):
                    hits[k] += res[k]["two_sided"] <= 0.05
            r = {k: v / args.runs for k, v in hits.items()}
            print(
                f"{name:44} {n:>6} {r['verdict']:>8.3f} {r['alg1']:>6.3f} {r['share']:>6.3f} "
                f"{r['gap']:>6.3f} {r['toward_b']:>7.3f}"
            )
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
