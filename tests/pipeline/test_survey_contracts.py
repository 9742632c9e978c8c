"""Contracts of what a run records and is asked, read without a model: inspect's counts of
the orders a run samples, a run's selection digest, Outcome's summary and records, and the
checks of the items a Python caller gives (mutation QA)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contamscope.data import LoadResult, MCQItem
from contamscope.errors import ConfigError, StoreError
from contamscope.pipeline import PermutationConfig
from contamscope.pipeline.inputs import check_items
from contamscope.pipeline.outcome import Outcome
from contamscope.pipeline.provenance import selection_settings
from contamscope.pipeline.survey import survey_permutation

SEVEN = ("7", "3", "9", "1", "5", "2", "8")


def _loaded(items: list[MCQItem]) -> LoadResult[MCQItem]:
    return LoadResult(items, [], "toy", "jsonl", "0" * 64, ["toy.jsonl"])


def test_sampled_items_counts_only_the_items_a_run_scores() -> None:
    """survey_permutation: ``orders``: "option orders to score"; an item a run sets aside
    ("All of the above") is scored in no order, sampled or not: of two 7-option items, one set
    aside, one is sampled and the total is its 1 + mc_orders."""
    items = [
        MCQItem("e", "Pick a number", SEVEN),
        MCQItem("x", "Which?", ("a", "b", "c", "d", "e", "f", "All of the above")),
    ]
    found = survey_permutation(_loaded(items), items, PermutationConfig(mc_orders=99))
    assert found["counts"]["items_excluded"] == 1
    assert found["orders"]["sampled_items"] == 1
    assert found["orders"]["total"] == 100


def test_the_selection_digest_tells_apart_ids_that_join_alike() -> None:
    """selection_settings: "always a digest of the item ids, so that the same folder given
    other items is refused": ids ``ab``, ``c`` are other items than ``a``, ``bc``."""
    one = selection_settings(None, ["ab", "c"], None)["item_ids_sha256"]
    other = selection_settings(None, ["a", "bc"], None)["item_ids_sha256"]
    assert one != other


def test_the_selection_records_the_count_it_is_given() -> None:
    """selection_settings: "``n_items``: the count to record (per split for BenBench and
    CAP, as their commands record it), default ``len(ids)``"."""
    per_split = {"benchmark": 2, "reference": 1}
    assert selection_settings(None, ["a", "b", "c"], None, per_split)["n_items"] == per_split
    assert selection_settings(None, ["a", "b", "c"], None)["n_items"] == 3


def _summary(spec: str) -> dict[str, object]:
    return {
        "method": "permutation",
        "created": "now",
        "model": {"spec": spec, "fingerprint": f"{spec}-fp"},
        "counts": {"items": 1},
        "verdict": {"label": "no evidence", "signal": False},
    }


def test_outcome_records_are_refused_once_another_models_run_replaced_them(
    tmp_path: Path,
) -> None:
    """Outcome.records: "Refused when the folder no longer holds this run's records: it was
    run again on other items or settings": another model's run with the same counts and
    verdict is another run (_same_run names "the model (its spec and fingerprint)")."""
    (tmp_path / "items.jsonl").write_text('{"id": "a"}\n', encoding="utf-8")
    (tmp_path / "summary.json").write_text(json.dumps(_summary("hf:a")), encoding="utf-8")
    mine = Outcome(_summary("hf:a"), tmp_path)
    assert mine.records() == [{"id": "a"}]
    (tmp_path / "summary.json").write_text(json.dumps(_summary("hf:b")), encoding="utf-8")
    with pytest.raises(StoreError, match="another run's"):
        mine.records()


def test_outcome_summary_is_what_summary_json_holds(tmp_path: Path) -> None:
    """Outcome.summary: "exactly what summary.json holds: its keys are strings"; to_dict:
    "A JSON-serialisable copy (paths as strings)"."""
    out = Outcome({"histogram": {4: 2}}, tmp_path)
    assert out.summary == {"histogram": {"4": 2}}
    assert json.loads(json.dumps(out.to_dict()))["run_dir"] == str(tmp_path)


def test_check_items_refuses_a_mapping_and_a_one_option_item() -> None:
    """check_items: "a loaded benchmark, a single item or anything else that is not a
    collection of items is refused" (a dict of items too), and a multiple-choice item "needs at
    least 2" options."""
    a = MCQItem("a", "2+2?", ("3", "4"))
    with pytest.raises(ConfigError, match="a dict; give a list of items"):
        check_items({"a": a}, MCQItem, "the permutation test")
    with pytest.raises(ConfigError, match="needs at least 2"):
        check_items([MCQItem("b", "?", ("only",))], MCQItem, "the permutation test")
