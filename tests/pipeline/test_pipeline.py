"""The permutation pipeline in process, on the tiny random model."""

from __future__ import annotations

import json
import os
from pathlib import Path

from contamscope.data import load_benchmark
from contamscope.detectors import iforest
from contamscope.pipeline import PermutationConfig, run_permutation
from contamscope.store import CachedScorer, RunDir

ROWS = "What is 2+2?,3,4,5,6,B\nWhich are mammals?,Whale,Bat,Dog,All of the above,D\n"


def _permute(tmp_path: Path, backend, include: bool):  # type: ignore[no-untyped-def]
    bench = tmp_path / "toy_test.csv"
    bench.write_text(ROWS, encoding="utf-8")
    loaded = load_benchmark(str(bench))
    return run_permutation(
        loaded,
        loaded.items,
        CachedScorer(backend, None),
        RunDir(tmp_path / f"run-{include}"),
        PermutationConfig(include_non_exchangeable=include),
    )


def _run(tmp_path: Path, backend, include: bool) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    outcome = _permute(tmp_path, backend, include)
    assert outcome.summary["counts"]["items_analysed"] == (2 if include else 1)
    out = tmp_path / f"run-{include}"
    return [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]


def test_non_exchangeable_items_are_excluded_unless_included(tmp_path: Path, tiny_backend) -> None:  # type: ignore[no-untyped-def]
    default = _run(tmp_path, tiny_backend, include=False)
    assert default[1]["excluded"].startswith("options not exchangeable")
    assert "logprobs" not in default[1] and "non_exchangeable" not in default[0]
    # the excluded record keeps what it was about: the question and the option texts
    assert default[1]["prefix"].startswith("Which are mammals?")
    assert default[1]["options"][3] == "All of the above" and default[1]["answer"] == 3
    included = _run(tmp_path, tiny_backend, include=True)
    assert included[1]["excluded"] is None and len(included[1]["logprobs"]) == 24
    assert "All of the above" in included[1]["non_exchangeable"]
    assert "non_exchangeable" not in included[0]


NATURAL_ROWS = (
    "How many legs has a spider?,2,4,6,8,D\n"  # sorted numbers: a natural order
    "Which city is in France?,Rome,Paris,Oslo,Lima,B\n"
    "Which is a metal?,Wood,Glass,Iron,Clay,C\n"
)


def test_naturally_ordered_items_are_set_aside_in_the_verdict(tmp_path: Path, tiny_backend) -> None:  # type: ignore[no-untyped-def]
    from contamscope.cli.summary import verdict

    bench = tmp_path / "nat_test.csv"
    bench.write_text(NATURAL_ROWS, encoding="utf-8")
    loaded = load_benchmark(str(bench))
    outcome = run_permutation(
        loaded,
        loaded.items,
        CachedScorer(tiny_backend, None),
        RunDir(tmp_path / "run"),
        PermutationConfig(),
    )
    nat = outcome.summary["natural_order"]
    records = [json.loads(x) for x in (tmp_path / "run" / "items.jsonl").read_text().splitlines()]
    spider = next(r for r in records if r["id"] == nat["ids"][0])
    assert nat["n_items"] == 1 and nat["reasons"] == {"numbers in increasing order": 1}
    assert nat["by_id"] == {spider["id"]: "numbers in increasing order"}
    assert nat["alg1_count"] == int(spider["alg1"]) and nat["alg1_chance"] == 1 / 24
    # all three items are analysed; the verdict's statistics use the two others
    assert outcome.summary["statistics"]["n_items"] == 3
    assert nat["statistics_without"]["n_items"] == 2
    _, sentence = verdict(outcome.summary["statistics"], nat)
    assert (
        "1 item with a natural option order (numbers in increasing order) is set aside" in sentence
    )
    # the terminal shows every p-value the verdict reads, and the level they must reach (it
    # quoted a "smallest p = 0.023" shown nowhere, read as below 5%; journey)
    import io

    from rich.console import Console

    from contamscope.cli import summary as terminal
    from contamscope.detectors.verdict import p_text

    buffer = io.StringIO()
    real, terminal.console = terminal.console, Console(file=buffer, width=300)
    try:
        terminal.print_permutation_summary(outcome.summary)
    finally:
        terminal.console = real
    said = " ".join(buffer.getvalue().split())
    rest = nat["statistics_without"]
    assert "Without the 1 naturally ordered item (what the verdict tests): Algorithm 1" in said
    assert f"rank-test count p = {p_text(rest['rank']['p_value'])}" in said
    assert f"mean-gap test p = {p_text(rest['gap']['p_value'])}" in said
    if "no evidence" in sentence:
        assert "above the 0.0167 each of the 3 tests must reach" in sentence
    # at a level no item's rank p-value can reach, the rank row's 0% is said to be forced
    assert "the rank test cannot flag" not in said
    low = dict(outcome.summary, statistics=dict(outcome.summary["statistics"], alpha=0.01))
    buffer = io.StringIO()
    real, terminal.console = terminal.console, Console(file=buffer, width=300)
    try:
        terminal.print_permutation_summary(low)
    finally:
        terminal.console = real
    said = " ".join(buffer.getvalue().split())
    assert "--alpha 0.01 is below the smallest rank p-value any item here can have (1/24" in said


def test_detectors_in_worker_processes_give_the_inline_records(
    tmp_path: Path, tiny_backend, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Detectors run in spawned worker processes while the next batch is scored (the GPU
    default) and write exactly the records of the inline run, in item order; the benchmark's
    convention table, computed in a worker meanwhile, is the one computed inline."""
    bench = tmp_path / "mix_test.csv"
    bench.write_text(ROWS + NATURAL_ROWS, encoding="utf-8")
    loaded = load_benchmark(str(bench))
    runs = {}
    tables = {}
    for workers in (0, 2):
        out = tmp_path / f"w{workers}"
        seen: list[int] = []
        # each run its own empty user cache: neither reads the other's convention table
        monkeypatch.setenv("CONTAMSCOPE_CACHE_DIR", str(tmp_path / f"cache{workers}"))
        outcome = run_permutation(
            loaded,
            loaded.items,
            CachedScorer(tiny_backend, None),
            RunDir(out),
            PermutationConfig(batch_items=2, detector_workers=workers),
            on_items=seen.append,
        )
        assert seen == [2, 2, 1]
        runs[workers] = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
        tables[workers] = outcome.summary["natural_order"]["conventions"]
        assert list((tmp_path / f"cache{workers}" / "conventions").glob("*.json"))
    assert [r["id"] for r in runs[2]] == [it.id for it in loaded.items]
    assert runs[2] == runs[0]
    assert tables[2] == tables[0] and tables[0]["conventions"]


def test_a_failed_convention_worker_leaves_the_table_to_the_run(tmp_path: Path) -> None:
    """Where the worker computing the convention table fails (a broken pool), the run computes
    it itself: the summary is the same."""
    from concurrent.futures import Future

    from contamscope.pipeline.permutation import _conventions_result
    from contamscope.pipeline.permutation_summary import convention_summary

    bench = tmp_path / "mix_test.csv"
    bench.write_text(ROWS + NATURAL_ROWS, encoding="utf-8")
    items = load_benchmark(str(bench)).items
    failed: Future[object] = Future()
    failed.set_exception(RuntimeError("a worker died"))
    assert _conventions_result(failed, items) == convention_summary(items)
    assert _conventions_result(None, items) is None


def test_detector_processes_only_when_the_model_leaves_the_cpu_free(
    tmp_path: Path, tiny_backend
) -> None:  # type: ignore[no-untyped-def]
    """A model computing on this machine's CPU keeps the detectors inline (32 items a call);
    a model elsewhere (a server, a GPU) gets detector processes and 256-item calls."""
    from contamscope.backends.base import Backend

    class Served(Backend):
        spec = "served"
        capabilities = tiny_backend.capabilities

        def fingerprint(self) -> str:
            return tiny_backend.fingerprint()

        def score(self, requests, progress=None):  # type: ignore[no-untyped-def]
            return tiny_backend.score(requests, progress)

    assert tiny_backend.computes_on_local_cpu and not Served().computes_on_local_cpu
    bench = tmp_path / "mix_test.csv"
    bench.write_text(ROWS, encoding="utf-8")
    loaded = load_benchmark(str(bench))
    used = {}
    for name, backend in (("cpu", tiny_backend), ("served", Served())):
        outcome = run_permutation(
            loaded,
            loaded.items,
            CachedScorer(backend, None),
            RunDir(tmp_path / name),
            PermutationConfig(),
        )
        used[name] = {k: outcome.summary["timings"][k] for k in ("batch_items", "detector_workers")}
    assert used["cpu"] == {"batch_items": 32, "detector_workers": 0}
    # Algorithm 2's direct trees (about 5 ms an item) need few processes to keep up
    assert iforest.available()
    assert used["served"] == {
        "batch_items": 256,
        "detector_workers": min(4, (os.cpu_count() or 1) - 1),
    }
    # the same run again has nothing left to score: no detector processes are started
    again = run_permutation(
        loaded, loaded.items, CachedScorer(Served(), None), RunDir(tmp_path / "served"),
        PermutationConfig(),
    )  # fmt: skip
    assert again.scored_now == 0 and again.summary["timings"]["detector_workers"] == 0


def test_detector_processes_default_to_the_spare_cores_for_the_estimator(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Where Algorithm 2 falls back on scikit-learn's IsolationForest (about 0.1 s an item),
    the default is one detector process per spare core, at most 16; with its direct trees, 4
    a model copy; never above the spare cores."""
    from contamscope.pipeline.permutation import default_detector_workers

    monkeypatch.setattr(iforest, "available", lambda: False)
    for cores, expected in ((32, 16), (16, 15), (2, 1), (1, 0)):
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        assert default_detector_workers() == expected
        assert default_detector_workers(scorers=8) == expected
    monkeypatch.setattr(iforest, "available", lambda: True)
    for cores, expected in ((32, 4), (16, 4), (3, 2), (1, 0)):
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        assert default_detector_workers() == expected
    # 4 a model copy (Ray workers scoring at once), at most 16 and the spare cores
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert [default_detector_workers(n) for n in (1, 2, 3, 4, 8)] == [4, 8, 12, 16, 16]
    monkeypatch.setattr(os, "cpu_count", lambda: 10)
    assert default_detector_workers(3) == 9


def test_interrupt_in_the_inline_detectors_keeps_the_finished_batch(
    tmp_path: Path, tiny_backend, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C while the detectors of batch 3 run inline: batches 1 and 2 are written (batch 2's
    records were computed but not yet appended, and were lost)."""
    import pytest

    import contamscope.pipeline.permutation as pipeline

    bench = tmp_path / "mix_test.csv"
    bench.write_text(
        "".join(f"Question {i}?,a{i},b{i},c{i},d{i},A\n" for i in range(6)), encoding="utf-8"
    )
    loaded = load_benchmark(str(bench))
    calls = {"n": 0}
    real = pipeline._records_of

    def interrupted(jobs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(jobs)

    monkeypatch.setattr(pipeline, "_records_of", interrupted)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_permutation(
            loaded,
            loaded.items,
            CachedScorer(tiny_backend, None),
            RunDir(out),
            PermutationConfig(batch_items=2, detector_workers=0),
        )
    ids = [json.loads(x)["id"] for x in (out / "items.jsonl").read_text().splitlines()]
    assert ids == [it.id for it in loaded.items[:4]]


def test_a_record_cut_short_is_scored_again(tmp_path: Path, tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """A stored record missing a field (valid JSON) was kept as finished, then the summary
    raised KeyError: 'rank'."""
    first = _run(tmp_path, tiny_backend, include=True)
    items = tmp_path / "run-True" / "items.jsonl"
    cut = {k: v for k, v in first[0].items() if k != "rank"}
    items.write_text("".join(json.dumps(r) + "\n" for r in [cut, first[1]]), encoding="utf-8")
    outcome = _permute(tmp_path, tiny_backend, include=True)
    assert (outcome.scored_now, outcome.resumed) == (1, 1)
    again = [json.loads(x) for x in items.read_text().splitlines()]
    assert sorted(r["id"] for r in again) == sorted(r["id"] for r in first)
    assert {r["id"]: r["rank"] for r in again} == {r["id"]: r["rank"] for r in first}


def _items(rows: list[list[str]]):  # type: ignore[no-untyped-def]
    from contamscope.data import MCQItem

    return [MCQItem(id=f"q{i}", question="Q?", options=tuple(o)) for i, o in enumerate(rows)]


def test_convention_summary_tells_a_benchmark_ordered_by_convention_from_a_shuffled_one() -> None:
    """Model-free: 30 numbered items published in sorted order (a writer's convention) against
    the same items shuffled, as CMMLU shuffled its options."""
    import random

    from contamscope.pipeline.permutation_summary import convention_summary

    numbered = [[f"{a} m", f"{a + 2} m", f"{a + 5} m", f"{a + 9} m"] for a in range(30)]
    ordered = convention_summary(_items(numbered))
    row = next(r for r in ordered["conventions"] if r["convention"] == "sorted numbers")
    assert (row["items"], row["published"], row["rate"]) == (30, 30, 1.0)
    assert row["chance"] == 2 / 24 and row["p_value"] == (2 / 24) ** 30  # all 30, exactly
    assert ordered["ordered_by_convention"] is True
    assert ordered["level"] == 0.05 / len(ordered["conventions"])

    rng = random.Random(1)
    shuffled = [rng.sample(o, 4) for o in numbered]
    mixed = convention_summary(_items(shuffled))
    row = next(r for r in mixed["conventions"] if r["convention"] == "sorted numbers")
    assert row["items"] == 30 and row["published"] <= 6 and row["p_value"] > 0.05
    assert mixed["ordered_by_convention"] is False
    # options referring to each other are not counted; items without a structure neither
    mmlu_like = _items([["1", "2", "3", "All of the above"], ["Paris", "Rome", "Oslo", "Lima"]])
    counted = {r["convention"]: r["items"] for r in convention_summary(mmlu_like)["conventions"]}
    assert counted == {"alphabetical": 1}
    assert convention_summary(_items([["1", "2"], ["b", "a"]]))["conventions"] == []  # 2 options


def test_a_signal_on_a_benchmark_ordered_by_convention_says_so() -> None:
    from contamscope.detectors.verdict import verdict

    stats = {
        "n_items": 100,
        "alg1": {"p_value": 1e-6},
        "rank": {"p_value": 1e-5},
        "gap": {"p_value": 1e-4},
    }
    conventions = {
        "level": 0.0125,
        "ordered_by_convention": True,
        "conventions": [
            {"convention": "alphabetical", "items": 900, "published": 90, "rate": 0.1,
             "chance": 1 / 24, "p_value": 1e-20},
            {"convention": "sorted numbers", "items": 1261, "published": 838, "rate": 838 / 1261,
             "chance": 2 / 24, "p_value": 0.0},
            {"convention": "2 x 2 block listed row by row", "items": 30, "published": 12,
             "rate": 0.4, "chance": 1 / 3, "p_value": 0.3},
        ],
    }  # fmt: skip
    natural = {"n_items": 0, "conventions": conventions}
    signal, sentence = verdict(stats, natural)
    assert signal is True and sentence.startswith("LEAKAGE SIGNAL")
    # strongest first (rate over chance), the one not beyond chance left out
    assert "(sorted numbers: 838 of 1,261 items, 66.5% against 8.3% if shuffled; alphabetical" in (
        sentence
    )
    assert "2 x 2 block" not in sentence and "membership --reference" in sentence
    no_signal = {k: ({"p_value": 0.5} if k != "n_items" else 100) for k in stats}
    signal, sentence = verdict(no_signal, natural)
    assert signal is False and "convention" not in sentence
    conventions["ordered_by_convention"] = False
    assert "convention" not in verdict(stats, natural)[1]


def test_overlapped_batches_write_the_records_of_batches_one_at_a_time(
    tmp_path: Path, tiny_backend, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """The GPU way (each batch started on the model before the last one's results are handed
    to the detectors) writes the records of the plain way; a batch whose planning fails
    after two were scored keeps both of them."""
    import pytest

    import contamscope.pipeline.permutation as pipeline

    bench = tmp_path / "six_test.csv"
    bench.write_text(
        "".join(f"Question {i}?,a{i},b{i},c{i},d{i},A\n" for i in range(5)) + NATURAL_ROWS,
        encoding="utf-8",
    )
    loaded = load_benchmark(str(bench))
    records = {}
    old = tiny_backend.overlap_calls
    try:
        for overlap in (False, True):
            tiny_backend.overlap_calls = overlap
            out = tmp_path / f"run-{overlap}"
            seen: list[int] = []
            run_permutation(
                loaded,
                loaded.items,
                CachedScorer(tiny_backend, None),
                RunDir(out),
                PermutationConfig(batch_items=2, detector_workers=0),
                on_items=seen.append,
            )
            assert seen == [2, 2, 2, 2]
            records[overlap] = (out / "items.jsonl").read_text()
        assert records[True] == records[False]

        planned = {"n": 0}
        real = pipeline._plan_batch

        def failing(batch, config):  # type: ignore[no-untyped-def]
            planned["n"] += 1
            if planned["n"] == 3:
                raise ValueError("cannot plan")
            return real(batch, config)

        monkeypatch.setattr(pipeline, "_plan_batch", failing)
        out = tmp_path / "failed"
        with pytest.raises(ValueError, match="cannot plan"):
            run_permutation(
                loaded,
                loaded.items,
                CachedScorer(tiny_backend, None),
                RunDir(out),
                PermutationConfig(batch_items=2, detector_workers=0),
            )
    finally:
        tiny_backend.overlap_calls = old
    ids = [json.loads(x)["id"] for x in (out / "items.jsonl").read_text().splitlines()]
    assert ids == [it.id for it in loaded.items[:4]]


def test_an_infinite_log_prob_excludes_its_item_and_the_run_goes_on(tmp_path: Path) -> None:
    """A -inf log-prob (a token of probability 0: a served model, a float16 overflow) reached
    the detectors, which refused it, and stopped the run at that item (statistics audit)."""
    import math

    from contamscope.backends.base import Backend, Capabilities, ScoreResult

    class Zeroes(Backend):
        spec = "zeroes"
        capabilities = Capabilities(prompt_logprobs=True)

        def fingerprint(self) -> str:
            return "zeroes-v1"

        def score(self, requests, progress=None):  # type: ignore[no-untyped-def]
            # the first item's orders that start with "3" hold a token of probability 0; the
            # third's that start with "Sky" a NaN (an overflow), the fourth's with "Paris" are
            # too long (marked so)
            def one(c: str) -> ScoreResult:
                if "A:Paris\n" in c:
                    return ScoreResult(math.nan, 0, too_long=True)
                bad = -math.inf if "A:3\n" in c else math.nan if "A:Sky\n" in c else None
                return ScoreResult(-float(len(c)) if bad is None else bad, 3)

            return [one(r.continuation) for r in requests]

    bench = tmp_path / "inf_test.csv"
    rows = "Which is red?,Sky,Grass,Blood,Snow,C\nCapital?,Rome,Paris,Oslo,Bern,B\n"
    bench.write_text(ROWS + rows + "Which is cold?,Ice,Fire,Sun,Lava,A\n", encoding="utf-8")
    loaded = load_benchmark(str(bench))
    out = run_permutation(
        loaded, loaded.items, CachedScorer(Zeroes(), None), RunDir(tmp_path / "r"),
        PermutationConfig(),
    )  # fmt: skip
    first, _, nan, long, last = out.records()
    assert first["excluded"] == (
        "a non-finite log-prob (-inf; a token of probability 0, a numerical overflow? try "
        "--dtype float32)"
    )
    # a computed NaN was said to be "longer than the model's context window" (library QA)
    assert nan["excluded"] == "a NaN log-prob (a numerical overflow? try --dtype float32)"
    assert long["excluded"] == "longer than the model's context window"
    assert first["logprobs"] is None and last["excluded"] is None and len(last["logprobs"]) == 24
    assert out.summary["counts"]["items_analysed"] == 1


def test_progress_callbacks_say_how_many_finished_items_were_excluded(
    tmp_path: Path, tiny_backend
) -> None:  # type: ignore[no-untyped-def]
    """The command's progress rate counted excluded items, which were never scored (0.10
    items/s on the bar against the summary's 0.07; QA): ``on_excluded`` tells them apart."""
    bench = tmp_path / "toy_test.csv"
    bench.write_text(ROWS, encoding="utf-8")
    loaded = load_benchmark(str(bench))
    said: list[tuple[str, int]] = []
    out = run_permutation(
        loaded, loaded.items, CachedScorer(tiny_backend, None), RunDir(tmp_path / "r"),
        PermutationConfig(), on_items=lambda n: said.append(("items", n)),
        on_excluded=lambda n: said.append(("excluded", n)),
    )  # fmt: skip
    assert said == [("excluded", 1), ("items", 2)]  # 'All of the above' is left out
    assert out.summary["timings"]["items_excluded_now"] == 1
