"""Salvage the readable rows of a damaged score cache (``contamscope cache repair``).

A damaged SQLite file (a disk error, a copy cut short, a cache shared over a network file
system whose locks failed) made every run refuse the whole cache, hours of scores with it.
SQLite reads a damaged table by ``rowid`` ranges up to the damaged page: each table is read in
ranges, a range that fails is halved, and a single row that still fails is counted as lost.
The rows read (type-checked) go into a fresh cache file that takes the damaged one's place; the
damaged file is kept beside it, renamed, until the user deletes it.

Run it while no run uses the cache: a run writing during the repair loses those writes.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .cache import SCHEMA_VERSION, ScoreCache, _clear_command, sqlite_files

_TABLES: dict[str, Callable[[tuple[Any, ...]], bool]] = {
    # table -> whether a row read from it is well formed (damaged pages can read as values)
    "scores": lambda r: (
        isinstance(r[0], str)
        and isinstance(r[2], (int, float))
        and not math.isnan(r[2])
        and isinstance(r[3], int)  # (as ScoreCache.get_many serves them: a row with another
        and isinstance(r[4], int)  # count or boundary was kept, counted, and never served; QA)
    ),
    "blobs": lambda r: isinstance(r[0], str) and isinstance(r[2], str) and _json(r[3]),
    "models": lambda r: isinstance(r[0], str) and (r[2] is None or _json(r[2])),
    "model_specs": lambda r: isinstance(r[0], str) and isinstance(r[1], str),
}
"""The cache's tables, in :class:`ScoreCache`'s schema, with each one's row check."""


def _json(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        json.loads(value)
    except (ValueError, RecursionError):  # (a value nested 50,000 deep: a traceback; QA)
        return False
    return True


@dataclass
class RepairReport:
    """What :func:`repair_cache` did: rows kept and lost per table, where the damaged file went.

    ``damaged_copy`` is None when the file was found sound (nothing was changed)."""

    path: Path
    kept: dict[str, int] = field(default_factory=dict)
    lost: dict[str, int | None] = field(default_factory=dict)
    """Rows there were and are not kept, per table; None where how many cannot be known."""
    bounds: set[str] = field(default_factory=set)
    """Tables whose ``lost`` is an upper bound: their key index was damaged too, so the row ids
    up to the table's last that were not read are counted, ids never used among them as well."""
    damaged_copy: Path | None = None
    removed: dict[str, int] = field(default_factory=dict)
    """Malformed rows taken out of a sound file, per table (values that are not what the
    cache writes: a row cut or written by something else; SQLite finds no damage in them)."""
    unread_wal: Path | None = None
    """A write-ahead log with data that was not checked (a read-only folder, where SQLite
    cannot read it: the file was opened ``immutable``)."""

    @property
    def sound(self) -> bool:
        return self.damaged_copy is None


def repair_cache(path: Path) -> RepairReport:
    """Salvage the readable rows of the score cache at ``path`` into a new file at ``path``;
    the damaged file is kept as ``PATH.damaged`` (``.damaged-2``, ... if taken). A sound file
    (SQLite's ``quick_check`` passes) is left as it is. StoreError when there is nothing to
    read (no file, no SQLite header, another schema version)."""
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"{path}: no score cache here")
    old, immutable = _open_salvageable(path)
    wal = sqlite_files(path)[1]
    unread = wal if immutable and wal.is_file() and wal.stat().st_size else None
    try:
        if _sound(old):
            report = RepairReport(path, unread_wal=unread)
            if not immutable:
                old.close()
                report.removed = _remove_malformed(path)
            return report
        report = RepairReport(path)
        fresh = path.with_name(path.name + ".repairing")
        for leftover in sqlite_files(fresh):
            leftover.unlink(missing_ok=True)
        ScoreCache(fresh).close()  # the current schema, empty
        new = sqlite3.connect(fresh)
        try:
            with new:
                for table, well_formed in _TABLES.items():
                    columns = [row[1] for row in new.execute(f"PRAGMA table_info({table})")]
                    kept, lost, exact = _copy_table(old, new, table, columns, well_formed, path)
                    report.kept[table], report.lost[table] = kept, lost
                    if not exact:
                        report.bounds.add(table)
            new.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all in the one file that moves
        finally:
            new.close()
    finally:
        old.close()
    report.damaged_copy = _set_aside(path)
    os.replace(fresh, path)
    for leftover in sqlite_files(fresh)[1:]:
        leftover.unlink(missing_ok=True)
    return report


def open_salvageable(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only where its schema version can be read and is this
    version's; StoreError (nothing to salvage) otherwise. In a read-only folder, where SQLite
    cannot make a WAL cache's shared-memory file, it is opened ``immutable`` (as the cache
    reads it there): a sound cache there was called damaged, "nothing to salvage", and its
    removal suggested (locale QA)."""
    return _open_salvageable(path)[0]


def _open_salvageable(path: Path) -> tuple[sqlite3.Connection, bool]:
    """:func:`open_salvageable`'s connection and whether it is ``immutable`` (its write-ahead
    log unread)."""
    uri = path.resolve().as_uri()
    for flags in ("mode=ro", "mode=ro&immutable=1"):
        db = sqlite3.connect(f"{uri}?{flags}", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            break
        except sqlite3.DatabaseError as exc:
            db.close()
            if "immutable" not in flags:
                continue
            raise StoreError(
                f"{path}: nothing to salvage ({exc}); `{_clear_command(path)}` removes it"
            ) from None
    if row is None or str(row[0]) != str(SCHEMA_VERSION):
        db.close()
        found = "no schema version" if row is None else f"schema {row[0]}"
        raise StoreError(
            f"{path}: {found}, this version reads {SCHEMA_VERSION}: nothing to salvage for it; "
            f"`{_clear_command(path)}` removes it"
        )
    return db, "immutable" in flags


def _remove_malformed(path: Path) -> dict[str, int]:
    """Delete, in place, the rows of each table its check in :data:`_TABLES` refuses; the
    count per table that had any. A malformed value in a sound file stopped every run that read
    it, and repair said "no damage found" (error-path QA)."""
    bad: dict[str, list[tuple[int]]] = {}
    db = sqlite3.connect(path, timeout=30)
    try:
        for table, well_formed in _TABLES.items():
            try:
                rows = db.execute(f"SELECT rowid, * FROM {table}")
                bad[table] = [(r[0],) for r in rows if not well_formed(r[1:])]
            except sqlite3.OperationalError:  # no such table
                continue
        with db:  # all tables' in one transaction, once every table was read
            for table, rowids in bad.items():
                db.executemany(f"DELETE FROM {table} WHERE rowid = ?", rowids)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot take its malformed rows out ({exc})") from None
    finally:
        db.close()
    return {table: len(rowids) for table, rowids in bad.items() if rowids}


def _sound(db: sqlite3.Connection) -> bool:
    try:
        return db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    except sqlite3.DatabaseError:
        return False


def _copy_table(
    old: sqlite3.Connection,
    new: sqlite3.Connection,
    table: str,
    columns: list[str],
    well_formed: Callable[[tuple[Any, ...]], bool],
    path: Path,
) -> tuple[int, int | None, bool]:
    """(rows kept, rows lost, whether lost is exact) of one table, read by rowid ranges,
    halving the ones that fail.

    The rows there were are the row ids in the table's key index (a separate b-tree, often
    intact); with the index damaged too, the row ids up to the table's last that were not read
    are counted, an upper bound (ids never used, or freed, count too: 155 for 60 rows lost;
    QA), and lost is None (unknown) when even the table's last row id cannot be read."""
    select = (
        f"SELECT rowid, {', '.join(columns)} FROM {table} WHERE rowid BETWEEN ? AND ? "
        "ORDER BY rowid"
    )
    select_one = f"SELECT rowid, {', '.join(columns)} FROM {table} WHERE rowid = ?"
    insert = f"INSERT OR IGNORE INTO {table} VALUES ({', '.join('?' * len(columns))})"
    try:
        old.execute(f"SELECT 1 FROM {table} LIMIT 0").fetchall()
    except sqlite3.OperationalError:  # no such table: it holds nothing to keep
        return 0, 0, True
    except sqlite3.DatabaseError:
        pass
    expected = _indexed_rowids(old, table)
    unknown = False
    if expected is not None:
        top = max(expected, default=0)
    else:
        try:
            top = old.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0
        except sqlite3.DatabaseError:  # the right edge is damaged too: bound by the file size
            top, unknown = path.stat().st_size // 16, True  # no row takes under 16 bytes
    kept, malformed, failed = 0, 0, 0
    read: set[int] = set()
    # in windows (listed from the last, so that pop() takes the first): a damaged page can end
    # a read early without an error (SQLite returned 417 of 1,500 rows of one range and said
    # nothing; QA); each window is read on past its last row until nothing more comes
    ranges = [(lo, min(lo + _WINDOW - 1, top)) for lo in range(1, top + 1, _WINDOW)][::-1]
    while ranges and failed <= _MAX_FAILED:
        lo, hi = ranges.pop()
        try:
            rows = old.execute(select, (lo, hi)).fetchall()
        except sqlite3.DatabaseError:
            if lo < hi:
                mid = (lo + hi) // 2
                ranges += [(mid + 1, hi), (lo, mid)]  # the lower half first
                continue
            try:  # one id, looked up by itself: a range seek can start on the damaged page
                rows = old.execute(select_one, (lo,)).fetchall()  # and fail for a row SQLite
            except sqlite3.DatabaseError:  # still reads (QA)
                failed += 1
                continue
        if rows and rows[-1][0] < hi:
            ranges.append((rows[-1][0] + 1, hi))  # read on: the window may have ended early
        read.update(r[0] for r in rows)
        good = [r[1:] for r in rows if well_formed(r[1:])]
        malformed += len(rows) - len(good)
        kept += new.executemany(insert, good).rowcount
    if expected is not None:
        return kept, len(expected - read) + malformed, True
    if unknown or ranges:
        return kept, None, False
    # without the index the ids never read are the bound: rows lost there, or ids never used
    return kept, top - len(read) + malformed, len(read) == top


_WINDOW = 256
"""Row ids read by one query of a table's salvage."""


_MAX_FAILED = 1_000_000
"""Unreadable row ids probed one by one before a table's salvage stops (bounds the time where
neither the table's end nor its index can be read)."""


def _indexed_rowids(old: sqlite3.Connection, table: str) -> set[int] | None:
    """The row ids in ``table``'s primary-key index, or None when it cannot be read."""
    try:
        names = old.execute(
            "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name=?", (table,)
        ).fetchall()
        if not names:
            return None
        query = f"SELECT rowid FROM {table} INDEXED BY {names[0][0]}"
        return {r[0] for r in old.execute(query)}
    except sqlite3.DatabaseError:
        return None


def _set_aside(path: Path) -> Path:
    """Move the damaged file (with its WAL files, kept paired by name) out of the way."""
    n, target = 1, path.with_name(path.name + ".damaged")
    while any(p.exists() for p in sqlite_files(target)):
        n += 1
        target = path.with_name(f"{path.name}.damaged-{n}")
    for src, dst in zip(sqlite_files(path), sqlite_files(target)):
        if src.exists():
            os.replace(src, dst)
    _, wal, shm = sqlite_files(target)
    if not wal.exists() or wal.stat().st_size == 0:  # no data of the file in them (an empty
        # log and its index), which "delete it when satisfied" would leave behind
        wal.unlink(missing_ok=True)
        shm.unlink(missing_ok=True)
    return target
