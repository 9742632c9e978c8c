"""Membership contracts read from a run's records, without a model: the per-statistic table,
the reference-likeness check, the comparison's flag counts and the survey's time estimate."""

from __future__ import annotations

import itertools
import types
from typing import Any

import pytest
from scipy.stats import fisher_exact

import contamscope.pipeline.survey as survey
from contamscope.data import LoadResult, MCQItem
from contamscope.pipeline import MembershipConfig, PermutationConfig
from contamscope.pipeline.membership import LIKENESS_LEVEL, _describe, reference_likeness


def _rec(role: str, i: int, value: float) -> dict[str, Any]:
    return {
        "id": f"{role}/item-{i}",
        "role": role,
        "excluded": None,
        "statistics": {"loss": value},
    }


BENCH_LOSS = [3.0, 4.0, 11.0]
REF_LOSS = [0.0, 1.0, 2.0]


def _records() -> list[dict[str, Any]]:
    return [_rec("benchmark", i, v) for i, v in enumerate(BENCH_LOSS)] + [
        _rec("reference", i, v) for i, v in enumerate(REF_LOSS)
    ]


def test_by_statistic_auc_reads_benchmark_against_reference() -> None:
    """mann_whitney: "Dataset-level test of DATASET_NULL with the AUC" of the benchmark's
    statistic against the references'; every benchmark value above every reference value is
    AUC 1 and the exact one-sided p 1 / C(6, 3) = 0.05 (mutation QA)."""
    out = _describe(_records(), "loss", MembershipConfig(statistic="loss", n_boot=200))
    assert out["declared"] is True
    assert out["benchmark_n"] == 3 and out["reference_n"] == 3
    assert out["auc"] == 1.0
    assert out["p_value"] == pytest.approx(1 / 20)


def test_by_statistic_median_is_the_middle_value() -> None:
    """_describe: "Means, medians and the dataset-level test of one statistic": the median of
    3, 4, 11 is 4 (their mean is 6) (mutation QA)."""
    out = _describe(_records(), "loss", MembershipConfig(statistic="loss", n_boot=200))
    assert out["benchmark_median"] == 4.0
    assert out["benchmark_mean"] == pytest.approx(6.0)
    assert out["reference_median"] == 1.0


def test_reference_likeness_level_is_bonferroni_over_rows() -> None:
    """reference_likeness: "rows are compared at LIKENESS_LEVEL over their number
    (Bonferroni)"; a row with p just under 5% but above 5% / rows does not make the sets differ
    (mutation QA)."""
    nat, shuf = ("1", "2", "3", "4"), ("3", "1", "4", "2")
    bench = [MCQItem(f"b{i}", "q", nat if i < 24 else shuf) for i in range(40)]
    refs = [MCQItem(f"r{i}", "q", nat if i < 14 else shuf) for i in range(40)]
    check = reference_likeness(bench, refs)
    rows = check["rows"]
    assert len(rows) > 1
    assert check["level"] == pytest.approx(LIKENESS_LEVEL / len(rows))
    natural = next(r for r in rows if r["feature"] == "natural option order")
    _, p = fisher_exact([[24, 16], [14, 26]], alternative="two-sided")
    assert natural["p_value"] == pytest.approx(p)
    assert LIKENESS_LEVEL / len(rows) < p < LIKENESS_LEVEL
    assert all(r["p_value"] > check["level"] for r in rows)
    assert check["alike"] is True


SURVEY_ITEMS = [
    MCQItem("a", "Pick a planet", ("Mars", "Venus", "Jupiter", "Earth"), subject="astro"),
    MCQItem("b", "How many legs has a spider?", ("4", "6", "8", "10"), subject="bio"),
    MCQItem("c", "Which are mammals?", ("Whale", "Bat", "Dog", "All of the above"), subject="bio"),
    MCQItem("d", "Pick a colour", ("red", "green", "blue", "yellow"), subject="art"),
]


class _Backend:
    spec = "fake"
    computes_on_local_cpu = True

    def describe(self) -> dict[str, Any]:
        return {"device": "cpu"}

    def score(self, reqs: list[Any]) -> list[Any]:
        return [types.SimpleNamespace(logprob=-float(i % 7)) for i, _ in enumerate(reqs)]


def test_measure_scales_detector_time_by_the_items_a_run_scores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """measure_permutation: the sample's time "is scaled by the run's cost over the sample's":
    one sampled item's detectors (1 s on a clock that ticks 1 s a reading) stand for the 3 items
    a run scores ("All of the above" is set aside), not the 4 given (mutation QA)."""
    cfg = PermutationConfig(mc_orders=99)
    loaded = LoadResult(SURVEY_ITEMS, [], "toy", "jsonl", "0" * 64, ["toy.jsonl"])
    found = survey.survey_permutation(loaded, SURVEY_ITEMS, cfg)
    assert list(found["excluded"]["by_id"]) == ["c"]
    clock = itertools.count()
    monkeypatch.setattr(survey, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    t = survey.measure_permutation(found, _Backend(), SURVEY_ITEMS, cfg, n_items=1)
    assert t["items"] == 1
    assert t["detector_seconds"] == pytest.approx(1.0 * 3 / 1)
