"""Executor contracts without a cluster: how plan_shards cuts requests, what StreamingScorer
writes to the cache and hands back per shard, when LocalExecutor reuses its model, and which
ExecutorConfig values are refused (mutation QA)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from contamscope.backends.base import Backend, Capabilities, ScoreRequest, ScoreResult
from contamscope.errors import ConfigError
from contamscope.executors import ExecutorConfig, LocalExecutor, plan_shards
from contamscope.executors.sharding import StreamingScorer
from contamscope.store import ScoreCache


def _reqs(groups: list[int]) -> list[ScoreRequest]:
    return [ScoreRequest(f"Q{g}", f" o{j}") for g, n in enumerate(groups) for j in range(n)]


def test_shards_without_a_size_bound_are_about_len_over_n_shards() -> None:
    """plan_shards: "Contiguous index shards of about len/n_shards requests": 7 requests of
    distinct prefixes in 2 shards are 4 and 3, not 3 + 3 + 1 (a third shard the caller did not
    ask for)."""
    shards = plan_shards(_reqs([1] * 7), 2)
    assert shards == [[0, 1, 2, 3], [4, 5, 6]]


def test_max_size_bounds_every_shard() -> None:
    """plan_shards: shards of about len/n_shards requests "(or ``max_size``)": with distinct
    prefixes (no cut to move) no shard is larger than max_size."""
    shards = plan_shards(_reqs([1] * 10), 2, max_size=3)
    assert [i for s in shards for i in s] == list(range(10))
    assert max(len(s) for s in shards) == 3 and len(shards) == 4


def test_a_cut_moves_forward_to_a_prefix_change_half_a_shard_away() -> None:
    """plan_shards: "each cut moved forward to the next prefix change when one comes within
    half a shard": 12 requests in 3 shards (size 4), the first question's 6 orders end 2
    requests (half a shard) past the first cut: they stay in one shard."""
    shards = plan_shards(_reqs([6, 6]), 3)
    assert shards[0] == [0, 1, 2, 3, 4, 5]
    assert [i for s in shards for i in s] == list(range(12))


class _Arith(Backend):
    """A deterministic backend: log-prob from the texts' lengths."""

    spec = "arith"
    capabilities = Capabilities(prompt_logprobs=True)

    def fingerprint(self) -> str:
        return "arith-v1"

    def score(self, requests: Sequence[ScoreRequest], progress: Any = None) -> list[ScoreResult]:
        return [_result(r) for r in requests]


def _result(r: ScoreRequest) -> ScoreResult:
    return ScoreResult(-float(len(r.prefix) + 3 * len(r.continuation)), len(r.continuation))


def _stream(sent: list[list[ScoreRequest]]) -> Any:
    """A ShardStream that answers shards of 2 in reverse completion order, recording what
    it was sent."""

    def stream(kind: str, requests: Sequence[Any]) -> Iterator[tuple[list[int], list[Any]]]:
        assert kind == "score"
        sent.append(list(requests))
        shards = plan_shards(requests, math.ceil(len(requests) / 2), 2)
        for idx in reversed(shards):
            yield idx, [_result(requests[i]) for i in idx]

    return stream


def test_streaming_scorer_sends_only_the_missing_and_caches_each_under_its_key(
    tmp_path: Path,
) -> None:
    """StreamingScorer "checks the cache on the driver, sends only the missing requests to
    ``stream`` and writes each shard's results to the cache": results come back in request
    order whatever order shards finish in, each cached under its own request (a plain
    CachedScorer over the cache reads the same numbers), and computed / reused count the
    requests run and read."""
    reqs = [ScoreRequest(f"Q{i}", f" option {'x' * i}") for i in range(7)]
    want = [_result(r) for r in reqs]
    cache = ScoreCache(tmp_path / "scores.sqlite")
    first: list[list[ScoreRequest]] = []
    warm = StreamingScorer(_Arith(), cache, _stream(first))
    warm.score([reqs[1], reqs[4]])
    assert (warm.computed, warm.reused) == (2, 0)
    sent: list[list[ScoreRequest]] = []
    seen: list[int] = []
    scorer = StreamingScorer(_Arith(), cache, _stream(sent))
    got = scorer.score(reqs, progress=seen.append)
    assert got == want
    assert sent == [[r for i, r in enumerate(reqs) if i not in (1, 4)]]
    assert (scorer.computed, scorer.reused) == (5, 2)
    assert sum(seen) == 7 and 0 not in seen  # progress counts every request once
    # every result was stored under its own request: read back, nothing runs
    from contamscope.store import CachedScorer

    class _Refuse(_Arith):
        def score(self, requests: Sequence[ScoreRequest], progress: Any = None) -> Any:
            raise AssertionError(f"{len(requests)} requests were not in the cache")

    again = CachedScorer(_Refuse(), cache)
    assert again.score(reqs) == want
    cache.close()


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """Every model LocalExecutor loads: (spec, device, dtype)."""
    import contamscope.backends as backends

    seen: list[tuple[str, str, str]] = []

    def load_backend(spec: str, *, device: str, dtype: str, options: Any = None) -> Backend:
        seen.append((spec, device, dtype))
        return _Arith()

    monkeypatch.setattr(backends, "load_backend", load_backend)
    return seen


def test_local_executor_loads_again_for_another_model_or_dtype(
    loads: list[tuple[str, str, str]],
) -> None:
    """LocalExecutor: "consecutive scorers for the same model (a sweep's benchmarks) load it
    once"; model_key: "What identifies a loaded model" is its spec, device, dtype and options:
    another spec or dtype is another model, loaded (its scores must not be another's)."""
    ex = LocalExecutor()
    ex.scorer("hf:a", device="cpu", dtype="float32")
    ex.scorer("hf:a", device="cpu", dtype="float32", options={})
    assert loads == [("hf:a", "cpu", "float32")]
    ex.scorer("hf:b", device="cpu", dtype="float32")
    ex.scorer("hf:b", device="cpu", dtype="bfloat16")
    assert loads[1:] == [("hf:b", "cpu", "float32"), ("hf:b", "cpu", "bfloat16")]
    ex.close()


def test_executor_config_bounds() -> None:
    """ExecutorConfig: "max_retries must be >= 0" (0: no retry), "shard_requests must be at
    least 1", and --gpus-per-worker, like --workers, "need --executor ray"."""
    assert ExecutorConfig(kind="ray", max_retries=0).max_retries == 0
    assert ExecutorConfig(kind="ray", shard_requests=1).shard_requests == 1
    with pytest.raises(ConfigError, match="shard_requests must be at least 1"):
        ExecutorConfig(kind="ray", shard_requests=0)
    with pytest.raises(ConfigError, match="need --executor ray"):
        ExecutorConfig(gpus_per_worker=1.0)


class _Renamed(_Arith):
    """The model under a new identity that names the one an earlier version gave it."""

    identity = "hf:m:NEW"
    legacy_identities = ("hf:m:OLD",)

    def fingerprint(self) -> str:
        return f"{self.identity}|float32"


def test_streaming_scorer_reuses_what_was_stored_under_an_earlier_fingerprint(
    tmp_path: Path,
) -> None:
    """Backend.legacy_fingerprints: "the cache reuses (and files again under fingerprint())
    what it stored under them". A Ray run (StreamingScorer) computed them all again where a
    local run reused them (mutation QA)."""

    class _Old(_Arith):
        def fingerprint(self) -> str:
            return "hf:m:OLD|float32"

    reqs = [ScoreRequest("Q", f" option {i}") for i in range(4)]
    cache = ScoreCache(tmp_path / "scores.sqlite")
    from contamscope.store import CachedScorer

    CachedScorer(_Old(), cache).score(reqs)
    sent: list[list[ScoreRequest]] = []
    scorer = StreamingScorer(_Renamed(), cache, _stream(sent))
    assert scorer.score(reqs) == [_result(r) for r in reqs]
    assert sent == [] and (scorer.computed, scorer.reused) == (0, 4)
    assert scorer.renamed == {"hf:m:OLD|float32": "hf:m:NEW|float32"}

    class _NewOnly(_Renamed):  # no earlier identity: reads only what is filed under the new one
        legacy_identities = ()

        def score(self, requests: Sequence[ScoreRequest], progress: Any = None) -> Any:
            raise AssertionError(f"{len(requests)} requests were not filed anew")

    assert CachedScorer(_NewOnly(), cache).score(reqs) == [_result(r) for r in reqs]
    cache.close()


def test_streaming_scorer_counts_a_request_past_the_context_as_neither(tmp_path: Path) -> None:
    """CachedScorer: "a request past the model's context window is neither" computed nor
    reused; the Ray scorer counted it computed on every call (mutation QA)."""

    def result(r: ScoreRequest) -> ScoreResult:
        return ScoreResult(math.nan if "long" in r.continuation else -1.0, 1)

    def stream(kind: str, requests: Sequence[Any]) -> Iterator[tuple[list[int], list[Any]]]:
        yield list(range(len(requests))), [result(r) for r in requests]

    reqs = [ScoreRequest("Q", " a"), ScoreRequest("Q", " long")]
    scorer = StreamingScorer(_Arith(), ScoreCache(tmp_path / "s.sqlite"), stream)
    for _ in range(2):
        got = scorer.score(reqs)
        assert got[0].logprob == -1.0 and math.isnan(got[1].logprob)
    assert (scorer.computed, scorer.reused) == (1, 1)
