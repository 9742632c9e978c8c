"""The membership run's report and leaderboard cell: the verdict follows the dataset test, the
cell is its AUC - 0.5 with the CI shifted alike, and the figures and table are there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contamscope.report import build_report, write_leaderboard
from contamscope.report.leaderboard import LeftOut
from contamscope.report.membership import estimate, verdict_line
from contamscope.report.rundata import load_run


def test_a_familiar_benchmark_is_a_signal_and_a_clean_one_is_not(make_membership_run) -> None:
    seen = load_run(make_membership_run("seen", shift=1.5))
    clean = load_run(make_membership_run("clean", shift=0.0, seed=3))
    d = seen.summary["statistics"]["dataset_test"]
    assert d["auc"] > 0.8 and d["p_value"] < 1e-4  # the pipeline's own test of the drawn values
    kind, sentence = verdict_line(seen.summary)  # type: ignore[misc]
    assert kind == "signal" and sentence.startswith("LEAK SIGNAL: the model is more familiar")
    # its level, which --alpha does not set (a run at --alpha 0.01 read it as a 1% signal; QA)
    assert "than with unseen references at 5% (AUC" in sentence
    assert f"AUC {d['auc']:.3f} [{d['auc_ci'][0]:.3f}, {d['auc_ci'][1]:.3f}]" in sentence
    dc = clean.summary["statistics"]["dataset_test"]
    assert dc["p_value"] > 0.05
    kind, sentence = verdict_line(clean.summary)  # type: ignore[misc]
    # the null hypothesis is not stated as a fact ("no evidence: the items are no more
    # familiar than ...", then "absence of evidence is not proof of absence"; QA)
    assert kind == "clean" and sentence.startswith(
        "no evidence that the benchmark items are more familiar than the unseen references at 5%"
    )
    # references written otherwise: said with the verdict
    unlike = seen.summary | {"reference_check": {"alike": False, "rows": [], "level": 0.01}}
    assert "the references are not written like the benchmark" in verdict_line(unlike)[1]  # type: ignore[index]
    assert verdict_line({"statistics": {}}) is None
    # the leaderboard cell: AUC - 0.5, its interval shifted alike, the test's p
    est = estimate(seen)
    assert est is not None and not est.percent
    assert est.value == pytest.approx(d["auc"] - 0.5)
    assert est.ci == pytest.approx((d["auc_ci"][0] - 0.5, d["auc_ci"][1] - 0.5))
    assert (est.p_value, est.n_items) == (d["p_value"], 30)
    assert est.text().startswith(f"{d['auc'] - 0.5:+.3f} [")


def test_membership_runs_are_ranked_on_the_board(make_membership_run) -> None:
    runs = [
        make_membership_run("seen", shift=1.5, model="hf:/models/seen"),
        make_membership_run("clean", shift=0.0, seed=3, model="hf:/models/clean"),
    ]
    left: list[LeftOut] = []
    text, _ = write_leaderboard(runs, None, "md", left)
    assert left == []
    rows = [line for line in text.splitlines() if line.startswith("| hf:")]
    assert [r.split(" |")[0] for r in rows] == ["| hf:seen", "| hf:clean"]  # more familiar first
    assert "membership AUC − 0.5" in text and "Mann-Whitney" in text
    assert "references are not written like" not in text
    # a run whose references differ from its benchmark items is named under the board
    summary = json.loads((runs[1] / "summary.json").read_text())
    row = {"feature": "natural option order", "p_value": 1e-9}
    summary["reference_check"] = {"alike": False, "level": 0.01, "rows": [row]}
    (runs[1] / "summary.json").write_text(json.dumps(summary))
    text, _ = write_leaderboard(runs, None, "md")
    assert (
        f"- hf:clean on bench_test.csv vs fresh.csv (r) ({runs[1]}): its references are not "
        "written like the "
        "benchmark items (natural option order differs)" in text
    )


def test_runs_against_other_references_get_columns_of_their_own(make_membership_run) -> None:
    """Runs against other reference sets shared one column and were ranked together, and one
    set's runs of two models fell in two (membership QA): the reference is in the column."""
    runs = [
        make_membership_run("a", shift=1.5, model="hf:/models/seen"),
        make_membership_run("b", shift=0.0, seed=3, model="hf:/models/clean"),
        make_membership_run("c", shift=0.5, seed=4, model="hf:/models/seen"),
    ]
    summary = json.loads((runs[2] / "summary.json").read_text())
    summary["reference"] = {"source": "refs/other.csv", "format": "mmlu-csv", "content_hash": "x9"}
    (runs[2] / "summary.json").write_text(json.dumps(summary))
    text, _ = write_leaderboard(runs, None, "md")
    header = next(line for line in text.splitlines() if line.startswith("| model |"))
    assert header.count(" vs fresh.csv (r)") == 1 and header.count(" vs other.csv (x9)") == 1
    assert header.count("|") == 4  # model and two columns: no replicate labels


def test_report_sections_and_figures(make_membership_run, tmp_path: Path) -> None:
    run = make_membership_run("seen", shift=1.5, fdr=True)
    path = build_report(run, out=tmp_path / "m.html")
    html = path.read_text(encoding="utf-8")
    for sid in ("verdict", "evidence", "items", "provenance"):
        assert f'<section id="{sid}">' in html
    assert html.count('class="fig"') == 3  # distributions, p-values, AUC per statistic
    assert "LEAK SIGNAL" in html and "(declared)" in html and ">q<" in html
    records = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    flagged = sum(1 for r in records if r.get("flag"))
    assert f"{flagged} of 30 benchmark items flagged at q ≤ 0.05" in html


def test_the_expected_false_flags_are_not_rounded_to_zero() -> None:
    """One item at a false-positive rate of 0.038 read 'about 0.0 of 1 items flagged' (QA)."""
    import numpy as np

    from contamscope.detectors.membership import DatasetTest, MembershipResult

    one = MembershipResult(
        np.array([0.5]), None, np.array([False]), 0.05, False, 25, DatasetTest.__new__(DatasetTest)
    )
    said = one.error_rate_statement()
    assert "about 0.038 of 1 item flagged if none leaked" in said, said
    many = MembershipResult(
        np.full(40, 0.5), None, np.zeros(40, bool), 0.05, False, 25, one.dataset
    )
    assert "about 1.5 of 40 items flagged" in many.error_rate_statement()


def test_the_terminal_names_k_only_for_the_statistics_that_use_it(make_membership_run) -> None:
    """'statistic gap (higher = more familiar; k=0.2)': the gap, loss and zlib use no k (QA)."""
    import io

    from rich.console import Console

    from contamscope.cli import membership
    from contamscope.cli.membership import print_membership_summary

    said = {}
    for statistic in ("loss", "min_k_pp"):
        summary = load_run(make_membership_run(statistic, statistic=statistic)).summary
        buffer = io.StringIO()
        real, membership.console = membership.console, Console(file=buffer, width=200)
        try:
            print_membership_summary(summary)
        finally:
            membership.console = real
        said[statistic] = next(ln for ln in buffer.getvalue().splitlines() if "statistic" in ln)
    assert "k=" not in said["loss"] and "k=0.2" in said["min_k_pp"], said


def _unlike(run: Path) -> Path:
    """The run's reference check found its references written otherwise than its items."""
    summary = json.loads((run / "summary.json").read_text())
    row = {
        "feature": "published in alphabetical order",
        "benchmark": {"rate": 0.5, "count": 15, "of": 30},
        "reference": {"rate": 0.0, "count": 0, "of": 60},
        "p_value": 1e-9,
    }
    summary["reference_check"] = {"alike": False, "level": 0.01, "rows": [row]}
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def test_a_verdict_over_unlike_references_is_styled_as_a_warning(
    make_membership_run, tmp_path: Path
) -> None:
    """A 'no evidence' verdict whose references differ from the items (the error rate does not
    hold) was in the green box of a clean result (HTML QA)."""
    clean = make_membership_run("clean", shift=0.0, seed=3)
    page = build_report(clean, out=tmp_path / "a.html").read_text(encoding="utf-8")
    assert '<div class="verdict clean">' in page
    page = build_report(_unlike(clean), out=tmp_path / "b.html").read_text(encoding="utf-8")
    assert '<div class="verdict caution">no evidence' in page
    assert ".verdict.caution{" in page  # styled


def test_board_notes_of_two_runs_of_one_model_and_benchmark_name_their_folders(
    make_membership_run,
) -> None:
    """Two runs of hf:tiny on one benchmark (two statistics) gave one note twice (HTML QA)."""
    runs = [
        _unlike(make_membership_run("loss", statistic="loss")),
        _unlike(make_membership_run("mink", statistic="min_k_pp")),
    ]
    text, _ = write_leaderboard(runs, None, "md")
    notes = [x for x in text.splitlines() if "references are not written like" in x]
    assert len(notes) == 2 and notes[0] != notes[1]
    assert f"({runs[0]})" in notes[0] and f"({runs[1]})" in notes[1]


def test_an_interval_that_disagrees_with_the_verdict_is_said_so(make_membership_run) -> None:
    """A run read LEAK SIGNAL beside an AUC interval reaching 0.5, unexplained (docs QA): the
    interval (two-sided bootstrap, widened for small sets) is not the test. Where they agree
    nothing is added."""
    seen = load_run(make_membership_run("seen", shift=1.5)).summary
    note = "the interval is computed apart from the test"
    kind, sentence = verdict_line(seen)  # type: ignore[misc]
    assert kind == "signal" and note not in sentence  # (its interval excludes 0.5)

    def with_ci(low: float, high: float, p: float) -> dict:  # type: ignore[type-arg]
        st = seen["statistics"]
        d = st["dataset_test"] | {"auc_ci": [low, high], "p_value": p}
        return seen | {"statistics": st | {"dataset_test": d}}

    kind, sentence = verdict_line(with_ci(0.45, 1.0, 0.02))  # type: ignore[misc]
    assert kind == "signal" and f"{note} (a two-sided bootstrap one" in sentence
    assert "reaches 0.5: the verdict is the test's" in sentence
    kind, sentence = verdict_line(with_ci(0.52, 1.0, 0.08))  # type: ignore[misc]
    assert kind == "clean" and "excludes 0.5: the verdict is the test's" in sentence
    kind, sentence = verdict_line(with_ci(0.40, 1.0, 0.08))  # type: ignore[misc]
    assert kind == "clean" and note not in sentence
