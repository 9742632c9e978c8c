"""Run-folder contracts of RunDir: which records count as done on resume, what items.jsonl
holds after it is read, what --overwrite removes, and when a folder is free again
(mutation QA)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contamscope.errors import ContamscopeWarning, StoreError
from contamscope.store import RunDir


def _ids(run: RunDir) -> list[str]:
    return [json.loads(x)["id"] for x in run.items_path.read_text(encoding="utf-8").splitlines()]


def test_a_record_appended_again_replaces_the_earlier_one_in_its_place(tmp_path: Path) -> None:
    """_read_records: "a record appended again for an id ... replaces the earlier one in its
    place. The file is rewritten so.": the later copy is the one resumed, and the file holds it
    once, where the first copy was."""
    run = RunDir(tmp_path / "run")
    run.open({"model": "a"})
    run.append([{"id": "x0", "v": 1}, {"id": "x1", "v": 2}, {"id": "x0", "v": 9}])
    run.close()
    done = RunDir(tmp_path / "run").open({"model": "a"})
    assert done == {"x0": {"id": "x0", "v": 9}, "x1": {"id": "x1", "v": 2}}
    lines = [json.loads(x) for x in run.items_path.read_text(encoding="utf-8").splitlines()]
    assert lines == [{"id": "x0", "v": 9}, {"id": "x1", "v": 2}]


def test_a_damaged_line_mid_file_is_removed_from_the_file(tmp_path: Path) -> None:
    """_read_records: a damaged line is "Dropped, so their items are scored again ... The file
    is rewritten so" (with no torn last line to set it off)."""
    run = RunDir(tmp_path / "run")
    run.open({"model": "a"})
    run.append([{"id": "x0"}, {"id": "x1"}])
    lines = run.items_path.read_text(encoding="utf-8").splitlines(keepends=True)
    run.items_path.write_text(lines[0] + "{not json\n" + lines[1], encoding="utf-8")
    run.close()
    with pytest.warns(ContamscopeWarning, match="1 damaged or unreadable record"):
        done = RunDir(tmp_path / "run").open({"model": "a"})
    assert sorted(done) == ["x0", "x1"]
    assert run.items_path.read_text(encoding="utf-8") == "".join(lines)


def test_overwrite_removes_the_earlier_runs_summary(tmp_path: Path) -> None:
    """RunDir._prepare refuses other settings "use another --out (--overwrite deletes it)":
    after --overwrite the folder holds no earlier summary (the new run is unfinished)."""
    run = RunDir(tmp_path / "run")
    run.open({"method": "m", "seed": 0})
    run.append([{"id": "x"}])
    run.write_summary({"method": "m", "timings": {}})
    run.close()
    again = RunDir(tmp_path / "run")
    assert again.open({"method": "m", "seed": 1}, overwrite=True) == {}
    assert not again.summary_path.exists() and not again.items_path.exists()
    again.close()
    with pytest.raises(StoreError, match="the run is unfinished"):
        RunDir(tmp_path / "run").finished_run("m")


def test_a_folder_of_blank_lines_only_holds_no_records(tmp_path: Path) -> None:
    """_holds_records: "Whether the folder holds a summary or any record (a line that is not
    blank)": a folder whose items.jsonl holds blank lines only gives way to other settings."""
    run = RunDir(tmp_path / "run")
    run.open({"method": "m", "seed": 0})
    run.close()
    run.items_path.write_text("\n\n", encoding="utf-8")
    assert RunDir(tmp_path / "run").open({"method": "m", "seed": 1}) == {}


def test_a_refused_open_leaves_the_folder_free(tmp_path: Path) -> None:
    """RunDir.open: "refused (other settings, ...): the folder is free again": another RunDir
    of this process opens it right after the refusal."""
    run = RunDir(tmp_path / "run")
    run.open({"method": "m", "seed": 0})
    run.append([{"id": "x"}])
    run.close()
    refused = RunDir(tmp_path / "run")
    with pytest.raises(StoreError, match="other settings"):
        refused.open({"method": "m", "seed": 1})
    other = RunDir(tmp_path / "run")
    assert sorted(other.open({"method": "m", "seed": 0})) == ["x"]
    other.close()


def test_upgrades_let_a_folder_of_older_settings_resume_under_the_new_ones(
    tmp_path: Path,
) -> None:
    """RunDir.open: a folder of other settings is refused "unless its settings are among
    ``upgrades`` ...: ``settings`` then replace them"."""
    old = {"method": "m", "config": {"n": 5, "threshold": 0.9}}
    new = {"method": "m", "config": {"n": 5, "threshold": 0.75}}
    run = RunDir(tmp_path / "run")
    run.open(old)
    run.append([{"id": "x"}])
    run.close()
    again = RunDir(tmp_path / "run")
    assert sorted(again.open(new, upgrades=[old])) == ["x"]
    assert again.stored_settings() == new
    again.close()


def test_a_summary_with_a_tuple_of_nan_is_written_as_json_null(tmp_path: Path) -> None:
    """_finite: "every float that is not finite as None (JSON's null) ... the file stays
    JSON", inside a tuple (an interval) as inside a list."""
    run = RunDir(tmp_path / "run")
    run.open({"method": "m"})
    run.write_summary({"ci": (float("nan"), 1.0), "n": [float("inf")]})
    run.close()
    assert json.loads(run.summary_path.read_text(encoding="utf-8")) == {
        "ci": [None, 1.0],
        "n": [None],
    }


def test_each_commands_timings_keep_where_it_computed(tmp_path: Path) -> None:
    """A run begun on Ray (on a GPU) and finished by a local command on the CPU: the summary
    said only the last command's device and executor, and the first command's speed in
    ``timings.earlier`` had neither (Ray QA)."""
    run = RunDir(tmp_path / "run")
    run.open({"model": "a"})
    on_ray = {"device": "cuda", "executor": {"kind": "ray", "workers": 2}}
    first = run.with_earlier_timings({"items_scored_now": 3, "seconds": 1.5}, on_ray)
    assert first == {
        "items_scored_now": 3,
        "seconds": 1.5,
        "device": "cuda",
        "executor": "ray",
        "earlier": [],
    }
    run.write_summary({"model": on_ray, "timings": first})
    served = {"server_model": {"id": "m"}}  # a served model: no device of its own
    second = run.with_earlier_timings({"items_scored_now": 2, "seconds": 4.0}, served)
    assert second["executor"] == "local" and "device" not in second
    assert second["earlier"] == [{k: v for k, v in first.items() if k != "earlier"}]
    run.write_summary({"model": served, "timings": second})
    local = {"device": "cpu", "executor": None}  # (not a mapping: no kind of its own)
    third = run.with_earlier_timings({"items_scored_now": 1}, local)
    assert [(t["executor"], t.get("device")) for t in third["earlier"]] == [
        ("ray", "cuda"),
        ("local", None),
    ]
    assert (third["executor"], third["device"]) == ("local", "cpu")
    run.close()


def test_read_records_says_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    """``contamscope.store.read_records`` (and ``Outcome.records()``) raised raw
    JSONDecodeError, UnicodeDecodeError, FileNotFoundError and IsADirectoryError where
    ``load_run`` says one line naming the file and line (cross-reader QA)."""
    from contamscope.store import read_records

    run = tmp_path / "run"
    run.mkdir()
    items = run / "items.jsonl"
    with pytest.raises(StoreError, match=r"items.jsonl: no such file"):
        read_records(run)
    items.write_text('{"id": "a"}\n\n{"id": "b"}\n', encoding="utf-8")
    assert read_records(run) == read_records(items) == [{"id": "a"}, {"id": "b"}]
    items.write_text('{"id": "a"}\n{"id": "b"}\n', encoding="utf-8-sig")  # as a resume reads it
    assert read_records(run) == [{"id": "a"}, {"id": "b"}]
    # an id stored twice: once, the later copy in place (a --reference-run counted it twice)
    items.write_text('{"id": "a", "v": 1}\n{"id": "b"}\n{"id": "a", "v": 2}\n', "utf-8")
    assert read_records(run) == [{"id": "a", "v": 2}, {"id": "b"}]
    for text, said in (
        (b'{"id": "a"}\n{"id": "b", "lo', r"items.jsonl:2: not valid JSON"),
        (b'{"id": "a"}\n\n{"id": "\xff"}\n', r"items.jsonl:3: not UTF-8 text"),
        (b"[1, 2]\n", r"items.jsonl:1: expected a JSON object per line"),
    ):
        items.write_bytes(text)
        with pytest.raises(StoreError, match=said):
            read_records(run)
    items.unlink()
    items.mkdir()
    with pytest.raises(StoreError, match=r"items.jsonl: a folder, not a records file"):
        read_records(run)


def test_a_reading_that_scores_nothing_leaves_the_records_file_as_it_is(tmp_path: Path) -> None:
    """A re-analysis opened the folder, took an unreadable record out of items.jsonl, then
    refused the folder for lacking it, leaving a summary that counted it (cross-reader QA):
    ``mend=False`` reads as the run reads and writes nothing. A blank line is no record: it
    was said to be "1 damaged or unreadable record left out"."""
    run = RunDir(tmp_path / "run")
    run.open({"model": "a"})
    run.append([{"id": "x0"}, {"id": "x1", "bad": True}, {"id": "x2"}])
    run.close()
    text = run.items_path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    damaged = lines[0] + "\n" + lines[1] + lines[2] + lines[0]  # a blank line, a repeat
    run.items_path.write_text(damaged, encoding="utf-8")
    usable = RunDir(tmp_path / "run")
    with pytest.warns(
        ContamscopeWarning, match=r"1 damaged or unreadable record left out \(line 3\)"
    ):
        done = usable.open({"model": "a"}, complete=lambda r: "bad" not in r, mend=False)
    usable.close()
    assert sorted(done) == ["x0", "x2"]
    assert run.items_path.read_text(encoding="utf-8") == damaged  # untouched
    with pytest.warns(ContamscopeWarning, match=r"1 damaged or unreadable record left out"):
        mender = RunDir(tmp_path / "run")
        mender.open({"model": "a"}, complete=lambda r: "bad" not in r)
        mender.close()
    assert run.items_path.read_text(encoding="utf-8") == lines[0] + lines[2]  # mended
    # a blank line alone: nothing said, the file mended
    run.items_path.write_text(lines[0] + "\n" + lines[2], encoding="utf-8")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        last = RunDir(tmp_path / "run")
        assert sorted(last.open({"model": "a"})) == ["x0", "x2"]
        last.close()
    assert run.items_path.read_text(encoding="utf-8") == lines[0] + lines[2]


def test_an_interrupted_reanalysis_leaves_its_marker_until_a_summary_follows_the_records(
    tmp_path: Path,
) -> None:
    """The marker of a re-analysis stays when its writes stop before the summary (an error
    here; a kill in the CLI test), and goes with the next summary written outside one (the
    method's own command resumed on the folder) or a re-analysis that finishes."""
    from contamscope.store import interrupted_reanalysis

    run = RunDir(tmp_path / "run")
    run.open({"method": "permutation"})
    run.write_summary({"n": 1})
    assert interrupted_reanalysis(run.path) is None
    with pytest.raises(OSError), run.reanalysing({"alpha": 0.2, "ties": None}):
        run.replace_records([{"id": "a"}])
        raise OSError("disk full")
    assert interrupted_reanalysis(run.path) == {"alpha": 0.2}  # (None: not asked)
    with run.reanalysing({"alpha": 0.2}):
        run.write_summary({"n": 2})
        assert interrupted_reanalysis(run.path) == {"alpha": 0.2}  # (written in it: kept)
    assert interrupted_reanalysis(run.path) is None
    with pytest.raises(OSError), run.reanalysing({"fdr": True}):
        raise OSError("killed")
    run.write_summary({"n": 3})  # a run's own summary, outside a re-analysis
    assert interrupted_reanalysis(run.path) is None
    (run.path / ".reanalysing.json").write_text("{not json", encoding="utf-8")
    assert interrupted_reanalysis(run.path) == {}  # unreadable: still interrupted
    run.close()


def test_temporary_files_of_writers_that_are_gone_are_removed_when_the_folder_is_held(
    tmp_path: Path,
) -> None:
    """A write killed before its rename left a hidden partial summary (or records file) in
    the folder for good (kill QA); a live writer's (a report written beside it) stays."""
    import os

    folder = tmp_path / "run"
    folder.mkdir()
    gone = folder / ".summary.json.999999999-0123abcd.tmp"  # (no process has this id)
    live = folder / f".report.html.{os.getppid()}-89abcdef.tmp"
    other = folder / ".notes.tmp"  # not one of ours: left
    for p in (gone, live, other):
        p.write_text("{partial", encoding="utf-8")
    run = RunDir(folder)
    run.open({"method": "permutation"})
    assert (gone.exists(), live.exists(), other.exists()) == (False, True, True)
    run.close()
