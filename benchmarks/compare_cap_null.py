"""`contamscope compare` on two CAP runs: how often its paired test calls a difference between
two models that lean alike, and how often it finds the one trained on the tested split.

Simulated pairs of runs on the same items of a reference split (``dev``, easier) and a tested
split (``test``, harder), one reader, binary readings as for multiple choice:

- per item a difficulty both models share (``dev`` uniform on [0.3, 0.9], ``test`` on
  [0.1, 0.7]); a model is right (M) with that probability plus its skill, and consistent (C)
  with probability 0.3 + 0.4 x difficulty plus its skill, each an independent draw per model;
- ``clean``: A and B alike (H0 of compare holds);
- ``B more skilled alike``: B's M and C probabilities 0.15 higher on both splits (not
  exchangeable, but neither model leans toward test more than the other);
- ``B trained on test``: on a share ``--share`` (and 80%) of the test items B is right
  (memorised) and its answer consistent with probability 0.3 only (a memorised letter points
  elsewhere once the options are reordered).

Printed per row and number of items per split: the share of simulated pairs in which the M - C
test (the verdict's) and the PCR test (reported, not in the verdict) reach p <= 0.05, and in
which the verdict points to B.

    python benchmarks/compare_cap_null.py              # 300 pairs of runs per row
    python benchmarks/compare_cap_null.py --runs 100   # quicker
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from contamscope.detectors.compare_cap import lean_difference

SIZES = (20, 50, 200, 1000)


def _readings(
    rng: np.random.Generator, diff: np.ndarray, skill: float, memorised: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    m = rng.random(diff.size) < np.clip(diff + skill, 0, 1)
    c = rng.random(diff.size) < np.clip(0.3 + 0.4 * diff + skill, 0, 1)
    m = m | memorised
    c = np.where(memorised, rng.random(diff.size) < 0.3, c)
    return m.astype(float), c.astype(float)


def _pair(
    rng: np.random.Generator, n: int, skill_b: float, share: float
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    out = []
    for split, (lo, hi) in (("dev", (0.3, 0.9)), ("test", (0.1, 0.7))):
        diff = rng.uniform(lo, hi, n)
        none = np.zeros(n, dtype=bool)
        leaked = (rng.random(n) < share) if split == "test" else none
        out.append((*_readings(rng, diff, 0.0, none), *_readings(rng, diff, skill_b, leaked)))
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=300, help="simulated pairs of runs per row")
    ap.add_argument("--share", type=float, default=0.3, help="share of test items B memorised")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = (
        ("clean", 0.0, 0.0),
        ("B more skilled alike (+0.15)", 0.15, 0.0),
        (f"B trained on test ({args.share:.0%} of items)", 0.0, args.share),
        ("B trained on test (80% of items)", 0.0, 0.8),
    )
    start = time.perf_counter()
    print(f"{args.runs} simulated pairs of runs per row; share with p <= 0.05")
    print(f"{'scenario':36} {'items':>6} {'M - C':>7} {'PCR':>6} {'B side':>7}")
    for name, skill, share in rows:
        for n in SIZES:
            hits = {"excess": 0, "pcr": 0, "toward_b": 0}
            for k in range(args.runs):
                ref, other = _pair(rng, n, skill, share)
                res = lean_difference(ref, other, n_boot=100, seed=k)
                for stat in ("excess", "pcr"):
                    hits[stat] += res[stat]["two_sided"] <= 0.05
                hits["toward_b"] += res["two_sided"] <= 0.05 and res["b_greater"] < res["a_greater"]
            r = {key: v / args.runs for key, v in hits.items()}
            print(f"{name:36} {n:>6} {r['excess']:>7.3f} {r['pcr']:>6.3f} {r['toward_b']:>7.3f}")
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
