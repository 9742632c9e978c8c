"""False-positive rate of BenBench's leak reading on simulated clean data, by number of items.

Clean means H0 holds: each item's original and its paraphrase are draws from one per-item
distribution, so the model has no preference for the original wording. Two shapes:

- ``nll``: per-item answer NLL = item difficulty N(2, 0.5^2) + Exponential(0.5) per version
  (skewed, as real per-item NLLs are); leak side: Delta < 0.
- ``ngram``: exact 5-gram accuracy = Binomial(5, p_item) / 5 per version, p_item ~ U(0.1, 0.6);
  leak side: Delta > 0.

For each size the script prints how often the 95% CI (studentized paired bootstrap, none below
5 items) alone lies on the leak side of 0, how often the one-sided randomization p-value is
<= 0.05, and how often the report's leak signal fires (both; the p-value alone where no CI is
given), and how often the CI covers the true Delta of 0. Under H0 the second and third should
be at most 5%, the CI's one-sided miss about 2.5% and its coverage about 95%.

    python benchmarks/benbench_null.py              # 1,000 data sets per size
    python benchmarks/benbench_null.py --sets 300   # quicker
"""

from __future__ import annotations

import argparse

import numpy as np

from contamscope.detectors.benbench import delta_stats, paraphrase_test

SIZES = (2, 3, 5, 10, 30, 100)


def clean_values(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 2) values: column 0 the original, column 1 its paraphrase, exchangeable."""
    if kind == "nll":
        return rng.normal(2.0, 0.5, size=n)[:, None] + rng.exponential(0.5, size=(n, 2))
    p_item = rng.uniform(0.1, 0.6, size=n)
    return rng.binomial(5, p_item[:, None], size=(n, 2)) / 5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", type=int, default=1000, help="clean data sets per size")
    ap.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples per CI")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.sets} clean data sets per size; rates of the leak reading at 5%")
    print(f"{'metric':7} {'items':>5} {'CI alone':>9} {'p <= .05':>9} {'signal':>9} {'covers':>9}")
    for kind in ("nll", "ngram"):
        lower = kind == "nll"
        for n in SIZES:
            ci_hits = p_hits = both = covers = with_ci = 0
            for _ in range(args.sets):
                v = clean_values(kind, n, rng)
                ci = delta_stats(v[:, 0], v[:, 1], n_boot=args.bootstrap, seed=0)["ci"]
                side = ci is not None and (ci[1] < 0 if lower else ci[0] > 0)
                p = paraphrase_test(v[:, 0], v[:, 1:], lower_is_familiar=lower)["p_value"]
                small = p is not None and p <= 0.05
                ci_hits += side
                p_hits += small
                both += small and (side or ci is None)
                with_ci += ci is not None
                covers += ci is not None and ci[0] <= 0 <= ci[1]
            r = args.sets
            cov = f"{covers / with_ci:9.3f}" if with_ci else f"{'no CI':>9}"
            print(f"{kind:7} {n:5d} {ci_hits / r:9.3f} {p_hits / r:9.3f} {both / r:9.3f} {cov}")


if __name__ == "__main__":
    main()
