"""The comparison of two permutation runs (``contamscope compare``) as text, Markdown and a
self-contained HTML page: the paired tests, the items' values under both models (scatter of the
share of orders beaten, histogram of gap differences), the subjects and an item table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import __version__
from ..detectors.verdict import p_text, pct_text
from ..paths import write_text_atomic
from .html import Column, Section, Table, esc, page
from .plots import BASE, HIGHLIGHT, figure, legend_outside, to_svg

__all__ = [
    "HEADER",
    "compare_html",
    "markdown",
    "markdown_document",
    "note_lines",
    "rows",
    "table",
    "tests_table",
    "write_compare",
]


def _signed(x: float | None, pct: bool) -> str:
    if x is None:
        return "-"
    return f"{x:+.1%}" if pct else f"{x:+.3f}"


def _ci(ci: list[float] | None, pct: bool) -> str:
    if not ci:
        return "-"
    return f"[{_signed(ci[0], pct)}, {_signed(ci[1], pct)}]"


def rows(stats: dict[str, Any]) -> list[list[str]]:
    """The three paired tests as table rows: statistic, A, B, B - A, its CI, p, test."""
    a1, sh, gp = stats["alg1"], stats["share"], stats["gap"]
    return [
        [
            "Algorithm 1: original is the max",
            f"{pct_text(a1['a'])} ({a1['a_count']})",
            f"{pct_text(a1['b'])} ({a1['b_count']})",
            _signed(a1["difference"], True),
            _ci(a1["ci"], True),
            p_text(a1["two_sided"]),
            f"McNemar: {a1['b_only']} B only, {a1['a_only']} A only",
        ],
        [
            "Share of other orders the original beats",
            f"{sh['a']:.3f}",
            f"{sh['b']:.3f}",
            _signed(sh["difference"], False),
            _ci(sh["ci"], False),
            p_text(sh["two_sided"]),
            sh["method"],
        ],
        [
            "Mean gap, original - others (nats)",
            f"{gp['a']:.3f}",
            f"{gp['b']:.3f}",
            _signed(gp["difference"], False),
            _ci(gp["ci"], False),
            p_text(gp["two_sided"]),
            gp["method"],
        ],
    ]


HEADER = ["statistic", "A", "B", "B - A", "95% CI", "p (two-sided)", "test"]


def note_lines(result: dict[str, Any]) -> list[str]:
    """The lines printed under the table (and written under it in Markdown)."""
    c = result["counts"]
    out = []
    wn = result.get("without_natural")
    if wn and wn.get("n_items"):
        out.append(
            f"Without the {c['natural_order']} items with a natural option order "
            f"({wn['n_items']} items): Algorithm 1 {_signed(wn['alg1']['difference'], True)} "
            f"(p = {p_text(wn['alg1']['two_sided'])}), share "
            f"{_signed(wn['share']['difference'], False)} (p = {p_text(wn['share']['two_sided'])}), "
            f"gap {_signed(wn['gap']['difference'], False)} (p = {p_text(wn['gap']['two_sided'])})"
        )
    subj = result.get("by_subject")
    if subj:
        flagged = [r for r in subj["rows"] if r["flagged"]]
        if flagged:
            shown = ", ".join(
                f"{r['subject']} (toward {r['toward']}, q = {p_text(r['q_value'])})"
                for r in flagged[:5]
            )
            more = f" and {len(flagged) - 5} more" if len(flagged) > 5 else ""
            out.append(
                f"by subject (Benjamini-Hochberg, 5% false discoveries): {shown}{more} "
                f"of {len(subj['rows'])} differ"
            )
        else:
            out.append(
                "by subject (Benjamini-Hochberg, 5% false discoveries): none of "
                f"{len(subj['rows'])} subjects differs"
            )
    items = result["items"]
    for key, who in (("alg1_b_only", "B"), ("alg1_a_only", "A")):
        n = result["statistics"]["alg1"][f"{who.lower()}_only"]
        if n:
            ids = ", ".join(items[key][:8]) + (" ..." if n > 8 else "")
            out.append(f"original ranked first by {who} only ({n}): {ids}")
    return out


def _md(x: str) -> str:
    return x.replace("|", "\\|")


def markdown_document(result: dict[str, Any], title: str, facts: list[str]) -> str:
    """A comparison as Markdown: ``title``, the two runs, ``facts`` (bullets), H0, the table of
    :func:`table`, the lines under it and the verdict."""
    a, b = result["a"], result["b"]
    header, body, notes = table(result)
    out = [
        f"# {title}",
        "",
        f"- A: `{_md(a['model'])}` ({_md(a['run'])})",
        f"- B: `{_md(b['model'])}` ({_md(b['run'])})",
        *(f"- {_md(x)}" for x in facts),
        f"- H0: {result['null_hypothesis']}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    out += ["| " + " | ".join(_md(x) for x in row) + " |" for row in body]
    out.append("")
    out += [f"{_md(line)}  " for line in notes]
    v = result["verdict"]
    out += ["", f"**{v['label']}**: {_md(v['text'])}", ""]
    return "\n".join(out)


def markdown(result: dict[str, Any]) -> str:
    """The comparison as Markdown: runs, counts, the paired tests, notes and verdict."""
    c = result["counts"]
    return markdown_document(
        result,
        "contamscope compare",
        [
            f"benchmark: {result['benchmark']} (template {result['template']})",
            f"items scored in both: {c['paired']} (only in A: {c['only_a']}, only in B: "
            f"{c['only_b']}, under other orders: {c['other_orders']})",
        ],
    )


def _figures(items: list[dict[str, Any]]) -> list[str]:
    """Per item: B's share of orders beaten against A's (above the diagonal: B favours the
    published order more), and the gap differences B - A."""
    if not items:
        return []
    figs = []
    natural = [it for it in items if it["natural_order"]]
    other = [it for it in items if not it["natural_order"]]
    with figure(6.4, 4.4) as (fig, ax):
        ax.plot([0, 1], [0, 1], color="#000", ls="--", lw=1, label="A = B (H0: either side)")
        ax.scatter(
            [it["share_a"] for it in other],
            [it["share_b"] for it in other],
            s=14,
            color=BASE,
            alpha=0.6,
            label=f"items ({len(other)})",
        )
        if natural:
            ax.scatter(
                [it["share_a"] for it in natural],
                [it["share_b"] for it in natural],
                s=18,
                marker="^",
                color=HIGHLIGHT,
                alpha=0.8,
                label=f"natural option order ({len(natural)})",
            )
        ax.set(
            xlabel="A: share of other orders the original beats",
            ylabel="B: share of other orders the original beats",
            xlim=(-0.03, 1.03),
            ylim=(-0.03, 1.03),
        )
        ax.set_title("Share of orders beaten, per item")
        legend_outside(ax)
        figs.append(to_svg(fig, "scatter of the share of orders beaten, A against B"))
    diffs = [it["gap_b"] - it["gap_a"] for it in items]
    mean = sum(diffs) / len(diffs)
    with figure(6.4, 3.6) as (fig, ax):
        ax.hist(diffs, bins=min(60, max(10, len(diffs) // 10)), color=BASE, label="items")
        ax.axvline(0, color="#000", ls="--", lw=1.5, label="no difference")
        ax.axvline(mean, color=HIGHLIGHT, lw=2, label=f"mean ({mean:+.2f})")
        ax.set(xlabel="gap of B − gap of A (nats)", ylabel="items")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_title(
            "Gap differences (right of 0: B favours the published order more)", fontsize=10
        )
        ax.legend(fontsize=8)
        figs.append(to_svg(fig, "histogram of gap differences, B minus A"))
    return figs


def tests_table(result: dict[str, Any]) -> str:
    """The table of :func:`table` as HTML."""
    header, body, _ = table(result)
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    cells = "".join("<tr>" + "".join(f"<td>{esc(x)}</td>" for x in row) + "</tr>" for row in body)
    return (
        "<div class='scroll'><table class='stats'><thead><tr>"
        f"{head}</tr></thead><tbody>{cells}</tbody></table></div>"
    )


def compare_html(result: dict[str, Any], page_size: int = 50) -> str:
    """The whole comparison as one self-contained HTML document."""
    a, b, c, v = result["a"], result["b"], result["counts"], result["verdict"]
    items = result.get("paired_items") or []
    notes = "".join(f"<li>{esc(line)}</li>" for line in note_lines(result))
    verdict = (
        f"<p class='verdict'><strong>{esc(v['label'])}</strong>: {esc(v['text'])}</p>"
        f"<p class='note'>H0: {esc(result['null_hypothesis'])}. Tests: McNemar's exact test for "
        "Algorithm 1, sign-flip randomization tests for the share of orders beaten and the gap; "
        "two-sided; the verdict's p is the smallest times 3 (Bonferroni).</p>"
        + tests_table(result)
        + (f"<ul>{notes}</ul>" if notes else "")
    )
    sections = [
        Section("verdict", "Verdict", verdict),
        Section(
            "evidence",
            "Items under both models",
            "<p class='note'>Each point is an item scored by both models under the same orders: "
            "above the diagonal, B favours the item's published order more than A does. Under "
            "H0 the points lie on either side of the diagonal alike, and the gap differences "
            "centre on 0.</p>",
            _figures(items),
        ),
    ]
    subj = result.get("by_subject")
    if subj:
        table = Table(
            "subjects",
            [
                Column("subject", "subject"),
                Column("n", "items", "int"),
                Column("alg1", "Algorithm 1, B − A", "pct"),
                Column("share", "share beaten, B − A", "num"),
                Column("gap", "gap, B − A (nats)", "num"),
                Column("p", "p", "p", "smallest of the three paired p-values x 3"),
                Column("q", "q (BH)", "p", "Benjamini-Hochberg over the subjects"),
                Column("toward", "toward"),
                Column("flagged", "differs", "bool", "q <= 0.05"),
            ],
            [
                [
                    r["subject"],
                    r["n_items"],
                    r["alg1_difference"],
                    round(r["share_difference"], 4),
                    round(r["gap_difference"], 4),
                    r["p_value"],
                    r["q_value"],
                    r["toward"],
                    r["flagged"],
                ]
                for r in subj["rows"]
            ],
            page_size=page_size,
            sort=(5, True),
        )
        sections.append(
            Section(
                "subjects",
                "By subject",
                f"<p class='note'>H0 {esc(subj['null_hypothesis'])}; {esc(subj['p_value'])}. "
                "Flagged at q <= 0.05.</p>",
                after=table.html(),
            )
        )
    item_table = Table(
        "items",
        [
            Column("id", "item"),
            Column("subject", "subject"),
            Column("alg1_a", "A: original first", "bool"),
            Column("alg1_b", "B: original first", "bool"),
            Column("share_a", "A: share beaten", "num"),
            Column("share_b", "B: share beaten", "num"),
            Column("gap_a", "A: gap", "num"),
            Column("gap_b", "B: gap", "num"),
            Column("gap_d", "gap B − A", "num"),
            Column("natural", "natural order", "bool"),
        ],
        [
            [
                it["id"],
                it["subject"],
                it["alg1_a"],
                it["alg1_b"],
                round(it["share_a"], 4),
                round(it["share_b"], 4),
                round(it["gap_a"], 4),
                round(it["gap_b"], 4),
                round(it["gap_b"] - it["gap_a"], 4),
                it["natural_order"],
            ]
            for it in items
        ],
        page_size=page_size,
        sort=(8, False),
    )
    sections.append(Section("items", "All paired items", "", after=item_table.html()))
    prov = {k: result[k] for k in ("a", "b", "benchmark", "template", "counts", "same_model")}
    sections.append(
        Section(
            "provenance",
            "Provenance",
            f"<details><summary>runs compared</summary><pre>"
            f"{esc(json.dumps(prov, indent=2, ensure_ascii=False))}</pre></details>",
        )
    )
    title = f"Compare: {a['model']} (A) and {b['model']} (B) on {result['benchmark']}"
    subtitle = (
        f"A: <code>{esc(a['run'])}</code>, B: <code>{esc(b['run'])}</code>; {c['paired']} items "
        "scored in both. Is one model more drawn to the published option orders?"
    )
    footer = (
        f"Generated by contamscope {esc(__version__)} from the two run folders only; "
        "self-contained, works offline."
    )
    return page(title, subtitle, sections, footer)


def _module(result: dict[str, Any]) -> Any:
    """The report module of a BenBench or membership comparison; None for permutation."""
    if result.get("method") == "benbench":
        from . import compare_benbench

        return compare_benbench
    if result.get("method") == "membership":
        from . import compare_membership

        return compare_membership
    return None


def table(result: dict[str, Any]) -> tuple[list[str], list[list[str]], list[str]]:
    """The comparison's table (header, rows) and the lines under it, for any method."""
    other = _module(result)
    if other is not None:
        return other.HEADER, other.rows(result["statistics"]), other.note_lines(result)
    return HEADER, rows(result["statistics"]), note_lines(result)


def write_compare(result: dict[str, Any], out: Path) -> Path:
    """Write ``result`` (a permutation, BenBench or membership comparison) to ``out`` by its
    suffix: .json (everything), .md or .html."""
    suffix = out.suffix.lower()
    if suffix == ".json":
        return write_text_atomic(out, json.dumps(result, indent=1) + "\n")
    other = _module(result)
    if other is not None:
        text = other.markdown(result) if suffix == ".md" else other.compare_html(result)
        return write_text_atomic(out, text)
    return write_text_atomic(out, markdown(result) if suffix == ".md" else compare_html(result))
