"""Shards of requests, and a cached scorer that streams shard results into the cache.

:func:`plan_shards` is pure: it cuts a request list into contiguous shards, preferring cuts
where the prefix changes so that all orders of one question stay in one shard (the engine runs
each prefix once per call). :class:`StreamingScorer` checks the cache on the driver, sends only
the missing requests to ``stream`` and writes each shard's results to the cache as it arrives,
so a driver killed mid-call loses only the shards still in flight.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from typing import Any, Protocol

from ..backends.base import (
    Backend,
    GenerateRequest,
    Generation,
    ProgressFn,
    ScoreRequest,
    ScoreResult,
    TokenStats,
)
from ..store import CachedScorer, ScoreCache
from ..store.cache import (
    _ran,
    _reused,
    dump_stats,
    load_generation,
    load_stats,
    stats_keep,
    stats_kind,
    strip_vocab,
)

__all__ = ["plan_shards", "StreamingScorer", "ShardStream"]

Kind = str  # "score" | "token_stats" | "generate"


class ShardStream(Protocol):
    """Runs requests of one kind somewhere and yields (indices into ``requests``, results)
    per finished shard, in completion order."""

    def __call__(
        self, kind: Kind, requests: Sequence[Any]
    ) -> Iterator[tuple[list[int], list[Any]]]: ...


def _prefix(req: Any) -> str:
    if isinstance(req, ScoreRequest):
        return req.prefix
    if isinstance(req, GenerateRequest):
        return req.prompt
    return ""


def plan_shards(
    requests: Sequence[Any], n_shards: int, max_size: int | None = None
) -> list[list[int]]:
    """Contiguous index shards of about ``len/n_shards`` requests (or ``max_size``), each cut
    moved forward to the next prefix change when one comes within half a shard.

    >>> reqs = [ScoreRequest(p, c) for p in "ab" for c in "xyz"]
    >>> plan_shards(reqs, 2)
    [[0, 1, 2], [3, 4, 5]]
    >>> plan_shards(reqs, 3)
    [[0, 1, 2], [3, 4], [5]]
    >>> plan_shards(reqs[:2], 5)
    [[0], [1]]
    """
    n = len(requests)
    if n == 0:
        return []
    size = max(1, math.ceil(n / max(1, n_shards)))
    if max_size is not None:
        size = min(size, max_size)
    shards: list[list[int]] = []
    start = 0
    while start < n:
        end = min(n, start + size)
        if end < n and _prefix(requests[end]) == _prefix(requests[end - 1]):
            # look for a prefix change within half a shard on either side
            limit = min(n, end + size // 2 + 1)
            cut = next(
                (j for j in range(end, limit) if _prefix(requests[j]) != _prefix(requests[j - 1])),
                None,
            )
            if cut is None:
                low = max(start + 1, end - size // 2)
                cut = next(
                    (
                        j
                        for j in range(end - 1, low - 1, -1)
                        if _prefix(requests[j]) != _prefix(requests[j - 1])
                    ),
                    None,
                )
            end = cut if cut is not None else end
        shards.append(list(range(start, end)))
        start = end
    return shards


class StreamingScorer(CachedScorer):
    """A :class:`CachedScorer` whose missing requests run through ``stream`` (e.g. Ray workers);
    each returned shard is checked and written to the cache before the next one is awaited.
    What it reads from the cache, and what it counts, is :class:`CachedScorer`'s: scores
    stored under the model's earlier fingerprints are reused and filed anew, a request past
    the model's context is neither computed nor reused (a Ray run recomputed the first and
    counted the second as computed on every call; mutation QA)."""

    def __init__(self, backend: Backend, cache: ScoreCache | None, stream: ShardStream) -> None:
        super().__init__(backend, cache)
        self._stream = stream

    def _streamed(
        self,
        kind: Kind,
        requests: Sequence[Any],
        looked_up: tuple[list[str], dict[str, Any], list[int]],
        write: Callable[[list[tuple[str, Any]]], None],
        result_type: type,
        progress: ProgressFn | None,
    ) -> list[Any]:
        keys, found, missing = looked_up
        if len(requests) > len(missing):
            self._name_on_reuse()
        out: dict[int, Any] = {}
        if missing:
            asked = [requests[i] for i in missing]
            for idx, results in self._stream(kind, asked):
                got = self._checked([asked[j] for j in idx], results, result_type)
                if self.cache is not None:
                    write([(keys[missing[j]], r) for j, r in zip(idx, got)])
                for j, r in zip(idx, got):
                    out[missing[j]] = r
                self.computed += sum(map(_ran, got))
                if progress is not None:
                    progress(len(idx))
        self.reused += _reused(found, keys, missing)
        return [out[i] if i in out else found[k] for i, k in enumerate(keys)]

    def score(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[ScoreResult]:
        cache = self.cache

        def write(pairs: list[tuple[str, Any]]) -> None:
            assert cache is not None
            cache.put_many(self.fingerprint, pairs)

        looked_up = self._look_up(requests, progress)
        return self._streamed("score", requests, looked_up, write, ScoreResult, progress)

    def token_stats(
        self,
        requests: Sequence[ScoreRequest],
        progress: ProgressFn | None = None,
        *,
        vocab_stats: bool = False,
    ) -> list[TokenStats]:
        if vocab_stats:
            self.backend.require(token_stats=True, vocab_stats=True, method="vocabulary statistics")
        kind = stats_kind(vocab_stats, self.backend.capabilities.token_stats)
        keep = stats_keep(vocab_stats)
        cache = self.cache

        def dump(st: TokenStats) -> list[Any]:
            return dump_stats(st, vocab_stats)

        def write(pairs: list[tuple[str, Any]]) -> None:
            assert cache is not None
            cache.put_blobs(self.fingerprint, kind, ((k, dump(st)) for k, st in pairs if keep(st)))

        looked_up = self._look_up_blobs(kind, requests, dump, load_stats, progress)
        out = self._streamed("token_stats", requests, looked_up, write, TokenStats, progress)
        return out if vocab_stats else [strip_vocab(st) for st in out]

    def generate(
        self, requests: Sequence[GenerateRequest], progress: ProgressFn | None = None
    ) -> list[Generation]:
        cache = self.cache

        def write(pairs: list[tuple[str, Any]]) -> None:
            assert cache is not None
            cache.put_blobs(self.fingerprint, "generate", ((k, asdict(g)) for k, g in pairs))

        looked_up = self._look_up_blobs("generate", requests, asdict, load_generation, progress)
        return self._streamed("generate", requests, looked_up, write, Generation, progress)
