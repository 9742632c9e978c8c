"""Run the real `contamscope` command line in a subprocess (shared by the CLI tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_cli(
    *args: str, cwd: Path, timeout: int = 900, columns: str | None = "200"
) -> subprocess.CompletedProcess[str]:
    """``python -m contamscope ARGS`` in ``cwd``, output captured; ``COLUMNS`` set to
    ``columns`` (None: unset, as for a user's pipe or log file)."""
    env = dict(os.environ, COLUMNS=columns or "")
    if columns is None:
        del env["COLUMNS"]
    return subprocess.run(
        [sys.executable, "-m", "contamscope", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )
