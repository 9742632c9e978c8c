"""The per-subject flags (summary.json's by_subject): how often they name a subject of a clean
model, and how many leaked items a subject needs before it is flagged.

Simulated runs: every item's 24 order log-probs (4 options) are independent N(0, 1), so the
original order is exchangeable with the others (H0 holds for every subject).

- Null: for each shape (subjects x items per subject) the share of runs in which any subject
  was flagged (should be at most 5%), and the share of all subjects flagged.
- Power: a run of 10 subjects x 20 items in which one subject has k leaked items, whose original
  order is lifted by ``--lift`` (in standard deviations of the other orders' log-probs; 3 puts
  it on top in about 83% of items). Printed per k: the share of runs in which the leaked subject
  is flagged, in which the dataset verdict (all 200 items) says "leakage signal", and in which
  a clean subject is flagged.

    python benchmarks/subject_null.py              # 300 runs per row
    python benchmarks/subject_null.py --runs 100   # quicker
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from contamscope.detectors import item_score_from_dict
from contamscope.detectors.permutation import Algorithm2, score_item
from contamscope.detectors.stats import summarize
from contamscope.detectors.verdict import verdict
from contamscope.pipeline.permutation_summary import subject_summary

SHAPES = ((5, 10), (10, 15), (20, 8))
POWER_SHAPE = (10, 20)
LEAKED = (2, 4, 6, 10, 20)


class _NoForest(Algorithm2):
    """Algorithm 2 enters neither the by-subject tests nor the verdict: skip its forest (95% of
    the time), every order scores 0 and no item is Algorithm-2 flagged."""

    def outlier_scores(self, logprobs: Any) -> Any:
        return np.zeros(len(logprobs))


FOREST = _NoForest()


def _run(
    rng: np.random.Generator, n_subjects: int, n_items: int, leaked: int = 0, lift: float = 0.0
) -> list[dict[str, Any]]:
    """One simulated run's records; subject s0's first ``leaked`` items have their original
    order (index 0) lifted by ``lift``."""
    records = []
    for s in range(n_subjects):
        for i in range(n_items):
            lp = rng.normal(size=24)
            if s == 0 and i < leaked:
                lp[0] += lift
            item = score_item(lp, n_options=4, exhaustive=True, alg2=FOREST).to_dict()
            records.append(item | {"id": f"s{s}-{i}", "subject": f"s{s}"})
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=300, help="simulated runs per row")
    ap.add_argument("--lift", type=float, default=3.0, help="a leaked item's lift (in SDs)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    r = args.runs
    print(f"Null: {r} clean runs per shape; flags at BH q <= 0.05")
    print(f"{'subjects':>8} {'items':>5} {'runs with a flag':>16} {'subjects flagged':>16}")
    for n_subjects, n_items in SHAPES:
        any_flag = flagged = 0
        for _ in range(r):
            block = subject_summary(_run(rng, n_subjects, n_items), set(), alpha=0.05)
            assert block is not None
            any_flag += block["n_flagged"] > 0
            flagged += block["n_flagged"]
        print(
            f"{n_subjects:8d} {n_items:5d} {any_flag / r:16.3f} {flagged / (r * n_subjects):16.4f}",
            flush=True,
        )
    n_subjects, n_items = POWER_SHAPE
    print(
        f"\nPower: {r} runs per row, {n_subjects} subjects x {n_items} items, one subject with k "
        f"leaked items (original order lifted by {args.lift:g} SD)"
    )
    print(f"{'k':>3} {'leaked subject flagged':>22} {'dataset verdict':>15} {'clean flagged':>13}")
    for k in LEAKED:
        hit = whole = false = 0
        for _ in range(r):
            records = _run(rng, n_subjects, n_items, k, args.lift)
            block = subject_summary(records, set(), alpha=0.05)
            assert block is not None
            rows = {row["subject"]: row for row in block["subjects"]}
            hit += rows["s0"]["flagged"]
            false += any(row["flagged"] for s, row in rows.items() if s != "s0")
            stats = summarize([item_score_from_dict(x) for x in records], alpha=0.05).to_dict()
            whole += verdict(stats)[0] is True
        print(f"{k:3d} {hit / r:22.3f} {whole / r:15.3f} {false / r:13.3f}", flush=True)


if __name__ == "__main__":
    main()
