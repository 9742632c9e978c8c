"""Other thresholds on a stored permutation run: `reanalyse_permutation` (no model) and a
re-run of the same folder, against a fresh run with those thresholds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contamscope.data import load_benchmark
from contamscope.errors import DataError, StoreError
from contamscope.pipeline import (
    PermutationConfig,
    reanalyse_permutation,
    run_benchmark,
    run_permutation,
)
from contamscope.store import CachedScorer, RunDir, ScoreCache

ROWS = (
    "How many legs has a spider?,2,4,6,8,D\n"
    "Which city is in France?,Rome,Paris,Oslo,Lima,B\n"
    "Which is a metal?,Wood,Glass,Iron,Clay,C\n"
    "Which are mammals?,Whale,Bat,Dog,All of the above,D\n"
    "Which is a colour?,Red,Dog,Cat,Cow,A\n"
    "Which is a planet?,Sun,Moon,Mars,Comet,C\n"
)
FLAGS = ("alg1", "alg1_null", "alg2", "alg2_anchored", "null_anchored", "alg2_score", "rank")
OTHER = PermutationConfig(ties="leaked", deltas=(-0.3, -0.15, 0.0), alpha=0.2)


def _records(folder: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    lines = (folder / "items.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines)}


def _analysis(summary: dict) -> dict:  # type: ignore[type-arg]
    keys = ("statistics", "natural_order", "verdict", "by_subject", "counts")
    return json.loads(json.dumps({k: summary[k] for k in keys}))


@pytest.fixture
def runs(tmp_path: Path, tiny_backend):  # type: ignore[no-untyped-def]
    """A finished run with the default thresholds, and a fresh run with OTHER's."""
    bench = tmp_path / "toy_test.csv"
    bench.write_text(ROWS, encoding="utf-8")
    loaded = load_benchmark(str(bench))
    scorer = CachedScorer(tiny_backend, ScoreCache(tmp_path / "scores.sqlite"))
    first = run_permutation(loaded, loaded.items, scorer, tmp_path / "run", PermutationConfig())
    fresh = run_permutation(loaded, loaded.items, scorer, tmp_path / "fresh", OTHER)
    return loaded, scorer, first, fresh


def test_reanalysing_a_run_gives_a_fresh_run_with_the_new_thresholds(tmp_path: Path, runs) -> None:  # type: ignore[no-untyped-def]
    loaded, _, first, fresh = runs
    run = tmp_path / "run"
    before = _records(run)
    out = reanalyse_permutation(loaded, run, ties="leaked", deltas=[-0.3, -0.15, 0.0], alpha=0.2)
    after, want = _records(run), _records(tmp_path / "fresh")
    assert list(after) == list(before)  # same items, same order, nothing scored
    for rid, rec in after.items():
        assert rec.get("logprobs") == before[rid].get("logprobs")
        assert {k: rec.get(k) for k in FLAGS} == {k: want[rid].get(k) for k in FLAGS}
    assert sorted(after[next(iter(after))]["alg2"]) == ["-0.15", "-0.3", "0.0"]
    assert _analysis(out.summary) == _analysis(fresh.summary)
    assert _analysis(out.summary) != _analysis(first.summary)  # the thresholds matter here
    assert out.summary["config"]["alpha"] == 0.2 and out.summary["config"]["ties"] == "leaked"
    stored = json.loads((run / "settings.json").read_text())["config"]
    assert stored["ties"] == "leaked" and stored["deltas"] == [-0.3, -0.15, 0.0]
    assert out.summary["model"] == first.summary["model"]  # the run that scored the items
    assert out.summary["timings"]["reanalysed_records"] == 5  # every scored item; 1 excluded
    # back to the paper's thresholds: the first run's analysis again
    back = reanalyse_permutation(loaded, run, ties="not_leaked", deltas="paper", alpha=0.05)
    assert _analysis(back.summary) == _analysis(first.summary)
    now = _records(run)
    assert {k: now[k].get("alg2") for k in now} == {k: v.get("alg2") for k, v in before.items()}


def test_a_re_run_with_other_thresholds_scores_nothing_and_re_derives_the_flags(
    tmp_path: Path, runs
) -> None:  # type: ignore[no-untyped-def]
    loaded, scorer, _, fresh = runs
    mark = scorer.mark()
    again = run_permutation(loaded, loaded.items, scorer, tmp_path / "run", OTHER)
    assert scorer.since(mark) == (0, 0)  # not even read from the cache
    assert again.summary["timings"]["items_scored_now"] == 0
    assert _analysis(again.summary) == _analysis(fresh.summary)
    # a run killed after writing its new settings and before its records: the next open
    # finds the records' flags out of date and re-derives them
    run = tmp_path / "run"
    settings = json.loads((run / "settings.json").read_text())
    settings["config"] |= {"ties": "not_leaked", "deltas": None}
    (run / "settings.json").write_text(json.dumps(settings))
    assert "-0.15" in next(iter(_records(run).values()))["alg2"]  # stale: still OTHER's
    healed = run_permutation(loaded, loaded.items, scorer, run, PermutationConfig())
    assert list(next(iter(_records(run).values()))["alg2"]) == ["-0.2"]
    assert healed.summary["timings"]["items_scored_now"] == 0


def test_a_report_of_the_earlier_analysis_does_not_outlive_its_summary(
    tmp_path: Path, runs
) -> None:  # type: ignore[no-untyped-def]
    """The commands write the summary and then report.html: a kill between the two writes, or a
    re-analysis from Python, left a report of the earlier analysis beside the new summary (QA).
    """
    from contamscope.report import build_report

    loaded, *_ = runs
    run = tmp_path / "run"
    first = build_report(run).read_text(encoding="utf-8")
    assert "out of date" not in first
    reanalyse_permutation(loaded, run, ties="leaked", deltas=[-0.3, -0.15, 0.0], alpha=0.2)
    stale = (run / "report.html").read_text(encoding="utf-8")
    assert "This report is out of date" in stale and "Algorithm 2" not in stale
    assert f"contamscope report {run}" in stale
    again = build_report(run).read_text(encoding="utf-8")
    assert "δ = -0.3" in again and "δ = -0.3" not in first  # the new analysis's
    (run / "report.html").unlink()
    reanalyse_permutation(loaded, run, alpha=0.1)  # none there: none written
    assert not (run / "report.html").exists()


def test_reanalyse_refuses_an_unfinished_run_or_another_benchmark(tmp_path: Path, runs) -> None:  # type: ignore[no-untyped-def]
    loaded, *_ = runs
    run = tmp_path / "run"
    settings = json.loads((run / "settings.json").read_text())
    assert run_benchmark(settings) == {
        "spec": str(tmp_path / "toy_test.csv"),
        "subjects": None,
        "split": None,
        "format": None,
    }
    changed = tmp_path / "changed_test.csv"
    changed.write_text(ROWS.replace("Mars", "Venus"), encoding="utf-8")
    with pytest.raises(DataError, match="is not the benchmark .* was run on"):
        reanalyse_permutation(load_benchmark(str(changed)), run, alpha=0.1)
    (run / "summary.json").unlink()
    with pytest.raises(StoreError, match="the run is unfinished .no summary.json."):
        reanalyse_permutation(loaded, run, alpha=0.1)
    with pytest.raises(StoreError, match="empty: no such run folder"):
        reanalyse_permutation(loaded, RunDir(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreError, match="holds no contamscope run"):
        reanalyse_permutation(loaded, RunDir(tmp_path / "empty"))


REFERENCE_ROWS = (
    "Which river is longest?,Nile,Thames,Seine,Rhine,A\n"
    "Which is a fruit?,Brick,Apple,Chair,Spoon,B\n"
    "Which animal barks?,Cat,Cow,Dog,Owl,C\n"
    "Which is cold?,Fire,Sun,Lava,Ice,D\n"
    "Which is a tool?,Hammer,Cloud,Song,Rain,A\n"
)


def test_a_reference_run_measures_algorithm_2s_false_positive_rate(tmp_path: Path, runs) -> None:  # type: ignore[no-untyped-def]
    from scipy.stats import fisher_exact

    loaded, scorer, first, _ = runs
    ref_file = tmp_path / "fresh_test.csv"
    ref_file.write_text(REFERENCE_ROWS, encoding="utf-8")
    fresh = load_benchmark(str(ref_file))
    deltas = PermutationConfig(deltas=(-0.3, 0.0, 0.3))
    run_permutation(fresh, fresh.items, scorer, tmp_path / "ref", deltas)  # other thresholds
    out = reanalyse_permutation(loaded, tmp_path / "run", reference_run=tmp_path / "ref")
    alg2 = out.summary["statistics"]["alg2"]
    assert list(alg2) == ["-0.2"]  # the run's thresholds, applied to the reference's records
    ref_records = list(_records(tmp_path / "ref").values())
    from contamscope.detectors import Algorithm2, item_score_from_dict, rethreshold

    flags = [
        rethreshold(item_score_from_dict(r), r["logprobs"], alg2=Algorithm2()).alg2_flags[-0.2]
        for r in ref_records
    ]
    got = alg2["-0.2"]["reference"]
    assert (got["reference_count"], got["reference_n"]) == (sum(flags), 5)
    k, n = alg2["-0.2"]["count"], alg2["-0.2"]["n_items"]
    table = [[k, n - k], [sum(flags), 5 - sum(flags)]]
    assert got["p_value"] == pytest.approx(fisher_exact(table, alternative="greater").pvalue)
    assert out.summary["reference_run"]["n_items"] == 5
    assert out.summary["statistics"] != first.summary["statistics"]  # (the reference fields)
    assert out.summary["verdict"] == first.summary["verdict"]  # the verdict's tests unchanged
    # kept by a later re-analysis, dropped with "none"
    kept = reanalyse_permutation(loaded, tmp_path / "run", alpha=0.1)
    assert kept.summary["reference_run"]["run"] == str((tmp_path / "ref").resolve())
    (tmp_path / "ref").rename(tmp_path / "moved")
    with pytest.raises(StoreError, match="ref: no such run folder .* --reference-run none drops"):
        reanalyse_permutation(loaded, tmp_path / "run", alpha=0.1)
    (tmp_path / "moved").rename(tmp_path / "ref")
    dropped = reanalyse_permutation(loaded, tmp_path / "run", reference_run="none")
    assert "reference_run" not in dropped.summary
    assert "reference" not in dropped.summary["statistics"]["alg2"]["-0.2"]
    # a run scoring with it checks the reference before scoring and uses it at the end
    again = run_permutation(
        loaded, loaded.items, scorer, tmp_path / "run", PermutationConfig(),
        reference_run=tmp_path / "ref",
    )  # fmt: skip
    assert again.summary["statistics"]["alg2"]["-0.2"]["reference"] == got


def test_a_reference_run_must_be_clean_items_of_the_same_model(tmp_path: Path, runs) -> None:  # type: ignore[no-untyped-def]
    from contamscope.errors import ConfigError

    loaded, scorer, *_ = runs
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match="a run on this same benchmark .* cannot stand for un"):
        reanalyse_permutation(loaded, run, reference_run=tmp_path / "fresh")
    mixed = tmp_path / "mixed_test.csv"  # one tested item among new ones
    mixed.write_text(ROWS.splitlines()[1] + "\n" + REFERENCE_ROWS, encoding="utf-8")
    other = load_benchmark(str(mixed))
    run_permutation(other, other.items, scorer, tmp_path / "mixed", PermutationConfig())
    with pytest.raises(ConfigError, match="1 of its items is a tested item too"):
        reanalyse_permutation(loaded, run, reference_run=tmp_path / "mixed")
    settings = json.loads((tmp_path / "mixed" / "settings.json").read_text())
    settings["model_fingerprint"] = "another|float32"
    (tmp_path / "mixed" / "settings.json").write_text(json.dumps(settings))
    with pytest.raises(ConfigError, match="scored by another model set-up .another.float32"):
        reanalyse_permutation(loaded, run, reference_run=tmp_path / "mixed")
    with pytest.raises(StoreError, match="nowhere: no such run folder"):
        run_permutation(
            loaded, loaded.items, scorer, tmp_path / "x", PermutationConfig(),
            reference_run=tmp_path / "nowhere",
        )  # fmt: skip
    assert not (tmp_path / "x" / "items.jsonl").exists()  # refused before scoring


def test_a_reference_run_is_checked_for_being_written_like_the_benchmark(
    tmp_path: Path, tiny_backend
) -> None:  # type: ignore[no-untyped-def]
    """Algorithm 2's rate on clean items carries over only to items written like them: sorted
    numbers (a natural order, a peaked order distribution without any leak) against shuffled
    references are named; a reference benchmark that cannot be read again is said, not
    guessed."""
    from toy_rows import sorted_and_shuffled

    from contamscope.report import build_report

    rows, refs = sorted_and_shuffled(12, seed=3)
    bench, fresh = tmp_path / "sorted_test.csv", tmp_path / "shuffled_test.csv"
    bench.write_text("\n".join(rows) + "\n", encoding="utf-8")
    fresh.write_text("\n".join(refs) + "\n", encoding="utf-8")
    scorer = CachedScorer(tiny_backend, None)
    ref_loaded = load_benchmark(str(fresh))
    run_permutation(ref_loaded, ref_loaded.items, scorer, tmp_path / "ref", PermutationConfig())
    loaded = load_benchmark(str(bench))
    out = run_permutation(
        loaded, loaded.items, scorer, tmp_path / "run", PermutationConfig(),
        reference_run=tmp_path / "ref",
    )  # fmt: skip
    check = out.summary["reference_run"]["check"]
    natural = next(r for r in check["rows"] if r["feature"] == "natural option order")
    assert check["alike"] is False and natural["p_value"] <= check["level"]
    assert natural["benchmark"]["rate"] == 1.0 and natural["reference"]["rate"] == 0.0
    html = build_report(tmp_path / "run").read_text(encoding="utf-8")
    assert "Are the references written like the benchmark?" in html
    assert "<strong>the references differ</strong>" in html
    from cli_runner import run_cli

    said = run_cli("reanalyse", str(tmp_path / "run"), "--alpha", "0.2", cwd=tmp_path)
    assert said.returncode == 0, said.stderr
    text = " ".join(said.stdout.split())
    assert "references unlike the benchmark: natural option order 100.0% of benchmark items" in text
    # the reference benchmark moved: the check is skipped and says why
    fresh.rename(tmp_path / "elsewhere.csv")
    again = reanalyse_permutation(loaded, tmp_path / "run", alpha=0.1)
    info = again.summary["reference_run"]
    assert "check" not in info and "shuffled_test.csv: no such file" in info["check_skipped"]
