"""A finished BenBench run analysed again with other thresholds and bootstrap settings, from its
stored n-grams: no model, nothing scored; equal to a fresh run with those settings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli
from toy_rows import QA_ROWS as ROWS
from toy_rows import write_jsonl

from contamscope.data.qa import load_qa
from contamscope.errors import ConfigError, StoreError
from contamscope.pipeline import BenBenchConfig, SplitInput, reanalyse_benbench, run_benbench
from contamscope.pipeline.benbench_refs import inline_reference
from contamscope.store import CachedScorer, RunDir, ScoreCache, read_records

OTHER = {"rouge_threshold": 0.0, "edit_threshold": 0.0, "inclusive": True, "n_boot": 300, "seed": 7}
"""Thresholds every n-gram passes (>= 0), so the lenient flags change on a random model."""


def _splits(tmp_path: Path) -> list[SplitInput]:
    out = []
    for name, rows in (("test", ROWS), ("train", ROWS[:2])):
        loaded = load_qa(str(write_jsonl(tmp_path / f"toy-{name}.jsonl", rows)))
        ref = inline_reference(loaded)
        assert ref is not None
        out.append(SplitInput(name, loaded, loaded.items, [ref]))
    return out


def _analysis(summary: dict[str, Any]) -> dict[str, Any]:
    """What a re-analysis must equal: everything but the provenance and timings."""
    drop = {"created", "timings", "versions", "git_commit"}
    return {k: v for k, v in summary.items() if k not in drop}


@pytest.fixture
def scorer(tmp_path: Path, tiny_backend) -> CachedScorer:  # type: ignore[no-untyped-def]
    return CachedScorer(tiny_backend, ScoreCache(tmp_path / "cache.sqlite"))


def test_reanalysis_equals_a_fresh_run_and_a_rerun(tmp_path: Path, scorer: CachedScorer) -> None:
    splits = _splits(tmp_path)
    first = run_benbench(splits, scorer, RunDir(tmp_path / "run"), BenBenchConfig(n_boot=200))
    before = read_records(tmp_path / "run")
    assert any(v["ngram"]["all_edit"] is False for r in before for v in r["versions"])
    fresh = run_benbench(splits, scorer, RunDir(tmp_path / "fresh"), BenBenchConfig(**OTHER))
    mark = scorer.mark()
    again = reanalyse_benbench(tmp_path / "run", **OTHER)
    assert scorer.since(mark) == (0, 0)  # nothing scored, nothing read from the cache
    assert _analysis(again.summary) == _analysis(fresh.summary)
    assert read_records(tmp_path / "run") == read_records(tmp_path / "fresh")
    # 5 items; the one too short for an n-gram has no threshold to change
    assert again.summary["timings"]["reanalysed_records"] == 4
    assert (
        again.summary["timings"]["scoring_seconds"] == first.summary["timings"]["scoring_seconds"]
    )
    settings = json.loads((tmp_path / "run" / "settings.json").read_text())
    assert settings["config"] == fresh.summary["config"] == again.summary["config"]
    # settings not given keep the run's: nothing changes, nothing rewritten
    assert reanalyse_benbench(tmp_path / "run").summary["timings"]["reanalysed_records"] == 0
    # a re-run of the first settings on the folder is not refused: its records are derived
    # back from the stored n-grams, nothing is scored
    back = run_benbench(splits, scorer, RunDir(tmp_path / "run"), BenBenchConfig(n_boot=200))
    assert back.scored_now == 0 and _analysis(back.summary) == _analysis(first.summary)
    assert read_records(tmp_path / "run") == before


def test_a_reanalysis_killed_before_its_settings_is_put_right(
    tmp_path: Path, scorer: CachedScorer
) -> None:
    splits = _splits(tmp_path)
    run_benbench(splits, scorer, RunDir(tmp_path / "run"), BenBenchConfig(n_boot=200))
    before = read_records(tmp_path / "run")
    shutil.copytree(tmp_path / "run", tmp_path / "other")
    reanalyse_benbench(tmp_path / "other", **OTHER)
    # records derived under the new thresholds, settings still the old ones (a kill between)
    shutil.copy(tmp_path / "other" / "items.jsonl", tmp_path / "run" / "items.jsonl")
    assert read_records(tmp_path / "run") != before
    reanalyse_benbench(tmp_path / "run")
    assert read_records(tmp_path / "run") == before


def test_refusals(tmp_path: Path, scorer: CachedScorer) -> None:
    splits = _splits(tmp_path)[:1]
    strict = BenBenchConfig(lenient=False, n_boot=200)
    run_benbench(splits, scorer, RunDir(tmp_path / "strict"), strict)
    with pytest.raises(ConfigError, match="--edit-threshold: .* was run with --no-lenient"):
        reanalyse_benbench(tmp_path / "strict", edit_threshold=0.75)
    assert reanalyse_benbench(tmp_path / "strict", seed=3).summary["config"]["seed"] == 3
    with pytest.raises(ConfigError, match="no setting 'n'"):
        reanalyse_benbench(tmp_path / "strict", n=4)
    run_benbench(splits, scorer, RunDir(tmp_path / "lenient"), BenBenchConfig(n_boot=200))
    with pytest.raises(ConfigError, match="--edit-threshold must be between 0 and 1"):
        reanalyse_benbench(tmp_path / "lenient", edit_threshold=2.0)
    (tmp_path / "strict" / "summary.json").unlink()
    with pytest.raises(StoreError, match="unfinished .* re-run its benbench command"):
        reanalyse_benbench(tmp_path / "strict", seed=1)


def test_cli_reanalyse_benbench(tmp_path: Path, tiny_model_path: Path) -> None:
    bench = write_jsonl(tmp_path / "toy-test.jsonl", ROWS[:2])
    model = ["--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>", "--device", "cpu"]
    r = run_cli(  # --n-boot as cap and reanalyse name it (it was --bootstrap only; QA)
        "benbench", *model, "--benchmark", str(bench), "--out", "run", "--n-boot", "200",
        "--report", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["config"]["n_boot"] == 200
    assert "scored 2 items in" in " ".join(r.stdout.split())
    assert "Verdict and statistics" in (tmp_path / "run" / "report.html").read_text()
    (tmp_path / "run" / "report.html").write_text("old report", encoding="utf-8")
    r = run_cli(
        "reanalyse", "run", "--edit-threshold", "0", "--inclusive", "--bootstrap", "300",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "re-analysed 2 stored items (2 records changed); nothing scored" in r.stderr
    assert "answer perplexity" in r.stdout
    assert "ROUGE-L F ≥ 0.75, edit similarity ≥ 0" in " ".join(r.stdout.split())  # as applied
    # its timings are the run's that scored the items (this one scored nothing)
    assert "the run that scored them finished 2 items in" in " ".join(r.stdout.split())
    assert "card:   contamscope card --run run --out card.md" in r.stdout  # (as benbench's)
    report = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert "old report" not in report and "ROUGE-L F ≥ 0.75, edit similarity ≥ 0)" in report
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    config = summary["config"]
    assert (config["edit_threshold"], config["inclusive"], config["n_boot"]) == (0.0, True, 300)
    assert summary["statistics"]["splits"]["test"]["original"]["ngram_edit"] == 1.0
    r = run_cli("reanalyse", "run", "--ties", "leaked", cwd=tmp_path)
    assert r.returncode == 2 and "--ties: not a setting of a benbench run" in r.stderr
    assert "--edit-threshold" in r.stderr and "Traceback" not in r.stderr
    # the command itself, re-run with the first settings on the folder: nothing scored
    r = run_cli(
        "benbench", *model, "--benchmark", str(bench), "--out", "run", "--bootstrap", "200",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["timings"]["items_scored_now"] == 0
    assert summary["config"]["edit_threshold"] == 0.9
    # another --seed, without --sample, is the bootstrap's: re-derived, not refused as a run
    # with other settings (its selection's seed selected nothing; QA)
    r = run_cli(
        "benbench", *model, "--benchmark", str(bench), "--out", "run", "--bootstrap", "200",
        "--seed", "3", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["timings"]["items_scored_now"] == 0 and summary["config"]["seed"] == 3
    # with --sample it chooses the items: another is another run
    r = run_cli(
        "benbench", *model, "--benchmark", str(bench), "--out", "run2", "--sample", "1",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = run_cli(
        "benbench", *model, "--benchmark", str(bench), "--out", "run2", "--sample", "1",
        "--seed", "1", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2 and "selection.seed: 0 -> 1" in r.stderr, r.stderr


def test_rouge_l_is_derived_again_from_the_stored_texts(
    tmp_path: Path, scorer: CachedScorer
) -> None:
    """ROUGE-L counted no Chinese character before 2026-11-30: a run of then, resumed or
    re-analysed now, mixed 0s with the new values. Every open derives it from the stored
    predicted and original texts (here a stored value set to what the old tokeniser gave)."""
    from contamscope.detectors.benbench import rouge_l_f

    run_benbench(_splits(tmp_path), scorer, RunDir(tmp_path / "run"), BenBenchConfig(n_boot=200))
    records = read_records(tmp_path / "run")
    stored = [
        res
        for rec in records
        for v in rec["versions"]
        for res in v["ngram"].get("results", [])
        if res.get("predicted") is not None
    ]
    assert stored
    for res in stored:
        res["original"], res["predicted"], res["rouge_l"] = "原癌基因", "原癌基因", 0.0
    RunDir(tmp_path / "run").replace_records(records)
    again = reanalyse_benbench(tmp_path / "run")
    assert again.summary["timings"]["reanalysed_records"] > 0
    results = [
        res
        for rec in read_records(tmp_path / "run")
        for v in rec["versions"]
        for res in v["ngram"].get("results", [])
        if res.get("predicted") is not None
    ]
    assert results and all(
        res["rouge_l"] == rouge_l_f("原癌基因", "原癌基因") == 1.0 for res in results
    )
