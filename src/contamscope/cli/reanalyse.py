"""`contamscope reanalyse`: a finished permutation run analysed again with other thresholds,
from its stored log-probs; no model is loaded and nothing is scored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..errors import ConfigError
from .common import console, err_console, exit_if_skipped, list_skipped, styled, user_errors

EPILOG = """
Examples:

  contamscope reanalyse runs/demo --alpha 0.01

  contamscope reanalyse runs/smollm2-mmlu --ties leaked --deltas=-0.2,-0.15,-0.1

  contamscope reanalyse runs/smollm2-mmlu --deltas paper      # the paper's thresholds again

  contamscope reanalyse runs/old --benchmark /new/place/of/mmlu/test   # the benchmark moved

What changes: the rank test's --alpha, Algorithm 1's --ties and Algorithm 2's --deltas. The
item records' flags, settings.json and summary.json are rewritten (a report.html in the folder
too); the log-probs and Algorithm 2's outlier scores stay, so the result is what a run with
these settings would have given. Re-running the permutation command with the new options does
the same, after loading the model. The benchmark is read again (natural orders, conventions)
and must be the one the run read.
"""


def command(
    run_dir: Path = typer.Argument(..., help="A finished permutation run folder."),
    alpha: float | None = typer.Option(
        None, "--alpha", help="Level of the per-item rank test (default: the run's)."
    ),
    ties: str | None = typer.Option(
        None,
        "--ties",
        help="Algorithm 1 on a tie for the maximum: not_leaked or leaked (default: the run's).",
    ),
    deltas: str | None = typer.Option(
        None,
        "--deltas",
        help="Algorithm 2's outlier thresholds, comma-separated (e.g. -0.2,-0.15), or 'paper' "
        "(-0.2 up to 4 options, -0.25 from 5); default: the run's.",
    ),
    benchmark: str | None = typer.Option(
        None,
        "--benchmark",
        "-b",
        help="Where the run's benchmark is now, when not where the run read it (same content).",
    ),
    report: bool = typer.Option(
        False, "--report", help="Also write RUN_DIR/report.html (rewritten anyway if it exists)."
    ),
) -> None:
    """Analyse a finished permutation run again with other thresholds; nothing is scored."""
    _reanalyse(
        run_dir=run_dir,
        alpha=alpha,
        ties=ties,
        deltas=deltas,
        benchmark=benchmark,
        report=report,
    )


def _parse(ties: str | None, deltas: str | None, alpha: float | None) -> dict[str, Any]:
    if ties is not None and ties not in ("not_leaked", "leaked"):
        raise ConfigError(f"--ties {ties!r}: expected not_leaked or leaked")
    if alpha is not None and not 0 < alpha < 1:
        raise ConfigError(f"--alpha {alpha}: must be between 0 and 1")
    parsed: Any = None
    if deltas is not None:
        if deltas.strip().lower() == "paper":
            parsed = "paper"
        else:
            from .permutation import parse_deltas

            parsed = parse_deltas(deltas)
            if parsed is None:
                raise ConfigError("--deltas '': expected comma-separated numbers or 'paper'")
    return {"alpha": alpha, "ties": ties, "deltas": parsed}


@user_errors
def _reanalyse(
    *,
    run_dir: Path,
    alpha: float | None,
    ties: str | None,
    deltas: str | None,
    benchmark: str | None,
    report: bool,
) -> None:
    from ..data import load_benchmark
    from ..errors import DataError, StoreError
    from ..pipeline import reanalyse_permutation, run_benchmark
    from ..store import RunDir
    from .report import report_after_run
    from .summary import print_permutation_summary

    options = _parse(ties, deltas, alpha)
    if not run_dir.is_dir():
        raise StoreError(f"{run_dir}: no such run folder")
    stored = RunDir(run_dir).stored_settings()
    if stored is None:
        raise StoreError(f"{run_dir} holds no contamscope run (no settings.json)")
    if stored.get("method") != "permutation":
        raise ConfigError(
            f"{run_dir} holds a {stored.get('method')} run; reanalyse reads permutation runs (a "
            f"{stored.get('method')} run re-run with other analysis options scores nothing)"
        )
    how = run_benchmark(stored)
    if benchmark is not None:
        how["spec"] = benchmark
    try:
        loaded = load_benchmark(**how)
    except DataError as exc:
        if benchmark is not None:
            raise
        raise DataError(
            f"{exc} (the benchmark {run_dir} was run on; --benchmark says where it is now)"
        ) from None
    list_skipped(loaded.problems)
    had_report = (run_dir / "report.html").exists()
    with console.status("analysing the stored scores ..."):
        outcome = reanalyse_permutation(loaded, RunDir(run_dir), **options)
    changed = outcome.summary["timings"].get("reanalysed_records", 0)
    err_console.print(
        f"re-analysed {outcome.summary['counts']['items_selected']} stored items "
        f"({changed} records' flags changed); nothing scored",
        highlight=False,
    )
    print_permutation_summary(outcome.summary)
    console.print(f"run folder: {outcome.run_dir} (summary.json, items.jsonl)")
    if had_report and not report:
        err_console.print(styled("dim", "", "report.html was in the folder: written again"))
    report_after_run(outcome.run_dir, write=report or had_report)
    exit_if_skipped(len(loaded.problems))
