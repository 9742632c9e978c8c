"""Run-folder reading contracts (report/rundata.py, report/build.py) on hand-written folders,
without a model: what a report reads from summary.json, settings.json and items.jsonl
(mutation QA)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contamscope.errors import StoreError
from contamscope.report import build_report
from contamscope.report.rundata import RunData, load_run, run_config, same_records


def _folder(path: Path, summary: dict[str, Any], settings: dict[str, Any] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    if settings is not None:
        (path / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    return path


def test_subjects_given_as_the_commands_text_are_split_and_stripped(tmp_path: Path) -> None:
    """RunData.subjects: older runs keep "the command's text ``"anatomy,virology"``"; read as
    the list of subjects, spaces around the commas dropped (mutation QA)."""
    run = RunData(tmp_path, {"benchmark": {"selection": {"subjects": "anatomy, virology,"}}}, {})
    assert run.subjects == ["anatomy", "virology"]


def test_method_falls_back_to_the_schemas_second_part(tmp_path: Path) -> None:
    """RunData.method: "settings' ``method``, else the second part of the schema"
    (mutation QA)."""
    run = RunData(tmp_path, {"schema": "contamscope.benbench.summary/1"}, {})
    assert run.method == "benbench"


def test_a_benchmark_read_per_split_is_named_by_all_its_sources(tmp_path: Path) -> None:
    """RunData.benchmark: per-split benchmarks (BenBench: train/test) are named by each split's
    source, joined (mutation QA)."""
    b = {"train": {"source": "gsm8k_train.jsonl"}, "test": {"source": "gsm8k_test.jsonl"}}
    assert RunData(tmp_path, {"benchmark": b}, {}).benchmark == (
        "gsm8k_train.jsonl + gsm8k_test.jsonl"
    )


def test_blank_lines_of_items_jsonl_are_no_records(tmp_path: Path) -> None:
    """iter_records: per-item records in file order; a blank line (a file edited by hand, a
    trailing newline) holds no record and is no error (mutation QA)."""
    run = RunData(tmp_path, {}, {})
    (tmp_path / "items.jsonl").write_text('{"id": "a"}\n\n  \n{"id": "b"}\n', encoding="utf-8")
    assert [r["id"] for r in run.iter_records()] == ["a", "b"]
    assert [i for i, _ in run.iter_numbered_records()] == [1, 4]


def test_run_config_is_the_summarys_before_the_settings(tmp_path: Path) -> None:
    """run_config: "summary.json's ``config``, else settings.json's" (a re-analysis rewrites
    the summary's; mutation QA)."""
    run = RunData(tmp_path, {"config": {"ties": "leaked"}}, {"config": {"ties": "not_leaked"}})
    assert run_config(run) == {"ties": "leaked"}
    assert run_config(RunData(tmp_path, {}, {"config": {"seed": 1}})) == {"seed": 1}


def test_a_permutation_summary_without_statistics_is_refused(tmp_path: Path) -> None:
    """load_run: a summary of a method whose finished summary always holds ``statistics``
    ('{}', or one cut down by hand) is refused, not read as a run with no item
    (mutation QA)."""
    folder = _folder(tmp_path / "run", {"schema": "contamscope.permutation.summary/1"})
    with pytest.raises(StoreError, match="no 'statistics'"):
        load_run(folder)


def test_same_records_groups_only_byte_identical_runs(tmp_path: Path) -> None:
    """same_records: the sets "of two or more runs of one method whose ``items.jsonl`` are byte
    for byte the same"; two records of one size but other bytes are no set (mutation QA)."""
    folders = []
    for name, text in (("a", '{"x": 1}\n'), ("b", '{"x": 1}\n'), ("c", '{"x": 2}\n')):
        (tmp_path / name).mkdir()
        (tmp_path / name / "items.jsonl").write_text(text, encoding="utf-8")
        folders.append(("permutation", tmp_path / name))
    assert same_records(folders) == [[0, 1]]
    assert same_records(folders[:2]) == [[0, 1]]  # a folder copied once
    assert same_records([folders[0], folders[2]]) == []


def test_the_report_names_when_the_summary_was_written(make_run: Any) -> None:
    """docs/output.md: summary.json's ``created`` "is when this summary was written"; the
    report's subtitle names it as the analysis' date (mutation QA)."""
    run = make_run(n_items=6)
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    summary["created"] = "2031-02-03T04:05:06Z"
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    settings_path = run / "settings.json"
    if settings_path.exists():
        settings = json.loads(settings_path.read_text(encoding="utf-8"))
        settings["created"] = "1999-01-01T00:00:00Z"
        settings_path.write_text(json.dumps(settings), encoding="utf-8")
    html = build_report(run).read_text(encoding="utf-8")
    assert "analysis of 2031-02-03T04:05:06Z" in html


def test_an_id_stored_twice_is_read_once_its_later_copy_in_place(tmp_path: Path) -> None:
    """Two copies of one id: the report showed both (7 rows of 6 items), compare took the
    first, a resume and reanalyse the last (cross-reader QA). Every report reader now takes
    the later copy in the earlier one's place, as the run store does; records without a
    string id stay as they are."""
    from contamscope.pipeline.compare import _scored

    run = _folder(tmp_path / "run", {"schema": "contamscope.permutation.summary/1"})
    data = RunData(run, {}, {})
    lines = [
        {"id": "q1", "logprobs": [-1.0, -2.0], "v": "first"},
        {"id": "q2", "logprobs": [-1.0, -2.0]},
        {"id": 7, "logprobs": [-1.0, -2.0]},
        {"id": "q1", "logprobs": [-3.0, -0.5], "v": "later"},
        {"id": "q3", "excluded": "options not exchangeable"},
    ]
    (run / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), "utf-8")
    got = list(data.iter_numbered_records())
    assert [(i, r["id"], r.get("v")) for i, r in got] == [
        (4, "q1", "later"),
        (2, "q2", None),
        (3, 7, None),
        (5, "q3", None),
    ]
    assert _scored(data)["q1"]["v"] == "later"
