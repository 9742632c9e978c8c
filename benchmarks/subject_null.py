"""How often the per-subject flags (summary.json's by_subject) name a subject of a clean model.

Simulated clean runs: every item's 24 order log-probs (4 options) are independent N(0, 1), so
the original order is exchangeable with the others (H0 holds for every subject). For each
shape (subjects x items per subject) the script prints the share of runs in which any subject
was flagged (should be at most 5%), and the share of all subjects flagged.

    python benchmarks/subject_null.py              # 300 runs per shape
    python benchmarks/subject_null.py --runs 100   # quicker
"""

from __future__ import annotations

import argparse

import numpy as np

from contamscope.detectors.permutation import Algorithm2, score_item
from contamscope.pipeline.permutation import subject_summary

SHAPES = ((5, 10), (10, 15), (20, 8))
FOREST = Algorithm2(n_estimators=5)  # Algorithm 2 does not enter the by-subject tests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=300, help="simulated runs per shape")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.runs} clean runs per shape; flags at BH q <= 0.05")
    print(f"{'subjects':>8} {'items':>5} {'runs with a flag':>16} {'subjects flagged':>16}")
    for n_subjects, n_items in SHAPES:
        any_flag = flagged = 0
        for _ in range(args.runs):
            records = [
                score_item(rng.normal(size=24), n_options=4, exhaustive=True, alg2=FOREST).to_dict()
                | {"id": f"s{s}-{i}", "subject": f"s{s}"}
                for s in range(n_subjects)
                for i in range(n_items)
            ]
            block = subject_summary(records, set(), alpha=0.05)
            assert block is not None
            any_flag += block["n_flagged"] > 0
            flagged += block["n_flagged"]
        r = args.runs
        print(
            f"{n_subjects:8d} {n_items:5d} {any_flag / r:16.3f} {flagged / (r * n_subjects):16.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
