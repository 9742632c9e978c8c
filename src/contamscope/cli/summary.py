"""Readable terminal summary of a permutation run (reads only the summary dict)."""

from __future__ import annotations

import math
from typing import Any

from ..detectors.verdict import (
    counted_items,
    few_items_text,
    p_text,
    pct_text,
    shared_text,
    verdict,
    verdict_tests,
)
from ..wording import plural
from .common import Table, console, styled

__all__ = ["print_permutation_summary", "verdict"]


def _ci(pair: list[float] | None, pct: bool = True) -> str:
    if not pair:
        return "-"
    return (
        f"[{pct_text(pair[0])}, {pct_text(pair[1])}]"
        if pct
        else f"[{pair[0]:+.2f}, {pair[1]:+.2f}]"  # nats: .3g wrote [-2.09, 2.3]
    )


def _excluded_now(timings: dict[str, Any]) -> str:
    """`` (2 of them excluded, not scored)`` when this run excluded items (summaries before
    ``items_excluded_now`` do not say)."""
    n = timings.get("items_excluded_now") or 0
    return f" ({n} of them excluded, not scored)" if n else ""


def excluded_clause(counts: dict[str, Any]) -> str:
    """``"; excluded: 1 longer than the model's context window"`` from a role's or split's
    counts, or nothing: membership and BenBench said only "4 analysed of 5" (QA)."""
    excluded = counts.get("excluded")
    if not isinstance(excluded, dict) or not excluded:
        return ""
    return "; excluded: " + ", ".join(f"{v} {k}" for k, v in excluded.items())


def print_permutation_summary(summary: dict[str, Any]) -> None:
    stats = summary["statistics"]
    counts = summary["counts"]
    head = Table.grid(padding=(0, 2))
    head.add_row("model", str(summary["model"]["spec"]))
    head.add_row(
        "benchmark", f"{summary['benchmark']['source']} ({summary['benchmark']['format']})"
    )
    excl = ", ".join(f"{v} {k}" for k, v in counts["excluded"].items()) or "none"
    head.add_row(
        "items",
        f"{counts['items_analysed']} analysed of {counts['items_selected']} selected "
        f"(excluded: {excl}; rows skipped: {counts['rows_skipped']}"
        + (f"; repeats: {counts['repeats_analysed']}" if counts.get("repeats_analysed") else "")
        + ")",
    )
    console.print(head)
    if not stats.get("n_items"):
        console.print(styled("yellow", "no items analysed"))
        return
    natural = summary.get("natural_order")
    scope = (
        f"; {counted_items(stats)}, naturally ordered ones included, as in the paper"
        if natural and natural.get("n_items")
        else ""
    )
    t = Table(
        title="Option-permutation test (H0: the original order is exchangeable with the others"
        f"{scope})",
        title_justify="left",
    )
    for col in ("statistic", "observed", "95% CI", "expected under H0", "p-value"):
        t.add_column(col, justify="left" if col == "statistic" else "right")
    a1 = stats["alg1"]
    t.add_row(
        "Algorithm 1: original is the max",
        f"{pct_text(a1['rate'])} ({a1['count']})",
        _ci(a1["rate_ci"]),
        pct_text(a1["null_expected"]),
        p_text(a1["p_value"]),
    )
    t.add_row("  excess over chance", pct_text(a1["excess"]), _ci(a1["excess_ci"]), "0.0%", "")
    r = stats["rank"]
    t.add_row(
        f"Rank test: items with p <= {r['alpha']:g}",
        f"{pct_text(r['rate'])} ({r['count']})",
        _ci(r["rate_ci"]),
        pct_text(r["expected"]),
        p_text(r["p_value"]),
    )
    g = stats["gap"]
    if g["mean"] is not None:
        null = g.get("null_range")
        t.add_row(  # the randomization test's own null range, not a t interval beside its p
            "Mean gap, original - others" + ("" if null else f" ({g.get('method') or 't-test'})"),
            f"{g['mean']:+.3f} nats",
            "-**" if null else _ci(g["ci"], pct=False),
            f"0 {_ci(null, pct=False)}**" if null else "0",
            p_text(g["p_value"]) if g["p_value"] is not None else g["reason"],
        )
    for key, d in stats["alg2"].items():
        ref = d.get("reference")
        t.add_row(
            f"Algorithm 2 (paper), delta {key}: max an outlier",
            f"{pct_text(d['rate'])} ({d['count']})",
            _ci(d["rate_ci"]),
            f"{pct_text(ref['reference_rate'])} on clean†" if ref else "unknown*",
            p_text(ref["p_value"]) if ref else "",
        )
        t.add_row(
            "  ... and the max is the original order",
            f"{pct_text(d['anchored_rate'])} ({d['anchored_count']})",
            "",
            pct_text(d["anchored_null_expected"]),
            p_text(d["anchored_p_value"]),
        )
    console.print(t)
    floor = _rank_floor(summary)
    if floor is not None and float(stats.get("alpha", 0.05)) < floor[0]:  # silent 0% (journey)
        console.print(
            styled(
                "yellow",
                "note:",
                f" --alpha {float(stats['alpha']):g} is below the smallest rank p-value any item "
                f"here can have (1/{floor[1]:,} = {floor[0]:.3g}, the original order being the "
                "best of all its scored orders): the rank test cannot flag an item at this level",
            ),
            soft_wrap=True,
        )
    if g.get("null_range"):
        console.print(
            styled(
                "dim",
                "** where 95% of mean gaps fall when the original order is just one of the "
                f"orders (H0); the gap (nats) and its p-value: {g.get('method')} test. Its 95% "
                "CI, a t interval (cluster-robust where items share an option list; "
                "approximate, and beside the exact p-value it could contradict it), is in "
                "summary.json (statistics.gap.ci).",
            )
        )
    measured = [(k, d["reference"]) for k, d in stats["alg2"].items() if d.get("reference")]
    if stats["alg2"] and len(measured) < len(stats["alg2"]):
        console.print(
            styled(
                "dim",
                "* Algorithm 2 ignores which order is the original, so its false-positive "
                "rate cannot be estimated from the same items; the anchored row has an exact null.",
            )
        )
    if measured:
        run = summary.get("reference_run") or {}
        rates = "; ".join(
            f"delta {k}: {r['reference_count']} of {r['reference_n']}, 95% CI {_ci(r['reference_ci'])}"
            for k, r in measured
        )
        console.print(
            styled(
                "dim",
                f"† Algorithm 2's false-positive rate measured on clean reference items "
                f"({run.get('run')}, {run.get('benchmark')}): {rates}. p: Fisher's exact test "
                "that the benchmark's rate is higher (H0: its items are like the references).",
            ),
            soft_wrap=True,
        )
        from .membership import likeness_text

        unlike = likeness_text(run.get("check"))
        if unlike:
            console.print(styled("yellow", "references unlike the benchmark:", f" {unlike}"))
        elif run.get("check_skipped"):
            console.print(
                styled("dim", f"the references' likeness was not checked: {run['check_skipped']}")
            )
    if natural and natural.get("n_items"):
        rest = natural["statistics_without"]
        if rest.get("n_items"):
            a = rest["alg1"]
            others = [  # the verdict's other two tests: it quoted their p, shown nowhere (journey)
                f"{name} p = {p_text(v)}"
                for name, v in verdict_tests(rest)[0].items()
                if name != "Algorithm-1 excess" and v is not None
            ]
            console.print(
                f"Without the {plural(natural['n_items'], 'naturally ordered item')} (what the "
                f"verdict tests): Algorithm 1 {pct_text(a['rate'])} ({a['count']} of "
                f"{rest['n_items']}; expected under H0 {pct_text(a['null_expected'])}, p = "
                f"{p_text(a['p_value'])})" + "".join(f"; {x}" for x in others)
            )
    shared = shared_text(stats, natural)
    if shared:
        console.print(shared[0].upper() + shared[1:])
    signal, sentence = verdict(stats, natural)
    colour = "yellow" if signal is None else "red" if signal else "green"
    console.print(styled(f"bold {colour}", f"{sentence}"))
    line = subject_line(summary.get("by_subject"))
    if line:
        console.print(line)
    tm = summary["timings"]
    if tm.get("items_per_second"):
        earlier = "the run that scored them " if "reanalysed_records" in tm else ""
        console.print(
            styled(
                "dim",
                f"{earlier}finished {plural(tm['items_scored_now'], 'item')}{_excluded_now(tm)} in "
                f"{tm['scoring_seconds']:.1f} s ({tm['items_per_second']:.2f} items/s); "
                f"{tm['scores_from_cache']} scores from cache",
            )
        )


def _rank_floor(summary: dict[str, Any]) -> tuple[float, int] | None:
    """(smallest per-item rank p-value any analysed item can have, its number of scored
    orders): 1 over the most orders an item has (k! up to --max-exhaustive options, else the
    Monte Carlo orders plus the original); None when unknown."""
    config = summary.get("config") or {}
    sizes = [int(k) for k in (summary["counts"].get("options_histogram") or {})]
    if not sizes:
        return None
    cap = int(config.get("max_exhaustive", 6))
    orders = max(
        math.factorial(k) if k <= cap else int(config.get("mc_orders", 719)) + 1 for k in sizes
    )
    return 1 / orders, orders


def _deciding_test(row: dict[str, Any]) -> str:
    """The test of a subject's row with the smallest p-value, its reading and that p, then
    '; ' (a subject flagged by its mean gap was named with its Algorithm-1 rate; QA)."""
    ps = {k: v for k, v in (row.get("p_values") or {}).items() if v is not None}
    best = min(ps, key=lambda k: ps[k]) if ps else "alg1"
    reading = {
        "alg1": lambda: (
            f"Algorithm 1 {pct_text(row['alg1_rate'])} vs {pct_text(row['alg1_chance'])} by chance"
        ),
        "rank": lambda: f"rank test {pct_text(row['rank_rate'])} of items",
        "gap": lambda: f"mean gap {row['gap_mean']:+.2f} nats",
    }[best]()
    return f"{reading}, p = {p_text(ps[best])}; " if ps else f"{reading}, "


def subject_line(block: dict[str, Any] | None, shown: int = 5) -> str | None:
    """One line on which subjects stand out (summary.json's ``by_subject``), or None for a run
    of one subject.

    A subject is named with the test that gave its smallest p-value (the one its Bonferroni
    p-value rests on):

    >>> row = {"subject": "anatomy", "alg1_rate": 0.5, "alg1_chance": 1 / 24, "rank_rate": 0.5,
    ...        "gap_mean": 0.41, "p_values": {"alg1": 0.002, "rank": 0.004, "gap": 0.01},
    ...        "q_value": 0.002, "flagged": True}
    >>> subject_line({"n_tested": 3, "n_flagged": 1, "subjects": [row]})
    'by subject (Benjamini-Hochberg, 5% false discoveries): 1 of 3 subjects flagged: anatomy (Algorithm 1 50.0% vs 4.2% by chance, p = 0.002; q = 0.002)'
    >>> row["p_values"]["gap"] = 0.001
    >>> subject_line({"n_tested": 3, "n_flagged": 1, "subjects": [row]}).split(": ", 2)[2]
    'anatomy (mean gap +0.41 nats, p = 0.001; q = 0.002)'
    """
    if not block:
        return None
    head = "by subject (Benjamini-Hochberg, 5% false discoveries): "
    few = few_items_text(block)
    few = f". {few}" if few else ""
    if not block["n_flagged"]:
        return f"{head}none of {plural(block['n_tested'], 'subject')} tested stands out{few}"
    flagged = [r for r in block["subjects"] if r["flagged"]]
    named = ", ".join(f"{r['subject']} ({_deciding_test(r)}q = {p_text(r['q_value'])})"
                      for r in flagged[:shown])  # fmt: skip
    more = (
        f" and {len(flagged) - shown} more (summary.json by_subject)"
        if len(flagged) > shown
        else ""
    )
    return (
        f"{head}{block['n_flagged']} of {plural(block['n_tested'], 'subject')} flagged: "
        f"{named}{more}{few}"
    )
