"""Where contamscope keeps its caches (scores, converted models).

``CONTAMSCOPE_CACHE_DIR`` overrides the default user cache directory;
``CONTAMSCOPE_MODEL_DIR`` the converted-model folder.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Any

__all__ = [
    "cache_root",
    "default_score_db",
    "model_cache_dir",
    "make_folder",
    "check_output_file",
    "check_output_folder",
    "write_text_atomic",
    "process_gone",
    "remove_quietly",
    "cache_dir_name",
]


def cache_root() -> Path:
    env = os.environ.get("CONTAMSCOPE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("contamscope"))


def cache_dir_name(folder: Path) -> str:
    """How a message names the score cache's folder: ``--cache-dir``, or where the folder is
    the default, ``CONTAMSCOPE_CACHE_DIR`` when that variable set it (an error named an option
    the user never gave: QA), else the user cache folder."""
    if Path(folder).expanduser() != cache_root():
        return "--cache-dir"
    return "CONTAMSCOPE_CACHE_DIR" if os.environ.get("CONTAMSCOPE_CACHE_DIR") else "cache folder"


def default_score_db() -> Path:
    """The SQLite score cache used when no ``--cache-dir`` is given."""
    return cache_root() / "scores.sqlite"


def model_cache_dir() -> Path:
    """Converted model copies (e.g. the bundled GGUF as safetensors).

    ``CONTAMSCOPE_MODEL_DIR`` overrides it (tests share one converted copy per session).
    """
    env = os.environ.get("CONTAMSCOPE_MODEL_DIR")
    return Path(env).expanduser() if env else cache_root() / "models"


def _no_file_above(path: Path, what: str) -> None:
    """No existing file stands where one of ``path``'s parent folders should be."""
    from .errors import StoreError

    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise StoreError(f"{what} {path}: {parent} is a file, not a folder")


def check_output_file(path: Path, what: str = "--out") -> Path:
    """``path`` can be written as a file: not a folder, and no file where a parent folder
    should be (checked before any work, so a bad --out fails at once)."""
    from .errors import StoreError

    path = Path(path)
    if path.is_dir():
        raise StoreError(f"{what} {path}: is a folder; give a file name")
    special = what != RUN_FOLDER and not_a_plain_file(path)
    if special:
        raise StoreError(f"{what} {path}: is {special}, not a file; give a file name")
    if what != RUN_FOLDER and path.name in RUN_FILES and (path.parent / "settings.json").exists():
        raise StoreError(
            f"{what} {path}: is a file of the run in {path.parent} (it would be overwritten); "
            "give another file name"
        )
    _no_file_above(path, what)
    return path


def not_a_plain_file(path: Path) -> str | None:
    """What ``path`` is where an output file cannot replace it: a name under /dev or /proc
    (``/dev/stdout``, a link: as root, a report renamed over it made it a regular file; locale
    QA), or, through links, a device, named pipe or socket (written through, a closed stdout's
    number reused by another file got the report: review QA); None for a file, a folder or
    nothing there.

    >>> not_a_plain_file(Path("/dev/stdout")), not_a_plain_file(Path("/no/such/file"))
    ('a device or process name (/dev, /proc)', None)
    """
    if os.name == "posix" and path.absolute().parts[1:2] in (("dev",), ("proc",)):
        return "a device or process name (/dev, /proc)"
    try:
        return special_file(os.stat(path).st_mode)
    except (OSError, ValueError):
        return None


def special_file(mode: int) -> str | None:
    """What a file of ``mode`` (``st_mode``) is when it holds no data of its own: "a named
    pipe", "a device" or "a socket"; None for a regular file or a folder."""
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


RUN_FOLDER = "run folder"
"""What a run folder's own writes are called (the one writer of its files)."""
RUN_FILES = frozenset(
    {
        "settings.json",
        "summary.json",
        "items.jsonl",
        "split.json",
        "train_log.json",  # (a validation's: compare and leaderboard --out replaced it; QA)
        "validation.png",
        "validation-roc.png",
        "pcr_heatmap.png",
    }
)
"""The files a run folder holds: no other output may be written over them."""


def check_output_folder(path: Path, what: str = "--out") -> Path:
    """``path`` can be (or already is) a folder: checked before any work, nothing created."""
    from .errors import StoreError

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise StoreError(f"{what} {path}: is a file, not a folder")
    _no_file_above(path, what)
    return path


def make_folder(path: Path, what: str = "--out") -> Path:
    """Create folder ``path`` (and its parents), or say in one line why it cannot be one: a file
    of that name, a file where a parent folder should be, no permission."""
    from .errors import StoreError

    path = check_output_folder(path, what)
    for folder in (path, *path.parents):  # (mkdir said only "File exists"; locale QA)
        if folder.is_symlink() and not folder.exists():
            where = "is" if folder == path else f"is under {folder}, which is"
            raise StoreError(
                f"{what} {path}: {where} a link to {os.readlink(folder)}, which does not exist"
            )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"{what} {path}: cannot create it ({exc.strerror})") from None
    return path


NO_LINK_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


def open_unlinked(path: Path, mode: str = "w") -> IO[Any]:
    """``path`` opened to write (``mode`` "w", "wb" or "a"; text is UTF-8), never through a
    symbolic link: a run folder from elsewhere may hold one out of it (``report.html.tmp`` ->
    ``~/.ssh/authorized_keys`` made ``contamscope report`` write there; security QA). "w" and
    "wb" create the file afresh: a file or link of that name is removed first, and one that
    appears meanwhile is refused (``O_EXCL``); "a" refuses a link (``O_NOFOLLOW``)."""
    flags = os.O_WRONLY | os.O_CREAT | NO_LINK_FLAGS
    if mode == "a":
        flags |= os.O_APPEND
    else:
        path.unlink(missing_ok=True)
        flags |= os.O_EXCL
    fd = os.open(path, flags, 0o666)
    try:
        return open(fd, mode, encoding=None if "b" in mode else "utf-8")
    except BaseException:
        os.close(fd)
        raise


def temporary_beside(path: Path) -> Path:
    """A name for the temporary file written before it is renamed to ``path``: in its folder,
    hidden, and this writer's own (process and a random part). A fixed ``NAME.tmp`` was shared
    by two commands writing one file at once (two leaderboards, ``report`` and ``reanalyse``):
    each removed the other's, one renamed a half-written file into place and the other failed
    with "No such file or directory" (concurrency QA)."""
    name = os.fsdecode(os.fsencode(path.name)[:200])  # a name near the 255-byte limit stays
    # under it (cut by bytes: 77 Chinese characters were 231 bytes; review QA)
    return path.with_name(f".{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


def write_text_atomic(path: Path, text: str, what: str = "--out") -> Path:
    """Write ``text`` to ``path`` through a temporary file renamed over it (a reader never sees
    half a file; a link of either name is replaced, not written through); on failure, one
    line naming ``what`` and no temporary file left behind."""
    from .errors import StoreError

    path = check_output_file(path, what)
    make_folder(path.parent, what)
    try:
        replace_text(path, text)
    except OSError as exc:
        raise StoreError(f"{what} {path}: cannot write it ({exc.strerror})") from None
    return path


def replace_text(path: Path, text: str | bytes) -> None:
    """Write ``text`` (or bytes) to ``path`` (a file of a run or of its folder) through a
    temporary file renamed over it, as :func:`write_text_atomic` does, without its checks of a
    user's --out; an OSError leaves no temporary file behind. A file rewritten keeps its
    permissions (a ``chmod 640`` summary became 644 at ``reanalyse``; locale QA)."""
    tmp = temporary_beside(path)
    try:
        with open_unlinked(tmp, "wb" if isinstance(text, bytes) else "w") as fh:
            with contextlib.suppress(OSError, AttributeError):  # (no os.fchmod on Windows)
                old = os.lstat(path)
                if stat.S_ISREG(old.st_mode):
                    os.fchmod(fh.fileno(), old.st_mode & 0o777)
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        remove_quietly(tmp)
        raise


def process_gone(pid: int) -> bool:
    """True where no process on this host has the id ``pid``: the writer of a temporary file or
    folder named with it was killed, and what it left can go. False for this process, a live
    one, another user's (which cannot be signalled) or a number no process can have."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False
    return False


def remove_quietly(path: Path) -> None:
    """Remove a temporary file left by a failed write, if it is there and can go: on a
    read-only file system its removal fails as the write did, and that error hid the write's
    one line under a traceback (QA)."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


def relative_name(path: Path, base: Path | str) -> str:
    """``path`` as named from the folder ``base`` (a page or card written there names the run
    folders beside it so, wherever the two are copied), as given where there is no relative
    path (another drive).

    >>> relative_name(Path("/w/runs/a"), "/w/cards"), relative_name(Path("/w/s/p"), "/w/s")
    ('../runs/a', 'p')
    """
    try:
        return Path(os.path.relpath(Path(path).resolve(), Path(base).resolve())).as_posix()
    except ValueError:
        return str(path)


def save_figure(fig: Any, path: Path, **options: Any) -> None:
    """``fig.savefig(path, **options)`` (the format from the suffix, else PNG), through
    :func:`replace_text`: matplotlib opened the path itself and followed a link there (a run
    folder's ``pcr_heatmap.png`` -> a file outside it was overwritten by ``reanalyse``; review
    QA)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".").lower() or "png", **options)
    replace_text(Path(path), buf.getvalue())


def refuse_special(path: Path) -> None:
    """A file of a run folder to read must be a regular file: a FIFO hung report and
    leaderboard, and a link to /dev/zero filled the memory (security QA). A missing file is
    the caller's to say."""
    from .errors import StoreError

    if path.exists() and not path.is_file():
        raise StoreError(f"{path}: not a regular file (a device, a pipe or a folder)")
