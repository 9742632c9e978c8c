"""`contamscope reanalyse`: a stored permutation run with other thresholds, no model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run_cli

from contamscope.data import load_benchmark
from contamscope.pipeline import PermutationConfig, run_permutation
from contamscope.store import CachedScorer

ROWS = (
    "Which city is in France?,Rome,Paris,Oslo,Lima,B\n"
    "Which is a metal?,Wood,Glass,Iron,Clay,C\n"
    "Which is a colour?,Red,Dog,Cat,Cow,A\n"
)


@pytest.fixture
def run(tmp_path: Path, tiny_backend) -> Path:  # type: ignore[no-untyped-def]
    bench = tmp_path / "toy_test.csv"
    bench.write_text(ROWS, encoding="utf-8")
    loaded = load_benchmark(str(bench))
    out = tmp_path / "run"
    run_permutation(
        loaded, loaded.items, CachedScorer(tiny_backend, None), out, PermutationConfig()
    )
    return out


def test_reanalyse_rewrites_the_analysis_and_the_report(tmp_path: Path, run: Path) -> None:
    (run / "report.html").write_text("old report", encoding="utf-8")
    res = run_cli(
        "reanalyse", str(run), "--ties", "leaked", "--deltas=-0.1,-0.3", "--alpha", "0.2",
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "re-analysed 3 stored items (3 records' flags changed); nothing scored" in res.stderr
    assert "delta -0.1: max an outlier" in res.stdout and "items with p <= 0.2" in res.stdout
    assert "the run that scored them finished 3 items in" in res.stdout  # its timings, kept
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["config"]["ties"], summary["config"]["deltas"]) == ("leaked", [-0.1, -0.3])
    assert summary["config"]["alpha"] == 0.2
    assert "written again" in res.stderr
    assert "old report" not in (run / "report.html").read_text(encoding="utf-8")


def test_a_moved_benchmark_is_named_and_found_with_benchmark(tmp_path: Path, run: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    moved = tmp_path / "elsewhere" / "toy_test.csv"  # a file's name gives its items' ids
    (tmp_path / "toy_test.csv").rename(moved)
    res = run_cli("reanalyse", str(run), "--alpha", "0.1", cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "toy_test.csv: no such file" in res.stderr
    assert (
        "read its benchmark from there; give --benchmark PATH where the file is now" in res.stderr
    )
    res = run_cli("reanalyse", str(run), "--alpha", "0.1", "--benchmark", str(moved), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads((run / "summary.json").read_text())["config"]["alpha"] == 0.1
    moved.write_text(ROWS.replace("Oslo", "Bergen"), encoding="utf-8")  # another content
    res = run_cli("reanalyse", str(run), "--benchmark", str(moved), cwd=tmp_path)
    assert res.returncode == 2 and "is not the benchmark" in res.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--ties", "maybe"], "--ties 'maybe': expected not_leaked or leaked"),
        (["--alpha", "2"], "--alpha 2.0: must be between 0 and 1"),
        (["--deltas", "x"], "--deltas 'x': expected comma-separated numbers"),
        (["--deltas", ""], "--deltas '': expected comma-separated numbers or 'paper'"),
    ],
)
def test_bad_options_are_one_line(tmp_path: Path, run: Path, args: list[str], needle: str) -> None:
    res = run_cli("reanalyse", str(run), *args, cwd=tmp_path)
    assert res.returncode == 2 and needle in res.stderr and "Traceback" not in res.stderr


def test_only_finished_permutation_runs_are_reanalysed(tmp_path: Path, run: Path) -> None:
    res = run_cli("reanalyse", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert res.returncode == 2 and "nowhere: no such run folder" in res.stderr
    other = tmp_path / "cap-run"
    other.mkdir()
    (other / "settings.json").write_text(json.dumps({"method": "cap"}))
    res = run_cli("reanalyse", str(other), cwd=tmp_path)
    assert res.returncode == 2 and "holds a cap run, not a permutation run" not in res.stderr
    assert (
        "--ties: not a setting of a cap run (its own: --pcr-alpha"
        in run_cli("reanalyse", str(other), "--ties", "leaked", cwd=tmp_path).stderr
    )
    (other / "settings.json").write_text(json.dumps({"method": "survey"}))  # none of ours
    res = run_cli("reanalyse", str(other), cwd=tmp_path)
    assert res.returncode == 2 and "holds a survey run; reanalyse reads permutation" in res.stderr
    # damaged settings: what is wrong and the way out (it said "a None run", and "use
    # --overwrite", an option reanalyse does not have; QA)
    way_out = "the command that wrote the folder, re-run with --overwrite, starts it anew"
    (other / "settings.json").write_text("{}")
    res = run_cli("reanalyse", str(other), cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.strip() == (
        f"error: {other / 'settings.json'}: names no method (damaged, or not contamscope's); "
        + way_out
    )
    (other / "settings.json").write_text('{"method": "permutation", "config": {"templ')
    res = run_cli("reanalyse", str(other), cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.strip() == (
        f"error: {other / 'settings.json'}: damaged (Unterminated string starting at line 1 "
        f"column 38); {way_out}"
    )
    (run / "summary.json").unlink()
    res = run_cli("reanalyse", str(run), cwd=tmp_path)
    assert res.returncode == 2 and "the run is unfinished" in res.stderr


def test_several_folders_each_done_and_one_that_fails_is_named(tmp_path: Path, run: Path) -> None:
    import shutil

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text("{}", encoding="utf-8")  # folders of a sweep
    pairs = [sweep / "a", sweep / "b"]
    for p in pairs:
        shutil.copytree(run, p)
    (sweep / "b" / "summary.json").unlink()  # unfinished
    res = run_cli("reanalyse", *map(str, pairs), "--alpha", "0.2", cwd=tmp_path)
    assert res.returncode == 2
    assert json.loads((sweep / "a" / "summary.json").read_text())["config"]["alpha"] == 0.2
    assert f"error: {sweep / 'b'}: the run is unfinished" in res.stderr
    assert f"1 folder not re-analysed: {sweep / 'b'} (exit code 2)" in res.stderr
    assert f"the board in {sweep} is from before: re-run its sweep command" in res.stderr
    # an option that is not some folder's setting: found before any folder is written (the
    # permutation folders were re-analysed, then the other refused; QA)
    other = tmp_path / "membership-run"
    other.mkdir()
    (other / "settings.json").write_text(json.dumps({"method": "membership"}))
    before = (sweep / "a" / "summary.json").read_text()
    res = run_cli("reanalyse", str(sweep / "a"), str(other), "--ties", "leaked", cwd=tmp_path)
    assert res.returncode == 2 and "--ties: not a setting of a membership run" in res.stderr
    assert f"nothing re-analysed: 1 folder cannot be ({other})" in " ".join(res.stderr.split())
    assert (sweep / "a" / "summary.json").read_text() == before
    res = run_cli("reanalyse", str(sweep / "a"), str(run), "--ties", "leaked", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    for folder in (sweep / "a", run):
        assert json.loads((folder / "settings.json").read_text())["config"]["ties"] == "leaked"


def test_reference_run_fills_algorithm_2s_false_positive_rate(
    tmp_path: Path, run: Path, tiny_backend
) -> None:  # type: ignore[no-untyped-def]
    fresh = tmp_path / "fresh_test.csv"
    fresh.write_text(
        "Which is a fruit?,Brick,Apple,Chair,Spoon,B\nWhich animal barks?,Cat,Cow,Dog,Owl,C\n",
        encoding="utf-8",
    )
    loaded = load_benchmark(str(fresh))
    scorer = CachedScorer(tiny_backend, None)
    run_permutation(loaded, loaded.items, scorer, tmp_path / "ref", PermutationConfig())
    res = run_cli(
        "reanalyse", str(run), "--reference-run", str(tmp_path / "ref"), "--report", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    assert "on clean†" in res.stdout and "unknown*" not in res.stdout
    assert "† Algorithm 2's false-positive rate measured on clean reference items" in res.stdout
    assert " of 2, 95% CI [" in res.stdout
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "on clean items†" in html and "unknown*" not in html
    res = run_cli("reanalyse", str(run), "--reference-run", "none", cwd=tmp_path)
    assert res.returncode == 0 and "unknown*" in res.stdout


def test_a_run_of_a_newer_schema_is_refused_and_kept(tmp_path: Path, run: Path) -> None:
    """report and leaderboard refused a summary.json of a newer schema version; reanalyse
    rewrote it with this version's fields and compare read it as if its fields meant the same."""
    summary = json.loads((run / "summary.json").read_text())
    summary["schema"] = "contamscope.permutation.summary/2"
    (run / "summary.json").write_text(json.dumps(summary))
    before = (run / "summary.json").read_bytes(), (run / "items.jsonl").read_bytes()
    res = run_cli("reanalyse", str(run), "--alpha", "0.1", cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "'contamscope.permutation.summary/2', newer than this contamscope" in res.stderr
    assert "upgrade contamscope to re-analyse it" in res.stderr
    assert ((run / "summary.json").read_bytes(), (run / "items.jsonl").read_bytes()) == before
    res = run_cli("compare", str(run), str(run), cwd=tmp_path)
    assert res.returncode == 2 and "upgrade contamscope to compare it" in res.stderr


def test_a_damaged_record_is_left_out_by_reanalyse_and_report_alike(
    tmp_path: Path, run: Path
) -> None:
    """reanalyse left a damaged record out and went on; report then refused the same folder
    (items.jsonl:2: not valid JSON), so no report could be had short of scoring again (QA).
    Both leave it out and say so."""
    lines = (run / "items.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(1, "garbage{\n")
    (run / "items.jsonl").write_text("".join(lines), encoding="utf-8")
    res = run_cli("reanalyse", str(run), "--alpha", "0.1", cwd=tmp_path)
    assert res.returncode == 0 and "1 damaged or unreadable record left out" in res.stderr
    res = run_cli("report", str(run), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    said = " ".join(res.stderr.split())
    assert "1 damaged or unreadable record left out of the item tables (line 2: not valid" in said
    assert "left out of the item tables" in (run / "report.html").read_text(encoding="utf-8")


_KILLED_AT_SUMMARY = """
import os, signal, sys
from contamscope.store import RunDir
RunDir.write_summary = lambda self, summary: os.kill(os.getpid(), signal.SIGKILL)
sys.argv = ["contamscope", *sys.argv[1:]]
from contamscope.cli.main import main
main()
"""


def test_a_reanalysis_killed_before_its_summary_is_refused_then_finished(
    tmp_path: Path, run: Path
) -> None:
    """A reanalyse SIGKILLed after rewriting the records and settings, before the summary: the
    report showed the new records' Algorithm 2 flags beside the old summary's, exit 0, and a
    plain reanalyse took half of each settings file (kill QA). Readers now refuse the folder,
    and reanalyse finishes the interrupted work: its result equals an uninterrupted one's."""
    import shutil
    import subprocess
    import sys

    whole = tmp_path / "whole"
    shutil.copytree(run, whole)
    asked = ("--alpha", "0.2", "--ties", "leaked", "--deltas=-0.1,-0.3")
    assert run_cli("reanalyse", str(whole), *asked, cwd=tmp_path).returncode == 0
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_AT_SUMMARY, "reanalyse", str(run), *asked],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert killed.returncode == -9, killed.stderr
    assert (run / ".reanalysing.json").is_file()
    records = (run / "items.jsonl").read_text(encoding="utf-8")
    assert records == (whole / "items.jsonl").read_text(encoding="utf-8")  # the new flags
    assert json.loads((run / "summary.json").read_text())["config"]["deltas"] is None  # old
    for cmd in (
        ("report", str(run)),
        ("compare", str(run), str(whole)),
        ("leaderboard", str(run), "--out", str(tmp_path / "board.md")),
    ):
        res = run_cli(*cmd, cwd=tmp_path)
        assert res.returncode == 2, res.stdout
        said = " ".join(res.stderr.split())
        assert (
            f"{run}: its re-analysis (alpha=0.2, ties=leaked, deltas=[-0.1, -0.3]) was "
            "interrupted, so its records and summary may follow different settings; "
            f"`contamscope reanalyse {run}` finishes it"
        ) in said
    card = run_cli("card", "--run", str(run), "--out", str(tmp_path / "card.md"), cwd=tmp_path)
    assert card.returncode != 0 and "its re-analysis (alpha=0.2" in card.stderr
    res = run_cli("reanalyse", str(run), cwd=tmp_path)  # no options: the interrupted ones
    assert res.returncode == 0, res.stderr
    assert (
        f"note: {run}: its re-analysis was interrupted; finishing it (with its --alpha 0.2 "
        "--ties leaked --deltas -0.1,-0.3 where not given now)"
    ) in " ".join(res.stderr.split())
    assert not (run / ".reanalysing.json").exists()

    def analysis(folder: Path) -> dict[str, object]:
        summary = json.loads((folder / "summary.json").read_text())
        return {k: summary[k] for k in ("config", "statistics", "verdict")}

    assert analysis(run) == analysis(whole)
    assert (run / "items.jsonl").read_text(encoding="utf-8") == records
    assert run_cli("report", str(run), cwd=tmp_path).returncode == 0
    again = run_cli("reanalyse", str(run), "--alpha", "0.1", cwd=tmp_path)  # no marker: no note
    assert again.returncode == 0 and "interrupted" not in again.stderr
