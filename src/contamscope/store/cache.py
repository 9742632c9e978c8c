"""Content-addressed score cache (SQLite).

Key: sha256 over (cache schema, backend fingerprint, prefix text, continuation text). The
fingerprint covers the weights, dtype, tokenizer, BOS and engine version, so a number is reused
only where it would be recomputed the same, up to the rounding of the batch it was computed in
(texts batched with others, as another ``--batch-items`` or number of orders batches them,
differ by about 1e-5 to 1e-4 nats in float32). Writes are one transaction per batch.

Besides log-prob sums (table ``scores``) the cache holds per-token statistics and greedy
generations (table ``blobs``, JSON values keyed the same way plus the kind of result and, for
generations, every request field), so BenBench and CAP reruns reuse them too. Per-token
statistics that carry the vocabulary mean/std (Min-K%++) are a kind of their own
(``token_stats+vocab``), so older blobs without them are never served where they are needed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
import os
import shlex
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from ..backends.base import (
    Backend,
    Capabilities,
    GenerateRequest,
    Generation,
    ProgressFn,
    ScoreRequest,
    ScoreResult,
    TokenStats,
)
from ..errors import ConfigError, ModelError, StoreError, note
from ..paths import cache_dir_name, make_folder

__all__ = [
    "ScoreCache",
    "CacheInfo",
    "Copied",
    "CachedScorer",
    "score_key",
    "blob_key",
    "stats_kind",
    "dump_stats",
    "load_stats",
    "stats_keep",
    "strip_vocab",
    "SCHEMA_VERSION",
]

R = TypeVar("R")
Q = TypeVar("Q")

SCHEMA_VERSION = 1


def score_key(fingerprint: str, req: ScoreRequest) -> str:
    payload = json.dumps([SCHEMA_VERSION, fingerprint, req.prefix, req.continuation])
    return hashlib.sha256(payload.encode()).hexdigest()


def blob_key(fingerprint: str, kind: str, req: ScoreRequest | GenerateRequest) -> str:
    """Key of a per-token-statistics or generation result: every request field counts."""
    payload = json.dumps([SCHEMA_VERSION, fingerprint, kind, asdict(req)], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class CacheInfo:
    path: str
    entries: int
    """Scores and stored statistics (per-token statistics, generations) together."""
    models: int
    """Model set-ups with entries."""
    size_bytes: int
    scores: int = 0
    """Log-prob sums (table ``scores``)."""
    statistics: int = 0
    """Per-token statistics and generations (table ``blobs``)."""
    setups: int = 0
    """Model set-ups known to the cache: with entries, or named without any (a version before
    2026-11-30 named the set-up of a run that stored nothing)."""


def _description(detail: object) -> dict[str, Any]:
    """A set-up's stored description; empty where the row is damaged (`cache info` and
    `cache clear` stopped with a traceback on one; error-path QA)."""
    try:
        out = json.loads(detail) if detail else {}  # type: ignore[arg-type]
    except (ValueError, TypeError, RecursionError):
        return {}
    return out if isinstance(out, dict) else {}


@dataclass(frozen=True)
class ModelSetup:
    """One model set-up in the cache: everything that changes its numbers, hashed."""

    fingerprint: str
    spec: str | None
    """The model spec as given (None for entries written before set-ups were recorded)."""
    detail: dict[str, Any]
    """The backend's description when it was last used (device, dtype, ...)."""
    last_used: str | None
    """UTC time a run last opened it."""
    entries: int
    """Scores and stored statistics together."""
    spellings: tuple[str, ...] = ()
    """Every spec a run gave for this set-up (``hf:./m`` and ``hf:/abs/m`` load the same
    weights), so ``cache clear --model`` accepts any of them."""
    statistics: int = 0
    """Of ``entries``, the stored statistics (per-token statistics and generations)."""

    @property
    def name(self) -> str:
        """The spec, or for a set-up written before specs were recorded, the model identity
        that leads its fingerprint."""
        return self.spec or self.fingerprint.partition("|")[0]


@dataclass(frozen=True)
class Copied:
    """What :meth:`ScoreCache.copy_from` did."""

    scores: int
    """Log-prob sums added."""
    blobs: int
    """Per-token statistics and generations added."""
    present: int
    """Entries of the source that this cache held already (kept as they were)."""
    setups: int
    """Model set-ups the copied entries belong to."""
    present_blobs: int = 0
    """Of ``present``, the per-token statistics and generations."""


_M = TypeVar("_M", bound=Callable[..., Any])


def _db_errors(method: _M) -> _M:
    """A damaged or unwritable database: one line naming the file and what to do (was a
    sqlite3 traceback)."""

    @functools.wraps(method)
    def wrapped(self: ScoreCache, *args: Any, **kwargs: Any) -> Any:
        try:
            with self._lock:  # one connection, shared by the threads of this process
                return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            raise _store_error(self.path, exc) from None

    return wrapped  # type: ignore[return-value]


BUSY_SECONDS = 60.0
"""How long a write waits for another process's transaction (SQLite's busy timeout)."""

_DAMAGED = ("not a database", "malformed", "corrupt", "no such table", "no such column")
"""SQLite's words for a file that is not (or no longer) a score cache."""


def _unwritable(exc: Exception) -> bool:
    text = str(exc)
    return "readonly" in text or "unable to open" in text


def _store_error(path: Path, exc: Exception) -> StoreError:
    damaged = not _unwritable(exc) and any(word in str(exc) for word in _DAMAGED)
    problem, advice = _db_problem(path, exc)
    return StoreError(f"{path}: {problem}{advice}", replaceable=damaged, problem=problem)


def _db_problem(path: Path, exc: Exception) -> tuple[str, str]:
    """(what is wrong, the advice after it, with its separator)."""
    text = str(exc)
    if _unwritable(exc):
        return (
            f"cannot write the score cache ({text})",
            ": check its permissions, or use --no-cache or another --cache-dir",
        )
    if "disk is full" in text:  # (QA: it read as any other error)
        return (
            f"score cache error ({text})",
            "; free space on its disk, or use --no-cache or another --cache-dir (a run's items "
            "finished before are kept in its folder)",
        )
    if "locked" in text or "busy" in text:  # another process's transaction: a long `cache
        # import` held it for minutes, and the advice was options `cache clear` lacks (QA)
        return (
            f"the score cache is busy ({text}): another process held its write lock for "
            f"{BUSY_SECONDS:g} s (a `contamscope cache import`, `clear` or `repair`?)",
            "; re-run when that process is done (a scoring run keeps the items it finished "
            "in its folder; --no-cache scores without the cache meanwhile)",
        )
    if not any(word in text for word in _DAMAGED):  # closed, ...: the file is not at fault
        return f"score cache error ({text})", "; use --no-cache or another --cache-dir"
    if _cache_dir_args(path) is None and "not a database" in text:
        # a file the Python API named, of another kind (a benchmark, ...): not for deleting
        return (
            f"not a score cache ({text})",
            ": give a score cache's file (contamscope.paths.default_score_db(), a --cache-dir's "
            "scores.sqlite, or a new file name), or no cache (None); this file is left as it is",
        )
    repair = _repair_command(path) if _salvageable(path) else None
    return (
        f"not a usable score cache ({text})",
        "; "
        + (f"`{repair}` salvages its readable scores, " if repair else "")
        + f"`{_clear_command(path)}` removes it, or use --no-cache or another --cache-dir",
    )


def _clear_command(path: Path) -> str:
    """The command that removes the cache file ``path`` (its --cache-dir unless the default:
    a bare ``cache clear`` would empty the user's default cache, not this one)."""
    where = _cache_dir_args(path)
    if where is None:  # a file the Python API named: not a --cache-dir's
        return f"rm {shlex.quote(str(path))}"
    return f"contamscope cache clear --yes{where}"


def _repair_command(path: Path) -> str | None:
    """``cache repair`` for a damaged --cache-dir's file (None for a file the Python API
    named otherwise: :func:`contamscope.store.repair.repair_cache` takes any path)."""
    where = _cache_dir_args(path)
    return None if where is None else f"contamscope cache repair{where}"


def _salvageable(path: Path) -> bool:
    """Whether ``cache repair`` could read anything of ``path`` (a file cut short often has
    no readable page left): it opens it as the repair does."""
    from .repair import open_salvageable

    try:
        open_salvageable(path).close()
    except (StoreError, sqlite3.Error, OSError):
        return False
    return True


def _cache_dir_args(path: Path) -> str | None:
    """`` --cache-dir DIR`` that makes a cache command act on ``path`` ('' for the default
    cache, None for a file that is no --cache-dir's ``scores.sqlite``)."""
    from ..paths import default_score_db

    if path.name != "scores.sqlite":
        return None
    if path.resolve() != default_score_db().resolve():
        return f" --cache-dir {shlex.quote(str(path.parent))}"
    return ""


def sqlite_files(path: Path) -> list[Path]:
    """A SQLite file with its write-ahead log and shared-memory index (WAL mode)."""
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


class ScoreCache:
    """SQLite store of computed scores. Safe to share between processes (WAL mode) and between
    the threads of one process (one connection, used by one thread at a time).

    A cache file that exists but cannot be written (a colleague's or a shared read-only copy)
    is opened read-only: its scores are reused, new ones are computed but not stored
    (``read_only`` is True and ``unsaved`` counts them). ``read_only=True`` asks for that even
    when the file could be written; ``read_only=False`` refuses an unwritable cache instead.
    """

    def __repr__(self) -> str:
        mode = ", read_only=True" if getattr(self, "read_only", False) else ""
        return f"ScoreCache({str(self.path)!r}{mode})"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool | None = None,
        what: str | None = None,
    ) -> None:
        self.path = Path(path)
        what = what or cache_dir_name(self.path.parent)  # how an error names the folder
        self._lock = threading.RLock()
        self._named: dict[str, tuple[str | None, str, str]] = {}
        """The model rows :meth:`note_model` was given, per fingerprint: written with the
        scores where missing (a new set-up's first entries; again after a ``cache clear
        --model`` during a run, which would leave the run's later scores without their spec)."""
        self.unsaved = 0
        """Results not stored because the cache is read-only."""
        self.unread_wal: Path | None = None
        """A write-ahead log this read-only connection cannot read (set when the folder is
        read-only and WAL's shared-memory file is missing): its scores are not seen."""
        if self.path.is_dir():
            raise StoreError(
                f"{self.path}: is a folder, not a score cache file; move it away, or use "
                "--no-cache or another --cache-dir"
            )
        if read_only:
            self.read_only = True
            self._db = self._open_read_only()
            return
        try:
            make_folder(self.path.parent, what)
        except StoreError as exc:  # (a read-only home: the way round was not said; CI QA)
            raise StoreError(f"{exc}; use --no-cache or another --cache-dir") from None
        self.read_only = False
        try:
            self._db = sqlite3.connect(self.path, timeout=BUSY_SECONDS, check_same_thread=False)
            self._set_up()
        except sqlite3.DatabaseError as exc:
            self.close()
            if read_only is None and self.path.is_file() and _unwritable(exc):
                self.read_only = True
                self._db = self._open_read_only()
                note(
                    f"the score cache {self.path} cannot be written: its scores are reused, "
                    "new ones are computed but not stored",
                )
                return
            raise _store_error(self.path, exc) from None

    def _set_up(self) -> None:
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if row is not None:
            self._check_schema(row[0])
        with self._db:  # also the write probe: SQLite opens an unwritable file read-only
            self._db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
            )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, fingerprint TEXT, "
            "logprob REAL NOT NULL, n_tokens INTEGER, boundary INTEGER)"
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS blobs (key TEXT PRIMARY KEY, fingerprint TEXT, "
            "kind TEXT NOT NULL, value TEXT NOT NULL)"
        )
        # names of the model set-ups (the entries carry only the fingerprint); added in the
        # same schema version: a cache written before simply has no names for its set-ups
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS models (fingerprint TEXT PRIMARY KEY, spec TEXT, "
            "detail TEXT, last_used TEXT)"
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS model_specs (fingerprint TEXT, spec TEXT, "
            "PRIMARY KEY (fingerprint, spec))"
        )

    def _check_schema(self, found: object) -> None:
        if str(found) != str(SCHEMA_VERSION):
            problem = f"score cache schema {found}, this version reads {SCHEMA_VERSION}"
            raise StoreError(
                f"{self.path}: {problem}; `{_clear_command(self.path)}` removes it, or use "
                "--no-cache or another --cache-dir",
                replaceable=True,
                problem=problem,
            )

    def _open_read_only(self) -> sqlite3.Connection:
        """Read-only connection; ``immutable`` when not even WAL's shared-memory file can be
        made (a read-only folder). Checks that the file is a score cache of this schema."""
        if not self.path.is_file():
            raise StoreError(f"{self.path}: no score cache to read (read-only)")
        uri = self.path.resolve().as_uri()
        problem: Exception | None = None
        for flags in ("mode=ro", "mode=ro&immutable=1"):
            db = sqlite3.connect(
                f"{uri}?{flags}", uri=True, timeout=BUSY_SECONDS, check_same_thread=False
            )
            try:
                row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                for table in ("scores", "blobs"):  # models, model_specs: added later, optional
                    db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchall()
            except sqlite3.DatabaseError as exc:
                db.close()
                problem = exc
                continue
            if row is None:
                db.close()
                raise StoreError(
                    f"{self.path}: not a usable score cache (no schema version)", replaceable=True
                )
            self._check_schema(row[0])
            wal = sqlite_files(self.path)[1]
            if "immutable" in flags and wal.is_file() and wal.stat().st_size > 0:
                self.unread_wal = wal
            return db
        assert problem is not None
        raise _store_error(self.path, problem) from None

    @_db_errors
    def get_many(self, keys: Sequence[str]) -> dict[str, ScoreResult]:
        found: dict[str, ScoreResult] = {}
        for s in range(0, len(keys), 500):
            chunk = list(keys[s : s + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT key, logprob, n_tokens, boundary FROM scores WHERE key IN ({marks})", chunk
            )
            for key, lp, n, b in rows:
                # (bytes where an earlier version stored a custom backend's numpy scalars:
                # not found, so scored again and replaced; integrator QA)
                if isinstance(lp, (int, float)) and isinstance(n, int) and isinstance(b, int):
                    found[key] = ScoreResult(lp, n, b)
        return found

    @_db_errors
    def put_many(self, fingerprint: str, items: Iterable[tuple[str, ScoreResult]]) -> None:
        rows = [
            (k, fingerprint, r.logprob, r.n_tokens, r.boundary_chars)
            for k, r in items
            if r.logprob == r.logprob
        ]  # never store NaN (too long for the model)
        if self.read_only:
            self.unsaved += len(rows)
            return
        if not rows:  # (every result too long for the model: nothing stored, no set-up named)
            return
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO scores VALUES (?,?,?,?,?)", rows)
            self._keep_name(fingerprint)

    @_db_errors
    def get_blobs(
        self, keys: Sequence[str], load: Callable[[Any], Any] = lambda v: v
    ) -> dict[str, Any]:
        """The stored values of ``keys`` found, each turned by ``load``. A value that is not
        JSON or that ``load`` refuses (a row cut or written by something else) is not found,
        so it is computed again and replaced: it stopped every run that needed it with a
        traceback, and `cache repair` found no damage in the file (error-path QA)."""
        found: dict[str, Any] = {}
        for s in range(0, len(keys), 500):
            chunk = list(keys[s : s + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT key, value FROM blobs WHERE key IN ({marks})", chunk)
            for key, value in rows:
                try:
                    found[key] = load(json.loads(value))
                except (
                    ValueError,
                    TypeError,
                    LookupError,
                    AttributeError,
                    RecursionError,
                    ModelError,  # (plain_result's, in load_stats and load_generation)
                ):
                    continue
        return found

    @_db_errors
    def put_blobs(self, fingerprint: str, kind: str, items: Iterable[tuple[str, Any]]) -> None:
        rows = [(k, fingerprint, kind, json.dumps(v)) for k, v in items]
        if self.read_only:
            self.unsaved += len(rows)
            return
        if not rows:
            return
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO blobs VALUES (?,?,?,?)", rows)
            self._keep_name(fingerprint)

    def _has_table(self, name: str) -> bool:
        """Whether the file has table ``name`` (a read-only cache written before ``models`` or
        ``model_specs`` existed has not: the writable open creates them)."""
        row = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)
        ).fetchone()
        return row is not None

    @_db_errors
    def info(self) -> CacheInfo:
        named = " UNION SELECT fingerprint FROM models" if self._has_table("models") else ""
        models, setups = self._db.execute(
            "SELECT COUNT(DISTINCT e.fingerprint), (SELECT COUNT(*) FROM (SELECT fingerprint FROM "
            f"scores UNION SELECT fingerprint FROM blobs{named})) "
            "FROM (SELECT fingerprint FROM scores UNION ALL SELECT fingerprint FROM blobs) e"
        ).fetchone()
        scores = self._db.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
        blobs = self._db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0]
        files = sqlite_files(self.path)  # not a .damaged copy beside them
        size = sum(p.stat().st_size for p in files if p.exists())
        return CacheInfo(str(self.path), scores + blobs, models, size, scores, blobs, setups)

    @_db_errors
    def note_model(self, fingerprint: str, description: dict[str, Any]) -> None:
        """Record which model set-up ``fingerprint`` is (for ``cache info`` / ``clear --model``):
        a set-up the cache names already is marked used now; a new one is named with its first
        stored entry (a run refused before it scored, e.g. by its run folder, left a set-up
        with no entries in ``cache info``)."""
        if self.read_only:
            return
        spec = str(description.get("spec") or "") or None
        detail = json.dumps(description, sort_keys=True, default=str)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._named[fingerprint] = (spec, detail, now)
        with self._db:
            known = self._db.execute(
                "UPDATE models SET spec = ?, detail = ?, last_used = ? WHERE fingerprint = ?",
                (spec, detail, now, fingerprint),
            ).rowcount
            if known:
                self._keep_name(fingerprint)

    @_db_errors
    def name_reused(self, fingerprint: str) -> None:
        """Name ``fingerprint`` (as :meth:`note_model` was told) where its entries are read
        and it has no name: a cache written before set-ups were named kept an unnamed set-up
        whose runs were all served from the cache (review QA)."""
        if self.read_only or fingerprint not in self._named:
            return
        with self._db:
            self._keep_name(fingerprint)

    def _keep_name(self, fingerprint: str) -> None:
        """Inside a write transaction: the model rows of ``fingerprint`` as :meth:`note_model`
        wrote them, where they are gone (no row is rewritten)."""
        named = self._named.get(fingerprint)
        if named is None:
            return
        spec, detail, used = named
        self._db.execute(
            "INSERT OR IGNORE INTO models VALUES (?,?,?,?)", (fingerprint, spec, detail, used)
        )
        if spec:
            self._db.execute("INSERT OR IGNORE INTO model_specs VALUES (?,?)", (fingerprint, spec))

    @_db_errors
    def models(self) -> list[ModelSetup]:
        """Every model set-up with entries or a record, most recently used first."""
        counts: dict[str, int] = dict(
            self._db.execute("SELECT fingerprint, COUNT(*) FROM scores GROUP BY fingerprint")
        )
        stats = dict(
            self._db.execute("SELECT fingerprint, COUNT(*) FROM blobs GROUP BY fingerprint")
        )
        for fp, n in stats.items():  # entries: scores and stored statistics together
            counts[fp] = counts.get(fp, 0) + n
        named = {
            fp: (spec, detail, used)
            for fp, spec, detail, used in (
                self._db.execute("SELECT * FROM models") if self._has_table("models") else []
            )
        }
        spellings: dict[str, list[str]] = {}
        if self._has_table("model_specs"):  # a read-only cache written before the table existed
            for fp, spec in self._db.execute("SELECT fingerprint, spec FROM model_specs"):
                spellings.setdefault(fp, []).append(spec)
        out = []
        for fp in set(counts) | set(named):
            spec, detail, used = named.get(fp, (None, None, None))
            specs = tuple(sorted(set(spellings.get(fp, [])) | ({spec} if spec else set())))
            out.append(
                ModelSetup(
                    fp,
                    spec,
                    _description(detail),
                    used,
                    counts.get(fp, 0),
                    specs,
                    stats.get(fp, 0),
                )
            )
        return sorted(out, key=lambda m: (m.last_used or "", m.entries), reverse=True)

    @_db_errors
    def clear(self, fingerprints: Sequence[str] | None = None) -> int:
        """Delete every entry, or those of the given model set-ups; returns how many."""
        if self.read_only:
            raise StoreError(f"{self.path}: the score cache is read-only; nothing deleted")
        groups: list[tuple[str, ...]]
        if fingerprints is None:
            where, groups = "", [()]
        else:
            where, groups = " WHERE fingerprint = ?", [(fp,) for fp in fingerprints]
        n = 0
        with self._db:
            for params in groups:
                for table in ("scores", "blobs"):
                    n += self._db.execute(f"DELETE FROM {table}{where}", params).rowcount
                self._db.execute(f"DELETE FROM models{where}", params)
                self._db.execute(f"DELETE FROM model_specs{where}", params)
        self._db.execute("VACUUM")
        return int(n)

    @_db_errors
    def copy_from(self, source: ScoreCache, fingerprints: Sequence[str] | None = None) -> Copied:
        """Add ``source``'s entries (every model set-up's, or those of ``fingerprints``) and
        their model names, in one transaction. Keys are content addresses (the same key is
        the same number), so an entry already here is kept and counted as ``present``."""
        if self.read_only:
            raise StoreError(f"{self.path}: the score cache is read-only; nothing copied")
        if source.path.resolve() == self.path.resolve():
            raise StoreError(f"{source.path}: is this cache itself; nothing to copy")
        where = ""
        params: tuple[str, ...] = ()
        if fingerprints is not None:
            where = f" WHERE fingerprint IN ({','.join('?' * len(fingerprints))})"
            params = tuple(fingerprints)
            if not params:
                return Copied(0, 0, 0, 0)
        added = {"scores": 0, "blobs": 0}
        read_rows = {"scores": 0, "blobs": 0}
        setups: set[str] = set()

        def read(sql: str, args: tuple[str, ...] = params) -> Iterator[list[Any]]:
            """The source's rows in chunks; its own errors name it (not this cache)."""
            try:
                rows = source._db.execute(sql, args)
                while chunk := rows.fetchmany(10_000):
                    yield chunk
            except sqlite3.DatabaseError as exc:
                raise StoreError(
                    f"{source.path}: cannot read it ({exc}); nothing copied",
                    problem=f"cannot read it ({exc})",
                ) from None

        with self._lock, self._db:  # one transaction: all copied, or (an error) nothing
            for table, columns in (
                ("scores", "key, fingerprint, logprob, n_tokens, boundary"),
                ("blobs", "key, fingerprint, kind, value"),
            ):
                marks = ",".join("?" * (columns.count(",") + 1))
                insert = f"INSERT OR IGNORE INTO {table} ({columns}) VALUES ({marks})"
                for chunk in read(f"SELECT {columns} FROM {table}{where}"):
                    before = self._db.total_changes
                    self._db.executemany(insert, chunk)
                    added[table] += self._db.total_changes - before
                    read_rows[table] += len(chunk)
                    setups.update(row[1] for row in chunk)
            names: list[Any] = []  # none in a read-only cache written before the table existed
            if source._has_table("models"):
                sql = f"SELECT fingerprint, spec, detail, last_used FROM models{where}"
                names = [row for chunk in read(sql) for row in chunk]
            # a name is copied only where this cache has none: its own last use stays
            self._db.executemany("INSERT OR IGNORE INTO models VALUES (?,?,?,?)", names)
            if source._has_table("model_specs"):
                for chunk in read(f"SELECT fingerprint, spec FROM model_specs{where}"):
                    self._db.executemany("INSERT OR IGNORE INTO model_specs VALUES (?,?)", chunk)
            setups.update(row[0] for row in names)
        present_blobs = read_rows["blobs"] - added["blobs"]
        present = read_rows["scores"] - added["scores"] + present_blobs
        return Copied(added["scores"], added["blobs"], present, len(setups), present_blobs)

    @_db_errors
    def single_file(self) -> None:
        """Leave the file self-contained (no write-ahead log beside it), for copying it
        elsewhere; a run that opens it turns the log on again."""
        self._db.execute("PRAGMA journal_mode=DELETE")

    def close(self) -> None:
        with self._lock:
            db = getattr(self, "_db", None)
            if db is not None:
                db.close()


FINISH_REASONS = ("stop", "length", "context")
"""A :class:`~contamscope.backends.base.Generation`'s ``finish_reason`` values."""


def plain_result(r: Any, spec: str = "backend") -> Any:
    """``r`` with plain Python numbers, checked: a custom backend's numpy or torch scalars were
    stored in the score cache as bytes, and every later run failed until the model's scores were
    cleared (integrator QA). A field of the wrong kind, per-token tuples of different lengths, a
    text that is not one or an unknown ``finish_reason`` raise :class:`ModelError`.

    >>> import numpy as np
    >>> plain_result(ScoreResult(np.float32(-1.5), np.int64(2))).logprob.__class__.__name__
    'float'
    >>> plain_result(Generation(None, 1, "stop"), "mine")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    contamscope.errors.ModelError: backend 'mine' returned a Generation whose text is None, not a str
    """
    if (  # already plain (every built-in backend's): as it is, at a fraction of the cost
        type(r) is ScoreResult
        and type(r.logprob) is float
        and type(r.n_tokens) is int
        and type(r.boundary_chars) is int
        and r.n_tokens >= 0 <= r.boundary_chars
    ):
        return r
    what = type(r).__name__
    field = ""

    def real(name: str, v: Any) -> float:
        nonlocal field
        field = name
        if isinstance(v, (str, bytes)) or v is None:
            raise TypeError
        return float(v)

    def count(name: str, v: Any, low: int = 0) -> int:
        nonlocal field
        field = name
        n = operator.index(v)
        if n < low:
            raise ValueError
        return n

    try:
        if isinstance(r, ScoreResult):
            return ScoreResult(
                real("logprob", r.logprob),
                count("n_tokens", r.n_tokens),
                count("boundary_chars", r.boundary_chars),
                bool(r.too_long),
            )
        if isinstance(r, TokenStats):
            tokens = tuple(count("tokens", t, -1) for t in r.tokens)
            logprobs = tuple(real("logprobs", x) for x in r.logprobs)
            greedy = tuple(count("greedy", t, -1) for t in r.greedy)
            vocab = [
                None if getattr(r, name) is None else tuple(real(name, x) for x in getattr(r, name))
                for name in ("mean_logprob", "std_logprob")
            ]
            per_token = zip(
                ("logprobs", "greedy", "mean_logprob", "std_logprob"), (logprobs, greedy, *vocab)
            )
            for name, v in per_token:
                if v is not None and len(v) != len(tokens):
                    raise ModelError(
                        f"backend {spec!r} returned a TokenStats with {len(tokens)} tokens and "
                        f"{len(v)} {name}: one per token"
                    )
            return replace(
                r,
                tokens=tokens,
                logprobs=logprobs,
                greedy=greedy,
                boundary_chars=count("boundary_chars", r.boundary_chars),
                mean_logprob=vocab[0],
                std_logprob=vocab[1],
                over_context=bool(r.over_context),
            )
        field = "text"
        if not isinstance(r.text, str):
            raise ModelError(
                f"backend {spec!r} returned a Generation whose text is "
                f"{type(r.text).__name__ if r.text is not None else None}, not a str"
            )
        field = "finish_reason"
        if r.finish_reason not in FINISH_REASONS:
            raise ValueError
        return replace(r, n_tokens=count("n_tokens", r.n_tokens))
    except (TypeError, ValueError, OverflowError, RuntimeError):  # (a tensor of 2 values)
        raise ModelError(
            f"backend {spec!r} returned a {what} whose {field} is not "
            + {
                "tokens": "a token id (an int, -1 where unknown)",
                "greedy": "a token id (an int, -1 where unknown)",
                "finish_reason": f"one of {', '.join(FINISH_REASONS)}",
            }.get(
                field,
                "a non-negative int" if field in ("n_tokens", "boundary_chars") else "a number",
            )
        ) from None


def _stats_ok(st: TokenStats) -> bool:
    return all(x == x for x in st.logprobs)  # never store NaN (too long for the model)


def _ran(result: ScoreResult | TokenStats | Generation) -> bool:
    """Whether the model ran for ``result``: not for a text past its context window (NaN
    log-probs; a generation that ended by ``"context"``), which :class:`CachedScorer` does not
    count as computed (a CAP or BenBench run counted them on every re-run; they are not
    stored, or cost nothing)."""
    if isinstance(result, ScoreResult):
        return result.logprob == result.logprob
    if isinstance(result, Generation):
        return result.finish_reason != "context"
    return _stats_ok(result)


def _reused(found: dict[str, Any], keys: Sequence[str], missing: Sequence[int]) -> int:
    """Requests read from the cache that the model ran: a generation that ended at the
    context is stored (it costs nothing to give again) but counted as neither computed nor
    reused, so a second run's counts match the first's (CAP said "0 of 60" then "64 of 64";
    review QA)."""
    fresh = set(missing)
    return sum(_ran(found[k]) for i, k in enumerate(keys) if i not in fresh)


def stats_kind(vocab_stats: bool, ids: bool = True) -> str:
    """Blob kind of per-token statistics. Blobs that carry the vocabulary mean/std have their
    own kind (so their own keys): a blob written before those fields existed, or by a call
    that did not need them, is never served to a request that needs them. Log-probs without
    token ids (``ids=False``: a server answering ``echo``) have theirs too, so their -1 ids are
    never served to BenBench, which needs the ids, when the same model is later scored through
    a server that gives them."""
    if not ids:
        return "token_logprobs"
    return "token_stats+vocab" if vocab_stats else "token_stats"


def dump_stats(st: TokenStats, vocab_stats: bool) -> list[Any]:
    """JSON value of a :class:`TokenStats` blob of kind :func:`stats_kind` (``vocab_stats``)."""
    out: list[Any] = [list(st.tokens), list(st.logprobs), list(st.greedy), st.boundary_chars]
    if vocab_stats:
        assert st.mean_logprob is not None and st.std_logprob is not None
        out += [list(st.mean_logprob), list(st.std_logprob)]
    return out


def load_stats(v: list[Any]) -> TokenStats:
    """Inverse of :func:`dump_stats`, checked by :func:`plain_result` (a damaged value raises)."""
    vocab = (tuple(v[4]), tuple(v[5])) if len(v) > 4 else (None, None)
    return plain_result(TokenStats(tuple(v[0]), tuple(v[1]), tuple(v[2]), v[3], *vocab), "cache")


def load_generation(v: dict[str, Any]) -> Generation:
    """Inverse of ``asdict`` of a :class:`Generation`, checked by :func:`plain_result`."""
    return plain_result(Generation(**v), "cache")


def strip_vocab(st: TokenStats) -> TokenStats:
    """``st`` without the vocabulary mean/std: what a call that did not ask for them returns,
    computed now or read from the cache alike."""
    if st.mean_logprob is None and st.std_logprob is None:
        return st
    return replace(st, mean_logprob=None, std_logprob=None)


def stats_keep(vocab_stats: bool) -> Callable[[TokenStats], bool]:
    """Which results may be stored: no NaN (too long for the model), and with ``vocab_stats``
    only those that carry the vocabulary mean/std."""

    def keep(st: TokenStats) -> bool:
        if not _stats_ok(st):
            return False
        return not vocab_stats or (st.mean_logprob is not None and st.std_logprob is not None)

    return keep


class CachedScorer:
    """Calls a backend through the cache: scores, per-token statistics and generations.

    ``computed`` / ``reused`` count requests of every kind that were run / read from the cache
    over the scorer's life (a request past the model's context window is neither: the model
    did not run it); a run reports its own share with :meth:`mark` and :meth:`since`.
    """

    def __init__(self, backend: Backend, cache: ScoreCache | None) -> None:
        # (an object that is no Backend, or a subclass without capabilities, failed later with
        # an AttributeError deep in a run; integrator QA)
        if not isinstance(backend, Backend) or not isinstance(
            getattr(backend, "capabilities", None), Capabilities
        ):
            raise ConfigError(
                f"{type(backend).__name__}: a model for contamscope is a subclass of "
                "contamscope.backends.Backend that sets `spec` and `capabilities` (a "
                "Capabilities); docs/python.md, 'Your own model'"
            )
        self.backend = backend
        self.cache = cache
        self.fingerprint = backend.fingerprint()
        self.legacy = backend.legacy_fingerprints()
        if cache is not None:
            cache.note_model(self.fingerprint, backend.describe())
        self.computed = 0
        self.reused = 0
        self._named_on_reuse = False

    def __repr__(self) -> str:
        return (
            f"CachedScorer({self.backend!r}, cache={self.cache!r}, computed={self.computed}, "
            f"reused={self.reused})"
        )

    @property
    def renamed(self) -> dict[str, str]:
        """The fingerprints earlier versions gave this model set-up, each to its name now
        (:meth:`~contamscope.backends.base.Backend.legacy_fingerprints`): a run folder made
        under one resumes (:meth:`~contamscope.store.run.RunDir.stored_settings`)."""
        return {old: self.fingerprint for old in self.legacy}

    def _name_on_reuse(self) -> None:
        """Once a scorer reads an entry: name its set-up if the cache has entries of it but no
        name (:meth:`ScoreCache.name_reused`)."""
        if self.cache is not None and not self._named_on_reuse:
            self._named_on_reuse = True
            self.cache.name_reused(self.fingerprint)

    def mark(self) -> tuple[int, int]:
        """The counters now, for :meth:`since` (one scorer may serve several runs)."""
        return (self.computed, self.reused)

    def since(self, mark: tuple[int, int]) -> tuple[int, int]:
        """Requests (computed, reused) since ``mark``."""
        return (self.computed - mark[0], self.reused - mark[1])

    def score(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[ScoreResult]:
        return next(self.score_stream([requests], progress))

    def score_stream(
        self, calls: Iterable[Sequence[ScoreRequest]], progress: ProgressFn | None = None
    ) -> Iterator[list[ScoreResult]]:
        """:meth:`score` of each list of ``calls``, the model's part through the backend's
        :meth:`~contamscope.backends.base.Backend.score_stream` (which may start a call before
        it yields the previous one's results); each call's new scores are stored before its
        results are yielded."""
        looked_up: deque[
            tuple[list[str], dict[str, ScoreResult], list[int], list[ScoreRequest]]
        ] = deque()

        def missing_requests() -> Iterator[list[ScoreRequest]]:
            for requests in calls:
                keys, found, missing = self._look_up(requests, progress)
                asked = [requests[i] for i in missing]
                looked_up.append((keys, found, missing, asked))
                yield asked

        for got in self.backend.score_stream(missing_requests(), progress):
            keys, found, missing, asked = looked_up.popleft()
            if len(keys) > len(missing):
                self._name_on_reuse()
            new = self._checked(asked, got, ScoreResult)
            if self.cache is not None and missing:
                self.cache.put_many(self.fingerprint, ((keys[i], r) for i, r in zip(missing, new)))
            for i, r in zip(missing, new):
                found[keys[i]] = r
            self.computed += sum(map(_ran, new))
            self.reused += len(keys) - len(missing)
            yield [found[k] for k in keys]

    def _look_up(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None
    ) -> tuple[list[str], dict[str, ScoreResult], list[int]]:
        """The requests' keys, the scores the cache holds for them, and the indices it lacks
        (no cache: every index, keyed by position, so nothing is hashed)."""
        if self.cache is None:
            return [str(i) for i in range(len(requests))], {}, list(range(len(requests)))
        keys = [score_key(self.fingerprint, r) for r in requests]
        found = self.cache.get_many(keys)
        missing = [i for i, k in enumerate(keys) if k not in found]
        for old in self.legacy if missing else ():  # stored by an earlier version: filed anew
            olds = {score_key(old, requests[i]): i for i in missing}
            refiled = [(keys[olds[k]], r) for k, r in self.cache.get_many(list(olds)).items()]
            if refiled and not self.cache.read_only:
                self.cache.put_many(self.fingerprint, refiled)
            found.update(refiled)
            missing = [i for i in missing if keys[i] not in found]
        if progress is not None and len(requests) > len(missing):
            progress(len(requests) - len(missing))
        return keys, found, missing

    def _checked(self, asked: Sequence[Any], got: Any, kind: type) -> list[Any]:
        """``got``, the backend's results for ``asked``: one ``kind`` per request (a custom
        backend that broke this raised a KeyError or TypeError deep in the cache; library QA),
        no positive log-prob (none is above 0; a value above 1e-4 is not rounding)."""
        spec = getattr(self.backend, "spec", type(self.backend).__name__)
        if not isinstance(got, (list, tuple)) or len(got) != len(asked):
            what = f"{len(got)} results" if isinstance(got, (list, tuple)) else repr(got)[:40]
            raise ModelError(
                f"backend {spec!r} returned {what} for {len(asked)} requests; a backend returns "
                f"one {kind.__name__} per request, in their order"
            )
        out = []
        for req, r in zip(asked, got):
            if not isinstance(r, kind):
                raise ModelError(
                    f"backend {spec!r} returned a {type(r).__name__} where a {kind.__name__} "
                    "belongs"
                )
            r = plain_result(r, spec)
            values = [r.logprob] if isinstance(r, ScoreResult) else getattr(r, "logprobs", ())
            high = next((v for v in values if v > 1e-4), None)
            if high is not None:
                raise ModelError(
                    f"backend {spec!r} returned a positive log-prob ({high:g}) for "
                    f"{req.continuation[:40]!r}; a log-probability is at most 0"
                )
            out.append(r)
        return out

    def _look_up_blobs(
        self,
        kind: str,
        requests: Sequence[Any],
        dump: Callable[[Any], Any],
        load: Callable[[Any], Any],
        progress: ProgressFn | None,
    ) -> tuple[list[str], dict[str, Any], list[int]]:
        """:meth:`_look_up` of stored values of ``kind`` (``load`` reads one, ``dump`` files it
        again under this fingerprint where an earlier version stored it)."""
        if self.cache is None:
            return [str(i) for i in range(len(requests))], {}, list(range(len(requests)))
        keys = [blob_key(self.fingerprint, kind, r) for r in requests]
        found = self.cache.get_blobs(keys, load)
        missing = [i for i, k in enumerate(keys) if k not in found]
        for old in self.legacy if missing else ():  # stored by an earlier version: filed anew
            olds = {blob_key(old, kind, requests[i]): i for i in missing}
            stored = [(keys[olds[k]], r) for k, r in self.cache.get_blobs(list(olds), load).items()]
            if stored and not self.cache.read_only:
                self.cache.put_blobs(self.fingerprint, kind, ((k, dump(r)) for k, r in stored))
            found.update(stored)
            missing = [i for i in missing if keys[i] not in found]
        if progress is not None and len(requests) > len(missing):
            progress(len(requests) - len(missing))
        if len(requests) > len(missing):
            self._name_on_reuse()
        return keys, found, missing

    def _through(
        self,
        kind: str,
        requests: Sequence[Q],
        run: Callable[[list[Q], ProgressFn | None], list[R]],
        dump: Callable[[R], Any],
        load: Callable[[Any], R],
        keep: Callable[[R], bool],
        progress: ProgressFn | None,
    ) -> list[R]:
        kind_of = {"generate": Generation}.get(kind, TokenStats)
        if self.cache is None:
            got = self._checked(requests, run(list(requests), progress), kind_of)
            self.computed += sum(map(_ran, got))
            return got
        keys, found, missing = self._look_up_blobs(kind, requests, dump, load, progress)
        if missing:
            asked = [requests[i] for i in missing]
            new = self._checked(asked, run(asked, progress), kind_of)
            self.cache.put_blobs(
                self.fingerprint,
                kind,
                ((keys[i], dump(r)) for i, r in zip(missing, new) if keep(r)),
            )
            for i, r in zip(missing, new):
                found[keys[i]] = r
            self.computed += sum(map(_ran, new))
        self.reused += _reused(found, keys, missing)
        return [found[k] for k in keys]

    def token_stats(
        self,
        requests: Sequence[ScoreRequest],
        progress: ProgressFn | None = None,
        *,
        vocab_stats: bool = False,
    ) -> list[TokenStats]:
        """Per-token statistics through the cache. ``vocab_stats=True``: the results must carry
        the vocabulary mean/std (checked with ``Backend.require`` first); they are cached under
        their own blob kind (:func:`stats_kind`)."""
        if vocab_stats:
            self.backend.require(token_stats=True, vocab_stats=True, method="vocabulary statistics")
        out = self._through(
            stats_kind(vocab_stats, self.backend.capabilities.token_stats),
            requests,
            self.backend.token_stats,
            lambda st: dump_stats(st, vocab_stats),
            load_stats,
            stats_keep(vocab_stats),
            progress,
        )
        return out if vocab_stats else [strip_vocab(st) for st in out]

    def generate(
        self, requests: Sequence[GenerateRequest], progress: ProgressFn | None = None
    ) -> list[Generation]:
        return self._through(
            "generate",
            requests,
            self.backend.generate,
            asdict,
            load_generation,
            lambda g: True,
            progress,
        )
