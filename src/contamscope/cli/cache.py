"""`contamscope cache info|clear|repair`: see and manage the score cache."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..errors import ConfigError, StoreError
from ..paths import check_output_folder, default_score_db, model_cache_dir
from ..store import ScoreCache
from ..store.cache import sqlite_files
from ..wording import plural
from .common import console, err_console, user_errors

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
        return default_score_db()
    return check_output_folder(cache_dir, "--cache-dir") / "scores.sqlite"


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
            f"converted model copies: {model_cache_dir()} ({plural(files, 'file')}, "
            f"{size / 1e6:.1f} MB; `contamscope cache clear --converted` deletes them, the next "
            "run converts again)",
            highlight=False,
        )
    if not path.exists():
        console.print(f"{path}: empty (no cache yet)")
        return
    cache = ScoreCache(path)
    c = cache.info()
    console.print(
        f"path: {c.path}{' (read-only)' if cache.read_only else ''}\nscores: {c.entries:,}\n"
        f"model set-ups: {c.models}\n"
        f"size: {c.size_bytes / 1e6:.1f} MB"
    )
    setups = cache.models()
    if setups:
        t = Table(title="model set-ups (`contamscope cache clear --model MODEL` deletes one)")
        for col in ("model", "set-up (fingerprint)", "entries", "last used"):
            t.add_column(col, justify="right" if col == "entries" else "left", overflow="fold")
        for m in setups:
            setup = m.fingerprint.partition("|")[2]
            t.add_row(m.name, setup, f"{m.entries:,}", m.last_used or "-")
        console.print(t)


def _converted() -> tuple[int, int] | None:
    """(files, bytes) of the converted model copies, or None when there are none."""
    root = model_cache_dir()
    if not root.is_dir():
        return None
    files = [p for p in root.rglob("*") if p.is_file()]
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
        "column of `cache info`.",
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
        _clear_converted(yes)
        return
    path = cache_path(cache_dir)
    if not path.exists():
        console.print(f"{path}: nothing to clear")
        return
    if model is not None:
        _clear_model(path, model, yes)
        return
    if not yes and not typer.confirm(f"delete all cached scores in {path}?"):
        err_console.print("nothing deleted")
        raise typer.Exit(1)
    try:
        n = ScoreCache(path).clear()
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
    console.print(f"deleted {plural(n, 'score')} from {path}")


@app.command("repair")
@user_errors
def repair(cache_dir: Path | None = CacheDir) -> None:
    """Salvage the readable scores of a damaged cache file into a new one (run it while no run
    uses the cache); the damaged file is kept beside it as scores.sqlite.damaged.

    Example: contamscope cache repair --cache-dir /shared/contamscope-cache
    """
    from ..store.repair import repair_cache

    path = cache_path(cache_dir)
    if not path.exists():
        console.print(f"{path}: no cache yet; nothing to repair")
        return
    report = repair_cache(path)
    if report.sound:
        console.print(f"{path}: no damage found (SQLite's quick_check passes); nothing changed")
        return
    names = {"scores": "score", "blobs": "stored statistic", "models": "model name"}
    kept = ", ".join(plural(report.kept.get(t, 0), w) for t, w in names.items())
    counts = list(report.lost.values())
    if None in counts:
        lost = "an unknown number of rows (the ends of a table and its index are damaged)"
    else:
        lost = plural(sum(c for c in counts if c is not None), "row")
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


def _clear_converted(yes: bool) -> None:
    import shutil

    root, found = model_cache_dir(), _converted()
    if found is None:
        console.print(f"{root}: no converted model copies")
        return
    what = f"{plural(found[0], 'file')} ({found[1] / 1e6:.1f} MB) of converted model copies"
    if not yes and not typer.confirm(f"delete {what} in {root}?"):
        err_console.print("nothing deleted")
        raise typer.Exit(1)
    for child in root.iterdir():
        try:
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        except OSError as exc:
            raise StoreError(f"{child}: cannot remove it ({exc.strerror or exc})") from None
    console.print(f"deleted {what} in {root}")


def _clear_model(path: Path, model: str, yes: bool) -> None:
    cache = ScoreCache(path)
    setups = cache.models()
    chosen = [m for m in setups if model == m.name or model in m.spellings]
    if not chosen:
        known = ", ".join(sorted({m.name for m in setups}))
        raise ConfigError(f"--model {model}: no such model set-up in {path} (models: {known})")
    n_entries = sum(m.entries for m in chosen)
    what = f"{plural(n_entries, 'score')} of {model} (cached)"
    if not yes and not typer.confirm(f"delete {what} from {path}?"):
        err_console.print("nothing deleted")
        raise typer.Exit(1)
    n = cache.clear([m.fingerprint for m in chosen])
    console.print(f"deleted {plural(n, 'score')} of {model} from {path}")
