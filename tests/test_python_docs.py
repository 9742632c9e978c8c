"""docs/python.md's examples run as written (on the tiny model instead of SmolLM2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"


README = DOC.parents[1] / "README.md"

# What a typed harness writes, beside the docs' examples: each line was refused by the type
# checker, or read as Any, though the library takes it (typed-API QA)
TYPED_PROBE = """
from pathlib import Path
from contamscope.data import MCQItem, load_benchmark, load_cap, load_qa
from contamscope.pipeline import MembershipConfig, PermutationConfig, compare_runs, select_items
from contamscope.report import build_report
from contamscope.report.leaderboard import write_leaderboard
from contamscope.store import RunDir, ScoreCache, read_records

loaded = load_benchmark(Path("bench.csv"))
first: MCQItem = loaded.items[0]
chosen: list[MCQItem] = select_items(it for it in loaded.items)
load_qa(Path("qa.jsonl"))
load_cap(Path("cap"), ["train", "test"])
ScoreCache("scores.sqlite")
run = RunDir("runs/a")
build_report(run)
read_records(run)
compare_runs(run, Path("runs/b"))
PermutationConfig(deltas=[-0.2, -0.1])
MembershipConfig(statistic="min_k")
text, path = write_leaderboard([run], "board.md")
print(path.name, first.question)
reveal_type(loaded)
"""


def _mypy(folder: Path, *files: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental"]
        + ["--cache-dir", str(folder / "cache"), *files],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_python_examples_type_check(tmp_path: Path) -> None:
    """The examples (docs/python.md's and README's) pass ``mypy --strict`` as written: the
    package is typed (py.typed), and its annotations take what the docs pass
    (``template="paper"``, a folder path as ``run_dir``; without py.typed every name was Any,
    and with it those two failed); so does what a typed harness writes (TYPED_PROBE)."""
    pytest.importorskip("mypy", reason="mypy is a dev dependency (pip install -e '.[dev]')")
    for name, doc in (("examples.py", DOC), ("readme.py", README)):
        blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
        assert blocks, doc
        (tmp_path / name).write_text("\n".join(blocks), encoding="utf-8")
    res = _mypy(tmp_path, "examples.py", "readme.py")
    assert res.returncode == 0 and "Success" in res.stdout, res.stdout[-3000:] + res.stderr
    (tmp_path / "probe.py").write_text(TYPED_PROBE, encoding="utf-8")
    res = _mypy(tmp_path, "probe.py")
    said = res.stdout.splitlines()
    assert [line for line in said if "error:" in line] == [], res.stdout[-3000:]
    # the package is read, not skipped as untyped, and its loaders' items are typed
    assert any("LoadResult[contamscope.data.items.MCQItem]" in line for line in said), said
    # a misspelt analysis setting is refused by the checker as by the function (it took
    # **analysis: Any)
    (tmp_path / "typo.py").write_text(
        "from contamscope.pipeline import MembershipConfig, reanalyse_benbench, reanalyse_cap\n"
        'reanalyse_cap("runs/cap", alhpa=0.05)\n'
        'reanalyse_benbench("runs/bb", n_boot="100")\n'
        'MembershipConfig(statistic="mink")\n',
        encoding="utf-8",
    )
    said = [line for line in _mypy(tmp_path, "typo.py").stdout.splitlines() if "error:" in line]
    assert len(said) == 3 and '"alhpa"' in said[0] and '"n_boot"' in said[1], said
    assert '"statistic"' in said[2], said


def test_python_examples_run(tmp_path: Path, tiny_model_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 5
    script = (
        "\n".join(blocks)
        .replace('load_backend("smollm2"', f'load_backend("hf:{tiny_model_path}"')
        .replace("str(converted_gguf(smollm2_gguf_path()))", repr(str(tiny_model_path)))
    )
    assert script.count(str(tiny_model_path)) == 5  # one model per method, and your own
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
    # your own model: a Backend subclass of the doc's, run by the permutation test
    assert re.search(
        r"^my model: (leakage signal|no evidence|nothing to test) \[\d+, \d+, \d+\]$", out, re.M
    ), out
