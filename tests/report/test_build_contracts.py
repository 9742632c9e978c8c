"""build_report contracts read from a run folder alone: which folders' pages say that their
items.jsonl is missing (mutation QA)."""

from __future__ import annotations

import json
from pathlib import Path

from contamscope.report import build_report


def test_a_validate_folder_is_not_said_to_miss_its_items(make_run, tmp_path: Path) -> None:
    """build_report: a validate run is "a folder of runs by epoch, without items of its own"
    (its records are in each epoch's run folder), so its page does not say its items.jsonl is
    missing; a run of one method without its items.jsonl does (mutation QA)."""
    folder = tmp_path / "val"
    folder.mkdir()
    summary = {
        "schema": "contamscope.validate.summary/1",
        "method": "validate",
        "model": {"spec": "hf:tiny"},
        "benchmark": {"source": "b_test.csv"},
        "results": [],
    }
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    page = build_report(folder).read_text(encoding="utf-8")
    assert "<h1>Validation run: " in page
    assert "items.jsonl is missing" not in page
    plain = make_run("plain", n_items=6)
    (plain / "items.jsonl").unlink()
    assert "items.jsonl is missing: the statistics below" in build_report(plain).read_text(
        encoding="utf-8"
    )
