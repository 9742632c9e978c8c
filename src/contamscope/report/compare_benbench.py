"""The comparison of two BenBench runs (``contamscope compare`` on ``benbench`` runs) as table
rows, Markdown and a self-contained HTML page: the paired gap tests, the items' gaps under both
models (scatter per split, histogram of the differences), the splits and an item table."""

from __future__ import annotations

import math
from typing import Any

from ..detectors.compare import leaning
from ..detectors.verdict import p_text
from ..pipeline.compare_benbench import GAP_METRICS
from ..wording import pp_text
from .html import Column, Section, Table
from .plots import BASE, HIGHLIGHT, difference_bins, figure, legend_outside, to_svg

__all__ = ["HEADER", "compare_html", "markdown", "note_lines", "num_text", "rows"]

HEADER = ["gap (higher: more familiar with the original)", "items", "A", "B", "B - A", "95% CI"]
HEADER += ["p (two-sided)", "test"]

SHORT = {
    "nll": "NLL",
    "ngram_exact": "n-gram exact",
    "ngram_rouge": "n-gram ROUGE-L",
    "ngram_edit": "n-gram edit",
}


def num_text(x: float | None, signed: bool = False) -> str:
    """A number to 3 decimals ("-" for None), signed when asked; -0.000 shown as 0.000; one
    that 3 decimals would show as 0.000 to 2 significant digits (a difference of 0.0002 nats
    was "+0.000 [+0.000, +0.000]" beside p 8e-4; QA).

    >>> num_text(-0.0), num_text(0.00021, True), num_text(1.23456), num_text(-1e-05, True)
    ('0.000', '+0.00021', '1.235', '-0.000010')
    """
    if x is None:
        return "-"
    x = round(x, 9) + 0.0  # a sum's rounding error, and -0.0, shown as 0.000
    places = 3
    if x != 0 and abs(x) < 0.0005:  # fixed notation still (scientific stood among decimals)
        places = 1 - math.floor(math.log10(abs(x)))
    return f"{x:+.{places}f}" if signed else f"{x:.{places}f}"


def rows(stats: dict[str, Any]) -> list[list[str]]:
    """One row per gap tested: its name, items, A's and B's mean gap, B - A, CI, p, test.
    The n-gram gaps (differences of accuracies) are in percentage points, NLL's in nats."""
    out = []
    for k in stats["metrics"]:
        r = stats.get(k)
        if r is None:
            continue
        if k == "nll":
            a, b, diff = num_text(r["a"]), num_text(r["b"]), num_text(r["difference"], True)
            ci = f"[{num_text(r['ci'][0], True)}, {num_text(r['ci'][1], True)}]" if r["ci"] else "-"
        else:
            a, b, diff = pp_text(r["a"]), pp_text(r["b"]), pp_text(r["difference"])
            ci = f"[{pp_text(r['ci'][0], '')}, {pp_text(r['ci'][1], '')}] pp" if r["ci"] else "-"
        out.append(
            [
                GAP_METRICS[k],
                str(r["n_items"]),
                a,
                b,
                diff,
                ci,
                p_text(r["two_sided"]),
                r["method"],
            ]
        )
    return out


def _leaning(stats: dict[str, Any]) -> str:
    k = stats.get("smallest")
    if not k:
        return "nothing to compare"
    m = len(stats["tested"])
    toward = leaning(stats[k])
    return f"p = {p_text(stats['p_value'])} (smallest x {m}: {SHORT[k]}, toward {toward})"


def note_lines(result: dict[str, Any]) -> list[str]:
    """The lines printed under the table (and written under it in Markdown)."""
    from .compare import one_side_lines

    out = []
    c, stats = result["counts"], result["statistics"]
    if result["by_split"]:
        parts = []
        for split, s in result["by_split"].items():
            if split == result["tested_on"]:
                continue
            parts.append(f"{split} split ({s['n_items']} items): {_leaning(s)}")
        if parts:
            out.append(
                "; ".join(parts) + " (a difference on the train split alone is training on "
                "train, not contamination)"
            )
    f = stats["flags"]
    items = result["items"]
    line = (
        f"items whose {result['config'].get('k') or 'k'} n-grams are all predicted exactly "
        f"(BenBench's instance flag, on the original only): A {f['a']}, B {f['b']}"
    )
    if f["b_only"] or f["a_only"]:
        line += f"; B only {f['b_only']}, A only {f['a_only']}"
    out.append(line)
    out += one_side_lines(
        {"B": items["flagged_b_only"], "A": items["flagged_a_only"]},
        {"B": f["b_only"], "A": f["a_only"]},
        "flagged",
    )
    unpaired = [
        f"{n} {what}"
        for n, what in (
            (c["other_paraphrases"], "analysed from other paraphrases"),
            (c["no_paraphrase_a"], "without a usable paraphrase in A"),
            (c["no_paraphrase_b"], "without a usable paraphrase in B"),
        )
        if n
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
        "contamscope compare (BenBench)",
        [
            f"benchmark: {result['benchmark']}",
            f"items analysed in both from the same texts: {c['paired']} (only in A: "
            f"{c['only_a']}, only in B: {c['only_b']}); tested: {result['tested_on']}",
        ],
    )


def _figures(result: dict[str, Any]) -> list[str]:
    """Per item: B's gap against A's (above the diagonal: B more familiar with the original),
    per split; and the differences B - A of the verdict's gap."""
    items = result.get("paired_items") or []
    key = result["statistics"].get("smallest") or "nll"
    use = [it for it in items if it[f"{key}_a"] is not None and it[f"{key}_b"] is not None]
    if not use:
        return []
    figs = []
    with figure(6.4, 4.4) as (fig, ax):
        xs = [it[f"{key}_a"] for it in use] + [it[f"{key}_b"] for it in use]
        lo, hi = min(xs), max(xs)
        ax.plot([lo, hi], [lo, hi], color="#000", ls="--", lw=1, label="A = B (H0: either side)")
        for split, color, marker in (("test", HIGHLIGHT, "o"), ("train", BASE, "^")):
            pts = [it for it in use if it["split"] == split]
            if pts:
                ax.scatter(
                    [it[f"{key}_a"] for it in pts],
                    [it[f"{key}_b"] for it in pts],
                    s=16,
                    marker=marker,
                    color=color,
                    alpha=0.65,
                    label=f"{split} ({len(pts)})",
                )
        rest = [it for it in use if it["split"] not in ("test", "train")]
        if rest:
            ax.scatter(
                [it[f"{key}_a"] for it in rest],
                [it[f"{key}_b"] for it in rest],
                s=16,
                color="#777",
                alpha=0.6,
                label=f"other splits ({len(rest)})",
            )
        ax.axhline(0, color="#bbb", lw=0.8)
        ax.axvline(0, color="#bbb", lw=0.8)
        ax.set(xlabel=f"A: {GAP_METRICS[key]}", ylabel=f"B: {SHORT[key]} gap")
        ax.set_title(f"{SHORT[key]} gap per item (0: original as familiar as its paraphrases)")
        legend_outside(ax)
        figs.append(to_svg(fig, f"scatter of each item's {SHORT[key]} gap, A against B"))
    tested = [it for it in use if result["tested_on"] in (it["split"], "all paired items")]
    diffs = [it[f"{key}_b"] - it[f"{key}_a"] for it in tested]
    if diffs:
        mean = sum(diffs) / len(diffs)
        with figure(6.4, 3.6) as (fig, ax):
            ax.hist(diffs, bins=difference_bins(diffs), color=BASE, label="items")
            ax.axvline(0, color="#000", ls="--", lw=1.5, label="no difference")
            ax.axvline(mean, color=HIGHLIGHT, lw=2, label=f"mean ({mean:+.3f})")
            ax.set(xlabel=f"{SHORT[key]} gap of B − gap of A", ylabel="items")
            ax.yaxis.get_major_locator().set_params(integer=True)
            ax.set_title(
                f"{SHORT[key]} gap differences, {result['tested_on']} (right of 0: B more "
                "familiar)",
                fontsize=10,
            )
            ax.legend(fontsize=8)
            figs.append(to_svg(fig, f"histogram of {SHORT[key]} gap differences, B minus A"))
    return figs


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def compare_html(result: dict[str, Any], page_size: int = 50) -> str:
    """The whole comparison as one self-contained HTML document."""
    from .compare import finish_page, not_paired, verdict_section

    a, b, c = result["a"], result["b"], result["counts"]
    stats = result["statistics"]
    m = len(stats.get("tested") or [])
    verdict = verdict_section(
        result,
        "Each item's gap is its original's value against the mean of its paraphrases', signed "
        "so that higher is more familiar with the original; it cancels what a model's general "
        "skill does to both versions. Tests: sign-flip randomization tests of the summed gap "
        f"differences, two-sided, on the {result['tested_on']} items; the verdict's p is the "
        f"smallest times {m} (Bonferroni).",
    )
    sections = [
        verdict,
        Section(
            "evidence",
            "Items under both models",
            "<p class='note'>Each point is an item analysed by both models from the same "
            "original and paraphrases: above the diagonal, B is more familiar with the "
            "original wording than A is. Under H0 the points lie on either side of the "
            "diagonal alike, and the differences centre on 0.</p>",
            _figures(result),
        ),
    ]
    if result["by_split"]:
        split_rows = []
        for split, s in result["by_split"].items():
            for k in s["metrics"]:
                r = s.get(k)
                if r is not None:
                    split_rows.append(
                        [split, SHORT[k], r["n_items"], _rounded(r["difference"]), r["two_sided"]]
                    )
        table = Table(
            "splits",
            [
                Column("split", "split"),
                Column("gap", "gap"),
                Column("n", "items", "int"),
                Column("d", "B − A", "num"),
                Column("p", "p (two-sided)", "p", "sign-flip test, this split's items"),
            ],
            split_rows,
            page_size=page_size,
        )
        sections.append(
            Section(
                "splits",
                "By split",
                "<p class='note'>The verdict reads the test split. A difference on the train "
                "split alone means one model trained on the train split, which is not "
                "contamination; the paper's contrast of the splits, within one model, is in "
                "each run's own report.</p>",
                after=table.html(),
            )
        )
    metrics = [
        k for k in GAP_METRICS if any(it[f"{k}_a"] is not None for it in result["paired_items"])
    ]
    columns = [Column("id", "item"), Column("split", "split")]
    for k in metrics:
        columns += [
            Column(f"{k}_a", f"A: {SHORT[k]} gap", "num"),
            Column(f"{k}_b", f"B: {SHORT[k]} gap", "num"),
        ]
    columns += [Column("flag_a", "A: flagged", "bool"), Column("flag_b", "B: flagged", "bool")]
    item_rows = [
        [it["id"], it["split"]]
        + [_rounded(it[f"{k}{s}"]) for k in metrics for s in ("_a", "_b")]
        + [it["flag_a"], it["flag_b"]]
        for it in result["paired_items"]
    ]
    item_table = Table("items", columns, item_rows, page_size=page_size)
    return finish_page(
        result,
        sections,
        item_table,
        ("a", "b", "benchmark", "config", "counts", "same_model"),
        f"Compare (BenBench): {a['model']} (A) and {b['model']} (B)",
        f"{c['paired']} items analysed in both from the same texts"
        + not_paired(
            [
                (c["only_a"], "only in A"),
                (c["only_b"], "only in B"),
                (c["other_paraphrases"], "analysed from other paraphrases"),
                (c["no_paraphrase_a"], "without a usable paraphrase in A"),
                (c["no_paraphrase_b"], "without a usable paraphrase in B"),
            ]
        )
        + ". Is one model more familiar with the original wording than with its paraphrases?",
    )
