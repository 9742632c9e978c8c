"""`cache repair` contracts on really damaged files: pages of the score table or of its key
index overwritten, rows whose values the cache never writes among the readable ones, and what
an interrupted repair leaves behind."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from contamscope.backends.base import ScoreResult
from contamscope.store import ScoreCache
from contamscope.store.repair import repair_cache

MALFORMED = {2: "logprob = 'oops'", 3: "n_tokens = 'three'", 5: "key = x'00ff'"}
"""Rows given values the cache never writes (row id -> SET clause), all on the first leaf."""


def _pages(db: sqlite3.Connection, name: str, kind: str = "") -> list[int]:
    query = "SELECT pageno FROM dbstat WHERE name = ? AND pagetype LIKE ? ORDER BY pageno"
    try:
        return [r[0] for r in db.execute(query, (name, kind or "%"))]
    except sqlite3.OperationalError as exc:  # an SQLite built without the dbstat table
        pytest.skip(f"this SQLite cannot list a table's pages ({exc})")


def _damaged(path: Path, n: int, gaps: bool, index_too: bool) -> tuple[list[str], int, int]:
    """A cache of ``n`` scores (every third deleted where ``gaps``: two writers' rows
    interleaved leave such gaps), the rows of :data:`MALFORMED` given values the cache never
    writes, and a leaf page of the score table in the middle overwritten (with every page of
    its key index where ``index_too``). The keys stored, the rows there were, and the rows
    SQLite can still read with the values the cache writes (read row id by row id)."""
    cache = ScoreCache(path)
    rows = [(f"key-{i}-" + "x" * 200, ScoreResult(-float(i), 3)) for i in range(n)]
    cache.put_many("fp|float32", rows)
    cache.close()
    db = sqlite3.connect(path)
    with db:
        if gaps:
            db.execute("DELETE FROM scores WHERE rowid % 3 = 0")
        for rowid, change in MALFORMED.items():
            db.execute(f"UPDATE scores SET {change} WHERE rowid = ?", (rowid,))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    there = db.execute("SELECT count(*) FROM scores").fetchone()[0]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    leaves = _pages(db, "scores", "leaf")
    victims = [leaves[len(leaves) // 2]]  # the malformed rows lie on the first leaf
    if index_too:
        victims += _pages(db, "sqlite_autoindex_scores_1")
    db.close()
    with open(path, "r+b") as fh:
        for page in victims:
            fh.seek((page - 1) * size)
            fh.write(b"\xa5" * size)
    old = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    readable = 0
    for rowid in range(1, n + 1):
        with contextlib.suppress(sqlite3.DatabaseError):
            readable += len(old.execute("SELECT 1 FROM scores WHERE rowid=?", (rowid,)).fetchall())
    old.close()
    malformed = [r for r in MALFORMED if not (gaps and r % 3 == 0)]  # (deleted with the gaps)
    good = readable - len(malformed)
    assert 0 < good < there - len(malformed)  # a page's rows are unreadable
    return [k for k, _ in rows], there, good


def test_rows_lost_are_the_rows_there_were_that_are_not_kept(tmp_path: Path) -> None:
    """RepairReport.lost: "Rows there were and are not kept, per table", exact while the key
    index can be read; the rows SQLite can still read are kept, type-checked. A readable row
    whose values the cache never writes is not kept, so it is lost: every row there was is kept
    or lost, and no readable well-formed row is left behind (row ids up to the last, gaps
    among them)."""
    path = tmp_path / "scores.sqlite"
    keys, there, good = _damaged(path, 600, gaps=True, index_too=False)
    report = repair_cache(path)
    assert not report.sound and "scores" not in report.bounds
    kept, lost = report.kept["scores"], report.lost["scores"]
    assert kept == good and lost is not None and kept + lost == there, report
    repaired = ScoreCache(path)
    got = repaired.get_many(keys)
    assert len(got) == kept == repaired.info().scores
    assert not {keys[1], keys[2], keys[4]} & set(got)  # the malformed rows (ids 2, 3, 5)


def test_with_the_key_index_damaged_the_bound_covers_the_malformed_rows(tmp_path: Path) -> None:
    """RepairReport.bounds: with the key index damaged too, ``lost`` is an upper bound of the
    rows there were and are not kept; the rows read but malformed (not kept) are among them.
    With no row id ever unused, the bound is the count itself."""
    path = tmp_path / "scores.sqlite"
    keys, there, good = _damaged(path, 600, gaps=False, index_too=True)
    report = repair_cache(path)
    kept, lost = report.kept["scores"], report.lost["scores"]
    assert 0 < kept <= good and lost is not None and "scores" in report.bounds, report
    assert lost >= there - kept and lost == 600 - kept, report
    assert len(ScoreCache(path).get_many(keys)) == kept


def test_a_leftover_of_an_interrupted_repair_is_not_taken_in(tmp_path: Path) -> None:
    """repair_cache: "Salvage the readable rows of the score cache at ``path`` into a new
    file": a ``.repairing`` file an interrupted repair left (here holding a score the damaged
    file never had) adds nothing to the repaired cache."""
    path = tmp_path / "scores.sqlite"
    keys, _, good = _damaged(path, 600, gaps=False, index_too=False)
    leftover = ScoreCache(tmp_path / "scores.sqlite.repairing")
    leftover.put_many("other", [("stale-key", ScoreResult(-1.0, 1))])
    leftover.close()
    report = repair_cache(path)
    repaired = ScoreCache(path)
    assert 0 < report.kept["scores"] <= good and report.kept["scores"] == repaired.info().scores
    assert repaired.get_many(["stale-key"]) == {}
    assert len(repaired.get_many(keys)) == report.kept["scores"]


def test_a_model_row_the_cache_never_writes_is_taken_out_of_a_sound_file(tmp_path: Path) -> None:
    """`cache repair --help`: "In a file SQLite finds sound, rows whose values the cache never
    writes (cut short, or written by something else) are taken out instead": a model set-up's
    description cut short is one (the cache writes JSON there)."""
    path = tmp_path / "scores.sqlite"
    cache = ScoreCache(path)
    cache.note_model("fp|float32", {"spec": "hf:./m"})
    cache.note_model("fp2|float32", {"spec": "hf:./n"})
    cache.put_many("fp|float32", [("k", ScoreResult(-1.0, 1))])
    cache.put_many("fp2|float32", [("k2", ScoreResult(-2.0, 1))])
    cache.close()
    db = sqlite3.connect(path)
    with db:
        db.execute(
            "UPDATE models SET detail = '{\"spec\": \"hf:./' WHERE fingerprint = 'fp2|float32'"
        )
    db.close()
    report = repair_cache(path)
    assert report.sound and report.removed == {"models": 1}, report
    again = repair_cache(path)
    assert again.sound and again.removed == {}


def test_a_readable_row_after_a_damaged_page_is_kept(tmp_path: Path) -> None:
    """docs/performance.md: repair "keeps the rows SQLite can still read". A range seek to the
    first row after an overwritten leaf fails where that row read by its own id does not: it
    was counted as lost (582 of 583 readable rows kept; QA)."""
    path = tmp_path / "scores.sqlite"
    keys, there, good = _damaged(path, 600, gaps=False, index_too=False)
    report = repair_cache(path)
    kept, lost = report.kept["scores"], report.lost["scores"]
    assert kept == good and lost == there - good, report
    assert len(ScoreCache(path).get_many(keys)) == kept


def test_score_rows_a_run_is_never_served_are_taken_out(tmp_path: Path) -> None:
    """A score row whose token count or boundary is not a whole number is never served to a run
    (ScoreCache.get_many): repair takes it out of a sound file instead of calling the file
    undamaged, and never counts it as kept (QA)."""
    path = tmp_path / "scores.sqlite"
    cache = ScoreCache(path)
    keys = [f"k{i}" for i in range(10)]
    cache.put_many("fp|float32", [(k, ScoreResult(-1.0 - i, 2)) for i, k in enumerate(keys)])
    cache.close()
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE scores SET boundary = 'x' WHERE key IN ('k0', 'k1', 'k2')")
        db.execute("UPDATE scores SET n_tokens = NULL WHERE key IN ('k3', 'k4')")
    db.close()
    assert len(ScoreCache(path).get_many(keys)) == 5
    report = repair_cache(path)
    assert report.sound and report.removed == {"scores": 5}, report
    repaired = ScoreCache(path)
    assert repaired.info().scores == len(repaired.get_many(keys)) == 5


def test_a_value_nested_too_deep_is_malformed_and_the_removal_is_all_or_nothing(
    tmp_path: Path,
) -> None:
    """A stored value nested 50,000 deep stopped `cache repair` with a RecursionError after
    it had deleted the score table's malformed rows (a half-fixed file, said nowhere): it is a
    malformed row like any other, and every table's are taken out together (review QA)."""
    path = tmp_path / "scores.sqlite"
    cache = ScoreCache(path)
    cache.put_many("fp|float32", [("k", ScoreResult(-1.0, 1))])
    cache.close()
    db = sqlite3.connect(path)
    with db:
        deep = "[" * 50_000 + "]" * 50_000
        db.execute("INSERT INTO blobs VALUES ('deep', 'fp', 'token_stats', ?)", (deep,))
        db.execute("INSERT INTO scores VALUES ('s1', 'fp', 'abc', 3, 0)")
    db.close()
    report = repair_cache(path)
    assert report.sound and report.removed == {"scores": 1, "blobs": 1}, report
    kept = ScoreCache(path)
    assert kept.info().scores == 1 and kept.info().entries == 1
