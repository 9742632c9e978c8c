"""A permutation run's summary: the dataset-level statistics and verdict, the items published
in a natural option order, the benchmark's ordering conventions and the subjects that stand
out, all from the stored records (no model)."""

from __future__ import annotations

import contextlib
import hashlib
import math
import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..data.items import LoadResult, MCQItem
from ..data.overlap import repeats
from ..detectors import summarize
from ..detectors.permutation import PermutationItemScore
from ..detectors.shared import SharedOrders, shared_orders
from ..detectors.verdict import VERDICT_ALPHA
from ..perturb.exchangeability import (
    CONVENTIONS,
    REPORTED_ONLY,
    conventions_of,
    natural_order_reason,
    non_exchangeable_reason,
)
from .permutation_reference import Reference, reference_with_check
from .provenance import git_commit, notes_entry, package_versions

if TYPE_CHECKING:
    from .permutation import PermutationConfig

__all__ = [
    "SUBJECT_LEVEL",
    "build_summary",
    "compute_convention_summary",
    "convention_summary",
    "natural_order_summary",
    "options_convention_summary",
    "subject_p_floor",
    "subject_summary",
]


def natural_order_summary(
    records: Sequence[dict[str, Any]], items: Mapping[str, Any], alpha: float
) -> dict[str, Any]:
    """Items whose published option order is a natural one (sorted numbers, a fixed truth-table
    block, statement combinations; :func:`natural_order_reason`), how often Algorithm 1 flags
    them, and the calibrated statistics of the remaining items, which the verdict uses: for
    naturally ordered items H0 (exchangeability) fails without any leak."""
    from ..detectors import item_score_from_dict

    natural: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    reasons: Counter[str] = Counter()
    by_id: dict[str, str] = {}
    for r in records:
        item = items.get(r["id"])
        reason = natural_order_reason(item.options) if item is not None else None
        (natural if reason else rest).append(r)
        if reason:
            reasons[reason] += 1
            by_id[r["id"]] = reason
    scores = [item_score_from_dict(r) for r in natural]
    k = sum(s.alg1 for s in scores)
    return {
        "n_items": len(natural),
        # most items first, ties by name (not by which item came first: the verdict sentence
        # read otherwise for the same items shuffled; QA)
        "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        "alg1_count": k,
        "alg1_rate": k / len(natural) if natural else None,
        "alg1_chance": sum(1.0 / s.n_orders for s in scores) / len(scores) if scores else None,
        "ids": [r["id"] for r in natural],
        "by_id": by_id,
        "statistics_without": summarize(
            [item_score_from_dict(r) for r in rest], alpha=alpha, shared=_shared(rest, items)
        ).to_dict(),
    }


def convention_summary(items: Sequence[MCQItem]) -> dict[str, Any]:
    """:func:`compute_convention_summary`, kept in the user cache (``conventions/``) under a
    digest of the items' options and of the rules' code: the same benchmark's table is read
    back (about 2 s for MMLU's 14,042 items otherwise). A cache that cannot be read or written
    is passed by."""
    return options_convention_summary([tuple(it.options) for it in items])


def options_convention_summary(options: Sequence[Sequence[str]]) -> dict[str, Any]:
    """:func:`convention_summary` of the items whose options are ``options``, one sequence an
    item: all it reads of them, so a worker process is sent these alone."""
    import json

    from ..errors import StoreError
    from ..paths import cache_root, write_text_atomic

    digest = hashlib.sha256(_rules_digest().encode())
    for opts in options:
        digest.update("\x1e".join(opts).encode("utf-8", "surrogatepass") + b"\x1d")
    path = cache_root() / "conventions" / f"{digest.hexdigest()[:32]}.json"
    with contextlib.suppress(OSError, ValueError):
        cached = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(cached, dict):
            return cached
    summary = compute_convention_summary(options)
    with contextlib.suppress(OSError, StoreError):  # read-only, full: computed again next time
        write_text_atomic(path, json.dumps(summary), "conventions cache")
    return summary


def _rules_digest() -> str:
    """Digest of the code the convention table depends on (this module and the rules')."""
    from ..perturb import exchangeability

    h = hashlib.sha256()
    for module in (__file__, exchangeability.__file__):
        with contextlib.suppress(OSError):
            h.update(Path(module).read_bytes())
    return h.hexdigest()


def compute_convention_summary(
    items: Sequence[MCQItem] | Sequence[Sequence[str]],
) -> dict[str, Any]:
    """Do the benchmark's published option orders follow writers' conventions (sorted numbers,
    statement labels in dictionary order, 2 x 2 blocks row by row, alphabetical order;
    :data:`~contamscope.perturb.exchangeability.CONVENTIONS`) more often than shuffled options
    would? Over every loaded item whose options are exchangeable, per convention: the items with
    its structure, how many are published in it, the rate a random order would have, and an
    exact (Poisson-binomial) p-value. No model is involved: it is a property of the benchmark.

    A benchmark ordered by convention can favour its published orders without any leak through
    conventions no rule detects (stages of a process, severity scales); the verdict says so when it
    reads a leakage signal. A benchmark whose options were shuffled (CMMLU's) shows none."""
    from ..detectors.stats import poisson_binomial_sf

    probs: dict[str, list[float]] = {name: [] for name in CONVENTIONS}
    published: Counter[str] = Counter()
    for it in items:
        options = it.options if isinstance(it, MCQItem) else it
        if non_exchangeable_reason(options) is not None:
            continue
        identity = tuple(range(len(options)))
        for name, orders in conventions_of(options).items():
            probs[name].append(len(orders) / math.factorial(len(options)))
            published[name] += identity in orders
    rows: list[dict[str, Any]] = [
        {
            "convention": name,
            "items": len(p),
            "published": published[name],
            "rate": published[name] / len(p),
            "chance": sum(p) / len(p),
            "p_value": poisson_binomial_sf(published[name], p),
            "set_aside": name not in REPORTED_ONLY,
        }
        for name, p in probs.items()
        if p
    ]
    level = VERDICT_ALPHA / max(1, len(rows))
    return {
        "null_hypothesis": "the published option orders are shuffled: each is any of its "
        "item's orders with equal probability",
        "level": level,
        "ordered_by_convention": any(r["p_value"] <= level for r in rows),
        "conventions": rows,
    }


SUBJECT_LEVEL = 0.05
"""False-discovery rate of the per-subject flags (Benjamini-Hochberg over the subjects)."""


def _shared(records: Sequence[dict[str, Any]], items: Mapping[str, Any]) -> list[SharedOrders]:
    """The groups of ``records`` whose items share one option list in one order."""
    return shared_orders(
        records, {r["id"]: items[r["id"]].options for r in records if r["id"] in items}
    )


def subject_summary(
    records: Sequence[dict[str, Any]],
    natural_ids: Collection[str],
    alpha: float,
    items: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Which subjects stand out: per subject, the verdict's three tests (``p_values``: alg1,
    rank, gap) on its items without a natural option order, their Bonferroni-combined p-value
    (the smallest times the number computed), and Benjamini-Hochberg q-values over the
    subjects tested. None with fewer than two subjects.

    H0 per subject: no item of the subject was seen (its original orders are exchangeable with
    the others). A subject is flagged at q <= :data:`SUBJECT_LEVEL`: in expectation at most 5%
    of the flagged subjects are false, and when no subject was seen the chance that any is
    flagged is at most 5%."""
    from ..detectors import item_score_from_dict
    from ..detectors.membership import benjamini_hochberg

    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("subject"):
            groups.setdefault(str(r["subject"]), []).append(r)
    if len(groups) < 2:
        return None
    rows: list[dict[str, Any]] = []
    for subject, recs in sorted(groups.items()):
        kept = [r for r in recs if r["id"] not in natural_ids]
        tested = [item_score_from_dict(r) for r in kept]
        shared = _shared(kept, items or {})
        row: dict[str, Any] = {
            "subject": subject,
            "n_items": len(recs),
            "n_tested": len(tested),
            "alg1_rate": None,
            "alg1_chance": None,
            "rank_rate": None,
            "gap_mean": None,
            "p_values": None,
            "p_value": None,
            "p_floor": None,
            "q_value": None,
            "flagged": False,
        }
        if tested:
            stats = summarize(tested, alpha=alpha, shared=shared).to_dict()
            ps = {k: (stats.get(k) or {}).get("p_value") for k in ("alg1", "rank", "gap")}
            computed = [p for p in ps.values() if p is not None]
            row.update(
                n_tested=stats["n_items"],  # less any left out of the tests (shared lists)
                alg1_rate=stats["alg1"]["rate"],
                alg1_chance=stats["alg1"]["chance"],
                rank_rate=stats["rank"]["rate"],
                gap_mean=(stats.get("gap") or {}).get("mean"),
                p_values=ps,
                p_value=min(1.0, len(computed) * min(computed)) if computed else None,
                p_floor=subject_p_floor(tested, len(computed), shared) if computed else None,
            )
        rows.append(row)
    tested_rows = [r for r in rows if r["p_value"] is not None]
    qs = benjamini_hochberg([r["p_value"] for r in tested_rows])
    for r, q in zip(tested_rows, qs, strict=True):
        r["q_value"] = float(q)
        r["flagged"] = bool(q <= SUBJECT_LEVEL)
    # a subject whose smallest reachable p exceeds the level can never be flagged (q >= p)
    too_few = [r for r in tested_rows if (r["p_floor"] or 0.0) > SUBJECT_LEVEL]
    rows.sort(key=lambda r: (r["p_value"] is None, r["p_value"] or 0.0, r["subject"]))
    return {
        "null_hypothesis": "per subject: no item of the subject was seen, so each item's "
        "original option order is exchangeable with its other orders",
        "p_value": "the smallest of the subject's Algorithm-1 excess, rank-test count and "
        "mean-gap p-values times the number computed (Bonferroni), on its items without a "
        "natural option order",
        "adjustment": "Benjamini-Hochberg over the subjects tested: the flagged subjects hold at "
        "most 5% false ones in expectation; with no subject seen, the chance that any is flagged "
        "is at most 5%",
        "level": SUBJECT_LEVEL,
        "n_subjects": len(rows),
        "n_tested": len(tested_rows),
        "n_flagged": sum(r["flagged"] for r in rows),
        "n_too_few_items": len(too_few),
        "p_floor": "the smallest p-value the subject's tests could give on its items, whatever "
        "the model did: the number of tests times the product of 1/orders over its items, "
        "items sharing one option list in one order counted once (a subject above the level "
        "cannot be flagged, however its items rank)",
        "n_without_subject": sum(1 for r in records if not r.get("subject")),
        "subjects": rows,
    }


def subject_p_floor(
    items: Sequence[PermutationItemScore], n_tests: int, shared: Sequence[SharedOrders] = ()
) -> float:
    """A lower bound on the combined p-value a subject's ``n_tests`` tests could reach on
    ``items``, whatever the model did: each test's most extreme outcome (every original order
    ranked first and leaked) has probability at least the product of 1/orders under H0, and
    the combined p is the smallest times ``n_tests``; a group of items sharing one option list
    in one order (``shared``) is one draw, one factor. 0 (no bound) where the gap test is a
    t-test (records without their log-probs), whose p has no floor.

    >>> from contamscope.detectors.permutation import score_item
    >>> one = score_item([-1.0, -2.0, -3.0, -4.0, -5.0, -6.0], n_options=3, exhaustive=True)
    >>> round(subject_p_floor([one], 3), 3), subject_p_floor([one, one], 3)  # 3 x 1/6, 3 x 1/36
    (0.5, 0.08333333333333333)
    """
    if not all(it.gap_null for it in items):
        return 0.0
    once = {i for g in shared for i in (*g.members[1:], *g.left_out)}
    return min(
        1.0,
        n_tests * math.prod(1.0 / it.n_orders for i, it in enumerate(items) if i not in once),
    )


def build_summary(
    loaded: LoadResult,
    records: Sequence[dict[str, Any]],
    settings: dict[str, Any],
    config: PermutationConfig,
    model: dict[str, Any],
    timing: dict[str, Any],
    reference: Reference | None = None,
    conventions: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """summary.json: provenance, counts, the dataset-level statistics and the verdict, from the
    records alone (``model``: the backend's ``describe()``), so it can be rebuilt without
    loading the model. ``reference``: clean items scored by the same model
    (:func:`read_reference`), which give Algorithm 2 a measured false-positive rate;
    ``conventions``: :func:`convention_summary` of ``loaded.items`` where already computed."""
    from ..detectors import item_score_from_dict
    from ..detectors.stats import alg2_against_reference
    from ..detectors.verdict import verdict_dict

    included = [r for r in records if not r.get("excluded")]
    excluded = Counter(r["excluded"].split(":")[0] for r in records if r.get("excluded"))
    scores = [item_score_from_dict(r) for r in included]
    by_id = {it.id: it for it in loaded.items}
    stats = summarize(scores, alpha=config.alpha, shared=_shared(included, by_id)).to_dict()
    if reference is not None:
        for key, measured in alg2_against_reference(scores, reference.scores).items():
            stats["alg2"][key]["reference"] = measured
    natural = natural_order_summary(included, by_id, config.alpha)
    natural["conventions"] = (
        conventions if conventions is not None else convention_summary(loaded.items)
    )
    repeated = repeats([by_id[r["id"]] for r in included if r["id"] in by_id])
    return {
        "schema": "contamscope.permutation.summary/1",
        "contamscope_version": __version__,
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": model,
        "benchmark": {
            "source": loaded.source,
            "format": loaded.format,
            "content_hash": loaded.content_hash,
            "files": len(loaded.files),
            "selection": settings["selection"],
            **notes_entry(loaded.notes),  # e.g. labels the options carried, removed
        },
        "config": settings["config"] | {"alpha": config.alpha},
        "counts": {
            "items_loaded": len(loaded.items),
            "items_selected": len(records),
            "items_analysed": len(included),
            "excluded": dict(excluded),
            "rows_skipped": len(loaded.problems),
            "options_histogram": dict(sorted(Counter(r["n_options"] for r in records).items())),
            "repeats_analysed": len(repeated),
        },
        "skipped_rows": [str(p) for p in loaded.problems],
        "excluded_items": [
            {"id": r["id"], "reason": r["excluded"]} for r in records if r.get("excluded")
        ],
        "statistics": stats,
        "natural_order": natural,
        "verdict": verdict_dict(stats, natural, dict(excluded)),
        "by_subject": subject_summary(included, set(natural["ids"]), config.alpha, by_id),
        **(
            {"reference_run": reference_with_check(reference, included, by_id)} if reference else {}
        ),
        "timings": timing,
        "versions": package_versions(),
    }
