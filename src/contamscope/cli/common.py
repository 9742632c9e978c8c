"""Shared CLI plumbing: one-line errors, exit codes, the console."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from ..errors import ContamscopeError

__all__ = [
    "console",
    "err_console",
    "user_errors",
    "EXIT_OK",
    "EXIT_USER_ERROR",
    "EXIT_ROWS_SKIPPED",
]

EXIT_OK = 0
EXIT_USER_ERROR = 2
"""A fatal problem the user can fix (bad option, unreadable file, unknown model)."""
EXIT_ROWS_SKIPPED = 3
"""The run finished, but some input rows were skipped (listed in summary.json)."""
EXIT_INTERRUPTED = 130

console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    """Turn user errors into one line on stderr and a non-zero exit; never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ContamscopeError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err_console.print("interrupted; re-run the same command to resume", highlight=False)
            sys.exit(EXIT_INTERRUPTED)

    return wrapper  # type: ignore[return-value]
