"""An n-gram accuracy Delta near 0 (most items score 0 on the original and its paraphrases)
has an interval that covers far less than 95%: it is flagged (``ci_warning``), and every
place that shows the interval marks it."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_runner import run_cli
from rich.console import Console
from toy_rows import QA_ROWS as ROWS
from toy_rows import write_jsonl

from contamscope.cli import benbench as benbench_cli
from contamscope.cli.benbench import print_benbench_summary
from contamscope.data.qa import load_qa
from contamscope.detectors.benbench import delta_stats
from contamscope.pipeline.benbench import BenBenchConfig, SplitInput, run_benbench
from contamscope.pipeline.benbench_refs import inline_reference
from contamscope.store import CachedScorer, RunDir, ScoreCache

SPARSE_O = [0.2, 0.0, 0.0, 0.0, 0.4, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.2]
SPARSE_R = [0.0, 0.0, 0.2 / 3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
"""12 items, 4 of them scoring differently on the original and on its paraphrases."""


def _draw(rng: Any, n: int, p: float | None) -> tuple[Any, Any]:
    """Clean data (true Delta 0): each item's accuracy k/5 on the original and the mean of 3
    paraphrases; ``p`` the chance of each n-gram, or None for accuracies between 0.1 and 0.6."""
    acc = rng.uniform(0.1, 0.6, n) if p is None else np.full(n, p)
    return rng.binomial(5, acc) / 5, rng.binomial(5, acc[:, None], (n, 3)).mean(axis=1) / 5


def test_the_warning_marks_the_intervals_that_cover_too_little() -> None:
    d = delta_stats(SPARSE_O, SPARSE_R)
    assert d["ci"] is not None and d["ci_warning"].startswith("4 of 12 items score differently")
    dense = delta_stats([0.2, 0.4, 0.6, 0.2, 0.4, 0.8], [0.4, 0.2, 0.4, 0.6, 0.2, 0.4])
    assert dense["ci"] is not None and dense["ci_warning"] is None
    rng = np.random.default_rng(5)
    nll = delta_stats(rng.normal(2, 0.5, 12), rng.normal(2, 0.5, 12))
    assert nll["ci_warning"] is None
    # the flag separates the intervals that miss: 20 clean items, each n-gram right 1% of the
    # time (measured 0.74 coverage, every shown interval flagged) against accuracies 0.1-0.6
    # (0.95, none flagged); 200 sets a case, binomial sd about 0.03
    for p, flagged_share, covers in ((0.01, (0.9, 1.0), (0.0, 0.85)), (None, (0, 0.05), (0.9, 1))):
        shown = []
        for seed in range(200):
            out = delta_stats(*_draw(rng, 20, p), n_boot=500, seed=seed)
            if out["ci"] is not None:
                shown.append((out["ci_warning"] is not None, out["ci"][0] <= 0 <= out["ci"][1]))
        flags, cover = np.array(shown).T
        assert flagged_share[0] <= flags.mean() <= flagged_share[1], (p, flags.mean())
        assert covers[0] <= cover.mean() <= covers[1], (p, cover.mean())


def test_every_view_of_a_flagged_interval_marks_it(
    tmp_path: Path, tiny_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_qa(str(write_jsonl(tmp_path / "toy-test.jsonl", ROWS)))
    split = SplitInput("test", bench, bench.items, [inline_reference(bench)])  # type: ignore[list-item]
    scorer = CachedScorer(tiny_backend, ScoreCache(tmp_path / "cache.sqlite"))
    run_benbench([split], scorer, RunDir(tmp_path / "run"), BenBenchConfig(n_boot=200))
    path = tmp_path / "run" / "summary.json"
    summary = json.loads(path.read_text())
    # the random model predicts (almost) no n-gram: its Delta is put in place of a sparse one
    # computed from SPARSE_O / SPARSE_R, as a small model's run gives
    sparse = delta_stats(SPARSE_O, SPARSE_R)
    summary["statistics"]["splits"]["test"]["delta"]["ngram_exact"].update(sparse)
    path.write_text(json.dumps(summary))
    warning = sparse["ci_warning"]

    wide = Console(file=io.StringIO(), width=220)  # CI's 80 columns wrap the table's cells
    monkeypatch.setattr(benbench_cli, "console", wide)
    print_benbench_summary(summary)
    said = " ".join(wide.file.getvalue().split())  # type: ignore[attr-defined]
    lo, hi = (100 * x for x in sparse["ci"])
    assert f"[{lo:+.1f}, {hi:+.1f}] pp*" in said, said
    assert f"*n-gram accuracy, exact: {warning}" in said
    assert "few items differ: read the p-value" in said  # the verdict line

    r = run_cli("report", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    page = " ".join((tmp_path / "run" / "report.html").read_text().split())
    assert f"[{lo:+.1f}, {hi:+.1f}]*</td>" in page
    assert f"*n-gram accuracy, exact: {warning}." in page

    r = run_cli("card", "--run", "run", "--out", "card.md", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    card = " ".join((tmp_path / "card.md").read_text().split())
    assert f"[{lo:+.1f}, {hi:+.1f}]*, p" in card
    assert f"Delta of n-gram accuracy, exact: {warning} (its interval is marked *)" in card
    data = json.loads((tmp_path / "card.json").read_text())
    assert data["checks"][0]["delta"]["ngram_exact"]["ci_warning"] == warning

    r = run_cli("leaderboard", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"its interval: {warning}" in " ".join(r.stdout.split())
