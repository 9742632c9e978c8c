"""`contamscope report` and `contamscope leaderboard`: HTML/CSV/Markdown from run folders."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from ..errors import ConfigError
from ..wording import plural, shell
from .common import (
    EXIT_ROWS_SKIPPED,
    EXIT_USER_ERROR,
    console,
    err_console,
    exit_if_skipped,
    styled,
    user_errors,
    warn,
)

REPORT_EPILOG = """
Examples:

  contamscope report runs/demo                       # writes runs/demo/report.html

  contamscope report runs/smollm2-mmlu --out smollm2-mmlu.html --top 12

  contamscope report runs/val/epoch-3 --labels leaked_ids.txt   # adds ROC and precision-recall

A run made by `contamscope validate` (RUN/epoch-N) takes its labels from RUN/split.json.

The file is self-contained (figures and data inline, no network) and opens from a file:// URL.

Exit codes: 0 ok, 2 user error, 3 written, but a run folder given was unreadable or unfinished
(named above).
"""

LEADERBOARD_EPILOG = """
Examples:

  contamscope leaderboard runs/*                     # Markdown table on the terminal

  contamscope leaderboard runs/a runs/b --out leaderboard.html

  contamscope leaderboard runs/* --out leaderboard.csv

  contamscope leaderboard runs/* --format md > LEADERBOARD.md

Each cell is the leakage estimate beyond chance (percentage points) with its 95% CI.

Exit codes: 0 ok, 2 user error, 3 written, but a run folder given was unreadable or unfinished
(named under the board as left out).
"""


def _report_file(text: str) -> Path:
    """--out as given; one that ends in a slash names a folder, whose report.html is meant
    (``--out newdir/`` wrote an HTML file named newdir)."""
    if text.endswith(("/", os.sep)):
        return Path(text) / "report.html"
    return Path(text)


def report_command(
    run_dir: Path = typer.Argument(
        ..., metavar="RUN_DIR", help="A finished run folder (holds summary.json)."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        parser=_report_file,
        help="HTML file to write (default: RUN_DIR/report.html; a folder ending in / gets "
        "report.html in it).",
    ),
    top: int = typer.Option(
        8, "--top", min=0, max=100, help="Case-study plots for this many most suspicious items."
    ),
    labels: Path | None = typer.Option(
        None,
        "--labels",
        help="Item ids known to be leaked: a text file (one per line) or a split.json "
        "('{\"leaked\": [...]}', as `contamscope validate` writes); adds ROC/PR curves.",
    ),
    page_size: int = typer.Option(50, "--page-size", min=5, help="Table rows per page."),
) -> None:
    """Write a self-contained HTML report of a run: verdict, statistics, plots, item table."""
    _report(run_dir, out, top, labels, page_size)


@user_errors
def _report(run_dir: Path, out: Path | None, top: int, labels: Path | None, page_size: int) -> None:
    from ..report import ReportOptions, build_report, load_run
    from ..report.validation import read_labels

    label_map = read_labels(labels) if labels is not None else None
    run = replace(load_run(run_dir), damaged=[])  # (left out as the report leaves them out)
    if labels is not None and run.method != "permutation":
        raise ConfigError(
            f"--labels {labels}: the curves of known leaks are drawn for permutation runs; "
            f"{run_dir} is a {run.method or 'other'} run"
        )
    if label_map is not None:
        _check_labels(label_map, {str(r.get("id")) for r in run.iter_records()}, labels, run_dir)
    path = build_report(
        run_dir, out, ReportOptions(top_cases=top, page_size=page_size, labels=label_map)
    )
    if run.method != "validate":  # (a validate folder's items are its epochs', which it lists)
        _check_items_file(run)
    console.print(f"report: {path}", highlight=False, soft_wrap=True)


def _check_items_file(run: Any) -> None:
    """Warn where the run's items.jsonl is missing, or holds fewer records than its summary
    counts (an empty or cut file gave empty item tables without a word; QA)."""
    from ..report.rundata import records_short

    if not run.items_path.exists():
        warn(f"{run.items_path} is missing: the report has the run's statistics, no item tables")
        return
    short = records_short(run)
    if short is not None and not run.damaged:  # (those: said)
        held, expected = short
        warn(
            f"{run.items_path} holds {held} of the {plural(expected, 'item record')} "
            "summary.json counts: the statistics are the run's, the item tables show "
            f"{'none' if held == 0 else 'those ' + str(held)}"
        )


def _check_labels(leaked: Iterable[str], ids: set[str], labels: Path | None, run: Path) -> None:
    """--labels lists leaked item ids: none of them in the run is a user error (the labels of
    another benchmark or selection); some of them missing is said, as they cannot count."""
    listed = set(leaked)
    unknown, n = sorted(listed - ids), len(listed)
    first = ""  # shown cut: a 200 kB line of a labels file was said whole (QA)
    if unknown:
        first = repr(unknown[0][:60]) + ("..." if len(unknown[0]) > 60 else "")
    if unknown and len(unknown) == n:
        raise ConfigError(
            f"--labels {labels}: none of its {n} item ids is an item of {run} "
            f"(first: {first}); labels must name the run's item ids"
        )
    if unknown:
        warn(
            f"--labels {labels}: {len(unknown)} of its {n} item ids "
            + ("is not an item" if len(unknown) == 1 else "are not items")
            + f" of {run} "
            f"(first: {first}); they are not counted"
        )


def leaderboard_command(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR", help="Finished run folders."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="File to write: .html, .csv or .md (default: print Markdown)."
    ),
    fmt: str | None = typer.Option(
        None, "--format", help="html, csv or md (default: from --out's suffix, else md)."
    ),
) -> None:
    """Rank models by leakage per benchmark: models x benchmarks, excess over chance with CI."""
    _leaderboard(run_dirs, out, fmt)


@user_errors
def _leaderboard(run_dirs: list[Path], out: Path | None, fmt: str | None) -> None:
    from ..report import write_leaderboard
    from ..report.leaderboard import LeftOut

    left: list[LeftOut] = []
    suffix = out.suffix.lower().lstrip(".") if out is not None else ""
    said = {"htm": "html", "markdown": "md", "txt": "md"}.get(suffix, suffix)
    if out is not None and fmt is not None and said in ("html", "csv", "md") and said != fmt:
        warn(  # it wrote CSV into board.html without a word (HTML QA)
            f"--format {fmt} into {out}, whose extension says {said}: the file holds {fmt}"
        )
    text, path = write_leaderboard(run_dirs, out, fmt, left)
    for x in left:
        err_console.print(styled("yellow", "left out", f" {x}"), highlight=False, soft_wrap=True)
    if path is None:
        typer.echo(text, nl=False)
    else:
        console.print(f"leaderboard: {path}", highlight=False, soft_wrap=True)
    missed = sum(x.unreadable for x in left)
    if missed and len(left) > missed:  # the count read as all of the lines above it (QA)
        err_console.print(
            styled(
                "yellow",
                f"{len(left)} left out, {missed} of them "
                + ("an unreadable or unfinished run folder" if missed == 1 else "unreadable or "
                   "unfinished run folders"),
                " (exit code 3)",
            )
        )  # fmt: skip
        raise SystemExit(EXIT_ROWS_SKIPPED)
    exit_if_skipped(missed, "unreadable or unfinished run folder")


def report_after_run(run_dir: Path, *, write: bool) -> bool:
    """End of a run: write the report (``--report``, or a report.html there before) and print
    its path, or say how to make it. False where the report could not be written: the run is
    saved already and the command ends as it would have, but with exit code 2
    (:func:`~contamscope.cli.common.exit_if_skipped`'s ``unwritten``), as a file asked for
    and not written must not pass a script by (it exited 0; QA)."""
    if not write and (run_dir / "report.html").is_file():  # it would show the earlier analysis
        err_console.print(styled("dim", "", "report.html was in the folder: written again"))
        write = True
    if not write:
        console.print(
            f"report: contamscope report {shell(run_dir)}", highlight=False, soft_wrap=True
        )
        return True
    path = write_report_or_warn(run_dir, code=f" (the run is saved; exit code {EXIT_USER_ERROR})")
    if path is not None:
        console.print(f"report: {path}", highlight=False, soft_wrap=True)
    return path is not None


def write_report_or_warn(run_dir: Path, where: str = "", code: str = "") -> Path | None:
    """``run_dir``'s report.html written, or a warning where it cannot be (the run is saved
    already); ``where`` goes before the reason, ``code`` after it."""
    from ..errors import ContamscopeError
    from ..report import build_report

    try:
        return build_report(run_dir)
    except ContamscopeError as exc:
        err_console.print(
            styled("yellow", "report not written:", f" {where}{exc}{code}"),
            highlight=False,
            soft_wrap=True,
        )
        return None
