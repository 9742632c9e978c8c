"""Items sharing one option list in one order: the dataset verdict's false-positive rate when
they are counted as independent draws (before) and as one draw per group (the default now).

Simulated clean runs (4 options, all 24 orders). An item's order log-probs are
``sqrt(rho) * f + sqrt(1 - rho) * e``: ``e`` its own N(0, 1) noise, ``f`` N(0, 1) values shared
by every item of its group (how much the model's taste for one arrangement of those option
texts decides the item's ranking; an item sharing nothing has its own ``f``). Every value is
exchangeable across orders, jointly within a group, so H0 holds: nothing leaked.

Shapes:
- ``mmlu-groups``: the group sizes of the bundled MMLU's items that share an option list
  in one order with another item, among the 11,228 the verdict tests (164 groups, 359 items).
- ``small+5``: a small benchmark of 20 items sharing nothing plus five items sharing one list
  (the shape that gave a gap-test p of 0.00045 on a random-weight model).
- ``scale``: 60 items answered on 6 fixed scales (10 items each), as a benchmark that asks
  every question on one answer scale.

Printed per shape and ``rho``: the share of runs in which the verdict (the three tests,
Bonferroni, 5% overall) says "leakage signal", counting groups as independent items and as one
draw. Last, the power cost: ``scale`` with 1 of its 6 groups leaked (every member's original
order lifted by 2 standard deviations).

With ``--model``, a real run instead: the bundled MMLU's items in groups of at least
``--min-group`` are scored by that model (``random`` builds a random-weight 2-layer model with
SmolLM2's tokenizer, which never saw anything); printed are how alike the items of a group rank
their orders (the mean correlation, over pairs of items of a group, of their aligned order
log-probs: ``rho`` above) and the verdict's p counted both ways.

    python benchmarks/shared_orders_null.py              # 400 runs per row
    python benchmarks/shared_orders_null.py --runs 100   # quicker
    python benchmarks/shared_orders_null.py --model smollm2 --min-group 3
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scaleout import tiny_model  # noqa: E402

from contamscope.detectors.permutation import Algorithm2, score_item
from contamscope.detectors.shared import SharedOrders
from contamscope.detectors.stats import summarize
from contamscope.detectors.verdict import verdict_p_value

RHOS = (0.0, 0.5, 0.9)


class _NoForest(Algorithm2):
    """Algorithm 2 is not in the verdict: skip its forest."""

    def outlier_scores(self, logprobs: Any) -> Any:
        return np.zeros(len(logprobs))


FOREST = _NoForest()


def mmlu_groups() -> list[list[Any]]:
    """The bundled MMLU's groups of items with one option list in one order (two or more
    items) among the items the verdict tests: options not referring to each other, none
    repeated, published order not a natural one; largest first."""
    from contamscope.data.loaders import load_benchmark
    from contamscope.perturb.exchangeability import natural_order_reason, non_exchangeable_reason

    groups: dict[tuple[str, ...], list[Any]] = {}
    for it in load_benchmark("mmlu").items:
        if (
            non_exchangeable_reason(it.options)
            or len(set(it.options)) < len(it.options)
            or natural_order_reason(it.options)
        ):
            continue
        key = tuple(" ".join(o.split()).casefold() for o in it.options)
        groups.setdefault(key, []).append(it)
    return sorted((g for g in groups.values() if len(g) > 1), key=len, reverse=True)


def model_run(spec: str, min_group: int) -> None:
    """Score MMLU's groups of at least ``min_group`` items with one model; print how alike a
    group's items rank their orders and the verdict's p counted both ways."""
    import tempfile

    from contamscope.backends import load_backend
    from contamscope.data import load_benchmark
    from contamscope.detectors import item_score_from_dict
    from contamscope.detectors.shared import shared_orders
    from contamscope.pipeline import PermutationConfig, run_permutation
    from contamscope.store import CachedScorer

    tmp = tempfile.mkdtemp()
    if spec == "random":
        spec = tiny_model(Path(tmp) / "random-model", embed_std=1.0, max_positions=1024)
    items = [it for g in mmlu_groups() if len(g) >= min_group for it in g]
    t0 = time.perf_counter()
    out = run_permutation(
        load_benchmark("mmlu"),
        items,
        CachedScorer(load_backend(spec), None),
        Path(tmp) / "run",
        PermutationConfig(template="paper"),
    )
    records = [r for r in out.records() if not r.get("excluded")]
    groups = shared_orders(records, {it.id: it.options for it in items})
    corr = []
    for g in groups:
        c = np.corrcoef(g.logprobs)
        corr += c[np.triu_indices_from(c, k=1)].tolist()
    before = verdict_p_value(summarize([item_score_from_dict(r) for r in records]).to_dict())
    after = verdict_p_value(out.summary["statistics"])
    print(
        f"{spec}: {len(records)} items in {len(groups)} groups of {min_group} or more "
        f"({time.perf_counter() - t0:.0f} s); correlation of a group's items' order log-probs: "
        f"mean {np.mean(corr):.2f}, median {np.median(corr):.2f} over {len(corr)} pairs; "
        f"verdict p counted as independent items {before:.3g}, as one draw per group {after:.3g}"
    )


def _run(
    rng: np.random.Generator, sizes: list[int], rho: float, leaked: int = 0, lift: float = 0.0
) -> tuple[float | None, float | None]:
    """One simulated run of groups of ``sizes`` (1 = an item sharing nothing); the first
    ``leaked`` groups have every member's original order lifted. Returns the verdict's p with
    the groups counted as independent items and as one draw each."""
    scores = []
    shared = []
    for g, size in enumerate(sizes):
        f = rng.normal(size=24)
        rows = math.sqrt(rho) * f + math.sqrt(1.0 - rho) * rng.normal(size=(size, 24))
        if g < leaked:
            rows[:, 0] += lift
        start = len(scores)
        scores += [score_item(r, n_options=4, exhaustive=True, alg2=FOREST) for r in rows]
        if size > 1:
            shared.append(SharedOrders(tuple(range(start, start + size)), rows))
    before = verdict_p_value(summarize(scores).to_dict())
    after = verdict_p_value(summarize(scores, shared=shared).to_dict())
    return before, after


def _rates(sizes: list[int], rho: float, runs: int, seed: int, **leak: Any) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    hits = np.zeros(2)
    for _ in range(runs):
        ps = _run(rng, sizes, rho, **leak)
        hits += [p is not None and p <= 0.05 for p in ps]
    return float(hits[0] / runs), float(hits[1] / runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=400, help="simulated runs per row (400)")
    ap.add_argument("--model", help="a real run with this model (random: a random-weight one)")
    ap.add_argument("--min-group", type=int, default=2, help="with --model: smallest group (2)")
    args = ap.parse_args()
    if args.model:
        model_run(args.model, args.min_group)
        return
    shapes = {
        "mmlu-groups": [len(g) for g in mmlu_groups()],
        "small+5": [5] + [1] * 20,
        "scale": [10] * 6,
    }
    se = math.sqrt(0.05 * 0.95 / args.runs)
    print(f"{args.runs} clean runs per row; a rate of 5% has a standard error of {se:.1%}")
    print(
        f"{'shape':<12} {'items':>5} {'groups':>6} {'rho':>4}  {'independent':>11}  {'one draw':>8}"
    )
    t0 = time.perf_counter()
    for name, sizes in shapes.items():
        n_groups = sum(1 for s in sizes if s > 1)
        for k, rho in enumerate(RHOS):
            before, after = _rates(sizes, rho, args.runs, seed=100 * k + len(sizes))
            print(
                f"{name:<12} {sum(sizes):>5} {n_groups:>6} {rho:>4.1f}  {before:>11.1%}  {after:>8.1%}"
            )
    before, after = _rates(shapes["scale"], 0.5, args.runs, seed=7, leaked=1, lift=2.0)
    print(
        f"power, scale with 1 of 6 groups leaked (lift 2, rho 0.5): independent {before:.1%}, "
        f"one draw {after:.1%}"
    )
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
