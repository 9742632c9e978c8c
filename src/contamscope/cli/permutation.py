"""`contamscope permutation`: the option-permutation leakage test (Ni et al., AAAI 2025)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TextColumn,
    TimeElapsedColumn,
)

from ..errors import ConfigError
from ..executors import Executor
from ..wording import plural
from .common import (
    FAIL_ON_SIGNAL_OPT,
    MODEL_OPTIONS_HELP,
    REPORT_OPT,
    TEMPLATE_HELP,
    check_run_folder,
    console,
    err_console,
    exit_if_skipped,
    has_signal,
    list_skipped,
    open_cache,
    pick_items,
    quiet_progress,
    reading_options,
    slug,
    status,
    styled,
    subject_list,
    time_left_column,
    user_errors,
)
from .executor import (
    EXECUTOR_OPT,
    GPUS_PER_WORKER_OPT,
    RAY_ADDRESS_OPT,
    WORKERS_OPT,
    check_model,
    executor_from,
)
from .report import report_after_run
from .summary import print_permutation_summary

EPILOG = """
Examples:

  contamscope permutation --model smollm2 --benchmark mmlu --sample 50

  contamscope permutation --model hf:./my-model --benchmark ../data/mmlu/test --subjects anatomy,virology --out runs/anat

  contamscope permutation --model hf:Qwen/Qwen2-0.5B --benchmark cmb.json --format cmb-json --dtype bfloat16 --device cuda

  contamscope permutation --model smollm2 --benchmark my.jsonl --format jsonl --fields 'question=stem,options=a|b|c|d,answer=label'

  contamscope permutation --model openai:http://localhost:8000/v1#HuggingFaceTB/SmolLM2-135M-Instruct -M bos='<|endoftext|>' -M max_connections=16

  contamscope permutation --model hf:./my-model --benchmark mmlu --executor ray --ray-address auto --gpus-per-worker 1

Re-running the same command with the same --out resumes: finished items are not scored again.
Other --alpha, --ties or --deltas on a finished folder score nothing: its stored log-probs are
analysed again (`contamscope reanalyse RUN` does the same without loading the model).
Exit codes: 0 ok, 2 user error, 3 finished but some input rows were skipped (see summary.json), 4 a contamination signal under --fail-on-signal, 130 interrupted
(re-run to resume).
"""


# options `inspect` shares: the same benchmark, read and sampled the same way
BENCHMARK_OPT = typer.Option(
    "mmlu",
    "--benchmark",
    "-b",
    help="mmlu (bundled MMLU test set), a file or folder, or hf:DATASET.",
)
FORMAT_OPT = typer.Option(
    None,
    "--format",
    help="Benchmark format (detected when omitted); see `contamscope formats`.",
)
FIELDS_OPT = typer.Option(
    None,
    "--fields",
    help="Field mapping for generic jsonl/csv/json, e.g. 'question=stem,options=a|b|c|d,answer=label' (quoted: | is a shell pipe); options=FIELD for one field that holds them all (a list or an object).",
)
SPLIT_OPT = typer.Option(
    None,
    "--split",
    help="Split of a benchmark folder: a sub-folder (test, dev, val), or the files named by split (test.jsonl, train.jsonl).",
)
SUBJECTS_OPT = typer.Option(None, "--subjects", help="Comma-separated subjects to keep.")
LIMIT_OPT = typer.Option(None, "--limit", min=1, help="Score only the first N items.")
SAMPLE_OPT = typer.Option(None, "--sample", min=1, help="Take a seeded random sample of N items.")
SEED_OPT = typer.Option(0, "--seed", min=0, help="Seed for --sample and Monte Carlo orders.")
TEMPLATE_OPT = typer.Option("paper", "--template", help=TEMPLATE_HELP)
MAX_EXHAUSTIVE_OPT = typer.Option(
    6, "--max-exhaustive", help="All n! orders up to this many options."
)
MC_ORDERS_OPT = typer.Option(
    719, "--mc-orders", help="Random orders scored above --max-exhaustive."
)
DEVICE_OPT = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N.")
DTYPE_OPT = typer.Option(
    "auto",
    "--dtype",
    help="auto (bfloat16 on GPU, float32 on CPU), float32, bfloat16, float16.",
)
DROP_REPEATS_OPT = typer.Option(
    False,
    "--drop-repeats",
    help="Leave out items repeating an earlier item's question and options (before "
    "--limit/--sample); by default they are kept and counted, as in the paper.",
)
# the analysis options `sweep` shares (its finished pairs are re-analysed when they change)
TIES_OPT = typer.Option(
    "not_leaked",
    "--ties",
    help="Algorithm 1: an original tied for the max counts as not_leaked or leaked (the paper's 'log p1 = max(P)' read literally).",
)
DELTAS_OPT = typer.Option(
    None,
    "--deltas",
    help="Algorithm 2 thresholds, comma-separated, or 'paper' (the default: -0.2 up to 4 "
    "options, -0.25 from 5).",
)
ALPHA_OPT = typer.Option(0.05, "--alpha", help="Level of the per-item calibrated rank test.")
STRICT_OPT = typer.Option(
    False, "--strict", help="Fail on the first malformed row instead of skipping it."
)


def check_ties(ties: str) -> None:
    """``--ties`` is one of Algorithm 1's two modes (one line naming the option if not)."""
    if ties not in ("not_leaked", "leaked"):
        raise ConfigError(f"--ties {ties!r}: expected not_leaked or leaked")


def parse_deltas(text: str | None) -> tuple[float, ...] | None:
    """``--deltas`` as numbers; None (the default thresholds) for none or ``paper``, which
    ``reanalyse --deltas paper`` takes too (here it was refused as not a number). An empty
    value (``--deltas="$UNSET"``) is refused, as reanalyse refused it (it ran the paper's
    thresholds unsaid; QA).

    >>> parse_deltas(None), parse_deltas("paper"), parse_deltas("-0.2,-0.1")
    (None, None, (-0.2, -0.1))
    >>> parse_deltas(" ")
    Traceback (most recent call last):
    ...
    contamscope.errors.ConfigError: --deltas ' ': expected comma-separated numbers or 'paper'
    """
    if text is None or text.strip().lower() == "paper":
        return None
    if not text.strip():
        raise ConfigError(f"--deltas {text!r}: expected comma-separated numbers or 'paper'")
    try:
        deltas = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(
            f"--deltas {text!r}: expected comma-separated numbers, e.g. -0.2,-0.17"
        ) from None
    if not all(math.isfinite(d) for d in deltas):  # checked here, before the model loads
        raise ConfigError(f"--deltas {text!r}: every threshold must be a finite number")
    from ..detectors.permutation import check_deltas

    check_deltas(deltas, text)
    return deltas


def command(
    model: str = typer.Option(
        "smollm2",
        "--model",
        "-m",
        help="Model spec: smollm2 or gemma3 (bundled), a local model folder or .gguf file, "
        "hf:PATH_OR_HUB_ID, openai:BASE_URL#MODEL (OpenAI-compatible server; key from "
        "$CONTAMSCOPE_API_KEY or $OPENAI_API_KEY), vllm:PATH_OR_HUB_ID.",
    ),
    benchmark: str = BENCHMARK_OPT,
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Run folder (default: runs/permutation-<model>-<benchmark>)."
    ),
    fmt: str | None = FORMAT_OPT,
    fields: str | None = FIELDS_OPT,
    split: str | None = SPLIT_OPT,
    subjects: str | None = SUBJECTS_OPT,
    limit: int | None = LIMIT_OPT,
    sample: int | None = SAMPLE_OPT,
    seed: int = SEED_OPT,
    template: str = TEMPLATE_OPT,
    max_exhaustive: int = MAX_EXHAUSTIVE_OPT,
    mc_orders: int = MC_ORDERS_OPT,
    ties: str = TIES_OPT,
    deltas: str | None = DELTAS_OPT,
    alpha: float = ALPHA_OPT,
    reference_run: Path | None = typer.Option(
        None,
        "--reference-run",
        help="A finished permutation run of the same model on items known to be clean (fresh "
        "questions): measures Algorithm 2's false-positive rate there and tests the "
        "benchmark's rate against it.",
    ),
    include_non_exchangeable: bool = typer.Option(
        False,
        "--include-non-exchangeable",
        help="Also score items whose options refer to each other ('All of the above').",
    ),
    drop_repeats: bool = DROP_REPEATS_OPT,
    device: str = DEVICE_OPT,
    dtype: str = DTYPE_OPT,
    model_opt: list[str] | None = typer.Option(
        None,
        "-M",
        help=MODEL_OPTIONS_HELP,
    ),
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        help="Score cache folder (default: $CONTAMSCOPE_CACHE_DIR, else the user cache dir).",
    ),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Do not read or write the score cache."
    ),
    strict: bool = STRICT_OPT,
    overwrite: bool = typer.Option(False, "--overwrite", help="Start the run folder afresh."),
    max_batch_tokens: int | None = typer.Option(
        None,
        "--max-batch-tokens",
        min=64,
        help="Token budget of one forward pass (memory bound); default: from free memory on GPU; on CPU 1024 for scoring passes, 4096 for generation.",
    ),
    batch_items: int | None = typer.Option(
        None,
        "--batch-items",
        min=1,
        help="Items per scoring batch (results saved after each); default 32, 256 on a GPU.",
    ),
    detector_workers: int | None = typer.Option(
        None,
        "--detector-workers",
        min=0,
        help="Processes running the per-item detectors while the next batch is scored; 0: "
        "inline (default: inline on CPU; with a GPU or served model 4 per model copy, at most "
        "16 and the spare cores).",
    ),
    report: bool = REPORT_OPT,
    fail_on_signal: bool = FAIL_ON_SIGNAL_OPT,
    executor: str = EXECUTOR_OPT,
    ray_address: str | None = RAY_ADDRESS_OPT,
    workers: int | None = WORKERS_OPT,
    gpus_per_worker: float = GPUS_PER_WORKER_OPT,
) -> None:
    """Has MODEL seen BENCHMARK? Scores every option order of each multiple-choice item."""
    run(**locals())


@user_errors
def run(**kw: Any) -> None:
    check_model(kw)  # before the benchmark's messages
    with executor_from(kw) as executor:
        scan(kw, executor)


def _say_repeats(items: Sequence[Any], drop: bool) -> dict[str, str]:
    """The items repeating an earlier one's question and options, named on stderr."""
    from ..data.overlap import repeats

    found = repeats(items)
    if found:
        rep, first = next(iter(found.items()))
        what = "left out" if drop else "kept and counted; --drop-repeats leaves them out"
        err_console.print(
            styled(
                "yellow",
                "repeats:",
                f" {plural(len(found), 'item')} {'repeats' if len(found) == 1 else 'repeat'} "
                f"the question and options of an earlier item (e.g. {rep} repeats {first}): "
                f"{what}",
            ),
            highlight=False,
            soft_wrap=True,
        )
    return found


def load_for(kw: dict[str, Any]) -> Any:
    """The benchmark as the command's arguments read it (a LoadResult)."""
    from ..data import FieldMap, load_benchmark

    return load_benchmark(
        kw["benchmark"],
        format=kw["fmt"],
        subjects=subject_list(kw),
        split=kw["split"],
        field_map=FieldMap.parse(kw["fields"]) if kw["fields"] else None,
        strict=kw["strict"],
    )


def scan(kw: dict[str, Any], executor: Executor) -> None:
    """One permutation run from the command's arguments, scored by ``executor``."""
    from ..backends import parse_model_options
    from ..backends.probe import check_backend
    from ..perturb import get_template
    from ..pipeline import PermutationConfig, run_permutation
    from ..store import RunDir

    check_ties(kw["ties"])
    config = PermutationConfig(
        template=get_template(kw["template"]),
        max_exhaustive=kw["max_exhaustive"],
        mc_orders=kw["mc_orders"],
        seed=kw["seed"],
        ties=kw["ties"],
        deltas=parse_deltas(kw["deltas"]),
        alpha=kw["alpha"],
        include_non_exchangeable=kw["include_non_exchangeable"],
        batch_items=kw["batch_items"],
        detector_workers=kw["detector_workers"],
    )
    options = parse_model_options(kw["model_opt"])
    if kw["max_batch_tokens"]:
        given = options.get("max_batch_tokens")
        same = (
            given is not None and given.strip().isdigit() and int(given) == kw["max_batch_tokens"]
        )
        if given is not None and not same:  # the flag silently won (QA)
            raise ConfigError(
                f"--max-batch-tokens {kw['max_batch_tokens']} and -M max_batch_tokens={given} "
                "contradict each other; give one of them"
            )
        options["max_batch_tokens"] = str(kw["max_batch_tokens"])
    subjects = subject_list(kw)
    loaded = load_for(kw)
    list_skipped(loaded.problems, notes=loaded.notes)
    if kw["drop_repeats"]:  # left out of the benchmark before --limit/--sample
        repeated = _say_repeats(loaded.items, True)
        items = pick_items(
            [it for it in loaded.items if it.id not in repeated], kw, kw["benchmark"]
        )
    else:  # named only where they are among the items run (MMLU's 106 were named for 5)
        items = pick_items(loaded.items, kw, kw["benchmark"])
        _say_repeats(items, False)
    if not items:
        raise ConfigError("no items to score after --subjects/--limit/--sample")
    out = kw["out"] or Path("runs") / f"permutation-{slug(kw['model'])}-{slug(kw['benchmark'])}"
    check_run_folder(out, kw["overwrite"], "permutation")
    cache = open_cache(kw)
    with status(f"loading model {kw['model']} ({executor.config.kind}) ..."):
        scorer = executor.scorer(
            kw["model"], device=kw["device"], dtype=kw["dtype"], options=options, cache=cache
        )
    with status("checking what the model can do ..."):
        check_backend(scorer.backend, prompt_logprobs=True, method="the permutation test")
    selection = {
        "subjects": subjects,
        "limit": kw["limit"],
        "sample": kw["sample"],
        "seed": kw["seed"],
        "split": kw["split"],
        "n_items": len(items),
        **({"drop_repeats": True} if kw["drop_repeats"] else {}),
        **reading_options(kw),
    }
    progress = quiet_progress(
        TextColumn("[bold]scoring"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        time_left_column(),
    )
    task: dict[str, Any] = {}

    def on_start(total: int, done: int) -> None:
        if done:  # (excluded items were never scored: "already scored" said they were)
            err_console.print(f"resuming: {done} of {total} items already done in {out}")
        task["id"] = progress.add_task("scoring", total=total, completed=done, rate="")
        task["start"], task["now"] = time.perf_counter(), 0

    def on_excluded(n: int) -> None:
        task["now"] -= n

    def on_items(n: int) -> None:
        # items scored by this run over its time so far, as the summary line counts them
        # (rich's speed is the last two updates' rate: 0.24 items/s against the summary's
        # 0.04; and excluded items, left out unscored, made it 0.10 against 0.07)
        progress.advance(task["id"], n)
        task["now"] += n
        rate = task["now"] / max(time.perf_counter() - task["start"], 1e-9)
        progress.update(task["id"], rate=f"{rate:.2f} items/s")

    with progress:
        outcome = run_permutation(
            loaded,
            items,
            scorer,
            RunDir(out),
            config,
            selection=selection,
            overwrite=kw["overwrite"],
            reference_run=kw.get("reference_run"),
            on_start=on_start,
            on_items=on_items,
            on_excluded=on_excluded,
        )
    print_permutation_summary(outcome.summary)
    console.print(f"run folder: {outcome.run_dir} (summary.json, items.jsonl)")
    written = report_after_run(outcome.run_dir, write=kw["report"])
    exit_if_skipped(
        len(loaded.problems),
        signal=kw["fail_on_signal"] and has_signal(outcome.summary),
        pair=kw.get("sweep_pair", False),
        unwritten=not written,
    )
