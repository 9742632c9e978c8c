"""docs/python.md's examples run as written (on the tiny model instead of SmolLM2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"


def test_python_examples_type_check(tmp_path: Path) -> None:
    """The examples pass a type checker as written: the package is typed (py.typed), and its
    annotations take what the docs pass (``template="paper"``, a folder path as ``run_dir``;
    without py.typed every name was Any, and with it those two failed)."""
    pytest.importorskip("mypy", reason="mypy is a dev dependency (pip install -e '.[dev]')")
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    (tmp_path / "examples.py").write_text("\n".join(blocks), encoding="utf-8")
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--allow-redefinition", "--no-incremental"]
        + ["--cache-dir", str(tmp_path / "cache"), "examples.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0 and "Success" in res.stdout, res.stdout[-3000:] + res.stderr
    probe = tmp_path / "probe.py"  # the package is read, not skipped as untyped
    probe.write_text(
        "from contamscope.pipeline import run_permutation\nreveal_type(run_permutation)\n"
    )
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "probe.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    revealed = re.search(r"run_dir: ([^,]*),", res.stdout)
    assert revealed and "RunDir" in revealed[1] and "PathLike" in revealed[1], res.stdout


def test_python_examples_run(tmp_path: Path, tiny_model_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 5
    script = "\n".join(blocks).replace(
        'load_backend("smollm2"', f'load_backend("hf:{tiny_model_path}"'
    )
    assert script.count(str(tiny_model_path)) == 4  # one model per method
    (tmp_path / "examples.py").write_text(script, encoding="utf-8")
    env = dict(os.environ, CONTAMSCOPE_CACHE_DIR=str(tmp_path / "cache"))
    res = subprocess.run(
        [sys.executable, "examples.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    # each method printed what the doc says it prints
    assert re.search(r"^(leakage signal|no evidence|nothing to test) - ", out, re.M), out
    assert "Algorithm 1 rate:" in out and out.count(" rank ") == 3
    assert re.search(r"^Algorithm 2 at delta -0.1: [01]\.?\d*$", out, re.M), out
    assert re.search(r"^Question: .*\nOptions:\n\(A\) .*\n\(B\) ", out, re.M), out
    assert re.search(r"^alphabetical: \d+ of \d+ items, \d+% against 4% if shuffled", out, re.M)
    assert "numbers in increasing order" in out
    assert re.search(r"^qa (contaminated|fine-tuned|no evidence|inconclusive|likely)", out, re.M)
    assert "exact n-gram accuracy, original - paraphrase: " in out
    assert re.search(r"^benchmark vs reference: AUC [0-9.]+ p = [0-9.]+$", out, re.M)
    assert (tmp_path / "runs" / "anatomy" / "report.html").is_file()
    assert "anatomy" in (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
    assert (
        (tmp_path / "card.md")
        .read_text(encoding="utf-8")
        .startswith("# Benchmark Transparency Card: Tiny")
    )
    assert re.search(r"^[0-9]+ of [0-9]+ items paired$", out, re.M)
