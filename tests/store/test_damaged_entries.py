"""Damaged entries in the score cache and in a run folder: a damaged entry is computed again,
not a traceback, and `cache repair` takes out what the cache never writes (error-path QA)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from cli_runner import run_cli
from toy_backends import Arithmetic

from contamscope.backends.base import GenerateRequest, ScoreRequest
from contamscope.store import CachedScorer, ScoreCache

STATS = [ScoreRequest("ab", "cd"), ScoreRequest("q", "xyz")]
PROMPTS = [GenerateRequest("hello", 5), GenerateRequest("world", 5)]


def _damage_first_blob(path: Path, value: str) -> None:
    db = sqlite3.connect(path)
    with db:
        first = "(SELECT key FROM blobs ORDER BY key LIMIT 1)"  # (a replaced row gets a new rowid)
        assert db.execute(f"UPDATE blobs SET value = ? WHERE key = {first}", (value,)).rowcount == 1
    db.close()


def test_a_damaged_stored_statistic_is_computed_again_and_replaced(tmp_path: Path) -> None:
    """A stored value cut short (not JSON) or of another shape is not found: it is computed
    again and stored anew, the rest read back; it stopped the run with a JSONDecodeError."""
    path = tmp_path / "s.sqlite"
    first = CachedScorer(Arithmetic(), ScoreCache(path))
    want = first.token_stats(STATS)
    first.cache.close()  # type: ignore[union-attr]
    for damage in ("[[0, 1], [-1.0", '[["a"], [-1.0], [0], 0]', '{"x": 1}', "7"):
        _damage_first_blob(path, damage)
        backend = Arithmetic()
        again = CachedScorer(backend, ScoreCache(path))
        assert again.token_stats(STATS) == want, damage
        assert (again.computed, again.reused) == (1, 1), damage
        assert backend.ran == [1]
        again.cache.close()  # type: ignore[union-attr]
    third = CachedScorer(Arithmetic(), ScoreCache(path))  # the damaged row was replaced
    assert third.token_stats(STATS) == want and third.reused == 2


def test_a_damaged_stored_generation_is_generated_again(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    first = CachedScorer(Arithmetic(), ScoreCache(path))
    want = first.generate(PROMPTS)
    first.cache.close()  # type: ignore[union-attr]
    for damage in ('{"text": "ol', '{"text": 3, "n_tokens": 1, "finish_reason": "stop"}'):
        _damage_first_blob(path, damage)
        again = CachedScorer(Arithmetic(), ScoreCache(path))
        assert again.generate(PROMPTS) == want, damage
        assert (again.computed, again.reused) == (1, 1), damage
        again.cache.close()  # type: ignore[union-attr]


def test_a_damaged_model_description_does_not_stop_cache_info_or_clear(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """`cache info` and `cache clear --model` read every set-up's description: a damaged one
    stopped both with a traceback; now the set-up is listed (and cleared) without it."""
    cache = tmp_path / "c"
    spec = f"hf:{tiny_model_path}"
    bench = tmp_path / "b.jsonl"
    bench.write_text(
        json.dumps({"question": "2+2?", "choices": ["3", "4", "5"], "answer": 1}) + "\n"
    )
    args = ("-m", spec, "-M", "bos=<|endoftext|>", "--cache-dir", str(cache))
    done = run_cli("permutation", *args, "-b", str(bench), "--out", "r", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    db = sqlite3.connect(cache / "scores.sqlite")
    with db:
        assert db.execute("UPDATE models SET detail = '{broken'").rowcount == 1
    db.close()
    info = run_cli("cache", "info", "--cache-dir", str(cache), cwd=tmp_path)
    assert info.returncode == 0 and "Traceback" not in info.stderr, info.stderr
    assert spec in info.stdout
    cleared = run_cli(
        "cache", "clear", "--model", spec, "--yes", "--cache-dir", str(cache), cwd=tmp_path
    )
    assert cleared.returncode == 0, cleared.stderr
    assert ScoreCache(cache / "scores.sqlite").info().entries == 0


def test_repair_takes_malformed_rows_out_of_a_sound_file(tmp_path: Path) -> None:
    """`cache repair` said "no damage found; nothing changed" of a sound SQLite file holding a
    value the cache never writes; it now takes such rows out (they are computed again), keeps
    the good ones, and says how many it removed."""
    folder = tmp_path / "c"
    folder.mkdir()
    path = folder / "scores.sqlite"
    scorer = CachedScorer(Arithmetic(), ScoreCache(path))
    scorer.token_stats(STATS)
    scorer.score(STATS)
    scorer.cache.close()  # type: ignore[union-attr]
    _damage_first_blob(path, "[[0, 1], [-1.0")
    pristine = tmp_path / "copy.sqlite"
    shutil.copy(path, pristine)
    done = run_cli("cache", "repair", "--cache-dir", str(folder), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "removed 1 malformed stored statistic row" in said, said
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 1
    assert db.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 2
    db.close()
    again = run_cli("cache", "repair", "--cache-dir", str(folder), cwd=tmp_path)
    assert "no damage found" in again.stdout, again.stdout


def test_a_record_whose_id_is_not_a_string_is_scored_again(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """A record in items.jsonl whose id is a list or object is a damaged record (left out with
    a note naming its line, its item scored again); it stopped the resume with a TypeError."""
    bench = tmp_path / "b.jsonl"
    rows = [{"question": f"{i}+1?", "choices": ["a", "b", "c"], "answer": 0} for i in range(3)]
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ("-m", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>", "-b", str(bench))
    done = run_cli("permutation", *args, "--out", "r", "--no-cache", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    items = tmp_path / "r" / "items.jsonl"
    lines = items.read_text().splitlines()
    want = {json.loads(ln)["id"]: json.loads(ln)["logprobs"] for ln in lines}
    damaged = json.loads(lines[1])
    damaged["id"] = [1, 2]
    lines[1] = json.dumps(damaged)
    items.write_text("\n".join(lines) + "\n")
    (tmp_path / "r" / "summary.json").unlink()
    again = run_cli("permutation", *args, "--out", "r", "--no-cache", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    assert "1 damaged or unreadable record left out (line 2)" in " ".join(again.stderr.split())
    got = {json.loads(ln)["id"]: json.loads(ln)["logprobs"] for ln in items.open()}
    assert got.keys() == want.keys()
    worst = max(abs(a - b) for k in want for a, b in zip(got[k], want[k]))
    assert worst < 1e-4, worst  # (float32 sums scored in another batch shape)
