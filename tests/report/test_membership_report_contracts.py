"""Documented contracts of the membership report's numbers and of `contamscope compare` on two
membership runs (docs/output.md, "Two membership runs"), on run folders shaped as the pipeline
writes them (tests/report/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contamscope.errors import ConfigError
from contamscope.pipeline.compare import compare_runs
from contamscope.report.membership import _by_statistic, _unlike_text, _value, verdict_line


def _summary(auc: float, p: float, ci: list[float] | None) -> dict[str, Any]:
    return {"statistics": {"dataset_test": {"auc": auc, "p_value": p, "auc_ci": ci}}}


def test_the_verdict_is_a_signal_at_p_equal_to_five_percent() -> None:
    """verdict_line: "signal (the dataset test rejects H0 at 5% with AUC above 0.5)"; the
    report's own reading says "Leak signal: p ≤ 0.05": p = 1 / C(6, 3) = 0.05 exactly, the
    smallest one-sided p of 3 against 3 items, is a signal (mutation QA)."""
    line = verdict_line(_summary(1.0, 0.05, None))
    assert line is not None and line[0] == "signal"


def test_an_interval_whose_lower_end_is_one_half_reaches_it() -> None:
    """verdict_line: a signal whose interval "reaches 0.5" says the verdict is the test's; a
    lower end of exactly 0.500 reaches 0.5 (mutation QA)."""
    line = verdict_line(_summary(0.7, 0.01, [0.5, 0.9]))
    assert line is not None and line[0] == "signal"
    assert "reaches 0.5" in line[1]


def test_a_reference_check_row_at_its_level_is_named_as_differing() -> None:
    """reference_likeness says the sets are alike when every row's p is *above* the level, so
    a row at p = level differs, and the leaderboard warning names it (mutation QA)."""
    summary = {
        "reference_check": {
            "alike": False,
            "level": 0.01,
            "rows": [
                {"feature": "natural option order", "p_value": 0.01},
                {"feature": "4 options", "p_value": 0.5},
            ],
        }
    }
    text = _unlike_text(summary)
    assert "(natural option order differs)" in text
    assert "4 options" not in text


def test_a_combined_run_shows_each_item_s_combined_score() -> None:
    """docs/output.md: ``combined_score`` is "--statistic combined only: the item's combined
    score", and the item table's column is "the declared statistic": a combined run's value is
    that score (its records hold no statistic named combined) (mutation QA)."""
    rec = {"statistics": {"min_k_pp": 0.3, "gap": 1.2}, "combined_score": 2.5}
    assert _value(rec, "combined") == 2.5
    assert _value(rec, "min_k_pp") == 0.3


def test_a_combined_run_s_own_test_counts_its_benchmark_and_references_apart() -> None:
    """_by_statistic: the combined run's own test is its dataset test, with its items
    "benchmark / references" (n_benchmark and n_reference) in that order (mutation QA)."""
    st = {
        "statistic": "combined",
        "dataset_test": {"auc": 0.6, "auc_ci": None, "p_value": 0.2, "n_benchmark": 30,
                         "n_reference": 60},
        "by_statistic": {},
    }  # fmt: skip
    row = _by_statistic(st)["combined"]
    assert (row["benchmark_n"], row["reference_n"]) == (30, 60)


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]


def test_compare_counts_the_items_only_one_run_scored(make_membership_run: Any) -> None:
    """docs/output.md: ``counts`` has ``only_a_benchmark`` ... ``only_b_reference``: A scored
    30 benchmark and 60 reference items, B 20 and 40 of the same ids; 10 and 20 are A's only,
    none B's; each side's ``items_scored`` is its own run's (mutation QA)."""
    a = make_membership_run("a", n_bench=30, n_ref=60, seed=0)
    b = make_membership_run("b", n_bench=20, n_ref=40, seed=1)
    result = compare_runs(a, b)
    assert result["counts"] == {
        "benchmark": 20,
        "reference": 40,
        "only_a_benchmark": 10,
        "only_a_reference": 20,
        "only_b_benchmark": 0,
        "only_b_reference": 0,
    }
    assert result["a"]["items_scored"] == {"benchmark": 30, "reference": 60}
    assert result["b"]["items_scored"] == {"benchmark": 20, "reference": 40}


def test_compare_pairs_every_item_with_each_run_s_own_p_values(make_membership_run: Any) -> None:
    """docs/output.md: ``paired_items`` per item ``id``, ``role``, each statistic under A and B,
    ``p_a``, ``p_b``: every paired benchmark and reference item, each with its own run's
    numbers (mutation QA)."""
    a = make_membership_run("a", n_bench=10, n_ref=20, seed=0)
    b = make_membership_run("b", n_bench=10, n_ref=20, seed=1, shift=1.0)
    result = compare_runs(a, b)
    pairs = {p["id"]: p for p in result["paired_items"]}
    assert [p["role"] for p in result["paired_items"]].count("reference") == 20
    assert len(pairs) == 30
    for who, run in (("a", a), ("b", b)):
        for rec in _records(run):
            pair = pairs[rec["id"]]
            assert pair[f"loss_{who}"] == rec["statistics"]["loss"]
            assert pair[f"p_{who}"] == rec.get("p_value")


def test_compare_refuses_reference_files_of_another_content(make_membership_run: Any) -> None:
    """docs/output.md: "Runs of other benchmark or reference files ... are refused": two runs
    of a reference file of one name but another content (its SHA-256) do not compare
    (mutation QA)."""
    a = make_membership_run("a", seed=0)
    b = make_membership_run("b", seed=1)
    summary = json.loads((b / "summary.json").read_text())
    summary["reference"]["content_hash"] = "edited"
    (b / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ConfigError, match="read different reference files"):
        compare_runs(a, b)
