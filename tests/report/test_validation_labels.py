"""A validate epoch folder's split.json that cannot be read is said, not skipped: the report's
validation section was left out without a word (error-path QA)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from contamscope.errors import ContamscopeWarning
from contamscope.report.validation import find_split_labels


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"leaked": ["subj2-2"]', "not valid JSON"),
        ('{"other": []}', "no 'leaked' list in it"),
        ('{"leaked": [{"no_id": 1}]}', "its 'leaked' list is not of item ids"),
        (b"\xff\xfe{}", "not UTF-8 text"),
    ],
)
def test_an_unreadable_split_json_is_said(
    make_run, tmp_path: Path, text: str | bytes, why: str
) -> None:  # type: ignore[no-untyped-def]
    epoch = make_run("val/epoch-1", n_items=4)
    split = tmp_path / "val" / "split.json"
    if isinstance(text, bytes):
        split.write_bytes(text)
    else:
        split.write_text(text)
    with pytest.warns(ContamscopeWarning) as said:
        assert find_split_labels(epoch) is None
    (message,) = [str(w.message) for w in said]
    assert f"split.json: cannot read the known leaks from it ({why})" in message, message
    assert "--labels FILE" in message


def test_a_good_split_json_is_read_without_a_note(make_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    epoch = make_run("val/epoch-1", n_items=4)
    (tmp_path / "val" / "split.json").write_text(json.dumps({"leaked": ["subj2-2"]}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        labels = find_split_labels(epoch)
    assert labels is not None and labels.get("subj2-2", False) is True
