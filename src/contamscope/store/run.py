"""Run folders: settings, per-item records appended as they finish, and the summary.

``items.jsonl`` is appended and fsynced after each batch, so a killed run loses at most the batch
in flight; a torn last line (killed mid-write) is dropped on resume.
"""

from __future__ import annotations

import contextlib
import functools
import html
import inspect
import json
import math
import os
import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

from ..errors import ConfigError, StoreError, note
from ..paths import (
    NO_LINK_FLAGS,
    RUN_FOLDER,
    make_folder,
    open_unlinked,
    process_gone,
    refuse_special,
    remove_quietly,
    replace_text,
    temporary_beside,
    write_text_atomic,
)
from ..wording import TOO_DEEP, first_few, json_error, plural, shell

__all__ = [
    "RunDir",
    "RunFolder",
    "as_run_dir",
    "folder_path",
    "interrupted_reanalysis",
    "RUN_SCHEMA_VERSION",
    "analysis_upgrade",
    "read_records",
    "refuse_busy",
    "releases_run_dir",
]

RUN_SCHEMA_VERSION = 1
LOCK_FILE = ".lock"
"""Held (flock) by the RunDir writing the folder; released when it is closed (the pipelines
close it when their run ends) or its process ends, even killed."""
REANALYSING = ".reanalysing.json"
"""Written (with the settings asked for) before a re-analysis rewrites a folder's records,
settings and summary, removed after the summary: its presence is a re-analysis killed between
those writes, whose records and summary may follow different settings (a report of such a
folder mixed both analyses without a word; kill QA). :func:`interrupted_reanalysis` reads it."""
REPORT = "report.html"
"""A run's HTML report, where ``contamscope report`` writes it by default."""
_HELD: dict[str, int] = {}
"""Run folders this process holds: path -> id of the RunDir holding it."""


def _release(key: str, owner: int, fd: int) -> None:
    if _HELD.get(key) == owner:
        del _HELD[key]
    os.close(fd)  # drops the flock


REPLACE_HINT = (
    "use another --out, or --overwrite to replace it (what the score cache holds is not "
    "computed again)"
)
"""How a refused re-run with other settings goes on (runs and sweeps say it alike)."""


def refuse_busy(path: Path) -> None:
    """Refuse at once a run folder another process is writing: a command checks this before
    its model loads, where the run's own lock said so only after the load (a minute in: QA).
    (The lock taken when the run opens still decides; this only says it early.)"""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        return
    try:
        fd = os.open(Path(path) / LOCK_FILE, os.O_RDONLY)
    except OSError:  # no lock file (no run yet), or one this user cannot read: the run decides
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise _busy(Path(path)) from None
    finally:
        os.close(fd)  # (closing it also lets go of the lock it took)


def refuse_foreign(path: Path, overwrite: bool = False, method: str | None = None) -> None:
    """Refuse a folder that holds no run and is not empty (hidden files aside), or (``method``
    given) one holding another method's run, as the run itself does when it opens: a command
    checks this before its model loads (said after the load, 30 s in, and after a Ray cluster
    had started; docs and re-test QA). ``overwrite``: accepted."""
    path = Path(path)
    if overwrite or not path.is_dir():
        return
    if (path / "settings.json").exists():
        held = RunDir(path).stored_settings() if method is not None else None
        if isinstance(held, dict) and held.get("method") != method:
            raise _other_method(path, held.get("method"), method)
        return
    try:
        names = sorted(p.name for p in path.iterdir() if not p.name.startswith("."))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if names:
        raise StoreError(
            f"{path} is not a contamscope run folder and not empty (it holds "
            f"{first_few(names)}); "
            "give a new or empty folder as --out (--overwrite writes into it anyway)"
        )


def _other_method(path: Path, held: Any, method: Any) -> StoreError:
    return StoreError(
        f"{path} holds a {held or 'different'} run, not a {method} one; use another --out "
        "(--overwrite deletes it)"
    )


def _busy(path: Path) -> StoreError:
    return StoreError(
        f"{path}: another contamscope process is writing this run folder; wait for it to "
        "finish, then re-run the command (to score elsewhere meanwhile, give another --out)"
    )  # (reanalyse, which has no --out, was told to use another one: concurrency QA)


class RunDir:
    """An output folder for one run of one method.

    :meth:`open` holds the folder (an flock on ``.lock``) until :meth:`close`, the end of a
    ``with`` block, or the object's end; the pipelines close it when their run ends.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.items_path = self.path / "items.jsonl"
        self.settings_path = self.path / "settings.json"
        self.summary_path = self.path / "summary.json"
        self._held: weakref.finalize | None = None
        self._reanalysing = False

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r}{', held' if self._held is not None else ''})"

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let other runs write the folder again (a no-op when not held)."""
        if self._held is not None:
            self._held()
            self._held = None

    def open(
        self,
        settings: dict[str, Any],
        *,
        overwrite: bool = False,
        upgrades: Iterable[dict[str, Any]] = (),
        complete: Callable[[dict[str, Any]], bool] | None = None,
        renamed: Mapping[str, str] | None = None,
        mend: bool = True,
    ) -> dict[str, dict[str, Any]]:
        """Prepare the folder; return records already finished (resume) keyed by item id
        (``complete``: whether a stored record is one the method can read; others are scored
        again). ``mend`` False (a re-analysis, which scores nothing): ``items.jsonl`` is read
        as the run would read it but not rewritten (it took out a record and then refused the
        folder for the record it lacked, leaving a summary that counted it; cross-reader QA).

        A folder holding a run with different settings is refused unless ``overwrite``, or
        unless its settings are among ``upgrades`` (older settings whose records the caller
        completes): ``settings`` then replace them. ``renamed``: see :meth:`stored_settings`.
        """
        make_folder(self.path)
        self._lock()
        try:
            return self._prepare(settings, overwrite, upgrades, complete, renamed, mend)
        except BaseException:  # refused (other settings, ...): the folder is free again
            self.close()
            raise

    def hold(self) -> RunDir:
        """Create the folder and hold it (as :meth:`open` does) without a run's settings: a
        folder of runs, such as a sweep's, that one process at a time may write."""
        make_folder(self.path)
        self._lock()
        return self

    def _prepare(
        self,
        settings: dict[str, Any],
        overwrite: bool,
        upgrades: Iterable[dict[str, Any]],
        complete: Callable[[dict[str, Any]], bool] | None,
        renamed: Mapping[str, str] | None,
        mend: bool = True,
    ) -> dict[str, dict[str, Any]]:
        if self.settings_path.exists() and not overwrite:
            old = self.stored_settings(renamed) or {}
            if old.get("method") != settings.get("method"):
                raise _other_method(self.path, old.get("method"), settings.get("method"))
            # (a run that stopped before its first record, e.g. refused by the server, left
            # only its settings: nothing is lost by starting the folder with these)
            if not any(_same_run(old, s) for s in [settings, *upgrades]) and self._holds_records():
                items = ""
                if _without_digest(old) == _without_digest(settings):
                    items = (  # the hashes alone did not say what to look for
                        ": the items differ, other items or the same ones in another order "
                        "(a run's items are compared in order)"
                    )
                raise StoreError(
                    f"{self.path} holds a run with other settings ({_changes(old, settings)})"
                    f"{items}; " + REPLACE_HINT
                )
        elif overwrite:
            for p in (self.items_path, self.summary_path):
                p.unlink(missing_ok=True)
        else:
            refuse_foreign(self.path)
        self._atomic_write(self.settings_path, settings)
        return self._read_records(complete, mend)

    def _holds_records(self) -> bool:
        """Whether the folder holds a summary or any record (a line that is not blank)."""
        if self.summary_path.exists():
            return True
        try:
            with self.items_path.open("rb") as f:
                return any(line.strip() for line in f)
        except FileNotFoundError:
            return False

    def _lock(self) -> None:
        """Hold the folder: a second run writing it (another process, or another RunDir of
        this one) would score everything again and append every record twice."""
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            return
        key = str(self.path.resolve())
        if self._held is not None and self._held.alive:
            return
        if key in _HELD:
            raise StoreError(
                f"{self.path}: this process is writing this run folder already (another RunDir "
                "of it is open): close() that one first, or use another --out"
            )
        try:
            # (not through a link: the folder may come from elsewhere)
            fd = os.open(self.path / LOCK_FILE, os.O_CREAT | os.O_RDWR | NO_LINK_FLAGS, 0o644)
        except OSError as exc:  # a read-only file system, a folder of another user
            raise StoreError(f"{self.path}: cannot write it ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise _busy(self.path) from None
        _HELD[key] = id(self)
        self._held = weakref.finalize(self, _release, key, id(self), fd)
        _remove_orphans(self.path)

    def stored_settings(self, renamed: Mapping[str, str] | None = None) -> dict[str, Any] | None:
        """The settings of the run this folder holds (None: no run yet). ``renamed``: model
        fingerprints an earlier contamscope version gave the models of this run, and their
        names now (:attr:`~contamscope.store.cache.CachedScorer.renamed`), put in their place."""
        if not self.settings_path.exists():
            return None
        try:
            refuse_special(self.settings_path)
            stored = json.loads(self.settings_path.read_text(encoding="utf-8"))
            if renamed and isinstance(stored, dict):
                stored = {
                    k: renamed.get(v, v) if isinstance(v, str) else v for k, v in stored.items()
                }
            return stored
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            why = TOO_DEEP if isinstance(exc, RecursionError) else "not UTF-8 text"
            if isinstance(exc, json.JSONDecodeError):
                why = json_error(exc)
            raise StoreError(  # (it said "use --overwrite" to reanalyse, which has none)
                f"{self.settings_path}: damaged ({why}); the command that wrote the folder, "
                "re-run with --overwrite, starts it anew"
            ) from None
        except OSError as exc:
            raise StoreError(
                f"{self.settings_path}: cannot read it ({exc.strerror or exc})"
            ) from None

    def finished_run(self, method: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The settings and summary of the finished ``method`` run this folder holds, for
        analysing it again; a one-line StoreError when it holds none, another method's or an
        unfinished one (no summary.json)."""
        settings = self.stored_settings()
        if settings is None and not self.path.exists():
            raise StoreError(f"{self.path}: no such run folder")
        if settings is None:
            raise StoreError(f"{self.path} holds no contamscope run (no settings.json)")
        if settings.get("method") != method:
            raise StoreError(
                f"{self.path} holds a {settings.get('method')} run, not a {method} run"
            )
        try:
            refuse_special(self.summary_path)
            summary = json.loads(self.summary_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise StoreError(
                f"{self.path}: the run is unfinished (no summary.json); re-run its {method} "
                "command to finish it"
            ) from None
        except RecursionError:
            raise StoreError(f"{self.summary_path}: {TOO_DEEP}") from None
        except (OSError, ValueError) as exc:
            raise StoreError(f"{self.summary_path}: cannot read it ({exc})") from None
        if not isinstance(summary, dict):
            raise StoreError(f"{self.summary_path}: not a run summary")
        return settings, summary

    def _read_records(
        self, complete: Callable[[dict[str, Any]], bool] | None, mend: bool = True
    ) -> dict[str, dict[str, Any]]:
        """Finished records by id. Dropped, so their items are scored again: a torn last line
        (a killed run), a damaged line and a record the method cannot read (``complete``); a
        record appended again for an id (a membership folder given the option orders
        afterwards rewrites its records so) replaces the earlier one in its place. The file
        is rewritten so."""
        if not self.items_path.exists():
            return {}
        refuse_special(self.items_path)
        done: dict[str, dict[str, Any]] = {}
        good: list[bytes] = []
        where: dict[str, int] = {}  # an id's line in good
        damaged = False
        unreadable: list[int] = []  # lines dropped mid-file (not a killed run's torn last one)
        try:
            with open(self.items_path, "rb") as fh:
                for line, raw in enumerate(fh, 1):
                    if not raw.endswith(b"\n"):
                        damaged = True  # torn write from a killed run: the last line only
                        break
                    if not raw.strip():  # a blank line: no record, none left out (it was
                        damaged = True  # said to be a damaged record scored again; QA)
                        continue
                    try:
                        rec = json.loads(raw)
                        rec_id = rec["id"]
                        if not isinstance(rec_id, str):  # (a list stopped the read with a
                            raise TypeError  # traceback at the lookup below; error-path QA)
                        usable = complete is None or complete(rec)
                    except (
                        json.JSONDecodeError,
                        UnicodeDecodeError,
                        KeyError,
                        TypeError,
                        RecursionError,
                    ):
                        usable = False
                    if not usable:
                        damaged = True  # dropped: its item is scored again; the good records
                        unreadable.append(line)  # after it are kept
                        continue
                    if rec_id in done:  # the later copy, in the earlier one's place
                        damaged = True
                        done[rec_id] = rec
                        good[where[rec_id]] = raw
                        continue
                    done[rec_id] = rec
                    where[rec_id] = len(good)
                    good.append(raw)
            if damaged and mend:
                replace_text(self.items_path, b"".join(good))
        except OSError as exc:
            raise StoreError(f"{self.items_path}: cannot read it ({exc.strerror or exc})") from None
        if unreadable:  # said, not silently mended: the file was damaged by something
            lines = first_few([str(n) for n in unreadable], 5)
            dropped = plural(len(unreadable), "damaged or unreadable record")
            then = (  # (a resume said "when re-run" of the items it was scoring; re-test QA)
                "this run scores their items again"
                if mend
                else "the command that scored the run scores their items again when re-run"
            )  # (reanalyse scores none: QA)
            note(
                f"{self.items_path}: {dropped} left out (line"
                f"{'s' if len(unreadable) > 1 else ''} {lines}); {then}",
            )
        return done

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        if not data:
            return
        try:
            with open_unlinked(self.items_path, "a") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:  # disk full: the records written before are kept
            raise StoreError(
                f"{self.items_path}: cannot write it ({exc.strerror or exc}); the items "
                "finished before are kept: re-run the same command to resume"
            ) from None

    def replace_records(self, records: Iterable[dict[str, Any]]) -> None:
        """Rewrite ``items.jsonl`` atomically (a method whose per-item results depend on the
        whole run, e.g. p-values against a reference set, adds them once every item is done)."""
        tmp = temporary_beside(self.items_path)
        try:
            with open_unlinked(tmp) as fh:
                fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.items_path)
        except OSError as exc:
            remove_quietly(tmp)
            raise StoreError(
                f"{self.items_path}: cannot write it ({exc.strerror or exc}); re-run the same "
                "command to finish"
            ) from None

    def write_settings(self, settings: dict[str, Any]) -> None:
        """Replace the settings of the run this (held) folder holds: a re-analysis whose
        records already follow them."""
        self._atomic_write(self.settings_path, settings)

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Replace ``summary.json``. Outside :meth:`reanalysing`, a run whose records and
        summary now follow its settings, so an interrupted re-analysis's marker goes.

        A ``report.html`` in the folder shows the summary it was built from: it is first
        replaced by a page that says so and how to write it again (the commands do, right
        after; a kill between the two writes, or a re-analysis from Python, left a report of
        the earlier analysis there, numbers the summary no longer held; QA)."""
        report = self.path / REPORT
        if report.is_file():
            with contextlib.suppress(OSError):  # (a folder that takes no write fails below)
                replace_text(report, _report_due_page(self.path))
        self._atomic_write(self.summary_path, summary)
        if not self._reanalysing:
            remove_quietly(self.path / REANALYSING)

    @contextlib.contextmanager
    def reanalysing(self, request: Mapping[str, Any]) -> Iterator[None]:
        """The writes of a re-analysis (records, settings, summary): the :data:`REANALYSING`
        marker, holding ``request`` (the settings asked for, those not None), is there until
        they all succeed; a kill or an error between them leaves it, for readers to refuse the
        folder and ``reanalyse`` to finish the work."""
        marker = self.path / REANALYSING
        asked = {k: v for k, v in request.items() if v is not None}
        self._atomic_write(marker, {"request": asked})
        self._reanalysing = True
        try:
            yield
        finally:
            self._reanalysing = False
        remove_quietly(marker)

    def with_earlier_timings(
        self, timing: dict[str, Any], model: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``timing`` (this command's) with ``earlier``: the timings of the commands that
        wrote this folder's summary before and scored something (oldest first), read from the
        summary it holds (a command interrupted before its summary left none).
        A resume of a finished run scores nothing; its summary said 0 s and lost the first
        run's speed (QA). Empty for a new folder or an unreadable summary.

        ``model`` (the backend's ``describe()``) adds where this command computed: its
        ``device`` and ``executor`` (``local`` or ``ray``), kept with its speed in a later
        command's ``earlier`` (a run begun on Ray and finished locally, or on another device,
        said only the last command's; QA)."""
        if model is not None:
            ran = model.get("executor")
            kind = ran.get("kind") if isinstance(ran, Mapping) else None
            timing = {
                **timing,
                **({"device": model["device"]} if "device" in model else {}),
                "executor": kind if isinstance(kind, str) else "local",
            }
        before = None
        try:
            if self.summary_path.is_file():  # (a FIFO there would hang the read)
                before = json.loads(self.summary_path.read_text(encoding="utf-8"))["timings"]
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            pass  # (no earlier timings to keep)
        earlier: list[dict[str, Any]] = []
        if isinstance(before, dict):
            kept = before.get("earlier")
            earlier = [t for t in kept if isinstance(t, dict)] if isinstance(kept, list) else []
            scored = before.get("items_scored_now", before.get("items_now"))
            if scored != 0:  # (a resume that scored nothing added an entry of zeros each time)
                earlier.append({k: v for k, v in before.items() if k != "earlier"})
        return {**timing, "earlier": earlier}

    @staticmethod
    def _atomic_write(path: Path, obj: dict[str, Any]) -> None:
        text = json.dumps(_finite(obj), indent=2, ensure_ascii=False, allow_nan=False)
        write_text_atomic(path, text + "\n", RUN_FOLDER)


def _report_due_page(folder: Path) -> str:
    """The page that stands in for a run's report while its summary is rewritten."""
    run = html.escape(shell(folder))
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<title>contamscope: report to be written again</title></head><body>\n"
        "<h1>This report is out of date</h1>\n"
        "<p>The run's summary was rewritten (a resumed run or a re-analysis) after this "
        "report was written, and the report was not written again from it.</p>\n"
        f"<p>Write it: <code>contamscope report {run}</code></p>\n</body></html>\n"
    )


def _finite(obj: Any) -> Any:
    """``obj`` with every float that is not finite as None (JSON's null): a summary held bare
    ``NaN``, which JSON readers refuse (a perplexity near 1e200 made an interval [nan, nan];
    QA). The statistics say why a value is missing; the file stays JSON.

    >>> _finite({"ci": [float("nan"), 1.0], "n": [float("inf")]})
    {'ci': [None, 1.0], 'n': [None]}
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def analysis_upgrade(
    stored: Any, settings: dict[str, Any], analysis: Iterable[str]
) -> list[dict[str, Any]]:
    """``[stored]`` when a folder's stored settings differ from ``settings`` only in the
    ``config`` values named in ``analysis`` (settings that the analysis alone depends on: the
    method re-derives its records instead of scoring again), else ``[]``; for
    :meth:`RunDir.open`'s ``upgrades``.

    >>> old = {"method": "m", "config": {"n": 5, "threshold": 0.9}}
    >>> analysis_upgrade(old, {"method": "m", "config": {"n": 5, "threshold": 0.75}}, ["threshold"])
    [{'method': 'm', 'config': {'n': 5, 'threshold': 0.9}}]
    >>> analysis_upgrade(old, {"method": "m", "config": {"n": 4, "threshold": 0.9}}, ["threshold"])
    []
    """
    if not isinstance(stored, dict) or not isinstance(stored.get("config"), dict):
        return []
    keys = set(analysis)

    def scoring(s: dict[str, Any]) -> dict[str, Any]:
        return s | {"config": {k: v for k, v in s["config"].items() if k not in keys}}

    return [stored] if _same_run(scoring(stored), scoring(settings)) else []


def _changes(old: dict[str, Any], new: dict[str, Any], prefix: str = "", shown: int = 3) -> str:
    """What differs between two settings, named down to the leaf with both values.

    >>> _changes({"config": {"n_boot": 2000, "seed": 0}}, {"config": {"n_boot": 500, "seed": 0}})
    'config.n_boot: 2000 -> 500'
    >>> _changes({"selection": {}}, {"selection": {"fields": "question=q"}})
    "selection.fields: (none) -> 'question=q'"
    >>> _changes({"m": "local:tiny:fbcb73dccd874848|float32|tok=0b1c|bos=1|engine=3"},
    ...          {"m": "local:tiny:fbcb73dccd874848|float32|tok=0b1c|bos=None|engine=3"})
    "m: '…ok=0b1c|bos=1|engine=3' -> '…ok=0b1c|bos=None|engine=3'"
    """
    out: list[str] = []

    def walk(a: Any, b: Any, key: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b), key=str):
                if a.get(k, _MISSING) != b.get(k, _MISSING):
                    walk(a.get(k, _MISSING), b.get(k, _MISSING), f"{key}.{k}" if key else str(k))
            return

        start = 0
        if isinstance(a, str) and isinstance(b, str) and max(len(a), len(b)) > 38:
            common = len(os.path.commonprefix([a, b]))
            start = max(0, common - 12)  # long texts: show where they differ, not their start

        def show(x: Any) -> str:
            if x is _MISSING:
                return "(none)"
            if start:
                return "'…" + repr(x[start:])[1:][:38] + ("…" if len(x) - start > 37 else "")
            text = repr(x)
            return text if len(text) <= 40 else text[:39] + "…"

        out.append(f"{key}: {show(a)} -> {show(b)}")

    walk(old, new, prefix)
    more = f"; {len(out) - shown} more" if len(out) > shown else ""
    return "; ".join(out[:shown]) + more


_MISSING = object()


def folder_path(folder: object, what: str = "run folder") -> Path:
    """A run folder given as a :class:`RunDir` or a path, as a path (a RunDir given to the
    report, compare, leaderboard or card functions was a TypeError; QA); anything else is one
    ConfigError."""
    if isinstance(folder, RunDir):
        return folder.path
    if isinstance(folder, str | os.PathLike):
        text = os.fspath(folder)
        if isinstance(text, str):  # (not a path of bytes)
            return Path(text)
    raise ConfigError(f"{what}: expected a RunDir or a folder path, not {type(folder).__name__}")


def read_records(path: RunFolder) -> list[dict[str, Any]]:
    """The records of a run (its ``items.jsonl``, or the run folder), in file order. A line
    that is not a JSON object, a file that is not UTF-8, missing or a folder: one StoreError
    naming the file (and line), as ``load_run`` says it (raw JSONDecodeError, FileNotFoundError
    or IsADirectoryError before; cross-reader QA)."""
    path = folder_path(path)
    if path.is_dir():
        path = path / "items.jsonl"
    if not path.exists():
        raise StoreError(f"{path}: no such file (no records: the run scored none yet?)")
    if path.is_dir():
        raise StoreError(f"{path}: a folder, not a records file")
    return [rec for _, rec in unique_records(iter_record_lines(path))]


def unique_records(
    lines: Iterable[tuple[int, dict[str, Any]]],
) -> list[tuple[int, dict[str, Any]]]:
    """``(line, record)`` pairs with an id stored twice kept once, its later copy in the
    earlier one's place, as a resume reads it; records without a string id stay as they are.
    Every reader reads so (the report showed both copies, compare took the first, and a
    --reference-run counted one record twice: 0 of 6 for 0 of 4; cross-reader QA)."""
    slots: list[tuple[int, dict[str, Any]]] = []
    where: dict[str, int] = {}
    for i, rec in lines:
        rid = rec.get("id")
        if isinstance(rid, str) and rid in where:
            slots[where[rid]] = (i, rec)
            continue
        if isinstance(rid, str):
            where[rid] = len(slots)
        slots.append((i, rec))
    return slots


def iter_record_lines(
    path: Path, damaged: list[str] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of a records file, blank lines skipped; a line that is not
    UTF-8 or not a JSON object is a StoreError naming ``path:line``, or, given ``damaged`` (a
    list), left out with that error appended there."""
    refuse_special(path)
    with open(path, "rb") as fh:  # decoded line by line: errors name their line
        for i, raw in enumerate(fh, 1):
            try:
                rec = _record_line(path, i, raw)
            except StoreError as exc:
                if damaged is None:
                    raise
                damaged.append(str(exc))
                continue
            if rec is not None:
                yield i, rec


def _record_line(path: Path, i: int, raw: bytes) -> dict[str, Any] | None:
    """Line ``i`` of a records file as a record (None: blank), or a StoreError naming it."""
    try:  # (a byte-order mark, as the run itself reads it: refused here before)
        line = raw.decode("utf-8-sig" if i == 1 else "utf-8")
    except UnicodeDecodeError:
        raise StoreError(f"{path}:{i}: not UTF-8 text") from None
    if not line.strip():
        return None
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        raise StoreError(f"{path}:{i}: not valid JSON ({json_error(exc, line=False)})") from None
    except RecursionError:  # (a traceback ended report and leaderboard; QA)
        raise StoreError(f"{path}:{i}: {TOO_DEEP}") from None
    if not isinstance(rec, dict):
        raise StoreError(f"{path}:{i}: expected a JSON object per line")
    return rec


_F = TypeVar("_F", bound=Callable[..., Any])

RunFolder: TypeAlias = RunDir | str | os.PathLike[str]
"""What the run functions take as ``run_dir``: a :class:`RunDir` or a folder path."""

_CHECKED = ("loaded", "benchmark", "reference", "data", "scorer", "paraphraser", "config")
"""The arguments of a pipeline's ``run_*`` whose class is checked before it starts: a wrong
one failed deep inside (``'HFBackend' object has no attribute 'backend'``)."""


def _check_arguments(fn: Callable[..., Any], arguments: Mapping[str, Any]) -> None:
    """Refuse an argument of :data:`_CHECKED` that is not of the class its annotation names
    (a string: the pipelines postpone annotations), in one line naming the argument."""
    for name in _CHECKED:
        annotation = fn.__annotations__.get(name)
        if name not in arguments or not isinstance(annotation, str):
            continue
        value = arguments[name]
        if value is None and "None" in annotation:
            continue
        expected = annotation.split("|")[0].split("[")[0].strip()
        if expected in {c.__name__ for c in type(value).__mro__}:
            continue
        hint = ""
        if name in ("scorer", "paraphraser") and hasattr(value, "fingerprint"):  # a Backend
            hint = "; wrap the backend: CachedScorer(backend, cache) (cache None: no cache)"
        raise ConfigError(f"{name}: expected a {expected}, not {type(value).__name__}{hint}")


def as_run_dir(run_dir: RunFolder) -> RunDir:
    """``run_dir`` as a :class:`RunDir`: a folder path opens one; anything else is refused."""
    if isinstance(run_dir, RunDir):
        return run_dir
    return RunDir(folder_path(run_dir, "run_dir"))


def releases_run_dir(fn: _F) -> _F:
    """For a pipeline's ``run_*``: its ``run_dir`` may be a :class:`RunDir` or a folder path, and
    the folder is released when the run ends, finished or not (so a notebook can run again on
    it, or another process)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:  # named, as Python names a function called wrongly
            first = next(iter(signature.parameters))
            if first != "run_dir" and args and isinstance(args[0], str | os.PathLike | RunDir):
                # reanalyse_permutation("runs/x") said run_dir was missing (upgrade QA)
                names = list(signature.parameters)
                order = ", ".join(names[: names.index("run_dir") + 1])
                raise ConfigError(
                    f"{fn.__name__}(): the first argument is {first}, not the run folder "
                    f"({str(args[0])!r}): give {fn.__name__}({order}, ...)"
                ) from None
            raise TypeError(f"{fn.__name__}() {exc}") from None
        _check_arguments(fn, bound.arguments)
        run_dir = bound.arguments["run_dir"] = as_run_dir(bound.arguments["run_dir"])
        try:
            return fn(*bound.args, **bound.kwargs)
        finally:
            run_dir.close()

    return wrapper  # type: ignore[return-value]


def _same_run(stored: dict[str, Any], settings: dict[str, Any]) -> bool:
    """Whether a folder's ``stored`` settings are ``settings``, or were written before the
    item-id digest was recorded beside a command's own selection (such a folder resumes, and
    records the digest from then on).

    >>> new = {"selection": {"limit": 3, "item_ids_sha256": "ab12"}}
    >>> _same_run({"selection": {"limit": 3}}, new), _same_run({"selection": {"limit": 4}}, new)
    (True, False)
    """
    stored, settings = _by_content(stored), _by_content(settings)
    return (
        stored == settings or stored == _without_digest(settings) or _chosen_alike(stored, settings)
    )


def _by_content(settings: Any) -> Any:
    """``settings`` with the paths of data recorded with their contents' hash left out (a
    ``benchmark`` beside its ``benchmark_hash``, a ``reference`` beside its ``reference_hash``,
    a BenBench reference's ``[source, hash, pairing]``): the same data given by another path
    (absolute, or relative to another folder; a run recorded it as typed) is the same run.

    >>> _by_content({"benchmark": "data/x.csv", "benchmark_hash": "ab", "seed": 0})
    {'benchmark_hash': 'ab', 'seed': 0}
    >>> _by_content({"benchmark": "hf:x [test]", "benchmark_hash": None})
    {'benchmark': 'hf:x [test]', 'benchmark_hash': None}
    >>> _by_content({"references": [["a/r.jsonl", "cd", "order"], ["inline", None, "inline"]]})
    {'references': [[None, 'cd', 'order'], ['inline', None, 'inline']]}

    A ``model`` beside its ``model_fingerprint`` (a local model's is its content: the name of
    its folder and its files' bytes) is left out too: a validation's checkpoint is recorded as
    ``hf:`` + the folder under ``--out`` as typed, so ``--out runs/v`` resumed as an absolute
    ``--out``, or from a copied folder, was refused as a run with other settings (QA).

    >>> _by_content({"model": "hf:runs/v/m", "model_fingerprint": "local:m:ab|float32"})
    {'model_fingerprint': 'local:m:ab|float32'}
    """
    if isinstance(settings, dict):
        return {
            k: _refs_by_content(v) if k == "references" else _by_content(v)
            for k, v in settings.items()
            if not (isinstance(v, str) and settings.get(f"{k}_hash"))
            and not (k == "model" and settings.get("model_fingerprint"))
        }
    if isinstance(settings, list):
        return [_by_content(x) for x in settings]
    return settings


def _refs_by_content(refs: Any) -> Any:
    """BenBench's references (``[source, hash, pairing]`` each) with the sources of those
    with a hash left out."""
    if not isinstance(refs, list):
        return _by_content(refs)
    return [
        [None, *r[1:]] if isinstance(r, list) and len(r) == 3 and r[1] else _by_content(r)
        for r in refs
    ]


_CHOOSING = frozenset({"limit", "sample", "seed", "subjects", "n_items"})
"""Selection keys that say how the items were chosen, not how they were read."""


def _chosen_alike(stored: dict[str, Any], settings: dict[str, Any]) -> bool:
    """A permutation run of the same items, in the same order (their ids' digest), chosen
    another way: a command's ``--subjects anatomy --sample 6`` and a Python call's
    ``select_items(..., sample=6)`` with no ``selection=`` (a folder the command began was
    refused from Python; library QA). Neither side may have read the items in a way it names
    (``--format``, ``--fields``, ``--split``): a Python call cannot say, so such a folder is
    refused; and the permutation run scores again each stored record whose texts differ from
    the items' (:func:`~contamscope.pipeline.permutation.stale_records`), which the other
    methods do not check (their folders are refused, diff-review QA).

    >>> cli = {"method": "permutation", "selection": {"sample": 6, "seed": 0, "item_ids_sha256": "ab"}}
    >>> api = {"method": "permutation", "selection": {"n_items": 6, "item_ids_sha256": "ab"}}
    >>> _chosen_alike(cli, api), _chosen_alike(cli, api | {"selection": {"item_ids_sha256": "cd"}})
    (True, False)
    >>> _chosen_alike(cli | {"selection": cli["selection"] | {"fields": "question=q"}}, api)
    False
    """
    a, b = stored.get("selection"), settings.get("selection")
    if not isinstance(a, dict) or not isinstance(b, dict) or stored.get("method") != "permutation":
        return False
    if not a.get("item_ids_sha256") or a.get("item_ids_sha256") != b.get("item_ids_sha256"):
        return False
    if {k: v for k, v in stored.items() if k != "selection"} != {
        k: v for k, v in settings.items() if k != "selection"
    }:
        return False
    # (a command records an option it was not given as None: --format, --split)
    named = [k for s in (a, b) for k, v in s.items() if k not in _CHOOSING and v is not None]
    return set(named) <= {"item_ids_sha256"}


def _without_digest(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` as a run folder written before the item-id digest was recorded beside a
    command's own selection holds them (such a folder resumes, and records the digest from
    then on)."""
    selection = settings.get("selection")
    if not isinstance(selection, dict) or "item_ids_sha256" not in selection:
        return settings
    return settings | {"selection": {k: v for k, v in selection.items() if k != "item_ids_sha256"}}


def interrupted_reanalysis(path: Path) -> dict[str, Any] | None:
    """The settings a re-analysis of the folder ``path`` was asked for when it was killed
    between rewriting the records and the summary (:data:`REANALYSING`); None when there was
    none (an unreadable marker reads as one asked for nothing more)."""
    marker = Path(path) / REANALYSING
    if not marker.is_file():
        return None
    try:
        request = json.loads(marker.read_text(encoding="utf-8")).get("request")
    except (OSError, ValueError, AttributeError, RecursionError):
        return {}
    return request if isinstance(request, dict) else {}


_TEMPORARY = re.compile(r"^\..+\.(\d+)-[0-9a-f]{8}\.tmp$")
"""A name :func:`~contamscope.paths.temporary_beside` gives: its writer's process id in it."""


def _remove_orphans(folder: Path) -> None:
    """Remove the temporary files of writers that are gone (killed mid-write: a partial
    summary or records file stayed hidden in the folder for good; kill QA). A live process's
    file (a report being written beside the run) is left."""
    try:
        names = [e.name for e in os.scandir(folder) if e.is_file(follow_symlinks=False)]
    except OSError:
        return
    for name in names:
        m = _TEMPORARY.match(name)
        if m is not None and process_gone(int(m.group(1))):
            remove_quietly(folder / name)
