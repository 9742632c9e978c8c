"""`contamscope sweep`: the leaderboard experiment, every (model, benchmark) pair a permutation run.

Jobs run model by model (each model is loaded once, on this process or on the Ray workers, for
all its benchmarks). Each pair writes its own run folder under ``--out``; a pair whose folder
holds a summary.json is skipped on a re-run (unless its benchmark changed since: a failed pair,
left off the board), and an unfinished one resumes. The leaderboard
(``contamscope.report``) is built from all finished folders at the end.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import inspect
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..errors import CapabilityError, ConfigError, ContamscopeError, ModelError
from ..executors.base import ClusterTooSmall
from ..store.run import REPLACE_HINT
from ..wording import first_few, md_cell, plural, shell

if TYPE_CHECKING:
    from ..report.leaderboard import BaselineComparison
from .common import (
    EXIT_ROWS_SKIPPED,
    EXIT_SIGNAL,
    EXIT_USER_ERROR,
    MODEL_OPTIONS_HELP,
    TEMPLATE_HELP,
    ReportUnwritten,
    console,
    err_console,
    styled,
    user_errors,
)
from .executor import (
    EXECUTOR_OPT,
    GPUS_PER_WORKER_OPT,
    RAY_ADDRESS_OPT,
    WORKERS_OPT,
    check_model,
    executor_config,
    executor_from,
    served_only,
)
from .permutation import ALPHA_OPT, DELTAS_OPT, TIES_OPT

EPILOG = """
Examples:

  contamscope sweep --models smollm2,hf:./tiny --benchmarks mmlu,./cmb.json --sample 50 --out runs/sweep

  contamscope sweep --models smollm2,gemma3 --benchmarks mmlu --reference-benchmark fresh_questions.csv --sample 200

  contamscope sweep --models hf:Qwen/Qwen2-7B,hf:meta-llama/Llama-3.1-8B --benchmarks mmlu,arc.jsonl --executor ray --ray-address auto --gpus-per-worker 1 --dtype bfloat16

Re-running the same command skips finished pairs and resumes unfinished ones; a finished pair
whose benchmark file changed since fails (--overwrite runs it again). Other --ties, --deltas or
--alpha, or another --reference-benchmark (or none), re-analyse the finished pairs from their
records (nothing is scored) and the board. --dry-run says which pairs would run and how many
option orders they would score, and stops.
Writes OUT/<model>__<benchmark>/ per pair (OUT/reference/<model>__<file>/ per model with
--reference-benchmark), OUT/leaderboard.html and OUT/leaderboard.md.
Exit codes: 0 ok, 2 some pairs failed (listed; OUT/sweep.json says which), the leaderboard could
not be written, or a user error, 3 all ran but input rows were skipped, 4 a pair's verdict found a
leakage signal (with --fail-on-signal), 130 interrupted (re-run to resume).
"""

SHARED = (
    "fmt",
    "split",
    "subjects",
    "limit",
    "sample",
    "seed",
    "template",
    "device",
    "dtype",
    "model_opt",
    "batch_items",
    "max_batch_tokens",
)
"""Permutation options the sweep passes to every job (recorded in OUT/sweep.json, and in each
pair's folder as PAIR_OPTIONS)."""
SPEED_ONLY = frozenset({"batch_items", "max_batch_tokens"})
"""Shared options that change how fast a pair runs, not its numbers."""
PAIR_OPTIONS = "sweep-options.json"


def _differ(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The options (as flags) whose values differ and change the numbers.

    >>> _differ({"limit": 8, "batch_items": 2}, {"limit": 4, "batch_items": 8})
    ['--limit 8 -> 4']
    >>> _differ({"deltas": None}, {"deltas": [-0.1, -0.2]})
    ['--deltas (not given) -> -0.1,-0.2']
    """
    return [
        f"--{k.replace('_', '-')} {_flag_value(old.get(k))} -> {_flag_value(new.get(k))}"
        for k in sorted(set(old) | set(new))
        if k not in SPEED_ONLY and old.get(k) != new.get(k)
    ]


def _flag_value(v: Any) -> str:
    """An option's value as the command line spells it (a list joined by commas)."""
    if v is None:
        return "(not given)"
    return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


@dataclass(frozen=True)
class Job:
    """One (model, benchmark) pair."""

    model: str
    """Model spec."""
    benchmark: str
    """Benchmark name or path."""
    run_dir: Path
    """Its run folder under --out."""
    reference: bool = False
    """A run on the reference benchmark (clean items), not a pair of the board."""


def command(
    models: str = typer.Option(
        ...,
        "--models",
        help="Comma-separated model specs (smollm2, gemma3, local folders or .gguf files, hf:, vllm:, "
        "openai:).",
    ),
    benchmarks: str = typer.Option(
        ..., "--benchmarks", help="Comma-separated benchmarks (mmlu, files, folders, hf:DATASET)."
    ),
    out: Path = typer.Option(Path("runs/sweep"), "--out", "-o", help="Sweep folder."),
    fmt: str | None = typer.Option(None, "--format", help="Benchmark format for every benchmark."),
    split: str | None = typer.Option(
        None,
        "--split",
        help="Split of benchmark folders: a sub-folder, or the files named by split.",
    ),
    subjects: str | None = typer.Option(
        None,
        "--subjects",
        help="Subjects to keep, in every benchmark of the sweep (each must have them; sweep benchmarks of other subjects apart).",
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="First N items per benchmark."),
    sample: int | None = typer.Option(
        None, "--sample", min=1, help="Seeded random sample of N items per benchmark."
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed for --sample and Monte Carlo orders."),
    template: str = typer.Option("paper", "--template", help=TEMPLATE_HELP),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32, bfloat16, float16."),
    model_opt: list[str] | None = typer.Option(
        None, "-M", help="(Every model.) " + MODEL_OPTIONS_HELP
    ),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="Score cache folder."),
    batch_items: int | None = typer.Option(
        None, "--batch-items", min=1, help="Items per scoring batch (default 32, 256 on a GPU)."
    ),
    max_batch_tokens: int | None = typer.Option(
        None, "--max-batch-tokens", min=64, help="Token budget of one forward pass."
    ),
    report: bool = typer.Option(False, "--report", help="Also write each run's HTML report."),
    fail_on_signal: bool = typer.Option(
        False,
        "--fail-on-signal",
        help="Exit with code 4 when a pair's verdict finds a leakage signal (a gate for CI; "
        "the board is written first; a failed pair's 2 comes before it).",
    ),
    ties: str = TIES_OPT,
    deltas: str | None = DELTAS_OPT,
    alpha: float = ALPHA_OPT,
    reference_benchmark: str | None = typer.Option(
        None,
        "--reference-benchmark",
        help="Items known to be clean (e.g. questions written after the models' training): "
        "each model is run on them too (OUT/reference/), and every pair's Algorithm 2 gets a "
        "false-positive rate measured there (the permutation test's --reference-run).",
    ),
    baseline: str | None = typer.Option(
        None,
        "--baseline",
        help="One of --models (e.g. the base model of fine-tuned copies): at the end, compare "
        "every other model with it on each benchmark, item by item (contamscope compare; "
        "Holm over the comparisons); writes OUT/compare.md and OUT/compare/*.html, and lists "
        "them under the board.",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Start every pair afresh (and accept changed options)."
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Say what the sweep would do (each pair's state, items and orders to score) and "
        "stop: no model is loaded, nothing is written.",
    ),
    executor: str = EXECUTOR_OPT,
    ray_address: str | None = RAY_ADDRESS_OPT,
    workers: int | None = WORKERS_OPT,
    gpus_per_worker: float = GPUS_PER_WORKER_OPT,
) -> None:
    """Scan every model on every benchmark (permutation test), then build the leaderboard."""
    run(**locals())


REPORT_UNWRITTEN = "report not written"
"""What a pair's status says where its report (--report, or one there before) could not be
written: the sweep ends with exit code 2, its board still built."""


def _split(text: str, option: str) -> list[str]:
    """The values of a comma list; one given twice, also as two paths of one file or folder
    (``data/x.csv,/abs/data/x.csv``: it ran twice and counted twice in the board's
    correction; QA), is refused."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ConfigError(f"{option}: give at least one value")
    if len(set(parts)) != len(parts):
        raise ConfigError(f"{option}: a value is listed twice")
    seen: dict[str, str] = {}
    for v in parts:
        first = seen.setdefault(_place(v, option == "--models"), v)
        if first != v:
            raise ConfigError(f"{option}: {first} and {v} are the same (listed twice)")
    return parts


def _place(value: str, model: bool) -> str:
    """What a sweep's value names: a local file or folder by its real path (a model's with or
    without ``hf:``), anything else (a name, a hub id, a dataset) as typed."""
    rest = value[3:] if model and value.startswith("hf:") else value
    path = Path(rest).expanduser()
    return os.path.realpath(path) if path.exists() else value


def _held_is(held: Any, value: str, key: str) -> bool:
    """Whether a pair folder's recorded ``key`` (model, or benchmark: absolute, or as typed by
    older versions) is the sweep's ``value``."""
    if held == value:
        return True
    return (
        key == "benchmark" and isinstance(held, str) and _place(held, False) == _place(value, False)
    )


def _pairs_held(out: Path, name: str, key: str) -> Iterator[tuple[Path, Any]]:
    """Existing pair folders of ``out`` whose model (``key`` "model") or benchmark part
    matches the glob ``name``, each with the ``key`` of its settings (unreadable ones left out)."""
    pattern = f"*__{name}" if key == "benchmark" else f"{name}__*"
    for folder in sorted(out.glob(pattern)) if out.is_dir() else ():
        try:
            yield folder, json.loads((folder / "settings.json").read_text("utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue


def _holder(out: Path, name: str, key: str, values: list[str]) -> str | None:
    """Which of ``values`` (models or benchmarks, ``key`` of a run's settings) an existing pair
    folder of ``out`` named with ``name`` was run with; None where none was."""
    for _, h in _pairs_held(out, glob.escape(name), key):
        for v in values:
            if _held_is(h, v, key):
                return v
    return None


def _hashed_holder(out: Path, bare: str, key: str, value: str) -> str | None:
    """The name (``bare-<hash>``) of an existing pair folder of ``out`` run with ``value``
    where a sweep of more values sharing ``bare`` named it so; None where there is none. A
    sweep re-run with one of two same-named models named its pairs anew and ran them again,
    calling its own finished pairs "of models not in this sweep" (docs QA)."""
    hashed = glob.escape(bare) + "-" + "[0-9a-f]" * 6
    for folder, held in _pairs_held(out, hashed, key):
        if _held_is(held, value, key):
            return folder.name.split("__")[-1 if key == "benchmark" else 0]
    return None


def plan_jobs(models: list[str], benchmarks: list[str], out: Path) -> list[Job]:
    """Model-major job list; folder names made unique with a short hash when slugs collide,
    except for the one whose folders a sweep on ``out`` named before the collision (a
    benchmark added with the same folder name renamed the finished pairs of the first one,
    which then ran again; QA)."""
    from .common import slug

    names = {m: slug(m, parent_of_generic=False) for m in models} | {
        b: slug(b, parent_of_generic=False) for b in benchmarks
    }  # the names sweeps always gave their pair folders
    for values, key in ((models, "model"), (benchmarks, "benchmark")):
        seen: dict[str, list[str]] = {}
        for v in values:
            seen.setdefault(names[v], []).append(v)
        for bare, group in seen.items():
            if len(group) < 2:  # its pairs may carry a hash from a sweep of more values
                hashed = _hashed_holder(out, bare, key, group[0])
                if hashed is not None and _holder(out, bare, key, group) is None:
                    names[group[0]] = hashed
                continue
            kept = _holder(out, bare, key, group)
            ids = _identities(group)
            for v in group:
                if v == kept:
                    continue
                names[v] = f"{bare}-{_short_hash(_identity(v, ids, out, bare, key))}"
    return [Job(m, b, out / f"{names[m]}__{names[b]}") for m in models for b in benchmarks]


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def _identities(values: list[str]) -> dict[str, list[str]]:
    """Per value whose folder name collides with another's, the texts that may tell it apart
    (shortest first), in a form that survives moving: a local path (``hf:`` prefix aside) by
    its last 2, 3, ... parts, so a sweep moved with its models and benchmarks, or grown by
    one from another folder, names its pairs as before (the path as typed did not: every pair
    ran again; QA); anything else (a hub id) as typed.

    >>> _identities(["/a/x/q.csv", "hf:/m/one/tiny"])["hf:/m/one/tiny"]
    ['hf:one/tiny', 'hf:m/one/tiny']
    >>> _identities(["Qwen/Qwen2", "./Qwen2", "../m/Qwen2"])
    {'Qwen/Qwen2': ['Qwen/Qwen2'], './Qwen2': ['./Qwen2'], '../m/Qwen2': ['m/Qwen2']}
    """
    out: dict[str, list[str]] = {}
    for v in values:
        prefix, sep, rest = v.partition(":")
        if not sep or not prefix.isalnum() or len(prefix) < 2:  # (a drive letter is no prefix)
            prefix, rest = "", v
        local = rest.startswith(("/", "./", "../", "~")) or Path(rest).expanduser().exists()
        if not local:  # a hub id, a URL: as typed
            out[v] = [v]
            continue
        path = os.path.expanduser(rest)
        # a relative path by its parts as typed (not below the folder the command ran in,
        # whose name changes when the sweep moves)
        parts = [p for p in Path(os.path.normpath(path)).parts if p not in (os.sep, ".", "..")]
        head = f"{prefix}:" if prefix else ""
        out[v] = [head + "/".join(parts[-k:]) for k in range(2, len(parts) + 1)] or [v]
    return out


def _identity(v: str, ids: dict[str, list[str]], out: Path, bare: str, key: str) -> str:
    """Which of ``v``'s identities (:func:`_identities`) names its pair folders: one a sweep
    on ``out`` already named folders by (no other value of the group sharing it), else the
    shortest that no other value of the group shares, else the spec as typed (the name
    before the change of 2026-11-29, kept where a sweep used it)."""
    others = [x for w, xs in ids.items() if w != v for x in xs]
    for cand in [*ids[v], v]:
        name = glob.escape(f"{bare}-{_short_hash(cand)}")
        pattern = f"*__{name}" if key == "benchmark" else f"{name}__*"
        if cand not in others and out.is_dir() and any(out.glob(pattern)):
            return cand
    return next((c for c in ids[v] if c not in others), v)


def _refuse_other_options(out: Path, shared: dict[str, Any], overwrite: bool) -> None:
    """ConfigError when ``out`` holds a sweep run with other options (without --overwrite)."""
    path = out / "sweep.json"
    if path.exists() and not overwrite:
        try:
            old = _read_json(path).get("options", {})
        except (OSError, json.JSONDecodeError):
            raise ConfigError(f"{path}: unreadable; use --overwrite") from None
        changed = _differ(old, shared)
        if changed:
            raise ConfigError(
                f"{out} holds a sweep with other options ({', '.join(changed)}); " + REPLACE_HINT
            )


SWEEP_FILES = frozenset(
    {"sweep.json", "leaderboard.html", "leaderboard.md", "compare.md", "compare", "reference"}
)
"""What a sweep writes into --out beside its pairs' run folders."""


def _check_out(out: Path, overwrite: bool) -> None:
    """--out can be a sweep's folder: a folder (or none yet) that holds a sweep, or nothing
    (hidden files aside). A folder of other files was written into (leaderboard.html beside
    the user's own files), and a dry run did not check --out at all."""
    from ..paths import check_output_folder

    check_output_folder(out)
    if overwrite or not out.is_dir() or (out / "sweep.json").exists():
        return
    foreign = sorted(
        p.name
        for p in out.iterdir()
        if not p.name.startswith(".")
        and p.name not in SWEEP_FILES
        and not (p.is_dir() and (p / "settings.json").exists())  # a pair's run folder
    )
    if foreign:
        raise ConfigError(
            f"--out {out}: not a sweep folder and not empty (it holds {first_few(foreign)}); "
            "give a new or empty folder (--overwrite writes into it anyway)"
        )


def _check_manifest(out: Path, shared: dict[str, Any], overwrite: bool) -> None:
    path = out / "sweep.json"
    _refuse_other_options(out, shared, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    from ..paths import replace_text

    replace_text(path, json.dumps({"options": shared}, indent=2) + "\n")


def _job_kwargs(job: Job, kw: dict[str, Any], reference: Path | None = None) -> dict[str, Any]:
    """The permutation command's defaults, with the sweep's shared options and this pair
    (``reference``: its model's finished run on the reference benchmark). A reference job
    reads its benchmark whole, in its own format (no --subjects, --limit, --sample, --format:
    its items are others; --sample cut the clean items, widening the false-positive rate's
    interval, QA), and a file takes no --split."""
    from . import permutation

    params = inspect.signature(permutation.command).parameters
    args = {name: getattr(p.default, "default", p.default) for name, p in params.items()}
    args.update({k: kw[k] for k in SHARED})
    args.update(
        model=job.model,
        benchmark=job.benchmark,
        out=job.run_dir,
        cache_dir=kw["cache_dir"],
        overwrite=kw["overwrite"],
        report=kw["report"],
        reference_run=reference,
        sweep_pair=True,  # (its messages say no exit code: the sweep's comes at its end)
        **{k: kw[k] for k in ANALYSIS},
    )
    if job.reference:
        args.update(subjects=None, limit=None, sample=None, fmt=None)
        if Path(job.benchmark).is_file():
            args["split"] = None
    return args


def reference_jobs(models: list[str], benchmark: str, out: Path) -> dict[str, Job]:
    """Each model's run on the reference benchmark, in OUT/reference/ (off the board; a pair's
    folder name always holds ``__``, so ``reference`` names none)."""
    return {
        j.model: Job(j.model, j.benchmark, out / "reference" / j.run_dir.name, reference=True)
        for j in plan_jobs(models, [benchmark], out)
    }


ANALYSIS = ("ties", "deltas", "alpha")
"""Permutation options only the analysis depends on: a finished pair analysed with other
values is re-analysed from its records (nothing scored), not run again or refused."""
_DEFAULTS: dict[str, Any] = {"ties": "not_leaked", "deltas": None, "alpha": 0.05}
"""Their values in a summary that does not name them."""


def _reanalysed(job: Job, kw: dict[str, Any], reference: Path | None = None) -> str | None:
    """Re-analyse a finished pair whose analysis settings (or reference run) differ from the
    sweep's; returns what changed (None: nothing to do)."""
    from ..pipeline import reanalyse_permutation
    from ..store import RunDir
    from .permutation import load_for, parse_deltas

    changed = _analysis_changes(job, kw, reference)
    if changed:
        reanalyse_permutation(
            load_for(_job_kwargs(job, kw)),
            RunDir(job.run_dir),
            alpha=kw["alpha"],
            ties=kw["ties"],
            deltas=parse_deltas(kw["deltas"]) or "paper",
            reference_run=reference or "none",
        )
        if kw["report"] or (job.run_dir / "report.html").is_file():  # else it shows the old
            from .report import write_report_or_warn

            if write_report_or_warn(job.run_dir, f"{job.run_dir}: ") is None:
                changed += f"; {REPORT_UNWRITTEN}"
    return changed


def _analysis_changes(job: Job, kw: dict[str, Any], reference: Path | None = None) -> str | None:
    """How a finished pair's analysis settings and reference run differ from the sweep's
    (None: they do not)."""
    from .permutation import parse_deltas

    try:
        summary = json.loads((job.run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # (an unreadable folder fails in its status)
    had = {k: (summary.get("config") or {}).get(k, v) for k, v in _DEFAULTS.items()}
    deltas = parse_deltas(kw["deltas"])
    want = {"ties": kw["ties"], "deltas": list(deltas) if deltas else None, "alpha": kw["alpha"]}
    changed = [
        f"--{k} {_flag_value(had[k])} -> {_flag_value(want[k])}"
        for k in ANALYSIS
        if want[k] != had[k]
    ]
    ran = (summary.get("reference_run") or {}).get("run")
    wanted = str(reference.resolve()) if reference is not None else None
    if ran != wanted:
        changed.append(f"reference run {_shown(ran)} -> {_shown(wanted)}")
    return "; ".join(changed) or None


def _shown(run: str | None) -> str:
    """A reference run as the sweep names it: its folder under OUT/reference/, or none."""
    return "none" if run is None else Path(run).name


@user_errors
def run(**kw: Any) -> None:
    from ..data.loaders import check_benchmark_spec
    from ..paths import write_text_atomic
    from ..store import RunDir
    from .permutation import check_ties, parse_deltas, scan

    check_ties(kw["ties"])
    if not 0 < kw["alpha"] < 1:
        raise ConfigError(f"--alpha {kw['alpha']}: must be between 0 and 1")
    parse_deltas(kw["deltas"])  # a typo found before any model loads
    models = _split(kw["models"], "--models")
    benchmarks = _split(kw["benchmarks"], "--benchmarks")
    for m in models:  # a typo in the last model is found before hours of scoring
        check_model(kw, m)
    for b in benchmarks:  # a typo in the last benchmark is found before hours of scoring
        check_benchmark_spec(b, split=kw["split"], format=kw["fmt"])
    out: Path = kw["out"]
    if kw.get("baseline") is not None and kw["baseline"] not in models:
        raise ConfigError(f"--baseline {kw['baseline']}: not one of --models ({', '.join(models)})")
    if kw.get("baseline") is not None and len(models) < 2:
        raise ConfigError(
            "--baseline: give at least one other model in --models to compare with it"
        )
    jobs = plan_jobs(models, benchmarks, out)
    if kw["subjects"]:  # a benchmark without those subjects failed only after the others ran
        from .permutation import load_for

        for b in benchmarks:
            load_for(_job_kwargs(Job(models[0], b, out), kw))
    refs = _reference_plan(kw, models, benchmarks)
    if not served_only(kw):
        executor_config(kw)  # an unknown --executor or a bad combination: before any pair
    shared = {k: kw[k] for k in SHARED}
    _check_out(out, kw["overwrite"])
    if kw["dry_run"]:
        _dry_run(_with_references(jobs, refs), kw, shared, refs)
        if kw.get("baseline") is not None:
            console.print(
                f"then compares {plural(len(models) - 1, 'other model')} with the baseline "
                f"{kw['baseline']} on each benchmark ({out / 'compare.md'})",
                highlight=False,
            )
        return
    held = RunDir(out).hold()  # two sweeps on one folder ran each other's pairs as failed
    _check_manifest(out, shared, kw["overwrite"])
    every = _with_references(jobs, refs)  # a model's reference run before its pairs
    status: dict[Job, str] = {}
    todo = [j for j in every if kw["overwrite"] or not (j.run_dir / "summary.json").exists()]
    hashes: dict[str, str] = {}
    for j in every:
        if j not in todo:
            status[j] = _finished_status(j, kw, hashes)
            if status[j].startswith("finished earlier"):
                _restore_pair_options(j, shared)
    console.print(
        f"sweep: {plural(len(models), 'model')} x {plural(len(benchmarks), 'benchmark')} = "
        f"{plural(len(jobs), 'pair')}"
        + (f" (and {plural(len(refs), 'reference run')})" if refs else "")
        + f", {len(every) - len(todo)} finished earlier, {len(todo)} to run "
        f"({'local' if served_only(kw) else kw['executor']} executor)",
        highlight=False,
    )
    failed_models: dict[str, str] = {}

    def reference_of(job: Job) -> Path | None:
        """The finished reference run a pair is analysed with (ContamscopeError: it failed)."""
        ref = refs.get(job.model)
        if ref is None or job.reference:
            return None
        if status.get(ref, "").startswith("failed"):
            raise ConfigError(f"its model's reference run failed ({ref.run_dir})")
        return ref.run_dir

    if todo:
        with executor_from(kw) as ex:
            for n, job in enumerate(todo, 1):
                console.rule(
                    f"[{n}/{len(todo)}] {job.model} on {job.benchmark}"
                    + (" (reference)" if job.reference else "")
                )
                if job.model in failed_models:
                    status[job] = f"failed: {failed_models[job.model]}"
                    continue
                try:
                    try:
                        scan(_job_kwargs(job, kw, reference_of(job)), ex)
                        status[job] = "done"
                    except ReportUnwritten:  # (said by the pair)
                        status[job] = f"done ({REPORT_UNWRITTEN})"
                    except SystemExit as exc:
                        if exc.code != EXIT_ROWS_SKIPPED:
                            raise
                        status[job] = "done (input rows skipped)"
                    write_text_atomic(
                        job.run_dir / PAIR_OPTIONS, json.dumps({"options": shared}, indent=2)
                    )
                except ContamscopeError as exc:
                    if isinstance(exc, ClusterTooSmall):  # no pair can run: said once
                        raise
                    err_console.print(  # (named: a bare "error:" read as the sweep's own; QA)
                        styled(
                            "bold red", f"pair failed ({job.model} on {job.benchmark}):", f" {exc}"
                        ),
                        highlight=False,
                    )
                    status[job] = f"failed: {exc}"
                    if isinstance(exc, (ModelError, CapabilityError)):
                        failed_models.setdefault(job.model, str(exc))  # skip its other pairs
    for j in every:  # finished earlier: analysed again if the sweep's analysis differs
        if j in todo or not status[j].startswith("finished earlier"):
            continue
        try:
            changed = _reanalysed(j, kw, reference_of(j))
        except ContamscopeError as exc:
            status[j] = f"failed: re-analysing it: {exc}"
            continue
        if changed:
            status[j] = f"finished earlier (re-analysed: {changed}; nothing scored)"
    _print_status(every, status)
    signalled = _record_pairs(out, every, status)
    finished = [  # a pair whose benchmark changed since is not on the board
        j.run_dir
        for j in jobs
        if (j.run_dir / "summary.json").exists() and not status.get(j, "").startswith("failed")
    ]
    failed = [(j, s) for j, s in status.items() if s.startswith("failed") and not j.reference]
    compared: list[BaselineComparison] = []
    if kw.get("baseline") is not None:
        compared = _compare_with_baseline(jobs, set(finished), kw["baseline"], out)
    else:
        _remove_earlier_comparisons(out)
    unwritten = False  # a board that could not be written is an exit code, not a success
    if finished:
        unwritten = not _leaderboard(finished, out, failed, compared)
        _say_reference_rates([j for j in jobs if j.run_dir in set(finished)])
    else:  # an earlier sweep's board would stand for this one's pairs, none of which finished
        stale = [p for p in (out / "leaderboard.md", out / "leaderboard.html") if p.exists()]
        for p in stale:
            p.unlink()
        if stale:
            console.print(
                f"no pair finished: the earlier board ({', '.join(p.name for p in stale)}) "
                "is removed; it showed pairs of another sweep",
                highlight=False,
                markup=False,
            )
    others = sorted(
        p.parent for p in out.glob("*/summary.json") if p.parent not in {j.run_dir for j in jobs}
    )
    if others:  # a sweep re-run with fewer models or benchmarks: their pairs stay on disk
        console.print(
            f"{plural(len(others), 'other finished run')} in {out} "
            f"({', '.join(p.name for p in others[:3])}{', ...' if len(others) > 3 else ''}) "
            f"{'is' if len(others) == 1 else 'are'} of models or benchmarks not in this sweep "
            f"and not on its board; `contamscope leaderboard {shell(out)}/*/` ranks every run there",
            highlight=False,
            markup=False,
        )
    held.close()
    failed_any = any(s.startswith("failed") for s in status.values())
    if kw["fail_on_signal"] and signalled:  # (said also where a failed pair's 2 wins: QA)
        code = (
            f"exit code {EXIT_USER_ERROR}: a pair failed"
            if failed_any
            else f"exit code {EXIT_USER_ERROR}: the leaderboard was not written"
            if unwritten
            else f"exit code {EXIT_SIGNAL}"
        )
        err_console.print(
            styled(
                "bold red",
                "leakage signal:",
                f" {' and '.join(signalled)} ({code}; --fail-on-signal)",
            ),
            highlight=False,
        )
    reports = [j for j in every if REPORT_UNWRITTEN in status.get(j, "")]
    if reports:
        err_console.print(
            styled(
                "yellow",
                f"{plural(len(reports), 'pair report')} not written",
                f" (named above; exit code {EXIT_USER_ERROR})",
            ),
            highlight=False,
        )
    if failed_any or unwritten or reports:
        raise SystemExit(EXIT_USER_ERROR)
    if kw["fail_on_signal"] and signalled:
        raise SystemExit(EXIT_SIGNAL)
    if any("rows skipped" in s for s in status.values()):
        raise SystemExit(EXIT_ROWS_SKIPPED)


def _record_pairs(out: Path, jobs: list[Job], status: dict[Job, str]) -> list[str]:
    """Write each pair's outcome into OUT/sweep.json beside the options (``pairs``: model,
    benchmark, reference, run_dir, status as the table says it, and a finished pair's verdict
    label and signal), for scripts: it was in the printed table only (CI QA). Returns the
    pairs (model on benchmark) whose verdict found a signal."""
    from ..paths import relative_name, replace_text

    pairs, signalled = [], []
    for j in jobs:
        said = status.get(j, "not run")
        entry: dict[str, Any] = {
            "model": j.model,
            "benchmark": j.benchmark,
            "reference": j.reference,
            "run_dir": relative_name(j.run_dir, out),  # (reference/NAME for a reference run)
            "status": said,
            "failed": said.startswith("failed"),
        }
        summary_path = j.run_dir / "summary.json"
        if not entry["failed"] and summary_path.is_file():
            try:
                summary = json.loads(summary_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                summary = None
            verdict = summary.get("verdict") if isinstance(summary, dict) else None
            if isinstance(verdict, dict):
                entry["verdict"] = verdict.get("label")
                entry["signal"] = verdict.get("signal")
                if verdict.get("signal") is True and not j.reference:
                    signalled.append(f"{j.model} on {j.benchmark}")
        pairs.append(entry)
    path = out / "sweep.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return signalled  # (written by _check_manifest; unreadable now: the table says it all)
    replace_text(path, json.dumps({**manifest, "pairs": pairs}, indent=2) + "\n")
    return signalled


def _say_reference_rates(pairs: list[Job]) -> None:
    """Each model's Algorithm 2 false-positive rate measured on its clean reference items (the
    same for all its pairs: one reference run per model); it was in each pair's summary only,
    shown nowhere by the sweep (journey)."""
    from ..detectors.verdict import pct_text

    lines: dict[str, str] = {}
    for j in pairs:
        if j.model in lines:
            continue
        try:
            summary = json.loads((j.run_dir / "summary.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        rates = [
            f"delta {delta}: {r['reference_count']} of {r['reference_n']} "
            f"({pct_text(r['reference_rate'])}, 95% CI {pct_text(r['reference_ci'][0])}-"
            f"{pct_text(r['reference_ci'][1])})"
            for delta, d in ((summary.get("statistics") or {}).get("alg2") or {}).items()
            if isinstance(r := d.get("reference"), dict) and r.get("reference_ci")
        ]
        if rates:
            lines[j.model] = "; ".join(rates)
    for model, text in lines.items():
        console.print(
            f"Algorithm 2's false-positive rate on {model}'s clean reference items: {text}",
            highlight=False,
            markup=False,
        )


def _reference_plan(kw: dict[str, Any], models: list[str], benchmarks: list[str]) -> dict[str, Job]:
    """Each model's reference job (empty without --reference-benchmark); the reference
    benchmark is read now, so a typo fails before any model loads."""
    spec = kw.get("reference_benchmark")
    if spec is None:
        return {}
    from .permutation import load_for

    if spec in benchmarks:
        raise ConfigError(
            f"--reference-benchmark {spec}: one of --benchmarks; reference items must be others"
        )
    refs = reference_jobs(models, spec, kw["out"])
    load_for(_job_kwargs(next(iter(refs.values())), kw))
    return refs


def _with_references(jobs: list[Job], refs: dict[str, Job]) -> list[Job]:
    """The jobs with each model's reference job first (its pairs are analysed with it)."""
    out: list[Job] = []
    for j in jobs:
        ref = refs.get(j.model)
        if ref is not None and ref not in out:
            out.append(ref)
        out.append(j)
    return out


def _stored_records(run_dir: Path, ids: set[str]) -> int:
    """Items of ``ids`` an unfinished pair's folder holds records of (0 when none): a line
    repeated, damaged, or of an item no longer selected is none (the dry run counted lines,
    said "4 of 4 items stored" of one item's record written 4 times, and the run scored 3;
    mutation QA)."""
    found: set[str] = set()
    try:
        with (run_dir / "items.jsonl").open("rb") as f:
            for line in f:
                try:
                    rec_id = json.loads(line)["id"]
                except (ValueError, TypeError, KeyError, RecursionError):
                    continue
                if isinstance(rec_id, str) and rec_id in ids:
                    found.add(rec_id)
    except OSError:
        return 0
    return len(found)


def _dry_run(
    jobs: list[Job], kw: dict[str, Any], shared: dict[str, Any], refs: dict[str, Job]
) -> None:
    """What the sweep would do, from the benchmarks' text and the run folders alone."""
    from ..perturb import get_template
    from ..pipeline import PermutationConfig
    from ..pipeline.survey import survey_permutation
    from .common import Table, pick_items
    from .permutation import load_for

    _refuse_other_options(kw["out"], shared, kw["overwrite"])
    config = PermutationConfig(template=get_template(kw["template"]), seed=kw["seed"])
    per_benchmark: dict[str, dict[str, Any]] = {}
    selected: dict[str, set[str]] = {}  # each benchmark's selected item ids
    hashes: dict[str, str] = {}
    # (the benchmark's table of writers' conventions may go into the cache: a derived table,
    # computed again if it is gone, not a result; QA read "nothing written" as a promise)
    table = Table(title="sweep (dry run: no model loaded, nothing scored, no run folder written)")
    for col in ("model", "benchmark", "state", "items", "orders to score", "run folder"):
        table.add_column(col, overflow="fold", justify="right" if "orders" in col else "left")
    total = to_run = 0
    for job in jobs:
        ref = refs.get(job.model)
        reference = ref.run_dir if ref is not None and not job.reference else None
        if job.benchmark not in per_benchmark:
            args = _job_kwargs(job, kw)  # a reference job's: its items whole
            loaded = load_for(args)
            items = pick_items(loaded.items, args, job.benchmark)
            per_benchmark[job.benchmark] = survey_permutation(loaded, items, config)
            selected[job.benchmark] = {it.id for it in items}
        found = per_benchmark[job.benchmark]
        n, orders = found["counts"]["items_selected"], found["orders"]["total"]
        finished = (job.run_dir / "summary.json").exists() and not kw["overwrite"]
        if finished:
            state, left = _finished_status(job, kw, hashes), 0
            if state.startswith("failed"):
                state = state.replace("failed: ", "would fail: ", 1)
            elif changes := _analysis_changes(job, kw, reference):
                state = f"finished earlier (would be re-analysed: {changes})"
        else:
            done = 0 if kw["overwrite"] else _stored_records(job.run_dir, selected[job.benchmark])
            state = f"resumes: {done:,} of {n:,} items stored" if done else "to run"
            left = round(orders * (n - done) / n) if n else 0
            to_run += 1
        total += left
        table.add_row(
            job.model,
            job.benchmark + (" (reference)" if job.reference else ""),
            state,
            f"{n:,}",
            f"{left:,}" if left else "-",
            str(job.run_dir),
        )
    console.print(table)
    console.print(
        (
            f"{to_run} of {len(jobs)} runs to do (pairs and reference runs)"
            if refs
            else f"{plural(to_run, 'pair')} to run of {len(jobs)}"
        )
        + f", about {total:,} option orders to score "
        "(a resumed pair's share by its items); `contamscope inspect --model M --measure N` "
        "times one model on one benchmark",
        highlight=False,
    )


def _read_json(path: Path) -> Any:
    """The JSON in the file ``path``; OSError where it is no regular file (a link there to a
    named pipe hung the sweep in the read; review QA)."""
    if not path.is_file():
        raise OSError(f"{path}: not a file")
    return json.loads(path.read_text(encoding="utf-8"))


def _restore_pair_options(job: Job, shared: dict[str, Any]) -> None:
    """A finished pair's options file written again where it is missing or unreadable: a kill
    between a pair's summary and this file left the pair without it for good, so without its
    own guard against a sweep with other options (kill QA). ``shared`` are this sweep's, which
    its sweep.json's matched."""
    from ..paths import replace_text

    path = job.run_dir / PAIR_OPTIONS
    try:
        _read_json(path)["options"]
    except (OSError, ValueError, KeyError, TypeError):
        with contextlib.suppress(OSError):  # (a link is replaced, not written through; where
            # it cannot be written, the sweep's sweep.json still stands for the pair's options)
            replace_text(path, json.dumps({"options": shared}, indent=2))


def _finished_status(job: Job, kw: dict[str, Any], hashes: dict[str, str]) -> str:
    """Status of a pair finished by an earlier sweep: still valid, or its benchmark changed
    since (a failure: its numbers are of other data; --overwrite runs it again)."""
    from ..backends.hf import local_identities
    from .permutation import load_for

    try:
        settings = _read_json(job.run_dir / "settings.json")
        summary = _read_json(job.run_dir / "summary.json")
    except (OSError, ValueError):
        return "failed: unreadable run folder (--overwrite runs it again)"
    if job.benchmark not in hashes:  # read as the pair's own run reads it
        hashes[job.benchmark] = load_for(_job_kwargs(job, kw)).content_hash
    if settings.get("benchmark_hash") != hashes[job.benchmark]:
        return "failed: the benchmark changed since this pair ran (--overwrite runs it again)"
    identities = local_identities(job.model)  # now's, or the one it had before (its path in it)
    ran = str(settings.get("model_fingerprint") or "").split("|")[0]
    if identities is not None and ran not in identities:
        return (
            "failed: the model's files changed since this pair ran, or it ran before "
            "contamscope identified models by their files' contents (--overwrite runs it again)"
        )
    try:  # a pair run by another sweep on this folder (--overwrite with other options)
        ran_with = _read_json(job.run_dir / PAIR_OPTIONS)["options"]
    except (OSError, ValueError, KeyError, TypeError):
        ran_with = None  # run before pairs recorded their options: sweep.json stands for it
    changed = _differ(ran_with, {k: kw[k] for k in SHARED}) if ran_with is not None else []
    if changed:
        return (
            f"failed: it ran with other options ({'; '.join(changed)}; --overwrite runs it again)"
        )
    if (summary.get("counts") or {}).get("rows_skipped"):
        return "finished earlier (skipped; input rows skipped)"
    return "finished earlier (skipped)"


def _print_status(jobs: list[Job], status: dict[Job, str]) -> None:
    from .common import Table

    table = Table(title="sweep", show_lines=False)
    for col in ("model", "benchmark", "status", "run folder"):
        table.add_column(col, overflow="fold")
    for j in jobs:
        name = j.benchmark + (" (reference)" if j.reference else "")
        table.add_row(j.model, name, status.get(j, "not run"), str(j.run_dir))
    console.print(table)


def _leaderboard(
    run_dirs: list[Path],
    out: Path,
    failed: list[tuple[Job, str]],
    compared: Sequence[BaselineComparison] = (),
) -> bool:
    """Write the board of the finished pairs; the failed pairs are named under it as left out
    (with their reason), not silently missing; the comparisons with a baseline go under it.
    False where the board could not be written (said; the sweep exits 2, its pairs are kept)."""
    from ..paths import check_output_file
    from ..report import write_leaderboard
    from ..report.leaderboard import LeftOut

    def left() -> list[LeftOut]:  # a fresh list per page: each call appends its own left-outs
        return [LeftOut(j.run_dir, f"{j.model} on {j.benchmark}: {why}") for j, why in failed]

    for name in ("leaderboard.md", "leaderboard.html"):  # the sweep's own files: a link there
        if (out / name).is_symlink():  # is replaced, whatever it names (review QA)
            (out / name).unlink()
    try:  # both checked first: one written beside the other refused stood for this sweep's
        for name in ("leaderboard.md", "leaderboard.html"):
            check_output_file(out / name)
        text, _ = write_leaderboard(run_dirs, out / "leaderboard.md", "md", left(), compared)
        console.print(text, highlight=False, markup=False)  # (the comparisons under it)
        write_leaderboard(run_dirs, out / "leaderboard.html", "html", left(), compared)
    except (ContamscopeError, ImportError) as exc:
        said = str(exc).removeprefix("--out ")  # (the sweep's own file, not an --out given)
        err_console.print(
            styled(
                "red",
                "leaderboard not fully written:",
                f" {said} (the pairs are done; `contamscope leaderboard` writes a board of them)",
            ),
            highlight=False,
        )
        return False
    console.print(f"leaderboard: {out / 'leaderboard.html'} and {out / 'leaderboard.md'}")
    return True


def _remove_earlier_comparisons(out: Path) -> None:
    """A sweep re-run without --baseline removes the comparisons an earlier run with one wrote
    (OUT/compare.md, OUT/compare/*.html): its board no longer links them, and they would stand
    beside it as this sweep's (QA)."""
    pages = sorted((out / "compare").glob("*.html"))
    table = out / "compare.md"
    if not pages and not table.is_file():
        return
    table.unlink(missing_ok=True)
    for p in pages:
        p.unlink()
    with contextlib.suppress(OSError):  # a folder the user put more into stays
        (out / "compare").rmdir()
    console.print(
        f"removed the comparisons of an earlier run with --baseline ({table.name}, "
        f"{plural(len(pages), 'page')} in compare/): this run gave none",
        highlight=False,
        markup=False,
    )


def _compare_with_baseline(
    jobs: list[Job], finished: set[Path], baseline: str, out: Path
) -> list[BaselineComparison]:
    """Compare each model's finished pair with the baseline's on the same benchmark (paired
    tests of :mod:`contamscope.pipeline.compare`), Holm-adjust the verdicts' p-values over all
    comparisons, write OUT/compare.md and one page per comparison in OUT/compare/; returns the
    rows (the board lists and prints them)."""
    from ..detectors.cap import holm
    from ..paths import write_text_atomic
    from ..pipeline.compare import compare_runs, verdict_statistics
    from ..report.compare import write_compare
    from ..report.leaderboard import BaselineComparison, comparisons_markdown, comparisons_note

    base = {j.benchmark: j for j in jobs if j.model == baseline and j.run_dir in finished}
    done: list[tuple[Job, dict[str, Any]]] = []
    for j in jobs:
        if j.model == baseline or j.run_dir not in finished or j.benchmark not in base:
            continue
        try:
            result = compare_runs(base[j.benchmark].run_dir, j.run_dir)
        except ContamscopeError as exc:
            err_console.print(
                styled("yellow", "not compared:", f" {j.model} on {j.benchmark}: {exc}"),
                highlight=False,
            )
            continue
        write_compare(result, out / "compare" / f"{j.run_dir.name}.html")
        if verdict_statistics(result)["p_value"] is None:  # it crashed the sweep (docs journey)
            err_console.print(
                styled(
                    "yellow",
                    "not compared:",
                    f" {j.model} on {j.benchmark}: {result['verdict']['text']} (its page: "
                    f"compare/{j.run_dir.name}.html)",
                ),
                highlight=False,
            )
            continue
        done.append((j, result))
    if not done:
        console.print(f"compare: no model could be compared with the baseline {baseline}")
        return []
    # the verdict's tests: on the items without a natural option order, as the compare page
    # (the table tested all paired items and gave another p than its own linked page; journey)
    tested = [verdict_statistics(r) for _, r in done]
    adjusted = holm([st["p_value"] for st in tested])
    rows = []
    for (j, r), st, p_holm in zip(done, tested, adjusted, strict=True):
        toward = st["direction"] if p_holm <= st["alpha"] else "none"
        label = {
            "B": "more drawn than the baseline",
            "A": "less drawn than the baseline",
            "none": "no difference",
        }[toward]
        rows.append(
            BaselineComparison(
                baseline=baseline,
                model=j.model,
                benchmark=j.benchmark,
                items=r["counts"]["paired"] - r["counts"].get("natural_order", 0),
                alg1_difference=st["alg1"]["difference"],
                gap_difference=st["gap"]["difference"],
                p_value=st["p_value"],
                p_holm=p_holm,
                verdict=label,
                page=f"compare/{j.run_dir.name}.html",
            )
        )
    head = (
        f"# Compared with the baseline {md_cell(baseline)}\n\n"
        f"{comparisons_note(rows, markdown=True)}\n\n"
    )
    write_text_atomic(out / "compare.md", head + comparisons_markdown(rows))
    console.print(f"comparisons: {out / 'compare.md'} and {out / 'compare'}/", highlight=False)
    return rows
