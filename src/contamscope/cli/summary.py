"""Readable terminal summary of a permutation run (reads only the summary dict)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from .common import console, styled

__all__ = ["print_permutation_summary", "verdict"]

VERDICT_ALPHA = 0.05


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ci(pair: list[float] | None, pct: bool = True) -> str:
    if not pair:
        return "-"
    return f"[{_pct(pair[0])}, {_pct(pair[1])}]" if pct else f"[{pair[0]:.3g}, {pair[1]:.3g}]"


def _p(p: float | None) -> str:
    if p is None:
        return "-"
    return "<1e-300" if p == 0 else (f"{p:.2e}" if p < 1e-3 else f"{p:.3f}")


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
    ones.
    """
    if natural and natural.get("n_items"):
        rest = natural.get("statistics_without") or {}
        reasons = ", ".join(natural.get("reasons") or {})
        flagged = (
            f"Algorithm 1 flags {_pct(natural['alg1_rate'])} of them "
            f"({natural['alg1_count']}; chance {_pct(natural['alg1_chance'])}), which a "
            "clean model's preference for the natural order explains"
        )
        if not rest.get("n_items"):
            return None, (
                f"nothing testable: all {natural['n_items']} analysed items have a natural option "
                f"order ({reasons}), for which H0 fails without any leak; {flagged}"
            )
        signal, sentence = verdict(rest)
        return signal, (
            f"{sentence}. {natural['n_items']} items with a natural option order ({reasons}) "
            f"are set aside: {flagged}"
        )
    if not stats.get("n_items"):
        return None, "no items analysed"
    ps = {
        "Algorithm-1 excess": (stats.get("alg1") or {}).get("p_value"),
        "rank-test count": (stats.get("rank") or {}).get("p_value"),
        "mean-gap test": (stats.get("gap") or {}).get("p_value"),
    }
    tested = {k: v for k, v in ps.items() if v is not None}
    level = VERDICT_ALPHA / max(1, len(tested))
    hits = [k for k, v in tested.items() if v <= level]
    if hits:
        return True, (
            f"LEAKAGE SIGNAL: the original option order is favoured beyond chance "
            f"({', '.join(hits)}; each p <= {level:.3g}, 5% overall)"
        )
    return False, (
        f"no evidence of leakage at 5% overall (smallest p = "
        f"{_p(min(tested.values()) if tested else None)}); absence of evidence is not "
        "proof of absence"
    )


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
        f"(excluded: {excl}; rows skipped: {counts['rows_skipped']})",
    )
    console.print(head)
    if not stats.get("n_items"):
        console.print(styled("yellow", "no items analysed"))
        return
    natural = summary.get("natural_order")
    scope = (
        f"; all {stats['n_items']} analysed items, as the paper counts them"
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
        f"{_pct(a1['rate'])} ({a1['count']})",
        _ci(a1["rate_ci"]),
        _pct(a1["null_expected"]),
        _p(a1["p_value"]),
    )
    t.add_row("  excess over chance", _pct(a1["excess"]), _ci(a1["excess_ci"]), "0.0%", "")
    r = stats["rank"]
    t.add_row(
        f"Rank test: items with p <= {r['alpha']:g}",
        f"{_pct(r['rate'])} ({r['count']})",
        _ci(r["rate_ci"]),
        _pct(r["expected"]),
        _p(r["p_value"]),
    )
    g = stats["gap"]
    if g["mean"] is not None:
        t.add_row(
            f"Mean log-prob gap (original - others; {g.get('method') or 't-test'})",
            f"{g['mean']:+.3f} nats",
            _ci(g["ci"], pct=False),
            "0",
            _p(g["p_value"]) if g["p_value"] is not None else g["reason"],
        )
    for key, d in stats["alg2"].items():
        t.add_row(
            f"Algorithm 2 (paper), delta {key}: max is an outlier",
            f"{_pct(d['rate'])} ({d['count']})",
            _ci(d["rate_ci"]),
            "unknown*",
            "",
        )
        t.add_row(
            "  ... and the max is the original order",
            f"{_pct(d['anchored_rate'])} ({d['anchored_count']})",
            "",
            _pct(d["anchored_null_expected"]),
            _p(d["anchored_p_value"]),
        )
    console.print(t)
    if stats["alg2"]:
        console.print(
            styled(
                "dim",
                "* Algorithm 2 ignores which order is the original, so its false-positive "
                "rate cannot be estimated from the same items; the anchored row has an exact null.",
            )
        )
    if natural and natural.get("n_items"):
        rest = natural["statistics_without"]
        if rest.get("n_items"):
            a = rest["alg1"]
            console.print(
                f"Without the {natural['n_items']} naturally ordered items: Algorithm 1 "
                f"{_pct(a['rate'])} ({a['count']} of {rest['n_items']}; expected under H0 "
                f"{_pct(a['null_expected'])}, p = {_p(a['p_value'])})"
            )
    signal, sentence = verdict(stats, natural)
    colour = "yellow" if signal is None else "red" if signal else "green"
    console.print(styled(f"bold {colour}", f"{sentence}"))
    tm = summary["timings"]
    if tm.get("items_per_second"):
        console.print(
            styled(
                "dim",
                f"scored {tm['items_scored_now']} items in {tm['scoring_seconds']:.1f} s "
                f"({tm['items_per_second']:.2f} items/s); {tm['scores_from_cache']} scores from cache",
            )
        )
