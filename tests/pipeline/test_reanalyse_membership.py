"""`reanalyse_membership`: a finished membership run's stored statistics tested again with
another statistic, level or FDR, no model and no data; equal to a re-run of the folder."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from toy_rows import word_rows

from contamscope.data import load_benchmark
from contamscope.errors import ConfigError, StoreError
from contamscope.pipeline import MembershipConfig, reanalyse_membership, run_membership
from contamscope.store import CachedScorer, ScoreCache

BENCH = [
    "What is 2+2?,3,4,5,6,B",
    "Which planet is largest?,Mars,Venus,Jupiter,Earth,C",
    "Pick the colour of the sky,blue,green,red,yellow,A",
    "Who wrote Hamlet?,Shakespeare,Dickens,Austen,Tolkien,A",
]


@pytest.fixture
def scored(tmp_path: Path, tiny_backend: Any):  # type: ignore[no-untyped-def]
    (tmp_path / "toy_test.csv").write_text("\n".join(BENCH) + "\n", encoding="utf-8")
    (tmp_path / "fresh.csv").write_text("\n".join(word_rows(16, seed=1)) + "\n", encoding="utf-8")
    bench = load_benchmark(str(tmp_path / "toy_test.csv"))
    ref = load_benchmark(str(tmp_path / "fresh.csv"))
    scorer = CachedScorer(tiny_backend, ScoreCache(tmp_path / "scores.sqlite"))
    cfg = MembershipConfig(n_boot=200)

    def run(folder: str, config: MembershipConfig, **kw: Any):  # type: ignore[no-untyped-def]
        return run_membership(
            bench, bench.items, ref, ref.items, scorer, tmp_path / folder, config, **kw
        )

    first = run("run", cfg)
    return run, cfg, first


def _analysis(summary: dict) -> dict:  # type: ignore[type-arg]
    keys = ("config", "null_hypothesis", "alpha", "error_rate", "counts", "statistics")
    return json.loads(json.dumps({k: summary[k] for k in keys}))


def test_reanalysis_equals_a_re_run_with_those_settings(tmp_path: Path, scored) -> None:  # type: ignore[no-untyped-def]
    run, cfg, first = scored
    shutil.copytree(tmp_path / "run", tmp_path / "rerun")
    other = replace(cfg, statistic="loss", alpha=0.2, fdr=True, n_boot=300)
    rerun = run("rerun", other)
    assert rerun.summary["timings"]["items_scored_now"] == 0
    out = reanalyse_membership(tmp_path / "run", statistic="loss", alpha=0.2, fdr=True, n_boot=300)
    assert _analysis(out.summary) == _analysis(rerun.summary)
    assert _analysis(out.summary) != _analysis(first.summary)
    kept = ("model", "timings", "reference_check", "benchmark", "reference", "selection")
    assert {k: out.summary[k] for k in kept} == {k: first.summary[k] for k in kept}
    lines = (tmp_path / "run" / "items.jsonl").read_text().splitlines()
    assert lines == (tmp_path / "rerun" / "items.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["q_value"] is not None  # --fdr: q-values written
    back = reanalyse_membership(
        tmp_path / "run", statistic="min_k_pp", alpha=0.05, fdr=False, n_boot=200
    )
    assert _analysis(back.summary) == _analysis(first.summary)


def test_a_statistic_the_records_lack_is_refused(tmp_path: Path, scored) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="--statistic gap needs every option order scored"):
        reanalyse_membership(tmp_path / "run", statistic="gap")
    with pytest.raises(ConfigError, match="--statistic 'nope': expected one of"):
        reanalyse_membership(tmp_path / "run", statistic="nope")
    (tmp_path / "run" / "summary.json").unlink()
    with pytest.raises(StoreError, match="unfinished .* re-run its membership command"):
        reanalyse_membership(tmp_path / "run", alpha=0.1)


def test_a_folder_missing_records_is_refused_not_re_analysed_on_the_rest(
    tmp_path: Path, scored
) -> None:  # type: ignore[no-untyped-def]
    """With records cut from items.jsonl it re-analysed the remainder and rewrote the summary
    with fewer items than its selection."""
    items = tmp_path / "run" / "items.jsonl"
    lines = items.read_text().splitlines()
    kept = [ln for ln in lines if not json.loads(ln)["id"].startswith("benchmark/")][:]
    kept += [ln for ln in lines if json.loads(ln)["id"].startswith("benchmark/")][1:]
    items.write_text("\n".join(kept) + "\n")
    before = (tmp_path / "run" / "summary.json").read_text()
    with pytest.raises(StoreError, match="holds 3 of its 4 benchmark items; re-run its membership"):
        reanalyse_membership(tmp_path / "run", alpha=0.1)
    assert (tmp_path / "run" / "summary.json").read_text() == before


def test_an_interrupted_upgrade_to_the_gap_resumes_with_honest_counts(
    tmp_path: Path, scored
) -> None:  # type: ignore[no-untyped-def]
    """A folder switched to a statistic that needs the option orders, interrupted, then run
    again: the items whose orders the first try scored count as resumed (QA: every item was
    counted as scored now), and the orders' tokens count as scored."""
    run, cfg, first = scored
    gap = replace(cfg, statistic="gap", batch_items=4)
    seen: list[int] = []

    def stop_after_two_batches(n: int) -> None:
        seen.append(n)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run("run", gap, on_items=stop_after_two_batches)
    again = run("run", gap)
    timings = again.summary["timings"]
    total = timings["items_scored_now"] + timings["items_resumed"]
    assert total == 20 and timings["items_scored_now"] == 20 - 8, timings
    # the records are those of an uninterrupted switch, once each, in the folder's order
    whole = run("whole", cfg)
    assert whole.summary["counts"] == first.summary["counts"]
    upgrade = run("whole", gap)
    # the tokens scored now are the orders' (they counted none), as a fresh run's are its
    # items' tokens and its orders'
    fresh = run("fresh", gap)
    tokens = [r.summary["timings"]["tokens_scored_now"] for r in (first, upgrade, fresh)]
    assert 0 < tokens[1] == tokens[2] - tokens[0]
    got = [json.loads(x) for x in (tmp_path / "run" / "items.jsonl").read_text().splitlines()]
    want = [json.loads(x) for x in (tmp_path / "whole" / "items.jsonl").read_text().splitlines()]
    assert got == want


def test_the_reference_check_sees_language_length_and_option_count() -> None:
    """References in Chinese, five times longer, or with two options against four read as
    'alike' (only the option orders were compared), and the run said LEAK SIGNAL without a
    caveat (AUC 1.000 with Chinese references; membership QA)."""
    from contamscope.data import MCQItem, load_benchmark
    from contamscope.pipeline.membership import reference_likeness

    bench = load_benchmark("mmlu", subjects=["anatomy"]).items[:20]
    others = load_benchmark("mmlu", subjects=["anatomy"]).items[20:40]
    assert reference_likeness(bench, others)["alike"] is True  # drawn alike: alike
    cases = {
        "written in a CJK script": [
            MCQItem(f"z{i}", f"下列哪一块骨头属于第{i}组？", ("股骨", "胫骨", "腓骨", "髌骨"))
            for i in range(20)
        ],
        "longer than the median of both": [
            MCQItem(f"l{i}", it.question * 5, it.options) for i, it in enumerate(others)
        ],
        "4 options": [MCQItem(f"t{i}", it.question, it.options[:2]) for i, it in enumerate(others)],
    }
    for feature, refs in cases.items():
        check = reference_likeness(bench, refs)
        unlike = [r["feature"] for r in check["rows"] if r["p_value"] <= check["level"]]
        assert check["alike"] is False and feature in unlike, (feature, unlike)
