from __future__ import annotations

import contextlib
import inspect
import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from contamscope.backends.base import Backend, Capabilities, ScoreRequest, ScoreResult
from contamscope.errors import CapabilityError, ContamscopeWarning, StoreError
from contamscope.store import CachedScorer, RunDir, ScoreCache
from contamscope.store.cache import SCHEMA_VERSION


class CountingBackend(Backend):
    """A deterministic arithmetic backend that counts what it was asked to score."""

    spec = "counting"
    capabilities = Capabilities(prompt_logprobs=True)

    def __init__(self) -> None:
        self.calls: list[int] = []

    def fingerprint(self) -> str:
        return "counting-v1"

    def score(self, requests: Sequence[ScoreRequest], progress=None) -> list[ScoreResult]:  # type: ignore[no-untyped-def]
        self.calls.append(len(requests))
        return [
            ScoreResult(-float(len(r.prefix) + 2 * len(r.continuation)), len(r.continuation))
            if r.continuation != "nan"
            else ScoreResult(math.nan, 1)
            for r in requests
        ]


def test_cached_scorer_computes_each_number_once(tmp_path: Path) -> None:
    backend = CountingBackend()
    cache = ScoreCache(tmp_path / "s.sqlite")
    reqs = [ScoreRequest("q", c) for c in ("a", "bb", "ccc")]
    first = CachedScorer(backend, cache).score(reqs)
    again = CachedScorer(backend, ScoreCache(tmp_path / "s.sqlite"))
    second = again.score(reqs + [ScoreRequest("q", "dddd")])
    assert [r.logprob for r in second[:3]] == [r.logprob for r in first]
    assert backend.calls == [3, 1]
    assert again.computed == 1 and again.reused == 3
    assert cache.info().entries == 4 and cache.info().models == 1


def test_nan_scores_are_not_cached(tmp_path: Path) -> None:
    backend = CountingBackend()
    scorer = CachedScorer(backend, ScoreCache(tmp_path / "s.sqlite"))
    scorer.score([ScoreRequest("q", "nan")])
    scorer.score([ScoreRequest("q", "nan"), ScoreRequest("q", "a")])
    assert backend.calls == [1, 2]
    # past the context window the model ran nothing: neither computed nor reused (a CAP run
    # counted them as computed on every re-run)
    assert (scorer.computed, scorer.reused) == (1, 0)
    bare = CachedScorer(backend, None)
    bare.score([ScoreRequest("q", "nan"), ScoreRequest("q", "a")])
    assert (bare.computed, bare.reused) == (1, 0)


def test_generations_past_the_context_are_not_counted_as_computed(tmp_path: Path) -> None:
    from contamscope.backends.base import GenerateRequest, Generation

    class Gen(CountingBackend):
        capabilities = Capabilities(prompt_logprobs=False, generate=True)

        def generate(self, requests, progress=None):  # type: ignore[no-untyped-def]
            return [
                Generation("", 0, "context") if r.prompt == "long" else Generation("x", 1, "stop")
                for r in requests
            ]

    reqs = [GenerateRequest("long"), GenerateRequest("short")]
    for cache in (ScoreCache(tmp_path / "s.sqlite"), None):
        scorer = CachedScorer(Gen(), cache)
        scorer.generate(reqs)
        assert (scorer.computed, scorer.reused) == (1, 0)


def test_cache_schema_mismatch_and_garbage_file_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    ScoreCache(path).close()
    # another version's schema; a value that is not an integer (was a ValueError traceback)
    for value in ("99", "2.0"):
        db = sqlite3.connect(path)
        db.execute("UPDATE meta SET value=? WHERE key='schema'", (value,))
        db.commit()
        db.close()
        with pytest.raises(StoreError, match=f"score cache schema {value}, this version"):
            ScoreCache(path)
    # the advice names the command that removes *this* file: a bare `cache clear` empties the
    # user's default cache (QA), another --cache-dir's is named with it
    path = tmp_path / "elsewhere" / "scores.sqlite"
    ScoreCache(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value='2' WHERE key='schema'")
    db.close()
    with pytest.raises(StoreError) as err:
        ScoreCache(path)
    assert f"`contamscope cache clear --yes --cache-dir {path.parent}` removes it" in str(err.value)
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match=r"not a score cache \(file is not a database\)"):
        ScoreCache(bad)


def test_cache_clear(tmp_path: Path) -> None:
    cache = ScoreCache(tmp_path / "s.sqlite")
    CachedScorer(CountingBackend(), cache).score([ScoreRequest("q", "a")])
    assert cache.clear() == 1 and cache.info().entries == 0


def test_backend_without_prompt_logprobs_is_refused() -> None:
    class GenOnly(CountingBackend):
        spec = "chat-only"
        capabilities = Capabilities(prompt_logprobs=False, generate=True)

    with pytest.raises(CapabilityError, match="chat-only"):
        GenOnly().require(prompt_logprobs=True, method="the permutation test")


def test_run_dir_resumes_and_drops_a_torn_last_line(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    assert run.open({"a": 1}) == {}
    run.append([{"id": "x", "v": 1}, {"id": "y", "v": 2}])
    with open(run.items_path, "a", encoding="utf-8") as fh:
        fh.write('{"id": "z", "v"')  # killed mid-write
    run.close()
    done = RunDir(tmp_path / "run").open({"a": 1})
    assert sorted(done) == ["x", "y"]
    assert run.items_path.read_text(encoding="utf-8").count("\n") == 2
    run.append([{"id": "z", "v": 3}])
    assert [json.loads(x)["id"] for x in run.items_path.read_text().splitlines()] == ["x", "y", "z"]


def test_run_dir_refuses_other_settings_unless_overwrite(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.open({"model": "a", "seed": 0, "selection": {}})
    run.append([{"id": "x"}])
    run.close()
    # --overwrite costs nothing already scored: the message says so (users re-ran from scratch)
    with pytest.raises(StoreError, match=r"\(seed: 0 -> 1\); .*--overwrite .*not computed again"):
        RunDir(tmp_path / "run").open({"model": "a", "seed": 1, "selection": {}})
    # a field mapping given on the re-run is named down to the key, with both values
    with pytest.raises(StoreError, match=r"selection.fields: \(none\) -> 'question=answer'"):
        RunDir(tmp_path / "run").open(
            {"model": "a", "seed": 0, "selection": {"fields": "question=answer"}}
        )
    assert RunDir(tmp_path / "run").open({"model": "a", "seed": 1}, overwrite=True) == {}
    # another method's run is named as such (it listed 25 differing settings)
    RunDir(tmp_path / "bb").open({"method": "benbench", "seed": 0})
    with pytest.raises(StoreError, match=r"holds a benbench run, not a cap one; use another"):
        RunDir(tmp_path / "bb").open({"method": "cap", "seed": 0})


def test_a_run_stopped_before_its_first_record_gives_way_to_other_settings(
    tmp_path: Path,
) -> None:
    """A CAP run refused by a chat-only server left its settings.json; the re-run with --chat
    that the message advised was then refused as a run with other settings."""
    first = RunDir(tmp_path / "run")
    first.open({"method": "cap", "chat": False})
    first.close()
    run = RunDir(tmp_path / "run")
    assert run.open({"method": "cap", "chat": True}) == {}
    assert json.loads((tmp_path / "run" / "settings.json").read_text())["chat"] is True
    run.append([{"id": "x"}])
    run.close()
    with pytest.raises(StoreError, match=r"other settings \(chat: True -> False\)"):
        RunDir(tmp_path / "run").open({"method": "cap", "chat": False})


def test_a_folder_of_other_files_is_not_written_without_overwrite(tmp_path: Path) -> None:
    # `--out ~/papers` must not drop items.jsonl, report.html and plots among the user's files
    # (nor over a report.html of theirs)
    mine = tmp_path / "papers"
    mine.mkdir()
    (mine / "report.html").write_text("mine", encoding="utf-8")
    (mine / ".DS_Store").write_text("", encoding="utf-8")
    with pytest.raises(
        StoreError,
        match=r"papers is not a contamscope run folder and not empty "
        r"\(it holds report.html\); give a new or empty folder as --out",
    ):
        RunDir(mine).open({"model": "a"})
    assert sorted(p.name for p in mine.iterdir()) == [".DS_Store", ".lock", "report.html"]
    assert RunDir(mine).open({"model": "a"}, overwrite=True) == {}  # asked for: written
    assert (mine / "report.html").read_text(encoding="utf-8") == "mine"
    # an empty folder, or one with hidden files only, is a new run folder
    (tmp_path / "empty" / ".git").mkdir(parents=True)
    assert RunDir(tmp_path / "empty").open({"model": "a"}) == {}


def test_cache_clear_removes_a_damaged_cache_and_info_refuses_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cache clear --yes` on a file that is not a score cache removes it (a user would
    otherwise be stuck: every run refuses it); `cache info --cache-dir FILE` says it is a file."""
    from cli_runner import run_cli

    damaged = tmp_path / "c" / "scores.sqlite"
    damaged.parent.mkdir()
    damaged.write_bytes(b"not a database at all" * 100)
    res = run_cli("cache", "clear", "--cache-dir", "c", "--yes", cwd=tmp_path)
    assert res.returncode == 0 and "not a usable score cache" in res.stdout, res.stderr
    assert not damaged.exists()
    (tmp_path / "f").write_text("x", encoding="utf-8")
    res = run_cli("cache", "info", "--cache-dir", "f", cwd=tmp_path)
    assert res.returncode == 2 and "--cache-dir f: is a file, not a folder" in res.stderr
    # the folder set by CONTAMSCOPE_CACHE_DIR is named so, not as an option never given (QA)
    monkeypatch.setenv("CONTAMSCOPE_CACHE_DIR", str(tmp_path / "f"))
    res = run_cli("cache", "info", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert f"error: CONTAMSCOPE_CACHE_DIR {tmp_path / 'f'}: is a file, not a folder" in res.stderr
    with pytest.raises(StoreError, match=r"^CONTAMSCOPE_CACHE_DIR \S+: is a file, not a folder"):
        ScoreCache(tmp_path / "f" / "scores.sqlite")
    assert "--cache-dir" in str(pytest.raises(StoreError, ScoreCache, tmp_path / "f" / "x" / "s"))


def test_cache_info_counts_the_converted_model_copies_and_clear_deletes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cache info` said 0.4 MB while the converted GGUF beside it took 517 MB, and no command
    removed it (journey audit). Only the copies: a user's own model kept in that folder was
    counted and deleted too (review QA)."""
    from cli_runner import run_cli

    models = tmp_path / "models"  # never the session's shared converted copy
    monkeypatch.setenv("CONTAMSCOPE_MODEL_DIR", str(models))
    copy = models / "SmolLM2-135M-Instruct.Q4_1-0e9456924c32"
    copy.mkdir(parents=True)
    (copy / "model.safetensors").write_bytes(b"\0" * 2_500_000)
    (copy / "config.json").write_text("{}", encoding="utf-8")
    own = models / "my-own-model"
    own.mkdir()
    (own / "config.json").write_text("{}", encoding="utf-8")
    res = run_cli("cache", "info", "--cache-dir", "c", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    said = " ".join(res.stdout.split())
    assert f"converted model copies (any --cache-dir): {models} (2 files, 2.5 MB;" in said
    res = run_cli("cache", "clear", "--converted", "--yes", cwd=tmp_path)
    assert res.returncode == 0 and "deleted 2 files (2.5 MB) of converted model copies" in (
        " ".join(res.stdout.split())
    )
    assert models.is_dir() and list(models.iterdir()) == [own]
    res = run_cli("cache", "info", "--cache-dir", "c", cwd=tmp_path)
    assert "converted" not in res.stdout


class OtherBackend(CountingBackend):
    spec = "hf:./other"

    def fingerprint(self) -> str:
        return "local:other:abc|bfloat16|tok=1|bos=0|engine=3"


def test_cache_names_model_setups_and_clears_one(tmp_path: Path) -> None:
    from cli_runner import run_cli

    path = tmp_path / "c" / "scores.sqlite"
    cache = ScoreCache(path)
    CachedScorer(CountingBackend(), cache).score([ScoreRequest("q", c) for c in "ab"])
    CachedScorer(OtherBackend(), cache).score([ScoreRequest("q", c) for c in "abc"])
    # an entry written before set-ups were recorded: named from its fingerprint
    cache.put_many("bundled:old|float32|tok=2", [("k-legacy", ScoreResult(-1.0, 1))])
    by_model = {(m.spec, m.fingerprint.split("|")[0]): m.entries for m in cache.models()}
    assert by_model == {("counting", "counting-v1"): 2, ("hf:./other", "local:other:abc"): 3,
                        (None, "bundled:old"): 1}  # fmt: skip
    res = run_cli("cache", "info", "--cache-dir", "c", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = [" ".join(ln.split()) for ln in res.stdout.splitlines()]
    assert any(r.startswith("│ hf:./other │ bfloat16|tok=1|bos=0|engine=3 │ 3 │ 20") for r in rows)
    assert any(r.startswith("│ bundled:old │ float32|tok=2 │ 1 │ - │") for r in rows)
    res = run_cli("cache", "clear", "--cache-dir", "c", "--model", "hf:./gone", cwd=tmp_path)
    assert res.returncode == 2 and "--model hf:./gone: no such model set-up" in res.stderr
    assert "(models: bundled:old, counting, hf:./other)" in res.stderr
    res = run_cli("cache", "clear", "--cache-dir", "c", "--model", "hf:./other", "-y", cwd=tmp_path)
    assert res.returncode == 0 and "deleted 3 scores of hf:./other" in res.stdout
    # stored statistics are named as such (they were counted as scores; QA)
    stats = ScoreCache(path)
    stats.put_blobs("bundled:old|float32|tok=2", "stats", [("s1", [[5], [-1.0]])])
    stats.put_blobs("counting-v1", "stats", [("s2", [[5], [-1.0]])])
    stats.close()
    res = run_cli(
        "cache", "clear", "--cache-dir", "c", "--model", "bundled:old", "-y", cwd=tmp_path
    )
    said = "deleted 1 score and 1 stored statistic of bundled:old"
    assert res.returncode == 0 and said in res.stdout, res.stdout
    left = ScoreCache(path)
    assert [(m.spec, m.entries, m.statistics) for m in left.models()] == [("counting", 3, 1)]
    assert left.info().entries == 3
    left.close()
    res = run_cli("cache", "clear", "--cache-dir", "c", "-y", cwd=tmp_path)
    assert res.returncode == 0 and "deleted 2 scores and 1 stored statistic from" in res.stdout


def test_a_set_up_that_stores_nothing_is_not_named(tmp_path: Path) -> None:
    """A run refused before it scored (its run folder held other settings) left its model as a
    set-up with no entries in `cache info` (QA): a new set-up is named with its first entry;
    one the cache names already is marked used by every scorer."""
    cache = ScoreCache(tmp_path / "c" / "scores.sqlite")
    CachedScorer(OtherBackend(), cache)  # set up, then refused: nothing scored
    assert cache.models() == [] and cache.info().setups == 0
    # every request too long for the model: nothing stored, nothing named (review QA)
    CachedScorer(OtherBackend(), cache).score([ScoreRequest("q", "nan")])
    assert cache.models() == [] and cache.info().setups == 0
    CachedScorer(OtherBackend(), cache).score([ScoreRequest("q", "a")])
    (setup,) = cache.models()
    assert (setup.spec, setup.entries) == ("hf:./other", 1)
    with cache._db:
        cache._db.execute("UPDATE models SET last_used = '2000-01-01T00:00:00Z'")
    CachedScorer(OtherBackend(), cache)  # a run served from the cache alone
    (setup,) = cache.models()
    assert setup.last_used is not None and setup.last_used > "2026"
    # entries without a name (a cache written before set-ups were named): a run served from
    # the cache alone names it (it stayed unnamed: nothing new was stored; review QA)
    with cache._db:
        cache._db.execute("DELETE FROM models")
        cache._db.execute("DELETE FROM model_specs")
    assert [m.spec for m in cache.models()] == [None]
    CachedScorer(OtherBackend(), cache).score([ScoreRequest("q", "a")])
    assert [(m.spec, m.entries) for m in cache.models()] == [("hf:./other", 1)]


def test_a_damaged_line_mid_file_loses_only_its_own_record(tmp_path: Path) -> None:
    """A bad line in the middle of items.jsonl dropped every good record after it (they were
    scored again); now only that line goes, and the torn tail of a kill is still cut."""
    run = RunDir(tmp_path / "run")
    run.open({"model": "a"})
    run.append([{"id": f"x{i}"} for i in range(4)])
    lines = run.items_path.read_text().splitlines(keepends=True)
    run.items_path.write_text(lines[0] + "{not json\n" + "".join(lines[1:]) + '{"id": "x9"')
    run.close()
    with pytest.warns(ContamscopeWarning, match="1 damaged or unreadable record") as said:
        done = RunDir(tmp_path / "run").open({"model": "a"})
    # the warning names the line that asked for the work, not contamscope's own (API QA)
    assert (said[0].filename, said[0].lineno) == (__file__, inspect.currentframe().f_lineno - 2)
    assert sorted(done) == ["x0", "x1", "x2", "x3"]
    assert run.items_path.read_text() == "".join(lines)  # the file holds the good lines only


def test_cache_damaged_inside_is_one_line_and_clear_removes_it(tmp_path: Path) -> None:
    """A database whose header is intact but whose pages are damaged opened fine and then
    failed on the first read with a sqlite3 traceback (run, `cache info`, `cache clear`)."""
    from cli_runner import run_cli

    path = tmp_path / "c" / "scores.sqlite"
    rows = _damaged_cache(path, 3000)
    damaged = ScoreCache(path)
    with pytest.raises(StoreError) as err:
        damaged.get_many([k for k, _ in rows])
    assert str(err.value).startswith(f"{path}: not a usable score cache (")
    # the hint names this --cache-dir: a bare `cache clear --yes` empties the default cache
    assert f"`contamscope cache clear --yes --cache-dir {path.parent}` removes it" in str(err.value)
    assert f"`contamscope cache repair --cache-dir {path.parent}` salvages" in str(err.value)
    damaged.close()
    res = run_cli("cache", "info", "--cache-dir", "c", cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    res = run_cli("cache", "clear", "--cache-dir", "c", "--yes", cwd=tmp_path)
    out = " ".join(res.stdout.split())
    assert res.returncode == 0 and out == (
        "removed c/scores.sqlite, which was not a usable score cache (database disk image is "
        "malformed)"
    ), res.stdout
    assert not path.exists()


def test_a_cache_cut_short_is_not_sent_to_repair(tmp_path: Path) -> None:
    """A file cut short (a copy interrupted) has no readable page left: the error suggested
    `cache repair`, which then said 'nothing to salvage'. It now suggests clearing it."""
    from cli_runner import run_cli

    path = tmp_path / "c" / "scores.sqlite"
    _damaged_cache(path, 3000)
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(size // 30)
    res = run_cli("cache", "info", "--cache-dir", "c", cwd=tmp_path)
    said = " ".join(res.stderr.split())
    assert res.returncode == 2 and "not a usable score cache" in said, res.stderr
    assert "cache repair" not in said and "`contamscope cache clear --yes --cache-dir c" in said
    repair = run_cli("cache", "repair", "--cache-dir", "c", cwd=tmp_path)
    assert repair.returncode == 2 and "nothing to salvage" in repair.stderr, repair.stderr


def _damaged_cache(path: Path, n: int) -> list[tuple[str, ScoreResult]]:
    """A cache of ``n`` distinct scores (and a model name) with 4 pages in its middle
    overwritten, as a disk error or a copy cut short leaves one."""
    cache = ScoreCache(path)
    cache.note_model("fp|float32", {"spec": "hf:./m", "detail": "d"})
    rows = [(f"key-{i}-" + "x" * 200, ScoreResult(-float(i), 3)) for i in range(n)]
    cache.put_many("fp|float32", rows)
    cache.close()
    db = sqlite3.connect(path)  # fold the WAL in: one file to damage
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(size // 2)
        fh.write(b"\xa5" * 16384)
    return rows


def test_cache_repair_keeps_the_readable_scores(tmp_path: Path) -> None:
    """A damaged cache could only be removed, every score in it with it: `cache repair` keeps
    the rows SQLite can still read, exactly as stored, and sets the damaged file aside."""
    from cli_runner import run_cli

    path = tmp_path / "c" / "scores.sqlite"
    none = run_cli("cache", "repair", "--cache-dir", "c", cwd=tmp_path)  # as `cache clear`
    assert none.returncode == 0 and "no cache yet; nothing to repair" in none.stdout, none.stderr
    rows = _damaged_cache(path, 3000)
    # as `cache info` or a run leaves them: an empty log and its index, set aside with the
    # file they belong to and then left behind when the user deleted it
    path.with_name("scores.sqlite-wal").write_bytes(b"")
    path.with_name("scores.sqlite-shm").write_bytes(bytes(32768))
    res = run_cli("cache", "repair", "--cache-dir", "c", cwd=tmp_path)
    out = " ".join(res.stdout.split())
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "scores.sqlite",
        "scores.sqlite.damaged",
    ]
    kept = int(out.split("kept ")[1].split(" scores")[0].replace(",", ""))
    assert 2000 < kept < 3000, out  # 4 pages of ~16 rows each and their neighbours
    # the key index is on a damaged page too: the unreadable row ids are counted, which here
    # (no row ever deleted) are the rows lost; in general a bound, and said so
    said = out.split("lost at most ")[1]
    lost = int(said.split(" rows (the key index is damaged too")[0].replace(",", ""))
    assert kept + lost == 3000 and "1 model name" in out
    assert f"the damaged file is kept as {Path('c') / 'scores.sqlite.damaged'}" in out
    assert (tmp_path / "c" / "scores.sqlite.damaged").is_file()
    assert not list(path.parent.glob("*.repairing*"))  # nothing of the new file left behind
    repaired = ScoreCache(path)
    got = repaired.get_many([k for k, _ in rows])
    assert len(got) == kept and repaired.info().entries == kept
    family = [path.with_name(path.name + end) for end in ("", "-wal", "-shm")]
    assert repaired.info().size_bytes == sum(p.stat().st_size for p in family if p.exists())
    assert all(got[k] == r for k, r in rows if k in got)  # the values as stored
    assert [m.name for m in repaired.models()] == ["hf:./m"]
    repaired.put_many("fp|float32", rows[:5])  # writable again
    repaired.close()
    # a sound cache is left as it is
    again = run_cli("cache", "repair", "--cache-dir", "c", cwd=tmp_path)
    assert again.returncode == 0 and "no damage found" in again.stdout, again.stderr
    assert not (tmp_path / "c" / "scores.sqlite.damaged-2").exists()
    # a file that is no SQLite file at all has nothing to salvage: one line, exit 2
    path.write_bytes(b"not a database" * 100)
    res = run_cli("cache", "repair", "--cache-dir", "c", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "nothing to salvage" in res.stderr and "cache clear --yes --cache-dir c" in res.stderr


def test_importing_a_damaged_file_names_it_not_this_cache(tmp_path: Path) -> None:
    """Its pages failing to read, `cache import` named this machine's own (sound, new) cache
    and told to check its permissions (QA)."""
    from cli_runner import run_cli

    _damaged_cache(tmp_path / "shared.sqlite", 3000)
    res = run_cli("cache", "import", "shared.sqlite", "--cache-dir", "mine", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    said = res.stderr.removeprefix("error: ")
    assert said.startswith("shared.sqlite: cannot read it (database disk image"), said
    assert said.rstrip().endswith(
        "; nothing imported (a damaged copy: export it again, or salvage it with `contamscope "
        "cache repair --cache-dir DIR`, the file as DIR/scores.sqlite)"
    ), said
    assert "mine" not in said and "permissions" not in said
    assert ScoreCache(tmp_path / "mine" / "scores.sqlite").info().entries == 0  # nothing copied


def test_cache_repair_without_its_key_index_says_the_count_is_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the key index damaged too, the row ids on damaged pages were counted as rows
    lost, ids never used among them as well: "lost 155 rows" for 60 (QA). The count is now
    said to be an upper bound."""
    from contamscope.store import repair as repair_module

    path = tmp_path / "c" / "scores.sqlite"
    cache = ScoreCache(path)
    rows = [(f"key-{i}-" + "x" * 200, ScoreResult(-float(i), 3)) for i in range(3000)]
    cache.put_many("fp|float32", rows)
    cache.close()
    db = sqlite3.connect(path)  # two writers' interleaved rows leave such gaps in the ids
    db.execute("DELETE FROM scores WHERE rowid % 2 = 0")
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    with open(path, "r+b") as fh:
        fh.seek(path.stat().st_size // 2)
        fh.write(b"\xa5" * 16384)
    monkeypatch.setattr(repair_module, "_indexed_rowids", lambda old, table: None)
    report = repair_module.repair_cache(path)
    really = 1500 - report.kept["scores"]
    assert really > 0 and report.lost["scores"] is not None
    assert report.lost["scores"] > really and "scores" in report.bounds


def test_cache_repair_says_when_the_rows_lost_cannot_be_counted(tmp_path: Path) -> None:
    """With the last pages gone (the ends of the score table and of its key index) the rows
    there were are unknown: the report says None, not a count of row ids probed."""
    from contamscope.store import repair_cache

    path = tmp_path / "scores.sqlite"
    rows = _damaged_cache(path, 3000)
    with open(path, "r+b") as fh:  # the tail of the file as well
        fh.seek(path.stat().st_size - 16384)
        fh.write(b"\x5a" * 16384)
    report = repair_cache(path)
    assert report.lost["scores"] is None and 0 < report.kept["scores"] < 3000
    got = ScoreCache(path).get_many([k for k, _ in rows])
    assert len(got) == report.kept["scores"] and all(got[k] == r for k, r in rows if k in got)


def test_a_run_folder_is_written_by_one_process_at_a_time(tmp_path: Path) -> None:
    """Two processes on one --out both scored every item and items.jsonl held each record
    twice (the report counted 60 items for 30)."""
    import subprocess
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from contamscope.store import RunDir; "
            f"run = RunDir({str(tmp_path / 'run')!r}); run.open({{'a': 1}}); "
            "print('held', flush=True); "
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"  # type: ignore[union-attr]
        with pytest.raises(StoreError, match="another contamscope process is writing this run"):
            RunDir(tmp_path / "run").open({"a": 1})
        # a command says so before its model loads (it did after, a minute in: QA); the
        # folder, a config and no weights or tokenizer, would have failed the load
        from cli_runner import run_cli

        (tmp_path / "no-model").mkdir()
        (tmp_path / "no-model" / "config.json").write_text('{"model_type": "llama"}')
        (tmp_path / "ref.csv").write_text("Q?,a,b,c,d,A\nR?,e,f,g,h,B\n", encoding="utf-8")
        (tmp_path / "qa.jsonl").write_text('{"question": "Q?", "answer": "#### 4"}\n')
        (tmp_path / "pa.jsonl").write_text('{"question": "Q, again?", "answer": "#### 4"}\n')
        for command, more in (
            ("permutation", ["--benchmark", "mmlu", "--limit", "2"]),
            ("membership", ["--benchmark", "mmlu", "--limit", "2", "--reference", "ref.csv"]),
            ("benbench", ["--benchmark", "qa.jsonl", "--reference", "pa.jsonl"]),
        ):
            res = run_cli(command, "--model", "hf:./no-model", *more, "--out", "run", cwd=tmp_path)
            assert res.returncode == 2 and res.stderr.splitlines()[-1].startswith(
                "error: run: another contamscope process is writing this run folder"
            ), (command, res.stderr)
    finally:
        holder.kill()
        holder.wait()
    # the lock goes with the process, however it ended
    first = RunDir(tmp_path / "run")
    assert first.open({"a": 1}) == {}
    assert first.open({"a": 1}) == {}  # the holder may open it again
    # two open RunDirs of one folder in one process (two notebook cells, two threads) would
    # append every record twice too
    with pytest.raises(StoreError, match="this process is writing this run folder already"):
        RunDir(tmp_path / "run").open({"a": 1})
    first.close()
    with RunDir(tmp_path / "run") as second:  # closed, the folder is free again
        assert second.open({"a": 1}) == {}
    assert RunDir(tmp_path / "run").open({"a": 1}) == {}


def test_read_only_cache_reuses_its_scores_and_stores_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    backend = CountingBackend()
    CachedScorer(backend, ScoreCache(path)).score([ScoreRequest("q", "a")])
    ro = ScoreCache(path, read_only=True)
    assert ro.read_only
    scorer = CachedScorer(backend, ro)
    out = scorer.score([ScoreRequest("q", "a"), ScoreRequest("q", "bb")])
    assert out[0].logprob == -3.0 and scorer.reused == 1 and scorer.computed == 1
    assert ro.unsaved == 1 and backend.calls == [1, 1]
    with pytest.raises(StoreError, match="read-only; nothing deleted"):
        ro.clear()
    ro.close()
    again = ScoreCache(path)
    assert not again.read_only and again.info().entries == 1  # "bb" was not stored
    with pytest.raises(StoreError, match="no score cache to read"):
        ScoreCache(tmp_path / "none.sqlite", read_only=True)
    (tmp_path / "bad.sqlite").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a score cache") as bad:
        ScoreCache(tmp_path / "bad.sqlite", read_only=True)
    assert bad.value.replaceable


def _make_unwritable(path: Path) -> Callable[[], None]:
    """Make ``path`` (a file, or a folder no file can be made in) unwritable even for root
    (immutable attribute) or, for other users, by its mode; returns the undo. Skips where
    neither is possible."""
    import os
    import shutil
    import subprocess

    if os.geteuid() != 0:
        mode = path.stat().st_mode & 0o777
        path.chmod(0o555 if path.is_dir() else 0o444)
        return lambda: path.chmod(mode)
    chattr = shutil.which("chattr")
    if chattr and subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode == 0:
        return lambda: subprocess.run([chattr, "-i", str(path)], check=True)
    pytest.skip("running as root without `chattr +i`: no way to make a path unwritable")


def test_an_unwritable_cache_is_opened_read_only(tmp_path: Path) -> None:
    """It was refused ("attempt to write a readonly database"): a shared read-only copy of
    a colleague's cache could not be used at all."""
    from cli_runner import run_cli

    path = tmp_path / "c" / "scores.sqlite"
    path.parent.mkdir()
    CachedScorer(CountingBackend(), ScoreCache(path)).score([ScoreRequest("q", "a")])
    undo = _make_unwritable(path)
    try:
        with pytest.warns(ContamscopeWarning, match="cannot be written: its scores are reused"):
            cache = ScoreCache(path)  # (said, from Python too)
        assert cache.read_only and cache.get_many([]) == {}
        assert (
            CachedScorer(CountingBackend(), cache).score([ScoreRequest("q", "a")])[0].logprob == -3
        )
        cache.close()
        from contamscope.cli.common import open_cache

        with pytest.warns(ContamscopeWarning):
            open_cache({"no_cache": False, "cache_dir": path.parent}).close()  # what runs open
        with pytest.raises(StoreError, match="cannot write the score cache") as err:
            ScoreCache(path, read_only=False)
        assert not err.value.replaceable
        res = run_cli("cache", "info", "--cache-dir", "c", cwd=tmp_path)
        assert res.returncode == 0 and "scores.sqlite (read-only)" in res.stdout
        assert "cannot be written" not in res.stderr  # looking asks for read-only: no note
        res = run_cli("cache", "clear", "--cache-dir", "c", "--yes", cwd=tmp_path)
        assert res.returncode == 2 and "read-only; nothing deleted" in res.stderr, res.stderr
        assert path.exists()
    finally:
        undo()


def test_cache_clear_model_accepts_every_spelling_of_a_setup(tmp_path: Path) -> None:
    """`hf:./other` and `hf:/abs/other` load the same weights (one fingerprint); only the
    last spelling used was known, so `cache clear --model hf:./other` said "no such model"."""
    from cli_runner import run_cli

    class OtherAbsolute(OtherBackend):
        spec = "hf:/abs/other"

    cache = ScoreCache(tmp_path / "c" / "scores.sqlite")
    CachedScorer(OtherBackend(), cache).score([ScoreRequest("q", "a")])
    CachedScorer(OtherAbsolute(), cache).score([ScoreRequest("q", "b")])
    (setup,) = cache.models()
    assert setup.name == "hf:/abs/other" and setup.spellings == ("hf:./other", "hf:/abs/other")
    cache.close()
    res = run_cli("cache", "clear", "--cache-dir", "c", "--model", "hf:./other", "-y", cwd=tmp_path)
    assert res.returncode == 0 and "deleted 2 scores of hf:./other" in res.stdout, res.stderr
    assert ScoreCache(tmp_path / "c" / "scores.sqlite").models() == []


def test_incomplete_and_repeated_records_are_scored_again_once(tmp_path: Path) -> None:
    """A record cut short (valid JSON, fields missing) was kept as finished and crashed the
    run's summary; a record written twice stayed twice in items.jsonl."""
    run = RunDir(tmp_path / "run")
    run.open({"model": "a"})
    run.append([{"id": "x0", "v": 1}, {"id": "x1"}, {"id": "x2", "v": 3}, {"id": "x0", "v": 1}])
    run.close()
    done = RunDir(tmp_path / "run").open({"model": "a"}, complete=lambda r: "v" in r)
    assert sorted(done) == ["x0", "x2"]
    assert [json.loads(x)["id"] for x in run.items_path.read_text().splitlines()] == ["x0", "x2"]


def test_run_folder_write_errors_are_one_line(tmp_path: Path, monkeypatch: Any) -> None:
    """Disk full while appending, a read-only folder, items.jsonl that is a folder: each was
    a traceback (OSError) instead of one line."""
    import errno
    import os

    run = RunDir(tmp_path / "run")
    run.open({"model": "a"})
    run.append([{"id": "x0"}])

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(
        StoreError,
        match=r"items.jsonl: cannot write it \(No space left on device\); the items finished before are kept",
    ):
        run.append([{"id": "x1"}])
    monkeypatch.undo()
    run.close()

    real_open = os.open

    def read_only(path: Any, *a: Any, **k: Any) -> int:
        if str(path).endswith(".lock"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_open(path, *a, **k)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(StoreError, match=r"run: cannot write it \(Read-only file system\)"):
        RunDir(tmp_path / "run").open({"model": "a"})
    monkeypatch.undo()

    (tmp_path / "dir" / "items.jsonl").mkdir(parents=True)
    (tmp_path / "dir" / "settings.json").write_text('{"model": "a"}', encoding="utf-8")
    with pytest.raises(
        StoreError, match=r"items.jsonl: not a regular file \(a device, a pipe or a"
    ):
        RunDir(tmp_path / "dir").open({"model": "a"})


def test_an_atomic_write_on_a_read_only_file_system_is_one_line(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """`report` and `leaderboard` writing onto a read-only mount: removing the temporary file
    failed as the write had (EROFS), and its OSError came out as a 60-line traceback instead of
    the write's one line (QA)."""
    import errno
    import os

    from contamscope.paths import write_text_atomic

    def read_only(*a: Any, **k: Any) -> Any:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    run = RunDir(tmp_path / "run")
    run.open({"model": "a"})
    run.append([{"id": "x0"}])
    monkeypatch.setattr(Path, "write_text", read_only)
    monkeypatch.setattr(Path, "unlink", read_only)
    with pytest.raises(StoreError, match=r"^--out \S*lb.md: cannot write it \(Read-only file "):
        write_text_atomic(tmp_path / "lb.md", "board")
    monkeypatch.setattr(os, "fsync", read_only)  # a run's records rewritten whole
    with pytest.raises(StoreError, match=r"items.jsonl: cannot write it \(Read-only file sys"):
        run.replace_records([{"id": "x0"}])


def test_scores_stored_after_clearing_their_model_keep_its_name(tmp_path: Path) -> None:
    """`cache clear --model SPEC` while a run of SPEC went on: the run's later scores were
    left without the spec, and a second `clear --model SPEC` said there was no such model."""
    cache = ScoreCache(tmp_path / "scores.sqlite")
    scorer = CachedScorer(CountingBackend(), cache)
    scorer.score([ScoreRequest("q", "a")])
    (setup,) = cache.models()
    cache.clear([setup.fingerprint])  # as `cache clear --model counting` does mid-run
    scorer.score([ScoreRequest("q", "b")])
    assert [(m.spec, m.entries) for m in cache.models()] == [("counting", 1)]


def test_a_folder_in_place_of_the_cache_file_names_a_way_out(tmp_path: Path) -> None:
    (tmp_path / "scores.sqlite").mkdir()
    with pytest.raises(
        StoreError, match="is a folder, not a score cache file; move it away, or use --no-cache"
    ):
        ScoreCache(tmp_path / "scores.sqlite")


def test_cache_export_and_import_carry_scores_and_names_to_another_cache(tmp_path: Path) -> None:
    """Scores computed on one machine, exported (one model's or all), imported into another
    cache: a run there computes none of them again."""
    from cli_runner import run_cli

    a = ScoreCache(tmp_path / "a" / "scores.sqlite")
    requests = [ScoreRequest("q", c) for c in "abc"]
    CachedScorer(CountingBackend(), a).score(requests[:2])
    CachedScorer(OtherBackend(), a).score(requests)
    a.put_blobs("counting-v1", "token_stats", [("blob-key", {"ids": [1, 2]})])
    a.close()

    res = run_cli("cache", "export", "one.sqlite", "--cache-dir", "a", "-m", "hf:./other",
                  cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "exported 3 scores of 1 model set-up to one.sqlite" in " ".join(res.stdout.split())
    assert "contamscope cache import one.sqlite" in " ".join(res.stdout.split())
    assert not (tmp_path / "one.sqlite-wal").exists()  # one self-contained file
    (tmp_path / "share").mkdir()
    res = run_cli("cache", "export", "share", "--cache-dir", "a", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "exported 5 scores and 1 stored statistic of 2 model set-ups to share/scores.sqlite" in (
        " ".join(res.stdout.split())
    )
    assert [p.name for p in (tmp_path / "share").iterdir()] == ["scores.sqlite"]
    assert "contamscope cache import share/ (or use the folder as --cache-dir)" in (
        " ".join(res.stdout.split())
    )

    res = run_cli("cache", "import", "one.sqlite", "--cache-dir", "b", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "imported 3 scores of 1 model set-up from one.sqlite" in res.stdout
    res = run_cli("cache", "import", "share", "--cache-dir", "b", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (
        "imported 2 scores and 1 stored statistic of 2 model set-ups (3 scores already there, "
        "kept)" in (" ".join(res.stdout.split()))
    )
    # the statistics already there are named apart (they were counted as scores; QA)
    res = run_cli("cache", "import", "share", "--cache-dir", "b", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (
        "imported 0 scores of 2 model set-ups (5 scores and 1 stored statistic already there, "
        "kept)" in (" ".join(res.stdout.split()))
    )
    b = ScoreCache(tmp_path / "b" / "scores.sqlite")
    assert {(m.spec, m.entries) for m in b.models()} == {("counting", 3), ("hf:./other", 3)}
    assert b.get_blobs(["blob-key"]) == {"blob-key": {"ids": [1, 2]}}
    counting, other = CountingBackend(), OtherBackend()
    a = ScoreCache(tmp_path / "a" / "scores.sqlite")
    assert CachedScorer(other, b).score(requests) == CachedScorer(OtherBackend(), a).score(requests)
    CachedScorer(counting, b).score(requests[:2])
    assert counting.calls == [] and other.calls == []  # nothing computed again

    # what cannot be done says so on one line and changes nothing
    for args, message in [
        (["export", "one.sqlite", "--cache-dir", "a"], "one.sqlite: exists; give a new file name"),
        (["export", "no/x.sqlite", "--cache-dir", "a"], "no: no such folder (nothing written)"),
        (["export", "x.sqlite", "--cache-dir", "none"], "none/scores.sqlite: no cache yet"),
        (["import", "missing.sqlite", "--cache-dir", "b"], "missing.sqlite: no such cache file"),
        (["import", "b", "--cache-dir", "b"], "is this cache itself; nothing to copy"),
        (["import", "one.sqlite", "-m", "smollm2", "--cache-dir", "b"],
         "--model smollm2: no such model set-up in one.sqlite (models: hf:./other)"),
    ]:  # fmt: skip
        res = run_cli("cache", *args, cwd=tmp_path)
        assert res.returncode == 2, (args, res.stdout)
        assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert (
        not (tmp_path / "x.sqlite").exists()
        and ScoreCache(tmp_path / "b" / "scores.sqlite").info().entries == 6
    )


def test_export_and_import_of_what_is_no_cache_give_no_advice_for_ones_own_cache(
    tmp_path: Path,
) -> None:
    """Import told the user to `rm` the file given (a run's items.jsonl) or use --no-cache, the
    advice for one's own damaged cache; export named its hidden temporary file; `export
    newdir/` wrote a file named newdir; an export killed with SIGKILL left its partial files."""
    import os

    from cli_runner import run_cli

    a = ScoreCache(tmp_path / "a" / "scores.sqlite")
    CachedScorer(CountingBackend(), a).score([ScoreRequest("q", c) for c in "ab"])
    a.close()
    (tmp_path / "items.jsonl").write_text('{"id": "q1"}\n')
    (tmp_path / "empty.sqlite").write_bytes(b"")
    for name in ("items.jsonl", "empty.sqlite"):
        res = run_cli("cache", "import", name, "--cache-dir", "b", cwd=tmp_path)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert f"{name}: " in res.stderr and "nothing imported" in res.stderr, res.stderr
        assert "rm " not in res.stderr and "--no-cache" not in res.stderr, res.stderr
    assert (tmp_path / "items.jsonl").exists() and not (tmp_path / "b" / "scores.sqlite").exists()

    # a name ending in / is a folder to make: usable as --cache-dir at once
    stale = tmp_path / ".x.sqlite.999999999.partial-wal"  # a pid no process has
    stale.write_bytes(b"left by a killed export")
    res = run_cli("cache", "export", "newdir/", "--cache-dir", "a", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert ScoreCache(tmp_path / "newdir" / "scores.sqlite").info().entries == 2
    res = run_cli("cache", "export", "x.sqlite", "--cache-dir", "a", cwd=tmp_path)
    assert res.returncode == 0 and not stale.exists(), res.stderr
    assert [p.name for p in tmp_path.glob(".x.sqlite*")] == []
    if os.geteuid() != 0:  # root writes anywhere: the check below needs a user it binds
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        res = run_cli("cache", "export", "ro/y.sqlite", "--cache-dir", "a", cwd=tmp_path)
        assert res.returncode == 2 and "ro: cannot write there (nothing written)" in res.stderr


def test_an_unknown_model_lists_at_most_ten_of_the_caches_set_ups(tmp_path: Path) -> None:
    from cli_runner import run_cli

    cache = ScoreCache(tmp_path / "c" / "scores.sqlite")
    for i in range(12):
        cache.put_many(f"hf:./m{i:02d}|float32", [(f"k{i}", ScoreResult(-1.0, 1))])
    cache.close()
    res = run_cli("cache", "clear", "-m", "hf:./x", "--cache-dir", "c", cwd=tmp_path)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "(models: hf:./m00, hf:./m01," in res.stderr and "hf:./m10" not in res.stderr
    assert "hf:./m09, and 2 more: see `contamscope cache info`)" in res.stderr


@pytest.fixture(scope="module")
def module_cache_root() -> Path:
    from contamscope.paths import cache_root

    return cache_root()


def test_fixtures_wider_than_a_test_keep_out_of_the_users_cache(
    module_cache_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Module fixtures (trained models, runs made once) once wrote their scores into the
    user's own cache on every `make test`."""
    assert module_cache_root.is_relative_to(tmp_path_factory.getbasetemp())


def test_an_export_stopped_by_sigterm_leaves_nothing(tmp_path: Path) -> None:
    """`kill` (a scheduler's time limit) left 127 MB of hidden partial files that no later
    export removed; SIGTERM now unwinds as Ctrl-C does."""
    import signal
    import subprocess
    import sys
    import time

    cache = ScoreCache(tmp_path / "a" / "scores.sqlite")
    for start in range(0, 400_000, 100_000):
        cache.put_many(
            "big|float32", [(f"k{i}", ScoreResult(-1.0, 1)) for i in range(start, start + 100_000)]
        )
    cache.close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "contamscope", "cache", "export", "x.sqlite", "--cache-dir", "a"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".x.sqlite.*.partial*")) and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:  # it finished first: then the file is whole
        pytest.skip("the export finished before SIGTERM arrived; nothing to check")
    assert proc.returncode == 130 and "interrupted; nothing written" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]


def test_scores_a_read_only_cache_cannot_read_are_said(tmp_path: Path, capsys: Any) -> None:
    """A read-only folder whose cache has a write-ahead log but no -shm file is opened
    immutable, which does not read the log: its scores were silently unseen (QA)."""
    import subprocess
    import sys

    from cli_runner import run_cli

    from contamscope.cli.common import open_cache

    path = tmp_path / "c" / "scores.sqlite"
    ScoreCache(path).close()
    writer = (  # a writer killed before its checkpoint: its 5 scores are in the log only
        "import os, sqlite3\n"
        "from contamscope.store import ScoreCache\n"
        "from contamscope.backends.base import ScoreResult\n"
        f"c = ScoreCache({str(path)!r})\n"
        "c._db.execute('PRAGMA wal_autocheckpoint=0')\n"
        "c.put_many('fp', [(f'k{i}', ScoreResult(-1.0, 3, 0)) for i in range(5)])\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", writer], check=True)
    wal, shm = (path.with_name(path.name + s) for s in ("-wal", "-shm"))
    assert wal.stat().st_size > 0
    shm.unlink()
    undo = _make_unwritable(path.parent)
    try:
        cache = ScoreCache(path)
        assert cache.read_only and cache.unread_wal == wal and cache.info().scores == 0
        cache.close()
        open_cache({"no_cache": False, "cache_dir": path.parent}).close()
        said = capsys.readouterr().err
        assert f"warning: {wal} holds scores not yet merged" in " ".join(said.split())
        res = run_cli("cache", "info", "--cache-dir", "c", cwd=tmp_path)
        assert res.returncode == 0 and "holds scores not yet merged" in res.stderr
        assert "(read-only)" in res.stdout
    finally:
        undo()
    again = ScoreCache(path)  # where it can be written: the log is read (and merged)
    assert not again.read_only and again.unread_wal is None and again.info().scores == 5


def test_cache_info_only_reads(tmp_path: Path) -> None:
    """`cache info` opened the cache for writing: it waited 60 s for another process's write
    lock, and turned a SQLite file that is no cache into one (tables added, WAL mode).
    Its counts named scores and stored statistics together as "scores" (QA)."""
    import hashlib

    from cli_runner import run_cli

    path = tmp_path / "c" / "scores.sqlite"
    cache = ScoreCache(path)
    CachedScorer(CountingBackend(), cache).score([ScoreRequest("q", "a"), ScoreRequest("q", "b")])
    key = hashlib.sha256(b"x").hexdigest()
    cache.put_blobs("fp-other", "stats", [(key, [[5], [-1.0]])])  # another set-up's statistic
    with cache._db:  # a set-up that stored nothing (an older version named such set-ups)
        cache._db.execute("INSERT INTO models VALUES ('fp-idle', 'hf:idle', '{}', NULL)")
    holder = sqlite3.connect(path, timeout=1)
    holder.execute("BEGIN IMMEDIATE")  # another process writing now
    holder.execute("INSERT OR REPLACE INTO meta VALUES ('x', 'y')")
    try:
        res = run_cli("cache", "info", "--cache-dir", "c", cwd=tmp_path, timeout=50)
    finally:
        holder.rollback()
        holder.close()
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "entries: 2 scores and 1 stored statistic" in lines
    assert "model set-ups: 3 (2 with entries)" in lines
    assert "(read-only)" not in res.stdout
    other = tmp_path / "notes" / "scores.sqlite"
    other.parent.mkdir()
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (t TEXT)")
    db.close()
    before = other.read_bytes()
    res = run_cli("cache", "info", "--cache-dir", "notes", cwd=tmp_path)
    assert res.returncode == 2 and "not a usable score cache" in res.stderr
    assert other.read_bytes() == before and not other.with_name("scores.sqlite-wal").exists()


def test_converted_copies_are_not_chosen_by_cache_dir(tmp_path: Path, monkeypatch: Any) -> None:
    """`cache clear --converted --cache-dir X` deleted the converted copies of the environment's
    model folder, not X's (QA): refused, and nothing deleted."""
    from cli_runner import run_cli

    models = tmp_path / "models"
    copy = models / "m-0123456789ab"  # (a converted copy's name: NAME-<12 hex digits>)
    copy.mkdir(parents=True)
    (copy / "model.safetensors").write_bytes(b"0" * 10)
    monkeypatch.setenv("CONTAMSCOPE_MODEL_DIR", str(models))
    res = run_cli("cache", "clear", "--converted", "--cache-dir", "x", "--yes", cwd=tmp_path)
    assert res.returncode == 2
    assert f"--converted deletes the converted model copies in {models}" in res.stderr
    assert (copy / "model.safetensors").exists()
    res = run_cli("cache", "clear", "--converted", "--yes", cwd=tmp_path)
    assert res.returncode == 0 and not (copy / "model.safetensors").exists()


def test_a_cache_written_before_model_names_is_read_and_imported(tmp_path: Path) -> None:
    """Caches from before the ``models`` table (added in one schema version: the writable open
    creates it) were refused by the read-only `cache info`, which advised deleting them
    (review)."""
    from cli_runner import run_cli

    path = tmp_path / "old" / "scores.sqlite"
    path.parent.mkdir()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        db.execute(
            "CREATE TABLE scores (key TEXT PRIMARY KEY, fingerprint TEXT, logprob REAL NOT NULL, "
            "n_tokens INTEGER, boundary INTEGER)"
        )
        db.execute(
            "CREATE TABLE blobs (key TEXT PRIMARY KEY, fingerprint TEXT, kind TEXT NOT NULL, "
            "value TEXT NOT NULL)"
        )
        db.execute("INSERT INTO scores VALUES ('k1', 'fp-old', -1.5, 2, 0)")
    db.close()
    res = run_cli("cache", "info", "--cache-dir", "old", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "entries: 1 score" in res.stdout and "model set-ups: 1" in res.stdout
    res = run_cli("cache", "import", str(path), "--cache-dir", "new", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert ScoreCache(tmp_path / "new" / "scores.sqlite").get_many(["k1"])["k1"].logprob == -1.5


class AheadBackend(CountingBackend):
    """Takes the next call's requests before it hands back the previous call's results, as
    the transformers engine does on a GPU."""

    def score_stream(self, calls, progress=None):  # type: ignore[no-untyped-def]
        previous = None
        for requests in calls:
            current = self.score(requests)
            if previous is not None:
                yield previous
            previous = current
        if previous is not None:
            yield previous


def test_a_stream_of_calls_stores_each_before_handing_it_over(tmp_path: Path) -> None:
    """Through an overlapping backend: each list gets its own results in order, the model
    sees only what the cache lacks (a list found whole in the cache sends nothing), and each
    call's scores are in the cache when its results come out."""
    cache = ScoreCache(tmp_path / "s.sqlite")
    CachedScorer(CountingBackend(), cache).score([ScoreRequest("q", "a")])
    backend = AheadBackend()
    scorer = CachedScorer(backend, cache)
    lists = [
        [ScoreRequest("q", c) for c in ("a", "bb")],
        [ScoreRequest("q", "a")],
        [ScoreRequest("p", c) for c in ("x", "yy", "a")],
    ]
    entries = []
    got = []
    for res in scorer.score_stream(iter(lists)):
        entries.append(cache.info().entries)
        got.append(res)
    plain = CountingBackend()
    assert [[r.logprob for r in res] for res in got] == [
        [r.logprob for r in plain.score(reqs)] for reqs in lists
    ]
    assert backend.calls == [1, 0, 3]
    assert entries == [2, 2, 5]
    assert (scorer.computed, scorer.reused) == (4, 2)


class OtherDtype(OtherBackend):
    def fingerprint(self) -> str:
        return "local:other:abc|float32|tok=1|bos=0|engine=3"


def test_one_set_up_of_a_model_can_be_cleared_and_an_empty_file_is_no_cache(
    tmp_path: Path, capsys: Any
) -> None:
    """`cache clear --model` deleted every set-up of a spec under a table that said it deletes
    one, and took no set-up's fingerprint; an empty scores.sqlite (a run sets one up) was "not
    a usable score cache"; and a data file given to ScoreCache was to be removed with `rm`."""
    from cli_runner import run_cli

    path = tmp_path / "c" / "scores.sqlite"
    cache = ScoreCache(path)
    CachedScorer(OtherBackend(), cache).score([ScoreRequest("q", c) for c in "ab"])
    CachedScorer(OtherDtype(), cache).score([ScoreRequest("q", c) for c in "abc"])
    cache.close()
    clear = ("cache", "clear", "--cache-dir", "c", "-y", "--model")
    res = run_cli(*clear, "float32|tok=1|bos=0|engine=3", cwd=tmp_path)
    assert res.returncode == 0 and "deleted 3 scores of float32|tok=1|bos=0|engine=3" in res.stdout
    assert [m.entries for m in ScoreCache(path).models() if m.entries] == [2]
    CachedScorer(OtherDtype(), ScoreCache(path)).score([ScoreRequest("q", "z")])
    res = run_cli(*clear, "hf:./other", cwd=tmp_path)
    assert "deleted 3 scores of hf:./other (2 set-ups)" in " ".join(res.stdout.split())
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "scores.sqlite").write_bytes(b"")
    res = run_cli("cache", "info", "--cache-dir", "empty", cwd=tmp_path)
    assert res.returncode == 0 and "empty (no cache yet)" in res.stdout, res.stderr
    data = tmp_path / "toy_test.jsonl"
    data.write_text('{"question": "q"}\n' * 200, encoding="utf-8")
    with pytest.raises(StoreError) as err:
        ScoreCache(data).get_many(["k"])
    assert "not a score cache (file is not a database)" in str(err.value)
    assert "rm " not in str(err.value) and "left as it is" in str(err.value)
    assert data.read_text().startswith('{"question"')


def _toy_run(tmp_path: Path, n: int) -> tuple[Callable[[], Any], list[dict[str, Any]]]:
    """A finished permutation run of ``n`` toy items in tmp_path/run: the same run again (a
    callable) and its records."""
    from contamscope.data import load_benchmark
    from contamscope.pipeline import PermutationConfig, run_permutation

    bench = tmp_path / "toy_test.csv"
    bench.write_text(
        "".join(f"Question {i}?,a{i},b{i},c{i},d{i},A\n" for i in range(n)), encoding="utf-8"
    )
    loaded = load_benchmark(str(bench))
    scorer = CachedScorer(CountingBackend(), None)

    def run() -> Any:
        return run_permutation(loaded, loaded.items, scorer, tmp_path / "run", PermutationConfig())

    return run, run().records()


def test_a_damaged_record_is_said_and_the_run_keeps_the_items_order(tmp_path: Path) -> None:
    """A record damaged mid-file was dropped without a word, and its item, scored again, ended
    up last in items.jsonl."""
    rerun, want = _toy_run(tmp_path, 4)
    items = tmp_path / "run" / "items.jsonl"
    whole = items.read_text().splitlines(keepends=True)
    items.write_text("".join(whole[:1]) + whole[1][:50] + "\n" + "".join(whole[2:]))
    with pytest.warns(ContamscopeWarning) as said:  # (the CLI prints it as a note: line)
        again = rerun()
    assert [str(w.message) for w in said] == [
        f"{items}: 1 damaged or unreadable record left out (line 2); this run scores their "
        "items again"
    ]
    assert again.resumed == 3 and again.records() == want  # in the items' order


@pytest.mark.parametrize(
    "damage", ["drop", "text", "short", "same orders", "no original", "moved maximum"]
)
def test_a_record_without_usable_log_probs_is_scored_again(tmp_path: Path, damage: str) -> None:
    """A record whose log-probs were gone crashed the resume with a traceback (KeyError in
    the re-thresholding); one with the wrong count or kind was kept as finished; one whose
    maximum moved from its stored score's (an edit, a flipped bit) crashed it too (QA)."""
    rerun, want = _toy_run(tmp_path, 3)
    items = tmp_path / "run" / "items.jsonl"
    records = [json.loads(x) for x in items.read_text().splitlines()]
    if damage == "drop":
        del records[1]["logprobs"]
    elif damage == "same orders":  # not orders of its options: kept as finished (QA)
        records[1]["orders"] = [[0, 0, 0, 0]] * len(records[1]["orders"])
    elif damage == "no original":
        records[1]["orders"] = records[1]["orders"][::-1]
    elif damage == "moved maximum":
        lp = records[1]["logprobs"]
        lp[(lp.index(max(lp)) + 1) % len(lp)] = max(lp) + 100.0
    else:
        records[1]["logprobs"] = "abc" if damage == "text" else records[1]["logprobs"][:-1]
    items.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.warns(ContamscopeWarning, match="1 damaged or unreadable record left out"):
        again = rerun()
    assert again.resumed == 2 and again.records() == want


def test_a_full_disk_under_the_cache_says_to_free_space(tmp_path: Path) -> None:
    """SQLite's "database or disk is full" read as any other cache error (QA)."""
    from contamscope.store.cache import _store_error

    err = _store_error(
        tmp_path / "scores.sqlite", sqlite3.OperationalError("database or disk is full")
    )
    said = str(err)
    assert said.startswith(f"{tmp_path / 'scores.sqlite'}: score cache error (database or disk")
    assert "free space on its disk" in said and "items finished before are kept" in said


def test_a_cache_another_process_holds_is_said_as_busy_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long `cache import` held the write lock: a run sharing the cache waited 60 s, then
    said "score cache error (database is locked); use --no-cache or another --cache-dir", and
    `cache clear`, which has neither option, said the same (concurrency QA)."""
    import contamscope.store.cache as cache_module

    path = tmp_path / "scores.sqlite"
    ScoreCache(path).put_many("fp", [("k0", ScoreResult(-1.0, 1, 0))])
    monkeypatch.setattr(cache_module, "BUSY_SECONDS", 0.2)
    holder = sqlite3.connect(path)  # another writer, mid-transaction
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError) as err:
            ScoreCache(path).put_many("fp", [("k1", ScoreResult(-2.0, 1, 0))])
    finally:
        holder.rollback()
        holder.close()
    said = str(err.value)
    assert said.startswith(f"{path}: the score cache is busy (database is locked): another "), said
    assert "held its write lock for 0.2 s" in said and "re-run when that process is done" in said
    assert "--no-cache scores without the cache meanwhile" in said
    cache = ScoreCache(path)  # free again: the write goes through
    cache.put_many("fp", [("k1", ScoreResult(-2.0, 1, 0))])
    assert sorted(cache.get_many(["k0", "k1"])) == ["k0", "k1"]


def test_cache_repair_reads_past_a_range_that_ends_early_without_an_error(tmp_path: Path) -> None:
    """A damaged page can end a range's read early without an error: repair kept 417 of the
    1,500 rows, 750 of them readable further on, and said "every row was read" (QA)."""
    from contamscope.store import repair_cache

    path = tmp_path / "scores.sqlite"
    cache = ScoreCache(path)
    rows = [(f"key-{i}-" + "x" * 200, ScoreResult(-float(i), 3)) for i in range(3000)]
    cache.put_many("fp|float32", rows)
    cache.close()
    db = sqlite3.connect(path)
    db.execute("DELETE FROM scores WHERE rowid % 2 = 0")
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    with open(path, "r+b") as fh:
        fh.seek(int(path.stat().st_size * 0.3))
        fh.write(b"\xa5" * 65536)
    old = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    readable = 0  # the rows SQLite can still read, row id by row id
    for rowid in range(1, 3001):
        with contextlib.suppress(sqlite3.DatabaseError):
            readable += len(old.execute("SELECT 1 FROM scores WHERE rowid=?", (rowid,)).fetchall())
    old.close()
    # windows of 256 ids alone lose only the rest of the one window that ends early (1,405
    # kept): every readable row counts
    assert 1000 < readable < 1500
    report = repair_cache(path)
    assert report.kept["scores"] >= readable, report  # was 417
    assert report.lost["scores"] is None or (
        report.lost["scores"] >= 1500 - report.kept["scores"] and "scores" in report.bounds
    )
    got = ScoreCache(path).get_many([k for k, _ in rows])
    assert len(got) == report.kept["scores"] and all(got[k] == r for k, r in rows if k in got)


def test_links_in_a_run_folder_are_never_written_through(tmp_path: Path) -> None:
    """A run folder from elsewhere held `report.html.tmp` -> a file outside it, and
    `contamscope report` wrote the report there (and `reanalyse`, through `summary.json.tmp`
    and `items.jsonl.tmp`; security QA). Links are replaced or refused, never followed."""
    from contamscope.paths import write_text_atomic

    victim = tmp_path / "victim.txt"
    victim.write_text("kept\n")
    run = tmp_path / "run"
    RunDir(run).open({"method": "m", "x": 1})  # (the folder as uploaded: a run, and links)
    for name in ("report.html.tmp", "summary.json.tmp", "items.jsonl.tmp"):
        (run / name).symlink_to(victim)
    write_text_atomic(run / "report.html", "<html></html>\n")
    folder = RunDir(run)
    folder.open({"method": "m", "x": 1})
    folder.append([{"id": "a"}])
    folder.replace_records([{"id": "a", "v": 1}])
    folder.write_summary({"method": "m"})
    folder.close()
    assert victim.read_text() == "kept\n"
    # (the temporary files are named per writer now: the planted links stay, unused)
    planted = {"report.html.tmp", "summary.json.tmp", "items.jsonl.tmp"}
    assert {p.name for p in run.iterdir() if p.is_symlink()} <= planted
    # (the summary rewritten, the report there is replaced by its out-of-date page)
    assert "This report is out of date" in (run / "report.html").read_text()
    assert [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()] == [
        {"id": "a", "v": 1}
    ]
    # a records file that is a link is not appended to, nor a lock file that is one opened
    (run / "items.jsonl").unlink()
    (run / "items.jsonl").symlink_to(victim)
    again = RunDir(run)
    with pytest.raises(StoreError):
        again.append([{"id": "b"}])
    lock_victim = tmp_path / "lock-victim"
    (run / ".lock").unlink()
    (run / ".lock").symlink_to(lock_victim)
    with pytest.raises(StoreError):
        RunDir(run).open({"method": "m", "x": 1})
    assert victim.read_text() == "kept\n" and not lock_victim.exists()


def test_figures_are_not_written_through_a_link(tmp_path: Path) -> None:
    """matplotlib opened the path itself: a run folder's `pcr_heatmap.png` linked to a file
    outside was overwritten with a PNG by `reanalyse` (review QA); validate's plots alike."""
    pytest.importorskip("matplotlib")
    from contamscope.report.cap_heatmap import plot_pcr_heatmap

    victim = tmp_path / "victim.txt"
    victim.write_text("kept\n")
    png = tmp_path / "pcr_heatmap.png"
    png.symlink_to(victim)
    summary = {"model": {"spec": "m"}, "benchmark": {"source": "b"}, "splits": ["dev"],
               "statistics": {"generate": {"splits": {"dev": {"pcr": 0.5}}}}}  # fmt: skip
    plot_pcr_heatmap([summary], png)
    assert victim.read_text() == "kept\n"
    assert not png.is_symlink() and png.read_bytes()[:4] == b"\x89PNG"


def test_cache_repair_in_a_read_only_folder_finds_a_sound_cache_sound(tmp_path: Path) -> None:
    """SQLite cannot make a WAL cache's shared-memory file there: the sound cache was called
    "nothing to salvage" and its removal suggested."""
    from contamscope.store.repair import repair_cache

    path = tmp_path / "ro" / "scores.sqlite"
    path.parent.mkdir()
    cache = ScoreCache(path)
    CachedScorer(CountingBackend(), cache).score([ScoreRequest("q", "a")])
    cache.close()  # (its -wal and -shm files go: a reader would have to make the -shm)
    assert [p.name for p in path.parent.iterdir()] == ["scores.sqlite"]
    undo = _make_unwritable(path.parent)
    try:
        report = repair_cache(path)
    finally:
        undo()
    assert report.sound and report.damaged_copy is None


def test_cache_repair_in_a_read_only_folder_names_the_log_it_could_not_read(
    tmp_path: Path,
) -> None:
    """There SQLite cannot read a write-ahead log: "no damage found" spoke of scores never
    checked (review QA); the report names the log."""
    import shutil

    from contamscope.store.repair import repair_cache

    live = tmp_path / "live" / "scores.sqlite"
    live.parent.mkdir()
    first = ScoreCache(live)
    CachedScorer(CountingBackend(), first).score([ScoreRequest("q", "a")])
    first.close()  # (checkpointed: the file holds this score)
    cache = ScoreCache(live)
    CachedScorer(CountingBackend(), cache).score([ScoreRequest("q", "b")])
    ro = tmp_path / "ro"
    ro.mkdir()
    for f in live.parent.iterdir():  # (the log holds the second while a connection is open)
        if not f.name.endswith("-shm"):
            shutil.copy(f, ro / f.name)
    shutil.copy(live.parent / "scores.sqlite-shm", tmp_path / "shm")
    cache.close()
    assert (ro / "scores.sqlite-wal").stat().st_size > 0
    undo = _make_unwritable(ro)
    try:
        report = repair_cache(ro / "scores.sqlite")
    finally:
        undo()
    assert report.sound and report.unread_wal == ro / "scores.sqlite-wal"
    # with its shared-memory file there, SQLite reads the log: nothing is said unread
    shutil.copy(tmp_path / "shm", ro / "scores.sqlite-shm")
    undo = _make_unwritable(ro)
    try:
        report = repair_cache(ro / "scores.sqlite")
    finally:
        undo()
    assert report.sound and report.unread_wal is None


def test_export_under_a_file_says_it_is_a_file(tmp_path: Path) -> None:
    """`cache export afile/x.sqlite` said "afile: no such folder"; report, card and
    leaderboard say "is a file, not a folder" (error-path QA)."""
    from cli_runner import run_cli

    a = ScoreCache(tmp_path / "a" / "scores.sqlite")
    CachedScorer(CountingBackend(), a).score([ScoreRequest("q", "a")])
    a.close()
    (tmp_path / "afile").write_text("")
    for target in ("afile/x.sqlite", "afile/deeper/x.sqlite"):
        res = run_cli("cache", "export", target, "--cache-dir", "a", cwd=tmp_path)
        assert res.returncode == 2, res.stderr
        assert res.stderr.strip() == "error: afile: is a file, not a folder (nothing written)"
