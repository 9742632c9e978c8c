"""Every command checks the models it is given (--model, --paraphraser) before it reads the
benchmark, and names the option in its one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run_cli


@pytest.mark.parametrize("command", ["benbench", "cap"])
def test_a_paraphraser_that_is_not_there_is_named_before_the_benchmark(
    tmp_path: Path, command: str
) -> None:
    """A bad --paraphraser failed after the benchmark was read and the model loaded, without
    the option's name ('error: ./nope: no such file or folder')."""
    res = run_cli(command, "--benchmark", "missing.jsonl", "--paraphraser", "./nope", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == "error: --paraphraser ./nope: no such file or folder"
    # a folder that holds no model: said now, not by transformers after the benchmark
    (tmp_path / "notes").mkdir()
    res = run_cli(command, "--benchmark", "missing.jsonl", "--paraphraser", "notes", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == (
        "error: --paraphraser hf:notes: not a model folder (no config.json)"
    )
