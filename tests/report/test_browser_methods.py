"""CAP, BenBench and membership reports and a mixed-method leaderboard in headless Chromium: no console
errors, the figures are drawn, the item table searches and pages.

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


def probes(search: str) -> dict[str, str]:
    return {
        "figures": 'document.querySelectorAll("svg.fig").length',
        "sections": 'Array.from(document.querySelectorAll("section")).map(s => s.id)',
        "rows_on_page": 'document.querySelectorAll("#items tbody tr").length',
        "count": 'document.querySelector("#items .tbl-count").textContent',
        "search": f"""(() => {{ const i = document.querySelector('#items input');
            i.value = {search!r}; i.dispatchEvent(new Event('input'));
            const n = document.querySelectorAll('#items tbody tr').length;
            const first = document.querySelector('#items tbody td').textContent;
            i.value = ''; i.dispatchEvent(new Event('input')); return [n, first]; }})()""",
        "next_page": """(() => { document.querySelector('#items button[data-go="1"]').click();
            return document.querySelector('#items .tbl-page').textContent; })()""",
    }


def test_cap_report_in_browser(make_cap_run, tmp_path: Path) -> None:
    run = make_cap_run(n_per_split=40)
    path = build_report(run, options=ReportOptions(page_size=25))
    shot = tmp_path / "cap.png"
    res = check_page(path, probes=probes("test/q17"), screenshot=shot)
    assert res.errors == []
    assert res.probes["figures"] == 6
    assert res.probes["sections"] == ["verdict", "evidence", "cases", "items", "provenance"]
    assert res.probes["rows_on_page"] == 25
    assert res.probes["count"] == "81 of 81 rows"
    assert res.probes["search"] == [1, "test/q17"]
    assert res.probes["next_page"] == "page 2 of 4"
    assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 20_000


def test_tiny_model_cap_report_in_browser(tiny_cap_run: Path, tmp_path: Path) -> None:
    path = build_report(tiny_cap_run, out=tmp_path / "tiny_cap.html")
    res = check_page(path, probes=probes("test/"), screenshot=tmp_path / "tiny_cap.png")
    assert res.errors == []
    assert res.probes["figures"] == 6
    assert res.probes["count"] == "6 of 6 rows"
    assert res.probes["search"][0] == 3


def test_benbench_report_in_browser(make_benbench_run, tmp_path: Path) -> None:
    run = make_benbench_run(n_per_split=30)
    path = build_report(run, options=ReportOptions(page_size=25))
    res = check_page(path, probes=probes("train/item-7"), screenshot=tmp_path / "bb.png")
    assert res.errors == []
    assert res.probes["figures"] == 5
    assert res.probes["sections"] == ["verdict", "evidence", "hits", "items", "provenance"]
    assert res.probes["rows_on_page"] == 25
    assert res.probes["count"] == "60 of 60 rows"
    assert res.probes["search"] == [1, "train/item-7"]
    assert res.probes["next_page"] == "page 2 of 3"
    # a word longer than a phone is wide, in the hits' headings: the page scrolled sideways
    # (1,085 px at 385; HTML QA)
    lines = (run / "items.jsonl").read_text(encoding="utf-8").splitlines()
    recs = [json.loads(x) for x in lines]
    for r in recs:
        r["versions"][0]["question"] = "A long word " + "Supercalifragilistic" * 12
    (run / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    path = build_report(run)
    phone = check_page(path, probes={"scrolls": _SCROLLS}, width=400)
    assert phone.errors == [] and phone.probes["scrolls"] is False


_SCROLLS = "document.documentElement.scrollWidth > window.innerWidth"


def test_tiny_model_benbench_report_in_browser(tiny_benbench_run: Path, tmp_path: Path) -> None:
    path = build_report(tiny_benbench_run, out=tmp_path / "tiny_bb.html")
    res = check_page(path, probes=probes("train/"), screenshot=tmp_path / "tiny_bb.png")
    assert res.errors == []
    assert res.probes["figures"] == 5
    assert res.probes["count"] == "5 of 5 rows"
    assert res.probes["search"][0] == 2


def test_membership_report_in_browser(make_membership_run, tmp_path: Path) -> None:
    run = make_membership_run(shift=1.0, n_bench=30, n_ref=40)
    path = build_report(run, options=ReportOptions(page_size=25))
    res = check_page(path, probes=probes("reference/item-39"), screenshot=tmp_path / "m.png")
    assert res.errors == []
    assert res.probes["figures"] == 3
    assert res.probes["sections"] == ["verdict", "evidence", "items", "provenance"]
    assert res.probes["rows_on_page"] == 25
    assert res.probes["count"] == "70 of 70 rows"
    assert res.probes["search"] == [1, "reference/item-39"]
    assert res.probes["next_page"] == "page 2 of 3"


def test_mixed_leaderboard_in_browser(
    make_run, make_cap_run, make_benbench_run, make_membership_run, tmp_path
) -> None:
    runs = [
        make_run("perm", n_items=24, leaked_every=2),
        make_cap_run("cap_a"),
        make_cap_run("cap_b", contaminated=False, model="hf:/models/other", seed=2),
        make_benbench_run("bb"),
        make_membership_run("mem", shift=1.0, model="hf:/models/other"),
    ]
    out = tmp_path / "lb.html"
    write_leaderboard(runs, out)
    res = check_page(
        out,
        probes={
            "figures": 'document.querySelectorAll("svg.fig").length',
            "rows": 'document.querySelectorAll("#board tbody tr").length',
            "heads": 'Array.from(document.querySelectorAll("#board th")).map(t => t.textContent)',
            # a click on "estimate" sorted all methods' numbers as one column
            "by_estimate": """(() => { const box = document.querySelector('[data-table="runs"]');
                const rows = () => Array.from(box.querySelectorAll('tbody tr')).map(
                    tr => [tr.children[2].textContent, tr.children[4].textContent]);
                const before = rows(); box.querySelectorAll('th')[4].click();
                const up = rows(); box.querySelectorAll('th')[4].click();
                return [before, up, rows()]; })()""",
        },
        screenshot=tmp_path / "lb.png",
    )
    assert res.errors == []
    assert res.probes["figures"] == 5  # 4 bar charts (one per method) + CAP heatmap
    assert res.probes["rows"] == 4  # one per model: the membership run is of cap_b's
    before, up, down = res.probes["by_estimate"]
    methods = [m for m, _ in before]
    assert len(methods) == 5 and methods[0] == "Option-permutation test"
    for clicked in (up, down):  # grouped as before, each method's runs sorted within
        assert [m for m, _ in clicked] == methods
    cap_up = [float(e.split()[0]) for m, e in up if m.startswith("CAP")]
    cap_down = [float(e.split()[0]) for m, e in down if m.startswith("CAP")]
    assert cap_up == sorted(cap_up) and cap_down == sorted(cap_up, reverse=True)
    assert cap_up[0] != cap_up[1]
    assert res.probes["heads"] == [
        "model",
        "synthetic.csv (Option-permutation test)",
        "finbench (CAP (consistency amplification))",
        "gsm8k_test.jsonl + gsm8k_train.jsonl (BenBench (n-gram accuracy, perplexity))",
        "bench_test.csv vs fresh.csv (r) (Membership test (against unseen references))",
    ]
