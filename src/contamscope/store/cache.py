"""Content-addressed score cache (SQLite).

Key: sha256 over (cache schema, backend fingerprint, prefix text, continuation text). The
fingerprint covers the weights, dtype, tokenizer, BOS and engine version, so a number is reused
only where it would be recomputed identically. Writes are one transaction per batch.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..backends.base import Backend, ProgressFn, ScoreRequest, ScoreResult
from ..errors import StoreError

__all__ = ["ScoreCache", "CacheInfo", "CachedScorer", "score_key", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1


def score_key(fingerprint: str, req: ScoreRequest) -> str:
    payload = json.dumps([SCHEMA_VERSION, fingerprint, req.prefix, req.continuation])
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class CacheInfo:
    path: str
    entries: int
    models: int
    size_bytes: int


class ScoreCache:
    """SQLite store of computed scores. Safe to share between processes (WAL mode)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=60)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                with self._db:
                    self._db.execute(
                        "INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
                    )
            elif int(row[0]) != SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: score cache schema {row[0]}, this version reads {SCHEMA_VERSION}; "
                    "run `contamscope cache clear` or use another --cache-dir"
                )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, fingerprint TEXT, "
                "logprob REAL NOT NULL, n_tokens INTEGER, boundary INTEGER)"
            )
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a usable score cache ({exc})") from None

    def get_many(self, keys: Sequence[str]) -> dict[str, ScoreResult]:
        found: dict[str, ScoreResult] = {}
        for s in range(0, len(keys), 500):
            chunk = list(keys[s : s + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT key, logprob, n_tokens, boundary FROM scores WHERE key IN ({marks})", chunk
            )
            for key, lp, n, b in rows:
                found[key] = ScoreResult(lp, n, b)
        return found

    def put_many(self, fingerprint: str, items: Iterable[tuple[str, ScoreResult]]) -> None:
        rows = [
            (k, fingerprint, r.logprob, r.n_tokens, r.boundary_chars)
            for k, r in items
            if r.logprob == r.logprob
        ]  # never store NaN (too long for the model)
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO scores VALUES (?,?,?,?,?)", rows)

    def info(self) -> CacheInfo:
        entries, models = self._db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT fingerprint) FROM scores"
        ).fetchone()
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*"))
        return CacheInfo(str(self.path), entries, models, size)

    def clear(self) -> int:
        with self._db:
            n = self._db.execute("DELETE FROM scores").rowcount
        self._db.execute("VACUUM")
        return int(n)

    def close(self) -> None:
        self._db.close()


class CachedScorer:
    """Scores requests through a backend, reading and writing the cache batch by batch."""

    def __init__(self, backend: Backend, cache: ScoreCache | None) -> None:
        self.backend = backend
        self.cache = cache
        self.fingerprint = backend.fingerprint()
        self.computed = 0
        self.reused = 0

    def score(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[ScoreResult]:
        if self.cache is None:
            self.computed += len(requests)
            return self.backend.score(requests, progress)
        keys = [score_key(self.fingerprint, r) for r in requests]
        found = self.cache.get_many(keys)
        missing = [i for i, k in enumerate(keys) if k not in found]
        if progress is not None and len(requests) > len(missing):
            progress(len(requests) - len(missing))
        if missing:
            new = self.backend.score([requests[i] for i in missing], progress)
            self.cache.put_many(self.fingerprint, ((keys[i], r) for i, r in zip(missing, new)))
            for i, r in zip(missing, new):
                found[keys[i]] = r
        self.computed += len(missing)
        self.reused += len(requests) - len(missing)
        return [found[k] for k in keys]
