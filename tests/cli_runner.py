"""Run the real `contamscope` command line in a subprocess (shared by the CLI tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """``python -m contamscope ARGS`` in ``cwd``, wide terminal, output captured."""
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "contamscope", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )
