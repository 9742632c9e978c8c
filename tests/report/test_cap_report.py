"""CAP report sections and leaderboard cells: synthetic runs with known statistics (summary from
the pipeline's own build_cap_summary) and a real tiny-model run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contamscope.detectors.stats import exact_interval
from contamscope.detectors.verdict import p_text
from contamscope.report import build_report, collect, load_run, write_leaderboard
from contamscope.report.cap import estimate, mean_ci, split_values, why_unranked
from contamscope.report.leaderboard import to_csv, to_html, to_markdown


def _table_data(html: str, table: str = "items") -> dict[str, Any]:
    m = re.search(rf'<script type="application/json" id="data-{table}">(.*?)</script>', html, re.S)
    assert m, f"no table {table}"
    return json.loads(m.group(1).replace("<\\/", "</"))


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]


def test_contaminated_run_report(make_cap_run) -> None:
    run = make_cap_run(n_per_split=40, contaminated=True)
    s = json.loads((run / "summary.json").read_text())
    comp = s["statistics"]["generate"]["comparisons"][0]
    assert s["verdict"]["label"] == "likely contaminated by test" and comp["ci_high"] < 0

    html = build_report(run).read_text()
    sections = re.findall(r'<section id="([a-z-]+)">', html)
    assert sections == ["verdict", "evidence", "cases", "items", "provenance"]
    assert "CAP verdict: likely contaminated by test" in html
    assert f"PCR_train − PCR_test (generate)</td><td>{comp['pcr_diff']:+.3f}</td>" in html
    assert f"[{comp['ci_low']:+.3f}, {comp['ci_high']:+.3f}]" in html
    assert "H0</b>: PCR_reference = PCR_other" in html
    # figures: original vs modified, PCR per split, difference, reader heatmap, ablation, outcome
    assert html.count('<svg role="img" class="fig"') == 6
    for title in (
        "performance on original and modified inputs per split",
        "PCR difference with its confidence interval",
        "PCR ablation: scale / α (generated answers)",
    ):
        assert f"<title>{title}</title>" in html
    # per-item table: every record, user text escaped inside the JSON block
    items = _table_data(html)
    assert len(items["rows"]) == len(_records(run)) == 81
    assert "</script> topic" not in html and "&lt;b&gt;&amp;amp;&lt;/b&gt;" in html
    first = items["rows"][0]
    rec = _records(run)[0]
    assert first[:5] == [rec["id"], "train", rec["m"], rec["m_modified"], rec["c"]]
    assert first[5] == f"{chr(65 + rec['answer'])}: {rec['options'][rec['answer']]}"
    assert "no reference" in json.dumps(items["rows"][-1])
    # cases: right but inconsistent items, at most top_cases
    cases = re.findall(r"<details open><summary><b>([^<]+)</b>", html)
    assert 0 < len(cases) <= 8
    by_id = {r["id"]: r for r in _records(run)}
    assert all(by_id[c]["m"] == 1.0 and by_id[c]["c"] == 0.0 for c in cases)
    assert "Read from the generated answers" not in html  # no loglik reader: one reading
    assert "train.jsonl:7: missing field" in html  # skipped rows in provenance


def test_per_split_values_and_cis_match_the_summary(make_cap_run) -> None:
    run = make_cap_run(n_per_split=30, contaminated=True, seed=3)
    data = load_run(run)
    vals = split_values(list(data.iter_records()), data.summary)
    for split in ("train", "test"):
        st = data.summary["statistics"]["generate"]["splits"][split]
        ms = [x[0] for x in vals[split]]
        assert len(ms) == st["n"]
        assert sum(ms) / len(ms) == pytest.approx(st["m"])
        assert sum(x[2] for x in vals[split]) / len(ms) == pytest.approx(st["c"])
        # Clopper-Pearson, as the run's other rate intervals (Wilson covered under 95% at few
        # items: docs/statistics.md; statistics QA)
        assert mean_ci(ms) == exact_interval(int(sum(ms)), len(ms))
    assert mean_ci([1.0] * 3 + [0.0] * 11) == pytest.approx((0.0466, 0.5080), abs=1e-4)
    # continuous values: the expanded bootstrap interval around the mean, wider than the plain
    # percentile one (which covered 79-91% at 5 items: docs/cap.md)
    values = [0.1, 0.4, 0.35, 0.8, 0.5, 0.6]
    lo, hi = mean_ci(values)  # type: ignore[misc]
    assert lo < 0.458 < hi and lo > 0 and hi < 0.8
    x = np.asarray(values)
    plain = np.percentile(
        x[np.random.default_rng(0).integers(0, 6, size=(2000, 6))].mean(axis=1), [2.5, 97.5]
    )
    assert lo < plain[0] and hi > plain[1]
    assert mean_ci([]) is None


def test_estimate_is_the_pcr_difference_with_its_ci(make_cap_run) -> None:
    run = make_cap_run(n_per_split=20)
    s = json.loads((run / "summary.json").read_text())
    comp = s["statistics"]["generate"]["comparisons"][0]
    est = estimate(load_run(run))
    assert est is not None
    assert est.statistic == "CAP PCR_train − PCR_test (tanh)"
    assert est.value == comp["pcr_diff"] and est.ci == (comp["ci_low"], comp["ci_high"])
    assert est.p_value == comp["p_value"] and est.n_items == 40 and est.percent is False
    assert est.leak_sign == -1
    assert est.text() == f"{comp['pcr_diff']:+.3g} [{comp['ci_low']:+.3g}, {comp['ci_high']:+.3g}]"
    assert "two-sided" in est.legend and "Below 0" in est.legend


def test_clean_run_shows_no_evidence(make_cap_run) -> None:
    run = make_cap_run(n_per_split=40, contaminated=False, seed=1)
    html = build_report(run).read_text()
    s = json.loads((run / "summary.json").read_text())
    assert s["verdict"]["label"] == "no evidence"
    assert '<div class="verdict clean">CAP verdict: no evidence</div>' in html


def test_leaderboard_mixes_methods_without_comparing_them(make_run, make_cap_run, tmp_path) -> None:
    perm = make_run("perm", n_items=24, leaked_every=2)
    cap_a = make_cap_run("cap_a", contaminated=True)
    cap_b = make_cap_run("cap_b", contaminated=False, model="hf:/models/other", seed=2)
    entries = collect([perm, cap_a, cap_b])
    assert [e.method for e in entries] == [
        "Option-permutation test", "CAP (consistency amplification)",
        "CAP (consistency amplification)",
    ]  # fmt: skip
    assert entries[1].module == "contamscope.report.cap"
    md = to_markdown(entries)
    head = md.splitlines()[0]
    assert "synthetic.csv (Option-permutation test)" in head
    assert "finbench (CAP (consistency amplification))" in head
    assert "- CAP (consistency amplification) (CAP PCR_train − PCR_test (tanh)): CAP: PCR_ref" in md
    assert "- Option-permutation test (Algorithm-1 excess over chance): percentage points" in md
    e1 = entries[1].estimate
    assert f"| {e1.text()}, n={e1.n_items}, p={p_text(e1.p_value)} |" in md.splitlines()[3] + " |"
    csv_text = to_csv(entries)
    assert "CAP PCR_train − PCR_test (tanh)" in csv_text
    write_leaderboard([perm, cap_a, cap_b], tmp_path / "lb.html")
    html = (tmp_path / "lb.html").read_text()
    assert "<title>CAP: PCR (tanh) per run and split</title>" in html
    assert "hf:synthetic-cap | finbench" in html and "hf:other | finbench" in html
    assert html.count('<svg role="img" class="fig"') == 3  # 2 bar charts + CAP heatmap
    runs = _table_data(html, "runs")
    methods = [r[2] for r in runs["rows"]]
    assert methods == sorted(methods, key=lambda m: m != "Option-permutation test")
    caps = [r[4][0] for r in runs["rows"] if r[2].startswith("CAP")]
    assert caps == sorted(caps) and runs["sort"] is None  # most negative (most leakage) first
    assert "not comparable" in html and "two-sided" in html
    # the heatmap names its rows as the board's cells do: replicates by their folder, a
    # benchmark as the table shortens it (it said "data" for fineval/data, and one row per spec)
    again = make_cap_run("rep/cap_a", contaminated=True)
    other = make_cap_run("other", contaminated=True)
    s = json.loads((other / "summary.json").read_text())
    s["benchmark"]["source"] = str(tmp_path / "fineval" / "data")
    (other / "summary.json").write_text(json.dumps(s))
    html = to_html(collect([cap_a, again, other]))
    for row in ("finbench [cap_a]", "finbench [rep/cap_a]", "fineval/data"):
        assert f"hf:synthetic-cap | {row}</text>" in html, row


def test_tiny_model_cap_run_report(tiny_cap_run: Path) -> None:
    s = json.loads((tiny_cap_run / "summary.json").read_text())
    assert set(s["statistics"]) == {"generate", "loglik"}
    html = build_report(tiny_cap_run).read_text()
    assert "CAP verdict: " + s["verdict"]["label"] in html
    assert "PCR_train − PCR_test (loglik)" in html
    assert html.count('<svg role="img" class="fig"') == 6
    assert len(_table_data(html)["rows"]) == 6
    # the right-but-inconsistent section says which reader it reads (it said "none" beside a
    # loglik row with some; QA); a run without the loglik reader needs no such word
    cases = html[html.index('<section id="cases">') :]
    assert "Read from the generated answers; the log-likelihood reader's" in cases
    est = estimate(load_run(tiny_cap_run))
    comp = s["statistics"]["generate"]["comparisons"][0]
    if comp["verdict"] == "inconclusive":  # the random model's answers: M = C = 0, no cell
        assert est is None and why_unranked(load_run(tiny_cap_run)).startswith("inconclusive: ")
    else:
        assert est is not None and est.value == comp["pcr_diff"]


def test_runs_on_other_scales_are_other_columns_and_heatmaps(make_cap_run, tmp_path: Path) -> None:
    """A linear-scale re-analysis of a tanh run sat beside it as its replicate, under the
    first run's statistic and heatmap title."""
    import json

    a = make_cap_run("tanh")
    b = make_cap_run("linear")
    s = json.loads((b / "summary.json").read_text())
    s.setdefault("analysis", {})["scale"] = "linear"
    (b / "summary.json").write_text(json.dumps(s))
    entries = collect([a, b])
    assert [e.method for e in entries] == [
        "CAP (consistency amplification): CAP PCR_train − PCR_test (tanh)",
        "CAP (consistency amplification): CAP PCR_train − PCR_test (linear)",
    ]
    assert entries[0].benchmark == entries[1].benchmark == "/data/finbench"  # no replicate label
    write_leaderboard([a, b], tmp_path / "lb.html")
    html = (tmp_path / "lb.html").read_text()
    assert "<title>CAP: PCR (tanh) per run and split</title>" in html
    assert "<title>CAP: PCR (linear) per run and split</title>" in html


def test_a_split_whose_every_resample_is_alike_has_no_pcr_interval() -> None:
    """M = C = 0 on every item gave "PCR 0.762 [0.762, 0.762]": a precise-looking interval of
    tanh(1), which measures nothing (QA). It has none now, and says why."""
    from contamscope.report.cap import _pcr_cell, _pcr_ci

    alike = [(0.0, None, 0.0)] * 10
    assert _pcr_ci(alike, 0.01, "tanh") is None
    assert _pcr_cell(alike, 0.01, "tanh") == "(no CI: every resample alike)"
    varied = [(1.0, None, 0.0), (0.0, None, 1.0), (1.0, None, 1.0), (0.0, None, 0.0)] * 3
    low, high = _pcr_ci(varied, 0.01, "tanh") or (0.0, 0.0)
    assert low < high and _pcr_cell(varied, 0.01, "tanh") == f"[{low:.3f}, {high:.3f}]"
    assert _pcr_cell([], 0.01, "tanh") == "–"


def test_three_splits_show_the_comparison_the_verdict_rests_on(make_cap_run, tmp_path) -> None:
    """With --splits train,dev,test the board and the card took the first comparison (train −
    dev, raw p) for a run its own verdict called contaminated by test, and left a run off the
    board whose first comparison alone was inconclusive (statistics QA). Runs of those splits
    share one column whichever split decides each (re-test QA), the cell's comparison named
    under the board."""
    generic = "CAP PCR_train − PCR_x, x the split its verdict rests on of dev, test (tanh)"
    run = make_cap_run("three", n_per_split=30, splits=("train", "dev", "test"), seed=3)
    s = json.loads((run / "summary.json").read_text())
    comps = {c["other"]: c for c in s["statistics"]["generate"]["comparisons"]}
    assert list(comps) == ["dev", "test"]  # dev first, as --splits gave them
    assert s["verdict"]["label"] == "likely contaminated by test"
    est = estimate(load_run(run))
    assert est is not None and est.statistic == generic
    test = comps["test"]
    assert est.value == test["pcr_diff"] and est.ci == (test["ci_low"], test["ci_high"])
    assert est.p_value == test["p_adjusted"] != test["p_value"]  # Holm over the two
    assert est.warning.startswith("the cell is PCR_train − PCR_test (contaminated by test)")
    assert "Holm-adjusted" in est.legend

    # dev answered all wrong and inconsistently: its comparison is inconclusive, test's is not
    blank = make_cap_run("blank", n_per_split=30, splits=("train", "dev", "test"), blank="dev")
    s = json.loads((blank / "summary.json").read_text())
    verdicts = [c["verdict"] for c in s["statistics"]["generate"]["comparisons"]]
    assert verdicts == ["inconclusive", "contaminated by test"]
    est = estimate(load_run(blank))
    assert est is not None and "PCR_train − PCR_test" in est.warning

    # no split named: the decided comparison of smallest adjusted p, never an inconclusive one
    clean = make_cap_run(
        "clean",
        n_per_split=30,
        splits=("train", "dev", "test"),
        contaminated=False,
        seed=1,
        model="hf:/models/another-cap",
    )
    s = json.loads((clean / "summary.json").read_text())
    comps = s["statistics"]["generate"]["comparisons"]
    assert all(c["verdict"] == "no evidence" for c in comps), [c["verdict"] for c in comps]
    best = min(comps, key=lambda c: c["p_adjusted"])
    est = estimate(load_run(clean))
    assert est is not None and est.p_value == best["p_adjusted"] and est.statistic == generic
    assert est.warning.startswith(f"the cell is PCR_train − PCR_{best['other']} (no evidence)")
    only = make_cap_run("only", n_per_split=30, splits=("train", "dev", "test"), blank="test")
    only_comps = json.loads((only / "summary.json").read_text())["statistics"]["generate"]
    assert [c["verdict"] for c in only_comps["comparisons"]][1] == "inconclusive"
    est = estimate(load_run(only))
    assert est is not None and "PCR_train − PCR_dev" in est.warning

    # one benchmark, one column: the contaminated run and the clean one ranked side by side
    entries = collect([run, clean])
    assert len({e.method for e in entries}) == 1  # one column title
    assert [e.benchmark for e in entries] == ["/data/finbench"] * 2  # one column, two models
    board = to_markdown(entries)
    assert "the cell is PCR_train − PCR_test (contaminated by test)" in board


def test_replies_of_another_model_are_said_by_report_card_and_reanalyse(
    tiny_cap_run: Path, tmp_path: Path
) -> None:
    """A served run whose replies named another model (a router's fallback) said so once, as
    it ran; the report, the card people publish and reanalyse then said nothing (QA)."""
    import shutil
    from html import escape

    from cli_runner import run_cli

    from contamscope.report import write_card

    shutil.copytree(tiny_cap_run.parent, tmp_path / "root")
    run = tmp_path / "root" / "run"
    summary = json.loads((run / "summary.json").read_text())
    summary["model"] |= {"spec": "openai:http://127.0.0.1:9/v1#tiny",
                         "answered_as": {"tiny": 2, "gpt-x": 12, "tiny-2024-07-18": 8}}  # fmt: skip
    (run / "summary.json").write_text(json.dumps(summary))
    said = (
        "12 of the 22 server replies of the command that last wrote the run named another model "
        "than 'tiny': 'gpt-x' (12) (a router's fallback?); their numbers are recorded as those "
        "of 'tiny'"
    )
    html = build_report(run).read_text()
    assert escape(said) in " ".join(html.split())
    write_card([run], tmp_path / "card.md")
    assert said in " ".join((tmp_path / "card.md").read_text().split())
    again = run_cli("reanalyse", str(run), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"warning: {run}: {said}" in " ".join(again.stderr.split())
    # a dated snapshot of the model asked for is the model: nothing said
    summary["model"]["answered_as"] = {"tiny": 2, "tiny-2024-07-18": 8}
    (run / "summary.json").write_text(json.dumps(summary))
    assert "another model" not in build_report(run).read_text()
