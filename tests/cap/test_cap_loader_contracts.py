"""Documented contracts of the CAP loader (data/cap.py) and of its logical modification
(perturb/modify.py), each checked on data written here against a value worked out by hand
(mutation QA)."""

from __future__ import annotations

import json
from pathlib import Path

from contamscope.data.cap import load_cap
from contamscope.perturb.modify import draw_year_shift


def test_fineval_answer_naming_two_options_is_a_row_problem(fineval_dir: Path) -> None:
    """CAP's FinEval answers are one of A, B, C, D ("answer ... is not one of A, B, C, D"):
    "AB" names two options, so the record is skipped and listed, not read as option A
    (mutation QA)."""
    path = fineval_dir / "data" / "ori_val.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    rows[1]["output"] = "AB"
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    data = load_cap(str(fineval_dir), ["dev", "val"])
    # the conftest's val answers are B, A, C: the second record is left out
    assert [it.answer for it in data.splits["val"].items] == [1, 2]
    assert [str(p).split("ori_val.json:", 1)[-1] for p in data.problems] == [
        "1: record 2 of the list: answer 'AB' is not one of A, B, C, D"
    ]
    assert [it.answer for it in data.splits["dev"].items] == [1, 0, 2]


def _write_outputs(path: Path, lengths: list[int]) -> Path:
    """A generic CAP JSON Lines file: one record per length, its output that many characters,
    the first three in train and the rest in test."""
    rows = [
        {"input": f"Question {i}?", "output": "x" * n, "split": "train" if i < 3 else "test"}
        for i, n in enumerate(lengths)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_task_is_summary_when_the_median_reference_is_long(tmp_path: Path) -> None:
    """load_cap: "free text is ``summary`` when the median reference is at least 200
    characters, else ``qa``" (docs/cap.md: "median reference >= 200 characters: summary"):
    one long reference among short ones leaves the median short (mutation QA)."""
    cases = [
        ([300, 10, 10, 10, 10], "qa"),  # median 10, one long outlier
        ([250, 250, 250, 10, 10], "summary"),  # median 250
        ([200, 200, 200, 10, 10], "summary"),  # median exactly 200
        ([199, 199, 199, 500, 10], "qa"),  # median 199
    ]
    for k, (lengths, task) in enumerate(cases):
        data = load_cap(str(_write_outputs(tmp_path / f"c{k}.jsonl", lengths)), ["train", "test"])
        assert (data.task, data.task_detected) == (task, True), lengths
        assert [len(data.splits[s].items) for s in ("train", "test")] == [3, 2]


def test_year_shift_reaches_both_ends_of_its_range() -> None:
    """draw_year_shift: "A seeded constant shift with magnitude in [low, high] and a random
    sign": both ends are drawn. With [1, 2] over 100 seeds the magnitudes are exactly {1, 2}
    and both signs occur; with the default [20, 40] over 500 seeds (a magnitude has chance
    1 in 21 a seed) both 20 and 40 occur and nothing outside (mutation QA)."""
    small = [draw_year_shift(s, 1, 2) for s in range(100)]
    assert {abs(d) for d in small} == {1, 2}
    assert {d > 0 for d in small} == {True, False}
    default = {abs(draw_year_shift(s)) for s in range(500)}
    assert min(default) == 20 and max(default) == 40
    assert default <= set(range(20, 41))


def test_a_modified_record_without_its_answer_is_a_row_problem(fineval_dir: Path) -> None:
    """A FinEval mod record without its output paired as a supplied modification with no
    answer to score (m_modified None), and was named nowhere, where one with answer 'Z' was
    skipped and listed (QA): both are listed, and both items use a generated modification."""
    path = fineval_dir / "data" / "mod_dev.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    del rows[1]["output"]
    rows[2]["output"] = "Z"
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    data = load_cap(str(fineval_dir), ["dev", "val"])
    dev = data.splits["dev"]
    assert len(dev.items) == 3 and dev.modified is not None
    assert list(dev.modified) == [dev.items[0].id]  # the other two: generated
    said = [str(p).split("mod_dev.json:", 1)[-1] for p in data.problems]
    assert said == [  # in the order of the records
        "1: record 2 of the list: missing field 'output': the modified input's answer; "
        "item uses a generated modification",
        "1: record 3 of the list: answer 'Z' is not one of A, B, C, D; item uses a generated "
        "modification",
    ]
