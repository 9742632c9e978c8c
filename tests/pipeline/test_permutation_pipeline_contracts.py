"""Permutation pipeline contracts read from a run's records and summary, with a backend of known
numbers (no model): which orders an item gets, which stored records a resume keeps or scores
again, the timings the summary states and the default batch size (mutation QA)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from toy_backends import Arithmetic
from toy_rows import write, write_jsonl

from contamscope.backends.base import ScoreRequest, ScoreResult
from contamscope.data import load_benchmark
from contamscope.pipeline import PermutationConfig, run_permutation, select_items
from contamscope.store import CachedScorer, RunDir

ROWS = (
    "Which city is in France?,Rome,Paris,Oslo,Lima,B\n"
    "Which are mammals?,Whale,Bat,Dog,All of the above,D\n"
    "Which is a metal?,Wood,Glass,Iron,Clay,C\n"
    "Which is cold?,Ice,Fire,Sun,Lava,A\n"
)


class OnCpu(Arithmetic):
    """:class:`Arithmetic` whose model runs on this machine's CPU."""

    @property
    def computes_on_local_cpu(self) -> bool:
        return True


class Slow(Arithmetic):
    """:class:`Arithmetic` that takes 0.2 s a call (a run's time is then measurable)."""

    def score(self, requests: Sequence[ScoreRequest], progress=None) -> list[ScoreResult]:  # type: ignore[no-untyped-def]
        time.sleep(0.2)
        return super().score(requests, progress)


def _run(tmp_path: Path, rows: str = ROWS, backend: Any = None, **config: Any) -> Any:
    bench = tmp_path / "toy_test.csv"
    if not bench.exists() or bench.read_text(encoding="utf-8") != rows:
        write(tmp_path, "toy_test.csv", rows)
    loaded = load_benchmark(str(bench))
    return run_permutation(
        loaded,
        loaded.items,
        CachedScorer(backend or Arithmetic(), None),
        RunDir(tmp_path / "run"),
        PermutationConfig(**{"detector_workers": 0, **config}),
    )


def _lines(tmp_path: Path) -> list[dict[str, Any]]:
    text = (tmp_path / "run" / "items.jsonl").read_text(encoding="utf-8")
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def _cut(tmp_path: Path, keep: int) -> None:
    """The run folder as a run killed after its first ``keep`` records leaves it."""
    write_jsonl(tmp_path / "run" / "items.jsonl", _lines(tmp_path)[:keep])
    (tmp_path / "run" / "summary.json").unlink()


def _edit(tmp_path: Path, item_id: str, **fields: Any) -> None:
    recs = _lines(tmp_path)
    for r in recs:
        if r["id"] == item_id:
            r.update(fields)
    write_jsonl(tmp_path / "run" / "items.jsonl", recs)


def test_a_sample_is_kept_in_file_order_and_takes_exactly_n() -> None:
    """select_items: "``sample``: a seeded random subset (kept in file order)"; a sample of
    all but one item holds that many (mutation QA)."""
    got = select_items(range(50), sample=10, seed=7)
    assert got == sorted(got) and len(set(got)) == 10
    assert len(select_items(range(10), sample=9, seed=1)) == 9


def test_up_to_max_exhaustive_options_every_order_beyond_it_719_sampled(tmp_path: Path) -> None:
    """PermutationConfig: "Score all n! orders for items with at most this many options (6 ->
    720 orders)"; above it "number of random non-original orders scored" is 719 by default
    (the published order first) (mutation QA)."""
    rows = [
        {"question": "Six?", "options": [f"o{i}" for i in range(6)], "answer": 0},
        {"question": "Seven?", "options": [f"s{i}" for i in range(7)], "answer": 0},
    ]
    write_jsonl(tmp_path / "many_test.jsonl", rows)
    loaded = load_benchmark(str(tmp_path / "many_test.jsonl"))
    out = run_permutation(
        loaded,
        loaded.items,
        CachedScorer(Arithmetic(), None),
        RunDir(tmp_path / "run"),
        PermutationConfig(detector_workers=0),
    )
    six, seven = out.records()
    assert six["exhaustive"] is True and six["n_orders"] == 720
    assert seven["exhaustive"] is False and seven["n_orders"] == 1 + 719
    assert seven["orders"][0] == list(range(7))
    # fewer Monte Carlo orders change nothing at 6 options: all 720 are scored still
    few = run_permutation(
        loaded,
        loaded.items[:1],
        CachedScorer(Arithmetic(), None),
        RunDir(tmp_path / "few"),
        PermutationConfig(mc_orders=100, detector_workers=0),
    )
    (six,) = few.records()
    assert six["exhaustive"] is True and six["n_orders"] == 720


def test_a_finished_run_re_run_scores_nothing_and_counts_all_as_resumed(tmp_path: Path) -> None:
    """A resumed run scores only the items without a record: 'items_scored_now' and
    'items_resumed' (docs/output.md, timings); 'items_excluded_now' counts only items left out
    by this command, none on a re-run (mutation QA)."""
    first = _run(tmp_path)
    assert first.summary["timings"]["items_scored_now"] == 4
    assert first.summary["timings"]["items_excluded_now"] == 1  # 'All of the above'
    _cut(tmp_path, 2)
    backend = Arithmetic()
    more = _run(tmp_path, backend=backend)
    t = more.summary["timings"]
    assert (t["items_scored_now"], t["items_resumed"], t["items_excluded_now"]) == (2, 2, 0)
    assert sum(backend.ran) == 2 * 24  # the two new items' orders only
    again = _run(tmp_path)
    t = again.summary["timings"]
    assert (t["items_scored_now"], t["items_resumed"], t["items_excluded_now"]) == (0, 4, 0)


def test_items_per_second_leaves_out_the_excluded_items(tmp_path: Path) -> None:
    """docs/output.md: ``items_per_second`` is "the items scored now less those left out
    unscored, per second" (mutation QA)."""
    t = _run(tmp_path, backend=Slow(), batch_items=1).summary["timings"]
    assert (t["items_scored_now"], t["items_excluded_now"]) == (4, 1)
    assert t["items_per_second"] == pytest.approx(3 / t["scoring_seconds"], rel=0.02)


def test_a_record_scored_on_another_prompt_is_scored_again(tmp_path: Path) -> None:
    """stale_records: a stored record whose prompt differs from the one the item reads as now is
    scored again on resume, and the folder holds one record per item (mutation QA)."""
    _run(tmp_path)
    _edit(tmp_path, "toy_test-0", prefix="Question: which city is in France?")
    with pytest.warns(UserWarning, match="scored on other texts"):
        out = _run(tmp_path)
    assert out.summary["timings"]["items_scored_now"] == 1
    recs = _lines(tmp_path)
    assert [r["id"] for r in recs] == ["toy_test-0", "toy_test-1", "toy_test-2", "toy_test-3"]
    assert recs[0]["prefix"].startswith("Which city is in France?")


@pytest.mark.parametrize("damage", ["moved_max", "repeated_orders"])
def test_a_record_that_disagrees_with_itself_is_scored_again_in_its_place(
    tmp_path: Path, damage: str
) -> None:
    """_readable: a stored record whose maximum log-prob is not its ``alg2_argmax`` (a log-prob
    edited), or whose orders are not distinct ones, is not finished: scored again on resume,
    and items.jsonl keeps the items' order (docs/output.md: "one record per selected item",
    "in benchmark order") (mutation QA)."""
    _run(tmp_path)
    rec = _lines(tmp_path)[2]
    if damage == "moved_max":
        lp = list(rec["logprobs"])
        lp[rec["alg2_argmax"]] = min(lp) - 100.0
        _edit(tmp_path, "toy_test-2", logprobs=lp)
    else:
        _edit(tmp_path, "toy_test-2", orders=[rec["orders"][0]] * len(rec["orders"]))
    with pytest.warns(UserWarning, match="damaged or unreadable"):
        out = _run(tmp_path)
    assert out.summary["timings"]["items_scored_now"] == 1
    recs = _lines(tmp_path)
    assert [r["id"] for r in recs] == ["toy_test-0", "toy_test-1", "toy_test-2", "toy_test-3"]
    assert recs[2]["logprobs"] == rec["logprobs"] and recs[2]["orders"] == rec["orders"]


def test_batch_items_default_by_where_the_model_runs_and_a_resume_with_another(
    tmp_path: Path,
) -> None:
    """PermutationConfig.batch_items: "None: 32, or 256 when the model runs on a GPU"; it
    changes no number, so it is not in settings.json and a resume with another value is no
    change of settings (mutation QA)."""
    cpu = _run(tmp_path / "cpu", backend=OnCpu())
    assert cpu.summary["timings"]["batch_items"] == 32
    settings = json.loads((tmp_path / "cpu" / "run" / "settings.json").read_text("utf-8"))
    assert "batch_items" not in settings["config"]
    _cut(tmp_path / "cpu", 2)
    resumed = _run(tmp_path / "cpu", backend=OnCpu(), batch_items=1)
    assert resumed.summary["timings"]["items_resumed"] == 2
    away = _run(tmp_path / "away", backend=Arithmetic())
    assert away.summary["timings"]["batch_items"] == 256


def test_tokens_scored_now_leave_out_the_orders_past_the_context(tmp_path: Path) -> None:
    """docs/output.md: `continuation_tokens_scored_now` leaves out an order past the context: an
    item just past it was excluded, none of its orders scored, and its tokens were counted
    (912 where 384 were scored; engine QA)."""

    class PastContext(Arithmetic):
        def score(self, requests: Sequence[ScoreRequest], progress=None) -> list[ScoreResult]:  # type: ignore[no-untyped-def]
            out = super().score(requests, progress)
            return [
                ScoreResult(float("nan"), r.n_tokens, 0, True) if "metal" in q.prefix else r
                for q, r in zip(requests, out)
            ]

    _run(tmp_path, backend=PastContext())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
    recs = {r["id"]: r for r in _lines(tmp_path)}
    assert recs["toy_test-2"]["excluded"] == "longer than the model's context window"
    scored = sum(sum(r["n_tokens"]) for r in recs.values() if not r.get("excluded"))
    assert scored > 0
    assert summary["timings"]["continuation_tokens_scored_now"] == scored
