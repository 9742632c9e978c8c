"""What a permutation run on a benchmark would read, before any model is loaded: the items it
would score and set aside, the orders and tokens that cost, and whether the benchmark's
published option orders follow writers' conventions (``contamscope inspect``)."""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from .. import __version__
from ..data.items import LoadResult, MCQItem
from ..data.overlap import repeats
from ..detectors import Algorithm1, Algorithm2, score_item
from ..perturb.exchangeability import natural_order_reason, non_exchangeable_reason
from ..perturb.orders import every_order
from .inputs import check_items
from .permutation import PermutationConfig, item_texts
from .permutation_summary import convention_summary
from .provenance import notes_entry, selection_settings

__all__ = ["survey_permutation", "measure_permutation"]


def _orders(n_options: int, config: PermutationConfig) -> int:
    """Orders a run scores for an item of ``n_options`` options: all n! up to
    ``max_exhaustive`` options, else the original and ``mc_orders`` random ones (all n!
    where that is as many: :func:`_sampled`)."""
    return config.mc_orders + 1 if _sampled(n_options, config) else math.factorial(n_options)


def _sampled(n_options: int, config: PermutationConfig) -> bool:
    """Whether a run scores a Monte Carlo sample of an item's orders, as
    :func:`~contamscope.perturb.orders.option_orders` decides (a --mc-orders as large as the
    other orders is all of them: inspect said "a Monte Carlo sample"; diff-review QA)."""
    return not every_order(
        n_options, max_exhaustive=config.max_exhaustive, mc_orders=config.mc_orders
    )


def _requests(item: MCQItem, config: PermutationConfig) -> list[Any]:
    """The score requests a run makes for ``item``: its prefix with each order's options."""
    from ..backends.base import ScoreRequest

    _, prefix, conts = item_texts(item, config)
    return [ScoreRequest(prefix, c) for c in conts]


def _token_block(
    tokenizer: Any, items: Sequence[MCQItem], config: PermutationConfig
) -> tuple[dict[str, Any], set[str]]:
    """Tokens a run of ``items`` costs with ``tokenizer`` (a ModelTokenizer): the reference
    way's against the prefix-tree engine's minimum; and the ids of the items longer than the
    model's context (a run leaves them out)."""
    from ..backends.tree_plan import token_counts

    reference = minimum = too_long = 0
    longest: set[str] = set()
    for item in items:
        counts = token_counts(
            tokenizer.tokenizer, tokenizer.bos_id, _requests(item, config), tokenizer.max_length
        )
        reference += counts.reference
        minimum += counts.minimum
        too_long += counts.too_long
        if counts.too_long:
            longest.add(item.id)
    block = {
        "model": tokenizer.spec,
        "bos": tokenizer.bos_id is not None,
        "context": tokenizer.max_length,
        "reference": reference,
        "prefix_tree": minimum,
        "ratio": reference / minimum if minimum else None,
        "items_too_long": len(longest),
        "orders_too_long": too_long,
        "meaning": "reference: every order's prefix and options run in full, one sequence each "
        "(the published code); prefix_tree: each question once plus the token trie of its "
        "orders, the fewest the engine must run. BOS included where the model takes one.",
    }
    return block, longest


def survey_permutation(
    loaded: LoadResult,
    items: Iterable[MCQItem],
    config: PermutationConfig | None = None,
    *,
    tokenizer: Any = None,
    selection: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a permutation run of ``items`` (chosen from ``loaded``) with ``config`` would read:

    - ``counts``: items loaded and selected, rows skipped, options per item, subjects;
    - ``excluded``: items a run sets aside unscored, as their options refer to each other
      ("All of the above"), with ``include_non_exchangeable`` none are;
    - ``natural_order``: scored items whose published order is a natural one (sorted numbers,
      statement labels, 2 x 2 blocks ...); the verdict leaves them out, as H0 fails for them
      without a leak;
    - ``tested``: the items the verdict's tests read;
    - ``conventions``: :func:`convention_summary` over all loaded items;
    - ``orders``: option orders to score; ``tokens`` (with ``tokenizer``, a
      :class:`~contamscope.backends.tokenizer.ModelTokenizer`): tokens the reference way and
      the prefix-tree engine run.

    No model is loaded and nothing is scored.
    """
    config = config or PermutationConfig()
    items = check_items(items, MCQItem, "the permutation test")  # as a run refuses them (QA)
    excluded: dict[str, str] = {}
    natural: dict[str, str] = {}
    scored: list[MCQItem] = []
    for it in items:
        reason = non_exchangeable_reason(it.options)
        if reason and not config.include_non_exchangeable:
            excluded[it.id] = reason
            continue
        scored.append(it)
    refer = dict(excluded)  # options that refer to each other, repeated ones
    tokens, too_long = _token_block(tokenizer, scored, config) if tokenizer else (None, set())
    for it in scored:
        if it.id in too_long:  # its scores would be NaN: the run leaves it out
            excluded[it.id] = "longer than the model's context window"
        elif nat := natural_order_reason(it.options):
            natural[it.id] = nat
    scored = [it for it in scored if it.id not in too_long]
    by_subject: dict[str, dict[str, int]] = {}
    for it in items:
        if it.subject:
            row = by_subject.setdefault(
                it.subject, {"items": 0, "excluded": 0, "natural_order": 0, "tested": 0}
            )
            row["items"] += 1
            kind = (
                "excluded"
                if it.id in excluded
                else "natural_order"
                if it.id in natural
                else "tested"
            )
            row[kind] += 1
    histogram = Counter(it.n_options for it in items)
    orders_by_n = {n: _orders(n, config) for n in sorted({it.n_options for it in scored})}
    repeated = repeats(items)
    subjects = Counter(it.subject for it in items if it.subject)
    out: dict[str, Any] = {
        "schema": "contamscope.inspect/1",
        "contamscope_version": __version__,
        "benchmark": {
            "source": loaded.source,
            "format": loaded.format,
            "content_hash": loaded.content_hash,
            "files": len(loaded.files),
            # as a run's summary holds it, the ids' digest too: a planned run's items can be
            # checked against an earlier run's (QA)
            "selection": selection_settings(loaded, [it.id for it in items], selection),
        },
        "config": config.settings(),
        "counts": {
            "items_loaded": len(loaded.items),
            "items_selected": len(items),
            "rows_skipped": len(loaded.problems),
            "options_histogram": dict(sorted(histogram.items())),
            "subjects": len(subjects),
            "items_scored": len(scored),
            "items_excluded": len(excluded),
            "items_too_long": len(too_long),
            "items_natural_order": len(natural),
            "items_tested": len(scored) - len(natural),
            "repeats": len(repeated),
        },
        "skipped_rows": [str(p) for p in loaded.problems],
        **notes_entry(loaded.notes),
        "excluded": {
            "texts": dict(  # the option text that refers to the others, most frequent first
                Counter(_set_aside_text(r) for r in refer.values()).most_common(20)
            ),
            "by_id": excluded,
        },
        "natural_order": {
            "reasons": dict(
                sorted(Counter(natural.values()).items(), key=lambda kv: (-kv[1], kv[0]))
            ),
            "by_id": natural,
        },
        "repeats": repeated,
        "by_subject": dict(sorted(by_subject.items())),
        "orders": {
            "per_item": {str(n): k for n, k in orders_by_n.items()},
            "total": sum(orders_by_n[it.n_options] for it in scored),
            "sampled_items": sum(1 for it in scored if _sampled(it.n_options, config)),
        },
        "conventions": convention_summary(loaded.items),
        "tokens": tokens,
    }
    return out


def measure_permutation(
    found: dict[str, Any],
    backend: Any,
    items: Sequence[MCQItem],
    config: PermutationConfig | None = None,
    *,
    n_items: int = 32,
    seed: int = 0,
    tokenizer: Any = None,
) -> dict[str, Any]:
    """How long scoring the run ``found`` (:func:`survey_permutation` of ``items``) would take
    with ``backend``: a seeded sample of ``n_items`` of the items it would score is scored in
    one call (after one item alone, untimed: first calls pay for lazy set-up), without the
    score cache, and the time is scaled by the run's cost over the sample's, in prefix-tree
    tokens where ``tokenizer`` counts them (``found`` must hold its ``tokens``), else in
    orders. An extrapolation: a run's batches, other load on the machine and, on a GPU, a
    sample too small to fill it change the rate."""
    from ..backends.tree_plan import token_counts
    from ..errors import ConfigError

    config = config or PermutationConfig()
    excluded = found["excluded"]["by_id"]
    scored = [it for it in items if it.id not in excluded]
    if not scored:
        raise ConfigError("no items to score: nothing to measure")
    if n_items < 1:
        raise ConfigError(f"--measure {n_items}: expected 1 or more")
    sample = random.Random(seed).sample(scored, min(n_items, len(scored)))
    backend.score(_requests(sample[0], config))
    per_item = [_requests(it, config) for it in sample]
    requests = [r for reqs in per_item for r in reqs]
    t0 = time.perf_counter()
    results = backend.score(requests)
    seconds = time.perf_counter() - t0
    # the per-item detectors (Algorithm 2's IsolationForest is most of it): a run on this
    # machine's CPU runs them inline, between batches; with a GPU or a served model they run
    # in worker processes while the next batch is scored
    alg1, alg2 = Algorithm1(ties=config.ties), Algorithm2(deltas=config.deltas)
    t0 = time.perf_counter()
    start = 0
    for it, reqs in zip(sample, per_item):
        logprobs = [r.logprob for r in results[start : start + len(reqs)]]
        start += len(reqs)
        if not any(math.isnan(x) for x in logprobs):
            score_item(
                logprobs,
                n_options=it.n_options,
                exhaustive=len(reqs) == math.factorial(it.n_options),
                alg1=alg1,
                alg2=alg2,
            )
    detectors = (time.perf_counter() - t0) * len(scored) / len(sample)
    inline = bool(getattr(backend, "computes_on_local_cpu", False))
    tokens = found.get("tokens")
    if tokenizer is not None and tokens:
        basis = "prefix-tree tokens"
        part = token_counts(
            tokenizer.tokenizer, tokenizer.bos_id, requests, tokenizer.max_length
        ).minimum
        whole = tokens["prefix_tree"]
    else:
        basis, part, whole = "orders", len(requests), found["orders"]["total"]
    return {
        "model": backend.spec,
        "device": backend.describe().get("device") or "a served model",
        "items": len(sample),
        "orders": len(requests),
        "seconds": seconds,
        "basis": basis,
        "sample_cost": part,
        "run_cost": whole,
        "scoring_seconds": seconds * whole / part if part else None,
        "detector_seconds": detectors,
        "detectors_inline": inline,
        "estimate_seconds": (seconds * whole / part + (detectors if inline else 0.0))
        if part
        else None,
        "meaning": "scoring: the sample's scoring time scaled by the run's cost over the "
        "sample's (in the basis named), computing every score afresh; detectors: their time on "
        "the sample scaled by the items, added where a run computes them inline (a model on "
        "this machine's CPU). An extrapolation, not a bound",
    }


def _set_aside_text(reason: str) -> str:
    """What an item was set aside for, to count: the option text that refers to the others
    (lower-cased), or "two identical options" (the repeat's reason, cut at its ": ", read
    "(orders that swap them are one text 1)"; Chinese QA).

    >>> _set_aside_text("option D refers to other options: 'All of the above'")
    "'all of the above'"
    >>> _set_aside_text("option B repeats option A ('北京'): orders that swap them are one text")
    'two identical options'
    """
    if " repeats option " in reason:
        return "two identical options"
    return reason.split(": ", 1)[-1].lower()
