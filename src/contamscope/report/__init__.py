"""Reports and the leaderboard: they read only run folders, never a model or the score cache.

``build_report(run_dir)`` writes one self-contained HTML file (inline SVG figures, inline table
data and script; no network). ``write_leaderboard(run_dirs, out)`` ranks models by leakage per
benchmark as HTML, CSV or Markdown. ``write_card(benbench_runs, out)`` writes a Benchmark
Transparency Card (Markdown and JSON). Plotting needs the ``report`` extra (matplotlib).
"""

from __future__ import annotations

from .build import build_report, default_report_path
from .card import build_card, write_card
from .leaderboard import LeaderboardEntry, collect, write_leaderboard
from .methods import METHOD_MODULES, Estimate, ReportOptions
from .rundata import RunData, load_run

__all__ = [
    "METHOD_MODULES",
    "Estimate",
    "LeaderboardEntry",
    "ReportOptions",
    "RunData",
    "build_card",
    "build_report",
    "collect",
    "default_report_path",
    "load_run",
    "write_card",
    "write_leaderboard",
]
