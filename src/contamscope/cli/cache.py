"""`contamscope cache info|clear`: see and manage the score cache."""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import StoreError
from ..paths import check_output_folder, default_score_db
from ..store import ScoreCache
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
    if not path.exists():
        console.print(f"{path}: empty (no cache yet)")
        return
    c = ScoreCache(path).info()
    console.print(
        f"path: {c.path}\nscores: {c.entries:,}\nmodel set-ups: {c.models}\n"
        f"size: {c.size_bytes / 1e6:.1f} MB"
    )


@app.command("clear")
@user_errors
def clear(
    cache_dir: Path | None = CacheDir,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
) -> None:
    """Delete every cached score (run folders are not touched).

    Example: contamscope cache clear --yes
    """
    path = cache_path(cache_dir)
    if not path.exists():
        console.print(f"{path}: nothing to clear")
        return
    if not yes and not typer.confirm(f"delete all cached scores in {path}?"):
        err_console.print("nothing deleted")
        raise typer.Exit(1)
    try:
        n = ScoreCache(path).clear()
    except StoreError as exc:  # not a readable cache (damaged, other schema): remove the file
        if path.is_dir():
            raise
        for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            p.unlink(missing_ok=True)
        console.print(f"removed {path}, which was not a usable score cache ({exc})")
        return
    console.print(f"deleted {n:,} scores from {path}")
