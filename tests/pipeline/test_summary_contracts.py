"""Documented contracts of a permutation run's summary (pipeline/permutation_summary.py) and of
the comparison of two permutation runs (pipeline/compare.py), each checked against a value
computed here, independently of the code under test (mutation QA): exact fractions, the formula
a docstring states written out, or counts taken from the records built here."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from contamscope.data.items import LoadResult, MCQItem
from contamscope.detectors.permutation import Algorithm2, score_item
from contamscope.detectors.verdict import VERDICT_ALPHA
from contamscope.pipeline import compare_runs
from contamscope.pipeline.permutation import PermutationConfig
from contamscope.pipeline.permutation_summary import (
    SUBJECT_LEVEL,
    build_summary,
    compute_convention_summary,
    natural_order_summary,
    subject_summary,
)

FOREST = Algorithm2(n_estimators=5)  # the forest's size does not enter these tests
TOP = [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]  # 3 options: the original order ranked first
LOW = [-6.0, -1.0, -2.0, -3.0, -4.0, -5.0]  # 3 options: the original order ranked last


def _rec(item_id: str, lp: list[float], subject: str | None = None) -> dict[str, Any]:
    """A stored record of an item scored under all its orders (as the pipeline writes it)."""
    n_options = {2: 2, 6: 3, 24: 4}[len(lp)]
    d = score_item(lp, n_options=n_options, exhaustive=True, alg2=FOREST).to_dict()
    orders = [list(o) for o in itertools.permutations(range(n_options))]
    return d | {"id": item_id, "subject": subject, "logprobs": lp, "orders": orders}


def _bh(ps: list[float]) -> list[float]:
    """Benjamini-Hochberg q-values written out: q_i = min over p_j >= p_i of p_j m / rank_j."""
    m = len(ps)
    ranked = sorted(ps)
    return [min(min(1.0, ranked[j] * m / (j + 1)) for j in range(m) if ranked[j] >= p) for p in ps]


# --------------------------------------------------------------------------- permutation_summary


def test_natural_order_chance_is_one_over_the_number_of_orders() -> None:
    """The natural-order block's ``alg1_chance``: how often Algorithm 1 (the original order
    strictly on top) would flag the items by chance, 1 / (number of orders) per item: 1/3! for
    a 3-option item, 1/4! for a 4-option one, averaged (mutation QA)."""
    four = [-1.0, *(-2.0 - i for i in range(23))]
    records = [_rec("n1", TOP), _rec("n2", four)]
    items = {
        "n1": MCQItem(id="n1", question="q", options=("1", "2", "3")),
        "n2": MCQItem(id="n2", question="q", options=("10", "20", "30", "40")),
    }
    nat = natural_order_summary(records, items, 0.05)
    assert nat["n_items"] == 2 and nat["alg1_count"] == 2
    want = (Fraction(1, math.factorial(3)) + Fraction(1, math.factorial(4))) / 2
    assert nat["alg1_chance"] == pytest.approx(float(want), rel=1e-12)


def test_natural_order_reasons_do_not_depend_on_the_items_order() -> None:
    """The block's ``reasons`` (which the verdict sentence lists): most items first, ties by
    name; the same items shuffled listed them otherwise (equivalence QA)."""
    items = {
        "t": MCQItem(id="t", question="q", options=("True, True", "True, False", "False, True")),
        "n": MCQItem(id="n", question="q", options=("1", "2", "3")),
    }
    recs = [_rec("t", TOP), _rec("n", LOW)]
    first = natural_order_summary(recs, items, 0.05)["reasons"]
    again = natural_order_summary(recs[::-1], items, 0.05)["reasons"]
    assert list(first) == list(again) == sorted(first) and len(first) == 2


def test_subjects_are_flagged_by_benjamini_hochberg_q_not_raw_p() -> None:
    """subject_summary: "A subject is flagged at q <= SUBJECT_LEVEL" (Benjamini-Hochberg over
    the subjects tested). Subject B's p is below 5% but its q, over 5 subjects, is not: B is
    not flagged (mutation QA)."""
    records = []
    for s in "ABCDE":
        for j in range(4):
            lp = TOP if s == "A" or (s == "B" and j < 3) else LOW
            records.append(_rec(f"{s}{j}", lp, s))
    block = subject_summary(records, set(), 0.05, {})
    assert block is not None and block["level"] == SUBJECT_LEVEL
    rows = {r["subject"]: r for r in block["subjects"]}
    subjects = sorted(rows)
    qs = dict(zip(subjects, _bh([rows[s]["p_value"] for s in subjects]), strict=True))
    assert rows["B"]["p_value"] <= SUBJECT_LEVEL < qs["B"]  # the case that tells them apart
    for s in subjects:
        assert rows[s]["q_value"] == qs[s]
        assert rows[s]["flagged"] is (qs[s] <= SUBJECT_LEVEL)
    assert [s for s in subjects if rows[s]["flagged"]] == ["A"] and block["n_flagged"] == 1


def test_too_few_items_counts_subjects_whose_floor_is_above_the_level() -> None:
    """subject_summary's ``p_floor``: "the number of tests times the product of 1/orders over
    its items ... (a subject above the level cannot be flagged, however its items rank)";
    ``n_too_few_items`` counts those. X's floor 3/(6 x 6 x 2) = 0.042 is below 5%, Y's
    3/(6 x 6) = 0.083 above: one subject has too few items (mutation QA)."""
    records = [
        _rec("X0", TOP, "X"),
        _rec("X1", TOP, "X"),
        _rec("X2", [-1.0, -2.0], "X"),
        _rec("Y0", LOW, "Y"),
        _rec("Y1", LOW, "Y"),
    ]
    block = subject_summary(records, set(), 0.05, {})
    assert block is not None
    rows = {r["subject"]: r for r in block["subjects"]}
    orders = {"X": [6, 6, 2], "Y": [6, 6]}
    floors = {}
    for s, ns in orders.items():
        n_tests = sum(p is not None for p in rows[s]["p_values"].values())
        assert n_tests == 3
        floors[s] = n_tests * math.prod(Fraction(1, n) for n in ns)
        assert rows[s]["p_floor"] == pytest.approx(float(floors[s]), rel=1e-12)
    assert SUBJECT_LEVEL / 2 < floors["X"] <= SUBJECT_LEVEL < floors["Y"]
    assert block["n_too_few_items"] == sum(f > SUBJECT_LEVEL for f in floors.values()) == 1


def test_convention_level_is_bonferroni_over_the_conventions_tested() -> None:
    """compute_convention_summary: per convention "an exact (Poisson-binomial) p-value", and
    the benchmark is ordered by convention when one p reaches VERDICT_ALPHA split (Bonferroni)
    over the conventions found. Two conventions: level 0.025; three sorted-number items, each
    published in one of its 2 sorted orders of 6, have p = (1/3)^3 = 0.037 > 0.025
    (mutation QA)."""
    options = [["1", "2", "3"]] * 3 + [["a", "c", "b"]] * 30
    cs = compute_convention_summary(options)
    rows = {r["convention"]: r for r in cs["conventions"]}
    assert set(rows) == {"sorted numbers", "alphabetical"}
    assert rows["sorted numbers"]["p_value"] == pytest.approx(float(Fraction(1, 3) ** 3), rel=1e-12)
    assert rows["alphabetical"]["p_value"] == 1.0  # none of the 30 published in it
    assert cs["level"] == VERDICT_ALPHA / 2
    assert cs["ordered_by_convention"] is False


def test_items_analysed_counts_the_included_items_only() -> None:
    """summary.json's counts: ``items_selected`` every record, ``items_analysed`` those not
    excluded (the excluded listed under ``excluded_items``) (mutation QA)."""
    items = [
        MCQItem(id=f"i{k}", question=f"Question {k}?", options=opts, subject="s")
        for k, opts in enumerate(
            [("cat", "dog", "eel"), ("red", "tan", "sky"), ("oak", "elm", "fir"), ("x", "y", "z")]
        )
    ]
    records = [_rec("i0", TOP, "s"), _rec("i1", LOW, "s"), _rec("i2", LOW, "s")]
    records.append(
        {"id": "i3", "subject": "s", "n_options": 3, "excluded": "options not exchangeable: x"}
    )
    loaded = LoadResult(
        items=items, problems=[], source="t.csv", format="mmlu-csv", content_hash="0"
    )
    settings = {"selection": {}, "config": {}}
    summary = build_summary(
        loaded, records, settings, PermutationConfig(), {"spec": "m"}, {}, conventions={}
    )
    included = [r for r in records if not r.get("excluded")]
    assert summary["counts"]["items_selected"] == len(records) == 4
    assert summary["counts"]["items_analysed"] == len(included) == 3
    assert [e["id"] for e in summary["excluded_items"]] == ["i3"]
    assert summary["statistics"]["n_items"] == 3


# --------------------------------------------------------------------------- compare.py


def _write_run(path: Path, records: list[dict[str, Any]], natural: list[str]) -> Path:
    """A permutation run folder as the pipeline writes it (settings, items, summary)."""
    path.mkdir(parents=True)
    (path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    settings = {"method": "permutation", "run_schema": 1, "model": "hf:m"}
    (path / "settings.json").write_text(json.dumps(settings))
    summary = {
        "schema": "contamscope.permutation.summary/1",
        "model": {"spec": f"hf:{path.name}", "fingerprint": path.name},
        "benchmark": {"source": "t.csv", "format": "mmlu-csv", "content_hash": "0"},
        "config": {"alpha": 0.05},
        "statistics": {},
        "natural_order": {"n_items": len(natural), "ids": natural},
    }
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def _runs(tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    """Two runs: subject s1 (10 items, 2 ranked first by both models, 1 by B alone), s2 (3
    items, alike), s3 (4 items, a natural option order in A's run); ``a-only`` scored by A
    alone, ``drawn`` by both under other orders."""
    a: list[dict[str, Any]] = []
    b: list[dict[str, Any]] = []
    for i in range(10):
        lp_a = TOP if i < 2 else LOW
        lp_b = TOP if i < 3 else LOW
        a.append(_rec(f"s1-{i}", lp_a, "s1"))
        b.append(_rec(f"s1-{i}", lp_b, "s1"))
    for subject, n in (("s2", 3), ("s3", 4)):
        for i in range(n):
            a.append(_rec(f"{subject}-{i}", LOW, subject))
            b.append(_rec(f"{subject}-{i}", LOW, subject))
    a.append(_rec("a-only", LOW, "s1"))
    drawn_a, drawn_b = _rec("drawn", LOW, "s2"), _rec("drawn", LOW, "s2")
    drawn_b["orders"] = drawn_b["orders"][::-1]  # other orders in B's run
    a.append(drawn_a)
    b.append(drawn_b)
    natural = [f"s3-{i}" for i in range(4)]
    want = {
        "paired": 17,
        "only_a": 1,
        "only_b": 0,
        "other_orders": 1,
        "natural_order": 4,
        "b_only": ["s1-2"],
        "by_subject_n": {"s1": 10, "s2": 3},
    }
    return _write_run(tmp_path / "a", a, natural), _write_run(tmp_path / "b", b, []), want


def test_compare_counts_items_only_in_a_apart_from_those_under_other_orders(
    tmp_path: Path,
) -> None:
    """compare_runs pairs "the items both runs scored under the same orders"; its counts say
    how many A scored that B did not (``only_a``) and how many both scored under other orders
    (``other_orders``), each item in one count (mutation QA)."""
    run_a, run_b, want = _runs(tmp_path)
    counts = compare_runs(run_a, run_b)["counts"]
    assert counts == {k: want[k] for k in counts}
    a_ids = {json.loads(x)["id"] for x in (run_a / "items.jsonl").read_text().splitlines()}
    b_ids = {json.loads(x)["id"] for x in (run_b / "items.jsonl").read_text().splitlines()}
    assert counts["only_a"] == len(a_ids - b_ids)
    assert counts["paired"] + counts["other_orders"] + counts["only_a"] == len(a_ids)


def test_compare_lists_items_ranked_first_by_b_alone(tmp_path: Path) -> None:
    """compare_runs' ``items.alg1_b_only``: the "items flagged by one model only": Algorithm 1
    fires for B and not for A; items both flag are not listed (mutation QA)."""
    run_a, run_b, want = _runs(tmp_path)
    result = compare_runs(run_a, run_b)
    paired = result["paired_items"]
    by_hand = [p["id"] for p in paired if p["alg1_b"] and not p["alg1_a"]]
    assert result["items"]["alg1_b_only"] == by_hand == want["b_only"]
    assert result["items"]["alg1_a_only"] == []
    assert sum(p["alg1_a"] and p["alg1_b"] for p in paired) == 2  # flagged by both: not listed


def test_compare_by_subject_leaves_out_natural_orders_and_counts_floors(tmp_path: Path) -> None:
    """compare_runs tests per subject "on its items without a natural option order"; a
    subject "whose floor exceeds the level cannot be flagged" and is counted in
    ``n_too_few_items``: the floor 3 x 2 / 2^n of n paired items is 0.75 for s2's 3 items,
    0.0059 for s1's 10 (whose p is 1, not too few) (mutation QA)."""
    run_a, run_b, want = _runs(tmp_path)
    block = compare_runs(run_a, run_b)["by_subject"]
    assert block is not None
    rows = {r["subject"]: r for r in block["rows"]}
    assert {s: r["n_items"] for s, r in rows.items()} == want["by_subject_n"]  # no s3
    floors = {s: 3 * 2.0 / 2**n for s, n in want["by_subject_n"].items()}
    for s, r in rows.items():
        assert r["p_floor"] == floors[s]
    assert rows["s1"]["p_value"] > SUBJECT_LEVEL >= floors["s1"]
    assert block["n_too_few_items"] == sum(f > SUBJECT_LEVEL for f in floors.values()) == 1
