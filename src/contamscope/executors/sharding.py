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
    blob_key,
    dump_stats,
    load_generation,
    load_stats,
    score_key,
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
    each returned shard is written to the cache before the next one is awaited."""

    def __init__(self, backend: Backend, cache: ScoreCache | None, stream: ShardStream) -> None:
        super().__init__(backend, cache)
        self._stream = stream

    def _cached(
        self,
        kind: Kind,
        requests: Sequence[Any],
        keys: list[str],
        found: dict[str, Any],
        write: Callable[[list[tuple[str, Any]]], None],
        progress: ProgressFn | None,
    ) -> list[Any]:
        missing = [i for i, k in enumerate(keys) if k not in found]
        if progress is not None and len(requests) > len(missing):
            progress(len(requests) - len(missing))
        out: dict[int, Any] = {}
        if missing:
            for idx, results in self._stream(kind, [requests[i] for i in missing]):
                pairs = [(keys[missing[j]], r) for j, r in zip(idx, results)]
                if self.cache is not None:
                    write(pairs)
                for j, r in zip(idx, results):
                    out[missing[j]] = r
                if progress is not None:
                    progress(len(idx))
        self.computed += len(missing)
        self.reused += len(requests) - len(missing)
        return [out[i] if i in out else found[k] for i, k in enumerate(keys)]

    def score(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[ScoreResult]:
        keys = [score_key(self.fingerprint, r) for r in requests]
        found: dict[str, Any] = self.cache.get_many(keys) if self.cache is not None else {}
        cache = self.cache

        def write(pairs: list[tuple[str, Any]]) -> None:
            assert cache is not None
            cache.put_many(self.fingerprint, pairs)

        return self._cached("score", requests, keys, found, write, progress)

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
        keys = [blob_key(self.fingerprint, kind, r) for r in requests]
        found: dict[str, Any] = {}
        cache = self.cache
        if cache is not None:
            found = cache.get_blobs(keys, load_stats)
        keep = stats_keep(vocab_stats)

        def write(pairs: list[tuple[str, Any]]) -> None:
            assert cache is not None
            cache.put_blobs(
                self.fingerprint,
                kind,
                ((k, dump_stats(st, vocab_stats)) for k, st in pairs if keep(st)),
            )

        out = self._cached("token_stats", requests, keys, found, write, progress)
        return out if vocab_stats else [strip_vocab(st) for st in out]

    def generate(
        self, requests: Sequence[GenerateRequest], progress: ProgressFn | None = None
    ) -> list[Generation]:
        keys = [blob_key(self.fingerprint, "generate", r) for r in requests]
        found: dict[str, Any] = {}
        cache = self.cache
        if cache is not None:
            found = cache.get_blobs(keys, load_generation)

        def write(pairs: list[tuple[str, Any]]) -> None:
            assert cache is not None
            cache.put_blobs(self.fingerprint, "generate", ((k, asdict(g)) for k, g in pairs))

        return self._cached("generate", requests, keys, found, write, progress)
