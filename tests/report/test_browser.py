"""The report in a real browser: headless Chromium, no console errors, figures and table work.

Skips with a reason where Debian's ``chromium`` is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contamscope.report import ReportOptions, build_report, write_leaderboard
from contamscope.report.browser import check_page, find_chromium

pytestmark = pytest.mark.skipif(
    find_chromium() is None,
    reason="chromium not installed (Debian package 'chromium'; .ci/run installs it): "
    "browser tests of the HTML report skipped",
)

PROBES = {
    "figures": 'document.querySelectorAll("svg.fig").length',
    "sections": 'Array.from(document.querySelectorAll("section")).map(s => s.id)',
    "rows_on_page": 'document.querySelectorAll("#items tbody tr").length',
    "count": 'document.querySelector("#items .tbl-count").textContent',
    "page": 'document.querySelector("#items .tbl-page").textContent',
    # search for one id: exactly one row left
    "search": """(() => { const i = document.querySelector('#items input');
        i.value = 'subj3-45'; i.dispatchEvent(new Event('input'));
        const n = document.querySelectorAll('#items tbody tr').length;
        const first = document.querySelector('#items tbody td').textContent;
        i.value = ''; i.dispatchEvent(new Event('input')); return [n, first]; })()""",
    # sort by gap, descending (two clicks): first row holds the largest gap
    "sorted_gap": """(() => { const th = document.querySelector('#items th[data-col="4"]');
        th.click(); th.click();
        return document.querySelector('#items tbody tr').children[4].textContent; })()""",
    "next_page": """(() => { document.querySelector('#items button[data-go="1"]').click();
        return document.querySelector('#items .tbl-page').textContent; })()""",
}


def test_report_renders_without_errors(make_run, tmp_path: Path) -> None:
    run = make_run(n_items=120, labels_in_records=True)
    path = build_report(run, options=ReportOptions(page_size=50))
    shot = tmp_path / "report.png"
    res = check_page(path, probes=PROBES, screenshot=shot)
    assert res.errors == []
    assert res.probes["figures"] == 2 + 8 + 2  # rank, gap, 8 cases, ROC + PR
    assert res.probes["sections"] == [
        "verdict", "subjects", "evidence", "cases", "validation", "items", "provenance"
    ]  # fmt: skip
    assert res.probes["rows_on_page"] == 50
    assert res.probes["count"] == "120 of 120 rows"
    assert res.probes["page"] == "page 1 of 3"
    assert res.probes["search"] == [1, "subj3-45"]
    records = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    top_gap = max(r["gap"] for r in records if not r.get("excluded"))
    assert res.probes["sorted_gap"] == f"{top_gap:.3f}"
    assert res.probes["next_page"] == "page 2 of 3"
    assert shot.stat().st_size > 20_000 and shot.read_bytes()[:4] == b"\x89PNG"
    assert res.ready_ms is not None and res.ready_ms < 10_000


def test_large_report_opens_in_seconds(make_run, tmp_path: Path) -> None:
    run = make_run(n_items=14_042, leaked_every=50)
    path = build_report(run)
    res = check_page(path, probes={"count": PROBES["count"]}, screenshot=tmp_path / "large.png")
    assert res.errors == []
    assert res.probes["count"] == "14042 of 14042 rows"
    # measured about 0.5-0.7 s on a 2-core CPU; allow for a loaded CI machine
    assert res.ready_ms is not None and res.ready_ms < 8_000, res.ready_ms


def test_leaderboard_renders_without_errors(make_run, tmp_path: Path) -> None:
    a = make_run("a", n_items=24, leaked_every=2)
    b = make_run("b", n_items=24, leaked_every=1000)
    out = tmp_path / "lb.html"
    write_leaderboard([a, b], out)
    res = check_page(
        out,
        probes={
            "figures": 'document.querySelectorAll("svg.fig").length',
            "rows": 'document.querySelectorAll("#board tbody tr").length',
        },
        screenshot=tmp_path / "leaderboard.png",
    )
    assert res.errors == []
    assert res.probes == {"figures": 1, "rows": 1}  # same model name twice: one row, 2 columns


def test_a_board_of_seven_models_has_a_readable_chart(make_run, tmp_path: Path) -> None:
    """With 7 models the bar chart was shrunk into half the page (text about 7 px high) and
    its legend covered the bars; now it takes the row at its own size, the legend beside the
    axes, and on a phone it scrolls in its own box instead of shrinking to 5 px."""
    runs = []
    for m in range(7):
        for b in range(3):
            run = make_run(f"m{m}_b{b}", n_items=12, seed=10 * m + b)
            s = json.loads((run / "summary.json").read_text())
            s["model"].update(spec=f"hf:/models/model-{m}", fingerprint=f"synthetic:{m}")
            s["benchmark"]["source"] = f"/data/bench{b}_test.csv"
            (run / "summary.json").write_text(json.dumps(s))
            runs.append(run)
    out = tmp_path / "lb.html"
    write_leaderboard(runs, out)
    probes = {
        "text_px": """Math.min(...[...document.querySelectorAll('svg.fig text')]
            .map(t => t.getBoundingClientRect().height).filter(h => h > 0))""",
        "legend_clear": """(() => { const svg = document.querySelector('svg.fig');
            const legend = svg.querySelector('g[class^=legend]').getBoundingClientRect().left;
            const bars = [...svg.querySelectorAll('g[class^=axes] > g[class^=patch]')]
                .map(g => g.getBoundingClientRect().right);
            return legend >= Math.max(...bars) - 1; })()""",
        "page_scrolls": "document.documentElement.scrollWidth > window.innerWidth",
        "tip": "document.querySelector('#board tbody tr td:nth-child(2)').title",
    }
    wide = check_page(out, probes=probes)
    assert wide.errors == []
    assert wide.probes["text_px"] >= 10 and wide.probes["legend_clear"] is True
    # a pivot cell's tooltip says whose and which cell it is (it repeated the cell's text)
    assert wide.probes["tip"] == "hf:model-0 · bench0_test.csv"
    phone = check_page(out, probes=probes, width=400)
    assert phone.probes["text_px"] >= 7 and phone.probes["page_scrolls"] is False


def test_a_script_error_is_caught(tmp_path: Path) -> None:
    """The check itself works: a page that throws is reported, not passed."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    res = check_page(bad, timeout=20)
    assert any("undefinedFunction" in e for e in res.errors)


def test_report_tables_sort_ranks_as_numbers_search_shown_text_and_fit_a_phone(
    make_run, tmp_path: Path
) -> None:
    """The rank column sorts by the number (8/24 before 22/24), the search finds what a cell
    shows ("yes" of the Algorithm-1 column), and at a 400-pixel viewport the page does not
    scroll sideways (wide tables scroll in their own box, figures shrink)."""
    run = make_run(n_items=60)
    path = build_report(run, options=ReportOptions(page_size=100))
    records = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    flagged = sum(1 for r in records if r.get("alg1"))
    probes = {
        "ranks": """(() => { const th = document.querySelector('#items th[data-col="2"]');
            th.click();
            return Array.from(document.querySelectorAll('#items tbody tr'))
              .map(r => r.children[2].textContent); })()""",
        "yes": """(() => { const i = document.querySelector('#items input');
            i.value = 'yes'; i.dispatchEvent(new Event('input'));
            const n = document.querySelectorAll('#items tbody tr').length;
            i.value = ''; i.dispatchEvent(new Event('input')); return n; })()""",
        "page_width": "document.documentElement.scrollWidth",
        "figure_width": 'document.querySelector("svg.fig").getBoundingClientRect().width',
    }
    res = check_page(path, probes=probes, width=400, height=900)
    assert res.errors == []
    shown = [int(x.split("/")[0]) for x in res.probes["ranks"] if x != "–"]
    assert len(shown) == sum(1 for r in records if not r.get("excluded"))
    assert shown == sorted(shown) and len(set(shown)) > 1
    # "yes" only appears in the Alg. 1 / Alg. 2 columns; every Algorithm-1 flag is found
    assert res.probes["yes"] >= flagged > 0
    assert res.probes["page_width"] <= 400
    assert 0 < res.probes["figure_width"] <= 400


def test_text_opening_an_html_comment_keeps_the_table(make_run, tmp_path: Path) -> None:
    """`<!--` in an item's text was written `<\\!--` into the table's JSON, which is not JSON:
    a SyntaxError left the items table (and every table after it) empty."""
    run = make_run(n_items=12)
    lines = (run / "items.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["excluded"] = "options not exchangeable: option D says 'see <!-- note -->' </script>"
    lines[0] = json.dumps(first)
    (run / "items.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    path = build_report(run)
    probes = {
        "count": PROBES["count"],
        "cell": """Array.from(document.querySelectorAll('#items td'))
            .map(td => td.textContent).find(t => t.includes('see <!--')) || null""",
    }
    res = check_page(path, probes=probes)
    assert res.errors == []
    assert res.probes["count"] == "12 of 12 rows"
    assert "'see <!-- note -->' </script>" in res.probes["cell"]


def test_headers_sort_from_the_keyboard_and_ids_sort_by_their_numbers(
    make_run, tmp_path: Path
) -> None:
    """Headers could not be reached with Tab (mouse-only sorting), and text sorted digit by
    digit: subj0-14 before subj0-7, a final answer 160 before 18."""
    run = make_run(n_items=60, n_excluded=0)
    path = build_report(run, options=ReportOptions(page_size=100))
    probes = {
        "sorted": """(() => { const th = document.querySelector('#items th[data-col="0"]');
            th.focus();
            th.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}));
            const ids = Array.from(document.querySelectorAll('#items tbody tr'))
              .map(r => r.children[0].textContent).filter(t => t.startsWith('subj0-'));
            return [document.activeElement === th, th.getAttribute('aria-sort'), ids]; })()""",
    }
    res = check_page(path, probes=probes)
    assert res.errors == []
    focused, aria, ids = res.probes["sorted"]
    assert focused and aria == "ascending"
    numbers = [int(x.split("-")[1]) for x in ids]
    assert numbers == sorted(numbers) and numbers[:3] == [0, 7, 14]


def test_chinese_item_text_is_tagged_as_chinese(make_run, tmp_path: Path) -> None:
    """The page is English (lang="en"), so browsers drew Chinese questions with Japanese glyph
    forms and screen readers read them with an English voice."""
    run = make_run(n_items=12, n_excluded=0)
    lines = (run / "items.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    for r in recs:
        r["prefix"] = "下列有关鳃弓的描述，错误的是：\n"
    recs[0]["gap"] = -123456.0  # numbers are written as Python writes them: 1.235e+05
    (run / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    path = build_report(run)
    probes = {
        "cells": """Array.from(document.querySelectorAll('#items tbody td'))
            .filter(td => /[\\u4e00-\\u9fff]/.test(td.textContent))
            .map(td => td.getAttribute('lang'))""",
        "other": """Array.from(document.querySelectorAll('#items tbody td'))
            .filter(td => !/[\\u4e00-\\u9fff]/.test(td.textContent))
            .map(td => td.getAttribute('lang')).filter(x => x !== null)""",
        "captions": """Array.from(document.querySelectorAll('#cases figcaption [lang]'))
            .map(e => e.getAttribute('lang'))""",
        "page": "document.documentElement.lang",
        "big": """Array.from(document.querySelectorAll('#items tbody td'))
            .map(td => td.textContent).filter(t => t.includes('e+'))""",
    }
    res = check_page(path, probes=probes)
    assert res.errors == []
    assert res.probes["cells"] and set(res.probes["cells"]) == {"zh"}
    assert res.probes["other"] == []
    assert res.probes["captions"] and set(res.probes["captions"]) == {"zh"}
    assert res.probes["page"] == "en"
    assert res.probes["big"] == ["-1.235e+05"]


def test_table_cells_round_as_the_terminal_does(tmp_path: Path) -> None:
    """A table's numbers are formatted in the browser; exact halves (an exact test's p of
    13/16 = 0.8125) showed 0.813 there and 0.812 in the terminal, the CSV's neighbours and
    every other surface (JavaScript's toFixed rounds halves up, Python to even)."""
    from contamscope.report.html import Column, Section, Table, fmt_p, fmt_pct, page
    from contamscope.wording import number

    values = [0.8125, 0.0625, 0.1875, 0.4375, 0.3, 0.05, 0.0125, 0.5, 0.9995, 0.0015, 1.0]
    numbers = [*values, -0.0625, -2.5625, 1000.25, 1000.75, 12.3456, -0.0125]
    table = Table(
        "t",
        [Column("p", "p", "p"), Column("pct", "pct", "pct"), Column("num", "num", "num")],
        [[v, v, x] for v, x in zip(values + values[: len(numbers) - len(values)], numbers)],
        page_size=100,
    )
    path = tmp_path / "t.html"
    path.write_text(page("t", "", [Section("s", "s", "", after=table.html())], ""))
    probe = """Array.from(document.querySelectorAll('[data-table="t"] tbody tr'))
        .map(r => Array.from(r.children).map(c => c.textContent))"""
    res = check_page(path, probes={"cells": probe})
    assert res.errors == []
    expected = [
        [fmt_p(v), fmt_pct(v), number(x)]
        for v, x in zip(values + values[: len(numbers) - len(values)], numbers)
    ]
    assert res.probes["cells"] == expected
    assert expected[0] == ["0.812", "81.2%", "0.812"] and expected[6][1] == "1.2%"


def test_no_figure_text_is_cut_at_the_figures_edge(make_run, tmp_path: Path) -> None:
    """The rank histogram's x label began 3 px left of its figure ("ank of the original ..."),
    squeezed by the legend beside the axes; the precision-recall legend hid the curves."""
    run = make_run(n_items=12)  # few items: "H0: uniform (0.417 items a rank)" beside the axes
    records = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    labels = tmp_path / "leaked.txt"
    labels.write_text("\n".join(r["id"] for r in records[2:8]) + "\n", encoding="utf-8")
    from contamscope.report.validation import read_labels

    path = build_report(run, options=ReportOptions(labels=read_labels(labels)))
    probe = """(() => { const out = [];
      document.querySelectorAll('svg.fig').forEach(svg => {
        const b = svg.getBoundingClientRect();
        svg.querySelectorAll('text').forEach(t => { const r = t.getBoundingClientRect();
          if (r.width > 0 && (r.left < b.left - 1 || r.right > b.right + 1
                              || r.top < b.top - 1 || r.bottom > b.bottom + 1))
            out.push(t.textContent); }); });
      return out; })()"""
    res = check_page(
        path, probes={"cut": probe, "figures": "document.querySelectorAll('svg.fig').length"}
    )
    assert res.errors == [] and res.probes["figures"] >= 4
    assert res.probes["cut"] == []


def test_search_and_tooltip_see_a_long_questions_whole_text(make_run, tmp_path: Path) -> None:
    """The table's data held a question cut to 600 characters: the search missed the middle of
    a passage, the tooltip was not the whole text (HTML QA). Now the cell shows its start,
    clipped; the search and the tooltip the whole text. And no id repeats on the page (the
    figures' ids did)."""
    run = make_run("long", n_items=6, n_excluded=0)
    lines = []
    for i, line in enumerate((run / "items.jsonl").read_text().splitlines()):
        r = json.loads(line)
        if i == 2:
            r["prefix"] = (
                "Passage. "
                + "Filler words. " * 60
                + "Deep middle marker. "
                + ("More filler. " * 60)
                + "Who was John Kerry?:\n"
            )
        lines.append(json.dumps(r))
    (run / "items.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    path = build_report(run)
    probes = {
        "found": """(() => { const i = document.querySelector('#items input');
            i.value = 'deep middle marker'; i.dispatchEvent(new Event('input'));
            const td = document.querySelector('#items tbody td.q');
            const out = [document.querySelectorAll('#items tbody tr').length,
                         td.textContent, td.title];
            i.value = ''; i.dispatchEvent(new Event('input')); return out; })()""",
        "repeated_ids": """(() => { const c = {};
            document.querySelectorAll('[id]').forEach(e => c[e.id] = (c[e.id] || 0) + 1);
            return Object.values(c).filter(v => v > 1).length; })()""",
    }
    res = check_page(path, probes=probes)
    assert res.errors == []
    n, cell, tip = res.probes["found"]
    assert n == 1
    assert len(cell) <= 300 and cell.endswith("…") and cell.startswith("Passage. Filler")
    assert tip.startswith("Passage. ") and tip.endswith("Who was John Kerry?")
    assert "Deep middle marker." in tip and len(tip) > 1500
    assert res.probes["repeated_ids"] == 0


PRINT_PROBES = {
    # what is cut on paper: a box whose content is wider than the box (no scroll bar there)
    "cut": """[...document.querySelectorAll('.scroll, main table, pre')]
        .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.tagName + '.' + e.className)""",
    "page_wider": "document.documentElement.scrollWidth > window.innerWidth",
    "pager_shown": "document.querySelector('#items .pager').offsetParent !== null",
    "rows_printed": """(() => { window.dispatchEvent(new Event('beforeprint'));
        const n = document.querySelectorAll('#items tbody tr').length;
        window.dispatchEvent(new Event('afterprint'));
        return [n, document.querySelectorAll('#items tbody tr').length]; })()""",
}


def test_a_printed_report_has_every_row_and_no_table_cut(make_run, tmp_path: Path) -> None:
    """Printed (A4 width, print media) the wide tables scrolled in boxes paper cannot scroll,
    cutting columns off, and the paged item table printed its current page only (QA)."""
    run = make_run(n_items=120, labels_in_records=True)
    path = build_report(run, options=ReportOptions(page_size=50))
    res = check_page(path, probes=PRINT_PROBES, media="print", width=794)
    assert res.errors == []
    assert res.probes["cut"] == [] and res.probes["page_wider"] is False
    assert res.probes["pager_shown"] is False
    assert res.probes["rows_printed"] == [120, 50]  # every row printed, the page back after
    screen = check_page(path, probes=PRINT_PROBES, width=794)
    assert screen.probes["cut"] != []  # on screen the wide tables scroll in their boxes
    assert screen.probes["pager_shown"] is True


def test_pager_buttons_are_disabled_at_the_ends(make_run, tmp_path: Path) -> None:
    run = make_run(n_items=120)
    path = build_report(run, options=ReportOptions(page_size=50))
    state = """[...document.querySelectorAll('#items .pager button')].map(b => b.disabled)"""
    click = (
        "const n = document.querySelector('#items button[data-go=\"1\"]'); n.click(); n.click();"
    )
    last = f"(() => {{ {click} return {state}; }})()"
    res = check_page(path, probes={"first": state, "last": last})
    assert res.probes == {"first": [True, False], "last": [False, True]}
