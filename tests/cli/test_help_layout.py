"""Help at a standard terminal's 80 columns: whole option names, paragraphs wrapped once, the
exit codes of every command that ends with more than 0 and 2 (CI QA)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from contamscope.cli.main import app

COMMANDS = {
    name: cmd
    for name, cmd in typer.main.get_command(app).commands.items()  # type: ignore[attr-defined]
    if not hasattr(cmd, "commands")  # (cache's subcommands have their own)
}


def _help(name: str, tmp_path: Path, columns: int = 80) -> str:
    env = dict(os.environ, COLUMNS=str(columns))
    res = subprocess.run(
        [sys.executable, "-m", "contamscope", name, "--help"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_at_80_columns_shows_every_option_name_whole(name: str, tmp_path: Path) -> None:
    """Names were cut to '--include-non-exchang…' where a help text held a long word."""
    text = _help(name, tmp_path)
    assert "…" not in text
    assert all(len(line) <= 80 for line in text.splitlines())
    for param in [p for p in COMMANDS[name].params if not getattr(p, "hidden", False)]:
        for opt in [*param.opts, *param.secondary_opts]:
            if opt.startswith("--"):
                assert opt in text, opt


@pytest.mark.parametrize("name", ["permutation", "benbench", "reanalyse", "leaderboard"])
def test_exit_codes_are_one_paragraph(name: str, tmp_path: Path) -> None:
    """Epilogs written for 100 columns broke each line in two at 80 ('(re-run to' / 'resume).')."""
    paragraphs = [p.splitlines() for p in _help(name, tmp_path).split("\n" + " " * 80 + "\n")]
    [para] = [p for p in paragraphs if "Exit codes: 0 ok, 2 user error" in " ".join(p)]
    assert all(len(line.strip()) >= 60 for line in para[:-1])  # filled: wrapped once


def test_a_missing_argument_is_named_as_usage_names_it(tmp_path: Path) -> None:
    """'Missing argument 'run_b'': the Python parameter's name, not the usage line's."""
    res = subprocess.run(
        [sys.executable, "-m", "contamscope", "compare", "runs"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2 and "Missing argument 'RUN_B'" in res.stderr


@pytest.mark.parametrize("columns", [40, 60])
def test_narrow_help_folds_names_and_keeps_the_help(columns: int, tmp_path: Path) -> None:
    """Whole names at 40 columns left no room: the help texts and types were not shown at all
    (diff-review QA). There the names fold, and a flag's other name goes under it."""
    text = _help("reanalyse", tmp_path, columns)
    assert "…" not in text and all(len(line) <= columns for line in text.splitlines())
    assert "bootstra" in text and "<int" in text  # the help and types are shown
