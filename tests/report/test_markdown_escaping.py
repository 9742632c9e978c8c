"""Names that Markdown would read as markup (a ``|`` in a file name, ``<script>`` in a model
spec) stay text in every Markdown file contamscope writes: parsed with markdown-it (the
CommonMark parser rich ships), each table keeps its columns and no HTML is left raw."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from markdown_it import MarkdownIt

from contamscope.pipeline import compare_runs
from contamscope.report import compare_benbench
from contamscope.report.leaderboard import (
    BaselineComparison,
    comparisons_markdown,
    comparisons_note,
)

MODEL = "hf:./m|<script>alert(1)</script>"
BENCH = "bench/a|<img src=x onerror=alert(2)>.csv"


def _parse(md: str) -> tuple[list[list[str]], list[str]]:
    """(the table rows, each a list of its cells' source text; the raw HTML the document
    holds)."""
    rows: list[list[str]] = []
    html: list[str] = []
    for t in MarkdownIt("commonmark").enable("table").parse(md):
        if t.type == "tr_open":
            rows.append([])
        elif t.type == "inline" and rows and t.level >= 3:  # a cell's text
            rows[-1].append(t.content)
        html += [t.content] if t.type == "html_block" else []
        html += [c.content for c in t.children or [] if c.type == "html_inline"]
    return rows, html


def test_the_baseline_comparisons_escape_names() -> None:
    row = BaselineComparison(
        baseline=MODEL,
        model=MODEL + "2",
        benchmark=BENCH,
        items=7,
        alg1_difference=0.0,
        gap_difference=0.159,
        p_value=0.703,
        p_holm=1.0,
        verdict="no difference",
        page="compare/m__a-b.csv.html",
    )
    md = f"{comparisons_note([row], markdown=True)}\n\n{comparisons_markdown([row], links=True)}"
    rows, html = _parse(md)
    assert html == []
    assert [len(r) for r in rows] == [9, 9]
    # each name whole in its own cell (the table's "\\|" reads back as "|")
    assert [c.replace("&lt;", "<") for c in rows[1][:2]] == [MODEL + "2", BENCH]
    assert rows[1][-1] == "[compare/m__a-b.csv.html](compare/m__a-b.csv.html)"
    # the numbers as compare writes them: a rate difference in points, p-values to 3 places
    # (a sweep's table had "+25.0%" and "0.75" beside compare's "+25.0 pp" and "0.750"; QA)
    again = comparisons_markdown([replace(row, alg1_difference=0.25, p_value=0.75)])
    assert "| +25.0 pp | +0.159 | 0.750 | 1.000 |" in again


def test_a_comparison_document_escapes_names(make_benbench_run: Callable[..., Path]) -> None:
    runs = [make_benbench_run(name, leaked=name == "b", seed=i) for i, name in enumerate("ab")]
    for run in runs:
        path = run / "summary.json"
        summary = json.loads(path.read_text())
        summary["model"]["spec"] = MODEL
        for split in summary["benchmark"].values():
            split["source"] = BENCH
        path.write_text(json.dumps(summary))
    md = compare_benbench.markdown(compare_runs(*runs))
    rows, html = _parse(md)
    assert html == []
    assert rows and len({len(r) for r in rows}) == 1
    assert f"`{MODEL}`" in md  # the model spec as code: shown as typed, never read as HTML


def test_a_leaderboard_legend_escapes_what_the_runs_say(
    make_membership_run: Callable[..., Path],
) -> None:
    """The Markdown leaderboard's legend lines wrote a run's statistic name raw (`min_k_pp<img
    src=x onerror=...>` in summary.json; security QA); its table cells were escaped."""
    from contamscope.report import collect
    from contamscope.report.leaderboard import to_markdown

    run = make_membership_run("m")
    path = run / "summary.json"
    summary = json.loads(path.read_text())
    summary["statistics"]["statistic"] = "min_k_pp<img src=x onerror=alert(1)>"
    path.write_text(json.dumps(summary))
    md = to_markdown(collect([run]))
    _, html = _parse(md)
    assert html == [] and "onerror" in md
