"""Run the real `contamscope` command line in a subprocess (shared by the CLI tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any


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


COMPARE_PROBES = {
    "figures": 'document.querySelectorAll("svg.fig").length',
    "sections": 'Array.from(document.querySelectorAll("section")).map(s => s.id)',
    "count": 'document.querySelector("#items .tbl-count").textContent',
    "verdict": 'document.querySelector(".verdict strong").textContent',
}
"""What every compare page is checked for: figures, sections, item rows, the verdict."""


def compare_page(run_a: Path, run_b: Path, out: Path, **probes: str) -> dict[str, Any]:
    """``contamscope compare RUN_A RUN_B -o OUT`` (an .html page), opened in Chromium: the
    values of :data:`COMPARE_PROBES` and ``probes`` (JavaScript expressions). Skips the test
    without Chromium; fails on a command error or a page error."""
    import pytest

    from contamscope.report.browser import check_page, find_chromium

    if find_chromium() is None:
        pytest.skip("chromium not installed (Debian package 'chromium'; .ci/run installs it)")
    res = run_cli("compare", str(run_a), str(run_b), "-o", str(out), cwd=out.parent)
    assert res.returncode == 0, res.stderr
    page = check_page(out, probes={**COMPARE_PROBES, **probes})
    assert page.errors == []
    result: dict[str, Any] = page.probes
    return result
