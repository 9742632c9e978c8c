"""The HTML report and the leaderboard, built from synthetic run folders (no browser)."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from contamscope.detectors.verdict import p_text
from contamscope.errors import ConfigError, ContamscopeWarning, DataError, StoreError
from contamscope.report import ReportOptions, build_report, collect, load_run, write_leaderboard
from contamscope.report.html import fmt_p
from contamscope.report.leaderboard import LeftOut, flagged_text, to_html, to_markdown


def _table_data(html: str, table_id: str = "items") -> dict:
    m = re.search(
        rf'<script type="application/json" id="data-{table_id}">(.*?)</script>', html, re.S
    )
    assert m, f"no data for table {table_id}"
    return json.loads(m.group(1).replace("<\\/", "</"))


def test_report_is_self_contained_with_figures_table_and_verdict(make_run) -> None:
    run = make_run(n_items=40, exact_alg2=True)
    path = build_report(run)
    assert path == run / "report.html"
    html = path.read_text(encoding="utf-8")
    # nothing is fetched: no external scripts, styles, images or fonts
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', html)
    assert "@import" not in html and "url(http" not in html
    for section in ("verdict", "evidence", "cases", "items", "provenance"):
        assert f'<section id="{section}">' in html
    # 1 rank histogram + 1 gap histogram + 8 case studies (default --top)
    assert html.count('<svg role="img" class="fig"') == 10
    # a third of the items leak: the verdict must say so, with the summary's numbers
    assert "LEAKAGE SIGNAL" in html
    summary = json.loads((run / "summary.json").read_text())
    a1 = summary["statistics"]["alg1"]
    assert f"{100 * a1['rate']:.1f}% ({a1['count']})" in html
    assert f"{100 * a1['null_expected']:.1f}%" in html  # the false-positive rate, up front
    data = _table_data(html)
    assert len(data["rows"]) == 40  # every record, excluded ones too
    excluded = [r for r in data["rows"] if r[8]]
    assert len(excluded) == 2 and "not exchangeable" in excluded[0][8]
    # user text is escaped: the synthetic questions contain </script> and <b>
    assert "<b>&amp;</b> </script>" not in html
    assert "Synthetic question number" in html


def test_case_studies_are_the_most_suspicious_items(make_run) -> None:
    run = make_run(n_items=30)
    html = build_report(run, options=ReportOptions(top_cases=3)).read_text()
    records = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    scored = [r for r in records if not r.get("excluded")]
    want = sorted(scored, key=lambda r: (r["p_value"], -r["gap"]))[:3]
    shown = re.findall(r"<title>log-probs of all orders of (.*?)</title>", html)
    assert shown == [r["id"] for r in want]
    assert html.count('<svg role="img" class="fig"') == 5


def test_labels_add_roc_and_pr_with_auc(make_run, tmp_path: Path) -> None:
    run = make_run(n_items=30, labels_in_records=True)
    html = build_report(run).read_text()
    assert '<section id="validation">' in html
    assert "ROC AUC" in html and "<title>ROC curves</title>" in html
    data = _table_data(html)
    assert data["columns"][-1]["key"] == "label"
    # AUC = Mann-Whitney U / (n_leaked * n_clean), computed independently
    from scipy.stats import mannwhitneyu

    recs = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    recs = [r for r in recs if not r.get("excluded")]
    for name, key in (
        ("rank p-value \\(1 - p\\)", lambda r: -r["p_value"]),
        ("log-prob gap", lambda r: r["gap"]),
    ):
        pos = [key(r) for r in recs if r["leak_label"]]
        neg = [key(r) for r in recs if not r["leak_label"]]
        want = mannwhitneyu(pos, neg).statistic / (len(pos) * len(neg))
        assert re.search(rf"<td>{name}</td><td>{want:.3f}</td>", html), (name, want)


def test_labels_from_validate_split_json(make_run, tmp_path: Path) -> None:
    run = make_run("val/epoch-1", n_items=20)
    leaked = [json.loads(x)["id"] for x in (run / "items.jsonl").read_text().splitlines()][2::3]
    (tmp_path / "val" / "split.json").write_text(
        json.dumps({"leaked": [{"id": i, "training_order": [0, 1, 2, 3]} for i in leaked]})
    )
    html = build_report(run).read_text()
    assert f"{len(leaked)} of 18 analysed items are labelled leaked" in html


def test_large_run_keeps_the_page_small(make_run) -> None:
    run = make_run(n_items=3000)
    path = build_report(run, options=ReportOptions(top_cases=8))
    html = path.read_text()
    assert html.count('<svg role="img" class="fig"') == 10  # plots stay bounded
    assert len(_table_data(html)["rows"]) == 3000
    assert path.stat().st_size < 3000 * 400 + 600_000  # continuations/logprobs not embedded


def test_errors_name_the_file(make_run, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such run folder"):
        build_report(tmp_path / "missing")
    half = tmp_path / "half"
    half.mkdir()
    (half / "items.jsonl").write_text("{}\n")
    with pytest.raises(StoreError, match="no summary.json.*interrupted"):
        build_report(half)
    run = make_run(n_items=5, n_excluded=0)
    with open(run / "items.jsonl", "a") as fh:
        fh.write("{not json\n")
    # a damaged record is left out and said, on the page too, as reanalyse leaves it out (the
    # report refused the folder reanalyse had just analysed; QA)
    with pytest.warns(
        ContamscopeWarning,
        match=r"items\.jsonl: 1 damaged or unreadable record left out of the item tables \(line 6: not valid JSON",
    ):
        html = build_report(run).read_text(encoding="utf-8")
    assert "1 damaged or unreadable record left out" in html
    assert len(_table_data(html)["rows"]) == 5
    other = make_run("other", n_items=3, n_excluded=0)
    s = json.loads((other / "summary.json").read_text())
    s["schema"] = "othertool.results/2"
    (other / "summary.json").write_text(json.dumps(s))
    (other / "settings.json").write_text(json.dumps({"method": "mystery"}))
    with pytest.raises(ConfigError, match="no report for runs of schema 'othertool.results/2'"):
        build_report(other)


def test_contamscope_method_without_module_gets_the_generic_report(tmp_path: Path) -> None:
    """A contamscope method without a report module yet: statistics and item fields as stored,
    no leaderboard cell."""
    run = tmp_path / "bb"
    run.mkdir()
    summary = {
        "schema": "contamscope.futuremethod.summary/1",
        "method": "futuremethod",
        "model": {"spec": "hf:tiny"},
        "benchmark": {
            "test": {"source": "gsm8k_test.jsonl"},
            "train": {"source": "gsm8k_train.jsonl"},
        },
        "statistics": {
            "splits": {"test": {"n_items": 2, "delta": {"ppl": {"mean": 1.25, "ci": [0.5, 2.0]}}}}
        },
    }
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "settings.json").write_text(json.dumps({"method": "futuremethod"}))
    recs = [
        {
            "id": "q1",
            "split": "test",
            "metrics": {"original": {"ppl": 3.5}},
            "flags": {"exact_all": True},
        },
        {
            "id": "q2",
            "split": "test",
            "metrics": {"original": {"ppl": 7.0}},
            "flags": {"exact_all": False},
        },
    ]
    (run / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    html = build_report(run).read_text()
    stats = _table_data(html, "statistics")["rows"]
    assert ["splits.test.delta.ppl.mean", "1.25"] in stats
    assert ["splits.test.delta.ppl.ci", "[0.5, 2]"] in stats
    items = _table_data(html)
    assert [c["key"] for c in items["columns"]] == [
        "id", "split", "metrics.original.ppl", "flags.exact_all"
    ]  # fmt: skip
    assert items["rows"][1] == ["q2", "test", 7.0, False]
    assert "gsm8k_test.jsonl + gsm8k_train.jsonl" in html
    with pytest.raises(ConfigError, match="none of the run folders has statistics to rank"):
        collect([run])


def _as_clean_model(run: Path) -> None:
    """Make a synthetic run another model's (a second row of the board)."""
    s = json.loads((run / "summary.json").read_text())
    s["model"].update(spec="hf:clean-model", fingerprint="synthetic:clean")
    (run / "summary.json").write_text(json.dumps(s))


def test_leaderboard_formats(make_run, tmp_path: Path) -> None:
    a = make_run("a", n_items=24, leaked_every=2)
    b = make_run("b", n_items=24, leaked_every=1000)
    _as_clean_model(b)
    entries = collect([a, b])
    assert [e.model for e in entries] == ["hf:synthetic-model", "hf:clean-model"]
    sa = json.loads((a / "summary.json").read_text())["statistics"]["alg1"]
    assert entries[0].estimate.value == pytest.approx(sa["excess"])
    assert entries[0].estimate.ci == pytest.approx(tuple(sa["excess_ci"]))

    md = to_markdown(entries)
    assert md.splitlines()[0] == "| model | synthetic.csv |"
    excess = f"{100 * sa['excess']:+.1f} pp [{100 * sa['excess_ci'][0]:+.1f}, {100 * sa['excess_ci'][1]:+.1f}]"
    n = json.loads((a / "summary.json").read_text())["statistics"]["n_items"]
    p = p_text(entries[0].estimate.p_value)  # the legend describes it: the cell shows it
    assert f"| hf:synthetic-model | {excess}, n={n}, p={p} |" in md  # the cell says its items

    text, _ = write_leaderboard([a, b], tmp_path / "lb.csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "lb.csv").read_text())))
    assert [r["model"] for r in rows] == ["hf:synthetic-model", "hf:clean-model"]
    assert float(rows[0]["estimate"]) == pytest.approx(sa["excess"])
    # the verdict's p: its three tests' smallest times three (a cell at p <= 0.05 is a run
    # whose verdict found a signal), not Algorithm 1's alone
    stats = json.loads((a / "summary.json").read_text())["statistics"]
    tests = [stats[k]["p_value"] for k in ("alg1", "rank", "gap")]
    assert float(rows[0]["p_value"]) == pytest.approx(min(1.0, 3 * min(tests)), rel=1e-9)

    write_leaderboard([a, b], tmp_path / "lb.html")
    html = (tmp_path / "lb.html").read_text()
    assert "<title>Option-permutation test leaderboard bar chart</title>" in html
    pivot = _table_data(html, "leaderboard")
    assert [r[0] for r in pivot["rows"]] == ["hf:synthetic-model", "hf:clean-model"]
    assert pivot["rows"][0][1][0] == pytest.approx(sa["excess"])
    # the runs table names each run folder from the board's folder (it read the path as
    # given, relative to where the command ran, or the whole local path; publishing QA)
    (tmp_path / "pages").mkdir()
    write_leaderboard([a, b], tmp_path / "pages" / "lb.html")
    runs = _table_data((tmp_path / "pages" / "lb.html").read_text(), "runs")
    assert sorted(r[-1] for r in runs["rows"]) == [f"../{a.name}", f"../{b.name}"]

    with pytest.raises(
        ConfigError,
        match=r"--out .*lb.pdf: its extension .pdf is no format; end it in .html, .csv, .md or give --format",
    ):
        write_leaderboard([a], tmp_path / "lb.pdf")
    with pytest.raises(ConfigError, match=r"--out .*board: no extension says the format; end"):
        write_leaderboard([a], tmp_path / "board")
    with pytest.raises(ConfigError, match="--format 'pdf': expected one of html, csv, md"):
        write_leaderboard([a], tmp_path / "lb.html", fmt="pdf")
    assert load_run(a).method == "permutation"


def test_leaderboard_names_the_subjects_flagged_on_their_own(make_run, tmp_path: Path) -> None:
    """A run whose leak sits in one subject: the board names that subject (CSV, Markdown, the
    HTML runs table) and says how many runs it tested; a clean run's subjects are 'none of 7'."""
    a = make_run("a", n_items=72, leaked_every=1, leak_only="subj3")
    b = make_run("b", n_items=72, leaked_every=1000, seed=1)
    _as_clean_model(b)
    by = json.loads((a / "summary.json").read_text())["by_subject"]
    assert [r["subject"] for r in by["subjects"] if r["flagged"]] == ["subj3"]

    entries = collect([a, b])
    assert [(e.estimate.flagged, e.estimate.n_parts) for e in entries] == [
        (("subj3",), 7),
        ((), 7),
    ]
    md = to_markdown(entries)
    assert (
        "- hf:synthetic-model on synthetic.csv: subjects flagged on their own, 1 of 7: subj3\n"
        in md
    )
    assert "clean-model on synthetic.csv: subjects flagged" not in md
    assert (
        "- subjects tested on their own in 2 runs (Benjamini-Hochberg q <= 0.05 within each run); "
        "1 with a flagged subject; when no model saw any subject, the expected number of such "
        "runs is at most 0.1\n"
    ) in md

    write_leaderboard([a, b], tmp_path / "lb.csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "lb.csv").read_text())))
    assert [(r["subjects_tested"], r["flagged_subjects"]) for r in rows] == [
        ("7", "subj3"),
        ("7", ""),
    ]
    text, _ = write_leaderboard([a, b], tmp_path / "lb.html")
    runs = _table_data(text, "runs")
    col = [c["label"] for c in runs["columns"]].index("subjects flagged")
    assert sorted(r[col] for r in runs["rows"]) == ["1 of 7: subj3", "none of 7"]
    assert "subjects flagged on their own, 1 of 7: subj3</li>" in text

    # a run whose subjects are each too small to be flagged (one item of 24 orders: p >= 0.125)
    # said "none of 7", read as a clean result, and counted 0.05 in the expected number (QA)
    c = make_run("c", n_items=9, leaked_every=1000, seed=2)
    assert json.loads((c / "summary.json").read_text())["by_subject"]["n_too_few_items"] == 7
    entries = collect([a, b, c])
    assert flagged_text(entries[2].estimate) == (
        "not testable: each of 7 has too few items to be flagged"
    )
    md = to_markdown(entries)
    assert (
        "- subjects tested on their own in 2 runs (Benjamini-Hochberg q <= 0.05 within each run); "
        "1 with a flagged subject; when no model saw any subject, the expected number of such "
        "runs is at most 0.1; in 1 run no subject has enough items to be flagged\n"
    ) in md

    # a run from before the by-subject tests (or with one subject) has no such column value
    s = json.loads((b / "summary.json").read_text())
    del s["by_subject"]
    (b / "summary.json").write_text(json.dumps(s))
    entries = collect([a, b])
    assert entries[1].estimate.n_parts is None
    assert "tested on their own in 1 run " in to_markdown(entries)


def test_leaderboard_of_a_run_without_flags_and_of_subject_subsets(
    make_run, tmp_path: Path
) -> None:
    """A run whose CI starts a rounding error above its estimate (no item flagged: the Wilson
    interval's lower end was 5.6e-17, not 0) still draws its bar; runs restricted to subjects are
    told apart by them, and paths show their last two parts."""
    runs = []
    for name, subjects in (("a", None), ("b", ["anatomy", "virology"])):
        run = make_run(name, n_items=24)
        s = json.loads((run / "summary.json").read_text())
        alg1 = s["statistics"]["alg1"]
        alg1["excess_ci"][0] = alg1["excess"] + 5.6e-17  # as written before the fix
        s["benchmark"]["source"] = "/data/cmmlu/test"
        s["benchmark"]["selection"] = {"subjects": subjects, "sample": 3}
        (run / "summary.json").write_text(json.dumps(s))
        runs.append(run)
    text, _ = write_leaderboard(runs, tmp_path / "lb.html")
    assert "1 model × 2 benchmarks from 2 runs" in text
    # the tab names the board's shape, as a report's names its run (QA)
    assert "<title>contamscope leakage leaderboard: 1 model × 2 benchmarks</title>" in text
    heads = re.findall(r'<th data-col="\d+" title="[^"]*" class="k-pair"[^>]*>([^<]*)</th>', text)
    assert heads[:2] == ["cmmlu/test", "cmmlu/test [anatomy, virology]"]
    from contamscope.detectors.stats import wilson_interval

    assert wilson_interval(0, 24)[0] == 0.0 and wilson_interval(24, 24)[1] == 1.0


def test_one_benchmark_typed_from_two_folders_is_one_column(make_run, tmp_path: Path) -> None:
    """Two models' runs of one file, one given as data/q_test.csv and one by its absolute
    path, were two columns of one row each, ranked apart (QA); the same file is one column
    (by its content and name). A file of that name with other contents stays apart."""
    runs = []
    for name, source, digest in (
        ("a", "data/q_test.csv", "d1"),
        ("b", "/home/me/data/q_test.csv", "d1"),
        ("c", "/home/me/other/q_test.csv", "d2"),
    ):
        run = make_run(name, n_items=24)
        s = json.loads((run / "summary.json").read_text())
        s["benchmark"].update(source=source, content_hash=digest)
        s["model"]["spec"] = f"hf:model-{name}"
        s["model"]["fingerprint"] = f"synthetic-{name}"
        (run / "summary.json").write_text(json.dumps(s))
        runs.append(run)
    md, _ = write_leaderboard(runs, None, "md")
    head = [c.strip() for c in md.splitlines()[0].split("|")[2:-1]]
    assert len(head) == 2 and head[0] != head[1], head
    rows = [ln for ln in md.splitlines()[2:] if ln.startswith("| hf:model-")]
    cells = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]] for r in rows}
    assert head[0] == "data/q_test.csv"  # the first run's name for it
    assert cells["hf:model-a"][0] and cells["hf:model-b"][0]  # one column, both rows
    assert cells["hf:model-a"][1] == cells["hf:model-b"][1] == cells["hf:model-c"][0] == ""
    assert cells["hf:model-c"][1]


def test_one_model_in_two_dtypes_is_two_rows_named_by_dtype(make_run, tmp_path: Path) -> None:
    """smollm2 run in float32 and in bfloat16 was one row whose two runs were replicate
    columns ([run-a], [run-b]), where card calls them two models (QA): a row each, named by
    the dtype, in one column."""
    runs = []
    for name, dtype in (("a", "float32"), ("b", "bfloat16")):
        run = make_run(name, n_items=24)
        s = json.loads((run / "summary.json").read_text())
        s["model"] = {
            "spec": "smollm2",
            "fingerprint": f"local:w:0123|{dtype}|tok=1|bos=0|engine=4",
        }
        (run / "summary.json").write_text(json.dumps(s))
        runs.append(run)
    md, _ = write_leaderboard(runs, None, "md")
    head = [c.strip() for c in md.splitlines()[0].split("|")[2:-1]]
    assert head == ["synthetic.csv"]
    rows = sorted(ln.split("|")[1].strip() for ln in md.splitlines()[2:] if ln.startswith("| smol"))
    assert rows == ["smollm2 (bfloat16)", "smollm2 (float32)"]


def test_leaderboard_names_the_runs_it_leaves_out(make_run, tmp_path: Path) -> None:
    a = make_run("a", n_items=24, leaked_every=2)
    empty = make_run("empty", n_items=24)
    s = json.loads((empty / "summary.json").read_text())
    del s["statistics"]["alg1"]  # as a run with no analysed item writes it
    (empty / "summary.json").write_text(json.dumps(s))
    (tmp_path / "x").mkdir()
    again = tmp_path / "x" / ".." / "a"  # the same folder, spelt differently
    left: list[LeftOut] = []
    text, _ = write_leaderboard([a, empty, again], None, "md", left)
    assert [(x.run_dir.name, x.reason) for x in left] == [
        ("empty", "Option-permutation test run, no item analysed, so no Algorithm-1 rate"),
        ("a", "given twice (one cell)"),
    ]
    assert len(text.splitlines()[0].split("|")) == 4  # model + one benchmark column
    assert f"- left out: {empty}: Option-permutation test run, no item analysed" in text
    html, _ = write_leaderboard([a, empty], None, "html")
    assert "left out: " + str(empty) in html and "1 model × 1 benchmark from 1 run" in html
    # the CSV has a row for each, with its folder and reason (it had none: a CSV of fewer rows
    # than runs said nothing; output-files QA)
    table, _ = write_leaderboard([a, empty, again], None, "csv")
    rows = list(csv.DictReader(io.StringIO(table)))
    # (not the folder given twice: keyed by run_dir, its empty row replaced the ranked one)
    assert [(r["run_dir"], r["left_out"], r["estimate"]) for r in rows[1:]] == [
        (str(empty), "Option-permutation test run, no item analysed, so no Algorithm-1 rate", ""),
    ]
    assert rows[0]["left_out"] == "" and rows[0]["estimate"] != ""
    with pytest.raises(ConfigError, match=r"none of the run folders.*empty: Option-permutation"):
        collect([empty])
    # a run of a method without a leaderboard statistic (none of ours) is named by its method
    mem = tmp_path / "future"
    mem.mkdir()
    (mem / "settings.json").write_text(json.dumps({"method": "future", "model": "m"}))
    summary = {"schema": "contamscope.future.summary/1", "method": "future"}
    (mem / "summary.json").write_text(json.dumps(summary | {"model": {"spec": "m"}}))
    left = []
    write_leaderboard([a, mem], None, "md", left)
    assert [x.reason for x in left] == [
        "future run, a method with no leaderboard statistic yet (its report has its numbers)"
    ]


def test_a_board_leaves_out_runs_it_cannot_read_and_keeps_the_others(
    make_run, tmp_path: Path
) -> None:
    """A value of the wrong type (a traceback), a run of another tool's or a newer schema
    (the whole board refused): each is left out, named, and the rest is written (sweep audit)."""
    a = make_run("a", n_items=24, leaked_every=2)
    bad = make_run("bad", n_items=24, leaked_every=2)
    s = json.loads((bad / "summary.json").read_text())
    s["statistics"]["alg1"]["excess"] = "0.1"
    (bad / "summary.json").write_text(json.dumps(s))
    newer = make_run("newer", n_items=8)
    s = json.loads((newer / "summary.json").read_text())
    s["schema"] = "contamscope.permutation.summary/2"
    (newer / "summary.json").write_text(json.dumps(s))
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "summary.json").write_text(json.dumps({"schema": "other.tool/1"}))
    left: list[LeftOut] = []
    text, _ = write_leaderboard([a, bad, newer, foreign], None, "md", left)
    assert [(x.run_dir.name, x.unreadable) for x in left] == [
        ("bad", True),
        ("newer", True),
        ("foreign", True),
    ]
    assert "unreadable summary.json (Unknown format code" in left[0].reason
    assert "newer than this contamscope" in left[1].reason
    assert "no report for runs of schema 'other.tool/1'" in left[2].reason
    assert text.splitlines()[2].startswith("| hf:synthetic-model | +50.4 pp")  # run a's cell
    sweep = tmp_path / "sweep"  # a sweep's folder given for its runs: named with the glob
    sweep.mkdir()
    (sweep / "sweep.json").write_text("{}")
    # '*/': the folders alone ('*' took the sweep's pages too, each then left out; QA)
    with pytest.raises(ConfigError, match=r"a sweep's folder: give its runs \(.*sweep/\*/\)"):
        collect([sweep])
    # OUT/*/ matches the sweep's compare/ pages too: passed by without a word
    (sweep / "compare").mkdir()
    (sweep / "compare" / "x.html").write_text("<html></html>")
    pages: list[LeftOut] = []
    assert len(collect([a, sweep / "compare"], pages)) == 1 and pages == []
    # and report says what the folder is, not only that it is no run
    with pytest.raises(StoreError, match=r"no summary.json, not a finished run folder \(a sweep's"):
        load_run(sweep)


def test_summary_of_a_newer_schema_version_is_refused(make_run) -> None:
    run = make_run("new", n_items=8)
    s = json.loads((run / "summary.json").read_text())
    s["schema"] = "contamscope.permutation.summary/2"
    (run / "summary.json").write_text(json.dumps(s))
    with pytest.raises(ConfigError, match=r"schema 'contamscope.permutation.summary/2', newer"):
        build_report(run)


def _set_aside_as_natural(run: Path, ids: set[str]) -> dict[str, Any]:
    """Give a run the ``natural_order`` block the pipeline writes, with ``ids`` as the naturally
    ordered items (the statistics of the others computed by the detectors)."""
    from contamscope.detectors import item_score_from_dict, summarize

    records = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    scored = [r for r in records if not r.get("excluded")]
    natural = [r for r in scored if r["id"] in ids]
    rest = [r for r in scored if r["id"] not in ids]
    s = json.loads((run / "summary.json").read_text())
    s["natural_order"] = {
        "n_items": len(natural),
        "reasons": {"numbers in increasing order": len(natural)},
        "alg1_count": sum(r["alg1"] for r in natural),
        "alg1_rate": sum(r["alg1"] for r in natural) / len(natural),
        "alg1_chance": 1 / 24,
        "ids": [r["id"] for r in natural],
        "by_id": {r["id"]: "numbers in increasing order" for r in natural},
        "statistics_without": summarize([item_score_from_dict(r) for r in rest]).to_dict(),
    }
    (run / "summary.json").write_text(json.dumps(s))
    return s


def test_leaderboard_cell_rests_on_the_items_the_verdict_tests(make_run, tmp_path: Path) -> None:
    """Naturally ordered items (which a clean model also ranks first) are set aside by the
    verdict; the leaderboard cell uses the same items, and a run of only such items has none."""
    from contamscope.cli.summary import verdict
    from contamscope.report.permutation import estimate
    from contamscope.report.rundata import load_run

    run = make_run("nat", n_items=40, leaked_every=2, n_excluded=0)
    records = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    flagged = {r["id"] for r in records if r["alg1"]}
    s = _set_aside_as_natural(run, flagged)  # every flagged item has a natural order
    est = estimate(load_run(run))
    assert est is not None
    assert (
        est.n_items == 40 - len(flagged)
        and est.value == s["natural_order"]["statistics_without"]["alg1"]["excess"]
    )
    assert est.value < 0 < s["statistics"]["alg1"]["excess"]  # all items: a large excess
    assert est.raw["set_aside"] == len(flagged)
    assert verdict(s["statistics"], s["natural_order"])[0] is False
    # the report names the set-aside items and shows the p-values the verdict rests on
    html = build_report(run).read_text(encoding="utf-8")
    first_id = s["natural_order"]["ids"][0]
    assert f"(numbers in increasing order: {len(flagged)}), for which H0 fails" in html
    # the item table says which items the verdict set aside, and why
    marked = {r[0]: r[8] for r in _table_data(html)["rows"]}
    assert marked[first_id] == "set aside by the verdict: numbers in increasing order"
    assert sum(v is not None for v in marked.values()) == len(flagged)
    assert f"without any leak: {first_id}, " in html
    rest = s["natural_order"]["statistics_without"]
    assert f"tests on the other {rest['n_items']} items" in html
    for name, key in (("Algorithm-1 excess", "alg1"), ("rank-test count", "rank")):
        assert f"<tr><td>{name}</td><td>{fmt_p(rest[key]['p_value'])}</td>" in html
    assert f"<tr><td>mean-gap test</td><td>{fmt_p(rest['gap']['p_value'])}</td>" in html

    only = make_run("only", n_items=12, leaked_every=1, n_excluded=0)
    s = _set_aside_as_natural(only, {f"subj{i % 7}-{i}" for i in range(12)})
    signal, sentence = verdict(s["statistics"], s["natural_order"])
    assert signal is None and sentence.startswith("nothing testable: all 12 analysed items")
    assert verdict(s["statistics"])[0] is True  # the paper's count alone would call it leaked
    left: list[LeftOut] = []
    write_leaderboard([run, only], None, "md", left)
    assert [(x.run_dir.name, x.reason) for x in left] == [
        (
            "only",
            "Option-permutation test run, all 12 analysed items have a natural option order, "
            "nothing testable",
        )
    ]
    html = build_report(only).read_text(encoding="utf-8")
    assert '<div class="verdict none">nothing testable' in html
    assert "The verdict sets aside 12 with a natural option order" in html
    assert "No other item is left to test." in html


def test_leaderboard_keeps_every_replicate_and_leaves_out_what_is_no_run(
    make_run, tmp_path: Path
) -> None:
    """Three runs of one model/benchmark pair in folders of the same name each get a column;
    a file and an unfinished run among the folders (``runs/*``) are left out with the reason; a
    path that does not exist is still an error."""
    runs = []
    for rep in ("r1", "r2", "r3"):
        runs.append(make_run(f"{rep}/tiny__test", n_items=24, seed=len(runs)))
    (tmp_path / "board.html").write_text("<html></html>")
    (tmp_path / "unfinished").mkdir()
    (tmp_path / "unfinished" / "items.jsonl").write_text("")
    left: list[LeftOut] = []
    entries = collect([*runs, tmp_path / "board.html", tmp_path / "unfinished"], left)
    assert len({e.benchmark for e in entries}) == 3
    assert [e.run_dir for e in entries] == runs
    assert [(x.run_dir.name, x.reason.split(" (")[0]) for x in left] == [
        ("board.html", "a file, not a run folder"),
        ("unfinished", "no summary.json, not a finished run folder"),
    ]
    text, _ = write_leaderboard(runs, None, "md")
    assert len(text.splitlines()[0].split("|")) == 6  # model + three columns
    # the headline counts benchmarks, not the columns the replicates take (it said 3)
    page, _ = write_leaderboard(runs, None, "html")
    assert "1 model × 1 benchmark from 3 runs" in page
    # every replicate column says which run it is (the first had no label, the others their
    # whole path), and runs of other sizes say so (a --limit 4 and a --limit 2 run looked alike)
    head = [c.strip() for c in text.splitlines()[0].split("|")[2:-1]]
    assert head == [f"synthetic.csv [{r}/tiny__test]" for r in ("r1", "r2", "r3")]
    other = make_run("r4/tiny__test", n_items=12)
    text, _ = write_leaderboard([runs[0], other], None, "md")
    head = [c.strip() for c in text.splitlines()[0].split("|")[2:-1]]
    assert head == [
        "synthetic.csv [r1/tiny__test; 22 items]",
        "synthetic.csv [r4/tiny__test; 10 items]",
    ]
    with pytest.raises(StoreError, match="nowhere: no such run folder"):
        collect([runs[0], tmp_path / "nowhere"])
    # replicates of other seeds are other measurements; a copied folder is the same one twice,
    # and the board says so (it was a column and a test of its own without a word; QA)
    assert "hold the same item records" not in text
    copy = tmp_path / "copy" / "tiny__test"
    shutil.copytree(runs[0], copy)
    text, _ = write_leaderboard([*runs, copy], None, "md")
    assert (
        f"- {runs[0]} and {copy} hold the same item records (copies of one run?): one "
        "measurement, shown as 2 cells and counted as 1 test in the line on significance"
    ) in text
    # one measurement is one test: the copy counted twice made Holm stricter (and a rejection
    # two); a copy that reads another p (reanalysed otherwise) would stay a test of its own
    assert "of 3 runs with a p-value (copies of one run counted once) reject" in text
    page, _ = write_leaderboard([*runs, copy], None, "html")
    assert "hold the same item records (copies of one run?)" in page


def test_split_labels_come_only_from_a_validate_epoch_folder(make_run, tmp_path: Path) -> None:
    """A split.json beside an ordinary run folder gave its report ROC curves and a 'known leak'
    column without a word; only ``validate``'s RUN/epoch-N folders take RUN/split.json."""
    from contamscope.report.validation import find_split_labels

    (tmp_path / "split.json").write_text(json.dumps({"leaked": ["subj2-2"]}))
    plain = make_run("myrun", n_items=8)
    epoch = make_run("epoch-3", n_items=8)
    assert find_split_labels(plain) is None
    labels = find_split_labels(epoch)
    assert labels is not None and labels.get("subj2-2", False) is True


def test_case_plots_show_absolute_log_probs(make_run) -> None:
    """Log-probs near -411 that differ by hundredths were drawn with ticks "-0.035 ... -0.050"
    and a detached offset "-4.112e2": unreadable."""
    run = make_run("offset", n_items=10, n_excluded=0)
    lines = []
    for line in (run / "items.jsonl").read_text().splitlines():
        r = json.loads(line)
        r["logprobs"] = [-411.24 + 0.002 * (v + 40.0) for v in r["logprobs"]]
        lines.append(json.dumps(r))
    (run / "items.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    html = build_report(run).read_text(encoding="utf-8")
    cases = html[html.index('<section id="cases">') :]
    cases = cases[: cases.index("</section>")]
    assert "<svg" in cases and "−411.24" in cases
    assert "e2<" not in cases and "e+02" not in cases


def test_case_studies_show_the_options_and_long_questions_keep_their_end(make_run) -> None:
    """The option texts were nowhere in the report, and a passage cut at 600 characters hid
    its question (the search missed it too)."""
    run = make_run("long", n_items=6, n_excluded=0)
    lines = []
    for line in (run / "items.jsonl").read_text().splitlines():
        r = json.loads(line)
        r["prefix"] = "Passage start. " + "More of the passage. " * 60 + "Who was John Kerry?:\n"
        r["continuations"] = ["A:senator\nB:<b>actor</b>\nC:judge\nD:pilot\n"] * len(r["orders"])
        lines.append(json.dumps(r))
    (run / "items.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    html = build_report(run).read_text(encoding="utf-8")
    assert (
        "<b>options</b> (original order): A:senator · B:&lt;b&gt;actor&lt;/b&gt; · C:judge" in html
    )
    assert "Who was John Kerry?" in html  # in the table's data and the case captions
    assert "Passage start. More of the passage." in html


def test_the_runs_table_of_a_cap_board_ranks_contamination_first(
    make_cap_run, tmp_path: Path
) -> None:
    """CAP's statistic leaks downwards; the table opened sorted by the estimate descending,
    which put the most contaminated run last (sweep audit)."""
    from contamscope.report.leaderboard import collect

    clean = make_cap_run("clean", contaminated=False)
    dirty = make_cap_run("dirty", contaminated=True)
    for run, model in ((clean, "hf:clean"), (dirty, "hf:dirty")):
        s = json.loads((run / "summary.json").read_text())
        s["model"].update(spec=model, fingerprint=f"synthetic:{model}")
        (run / "summary.json").write_text(json.dumps(s))
    entries = collect([clean, dirty])
    assert {e.model: e.estimate.leak_sign for e in entries} == {"hf:clean": -1, "hf:dirty": -1}
    html, _ = write_leaderboard([clean, dirty], None, "html")
    block = html.split('id="data-runs">', 1)[1].split("</script>", 1)[0]
    data = json.loads(block.replace("\\u003c", "<"))
    assert data["sort"] is None
    values = {r[0]: r[4][0] for r in data["rows"]}
    assert [r[0] for r in data["rows"]] == sorted(values, key=values.get)  # lowest first


def test_board_rows_are_models_not_spellings_of_specs(make_run, tmp_path: Path) -> None:
    """`hf:./tiny` given in two folders (two models) was one row, and one model given as
    `hf:/m`, `hf:/m/` and `hf:m` was three rows (sweep audit)."""
    from contamscope.report.leaderboard import collect

    def run(name: str, spec: str, fingerprint: str, bench: str) -> Path:
        path = make_run(name, n_items=24, leaked_every=2)
        s = json.loads((path / "summary.json").read_text())
        s["model"].update(spec=spec, fingerprint=f"{fingerprint}|float32|tok=1")
        s["benchmark"]["source"] = bench
        (path / "summary.json").write_text(json.dumps(s))
        return path

    runs = [
        run("a", "hf:./tiny", "local:tiny:aaaa1111bbbb", "x.csv"),
        run("b", "hf:./tiny", "local:tiny:cccc2222dddd", "x.csv"),
        run("c", "hf:/m", "local:m:eeee3333", "x.csv"),
        run("d", "hf:/m/", "local:m:eeee3333", "y.csv"),
        run("e", "hf:m", "local:m:eeee3333", "z.csv"),
        # served models: every one's identity was "openai", so all were one row named after
        # the first run's model, and another model's result showed under its name (QA)
        run("f", "openai:http://h:1/v1#base", "openai|http://h:1/v1|base|info=1", "x.csv"),
        run("g", "openai:http://h:1/v1#ft", "openai|http://h:1/v1|ft|info=1", "x.csv"),
        run("h", "openai:http://h:2/v1#base", "openai|http://h:2/v1|base|info=1", "x.csv"),
    ]
    rows = {(e.model, e.benchmark) for e in collect(runs)}
    assert rows == {
        ("hf:./tiny [aaaa1111]", "x.csv"),
        ("hf:./tiny [cccc2222]", "x.csv"),
        ("hf:/m", "x.csv"),
        ("hf:/m", "y.csv"),
        ("hf:/m", "z.csv"),
        ("openai:http://h:1/v1#base", "x.csv"),
        ("openai:http://h:1/v1#ft", "x.csv"),
        ("openai:http://h:2/v1#base", "x.csv"),
    }
    # a copy of a model's folder (the same fingerprint) run beside it on the same benchmark:
    # one row made its cells replicates in columns of their own, so no column held both it
    # and the other models (QA); a row per spec, and a line that they are the same weights
    copies = [
        run("i", "hf:/a/tiny", "local:tiny:ffff4444", "x.csv"),
        run("j", "hf:/b/tiny/", "local:tiny:ffff4444", "x.csv"),
        run("k", "hf:/b/tiny", "local:tiny:ffff4444", "y.csv"),
        run("l", "hf:/other", "local:other:9999", "x.csv"),
    ]
    got = collect(copies)
    assert [(e.model, e.benchmark) for e in got] == [
        ("hf:/a/tiny", "x.csv"),
        ("hf:/b/tiny", "x.csv"),
        ("hf:/b/tiny", "y.csv"),
        ("hf:/other", "x.csv"),
    ]
    text, _ = write_leaderboard(copies, None, "md")
    assert text.splitlines()[0].count("|") == 4  # model, x.csv, y.csv: no replicate columns
    assert re.search(
        r"- hf:/?a/tiny and hf:/?b/tiny are the same weights \(fingerprint local:t", text
    )


def test_leaderboard_says_once_which_benchmark_orders_its_options_by_convention(
    make_run, tmp_path: Path
) -> None:
    """A benchmark whose published orders follow writers' conventions beyond chance (the
    summary's ``natural_order.conventions``) and where a cell rejects H0 gets one line under
    the board, whatever the number of its cells; a shuffled one gets none, nor one without
    a signal."""
    a = make_run("a", n_items=24, leaked_every=2)
    b = make_run("b", n_items=24, leaked_every=1000)
    assert collect([b])[0].estimate.p_value > 0.05 and collect([a])[0].estimate.p_value < 0.05
    for run, model in ((a, "hf:one"), (b, "hf:two")):
        s = json.loads((run / "summary.json").read_text())
        s["model"].update(spec=model, fingerprint=f"synthetic:{model}")
        s.setdefault("natural_order", {"n_items": 0})["conventions"] = {
            "null_hypothesis": "the published option orders are shuffled",
            "level": 0.0125,
            "ordered_by_convention": True,
            "conventions": [
                {"convention": "sorted numbers", "items": 1261, "published": 838,
                 "rate": 838 / 1261, "chance": 2 / 24, "p_value": 0.0},
            ],
        }  # fmt: skip
        (run / "summary.json").write_text(json.dumps(s))
    entries = collect([a, b])
    md = to_markdown(entries)
    line = (
        "- synthetic.csv: its published option orders follow writers' conventions (sorted "
        "numbers: 838 of 1,261 items, 66.5% against 8.3% if shuffled)"
    )
    assert md.count(line) == 1
    assert "writers' conventions" not in to_markdown(collect([b]))  # no signal on the board
    write_leaderboard([a, b], tmp_path / "lb.html")
    assert "its published option orders follow writers&#x27; conventions" in (
        (tmp_path / "lb.html").read_text()
    )
    # each run's report shows the check as a table
    html = build_report(a).read_text(encoding="utf-8")
    assert "This benchmark orders its options by convention" in html
    assert "<tr><td>sorted numbers</td><td>1,261</td><td>838 (66.5%)</td><td>8.3%</td>" in html
    # p = 0 is written '<1e-300', escaped (a bare '<' opened a tag in the page; QA)
    assert "<td>&lt;1e-300</td>" in html and "<td><1e-300" not in html
    for run in (a, b):
        s = json.loads((run / "summary.json").read_text())
        s["natural_order"]["conventions"]["ordered_by_convention"] = False
        (run / "summary.json").write_text(json.dumps(s))
    assert "writers' conventions" not in to_markdown(collect([a, b]))


def test_leaderboard_names_the_runs_whose_algorithm_1_counts_ties_as_leaked(
    make_run, tmp_path: Path
) -> None:
    """A run analysed with --ties leaked (set on the run, or by reanalyse) counts more items
    in its cell, against a higher chance: the board says which runs did."""
    a, b = make_run("a", n_items=20), make_run("b", n_items=20, seed=1)
    for run, model in ((a, "hf:one"), (b, "hf:two")):
        s = json.loads((run / "summary.json").read_text())
        s["model"].update(spec=model, fingerprint=f"synthetic:{model}")
        (run / "summary.json").write_text(json.dumps(s))
    assert "tied for the maximum" not in to_markdown(collect([a, b]))  # the default: no line
    s = json.loads((b / "summary.json").read_text())
    s["config"]["ties"] = "leaked"
    (b / "summary.json").write_text(json.dumps(s))
    md = to_markdown(collect([a, b]))
    assert (
        "- Algorithm 1 counts an original order tied for the maximum as leaked (--ties leaked) "
        "in hf:two on synthetic.csv (1 of 2 permutation runs; the others count them as not "
        "leaked)"
    ) in md
    assert "leaked (--ties leaked) in every permutation run" in to_markdown(collect([b]))
    write_leaderboard([a, b], tmp_path / "lb.html")
    assert "tied for the maximum as leaked" in (tmp_path / "lb.html").read_text()


def test_leaderboard_says_where_one_benchmarks_runs_were_not_measured_alike(
    make_run, make_benbench_run, tmp_path: Path
) -> None:
    """Two models' cells of one benchmark scored under other templates (or BenBench n-grams
    of another length) measure other texts: the board said nothing, and read as a ranking of
    the models. A line names the setting and which runs used which value."""
    paper = {"name": "paper", "question": "{question}:\n", "option": "{label}:{text}\n"}
    runs = [make_run(name, n_items=20, seed=i) for i, name in enumerate("abc")]
    for run, model in zip(runs, ("hf:one", "hf:two", "hf:three"), strict=True):
        s = json.loads((run / "summary.json").read_text())
        s["model"].update(spec=model, fingerprint=f"synthetic:{model}")
        s["config"]["template"] = paper
        (run / "summary.json").write_text(json.dumps(s))
    assert "measured alike" not in to_markdown(collect(runs))  # one template: no line
    s = json.loads((runs[2] / "summary.json").read_text())
    s["config"]["template"] = {**paper, "name": "mmlu"}
    (runs[2] / "summary.json").write_text(json.dumps(s))
    line = (
        "- synthetic.csv (Option-permutation test): its runs were not measured alike (template: "
        "paper in hf:one, hf:two; mmlu in hf:three); a difference between these cells can come "
        "from the settings, not the models"
    )
    assert line in to_markdown(collect(runs))
    # two custom templates of one name are told apart by a hash of their definitions
    s["config"]["template"] = {**paper, "option": "({label}) {text}\n"}
    (runs[2] / "summary.json").write_text(json.dumps(s))
    md = to_markdown(collect(runs))
    assert "(template: paper #" in md and "; paper #" in md and " in hf:three)" in md
    write_leaderboard(runs, tmp_path / "lb.html")
    assert "its runs were not measured alike (template: paper #" in (
        (tmp_path / "lb.html").read_text()
    )
    # BenBench: the n-gram text laid out otherwise (another n names its own column already)
    bb = [make_benbench_run("bb1"), make_benbench_run("bb2")]
    for run, model, text in zip(bb, ("hf:one", "hf:two"), ("{question} {answer}", "{answer}")):
        s = json.loads((run / "summary.json").read_text())
        s["model"].update(spec=model, fingerprint=f"synthetic:{model}")
        s["config"]["ngram_text"] = text
        (run / "summary.json").write_text(json.dumps(s))
    md = to_markdown(collect(bb))
    assert (
        'its runs were not measured alike (ngram_text: "{question} {answer}" in hf:one; '
        '"{answer}" in hf:two)'
    ) in md


def test_subjects_too_small_to_flag_are_said_and_the_gap_plot_shades_the_null_range(
    make_run,
) -> None:
    """One item of 24 orders per subject: its three tests cannot give a p below 3/24 = 0.125,
    so "0 of 7 flagged" was no finding. And the gap histogram shaded the t interval that the
    tables no longer show (it contradicted the exact p-value), labelled "95% CI"."""
    from contamscope.cli.summary import subject_line

    run = make_run(n_items=9)  # items 2-8 analysed: subjects subj0..subj6, one item each
    summary = json.loads((run / "summary.json").read_text())
    block = summary["by_subject"]
    assert block["n_tested"] == 7 and block["n_too_few_items"] == 7
    assert [r["p_floor"] for r in block["subjects"]] == pytest.approx([3 / 24] * 7)
    line = subject_line(block)
    assert line is not None and line.endswith(
        "none of 7 subjects tested stands out. 7 of the 7 subjects have too few items to be "
        "flagged whatever the model did (their tests cannot reach p ≤ 0.05)"
    )
    html = build_report(run).read_text(encoding="utf-8")
    assert "7 of the 7 subjects have too few items to be flagged" in html
    assert "smallest p possible</th>" in html and "<td>0.125</td>" in html
    assert "95% of H0&#x27;s means" in html or "95% of H0's means" in html
    assert "95% CI</text>" not in html
    bigger = json.loads((make_run("big", n_items=60) / "summary.json").read_text())
    assert bigger["by_subject"]["n_too_few_items"] == 0  # 8 or more items a subject


def test_markdown_board_and_card_keep_names_that_read_as_html(make_run, tmp_path: Path) -> None:
    """`hf:my<model>` showed as `hf:my` once the Markdown was rendered (the tag vanished)."""
    from contamscope.report.card import write_card

    a = make_run("a", n_items=24)
    s = json.loads((a / "summary.json").read_text())
    s["model"].update(spec="hf:my<model>&amp;", fingerprint="synthetic:odd")
    (a / "summary.json").write_text(json.dumps(s))
    md = to_markdown(collect([a]))
    assert "| hf:my&lt;model>&amp;amp; |" in md and "<model>" not in md
    write_card([a], tmp_path / "card.md")
    card = (tmp_path / "card.md").read_text()
    assert (
        "hf:my&lt;model>&amp;amp;" in card
        and "# Benchmark Transparency Card: hf:my<model>" not in card
    )


def test_card_names_a_local_model_as_the_leaderboard_does(make_run, tmp_path: Path) -> None:
    """A card of a model loaded from a local folder printed that folder's absolute path in
    its title and its "Model:" line, for whoever reads the published card; it now names it
    as the leaderboard does (its last part), and a later update keeps no stale name."""
    from contamscope.report.card import write_card

    a = make_run("a", n_items=24)
    s = json.loads((a / "summary.json").read_text())
    s["model"].update(spec="hf:/home/alice/ckpts/tiny-sft", fingerprint="synthetic:local")
    (a / "summary.json").write_text(json.dumps(s))
    write_card([a], tmp_path / "card.md")
    card = (tmp_path / "card.md").read_text()
    assert card.startswith("# Benchmark Transparency Card: hf:tiny-sft\n")
    assert "Model: `hf:tiny-sft` (fingerprint `synthetic:local`)." in card
    assert "/home/alice" not in card
    # the model moved: the card is updated with the new default name, not the old one kept
    s["model"]["spec"] = "hf:/srv/models/tiny-sft-v2"
    (a / "summary.json").write_text(json.dumps(s))
    said: list[str] = []
    write_card([a], tmp_path / "card.md", said=said)
    assert (
        (tmp_path / "card.md")
        .read_text()
        .startswith("# Benchmark Transparency Card: hf:tiny-sft-v2\n")
    )
    assert not any("kept the model name" in x for x in said), said


def test_card_says_the_conventions_caveat_and_names_more_than_three_subjects(
    make_run, tmp_path: Path
) -> None:
    """The verdict and the board said a signal on a benchmark ordered by convention needs
    fresh items; the card showed it as a plain signal. Four subjects read as the whole
    benchmark."""
    from contamscope.report.card import write_card

    a = make_run("a", n_items=40, leaked_every=2)
    s = json.loads((a / "summary.json").read_text())
    s["benchmark"].setdefault("selection", {})["subjects"] = ["s1", "s2", "s3", "s4"]
    s["natural_order"] = {
        "conventions": {
            "ordered_by_convention": True,
            "level": 0.01,
            "conventions": [
                {"convention": "sorted numbers", "published": 20, "items": 20, "rate": 1.0,
                 "chance": 0.083, "p_value": 1e-12},
            ],
        }
    }  # fmt: skip
    (a / "summary.json").write_text(json.dumps(s))
    write_card([a], tmp_path / "card.md")
    card = " ".join((tmp_path / "card.md").read_text().split())
    assert "(s1, s2, s3 and 1 more)" in card
    assert (
        "its published option orders follow writers' conventions (sorted numbers: 20 of 20" in card
    )


def test_the_report_shows_the_leaderboards_number_for_a_run_with_items_set_aside(
    make_run, tmp_path: Path
) -> None:
    """The board's cell (Algorithm 1 on the items the verdict tests) appeared nowhere in the
    run's report, whose table counts every analysed item."""
    import re

    from contamscope.report.permutation import estimate
    from contamscope.report.rundata import load_run

    a = make_run("a", n_items=30)
    s = json.loads((a / "summary.json").read_text())
    rest = json.loads(json.dumps(s["statistics"]))
    rest["alg1"].update(excess=0.125, excess_ci=[-0.0391, 0.4853], rate=0.1667)
    s["natural_order"] = {"n_items": 2, "ids": ["subj1-5", "subj2-9"], "reasons": {"sorted numbers": 2}, "alg1_rate": 1.0, "alg1_count": 2, "alg1_chance": 0.0417,
                          "statistics_without": rest}  # fmt: skip
    (a / "summary.json").write_text(json.dumps(s))
    text = re.sub(r"<[^>]+>", "", build_report(a).read_text())
    cell = estimate(load_run(a))
    assert cell is not None and cell.text() == "+12.5 pp [-3.9, +48.5]"
    assert "+12.5 pp beyond it, 95% CI [-3.9, +48.5] (the leaderboard's cell)" in text


def test_one_p_value_is_not_said_to_be_holm_corrected(make_run, tmp_path: Path) -> None:
    """'0 of 1 run ... 0 after Holm's correction over all 1' and 'adjusted over the 1
    comparison': one test needs no correction, and the board, card and baseline note say so
    (QA)."""
    from contamscope.report.card import write_card
    from contamscope.report.leaderboard import BaselineComparison, comparisons_note

    one = collect([make_run("a", n_items=24)])
    p = one[0].estimate.p_value
    assert p is not None
    html = to_html(one)
    assert f"{int(p <= 0.05)} of 1 run with a p-value rejects H0 (no leakage) at 5%" in html
    assert "over all 1 " not in html
    write_card([make_run("b", n_items=24)], tmp_path / "card.md")
    card = (tmp_path / "card.md").read_text(encoding="utf-8")
    assert "The card has one p-value; it is" in card and "over all 1 " not in card
    row = BaselineComparison("m0", "m1", "b", 20, 0.1, 0.2, 0.3, 0.3, "no evidence", "c.html")
    assert "Holm: with one comparison, its p itself." in comparisons_note([row])
    assert "adjusted over the 2 comparisons" in comparisons_note([row, row])


def test_benchmarks_of_different_folders_are_named_from_their_common_folder(
    make_run, tmp_path: Path
) -> None:
    """MMLU's anatomy_test.csv and CMMLU's anatomy.csv showed as 'anatomy_test.csv' and
    'anatomy.csv': nothing said which benchmark each was (QA). Files of one folder keep
    their names alone."""
    runs = []
    for name, source in (
        ("a", "/bench/mmlu/test/anatomy_test.csv"),
        ("b", "/bench/cmmlu/test/anatomy.csv"),
        ("c", "/bench/mmlu/test/virology_test.csv"),
    ):
        run = make_run(name, n_items=24)
        s = json.loads((run / "summary.json").read_text())
        s["benchmark"]["source"] = source
        (run / "summary.json").write_text(json.dumps(s))
        runs.append(run)
    md, _ = write_leaderboard(runs, None, "md")
    head = [c.strip() for c in md.splitlines()[0].split("|")[2:-1]]
    assert head == [
        "mmlu/test/anatomy_test.csv",
        "cmmlu/test/anatomy.csv",
        "mmlu/test/virology_test.csv",
    ]
    one_folder, _ = write_leaderboard([runs[0], runs[2]], None, "md")
    assert [c.strip() for c in one_folder.splitlines()[0].split("|")[2:-1]] == [
        "anatomy_test.csv",
        "virology_test.csv",
    ]


def test_json_nested_too_deeply_is_one_line_and_leaves_the_run_out(make_run) -> None:
    """A record or summary nested 200,000 deep ended report, reanalyse and the whole
    leaderboard with a RecursionError traceback (security QA)."""
    from contamscope.store import RunDir

    deep = "[" * 200_000 + "]" * 200_000
    good = make_run("good", n_items=5, n_excluded=0)
    run = make_run("deep-record", n_items=5, n_excluded=0)
    with open(run / "items.jsonl", "a") as fh:
        fh.write('{"id": "deep", "x": ' + deep + "}\n")
    with pytest.warns(ContamscopeWarning, match=r"\(line 6: not valid JSON here \(nested too"):
        build_report(run)  # that record left out, said
    summary = make_run("deep-summary", n_items=5, n_excluded=0)
    (summary / "summary.json").write_text('{"a": ' + deep + "}")
    with pytest.raises(StoreError, match=r"summary\.json: not valid JSON here \(nested too"):
        build_report(summary)
    with pytest.raises(StoreError, match="nested too deeply"):
        RunDir(summary).finished_run("permutation")
    (summary / "settings.json").write_text('{"a": ' + deep + "}")
    with pytest.raises(StoreError, match="damaged .*nested too deeply"):
        RunDir(summary).stored_settings()
    left: list[Any] = []
    board = collect([good, run, summary], left)
    assert sorted(Path(e.run_dir) for e in board) == [run, good]  # (from summaries only)
    assert [Path(x.run_dir) for x in left] == [summary]
    assert all("nested too deeply" in x.reason for x in left), left


def test_files_that_are_no_regular_files_are_one_line(make_run, tmp_path: Path) -> None:
    """A FIFO as summary.json hung the leaderboard (as items.jsonl, report and compare), and a
    link to /dev/zero filled the memory (security QA): one line naming the file; the
    leaderboard leaves the run out."""
    import os

    from contamscope.store import RunDir

    good = make_run("good", n_items=5, n_excluded=0)
    fifo = make_run("fifo", n_items=5, n_excluded=0)
    (fifo / "summary.json").unlink()
    os.mkfifo(fifo / "summary.json")
    zero = make_run("zero", n_items=5, n_excluded=0)
    (zero / "items.jsonl").unlink()
    (zero / "items.jsonl").symlink_to("/dev/zero")
    left: list[Any] = []
    assert [Path(e.run_dir) for e in collect([good, fifo], left)] == [good]
    assert [Path(x.run_dir) for x in left] == [fifo] and "not a regular file" in left[0].reason
    for folder in (fifo, zero):
        with pytest.raises(StoreError, match="not a regular file"):
            build_report(folder)
    with pytest.raises(StoreError, match="not a regular file"):  # (a resume, a reanalyse)
        RunDir(zero).open(json.loads((zero / "settings.json").read_text()))
    # a number too large for a float in summary.json: one line, not an OverflowError
    big = make_run("big", n_items=5, n_excluded=0)
    summary = json.loads((big / "summary.json").read_text())
    summary["statistics"]["alpha"] = 10**400
    (big / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(DataError):
        build_report(big)


def test_a_damaged_record_is_named_by_its_line_in_items_jsonl(make_run) -> None:
    """The report blamed summary.json ('not a complete summary.json') for a damaged record of
    items.jsonl, and named no line (QA)."""
    run = make_run(n_items=10)
    items = run / "items.jsonl"
    records = [json.loads(x) for x in items.read_text().splitlines()]
    scored = next(i for i, r in enumerate(records) if not r.get("excluded"))
    records[scored]["p_value"] = "abc"
    items.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(DataError) as err:
        build_report(run)
    assert str(err.value).startswith(f"{items}:{scored + 1}: a damaged record (ValueError: ")
    assert "summary.json" not in str(err.value)
    assert str(err.value).endswith("re-run the command that wrote the folder: it scores a "
                                   "damaged record again")  # fmt: skip


def test_the_item_table_holds_whole_questions_without_the_templates_cue(make_run) -> None:
    """The table's data held each question cut to 600 characters (search missed a passage's
    middle, the tooltip was not the whole text), and the scored prefix with the template's
    cue: "The K-means algorithm::" (HTML QA). The cell is clipped by the page's script."""
    run = make_run("long", n_items=4, n_excluded=0)
    lines = []
    for i, line in enumerate((run / "items.jsonl").read_text().splitlines()):
        r = json.loads(line)
        if i == 0:
            r["prefix"] = "Passage. " + "More  of the\npassage. " * 80 + "Who was John Kerry?:\n"
        if i == 1:
            r["prefix"] = "The K-means algorithm::\n"
        lines.append(json.dumps(r))
    (run / "items.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = _table_data(build_report(run).read_text(encoding="utf-8"))
    col = [c["key"] for c in data["columns"]].index("question")
    assert data["columns"][col]["clip"] > 0  # what the cell shows
    questions = {r[0]: r[col] for r in data["rows"]}
    ids = [json.loads(x)["id"] for x in lines]
    long = questions[ids[0]]
    assert long == "Passage. " + "More of the passage. " * 80 + "Who was John Kerry?"
    assert questions[ids[1]] == "The K-means algorithm:"
    assert questions[ids[2]] == "Synthetic question number 2 <b>&amp;</b> </script> about topic 2?"
    # a template of the run's own: its text around {question} goes
    s = json.loads((run / "summary.json").read_text())
    s["config"]["template"] = {"question": "Q: {question}\nA:", "option": "{label}:{text}\n"}
    (run / "summary.json").write_text(json.dumps(s))
    r = json.loads(lines[3]) | {"prefix": "Q: Why  is it?\nA:"}
    (run / "items.jsonl").write_text("\n".join(lines[:3] + [json.dumps(r)]) + "\n")
    data = _table_data(build_report(run).read_text(encoding="utf-8"))
    assert data["rows"][3][col] == "Why is it?"


def test_figure_ids_are_unique_on_the_page_and_every_reference_finds_its_own(make_run) -> None:
    """matplotlib names its elements alike in every figure: one report repeated 131 ids, and a
    marker's use could find another figure's (HTML QA)."""
    page = build_report(make_run(n_items=20)).read_text(encoding="utf-8")
    figures = re.findall(r"<svg role=\"img\".*?</svg>", page, re.S)
    assert len(figures) >= 3
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), [x for x in set(ids) if ids.count(x) > 1][:5]
    for svg in figures:
        own = set(re.findall(r'\sid="([^"]+)"', svg))
        refs = set(re.findall(r'(?:url\(#|href="#)([^)"]+)', svg))
        assert refs and refs <= own  # markers and clip paths: within the figure


def test_the_mean_gaps_missing_ci_is_explained_on_the_page_and_the_terminal(make_run) -> None:
    """The mean gap's row showed no 95% CI although summary.json has one: left out on purpose
    (a t interval, which beside the exact p-value contradicted it; docs/statistics.md), which
    the page and the terminal now say (HTML QA)."""
    from contamscope.cli.common import console
    from contamscope.cli.summary import print_permutation_summary

    run = make_run(n_items=20)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["statistics"]["gap"]["null_range"] and summary["statistics"]["gap"]["ci"]
    page = build_report(run).read_text(encoding="utf-8")
    verdict = page[page.index('<section id="verdict">') :]
    verdict = verdict[: verdict.index("</section>")]
    row = next(r for r in verdict.split("<tr>") if r.startswith("<td>Mean log-prob gap"))
    assert "<td>–‡</td>" in row
    assert "‡ The mean gap's 95% CI is a t interval" in verdict
    assert "statistics.gap.ci" in verdict
    with console.capture() as cap:
        print_permutation_summary(summary)
    out = " ".join(cap.get().split())
    assert "is in summary.json (statistics.gap.ci)" in out


def test_every_format_ranks_the_models_by_leakage_not_by_the_order_given(
    make_run, tmp_path: Path
) -> None:
    """The Markdown and CSV boards listed the runs in the order the folders were given (QA);
    like the html they rank them, most leakage first."""
    clean = make_run("clean", n_items=24, leaked_every=1000)
    leaked = make_run("leaked", n_items=24, leaked_every=2)
    _as_clean_model(clean)
    entries = collect([clean, leaked])
    assert [e.model for e in entries] == ["hf:clean-model", "hf:synthetic-model"]
    assert entries[1].estimate.value > entries[0].estimate.value
    md = to_markdown(entries).splitlines()
    assert [x.split(" |")[0] for x in md[2:4]] == ["| hf:synthetic-model", "| hf:clean-model"]
    assert "- rows: ranked by synthetic.csv, most leakage first" in md
    write_leaderboard([clean, leaked], tmp_path / "lb.csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "lb.csv").read_text())))
    assert [r["model"] for r in rows] == ["hf:synthetic-model", "hf:clean-model"]
    write_leaderboard([clean, leaked], tmp_path / "lb.html")
    pivot = _table_data((tmp_path / "lb.html").read_text(), "leaderboard")
    assert [r[0] for r in pivot["rows"]] == ["hf:synthetic-model", "hf:clean-model"]


def test_a_card_json_nested_too_deeply_beside_out_is_one_line(tmp_path: Path) -> None:
    """`card -o dcard/card.md` with a card.json nested 100,000 deep beside it ended in a
    RecursionError traceback (security QA): it is no card of this model, said in one line."""
    from contamscope.report.card import _refuse_other_card

    out = tmp_path / "card.md"
    out.write_text("# x\n")
    out.with_suffix(".json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match="is not a contamscope card"):
        _refuse_other_card(out, {})


def test_an_inline_figure_with_chinese_text_says_nothing_of_fonts() -> None:
    """matplotlib warned on stderr that its font lacks each Chinese subject's glyphs; the SVG
    keeps text as text, which the browser draws in its own fonts (Chinese QA)."""
    import warnings

    from contamscope.report.plots import figure, to_svg

    with figure() as (fig, ax):
        ax.set_title("解剖学 anatomy")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            svg = to_svg(fig, "解剖学")
    assert "解剖学 anatomy" in svg and svg.startswith("<svg")


def test_a_card_command_killed_between_its_two_files_is_finished_by_the_next(
    make_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """card.md was written before card.json: a first card killed between the two left a
    card.md that the next `contamscope card` refused as "not a contamscope card" (kill QA).
    The JSON, which says whose card it is, comes first now: the next command finishes the
    card, and an update killed there keeps the developer's answers."""
    from contamscope.report import card as card_mod

    a = make_run("a", n_items=24)
    out = tmp_path / "card.md"
    written = card_mod.write_text_atomic

    def killed_after_one(path: Path, text: str) -> None:
        written(path, text)
        raise KeyboardInterrupt  # (as a kill between the two writes)

    for edit in (False, True):
        if edit:  # the developer answers the first question in the Markdown
            text = out.read_text(encoding="utf-8")
            out.write_text(text.replace("- answer: _not stated_", "- answer: no", 1), "utf-8")
        monkeypatch.setattr(card_mod, "write_text_atomic", killed_after_one)
        with pytest.raises(KeyboardInterrupt):
            card_mod.write_card([a], out)
        monkeypatch.undo()
        md, js, card = card_mod.write_card([a], out)
    assert card["developer_fields"]["benchmark_data_in_training"] == "no"
    assert "- answer: no" in md.read_text(encoding="utf-8")
    # a card.md alone (an earlier version killed between the two) is said as such
    js.unlink()
    with pytest.raises(ConfigError, match=r"card\.md is a card without its card\.json"):
        card_mod.write_card([a], out)
