"""Coverage of BenBench's n-gram accuracy Delta interval near 0, with and without its
``ci_warning`` flag, on simulated clean data (true Delta 0).

Each item's exact 5-gram accuracy is k/5 on the original and the mean of 3 paraphrases'
k/5, k ~ Binomial(5, p): ``p`` fixed (0.05 down to 0.005: a small model that predicts few
n-grams) or drawn per item from U(0.1, 0.6) or U(0, 0.2). For each case and number of items the
script prints how many sets got an interval, and the coverage of 0 among the flagged and the
other intervals. The flag (at least half the items' differences 0, fewer than 20 not) should
catch the intervals that cover far less than 95% and leave the others near it.

    python benchmarks/benbench_sparse_ci.py              # 400 data sets a cell (about 5 min)
    python benchmarks/benbench_sparse_ci.py --sets 100   # quicker
"""

from __future__ import annotations

import argparse

import numpy as np

from contamscope.detectors.benbench import delta_stats

SIZES = (5, 8, 12, 20, 30, 50, 100)
CASES = (
    ("U(0.1, 0.6)", (0.1, 0.6)),
    ("U(0, 0.2)", (0.0, 0.2)),
    *((f"{p}", p) for p in (0.05, 0.02, 0.01, 0.005)),
)


def draw(
    n: int, p: float | tuple[float, float], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    acc = rng.uniform(*p, size=n) if isinstance(p, tuple) else np.full(n, p)
    return rng.binomial(5, acc) / 5, rng.binomial(5, acc[:, None], size=(n, 3)).mean(axis=1) / 5


def cell(text: str, values: list[bool]) -> str:
    return f"{text} {len(values):4d} {np.mean(values):.2f}" if values else f"{text} {0:4d}    -"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", type=int, default=400)
    ap.add_argument("--resamples", type=int, default=1000)
    args = ap.parse_args()
    rng = np.random.default_rng(2)
    print(
        "accuracy per n-gram | items | intervals | flagged: count, coverage | others: count, coverage"
    )
    for name, p in CASES:
        for n in SIZES:
            flagged: list[bool] = []
            others: list[bool] = []
            for s in range(args.sets):
                d = delta_stats(*draw(n, p, rng), n_boot=args.resamples, seed=s)
                if d["ci"] is None:
                    continue
                covers = bool(d["ci"][0] <= 0 <= d["ci"][1])
                (flagged if d["ci_warning"] else others).append(covers)
            shown = len(flagged) + len(others)
            print(
                f"{name:>19} | {n:5d} | {shown:9d} | {cell('', flagged)} | {cell('', others)}",
                flush=True,
            )


if __name__ == "__main__":
    main()
