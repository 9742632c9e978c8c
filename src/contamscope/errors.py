"""Exceptions for user-facing errors.

Everything a user can cause (a bad file, an unknown option, a backend that cannot do what a method
needs) raises a subclass of :class:`ContamscopeError` with a one-line message. The CLI prints that
line and exits non-zero; it never shows a traceback for these.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "ContamscopeError",
    "DataError",
    "ConfigError",
    "ModelError",
    "CapabilityError",
    "StoreError",
    "ContamscopeWarning",
    "note",
    "HeldNotes",
]


class ContamscopeError(Exception):
    """Base class: a problem the user can fix, described in one line."""

    exit_code: int = 2


class DataError(ContamscopeError):
    """A benchmark file cannot be read or has an unusable structure (names file:line)."""


class ConfigError(ContamscopeError):
    """An option or a combination of options is invalid (names the option)."""


class ModelError(ContamscopeError):
    """A model spec cannot be resolved or loaded."""


class CapabilityError(ContamscopeError):
    """A backend cannot provide what a method needs (e.g. prompt log-probs)."""


class StoreError(ContamscopeError):
    """A cache or run folder is unusable (wrong schema, settings mismatch)."""

    def __init__(
        self, message: str, *, replaceable: bool = False, problem: str | None = None
    ) -> None:
        super().__init__(message)
        self.replaceable = replaceable
        """The file is not (or no longer) a usable score cache: deleting it loses nothing
        (damaged, another schema). False for what deleting would not fix (permissions)."""
        self.problem = problem
        """What is wrong, without the path and the advice (which is for one's own cache:
        ``cache import`` reports a source file's problem without telling to remove it)."""


class ContamscopeWarning(UserWarning):
    """Something the user should know that does not stop the work (a damaged record left out
    and scored again, an unwritable score cache opened read-only, a served model answering
    under another name). The CLI prints it as one ``note:`` line; from Python it is a warning
    (``warnings.simplefilter("error", ContamscopeWarning)`` makes it an error)."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _outside_level() -> int:
    """``stacklevel`` of the first frame outside contamscope, seen from :func:`note`: a
    harness's warning names its own line that asked for the work, however deep in the package
    the note was raised (it named contamscope's own lines)."""
    frame = sys._getframe(2)  # note's caller
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level if frame is not None else 2


_held_notes = threading.local()
_R = TypeVar("_R")


def note(message: str) -> None:
    """Say ``message`` as a :class:`ContamscopeWarning` raised at the first line outside
    contamscope (the code that asked for the work). In a job run by :meth:`HeldNotes.hold`
    the note waits for the thread that asked (a pool thread's stack holds no caller's line:
    the warning named concurrent/futures/thread.py)."""
    held = getattr(_held_notes, "notes", None)
    if held is not None:
        held.append(message)
        return
    warnings.warn(message, ContamscopeWarning, stacklevel=_outside_level())


class HeldNotes:
    """Notes said in a pool's worker threads, said in the thread that asked for the work:
    ``held = HeldNotes()``, ``pool.submit(held.hold(fn, i), job)`` for job i, then
    ``held.say()`` in that thread once the jobs end (a pool thread's stack holds no caller's
    line: the warning named concurrent/futures/thread.py; QA)."""

    def __init__(self) -> None:
        self._notes: dict[int, list[str]] = {}
        self._lock = threading.Lock()

    def hold(self, fn: Callable[..., _R], order: int) -> Callable[..., _R]:
        """``fn`` run as job ``order``: its notes are kept for :meth:`say`."""

        def run(*args: Any, **kwargs: Any) -> _R:
            mine: list[str] = []
            _held_notes.notes = mine
            try:
                return fn(*args, **kwargs)
            finally:
                _held_notes.notes = None
                with self._lock:
                    self._notes[order] = mine

        return run

    def say(self, failing: bool = False) -> None:
        """Say the notes, in the jobs' order, each message once (a method of this module, so
        that the warning names the first frame outside it). ``failing``: an error is on its
        way out, which a note made an error (``simplefilter("error", ...)``) must not
        replace (it replaced a job's ModelError; QA)."""
        with self._lock:
            said = list(dict.fromkeys(m for k in sorted(self._notes) for m in self._notes[k]))
            self._notes.clear()
        for message in said:
            if not failing:
                note(message)
                continue
            with contextlib.suppress(ContamscopeWarning):
                note(message)
