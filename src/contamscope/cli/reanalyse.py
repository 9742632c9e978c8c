"""`contamscope reanalyse`: a finished run (permutation, CAP, membership, BenBench) analysed again with
other analysis settings, from its stored records; no model is loaded and nothing is scored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..errors import ConfigError
from ..wording import plural, shell
from .common import (
    EXIT_USER_ERROR,
    console,
    err_console,
    exit_if_skipped,
    list_skipped,
    run_folders_as_written,
    status,
    styled,
    user_errors,
    warn,
)

EPILOG = """
Examples:

  contamscope reanalyse runs/demo --alpha 0.01

  contamscope reanalyse runs/smollm2-mmlu --ties leaked --deltas=-0.2,-0.15,-0.1

  contamscope reanalyse runs/smollm2-mmlu --deltas paper      # the paper's thresholds again

  contamscope reanalyse runs/old --benchmark /new/place/of/mmlu/test   # the benchmark moved

  contamscope reanalyse runs/cap-fineval --pcr-alpha 0.001 --scale linear

  contamscope reanalyse runs/membership --statistic loss --fdr

  contamscope reanalyse runs/benbench-gsm8k --edit-threshold 0.75   # the paper's code's threshold

  contamscope reanalyse runs/sweep/*/ --ties leaked    # every pair of a sweep (then re-run the sweep: its board)

What each method takes (the others are refused; a setting not given keeps the run's):
  permutation  --alpha (rank test), --ties (Algorithm 1), --deltas (Algorithm 2),
               --reference-run (Algorithm 2 on clean items), --benchmark
  membership   --statistic, --alpha, --fdr/--no-fdr, --bootstrap, --seed (the bootstrap's)
  cap          --pcr-alpha, --scale, --bootstrap, --min-diff, --similarity-threshold,
               --mcq-metric, --include-unmodified/--exclude-unmodified
  benbench     --rouge-threshold, --edit-threshold, --inclusive/--no-inclusive (the lenient
               n-gram criteria; not for a --no-lenient run), --bootstrap, --seed (the bootstrap's)

The folder's summary.json (and the records' flags, p-values) are rewritten, and a report.html in
it too; the stored scores stay, so the result is what a run with these settings would have
given on the same items (--seed seeds the bootstrap only: a run that sampled its items keeps
them). Re-running the method's command with the new options on the same --out does the same
after loading the model. A permutation run's benchmark is read again (natural orders,
conventions) and must be the one the run read.

Exit codes: 0 ok, 2 user error or a folder that cannot be re-analysed (the others are), 3
re-analysed, but benchmark rows were skipped in reading it again.
"""

_OPTIONS = {
    "permutation": ("alpha", "ties", "deltas", "benchmark", "reference_run"),
    "membership": ("statistic", "alpha", "fdr", "bootstrap", "seed"),
    "cap": (
        "pcr_alpha", "scale", "bootstrap", "min_diff", "similarity_threshold", "mcq_metric",
        "include_unmodified",
    ),
    "benbench": ("rouge_threshold", "edit_threshold", "inclusive", "bootstrap", "seed"),
}  # fmt: skip
_FLAGS = {
    "fdr": "--fdr/--no-fdr",
    "include_unmodified": "--include-unmodified/--exclude-unmodified",
    "inclusive": "--inclusive/--no-inclusive",
}


_KEYWORD = {"bootstrap": "n_boot", "pcr_alpha": "alpha"}
"""Options whose pipeline keyword is another name (the others are their own)."""


def _settings(method: str, given: dict[str, Any]) -> dict[str, Any]:
    """The method's options as its ``reanalyse_*`` keywords (None: keep the run's)."""
    return {_KEYWORD.get(k, k): given[k] for k in _OPTIONS[method]}


def _flag(name: str) -> str:
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def command(
    run_dirs: list[Path] = typer.Argument(
        ...,
        help="Finished run folders (permutation, membership, cap or benbench), e.g. a sweep's "
        "runs/sweep/*/.",
        metavar="RUN_DIR",
    ),
    alpha: float | None = typer.Option(
        None, "--alpha", help="permutation, membership: the per-item test level."
    ),
    ties: str | None = typer.Option(
        None,
        "--ties",
        help="permutation: Algorithm 1 on a tie for the maximum: not_leaked, leaked.",
    ),
    deltas: str | None = typer.Option(
        None,
        "--deltas",
        help="permutation: Algorithm 2's outlier thresholds, comma-separated (e.g. -0.2,-0.15), "
        "or 'paper' (-0.2 up to 4 options, -0.25 from 5).",
    ),
    benchmark: str | None = typer.Option(
        None,
        "--benchmark",
        "-b",
        help="permutation: where the run's benchmark is now, if it moved (same content).",
    ),
    reference_run: str | None = typer.Option(
        None,
        "--reference-run",
        help="permutation: a finished run of the same model on clean items (Algorithm 2's "
        "false-positive rate); 'none' drops the run's.",
    ),
    statistic: str | None = typer.Option(
        None,
        "--statistic",
        help="membership: min_k_pp, min_k, loss, zlib (gap, combined: if the run scored the "
        "option orders).",
    ),
    fdr: bool | None = typer.Option(
        None, "--fdr/--no-fdr", help="membership: flag by Benjamini-Hochberg q-values, or not."
    ),
    bootstrap: int | None = typer.Option(
        None,
        "--bootstrap",
        "--n-boot",
        min=100,
        help="membership, cap, benbench: bootstrap resamples.",
    ),
    seed: int | None = typer.Option(
        None, "--seed", min=0, help="membership, benbench: the bootstrap's seed."
    ),
    pcr_alpha: float | None = typer.Option(
        None, "--pcr-alpha", help="cap: the PCR smoothing constant."
    ),
    scale: str | None = typer.Option(None, "--scale", help="cap: tanh, linear, sigmoid."),
    min_diff: float | None = typer.Option(
        None, "--min-diff", help="cap: smallest |PCR difference| called evidence."
    ),
    similarity_threshold: float | None = typer.Option(
        None, "--similarity-threshold", help="cap (summary): cosine above which answers agree."
    ),
    mcq_metric: str | None = typer.Option(None, "--mcq-metric", help="cap: mapped or strict."),
    include_unmodified: bool | None = typer.Option(
        None,
        "--include-unmodified/--exclude-unmodified",
        help="cap: count items whose modified input equals the original.",
    ),
    rouge_threshold: float | None = typer.Option(
        None, "--rouge-threshold", help="benbench: ROUGE-L F threshold (paper 0.75)."
    ),
    edit_threshold: float | None = typer.Option(
        None,
        "--edit-threshold",
        help="benbench: edit-similarity threshold (paper text 0.9; its code 0.75).",
    ),
    inclusive: bool | None = typer.Option(
        None, "--inclusive/--no-inclusive", help="benbench: thresholds with >= instead of >."
    ),
    report: bool = typer.Option(
        False, "--report", help="Also write RUN_DIR/report.html (rewritten anyway if it exists)."
    ),
) -> None:
    """Analyse a finished run again with other analysis settings; nothing is scored."""
    given = {
        "alpha": alpha, "ties": ties, "deltas": deltas, "benchmark": benchmark,
        "reference_run": reference_run,
        "statistic": statistic, "fdr": fdr, "bootstrap": bootstrap, "seed": seed,
        "pcr_alpha": pcr_alpha,
        "scale": scale, "min_diff": min_diff, "similarity_threshold": similarity_threshold,
        "mcq_metric": mcq_metric, "include_unmodified": include_unmodified,
        "rouge_threshold": rouge_threshold, "edit_threshold": edit_threshold,
        "inclusive": inclusive,
    }  # fmt: skip
    _reanalyse_all(run_dirs=run_dirs, given=given, report=report)


@user_errors
def _reanalyse_all(*, run_dirs: list[Path], given: dict[str, Any], report: bool) -> None:
    """Each folder in turn; one that fails is named (one line) and the others still done."""
    from ..errors import ContamscopeError

    if given["alpha"] is not None and not 0 < given["alpha"] < 1:
        raise ConfigError(f"--alpha {given['alpha']}: must be between 0 and 1")
    if len(run_dirs) == 1:
        skipped, written = _reanalyse(run_dirs[0], given, report)
        exit_if_skipped(skipped, unwritten=not written)
        return
    from ..report.rundata import sweep_reference_folder

    failed, skipped, unwritten = [], 0, False
    folders = []
    for run_dir in run_dirs:
        if sweep_reference_folder(run_dir):  # what runs/sweep/*/ matches besides the pairs
            err_console.print(
                f"{run_dir}: a sweep's reference runs, skipped (their pairs read them under "
                f"their own thresholds; {run_dir}/*/ re-analyses them)",
                highlight=False,
            )
            continue
        try:  # every folder checked before any is written: the options must be each one's
            _checked(run_dir, given)
        except ContamscopeError as exc:
            err_console.print(styled("bold red", "error:", f" {exc}"), highlight=False)
            failed.append(run_dir)
        folders.append(run_dir)
    if failed:
        err_console.print(
            styled(
                "bold red",
                "nothing re-analysed:",
                f" {plural(len(failed), 'folder')} cannot be ({', '.join(map(str, failed))}); "
                "give the others alone (exit code 2)",
            ),
            highlight=False,
        )
        raise SystemExit(EXIT_USER_ERROR)
    for run_dir in folders:
        console.rule(str(run_dir))
        try:
            rows, written = _reanalyse(run_dir, given, report)
            skipped, unwritten = skipped + rows, unwritten or not written
        except ContamscopeError as exc:
            err_console.print(styled("bold red", "error:", f" {exc}"), highlight=False)
            failed.append(run_dir)
    boards = sorted({d.parent for d in run_dirs if (d.parent / "sweep.json").exists()})
    for board in boards:
        err_console.print(
            f"the board in {board} is from before: re-run its sweep command to rebuild it "
            "(finished pairs are not scored again)",
            highlight=False,
        )
    if failed:
        err_console.print(
            styled(
                "bold red",
                f"{plural(len(failed), 'folder')} not re-analysed:",
                f" {', '.join(map(str, failed))} (exit code 2)",
            ),
            highlight=False,
        )
        raise SystemExit(EXIT_USER_ERROR)
    exit_if_skipped(skipped, unwritten=unwritten)


def _finishing(run_dir: Path, method: str, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` with the settings of a re-analysis of ``run_dir`` killed between its writes
    where no other is given (it had rewritten some files: the folder's own settings were half
    of each; kill QA); said when there was one."""
    from ..store import interrupted_reanalysis

    request = interrupted_reanalysis(run_dir)
    if request is None:
        return given
    given = dict(given)
    taken = []
    for key in _OPTIONS[method]:
        value = request.get(_KEYWORD.get(key, key))
        if value is None or given.get(key) is not None:
            continue
        if key == "deltas" and isinstance(value, list):
            value = ",".join(str(v) for v in value)
        given[key] = value
        on, _, off = _flag(key).partition("/")
        taken.append((on if value else off) if isinstance(value, bool) else f"{on} {value}")
    err_console.print(
        f"note: {run_dir}: its re-analysis was interrupted; finishing it"
        + (f" (with its {' '.join(taken)} where not given now)" if taken else ""),
        highlight=False,
        markup=False,
    )
    return given


def _reanalyse(run_dir: Path, given: dict[str, Any], report: bool) -> tuple[int, bool]:
    """One folder; returns how many benchmark rows were skipped reading its benchmark, and
    whether its report was written where one was asked for (or was there)."""
    stored, method = _checked(run_dir, given)
    given = _finishing(run_dir, method, given)
    selection = stored.get("selection")
    sampled: dict[str, Any] = selection if isinstance(selection, dict) else {}
    if given.get("seed") is not None and sampled.get("sample"):  # read as "sampled anew" (QA)
        err_console.print(
            f"note: --seed {given['seed']} seeds the bootstrap only: the items stay the "
            f"{sampled['sample']:,} this run sampled with seed {sampled.get('seed')} (the "
            f"{method} command with --sample {sampled['sample']} --seed {given['seed']} would "
            "sample others)",
            highlight=False,
            markup=False,
        )
    with run_folders_as_written(run_dir):
        if method == "permutation":
            problems = _permutation(run_dir, given, stored)
        else:
            problems = {"membership": _membership, "cap": _cap, "benbench": _benbench}[method](
                run_dir, given
            )
    from ..report.rundata import answered_by_others, load_run

    with run_folders_as_written(run_dir):
        other = answered_by_others(load_run(run_dir).summary)  # (finished: no marker)
    if other is not None:  # said by the run once, then nowhere (QA)
        warn(f"{run_dir}: {other}")
    console.print(f"run folder: {run_dir} (summary.json, items.jsonl)")
    from .report import report_after_run

    # and a report.html already there, redone
    written = report_after_run(run_dir, write=report)
    if method == "benbench":  # what to do next, as the benbench command says it (QA)
        console.print(
            f"card:   contamscope card --run {shell(run_dir)} --out card.md",
            highlight=False,
            soft_wrap=True,
        )
    return problems, written


def _checked(run_dir: Path, given: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(the folder's stored settings, its method) where the options given are its method's;
    else the one-line error. Nothing is written."""
    from ..errors import StoreError
    from ..report.rundata import load_run, refuse_newer
    from ..store import RunDir

    if run_dir.exists() and not run_dir.is_dir():  # (said "no such run folder"; QA)
        raise StoreError(f"{run_dir}: a file, not a run folder (give the folder that holds it)")
    if not run_dir.is_dir():
        raise StoreError(f"{run_dir}: no such run folder")
    stored = RunDir(run_dir).stored_settings()
    if stored is None:
        raise StoreError(f"{run_dir} holds no contamscope run (no settings.json)")
    if (run_dir / "summary.json").is_file():
        with run_folders_as_written(run_dir):
            refuse_newer(load_run(run_dir, interrupted_ok=True), "re-analyse")
    if not isinstance(stored, dict) or not stored.get("method"):  # (said "a None run")
        raise StoreError(
            f"{run_dir / 'settings.json'}: names no method (damaged, or not contamscope's); "
            "the command that wrote the folder, re-run with --overwrite, starts it anew"
        )
    method = str(stored.get("method"))
    if method not in _OPTIONS:
        raise ConfigError(
            f"{run_dir} holds a {method} run; reanalyse reads permutation, membership, cap and "
            "benbench runs"
        )
    wrong = [k for k, v in given.items() if v is not None and k not in _OPTIONS[method]]
    if wrong:
        own = ", ".join(_flag(k) for k in _OPTIONS[method])
        raise ConfigError(f"{_flag(wrong[0])}: not a setting of a {method} run (its own: {own})")
    if method == "cap":  # another task's option was re-analysed without a word (QA)
        from .cap import _TASK_ONLY  # the options the cap command says other tasks ignore

        task = (stored.get("config") or {}).get("task")
        for flag, reader in _TASK_ONLY.items():
            key = flag.lstrip("-").replace("-", "_")
            if given.get(key) is not None and task is not None and reader != task:
                raise ConfigError(
                    f"{_flag(key)}: a setting of {reader}-task CAP runs; this run's task is {task}"
                )
    return stored, method


def _said(n: int, changed: str) -> None:
    err_console.print(f"re-analysed {n} stored items{changed}; nothing scored", highlight=False)


def _permutation(run_dir: Path, given: dict[str, Any], stored: dict[str, Any]) -> int:
    """Re-analyse a permutation run; returns how many benchmark rows were skipped."""
    from ..data import load_benchmark
    from ..errors import DataError
    from ..pipeline import reanalyse_permutation, run_benchmark
    from ..store import RunDir
    from .permutation import check_ties, parse_deltas
    from .summary import print_permutation_summary

    ties, deltas = given["ties"], given["deltas"]
    if ties is not None:
        check_ties(ties)
    parsed: Any = None
    if deltas is not None:
        parsed = "paper" if deltas.strip().lower() == "paper" else parse_deltas(deltas)
    how = run_benchmark(stored)
    if given["benchmark"] is not None:
        how["spec"] = given["benchmark"]
    try:
        loaded = load_benchmark(**how)
    except DataError as exc:
        if given["benchmark"] is not None:
            raise
        raise DataError(
            f"{exc} (the run {run_dir} read its benchmark from there; give --benchmark PATH "
            "where the file is now)"
        ) from None
    list_skipped(loaded.problems, notes=loaded.notes)
    with status("analysing the stored scores ..."):
        outcome = reanalyse_permutation(
            loaded,
            RunDir(run_dir),
            alpha=given["alpha"],
            ties=ties,
            deltas=parsed,
            reference_run=given["reference_run"],
        )
    changed = outcome.summary["timings"].get("reanalysed_records", 0)
    _said(outcome.summary["counts"]["items_selected"], f" ({changed} records' flags changed)")
    print_permutation_summary(outcome.summary)
    return len(loaded.problems)


def _membership(run_dir: Path, given: dict[str, Any]) -> int:
    from ..pipeline import reanalyse_membership
    from ..store import RunDir
    from .membership import print_membership_summary

    outcome = reanalyse_membership(RunDir(run_dir), **_settings("membership", given))
    _said(outcome.resumed, "")
    print_membership_summary(outcome.summary)
    return 0


def _cap(run_dir: Path, given: dict[str, Any]) -> int:
    from ..data.cap import TEMPLATE_FIX
    from ..pipeline import reanalyse_cap
    from ..store import RunDir
    from .cap import print_cap_summary

    outcome = reanalyse_cap(RunDir(run_dir), **_settings("cap", given))
    _said(outcome.resumed, "")
    print_cap_summary(outcome.summary, work=False)  # (the timings are the run's)
    for note in outcome.summary.get("layout_warnings") or []:  # as the run said them (QA)
        warn(note.replace(TEMPLATE_FIX, "; a cap run with --template lays out both alike"))
    plot = run_dir / "pcr_heatmap.png"
    if plot.exists():
        from ..report.cap_heatmap import plot_pcr_heatmap

        try:
            plot_pcr_heatmap([outcome.summary], plot)
            err_console.print(styled("dim", "", "pcr_heatmap.png was in the folder: drawn again"))
        except ImportError:
            err_console.print("pcr_heatmap.png not redrawn: matplotlib is missing")
    return 0


def _benbench(run_dir: Path, given: dict[str, Any]) -> int:
    from ..pipeline import reanalyse_benbench
    from ..store import RunDir
    from .benbench import print_benbench_summary

    outcome = reanalyse_benbench(RunDir(run_dir), **_settings("benbench", given))
    changed = outcome.summary["timings"]["reanalysed_records"]
    _said(outcome.resumed, f" ({changed} records changed)")
    print_benbench_summary(outcome.summary)
    return 0
