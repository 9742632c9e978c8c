"""`contamscope compare` on two BenBench runs: how often its paired gap tests call a difference
between two models that are equally familiar with the original wording, and how often they find
the one that is more familiar.

Simulated pairs of runs on the same items, each with its original and 3 paraphrases, k = 5
n-gram starting points per version:

- per item a component both models share: how much less natural its paraphrases read
  (``N(0.2, 0.3)`` nats/token of NLL, and n-gram hit rates 0.30 on the original, 0.25 on a
  paraphrase), plus each model's own noise on every version (``N(0, 0.3)`` nats/token; each
  n-gram a Bernoulli draw);
- ``clean``: nothing more;
- ``both leaked alike``: both models' originals ``--lift`` nats/token lower and their n-gram
  hit rate 0.3 higher (H0 of compare holds, though each run's own test finds the leak);
- ``B leaked more``: as ``both leaked alike``, and on a share ``--share`` of the items B's
  original is a further ``--extra`` nats/token lower and its hit rate 0.3 higher again.

Printed per row and number of items: the share of simulated pairs in which the verdict (the
smaller of the NLL and exact n-gram two-sided p-values x 2) is at most 5%, in which each test
is, and in which the verdict points to B.

    python benchmarks/compare_benbench_null.py              # 300 pairs of runs per row
    python benchmarks/compare_benbench_null.py --runs 100   # quicker
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from contamscope.detectors.compare import compare_gaps

SIZES = (20, 100, 500)
K, REFS = 5, 3


def _model(
    rng: np.random.Generator,
    base: np.ndarray,
    hit: np.ndarray,
    lift: np.ndarray,
    boost: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One model's per-item gaps (NLL: paraphrases - original; exact n-gram accuracy:
    original - paraphrases) from the items' shared ``base`` NLLs and ``hit`` rates (column 0
    the original), the original's NLL lowered by ``lift`` and its hit rate raised by
    ``boost`` (per item)."""
    nll = base + rng.normal(0, 0.3, base.shape)
    nll[:, 0] -= lift
    p = hit.copy()
    p[:, 0] = np.clip(p[:, 0] + boost, 0, 1)
    acc = rng.binomial(K, p) / K
    return nll[:, 1:].mean(1) - nll[:, 0], acc[:, 0] - acc[:, 1:].mean(1)


def _pair(
    rng: np.random.Generator, n: int, lift: float, extra: float, share: float
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    base = np.full((n, 1 + REFS), 2.0)
    base[:, 1:] += rng.normal(0.2, 0.3, (n, 1))  # the item's paraphrases read less naturally
    hit = np.full((n, 1 + REFS), 0.25)
    hit[:, 0] = 0.30
    shared = np.full(n, lift)
    more = rng.random(n) < share
    both = 0.3 * (shared > 0)
    gaps_a = _model(rng, base, hit, shared, both)
    gaps_b = _model(rng, base, hit, shared + extra * more, both + 0.3 * more * (extra > 0))
    return {"nll": (gaps_a[0], gaps_b[0]), "ngram_exact": (gaps_a[1], gaps_b[1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=300, help="simulated pairs of runs per row")
    ap.add_argument("--lift", type=float, default=0.5, help="both models' lift of the originals")
    ap.add_argument("--extra", type=float, default=0.5, help="B's further lift, leaked items")
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
    print(f"{'scenario':36} {'items':>6} {'verdict':>8} {'nll':>6} {'ngram':>6} {'B side':>7}")
    for name, lift, extra, share in rows:
        for n in SIZES:
            hits = {"verdict": 0, "nll": 0, "ngram_exact": 0, "toward_b": 0}
            for _ in range(args.runs):
                res = compare_gaps(_pair(rng, n, lift, extra, share))
                hits["verdict"] += res["p_value"] <= 0.05
                hits["toward_b"] += res["direction"] == "B"
                for k in ("nll", "ngram_exact"):
                    hits[k] += res[k]["two_sided"] <= 0.05
            r = {k: v / args.runs for k, v in hits.items()}
            print(
                f"{name:36} {n:>6} {r['verdict']:>8.3f} {r['nll']:>6.3f} "
                f"{r['ngram_exact']:>6.3f} {r['toward_b']:>7.3f}"
            )
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
