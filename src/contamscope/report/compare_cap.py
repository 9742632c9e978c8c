"""The comparison of two CAP runs (``contamscope compare`` on ``cap`` runs) as table rows,
Markdown and a self-contained HTML page: the paired tests of the difference in leans toward the
tested split (M - C, tested; PCR, reported), both models' M, C and PCR per split, and an item
table."""

from __future__ import annotations

from typing import Any

from ..detectors.verdict import p_text
from ..pipeline.compare_cap import READER_NAMES
from .compare_benbench import num_text
from .html import Column, Section, Table
from .plots import BASE, HIGHLIGHT, figure, legend_outside, to_svg

__all__ = ["HEADER", "compare_html", "markdown", "note_lines", "rows"]

HEADER = ["lean toward the tested split", "items", "A", "B", "B - A", "95% CI"]
HEADER += ["p (two-sided)", "test"]


def rows(stats: dict[str, Any]) -> list[list[str]]:
    """Two rows per test (reader and tested split): the lean of M - C (tested) and of PCR (the
    paper's scale, reported): items, each model's lean, B - A, CI, p, test."""
    ref = stats.get("reference_split") or "reference"
    out = []
    for k in stats["metrics"]:
        reader, split = k.split("/", 1)
        r = stats[k]
        for stat, name in (
            ("excess", f"(M - C)_{split} - (M - C)_{ref}, {READER_NAMES[reader]}"),
            ("pcr", f"PCR_{split} - PCR_{ref}, {READER_NAMES[reader]} (not in the verdict)"),
        ):
            t = r[stat]
            ci = (
                f"[{num_text(t['ci'][0], True)}, {num_text(t['ci'][1], True)}]"
                if t.get("ci")
                else "-"
            )
            out.append(
                [
                    name,
                    f"{r['n_reference']} + {r['n_other']}",
                    num_text(r["a"][f"lean_{stat}"], True),
                    num_text(r["b"][f"lean_{stat}"], True),
                    num_text(t["difference"], True),
                    ci,
                    p_text(t["two_sided"]) if t["two_sided"] is not None else "-",
                    t["method"],
                ]
            )
    return out


def _levels(r: dict[str, Any], who: str) -> str:
    s = r[who]
    return " / ".join(
        f"M {num_text(s[part]['m'])} C {num_text(s[part]['c'])} PCR {num_text(s[part]['pcr'])}"
        for part in ("reference", "other")
    )


def note_lines(result: dict[str, Any]) -> list[str]:
    """The lines printed under the table (and written under it in Markdown)."""
    stats, c, ref = result["statistics"], result["counts"], result["reference_split"]
    out = []
    for k in stats["metrics"]:
        reader, split = k.split("/", 1)
        r = stats[k]
        out.append(
            f"{READER_NAMES[reader]}, {ref} / {split}: A {_levels(r, 'a')}; B {_levels(r, 'b')}"
        )
    moved = result["items"]["largest_excess_increase"]
    if moved["items"]:
        shown = ", ".join(x["id"] for x in moved["items"][:8])
        out.append(
            f"{moved['split']} items whose performance outruns consistency more under B "
            f"({READER_NAMES[moved['reader']]}; M - C rose): {shown}"
            + (" ..." if len(moved["items"]) > 8 else "")
        )
    unpaired = [
        f"{n} {what}"
        for n, what in (
            (c["only_a"], "analysed only in A"),
            (c["only_b"], "analysed only in B"),
            (c["other_modifications"], "analysed from other modified inputs"),
        )
        if n
    ]
    if unpaired:
        out.append("not paired: " + "; ".join(unpaired))
    return out


def _facts(result: dict[str, Any]) -> list[str]:
    c = result["counts"]
    per = ", ".join(f"{s} {n}" for s, n in c["by_split"].items())
    cfg = result["config"]
    return [
        f"benchmark: {result['benchmark']} (task {result['task']}; reference split "
        f"{result['reference_split']}; PCR = {cfg['scale']}((M+{cfg['alpha']:g})/"
        f"(C+{cfg['alpha']:g})))",
        f"items analysed in both from the same texts: {c['paired']} ({per})",
    ]


def markdown(result: dict[str, Any]) -> str:
    """The comparison as Markdown: runs, counts, the paired tests, notes and verdict."""
    from .compare import markdown_document

    return markdown_document(result, "contamscope compare (CAP)", _facts(result))


def _figures(result: dict[str, Any]) -> list[str]:
    """M, C and PCR per split and model, for the reader and split of the verdict's test."""
    stats = result["statistics"]
    key = stats.get("smallest") or stats["metrics"][0]
    r = stats[key]
    reader, split = key.split("/", 1)
    ref = result["reference_split"]
    with figure(7.2, 3.4, ncols=3) as (fig, axes):
        for ax, part in zip(axes, ("m", "c", "pcr"), strict=True):
            for j, (who, color) in enumerate((("a", BASE), ("b", HIGHLIGHT))):
                vals = [r[who]["reference"][part], r[who]["other"][part]]
                ax.bar(
                    [x + 0.38 * j for x in (0, 1)],
                    vals,
                    width=0.36,
                    color=color,
                    label=f"{who.upper()} ({result[who]['model']})",
                )
            if part != "pcr":  # rates: from 0 (two 0 bars drew -0.04 to 0.04; HTML QA)
                ax.set_ylim(0, 1.05)
            ax.set_xticks([0.19, 1.19], [ref, split])
            ax.set_title({"m": "M (performance)", "c": "C (consistency)", "pcr": "PCR"}[part])
        legend_outside(axes[-1])
        fig.suptitle(f"{READER_NAMES[reader]}: each model's {ref} and {split}", fontsize=10)
        return [to_svg(fig, f"bars of M, C and PCR on {ref} and {split} for A and B")]


def compare_html(result: dict[str, Any], page_size: int = 50) -> str:
    """The whole comparison as one self-contained HTML document."""
    from .compare import finish_page, verdict_section

    a, b, c = result["a"], result["b"], result["counts"]
    m = len(result["statistics"].get("tested") or [])
    ref = result["reference_split"]
    verdict = verdict_section(
        result,
        f"Each model's lean is M - C (or PCR) on the tested split minus the same on {ref}; "
        "B - A is the difference in differences. The verdict reads M - C: PCR's tanh saturates "
        "near 1, so its difference is reported only. The swap test exchanges A's and B's "
        "readings item by item; the interval is a paired bootstrap's. Two-sided"
        + (f"; the verdict's p is the smallest times {m} (Bonferroni)." if m > 1 else "."),
    )
    sections = [
        verdict,
        Section(
            "evidence",
            "M, C and PCR per split",
            "<p class='note'>Training on a split raises its M (right answers) more than its C "
            "(the same answer after the consistency-preserving edit), so its PCR rises.</p>",
            _figures(result),
        ),
    ]
    items = result["paired_items"]
    readers = [r for r in READER_NAMES if any(it[f"{r}_m_a"] is not None for it in items)]
    columns = [Column("id", "item"), Column("split", "split")]
    for r in readers:
        short = "gen" if r == "generate" else "ll"
        columns += [
            Column(f"{r}_{v}_{w}", f"{w.upper()}: {v.upper()} ({short})", "num")
            for w in ("a", "b")
            for v in ("m", "c")
        ]
    body = [
        [it["id"], it["split"]]
        + [it[f"{r}_{v}_{w}"] for r in readers for w in ("a", "b") for v in ("m", "c")]
        for it in items
    ]
    return finish_page(
        result,
        sections,
        Table("items", columns, body, page_size),
        ("a", "b", "benchmark", "task", "reference_split", "tested_splits", "config", "counts"),
        f"Compare (CAP): {a['model']} (A) and {b['model']} (B)",
        f"{c['paired']} items analysed in both from the same texts. Does one model lean further "
        f"toward a tested split, relative to {ref}?",
    )
