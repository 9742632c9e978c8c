"""Documented contracts of the validation tables (validate/report.py): each column holds the
number its header names, read off hand-made summaries (mutation QA)."""

from __future__ import annotations

from typing import Any

from contamscope.validate import markdown_table
from contamscope.validate.report import tables


def _metrics(**kw: Any) -> dict[str, Any]:
    base = {
        "accuracy": 0.625,
        "precision": 0.75,
        "recall": 0.5,
        "f1": 0.6,
        "auc": 0.8125,
        "fpr": 0.25,
        "fpr_ci": [0.0063, 0.8059],
    }
    return base | kw


def _summary(method: str = "permutation") -> dict[str, Any]:
    res: dict[str, Any] = {
        "epochs": 2,
        "detectors": {"alg1": _metrics(), "rank@0.05": _metrics(precision=None, fpr_ci=None)},
    }
    if method == "benbench":
        res["scores"] = {"perplexity": {"auc": 0.9375}}
        res["gaps"] = {"ppl": {"leaked": 1.5, "clean": 2.25, "gap": -0.75, "ci": [-1.2, -0.3]}}
    return {"validated_method": method, "results": [res]}


def _cells(table: tuple[str, list[str], list[list[str]]]) -> list[dict[str, str]]:
    _title, head, body = table
    return [dict(zip(head, row, strict=True)) for row in body]


def test_detector_table_columns_hold_their_metrics() -> None:
    """markdown_table / _detector_table: columns "accuracy, precision, recall, F1, AUC" and
    "FPR (clean half) [95% CI]" (the Clopper-Pearson interval, lower bound first); an
    undefined ratio is "-" (mutation QA)."""
    (table,) = tables(_summary())
    alg1, rank = _cells(table)
    assert alg1 == {
        "epochs": "2",
        "detector": "alg1",
        "accuracy": "0.625",
        "precision": "0.750",
        "recall": "0.500",
        "F1": "0.600",
        "AUC": "0.812",
        "FPR (clean half) [95% CI]": "0.250 [0.006, 0.806]",
    }
    assert rank["precision"] == "-" and rank["FPR (clean half) [95% CI]"] == "0.250"


def test_every_row_has_a_cell_per_column_and_a_separator_per_column() -> None:
    """markdown_table: a Markdown table per summary table, every row as many cells as the
    header (the score rows' AUC under AUC) and one separator cell per column (mutation QA)."""
    summary = _summary("benbench")
    det, gap = tables(summary)
    for _title, head, body in (det, gap):
        assert all(len(row) == len(head) for row in body)
    score_row = _cells(det)[-1]
    assert score_row["detector"] == "perplexity (score)" and score_row["AUC"] == "0.938"
    for part in markdown_table(summary).split("\n\n"):
        lines = part.splitlines()
        n = lines[0].count(" | ") + 1
        assert lines[1] == "|" + "---|" * n
        assert all(ln.count(" | ") + 1 == n for ln in lines[2:])


def test_detector_filter_keeps_the_named_detectors() -> None:
    """markdown_table(summary, detectors): only the named detectors' rows (mutation QA)."""
    (table,) = tables(_summary(), ["rank@0.05"])
    assert [row["detector"] for row in _cells(table)] == ["rank@0.05"]


def test_gap_table_columns_are_leaked_then_clean() -> None:
    """BenBench's dataset-level table: "leaked mean", "clean mean", "gap (leaked - clean)
    [95% CI]" (mutation QA)."""
    _det, gap = tables(_summary("benbench"))
    (row,) = _cells(gap)
    assert row["leaked mean"] == "1.500" and row["clean mean"] == "2.250"
    assert row["gap (leaked - clean) [95% CI]"] == "-0.750 [-1.200, -0.300]"


def test_cap_table_columns_follow_the_splits_and_the_verdict() -> None:
    """CAP table: "M a, C a, PCR a, M b, C b, PCR b" for --splits a,b, and "names trained
    split" yes when the verdict names the trained split (mutation QA)."""

    def reader(names: bool) -> dict[str, Any]:
        return {
            "splits": {
                "dev": {"m": 0.5, "c": 0.25, "pcr": 0.125},
                "test": {"m": 0.875, "c": 0.0625, "pcr": 0.375},
            },
            "pcr_diff": -0.25,
            "ci": [-0.5, -0.125],
            "p_value": 0.01,
            "verdict": "contaminated by test" if names else "no evidence",
            "names_trained_split": names,
        }

    summary = {
        "validated_method": "cap",
        "config": {"splits": ["dev", "test"]},
        "split": {"trained_split": "test"},
        "expected_verdict": "contaminated by test",
        "results": [{"epochs": 1, "readers": {"generate": reader(True), "loglik": reader(False)}}],
    }
    (table,) = tables(summary)
    gen, ll = _cells(table)
    assert (gen["M dev"], gen["C dev"], gen["PCR dev"]) == ("0.500", "0.250", "0.125")
    assert (gen["M test"], gen["C test"], gen["PCR test"]) == ("0.875", "0.062", "0.375")
    assert gen["names trained split"] == "yes" and ll["names trained split"] == "no"
    assert gen["PCR dev - PCR test [95% CI]"] == "-0.250 [-0.500, -0.125]"
