"""Documented contracts of `contamscope compare` on membership and BenBench runs (the run
folders written by this folder's conftest), each count worked out from the flags set here
(mutation QA)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contamscope.pipeline import compare_runs


def _set_membership_flags(run: Path, flagged: set[int]) -> None:
    """Flag the benchmark items numbered ``flagged``, no other."""
    lines = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    for r in lines:
        if r["role"] == "benchmark":
            r["flag"] = int(r["item_id"].split("-")[1]) in flagged
    (run / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def test_membership_compare_counts_flags_of_b_only_and_a_only(make_membership_run: Any) -> None:
    """compare: "flags": b_only counts the benchmark items B flags and A does not, a_only the
    reverse: A flags items 0 and 1, B items 1, 2 and 3 (mutation QA)."""
    a = make_membership_run("a", n_bench=10, n_ref=20, seed=0)
    b = make_membership_run("b", n_bench=10, n_ref=20, seed=1)
    _set_membership_flags(a, {0, 1})
    _set_membership_flags(b, {1, 2, 3})
    flags = compare_runs(a, b)["statistics"]["flags"]
    assert flags == {"a": 2, "b": 3, "b_only": 2, "a_only": 1}


def _set_benbench_flags(run: Path, exact: set[int]) -> None:
    """Flag exact_all on the test items numbered ``exact``; rouge_all and edit_all on all."""
    lines = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    for r in lines:
        hit = r["split"] == "test" and int(r["item_id"].split("-")[1]) in exact
        r["flags"] = {"exact_all": hit, "rouge_all": True, "edit_all": True}
    (run / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


@pytest.fixture
def runs(make_benbench_run: Any) -> tuple[Path, Path]:
    """A with 12 items per split, B with 14 (2 of its own per split); A flags test items 4 and
    5, B 5, 6 and 7 (exact_all)."""
    a = make_benbench_run("a", 12, leaked=False, seed=0)
    b = make_benbench_run("b", 14, leaked=True, seed=1)
    _set_benbench_flags(a, {4, 5})
    _set_benbench_flags(b, {5, 6, 7})
    return a, b


def test_benbench_compare_counts_items_of_b_only(runs: tuple[Path, Path]) -> None:
    """docs/output.md: `counts` (`paired`, `only_a`, `only_b`, ...): B's items 12 and 13 of
    both splits are its own (mutation QA)."""
    counts = compare_runs(*runs)["counts"]
    assert (counts["only_a"], counts["only_b"]) == (0, 4)


def test_benbench_compare_flags_are_exact_all_counted_per_run(runs: tuple[Path, Path]) -> None:
    """compare: the flags are the instance-level exact_all flags (every n-gram predicted
    exactly); b_only counts the items B flags and A does not (mutation QA)."""
    flags = compare_runs(*runs)["statistics"]["flags"]
    assert flags == {"a": 2, "b": 3, "b_only": 2, "a_only": 1}
