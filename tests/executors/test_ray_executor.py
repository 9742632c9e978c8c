"""The Ray executor on a real local cluster: same numbers as the local executor, results streamed
into the cache shard by shard, and a worker killed mid-shard does not change the results."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from contamscope.backends.base import GenerateRequest, ScoreRequest
from contamscope.data import load_benchmark
from contamscope.executors import ExecutorConfig, LocalExecutor, make_executor
from contamscope.pipeline import PermutationConfig, run_permutation
from contamscope.store import RunDir, ScoreCache

OPTS = {"bos": "<|endoftext|>"}


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "items.jsonl").read_text(encoding="utf-8").splitlines()]


def _permutation(scorer: Any, bench: Path, out: Path) -> list[dict[str, Any]]:
    loaded = load_benchmark(str(bench), format="mmlu-csv")
    run_permutation(loaded, loaded.items, scorer, RunDir(out), PermutationConfig(batch_items=4))
    return _records(out)


def _same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert [r["id"] for r in got] == [r["id"] for r in want]
    for g, w in zip(got, want):
        assert g["continuations"] == w["continuations"]
        assert g["n_tokens"] == w["n_tokens"]
        assert g["logprobs"] == pytest.approx(w["logprobs"], abs=1e-4)
        assert (g["rank"], g["alg1"], g["alg2"]) == (w["rank"], w["alg1"], w["alg2"])


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path, write_bench: Any
) -> Any:
    """The local executor's records for a 10-item benchmark (the expected answer)."""
    d = tmp_path_factory.mktemp("ref")
    bench = write_bench(d / "ray_test.csv", 10)
    scorer = LocalExecutor().scorer(
        f"hf:{tiny_model_path}", device="cpu", dtype="float32", options=OPTS
    )
    return bench, _permutation(scorer, bench, d / "run")


def test_ray_scan_equals_local_and_streams_into_cache(
    ray_cluster: Any, reference: Any, tiny_model_path: Path, tmp_path: Path
) -> None:
    bench, want = reference
    cache = ScoreCache(tmp_path / "scores.sqlite")
    with make_executor(ExecutorConfig(kind="ray", workers=2)) as ex:
        scorer = ex.scorer(
            f"hf:{tiny_model_path}", device="cpu", dtype="float32", options=OPTS, cache=cache
        )
        assert scorer.backend.capabilities.prompt_logprobs
        # the detectors' default processes scale with the model copies scoring at once
        assert scorer.backend.parallel_scorers == 2
        got = _permutation(scorer, bench, tmp_path / "run")
        stats = ex.pools[0].stats  # type: ignore[attr-defined]
        assert len({w.pid for w in ex.pools[0].workers}) == 2  # type: ignore[attr-defined]
        assert all(w.pid != os.getpid() for w in ex.pools[0].workers)  # type: ignore[attr-defined]
    _same(got, want)
    assert stats.shards >= 2 * 3 and stats.requests == 10 * 24 and stats.retried == 0
    assert scorer.computed == 240 and scorer.reused == 0
    # every shard was written to the driver's cache: a local re-run scores nothing
    again = LocalExecutor().scorer(
        f"hf:{tiny_model_path}", device="cpu", dtype="float32", options=OPTS, cache=cache
    )
    _same(_permutation(again, bench, tmp_path / "run2"), want)
    assert again.computed == 0 and again.reused == 240


def test_worker_killed_mid_shard_is_retried_with_identical_results(
    ray_cluster: Any, reference: Any, tiny_model_path: Path, tmp_path: Path
) -> None:
    bench, want = reference
    killed: list[int] = []

    def kill_first(pid: int, shard: int, attempt: int) -> None:
        if not killed:  # SIGKILL the worker that just received a shard
            killed.append(pid)
            os.kill(pid, signal.SIGKILL)

    with make_executor(ExecutorConfig(kind="ray", workers=2)) as ex:
        scorer = ex.scorer(f"hf:{tiny_model_path}", device="cpu", dtype="float32", options=OPTS)
        pool = ex.pools[0]  # type: ignore[attr-defined]
        pool.on_dispatch = kill_first
        got = _permutation(scorer, bench, tmp_path / "run")
        stats = pool.stats
        pids = {w.pid for w in pool.workers}
    _same(got, want)
    assert killed and killed[0] not in pids  # the dead worker was replaced
    assert stats.retried >= 1 and stats.replaced >= 1
    assert stats.requests == 240  # the lost shard was scored once, on another worker


def test_shard_that_keeps_killing_workers_fails_cleanly(
    ray_cluster: Any, tiny_model_path: Path
) -> None:
    from contamscope.errors import ModelError

    cfg = ExecutorConfig(kind="ray", workers=1, max_retries=1)
    with make_executor(cfg) as ex:
        scorer = ex.scorer(f"hf:{tiny_model_path}", device="cpu", dtype="float32", options=OPTS)
        pool = ex.pools[0]  # type: ignore[attr-defined]
        pool.on_dispatch = lambda pid, shard, attempt: os.kill(pid, signal.SIGKILL)
        with pytest.raises(ModelError, match="died 2 times"):
            scorer.score([ScoreRequest("Q?", " A")])


def test_token_stats_and_generation_on_workers(
    ray_cluster: Any, tiny_backend: Any, tiny_model_path: Path
) -> None:
    score_reqs = [ScoreRequest(f"Text {i}:", f" more words {i}") for i in range(6)]
    gen_reqs = [GenerateRequest(f"Say {i}", max_new_tokens=4) for i in range(3)]
    local = LocalExecutor().scorer(
        f"hf:{tiny_model_path}", device="cpu", dtype="float32", options=OPTS
    )
    with make_executor(ExecutorConfig(kind="ray", workers=2)) as ex:
        scorer = ex.scorer(f"hf:{tiny_model_path}", device="cpu", dtype="float32", options=OPTS)
        assert scorer.fingerprint == local.fingerprint
        described = scorer.backend.describe()  # a summary says the run used Ray, and how
        assert described["executor"] == {
            "kind": "ray",
            "address": None,
            "workers": 2,
            "gpus_per_worker": 0.0,
            "cpus_per_worker": 1.0,
        }
        assert {k: v for k, v in described.items() if k != "executor"} == local.backend.describe()
        got_stats = scorer.token_stats(score_reqs)
        got_gen = scorer.generate(gen_reqs)
        assert scorer.backend.decode(got_stats[0].tokens) == local.backend.decode(
            got_stats[0].tokens
        )
    want_stats = local.token_stats(score_reqs)
    for g, w in zip(got_stats, want_stats):
        assert g.tokens == w.tokens and g.greedy == w.greedy
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-4)
    assert got_gen == local.generate(gen_reqs)


def test_unknown_model_is_one_line_error(ray_cluster: Any) -> None:
    from contamscope.errors import ModelError

    with (
        make_executor(ExecutorConfig(kind="ray", workers=1)) as ex,
        pytest.raises(ModelError, match="unknown model spec"),
    ):
        ex.scorer("nonsense")


def test_too_many_workers_for_the_cluster(ray_cluster: Any) -> None:
    from contamscope.errors import ConfigError

    with (
        make_executor(ExecutorConfig(kind="ray", workers=3)) as ex,
        pytest.raises(ConfigError, match="do not fit"),
    ):
        ex.scorer("smollm2")


@pytest.mark.real_model
def test_smollm2_on_ray_equals_local(
    ray_cluster: Any, tmp_path: Path, model_dir: Path, write_bench: Any
) -> None:
    bench = write_bench(tmp_path / "real_test.csv", 3)
    local = LocalExecutor().scorer("smollm2", device="cpu", dtype="float32")
    want = _permutation(local, bench, tmp_path / "local")
    with make_executor(ExecutorConfig(kind="ray", workers=2)) as ex:
        got = _permutation(
            ex.scorer("smollm2", device="cpu", dtype="float32"), bench, tmp_path / "ray"
        )
    _same(got, want)


def test_replacements_that_die_while_loading_stop_the_run_in_one_line(
    ray_cluster: Any, tiny_model_path: Path
) -> None:
    """A replacement worker that died while it loaded the model ended the run in a Ray
    traceback (exit 1); now each such death is a retry, the worker's death is said in a note,
    and replacements that keep dying stop the run with one line (Ray QA)."""
    from contamscope.errors import ContamscopeWarning, ModelError

    @ray_cluster.remote(num_cpus=1)
    class DiesWhileLoading:
        def load(self, *args: Any) -> None:
            os._exit(1)

    cfg = ExecutorConfig(kind="ray", workers=1, max_retries=1)
    with make_executor(cfg) as ex:
        scorer = ex.scorer(f"hf:{tiny_model_path}", device="cpu", dtype="float32", options=OPTS)
        pool = ex.pools[0]  # type: ignore[attr-defined]
        pool.actor_cls = DiesWhileLoading  # every replacement from now on
        pool.on_dispatch = lambda pid, shard, attempt: os.kill(pid, signal.SIGKILL)
        with (
            pytest.warns(ContamscopeWarning, match=r"a Ray worker died \(\w+\): shard 0 of 1"),
            pytest.raises(ModelError, match="2 replacement Ray workers in a row died"),
        ):
            scorer.score([ScoreRequest("Q?", " A")])
        assert pool.stats.retried == 3  # the shard's worker, then both replacements


def test_gpus_per_worker_on_a_cluster_without_gpus_says_so(ray_cluster: Any) -> None:
    """ "0 workers x 1 CPUs x 1 GPUs do not fit (lower --workers ...)" was said where the cluster
    has no GPU at all (Ray QA)."""
    from contamscope.errors import ConfigError

    with (
        make_executor(ExecutorConfig(kind="ray", gpus_per_worker=1)) as ex,
        pytest.raises(ConfigError, match=r"the Ray cluster has no GPUs; --gpus-per-worker 1 needs"),
    ):
        ex.scorer("smollm2")
