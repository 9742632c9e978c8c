"""The comparison of two membership runs (``contamscope compare`` on ``membership`` runs) as
table rows, Markdown and a self-contained HTML page: the paired AUC tests, both models' ROC
curves of benchmark against reference items, and an item table."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..detectors.verdict import p_text
from ..pipeline.compare_membership import STAT_NAMES
from ..wording import plural
from .html import Column, Section, Table
from .plots import BASE, HIGHLIGHT, figure, legend_outside, to_svg

__all__ = ["HEADER", "compare_html", "markdown", "note_lines", "rows"]

HEADER = ["statistic (AUC: benchmark vs references)", "items", "A", "B", "B - A", "95% CI"]
HEADER += ["p (two-sided)", "test"]


def rows(stats: dict[str, Any]) -> list[list[str]]:
    """One row per statistic tested: items, A's and B's AUC, B - A, its CI, p, test."""
    out = []
    for k in stats["metrics"]:
        r = stats[k]
        ci = r.get("ci")
        out.append(
            [
                f"{STAT_NAMES.get(k, k)} AUC",
                f"{r['n_benchmark']} + {r['n_reference']} ref.",
                f"{r['a']:.3f}",
                f"{r['b']:.3f}",
                f"{r['difference']:+.3f}",
                f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "–",
                p_text(r["two_sided"]),
                r["method"].split(" (")[0].removesuffix(" of the AUC difference")
                + " (paired AUCs)",
            ]
        )
    return out


def note_lines(result: dict[str, Any]) -> list[str]:
    """The lines printed under the table (and written under it in Markdown)."""
    from .compare import one_side_lines

    f, items, c = result["statistics"]["flags"], result["items"], result["counts"]
    out = [
        f"benchmark items flagged at each run's own level (conformal p against its references): "
        f"A {f['a']}, B {f['b']}; B only {f['b_only']}, A only {f['a_only']} (counted, not "
        "tested: the flags share their references)"
    ]
    out += one_side_lines(
        {"B": items["flagged_b_only"], "A": items["flagged_a_only"]},
        {"B": f["b_only"], "A": f["a_only"]},
        "flagged",
    )
    unpaired = [
        f"{plural(n, role + ' item')} only in {who.upper()}"
        for who in ("a", "b")
        for role in ("benchmark", "reference")
        if (n := c[f"only_{who}_{role}"])
    ]
    if unpaired:
        out.append("not paired: " + "; ".join(unpaired))
    return out


def markdown(result: dict[str, Any]) -> str:
    """The comparison as Markdown: runs, counts, the paired tests, notes and verdict."""
    from .compare import markdown_document

    c = result["counts"]
    return markdown_document(
        result,
        "contamscope compare (membership)",
        [
            f"benchmark: {result['benchmark']}; references: {result['reference']}",
            f"items scored in both: {c['benchmark']} benchmark, {c['reference']} reference",
        ],
    )


def _roc(x: list[float], y: list[float]) -> tuple[Any, Any]:
    """False- and true-positive rates of every threshold (flag: value >= threshold)."""
    xs, ys = np.sort(np.asarray(x))[::-1], np.asarray(y)
    thresholds = np.unique(np.r_[xs, ys])[::-1]
    tpr = [(xs >= t).mean() for t in thresholds]
    fpr = [(ys >= t).mean() for t in thresholds]
    return np.r_[0.0, fpr], np.r_[0.0, tpr]


def _figures(result: dict[str, Any]) -> list[str]:
    """Both models' ROC curves of the verdict's statistic (benchmark vs references)."""
    key = result["statistics"]["smallest"]
    items = result["paired_items"]
    with figure(5.6, 4.6) as (fig, ax):
        ax.plot([0, 1], [0, 1], color="#000", ls="--", lw=1, label="chance (AUC 0.5)")
        for who, color in (("a", BASE), ("b", HIGHLIGHT)):
            x = [it[f"{key}_{who}"] for it in items if it["role"] == "benchmark"]
            y = [it[f"{key}_{who}"] for it in items if it["role"] == "reference"]
            fpr, tpr = _roc(x, y)
            auc = result["statistics"][key][who]
            ax.step(
                fpr, tpr, where="post", color=color, lw=2, label=f"{who.upper()} (AUC {auc:.3f})"
            )
        ax.set(
            xlabel="share of reference items flagged",
            ylabel="share of benchmark items flagged",
            xlim=(-0.02, 1.02),
            ylim=(-0.02, 1.02),
        )
        ax.set_title(f"{STAT_NAMES.get(key, key)}: benchmark vs references, per model")
        legend_outside(ax)
        return [to_svg(fig, "ROC curves of both models, benchmark against reference items")]


def compare_html(result: dict[str, Any], page_size: int = 50) -> str:
    """The whole comparison as one self-contained HTML document."""
    from .compare import finish_page, verdict_section

    a, b, c = result["a"], result["b"], result["counts"]
    stats = result["statistics"]
    m = len(stats["tested"])
    verdict = verdict_section(
        result,
        "Each model's AUC is the probability that a benchmark item's statistic exceeds a "
        "reference item's; the two AUCs come from the same items, and DeLong's test uses their "
        "correlation (with fewer than 30 benchmark or 30 reference items, or where every "
        "item is placed alike, the paired swap test: docs/statistics.md). Two-sided"
        + (f"; the verdict's p is the smallest times {m} (Bonferroni)." if m > 1 else "."),
    )
    sections = [
        verdict,
        Section(
            "evidence",
            "Benchmark against references, per model",
            "<p class='note'>The further a model's curve lies above the diagonal, the better "
            "its statistic tells the benchmark from the reference items.</p>",
            _figures(result),
        ),
    ]
    tested = stats["tested"]
    columns = [Column("id", "item"), Column("role", "kind")]
    for k in tested:
        columns += [
            Column(f"{k}_a", f"A: {STAT_NAMES.get(k, k)}", "num"),
            Column(f"{k}_b", f"B: {STAT_NAMES.get(k, k)}", "num"),
        ]
    columns += [
        Column("p_a", "A: p", "p", "conformal p against A's references"),
        Column("p_b", "B: p", "p", "conformal p against B's references"),
        Column("flag_a", "A: flagged", "bool"),
        Column("flag_b", "B: flagged", "bool"),
    ]
    body = [
        [it["id"], it["role"]]
        + [round(it[f"{k}{s}"], 4) for k in tested for s in ("_a", "_b")]
        + [it["p_a"], it["p_b"], it["flag_a"], it["flag_b"]]
        for it in result["paired_items"]
    ]
    return finish_page(
        result,
        sections,
        Table("items", columns, body, page_size),
        ("a", "b", "benchmark", "reference", "config", "counts"),
        f"Compare (membership): {a['model']} (A) and {b['model']} (B)",
        f"{c['benchmark']} benchmark and {c['reference']} reference items scored in both. Does "
        "one model tell the benchmark from unseen text better?",
    )
