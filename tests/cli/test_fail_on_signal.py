"""--fail-on-signal: a CI gate's exit code 4 when a run's verdict finds a contamination signal
(CI QA: no option set the exit code from the verdict)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli

from contamscope.cli.common import EXIT_ROWS_SKIPPED, EXIT_SIGNAL, exit_if_skipped, has_signal


def _cap(verdict: str) -> tuple[str, str]:
    """CAP's overall verdict of one comparison of train with test."""
    from contamscope.pipeline.cap import overall_verdict

    comparison = {"verdict": verdict, "reference": "train", "other": "test", "reasoning": "r"}
    return overall_verdict([comparison])


@pytest.mark.parametrize(
    ("verdict", "signal"),
    [
        ({"label": "leakage signal", "signal": True}, True),
        ({"label": "no evidence", "signal": False}, False),
        ({"label": "inconclusive", "signal": None}, False),  # BenBench, membership
        ({"label": "nothing to test", "signal": None}, False),
        # CAP names its split (its labels as overall_verdict writes them)
        (dict(zip(("label", "reasoning"), _cap("contaminated by test"), strict=True)), True),
        (dict(zip(("label", "reasoning"), _cap("fine-tuned on train"), strict=True)), False),
        ({"label": "no evidence", "reasoning": "..."}, False),
        (None, False),
    ],
)
def test_which_verdicts_are_a_signal(verdict: dict[str, Any] | None, signal: bool) -> None:
    summary: dict[str, Any] = {"method": "permutation"}
    if verdict is not None:
        summary["verdict"] = verdict
    assert has_signal(summary) is signal


def test_a_signal_exits_4_before_skipped_rows_3(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        exit_if_skipped(2, signal=True)
    assert ended.value.code == EXIT_SIGNAL == 4
    said = capsys.readouterr().err
    assert "2 input rows were skipped (exit code 4; see summary.json)" in said
    assert "contamination signal: exit code 4 (--fail-on-signal)" in said
    with pytest.raises(SystemExit) as ended:
        exit_if_skipped(2)
    assert ended.value.code == EXIT_ROWS_SKIPPED
    exit_if_skipped(0)  # nothing skipped, no signal: the command ends normally


def test_a_report_not_written_exits_2_after_a_signal_before_skipped_rows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A report asked for and not written: exit code 2 (it was 0), after a signal's 4, before
    skipped rows' 3, which the skipped-rows line then names."""
    from contamscope.cli.common import EXIT_USER_ERROR, ReportUnwritten

    with pytest.raises(ReportUnwritten) as ended:
        exit_if_skipped(0, unwritten=True)
    assert ended.value.code == EXIT_USER_ERROR == 2
    with pytest.raises(SystemExit) as ended:
        exit_if_skipped(2, signal=True, unwritten=True)
    assert ended.value.code == EXIT_SIGNAL
    capsys.readouterr()
    with pytest.raises(ReportUnwritten) as ended:
        exit_if_skipped(2, unwritten=True)
    assert "2 input rows were skipped (exit code 2; see summary.json)" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["permutation", "benbench", "cap", "membership", "sweep"])
def test_every_run_command_takes_the_option(tmp_path: Path, command: str) -> None:
    res = run_cli(command, "--help", cwd=tmp_path)
    assert res.returncode == 0 and "--fail-on-signal" in res.stdout


def test_a_run_without_a_signal_ends_as_without_the_option(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    bench = tmp_path / "toy_test.csv"
    rows = ["Sky?,blue,green,red,pink,A", "Legs of a spider?,6,8,10,4,B", "bad row,1,2"]
    bench.write_text("\n".join(rows) + "\n", encoding="utf-8")
    args = ["--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>", "--benchmark"]
    res = run_cli("permutation", *args, str(bench), "--out", "r", "--fail-on-signal", cwd=tmp_path)
    signal = json.loads((tmp_path / "r" / "summary.json").read_text())["verdict"]["signal"]
    assert signal is not True  # (a random model on two items: nothing to find)
    assert res.returncode == EXIT_ROWS_SKIPPED, res.stderr
    assert "exit code 3; see summary.json" in res.stderr and "--fail-on-signal" not in res.stderr


def test_items_the_model_ranks_first_as_published_exit_4(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """A benchmark of the items whose published order this model scores highest, chosen by
    the model itself from 150 MMLU items: what a leak looks like to the test. Its run, and a
    sweep of it, end with 4 under --fail-on-signal, 0 without; a sweep with a failed pair too
    ends with 2 and still names the signal."""
    from contamscope.data import load_benchmark

    model = ["--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>"]
    res = run_cli("permutation", *model, "--sample", "150", "--out", "all", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = (tmp_path / "all" / "items.jsonl").read_text(encoding="utf-8").splitlines()
    first = {r["id"] for r in map(json.loads, lines) if r.get("rank") == 1}
    assert len(first) >= 3  # (about 1 in 24 of them)
    chosen = [it for it in load_benchmark("mmlu").items if it.id in first]
    bench = tmp_path / "chosen.jsonl"
    rows = [{"question": it.question, "options": list(it.options)} for it in chosen]
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = [*model, "--benchmark", str(bench)]
    plain = run_cli("permutation", *args, "--out", "a", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["verdict"]["signal"] is True
    gated = run_cli("permutation", *args, "--out", "a", "--fail-on-signal", cwd=tmp_path)
    assert gated.returncode == EXIT_SIGNAL, gated.stderr
    assert "contamination signal: exit code 4 (--fail-on-signal)" in gated.stderr
    sweep = ["sweep", "--models", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>"]
    swept = run_cli(
        *sweep, "--benchmarks", str(bench), "--out", "sw", "--fail-on-signal", cwd=tmp_path
    )
    assert swept.returncode == EXIT_SIGNAL, swept.stderr
    pairs = json.loads((tmp_path / "sw" / "sweep.json").read_text())["pairs"]
    assert [p["signal"] for p in pairs] == [True]
    broken = tmp_path / "broken_test.csv"
    broken.write_text("only a question,\n", encoding="utf-8")
    both = f"{bench},{broken}"
    failed = run_cli(*sweep, "--benchmarks", both, "--out", "sw2", "--fail-on-signal", cwd=tmp_path)
    assert failed.returncode == 2, failed.stderr
    assert "(exit code 2: a pair failed; --fail-on-signal)" in " ".join(failed.stderr.split())
