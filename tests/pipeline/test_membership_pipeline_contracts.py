"""Documented contracts of the membership pipeline (docs/output.md, "Output of `contamscope
membership`"), read from its records without a model: which items get which statistic, what is
excluded and why, the summary's counts, and what a re-analysis keeps of the run."""

from __future__ import annotations

import json
import math
import types
from pathlib import Path
from typing import Any

import pytest

from contamscope.backends.base import ScoreRequest, TokenStats
from contamscope.data import LoadResult, MCQItem
from contamscope.detectors.combined import COMBINED_NULL
from contamscope.detectors.membership import ITEM_NULL
from contamscope.errors import ConfigError
from contamscope.pipeline import MembershipConfig, reanalyse_membership
from contamscope.pipeline.membership import (
    _add_gaps,
    _analysis_part,
    _record,
    analyse,
    build_summary,
    distinct_references,
)

STATS = ("loss", "min_k", "zlib", "min_k_pp")


def _rec(role: str, i: int, value: float | None, gap: float | None = 0.0) -> dict[str, Any]:
    """A record as the pipeline writes it, every statistic ``value`` (None: unscored)."""
    stats = None if value is None else {s: value for s in STATS} | {"gap": gap}
    return {
        "id": f"{role}/item-{i}",
        "item_id": f"item-{i}",
        "role": role,
        "excluded": "no tokens" if value is None else None,
        "statistics": stats,
    }


def _records(bench: list[float | None], ref: list[float | None]) -> list[dict[str, Any]]:
    return [_rec("benchmark", i, v) for i, v in enumerate(bench)] + [
        _rec("reference", i, v) for i, v in enumerate(ref)
    ]


def _too_long(n: int) -> TokenStats:
    nan = (math.nan,) * n
    return TokenStats(tuple(range(1, n + 1)), nan, (-1,) * n, 0, nan, nan, over_context=True)


def test_a_text_past_the_local_context_is_excluded_with_its_token_count() -> None:
    """docs/output.md: ``excluded`` says why ("longer than the model's context window"), and
    ``n_tokens`` is null only for "a text too long for the model whose count is not known": an
    over-context text the local backend tokenised keeps its real token count (mutation QA)."""
    item = MCQItem("a", "2+2?", ("3", "4"))
    rec = _record("benchmark", item, ScoreRequest("", "2+2? 3 4"), _too_long(700), 0.2)
    assert rec["excluded"] == "longer than the model's context window"
    assert rec["n_tokens"] == 700
    assert rec["statistics"] is None
    served = _record("benchmark", item, ScoreRequest("", "x"), TokenStats.too_long(True), 0.2)
    assert served["excluded"] == "longer than the model's context window"
    assert served["n_tokens"] is None


def test_an_order_whose_log_prob_is_nan_gives_no_gap() -> None:
    """A statistic that cannot be computed is null (never NaN, which is not JSON): one option
    order's NaN log-prob leaves the item's gap None (mutation QA)."""
    recs = [{"statistics": {"loss": -1.0}}, {"statistics": {"loss": -1.0}}]
    _add_gaps(recs, [[-1.0, math.nan, -2.0], [-1.0, -2.0, -3.0]])
    assert recs[0]["statistics"]["gap"] is None
    assert recs[1]["statistics"]["gap"] == pytest.approx(-1.0 - (-2.5))


def test_repeated_references_are_found_however_often_they_repeat() -> None:
    """distinct_references: "The reference items once each, and the repeats of an earlier
    one" (mutation QA)."""
    r = MCQItem("r", "2+2?", ("3", "4"))
    kept, repeats = distinct_references([r, MCQItem("s", "3+3?", ("6", "5")), r, r])
    assert [x.id for x in kept] == ["r", "s"]
    assert [x.id for x in repeats] == ["r", "r"]


def test_a_combined_item_without_its_gap_is_not_tested_nor_counted() -> None:
    """The combined test reads gap and Min-K%++ ("the statistics it combines"); an item
    lacking either gets "p_value null" and no flag, and ``items_analysed`` leaves it out
    (mutation QA)."""
    records = _records([5.0, 6.0, 7.0, 8.0], [float(x) for x in range(10)])
    records[0]["statistics"]["gap"] = None
    records[1]["statistics"]["min_k_pp"] = None
    config = MembershipConfig(statistic="combined", n_boot=200)
    test = analyse(records, config)
    for r in records[:2]:
        assert r["p_value"] is None and r["flag"] is None
    assert all(r["p_value"] is not None for r in records[2:4])
    assert test["n_items"] == 2
    loaded = {r: {"items_loaded": 14, "rows_skipped": 0} for r in ("benchmark", "reference")}
    counts = _analysis_part(records, config, test, loaded)["counts"]
    assert counts["benchmark"]["items_analysed"] == 2
    assert counts["benchmark"]["items_selected"] == 4


def test_each_statistic_states_its_own_item_null_hypothesis() -> None:
    """docs/output.md: ``null_hypothesis`` holds the ``item`` null hypothesis of the test run:
    the combined test's is about the item's (gap, Min-K%++) pair, not one statistic's
    (mutation QA)."""
    records = _records([5.0, 6.0, 7.0], [float(x) for x in range(10)])
    loaded = {r: {"items_loaded": 13, "rows_skipped": 0} for r in ("benchmark", "reference")}
    for statistic, null in (("combined", COMBINED_NULL), ("loss", ITEM_NULL)):
        config = MembershipConfig(statistic=statistic, n_boot=200)  # type: ignore[arg-type]
        part = _analysis_part(records, config, analyse(records, config), loaded)
        assert part["null_hypothesis"]["item"] == null
    assert COMBINED_NULL != ITEM_NULL


def test_only_the_run_s_statistic_is_declared() -> None:
    """_describe: "Only config.statistic is the run's declared test; the others are shown for
    exploration": a combined run declares none of the single statistics, its parts gap and
    Min-K%++ included (mutation QA)."""
    records = _records([5.0, 6.0, 7.0], [float(x) for x in range(10)])
    test = analyse(records, MembershipConfig(statistic="combined", n_boot=200))
    assert set(test["by_statistic"]) == {*STATS, "gap"}
    assert not any(d["declared"] for d in test["by_statistic"].values())


def test_a_re_analysis_with_a_single_statistic_drops_the_combined_scores() -> None:
    """docs/output.md: ``combined_score`` is "--statistic combined only"; analysed again
    with loss, no record keeps the combined run's scores (mutation QA)."""
    records = _records([5.0, 6.0, 7.0], [float(x) for x in range(10)])
    analyse(records, MembershipConfig(statistic="combined", n_boot=200))
    assert "combined_score" in records[0]
    analyse(records, MembershipConfig(statistic="loss", n_boot=200))
    assert not any("combined_score" in r for r in records)


def test_an_item_without_the_new_statistic_loses_its_earlier_p_value() -> None:
    """docs/output.md: ``p_value`` is "null where excluded"; an item scored for loss but
    without Min-K%++ keeps no p-value or flag of the loss analysis when the run is analysed
    again with Min-K%++ (mutation QA)."""
    records = _records([50.0, 6.0, 7.0], [float(x) for x in range(10)])
    records[0]["statistics"]["min_k_pp"] = None
    analyse(records, MembershipConfig(statistic="loss", n_boot=200))
    assert records[0]["p_value"] is not None and records[0]["flag"] is not None
    analyse(records, MembershipConfig(statistic="min_k_pp", n_boot=200))
    assert records[0]["p_value"] is None and records[0]["flag"] is None


def test_references_without_the_orders_are_refused_for_the_gap() -> None:
    """analyse: --statistic gap "needs every option order scored": reference records that
    lack them are refused, not left out of the calibration (mutation QA)."""
    records = _records([5.0, 6.0, 7.0], [float(x) for x in range(10)])
    for r in records[3:]:
        del r["statistics"]["gap"]
    with pytest.raises(ConfigError, match="needs every option order scored"):
        analyse(records, MembershipConfig(statistic="gap", n_boot=200))


def test_the_flagged_items_are_those_flagged_under_fdr() -> None:
    """docs/output.md: with --fdr the items are flagged by their q-value; ``flagged_items``
    lists the flagged ones: an item with p 1/101 < 0.05 among 10 has q 0.099 > 0.05 and is not
    flagged (mutation QA)."""
    records = _records([1000.0, *[0.5] * 9], [float(x) for x in range(100)])
    test = analyse(records, MembershipConfig(statistic="loss", fdr=True, n_boot=200))
    assert records[0]["p_value"] == pytest.approx(1 / 101)
    assert records[0]["q_value"] == pytest.approx(10 / 101)
    assert records[0]["flag"] is False
    assert test["flagged_items"] == [r["id"] for r in records if r.get("flag")] == []


def test_a_run_holding_the_orders_shows_the_gap_whatever_its_statistic() -> None:
    """docs/output.md: ``by_statistic.{loss,min_k,zlib,min_k_pp[,gap]}``, the gap "where the
    orders are scored": a loss run of a folder that holds them shows it (mutation QA)."""
    records = _records([5.0, 6.0, 7.0], [float(x) for x in range(10)])
    test = analyse(records, MembershipConfig(statistic="loss", keep_orders=True, n_boot=200))
    assert "gap" in test["by_statistic"]


def test_an_excluded_item_counts_as_selected_not_analysed() -> None:
    """docs/output.md: counts ``items_selected``, ``items_analysed``, ``excluded`` (by reason):
    an item excluded for no tokens is selected, not analysed, and counted by its reason
    (mutation QA)."""
    records = _records([5.0, None, 7.0], [float(x) for x in range(10)])
    config = MembershipConfig(statistic="loss", n_boot=200)
    test = analyse(records, config)
    loaded = {r: {"items_loaded": 13, "rows_skipped": 0} for r in ("benchmark", "reference")}
    counts = _analysis_part(records, config, test, loaded)["counts"]["benchmark"]
    assert counts["items_selected"] == 3
    assert counts["items_analysed"] == 2
    assert counts["excluded"] == {"no tokens": 1}


def _finished(path: Path, config: MembershipConfig, *, vocab: bool = True) -> Path:
    """A finished membership run folder of the records above (5, 6, 7 against 0..9)."""
    records = _records([5.0, 6.0, 7.0], [float(x) for x in range(10)])
    test = analyse(records, config)
    loaded = {r: {"items_loaded": 13, "rows_skipped": 0} for r in ("benchmark", "reference")}
    settings = {
        "method": "membership",
        "model": "hf:/models/tiny",
        "selection": {"n_items": 3, "n_reference": 10},
        "config": config.scoring_settings(),
        "vocab_stats": vocab,
    }
    summary = {"method": "membership", "model": {"spec": "hf:/models/tiny"}}
    summary |= _analysis_part(records, config, test, loaded)
    path.mkdir()
    (path / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    (path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    lines = "".join(json.dumps(r) + "\n" for r in records)
    (path / "items.jsonl").write_text(lines, encoding="utf-8")
    return path


def test_a_re_analysis_keeps_the_run_s_settings_it_is_not_given(tmp_path: Path) -> None:
    """reanalyse_membership: "Arguments left None keep the run's values (seed: the
    bootstrap's)": a run at FDR, 300 resamples and seed 3, analysed again at another alpha,
    keeps them (mutation QA)."""
    cfg = MembershipConfig(statistic="loss", fdr=True, n_boot=300, seed=3)
    run = _finished(tmp_path / "run", cfg)
    config = reanalyse_membership(run, alpha=0.1).summary["config"]
    assert (config["fdr"], config["n_boot"], config["seed"], config["alpha"]) == (True, 300, 3, 0.1)


def test_a_re_analysis_of_a_run_with_the_orders_keeps_them(tmp_path: Path) -> None:
    """reanalyse_membership: a run scored with every option order keeps them when analysed
    with a statistic that needs none: its config still says ``orders`` and its statistics
    still show the gap ("by_statistic ... [,gap]") (mutation QA)."""
    run = _finished(tmp_path / "run", MembershipConfig(statistic="gap", n_boot=200))
    summary = reanalyse_membership(run, statistic="loss").summary
    assert "orders" in summary["config"]
    assert "gap" in summary["statistics"]["by_statistic"]
    assert summary["statistics"]["statistic"] == "loss"


def test_min_k_pp_is_refused_without_the_vocabulary_statistics(tmp_path: Path) -> None:
    """reanalyse_membership: "Min-K%++ from a model without vocabulary statistics is refused"
    (mutation QA)."""
    run = _finished(tmp_path / "run", MembershipConfig(statistic="loss", n_boot=200), vocab=False)
    with pytest.raises(ConfigError, match="needs the vocabulary statistics"):
        reanalyse_membership(run, statistic="min_k_pp")
    assert reanalyse_membership(run, statistic="zlib").summary["statistics"]["statistic"] == "zlib"


def test_excluded_references_are_listed_with_the_benchmark_s() -> None:
    """docs/output.md: ``excluded_items`` lists the "items left out and why", of either file:
    a reference too long for the model is one of them (mutation QA)."""
    records = _records([5.0, 6.0, 7.0], [float(x) for x in range(10)])
    records[-1] |= {"excluded": "longer than the model's context window", "statistics": None}
    records[1] |= {"excluded": "no tokens", "statistics": None}
    config = MembershipConfig(statistic="loss", n_boot=200)
    test = analyse(records, config)
    loaded = LoadResult([], [], "toy.csv", "mmlu-csv", "0" * 64, ["toy.csv"])
    scorer: Any = types.SimpleNamespace(backend=types.SimpleNamespace(describe=lambda: {}))
    summary = build_summary(loaded, loaded, records, {"selection": {}}, config, scorer, test, {})
    assert summary["excluded_items"] == [
        {"id": "benchmark/item-1", "reason": "no tokens"},
        {"id": "reference/item-9", "reason": "longer than the model's context window"},
    ]
    assert summary["counts"]["reference"]["excluded"] == {
        "longer than the model's context window": 1
    }
    # and the terminal says why (it said only "9 analysed of 10"; QA)
    from contamscope.cli.common import console
    from contamscope.cli.membership import print_membership_summary

    with console.capture() as shown:
        print_membership_summary(summary | {"model": {"spec": "toy"}})
    said = " ".join(shown.get().split())
    assert "9 analysed of 10; excluded: 1 longer than the model's context window" in said
    assert "2 analysed of 3; excluded: 1 no tokens" in said


def test_a_folder_with_the_orders_re_run_without_them_re_analyses(
    tmp_path: Path, tiny_backend: Any
) -> None:
    """The module's contract: what is only analysis (the statistic) "may change on a re-run of
    the same folder, which then scores nothing and re-analyses"; a folder scored with every
    option order (gap), run again with loss, keeps its orders and shows the gap (mutation
    QA)."""
    from contamscope.data import load_benchmark
    from contamscope.pipeline import run_membership
    from contamscope.store import CachedScorer, ScoreCache

    (tmp_path / "toy_test.csv").write_text(
        "What is 2+2?,3,4,5,6,B\nWho wrote Hamlet?,Shakespeare,Dickens,Austen,Tolkien,A\n",
        encoding="utf-8",
    )
    words = ["river stone", "cloud lamp", "seven orange", "quiet market", "violin paper"]
    rows = [f"Pick {w} {i}?,{w},{i},x {i},y {i},A" for i, w in enumerate(words)]
    (tmp_path / "fresh.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    bench = load_benchmark(str(tmp_path / "toy_test.csv"))
    ref = load_benchmark(str(tmp_path / "fresh.csv"))
    scorer = CachedScorer(tiny_backend, ScoreCache(tmp_path / "scores.sqlite"))
    out = tmp_path / "run"
    gap = MembershipConfig(statistic="gap", n_boot=200)
    run_membership(bench, bench.items, ref, ref.items, scorer, out, gap)
    loss = MembershipConfig(statistic="loss", n_boot=200)
    again = run_membership(bench, bench.items, ref, ref.items, scorer, out, loss)
    assert again.summary["timings"]["items_scored_now"] == 0
    assert again.summary["statistics"]["statistic"] == "loss"
    assert "orders" in again.summary["config"]
    assert "gap" in again.summary["statistics"]["by_statistic"]
