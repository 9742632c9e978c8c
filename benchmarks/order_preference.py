"""Which option orders does a model favour when they are not the published one?

The permutation test reads "the published order is favoured beyond chance" as leakage. It is not
leakage when writers put options in a conventional order that any model, clean or not, prefers:
sorted numbers, statement labels in order, a 2 x 2 block listed row by row, maybe alphabetical
order (``CONVENTIONS``). This script measures
each convention's pull directly, on items whose published order does NOT follow it: if the model
still picks a conventional order as its favourite more often than chance, the convention (not
the benchmark) is what it prefers, and items published in that order must be set aside
(``natural_order_reason``). Leakage cannot produce this signal: a model that saw an item favours
its published order, which here is not a conventional one.

For each benchmark and convention it prints, over the items with that structure: how many have a
conventional published order (and how often their published order is the favourite: Algorithm
1), and for a sample of the others, how often the favourite is a conventional order against the
chance rate (conventional orders / orders), with an exact (Poisson-)binomial p-value (H0: no pull).

    python benchmarks/order_preference.py                           # bundled SmolLM2 and MMLU
    python benchmarks/order_preference.py --model gemma3 --items 120 \\
        --benchmarks mmlu,../shared/benchdata/cmmlu/test,../shared/benchdata/ceval-exam/test

Scores go through the score cache (the default one, or ``--cache-dir``), so runs share them.
Measured figures (SmolLM2 and Gemma 3 on MMLU, C-Eval, CMMLU): docs/results.md.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from contamscope.backends import ScoreRequest, load_backend
from contamscope.data import MCQItem, load_benchmark
from contamscope.detectors.stats import poisson_binomial_sf
from contamscope.paths import default_score_db
from contamscope.perturb import TEMPLATES, option_orders
from contamscope.perturb.exchangeability import (
    CONVENTIONS,
    conventions_of,
    non_exchangeable_reason,
)
from contamscope.store import CachedScorer, ScoreCache


def favourites(scorer: CachedScorer, items: list[MCQItem]) -> list[tuple[tuple[int, ...], int]]:
    """Each item's favourite order (highest log-prob of the option lines) and its order count."""
    template = TEMPLATES["paper"]
    per_item = [option_orders(it.n_options).orders for it in items]
    requests = [
        ScoreRequest(template.prefix(it), template.continuation(it, o))
        for it, orders in zip(items, per_item)
        for o in orders
    ]
    results = iter(scorer.score(requests))
    out = []
    for orders in per_item:
        values = [next(results).logprob for _ in orders]
        out.append((orders[values.index(max(values))], len(orders)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--benchmarks", default="mmlu", help="comma list of benchmark paths or names")
    ap.add_argument(
        "--items", type=int, default=100, help="items not published in a convention (sampled)"
    )
    ap.add_argument(
        "--published-items",
        type=int,
        help="items published in it, for Algorithm 1's rate beside (default: --items)",
    )
    ap.add_argument("--conventions", default=",".join(CONVENTIONS), help="comma list")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", help="score cache folder (default: the user cache)")
    args = ap.parse_args()
    backend = load_backend(args.model)
    db = Path(args.cache_dir) / "scores.sqlite" if args.cache_dir else default_score_db()
    scorer = CachedScorer(backend, ScoreCache(db))
    print(f"model {args.model}; items per group at most {args.items}; seed {args.seed}")
    for bench in args.benchmarks.split(","):
        items = [
            it for it in load_benchmark(bench).items if non_exchangeable_reason(it.options) is None
        ]
        # as in the run summaries (conventions_of): options with another convention's
        # structure do not count as alphabetical, whose pull they would blur
        found = [conventions_of(it.options) for it in items]
        identity = {it.id: tuple(range(it.n_options)) for it in items}
        for name in args.conventions.split(","):
            structured = [(it, f[name]) for it, f in zip(items, found) if name in f]
            published = [it for it, orders in structured if identity[it.id] in orders]
            others = [(it, orders) for it, orders in structured if identity[it.id] not in orders]
            rng = random.Random(args.seed)
            n_pub = args.items if args.published_items is None else args.published_items
            pub_sample = rng.sample(published, min(n_pub, len(published)))
            other_sample = rng.sample(others, min(args.items, len(others)))
            if not other_sample:
                print(f"{bench:40} {name:37} no items with this structure")
                continue
            pub_fav = favourites(scorer, pub_sample)
            alg1 = sum(fav == identity[it.id] for it, (fav, _) in zip(pub_sample, pub_fav))
            fav = favourites(scorer, [it for it, _ in other_sample])
            hits = sum(f in orders for (f, _), (_, orders) in zip(fav, other_sample))
            probs = [len(o) / n for (_, n), (_, o) in zip(fav, other_sample)]
            chance = sum(probs) / len(probs)
            p = poisson_binomial_sf(hits, probs)
            n_struct = len(published) + len(others)
            print(
                f"{bench:40} {name:37} {n_struct:5d} items with the structure, "
                f"{len(published)} ({len(published) / n_struct:.0%}) published in it | "
                f"published not conventional ({len(fav)} scored): favourite conventional "
                f"{hits} ({hits / len(fav):.1%}; chance {chance:.1%}; p = {p:.2g}) | "
                f"published conventional ({len(pub_fav)} scored): published is the "
                f"favourite {alg1}"
                + (
                    f" ({alg1 / len(pub_fav):.1%}; chance "
                    f"{sum(1 / n for _, n in pub_fav) / len(pub_fav):.1%})"
                    if pub_fav
                    else ""
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
