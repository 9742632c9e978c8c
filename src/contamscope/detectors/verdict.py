"""The permutation test's dataset verdict: the three calibrated tests, Bonferroni-corrected.

Pure function of a summary's ``statistics`` (and its ``natural_order`` block); the pipeline stores
its result in summary.json as ``verdict``, the terminal summary and the report show it.
"""

from __future__ import annotations

from typing import Any

from ..wording import all_of, plural, reason_counts

__all__ = [
    "VERDICT_ALPHA",
    "conventions_text",
    "counted_items",
    "few_items_text",
    "p_text",
    "pct_text",
    "shared_text",
    "verdict",
    "verdict_dict",
    "verdict_p_value",
    "verdict_tests",
]

VERDICT_ALPHA = 0.05
"""Overall level of the dataset verdict (split over the tests by Bonferroni)."""


def pct_text(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def p_text(p: float | None) -> str:
    if p is None:
        return "-"
    return "<1e-300" if p == 0 else (f"{p:.2e}" if p < 1e-3 else f"{p:.3f}")


def verdict_tests(stats: dict[str, Any]) -> tuple[dict[str, float | None], float]:
    """The verdict's three tests' p-values (None: not computed) and the Bonferroni level each
    must reach for 5% overall."""
    ps = {
        "Algorithm-1 excess": (stats.get("alg1") or {}).get("p_value"),
        "rank-test count": (stats.get("rank") or {}).get("p_value"),
        "mean-gap test": (stats.get("gap") or {}).get("p_value"),
    }
    return ps, VERDICT_ALPHA / max(1, sum(v is not None for v in ps.values()))


def verdict_p_value(stats: dict[str, Any]) -> float | None:
    """The verdict's p-value: the smallest of its tests' times their number (Bonferroni), at
    most 1; at or below 5% exactly where :func:`verdict` finds a leakage signal. None when no
    test was computed.

    >>> verdict_p_value({"alg1": {"p_value": 0.02}, "rank": {"p_value": 0.3}, "gap": {}})
    0.04
    """
    ps = [p for p in verdict_tests(stats)[0].values() if p is not None]
    return min(1.0, len(ps) * min(ps)) if ps else None


def verdict(
    stats: dict[str, Any], natural: dict[str, Any] | None = None
) -> tuple[bool | None, str]:
    """Dataset verdict from the three calibrated tests, Bonferroni-corrected at 5% overall.

    H0 for all three: no order of any item was seen, so the original order is exchangeable with
    the others. Returns (signal, sentence); signal is None when there is nothing to test.

    With ``natural`` (the summary's ``natural_order`` block), items whose published order is a
    natural one (sorted numbers, a fixed truth-table block, ...) are set aside: H0 fails for them
    without any leak, since a model that never saw them may prefer the natural order too. The
    verdict then rests on the other items and says how often Algorithm 1 flagged the set-aside
    ones. A leakage signal on a benchmark whose published orders follow writers' conventions
    beyond chance (the block's ``conventions``) says so: conventions no rule detects can favour
    the published order without any leak.
    """
    signal, sentence = _verdict(stats, natural)
    shown = conventions_text(natural, 2)
    if signal and shown:
        sentence += (
            f". But this benchmark's authors ordered options by convention ({shown}), and "
            "conventions no rule detects (the stages of a process, severity scales) favour the "
            "published order without any leak; a test against fresh items written the same way "
            "(contamscope membership --reference) tells the two apart"
        )
    return signal, sentence


def conventions_text(natural: dict[str, Any] | None, limit: int | None = None) -> str:
    """``sorted numbers: 838 of 1,261 items, 66.5% against 8.3% if shuffled; ...``: the
    conventions a benchmark orders its options by beyond chance (the ``natural_order`` block's
    ``conventions``), strongest first, at most ``limit``; an empty string when there are none."""
    found = (natural or {}).get("conventions") or {}
    if not found.get("ordered_by_convention"):
        return ""
    rows = [r for r in found["conventions"] if r["p_value"] <= found["level"]]
    rows.sort(key=lambda r: r["rate"] / r["chance"], reverse=True)
    return "; ".join(
        f"{r['convention']}: {r['published']:,} of {r['items']:,} items, "
        f"{pct_text(r['rate'])} against {pct_text(r['chance'])} if shuffled"
        for r in rows[:limit]
    )


def _verdict(
    stats: dict[str, Any], natural: dict[str, Any] | None = None
) -> tuple[bool | None, str]:
    if natural and natural.get("n_items"):
        rest = natural.get("statistics_without") or {}
        reasons = ", ".join(natural.get("reasons") or {})
        n, count = int(natural["n_items"]), int(natural["alg1_count"])
        chance = f"chance {pct_text(natural['alg1_chance'])}"
        flagged = (  # no flag needs no explaining
            f"Algorithm 1 flags {pct_text(natural['alg1_rate'])} of "
            f"{'it' if n == 1 else 'them'} ({count}; {chance}), which a clean model's preference "
            "for the natural order can explain"
            if count
            else f"Algorithm 1 {'does not flag it' if n == 1 else 'flags none of them'} ({chance})"
        )
        if not rest.get("n_items"):
            return None, (
                f"nothing testable: {all_of(n, 'analysed item')} "
                f"{'has' if n == 1 else 'have'} a natural option order ({reasons}), for which H0 "
                f"fails without any leak; {flagged}"
            )
        signal, sentence = _verdict(rest)
        return signal, (
            f"{sentence}. {plural(natural['n_items'], 'item')} with a natural option order ({reasons}) "
            f"{'is' if natural['n_items'] == 1 else 'are'} set aside: {flagged}"
        )
    if not stats.get("n_items"):
        return None, "no items analysed"
    ps, level = verdict_tests(stats)
    tested = {k: v for k, v in ps.items() if v is not None}
    hits = [k for k, v in tested.items() if v <= level]
    if hits:
        return True, (
            f"LEAKAGE SIGNAL: the original option order is favoured beyond chance "
            f"({', '.join(hits)}; each p <= {level:.3g}, 5% overall)"
        )
    bar = (
        f", above the {level:.3g} each of the {len(tested)} tests must reach"
        if len(tested) > 1
        else ""
    )  # a p of 0.023 read as below 5% (journey)
    return False, (
        f"no evidence of leakage at 5% overall (smallest p = "
        f"{p_text(min(tested.values()) if tested else None)}{bar}); absence of evidence is not "
        "proof of absence"
    )


def verdict_dict(
    stats: dict[str, Any],
    natural: dict[str, Any] | None = None,
    excluded: dict[str, int] | None = None,
) -> dict[str, Any]:
    """:func:`verdict` as summary.json stores it: ``label`` (``leakage signal``, ``no evidence``
    or ``nothing to test``), ``signal`` (True/False/None), ``reasoning`` and ``alpha``. With no
    item analysed, the reasoning says why: ``excluded``, each reason's count (integrator QA).

    >>> verdict_dict({"n_items": 0}, None, {"a NaN log-prob": 3})["reasoning"]
    'no items analysed: all 3 excluded (a NaN log-prob: 3)'
    """
    signal, sentence = verdict(stats, natural)
    if not stats.get("n_items") and excluded:
        sentence += f": all {sum(excluded.values())} excluded ({reason_counts(excluded)})"
    label = {True: "leakage signal", False: "no evidence", None: "nothing to test"}[signal]
    return {"label": label, "signal": signal, "reasoning": sentence, "alpha": VERDICT_ALPHA}


LINE_LABELS = {
    "signal": "leakage signal",
    "clean": "no evidence",
    "inconclusive": "inconclusive",
    "none": "nothing to test",
}
"""The labels of the BenBench and membership verdict lines' kinds (``verdict_line`` of
:mod:`contamscope.report.benbench` and :mod:`contamscope.report.membership`)."""


def line_verdict(line: tuple[str, str] | None) -> dict[str, Any] | None:
    """A BenBench or membership verdict line ``(kind, sentence)`` as summary.json stores the
    permutation test's (:func:`verdict_dict`): ``label``, ``signal`` (True/False, None when
    inconclusive or nothing to test), ``reasoning`` and ``alpha``. The terminal printed a
    verdict that the summary did not hold (output-files QA).

    >>> line_verdict(("clean", "no evidence on test: ..."))["label"]
    'no evidence'
    """
    if line is None:
        return None
    kind, sentence = line
    signal = {"signal": True, "clean": False}.get(kind)
    return {
        "label": LINE_LABELS[kind],
        "signal": signal,
        "reasoning": sentence,
        "alpha": VERDICT_ALPHA,
    }


def shared_text(stats: dict[str, Any], natural: dict[str, Any] | None = None) -> str:
    """The sentence that says which items the verdict's tests count as one draw (items sharing
    one option list in one order, the ``shared_orders`` block of the statistics it tests); ""
    when none do.

    >>> shared_text({"shared_orders": {"n_items": 5, "n_groups": 1, "largest": 5, "n_left_out": 0}})
    '5 items share one option list in one order: the tests count them as one draw of its published order, not as 5 (the intervals as one cluster)'
    """
    scope = ""
    if natural and natural.get("n_items"):
        stats = natural.get("statistics_without") or {}
        scope = "of the items the verdict tests, "
    block = stats.get("shared_orders")
    if not block:
        return ""
    n, g, left = block["n_items"], block["n_groups"], block.get("n_left_out") or 0
    if g == 1:
        text = f"{n} items share one option list in one order: the tests count " + (
            f"them as one draw of its published order, not as {n} (the intervals as one cluster)"
            if not left
            else f"{n - left} of them as one draw of its published order and leave out the "
            f"{left} scored under other sampled orders, from the counts too"
        )
    else:
        text = (
            f"{n:,} items share an option list in one order with another item ({g:,} lists, "
            f"up to {block['largest']} items each): the tests count each list as one draw of "
            "its published order, the intervals as one cluster"
        )
        if left:
            text += (
                f"; {plural(left, 'item')} scored under other sampled orders than the rest of "
                f"{'its' if left == 1 else 'their'} list {'is' if left == 1 else 'are'} left "
                "out of the tests and of the counts"
            )
    return scope + text


def counted_items(stats: dict[str, Any]) -> str:
    """``all 15 analysed items``, or where some were left out of the tests (items of a shared
    option list scored under other sampled orders), how many the statistics read.

    >>> counted_items({"n_items": 4, "shared_orders": {"n_left_out": 2}})
    '4 analysed items (2 more left out: scored under other sampled orders than the rest of their option list)'
    """
    left = (stats.get("shared_orders") or {}).get("n_left_out") or 0
    if not left:
        return all_of(stats["n_items"], "analysed item")
    return (
        f"{plural(stats['n_items'], 'analysed item')} ({left} more left out: scored under other "
        f"sampled orders than the rest of {'its' if left == 1 else 'their'} option list)"
    )


def few_items_text(block: dict[str, Any]) -> str:
    """The sentence a by-subject summary adds when some subjects could not have been flagged
    at all (their tests cannot reach a p-value at the level on so few items); "" otherwise.

    >>> few_items_text({"n_too_few_items": 3, "n_tested": 4, "level": 0.05})
    '3 of the 4 subjects have too few items to be flagged whatever the model did (their tests cannot reach p ≤ 0.05)'
    """
    few = block.get("n_too_few_items") or 0
    if not few:
        return ""
    who = (
        "The subject has"
        if block["n_tested"] == 1
        else f"{few} of the {block['n_tested']} subjects {'has' if few == 1 else 'have'}"
    )
    return (
        f"{who} too few items to be flagged whatever the model did (their tests cannot reach "
        f"p ≤ {block['level']:g})"
    )
