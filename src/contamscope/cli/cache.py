"""`contamscope cache info|clear|repair|export|import`: see and manage the score cache."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import typer

from ..errors import ConfigError, StoreError
from ..paths import cache_dir_name, check_output_folder, default_score_db, model_cache_dir
from ..store import ModelSetup, ScoreCache
from ..store.cache import Copied, sqlite_files
from ..wording import plural, shell
from .common import (
    EXIT_INTERRUPTED,
    Table,
    console,
    err_console,
    say_unread_wal,
    sigterm_as_interrupt,
    user_errors,
)

app = typer.Typer(
    help="See and manage the score cache (computed log-probs, reused across runs).",
    no_args_is_help=True,
)

CacheDir = typer.Option(
    None,
    "--cache-dir",
    help="Cache folder (default: $CONTAMSCOPE_CACHE_DIR or the user cache directory).",
)


def cache_path(cache_dir: Path | None) -> Path:
    if cache_dir is None:
        folder = default_score_db().parent
        return check_output_folder(folder, cache_dir_name(folder)) / "scores.sqlite"
    return check_output_folder(cache_dir, "--cache-dir") / "scores.sqlite"


def _no_cache(path: Path) -> bool:
    """No score cache there yet: no file, or an empty one (a run sets up an empty file as a
    new cache; ``cache info`` called it unusable)."""
    return not path.exists() or (path.is_file() and path.stat().st_size == 0)


@app.command("info")
@user_errors
def info(cache_dir: Path | None = CacheDir) -> None:
    """Where the cache is, how many scores it holds, for how many model set-ups, its size.

    Example: contamscope cache info
    """
    path = cache_path(cache_dir)
    converted = _converted()
    if converted:  # the bundled GGUF's safetensors copy: often far larger than the scores
        files, size = converted
        console.print(
            f"converted model copies{' (any --cache-dir)' if cache_dir else ''}: "
            f"{model_cache_dir()} ({plural(files, 'file')}, "
            f"{size / 1e6:.1f} MB; `contamscope cache clear --converted` deletes them, the next "
            "run converts again)",
            highlight=False,
        )
    if _no_cache(path):
        console.print(f"{path}: empty (no cache yet)")
        return
    cache = ScoreCache(path, read_only=True)  # looking writes nothing, waits for no writer
    say_unread_wal(cache)
    c = cache.info()
    writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)
    stats = f" and {plural(c.statistics, 'stored statistic')}" if c.statistics else ""
    idle = f" ({c.models} with entries)" if c.setups != c.models else ""
    console.print(
        f"path: {c.path}{'' if writable else ' (read-only)'}\n"
        f"entries: {plural(c.scores, 'score')}{stats}\n"
        f"model set-ups: {c.setups}{idle}\n"
        f"size: {c.size_bytes / 1e6:.1f} MB",
        highlight=False,
    )
    setups = cache.models()
    if setups:
        t = Table(
            title="model set-ups (`contamscope cache clear --model MODEL` deletes a model's, "
            "`--model 'SET-UP'` one of them)"
        )
        for col in ("model", "set-up (fingerprint)", "entries", "last used"):
            t.add_column(col, justify="right" if col == "entries" else "left", overflow="fold")
        for m in setups:
            # after the model's identity; a fingerprint of one part (a custom backend's) whole
            setup = m.fingerprint.partition("|")[2] or m.fingerprint
            t.add_row(m.name, setup, f"{m.entries:,}", m.last_used or "-")
        console.print(t)


def _copies() -> list[Path]:
    """The converted model copies in the model folder: ``NAME-<12 hex digits>`` folders, and
    ``.convert-*``/``.join-*`` ones a killed conversion left. Nothing else there is counted or
    removed: the folder may be one a user also keeps models in (``CONTAMSCOPE_MODEL_DIR``), and
    ``--converted`` deleted everything in it (review QA)."""
    import re

    root = model_cache_dir()
    if not root.is_dir():
        return []
    named = re.compile(r"(.+-[0-9a-f]{12}|\.(convert|join)-.+)")
    return [p for p in sorted(root.iterdir()) if p.is_dir() and named.fullmatch(p.name)]


def _converted() -> tuple[int, int] | None:
    """(files, bytes) of the converted model copies, or None when there are none."""
    files = [p for copy in _copies() for p in copy.rglob("*") if p.is_file()]
    return (len(files), sum(p.stat().st_size for p in files)) if files else None


@app.command("clear")
@user_errors
def clear(
    cache_dir: Path | None = CacheDir,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    model: str | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Delete only this model's scores: its spec as given to the run, or the model "
        "column of `cache info` (all its set-ups); or one set-up's, by its set-up column.",
    ),
    converted: bool = typer.Option(
        False,
        "--converted",
        help="Delete the converted model copies instead (the bundled GGUF as safetensors); "
        "the next run converts again.",
    ),
) -> None:
    """Delete every cached score, or one model's (run folders are not touched).

    Examples: contamscope cache clear --yes; contamscope cache clear --model hf:./old-model
    """
    if converted:
        if cache_dir is not None or model is not None:
            raise ConfigError(
                f"--converted deletes the converted model copies in {model_cache_dir()}, which "
                f"no {'--cache-dir' if cache_dir is not None else '--model'} chooses (the "
                "environment's CONTAMSCOPE_MODEL_DIR or CONTAMSCOPE_CACHE_DIR does): give "
                "--converted alone"
            )
        _clear_converted(yes)
        return
    path = cache_path(cache_dir)
    if _no_cache(path):
        console.print(f"{path}: nothing to clear")
        return
    if model is not None:
        _clear_model(path, model, yes)
        return
    if not yes and not _confirm(f"delete all cached scores in {path}?"):
        err_console.print("nothing deleted")
        raise typer.Exit(1)
    try:
        cache = ScoreCache(path)
        held = cache.info()
        cache.clear()
    except StoreError as exc:  # not a readable cache (damaged, other schema): remove the file
        if path.is_dir() or not exc.replaceable:
            raise
        for p in sqlite_files(path):
            try:
                p.unlink(missing_ok=True)
            except OSError as gone:
                raise StoreError(f"{p}: cannot remove it ({gone.strerror}); {exc}") from None
        why = str(exc).split(": ", 1)[-1].split(";")[0]  # without the path and the advice
        console.print(f"removed {path}, which was {why}")
        return
    console.print(f"deleted {_amount(held.scores, held.statistics)} from {path}")


@app.command("repair")
@user_errors
def repair(cache_dir: Path | None = CacheDir) -> None:
    """Salvage the readable scores of a damaged cache file into a new one.

    In a file SQLite finds sound, rows whose values the cache never writes (cut short, or
    written by something else) are taken out instead, to be computed again.

    Run it while no run uses the cache; the damaged file is kept beside it as
    scores.sqlite.damaged.

    Example: contamscope cache repair --cache-dir /shared/contamscope-cache
    """
    from ..store.repair import repair_cache

    path = cache_path(cache_dir)
    if _no_cache(path):
        console.print(f"{path}: no cache yet; nothing to repair")
        return
    report = repair_cache(path)
    names = {"scores": "score", "blobs": "stored statistic", "models": "model name"}
    if report.sound:
        if report.removed:
            removed = ", ".join(
                plural(n, f"malformed {names.get(t, 'model spec')} row")
                for t, n in report.removed.items()
            )
            console.print(
                f"{path}: no damaged pages (SQLite's quick_check passes); removed {removed}: "
                "values the cache never writes (a score or statistic is computed again when a "
                "run needs it, a model's name written again by its next run)",
                highlight=False,
            )
        else:
            console.print(f"{path}: no damage found (SQLite's quick_check passes); nothing changed")
        if report.unread_wal is not None:  # (said "no damage" of what it never read; review QA)
            console.print(
                f"  not checked: {report.unread_wal.name}, scores written since the last "
                "checkpoint, which SQLite cannot read in a read-only folder"
            )
        return
    kept = ", ".join(plural(report.kept.get(t, 0), w) for t, w in names.items())
    counts = list(report.lost.values())
    if None in counts:
        lost = "an unknown number of rows (the ends of a table and its index are damaged)"
    else:
        lost = plural(sum(c for c in counts if c is not None), "row")
        if any(report.lost[t] for t in report.bounds):  # the index was damaged too
            lost = f"at most {lost} (the key index is damaged too: unused row ids count)"
    console.print(
        f"repaired {path}: kept {kept}; "
        + (
            f"lost {lost} on damaged pages (their scores are computed again when a run needs them)"
            if any(c != 0 for c in counts)
            else "every row was read"
        )
        + f"\nthe damaged file is kept as {report.damaged_copy}: delete it when satisfied",
        highlight=False,
    )


Models = typer.Option(
    None,
    "--model",
    "-m",
    help="Only this model's entries: its spec as given to the run, or the model column of "
    "`cache info` (all its set-ups), or one set-up by its set-up column (repeat for several; "
    "default: every model's).",
)


def _cache_file(path: Path) -> Path:
    """A cache file given as itself or as the folder that holds it (a --cache-dir)."""
    return path / "scores.sqlite" if path.is_dir() else path


def _reason(exc: StoreError) -> str:
    """What is wrong, without the path and the advice (which is for one's own cache: removing
    it, or --no-cache, makes no sense for a file being copied)."""
    return exc.problem or str(exc).split(": ", 1)[-1]


def _partials(target: Path) -> list[Path]:
    """Files an export to ``target`` left behind when it was killed (its process is gone)."""
    stale = []
    for p in target.parent.glob(f".{target.name}.*.partial*"):
        pid = p.name[len(target.name) + 2 :].split(".")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            stale.append(p)
        except OSError:  # alive, another user's
            pass
    return stale


def _confirm(question: str) -> bool:
    """``typer.confirm(question)``; a closed stdin (``<&-``) is no answer, as end of input is
    ("aborted", exit 1: it was a RuntimeError's traceback; locale QA)."""
    if sys.stdin is None:
        raise typer.Abort
    return typer.confirm(question)


@contextlib.contextmanager
def _stoppable(what: str) -> Iterator[None]:
    """Ctrl-C, and SIGTERM (``kill``, a scheduler's time limit) alike, end the command with
    "interrupted; ``what``" and exit 130 after unwinding (``finally`` removes what was half
    written; a transaction rolls back)."""

    try:
        with sigterm_as_interrupt():
            yield
    except KeyboardInterrupt:
        err_console.print(f"interrupted; {what}", highlight=False)
        sys.exit(EXIT_INTERRUPTED)


@app.command("export")
@user_errors
def export(
    file: str = typer.Argument(
        ...,
        metavar="FILE",
        help="The new cache file to write, or a folder (an existing one, or a name ending in "
        "/) to write scores.sqlite in, usable as another machine's --cache-dir.",
    ),
    cache_dir: Path | None = CacheDir,
    model: list[str] | None = Models,
) -> None:
    """Copy the cached scores (all, or some models') into a new cache file, to share them.

    To take them to another machine or a team's folder: `cache import` adds them to a cache
    there.

    Scores are keyed by content: they are reused wherever the same model set-up scores the
    same text (the bundled models, hub ids, served models; a local model folder at the same
    path with the same files).

    Examples: contamscope cache export llama-scores.sqlite --model hf:meta-llama/Llama-3.2-1B;
    contamscope cache export /mnt/team/contamscope-cache/
    """
    path = cache_path(cache_dir)
    if _no_cache(path):
        raise ConfigError(f"{path}: no cache yet; nothing to export")
    folder = file.endswith(("/", os.sep)) or Path(file).is_dir()
    target = Path(file) / "scores.sqlite" if folder else Path(file)
    if target.exists() or target.is_symlink():
        raise ConfigError(f"{target}: exists; give a new file name (nothing written)")
    make = folder and not target.parent.exists() and target.parent.parent.is_dir()
    if not target.parent.is_dir() and not make:
        above = next((p for p in target.parents if p.exists()), None)  # (a file said "no such
        if above is not None and not above.is_dir():  # folder"; error-path QA)
            raise ConfigError(f"{above}: is a file, not a folder (nothing written)")
        raise ConfigError(f"{target.parent}: no such folder (nothing written)")
    if not os.access(target.parent if not make else target.parent.parent, os.W_OK):
        raise ConfigError(f"{target.parent}: cannot write there (nothing written)")
    source = ScoreCache(path, read_only=True)
    say_unread_wal(source)
    chosen = None if not model else [m.fingerprint for m in _chosen(source, model)]
    if make:
        target.parent.mkdir()
    for stale in _partials(target):  # an earlier export killed with SIGKILL
        stale.unlink(missing_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        with _stoppable("nothing written"):
            out = ScoreCache(partial, read_only=False)
            copied = out.copy_from(source, chosen)
            out.single_file()
            out.close()
            os.replace(partial, target)
    except StoreError as exc:
        if str(partial) not in str(exc):
            raise
        raise StoreError(f"{target}: {_reason(exc)}; nothing written") from None
    finally:
        for p in sqlite_files(partial):
            p.unlink(missing_ok=True)
        if make and not target.exists():
            target.parent.rmdir()
    hint = (
        f"{shell(target.parent.name + '/')} (or use the folder as --cache-dir)"
        if folder
        else shell(target.name)
    )
    console.print(
        f"exported {_copied(copied)} to {target} ({target.stat().st_size / 1e6:.1f} MB); "
        f"on the other machine: contamscope cache import {hint}",
        highlight=False,
    )


@app.command("import")
@user_errors
def import_(
    source: Path = typer.Argument(
        ...,
        metavar="SOURCE",
        help="A cache file (from `cache export`, or another machine's scores.sqlite) or the "
        "cache folder that holds it.",
    ),
    cache_dir: Path | None = CacheDir,
    model: list[str] | None = Models,
) -> None:
    """Add the scores of another cache file to this cache (entries it holds already are kept).

    Later runs reuse them instead of computing them.

    Examples: contamscope cache import llama-scores.sqlite;
    contamscope cache import /mnt/team/contamscope-cache --model smollm2
    """
    src_path = _cache_file(source)
    if not src_path.is_file():
        raise ConfigError(f"{source}: no such cache file")
    try:
        src = ScoreCache(src_path, read_only=True)
    except StoreError as exc:  # its advice (remove it, --no-cache) is for one's own cache
        raise StoreError(f"{src_path}: {_reason(exc)}; nothing imported") from None
    say_unread_wal(src)
    chosen = None if not model else [m.fingerprint for m in _chosen(src, model)]
    path = cache_path(cache_dir)
    try:
        with _stoppable("nothing imported"):  # one transaction: an interrupted import adds nothing
            copied = ScoreCache(path, read_only=False).copy_from(src, chosen)
    except StoreError as exc:  # its advice (--no-cache) is a run's: import has no such option
        if exc.replaceable:
            raise
        if str(exc).startswith(f"{src.path}:"):  # the source's pages fail to read (it named
            raise StoreError(  # this cache, which was sound, and told to check permissions)
                f"{src_path}: {_reason(exc)}; nothing imported (a damaged copy: export it "
                "again, or salvage it with `contamscope cache repair --cache-dir DIR`, the "
                "file as DIR/scores.sqlite)"
            ) from None
        raise StoreError(
            f"{path}: {_reason(exc)}; nothing imported (check the cache's permissions, or "
            "import into another --cache-dir)"
        ) from None
    console.print(f"imported {_copied(copied)} from {src_path} into {path}", highlight=False)


def _copied(c: Copied) -> str:
    text = f"{plural(c.scores, 'score')}"
    if c.blobs:
        text += f" and {plural(c.blobs, 'stored statistic')}"
    text += f" of {plural(c.setups, 'model set-up')}"
    if c.present:  # (the statistics were counted as scores: "740 already there")
        there = plural(c.present - c.present_blobs, "score")
        if c.present_blobs:
            there += f" and {plural(c.present_blobs, 'stored statistic')}"
        text += f" ({there} already there, kept)"
    return text


def _clear_converted(yes: bool) -> None:
    import shutil

    root, found = model_cache_dir(), _converted()
    if found is None:
        console.print(f"{root}: no converted model copies")
        return
    what = f"{plural(found[0], 'file')} ({found[1] / 1e6:.1f} MB) of converted model copies"
    if not yes and not _confirm(f"delete {what} in {root}?"):
        err_console.print("nothing deleted")
        raise typer.Exit(1)
    for child in _copies():
        try:
            shutil.rmtree(child)
        except OSError as exc:
            raise StoreError(f"{child}: cannot remove it ({exc.strerror or exc})") from None
    console.print(f"deleted {what} in {root}")


_LISTED = 10
"""Model names an error lists (a cache can hold hundreds)."""


def _chosen(cache: ScoreCache, models: list[str]) -> list[ModelSetup]:
    """The set-ups of ``cache`` that ``models`` name: a spec as a run gave it, or the model
    column of `cache info` (all its set-ups), or one set-up by its fingerprint (whole, or as
    the set-up column shows it); a name that matches none is an error naming the known ones."""
    setups = cache.models()
    chosen = []
    for model in models:
        found = [
            m
            for m in setups
            if model in (m.name, m.fingerprint, m.fingerprint.partition("|")[2])
            or model in m.spellings
        ]
        if not found:
            names = sorted({m.name for m in setups})
            known = ", ".join(names[:_LISTED]) or "none"
            if len(names) > _LISTED:
                known += f", and {len(names) - _LISTED} more: see `contamscope cache info`"
            raise ConfigError(
                f"--model {model}: no such model set-up in {cache.path} (models: {known})"
            )
        chosen += [m for m in found if m not in chosen]
    return chosen


def _clear_model(path: Path, model: str, yes: bool) -> None:
    cache = ScoreCache(path)
    chosen = _chosen(cache, [model])
    n_stats = sum(m.statistics for m in chosen)
    setups = f" ({len(chosen)} set-ups)" if len(chosen) > 1 else ""
    amount = _amount(sum(m.entries for m in chosen) - n_stats, n_stats)
    what = f"{amount} of {model}{setups}"
    if not yes and not _confirm(f"delete {what} from {path}?"):
        err_console.print("nothing deleted")
        raise typer.Exit(1)
    cache.clear([m.fingerprint for m in chosen])
    console.print(f"deleted {what} from {path}")


def _amount(scores: int, statistics: int) -> str:
    """'3 scores', or '3 scores and 2 stored statistics' (the statistics were counted as
    scores; QA).

    >>> _amount(3, 0), _amount(0, 1)
    ('3 scores', '0 scores and 1 stored statistic')
    """
    stats = f" and {plural(statistics, 'stored statistic')}" if statistics else ""
    return plural(scores, "score") + stats
