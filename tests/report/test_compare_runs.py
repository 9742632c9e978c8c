"""compare_runs on BenBench and membership run folders shaped as the pipelines write them: which
items pair, which runs are refused, and the tests' direction (the end-to-end runs of real
models are in tests/cli/test_compare_*)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from contamscope.errors import ConfigError
from contamscope.pipeline import compare_runs

MakeRun = Callable[..., Path]


def _keep_split(run: Path, split: str) -> Path:
    """The run with only ``split``'s records and files."""
    recs = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    (run / "items.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in recs if r["split"] == split)
    )
    summary = json.loads((run / "summary.json").read_text())
    summary["benchmark"] = {split: summary["benchmark"][split]}
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def test_benbench_runs_pair_by_split_and_the_test_split_decides(
    make_benbench_run: MakeRun,
) -> None:
    a = make_benbench_run("a", leaked=False, seed=0)
    b = make_benbench_run("b", leaked=True, seed=1)
    result = compare_runs(a, b)
    # item 0 of each split lost its paraphrase (the answer changed): 29 of 30 pair per split
    assert result["counts"]["by_split"] == {"test": 29, "train": 29}
    assert result["counts"]["no_paraphrase_a"] == result["counts"]["no_paraphrase_b"] == 2
    assert result["tested_on"] == "test" and result["statistics"]["direction"] == "B"
    assert result["statistics"]["tested"] == ["nll", "ngram_exact", "ngram_rouge", "ngram_edit"]
    # on train neither model was lifted: the train split's own tests see no difference
    assert result["by_split"]["train"]["p_value"] > 0.05
    assert compare_runs(b, a)["statistics"]["direction"] == "A"

    # a run of the train split alone shares no split with a run of the test split alone
    only_test = _keep_split(make_benbench_run("t", leaked=True), "test")
    only_train = _keep_split(make_benbench_run("r", leaked=False), "train")
    with pytest.raises(ConfigError, match="share no split"):
        compare_runs(only_test, only_train)
    # one split in common: that split is tested, and no per-split table
    one = compare_runs(a, only_test)
    assert one["counts"]["by_split"] == {"test": 29} and one["by_split"] is None
    # both ran the test split, but only train items pair: refused, not read from train
    no_test = make_benbench_run("n", leaked=True, seed=2)
    recs = [json.loads(x) for x in (no_test / "items.jsonl").read_text().splitlines()]
    for r in recs:
        if r["split"] == "test":
            r["metrics"]["delta"] = None
    (no_test / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(ConfigError, match="no test item has an original-vs-paraphrase gap"):
        compare_runs(a, no_test)


def test_membership_runs_pair_items_both_scored(make_membership_run: MakeRun) -> None:
    a = make_membership_run("a", shift=0.0, seed=0)
    b = make_membership_run("b", shift=1.5, seed=1)
    result = compare_runs(a, b)
    stats = result["statistics"]
    assert result["counts"] == {
        "benchmark": 30,
        "reference": 60,
        "only_a_benchmark": 0,
        "only_a_reference": 0,
        "only_b_benchmark": 0,
        "only_b_reference": 0,
    }
    assert stats["direction"] == "B" and stats["loss"]["b"] > stats["loss"]["a"]
    summary = json.loads((b / "summary.json").read_text())
    assert stats["loss"]["b"] == pytest.approx(summary["statistics"]["dataset_test"]["auc"])

    small = make_membership_run("small", n_bench=1, n_ref=10)
    with pytest.raises(ConfigError, match="the runs share only 1 benchmark item "):
        compare_runs(a, small)
    other = make_membership_run("other", statistic="zlib")
    with pytest.raises(ConfigError, match="--statistic loss vs zlib"):
        compare_runs(a, other)


def test_membership_statistics_hint_names_the_run_that_can_be_brought_over(tmp_path: Path) -> None:
    """A gap run against a Min-K%++ run scored without the option orders: the hint said to
    reanalyse the second with --statistic gap, which its records cannot give."""
    import pytest

    from contamscope.errors import ConfigError
    from contamscope.pipeline.compare_membership import _check_alike
    from contamscope.report.rundata import RunData

    def run(name: str, statistic: str, orders: bool) -> RunData:
        config = {"statistic": statistic, "k": 0.2, "template": {"name": "paper"}}
        settings = {"config": {**config, **({"orders": "all"} if orders else {})}}
        summary = {"config": config, "benchmark": {"content_hash": "b"},
                   "reference": {"content_hash": "r"}}  # fmt: skip
        return RunData(path=tmp_path / name, summary=summary, settings=settings)

    g, k = run("g", "gap", True), run("k", "min_k_pp", False)
    for a, b in ((g, k), (k, g)):  # either way round, the gap run is the one to bring over
        with pytest.raises(ConfigError) as err:
            _check_alike(a, b)
        assert f"`contamscope reanalyse {g.path} --statistic min_k_pp`" in str(err.value)


def test_a_run_that_lost_records_is_compared_on_the_rest_and_said(
    make_run: MakeRun, make_membership_run: MakeRun, tmp_path: Path
) -> None:
    """compare used a run whose items.jsonl had lost records without a word, where report
    warns of it and reanalyse refuses it (QA): the terminal, the Markdown, the page and the
    JSON say which run holds how many of the records its summary counts."""
    from cli_runner import run_cli

    a, b = make_run("a", seed=0), make_run("b", seed=1)
    lines = (a / "items.jsonl").read_text().splitlines(keepends=True)
    (a / "items.jsonl").write_text("".join(lines[:-5]))
    said = f"A: {a / 'items.jsonl'} holds 25 of the 30 item records its summary.json counts"
    result = compare_runs(a, b)
    assert [w[: len(said)] for w in result["warnings"]] == [said]
    assert compare_runs(b, a)["warnings"][0].startswith("B: ")
    assert compare_runs(b, b)["warnings"] == []
    for out in ("c.md", "c.html"):
        r = run_cli("compare", str(a), str(b), "--out", out, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "warning: " + said in " ".join(r.stderr.split())
        assert said in (tmp_path / out).read_text(encoding="utf-8")
    # another method alike: a membership run that lost reference records
    m_a, m_b = make_membership_run("ma", seed=0), make_membership_run("mb", seed=1)
    lines = (m_b / "items.jsonl").read_text().splitlines(keepends=True)
    (m_b / "items.jsonl").write_text("".join(lines[:-3]))
    warned = compare_runs(m_a, m_b)["warnings"]
    assert len(warned) == 1 and warned[0].startswith(f"B: {m_b / 'items.jsonl'} holds 87 of the 90")


def test_compare_and_leaderboard_do_not_write_over_a_validations_files(
    make_run: MakeRun, tmp_path: Path
) -> None:
    """compare --out and leaderboard --out replaced a validation folder's train_log.json (its
    summary, split and settings were refused; QA)."""
    from cli_runner import run_cli

    a, b = make_run("a", seed=0), make_run("b", seed=1)
    val = tmp_path / "val"
    val.mkdir()
    (val / "settings.json").write_text('{"method": "validate"}\n')
    (val / "train_log.json").write_text('[{"epoch": 1}]\n')
    for args in (
        ["compare", str(a), str(b), "--out", str(val / "train_log.json")],
        ["leaderboard", str(a), "--format", "csv", "--out", str(val / "train_log.json")],
    ):
        r = run_cli(*args, cwd=tmp_path)
        assert r.returncode == 2 and "train_log.json: is a file of the run in" in r.stderr
    assert (val / "train_log.json").read_text() == '[{"epoch": 1}]\n'
