"""`contamscope validate`: injected-contamination experiment measuring the detectors' accuracy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TextColumn,
    TimeElapsedColumn,
)

from ..errors import ConfigError
from ..paths import check_output_folder
from ..wording import plural
from .common import (
    MODEL_OPTIONS_HELP,
    TEMPLATE_HELP,
    Table,
    console,
    drop_ignored,
    err_console,
    exit_if_skipped,
    list_skipped,
    open_cache,
    quiet_progress,
    styled,
    subject_list,
    time_left_column,
    user_errors,
    warn,
)

EPILOG = """
Examples:

  contamscope validate --model smollm2 --benchmark mmlu --n-items 100 --epochs 1,3,5

  contamscope validate --model smollm2 --benchmark ../data/mmlu/test --n-items 200 --scenario b --out runs/val-b

  contamscope validate --model hf:Qwen/Qwen2-0.5B --benchmark mmlu --n-items 1000 --epochs 1,2,3,5,10 --device cuda

  contamscope validate --method benbench --benchmark ../shared/benchdata/gsm8k/test.jsonl --n-items 100 --epochs 1,3

  contamscope validate --method cap --benchmark ../shared/benchdata/mmlu --splits dev,test --train-split test --n-items 20 --epochs 1,3

Half of the drawn items are trained on (leaked), half are not (clean); each detector is scored
against that ground truth after every epoch count (epoch 0 = the untrained model).
permutation: items sharing an option set are leaked or clean together. benbench: QA items,
trained on as question + answer; instance-level n-gram flags, perplexity AUC and gap. cap:
N items from each of two splits, only --train-split trained on; does the verdict name it?
Re-running the same command with the same --out reuses finished checkpoints and scores.
Exit codes: 0 ok, 2 user error, 3 finished but some input rows were skipped (see summary.json), 130
interrupted (re-run to resume).
"""


def _parse_epochs(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(
            f"--epochs {text!r}: expected comma-separated integers, e.g. 1,2,3,5"
        ) from None


def command(
    model: str = typer.Option(
        "smollm2",
        "--model",
        "-m",
        help="Model to contaminate: smollm2 or gemma3 (bundled), a local model folder or .gguf file, or "
        "hf:PATH_OR_HUB_ID.",
    ),
    benchmark: str = typer.Option(
        "mmlu", "--benchmark", "-b", help="mmlu (bundled), a file or folder, or hf:DATASET."
    ),
    method: str = typer.Option(
        "permutation", "--method", help="Detection method to validate: permutation, benbench, cap."
    ),
    n_items: int = typer.Option(
        100,
        "--n-items",
        "-n",
        min=2,
        help="Items drawn: permutation and benbench, half leaked and half clean; cap, per "
        "split (all of the trained split's leaked).",
    ),
    epochs: str = typer.Option(
        "1,2,3,5", "--epochs", help="Epoch counts to checkpoint and evaluate, comma-separated."
    ),
    scenario: str = typer.Option(
        "a",
        "--scenario",
        help="permutation: a = train in the original option order; b = a random order per item.",
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        help="Run folder (default: runs/validate-<model>-<benchmark>-<scenario>; benbench: "
        "runs/validate-benbench-<model>-<benchmark>; cap: "
        "runs/validate-cap-<model>-<benchmark>-<trained split>).",
    ),
    seed: int = typer.Option(
        0, "--seed", min=0, help="Seed of the draw, split, orders and training."
    ),
    lr: float = typer.Option(1e-4, "--lr", help="AdamW learning rate (constant)."),
    train_batch_items: int = typer.Option(
        8, "--train-batch-items", min=1, help="Texts per optimizer step."
    ),
    train_batch_tokens: int = typer.Option(
        1024,
        "--train-batch-tokens",
        min=16,
        help="Padded tokens per training micro-batch (memory bound; gradients are accumulated).",
    ),
    no_baseline: bool = typer.Option(
        False, "--no-baseline", help="Do not evaluate the untrained model (epoch 0)."
    ),
    delete_checkpoints: bool = typer.Option(
        False,
        "--delete-checkpoints",
        help="Delete each checkpoint after scoring it (a re-run must then retrain).",
    ),
    fmt: str | None = typer.Option(
        None, "--format", help="Benchmark format (detected when omitted)."
    ),
    split: str | None = typer.Option(
        None,
        "--split",
        help="permutation: split of a benchmark folder (a sub-folder, or the files named by split).",
    ),
    subjects: str | None = typer.Option(
        None, "--subjects", help="permutation: comma-separated subjects to keep."
    ),
    template: str = typer.Option("paper", "--template", help=f"permutation: {TEMPLATE_HELP}"),
    deltas: str | None = typer.Option(
        None,
        "--deltas",
        help="permutation: Algorithm 2 thresholds (default: the paper's Table 2, "
        "-0.2,-0.17,-0.15).",
    ),
    alpha: float = typer.Option(
        0.05,
        "--alpha",
        help="permutation: level of the calibrated rank test and of the membership test.",
    ),
    reference_items: int | None = typer.Option(
        None,
        "--reference-items",
        min=0,
        help="permutation: clean reference items (never trained, not evaluated) that calibrate "
        "the membership detectors; 0 leaves them out (default: up to 100 available).",
    ),
    statistic: str = typer.Option(
        "min_k_pp",
        "--statistic",
        help="permutation: the membership test's declared statistic, min_k_pp, min_k, loss or "
        "zlib (all four are reported).",
    ),
    lenient: bool = typer.Option(
        True,
        "--lenient/--no-lenient",
        help="benbench: also the ROUGE-L / edit-similarity flags (generates where needed).",
    ),
    splits: str = typer.Option(
        "train,test", "--splits", help="cap: the two splits; the first is CAP's reference."
    ),
    train_split: str | None = typer.Option(
        None, "--train-split", help="cap: the split trained on (default: the second)."
    ),
    task: str | None = typer.Option(None, "--task", help="cap: mcq or qa (detected)."),
    subset: str | None = typer.Option(None, "--subset", help="cap: file set of a CAP folder."),
    max_new_tokens: int | None = typer.Option(
        None, "--max-new-tokens", help="cap: generation length (default 8 mcq, 64 qa)."
    ),
    no_loglik: bool = typer.Option(
        False, "--no-loglik", help="cap: skip the log-likelihood reader (mcq)."
    ),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N."),
    dtype: str = typer.Option("auto", "--dtype", help="Scoring dtype (training is float32)."),
    model_opt: list[str] | None = typer.Option(None, "-M", help=MODEL_OPTIONS_HELP),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="Score cache folder."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not use the score cache."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start the run folder afresh."),
) -> None:
    """How accurate are the detectors? Contaminate a model copy on purpose and measure."""
    run(**locals())


def _permutation(kw: dict[str, Any]) -> tuple[Any, str]:
    from ..data import load_benchmark
    from ..perturb import get_template
    from ..pipeline import PermutationConfig
    from ..pipeline.membership import MembershipConfig
    from ..validate.permutation import PAPER_DELTAS, PermutationValidation, check_statistic
    from .common import slug
    from .permutation import parse_deltas

    check_statistic(kw["statistic"])  # before MembershipConfig, which knows gap and combined
    subjects = subject_list(kw)
    loaded = load_benchmark(kw["benchmark"], format=kw["fmt"], subjects=subjects, split=kw["split"])
    list_skipped(loaded.problems, notes=loaded.notes)
    method = PermutationValidation(
        loaded,
        scenario=kw["scenario"],
        permutation=PermutationConfig(
            template=get_template(kw["template"]),
            seed=kw["seed"],
            deltas=parse_deltas(kw["deltas"]) or PAPER_DELTAS,
            alpha=kw["alpha"],
        ),
        seed=kw["seed"],
        reference_items=kw["reference_items"],
        membership=MembershipConfig(
            statistic=kw["statistic"], alpha=kw["alpha"], template=get_template(kw["template"])
        ),
    )
    name = f"validate-{slug(kw['model'])}-{slug(kw['benchmark'])}-{kw['scenario']}"
    return method, name


def _benbench(kw: dict[str, Any]) -> tuple[Any, str]:
    from ..data.qa import load_qa
    from ..pipeline.benbench import BenBenchConfig
    from ..validate import BenBenchValidation
    from .common import slug

    loaded = load_qa(kw["benchmark"], format=kw["fmt"], split="test")
    list_skipped(loaded.problems, notes=loaded.notes)
    method = BenBenchValidation(
        loaded, BenBenchConfig(lenient=kw["lenient"], seed=kw["seed"], batch_items=8)
    )
    name = f"validate-benbench-{slug(kw['model'])}-{slug(kw['benchmark'])}"
    return method, name


def _cap(kw: dict[str, Any]) -> tuple[Any, str]:
    from ..data.cap import TEMPLATE_FIX, load_cap
    from ..pipeline.cap import CapConfig, layout_warnings
    from ..validate import CapValidation
    from .common import slug

    names = [s.strip() for s in kw["splits"].split(",") if s.strip()]
    if len(names) != 2:
        raise ConfigError(f"--splits {kw['splits']!r}: give exactly two splits, e.g. dev,test")
    data = load_cap(
        kw["benchmark"], names, task=kw["task"], subset=kw["subset"], mcq_format=kw["fmt"]
    )
    list_skipped(data.problems, notes=data.notes)
    trained = kw["train_split"] or names[1]
    config = CapConfig(
        task=data.task,  # type: ignore[arg-type]
        seed=kw["seed"],
        max_new_tokens=kw["max_new_tokens"],
        loglik=not kw["no_loglik"],
        batch_items=8,
    )
    for note in layout_warnings(data, names, config):  # as `cap` says them (QA)
        warn(note.replace(TEMPLATE_FIX, "; validate scores the supplied prompts as they are"))
    method = CapValidation(data, trained, config)
    name = f"validate-cap-{slug(kw['model'])}-{slug(kw['benchmark'])}-{trained}"
    return method, name


_METHODS = {"permutation": _permutation, "benbench": _benbench, "cap": _cap}

_METHOD_ONLY = {
    "--scenario": "permutation",
    "--split": "permutation",
    "--subjects": "permutation",
    "--template": "permutation",
    "--deltas": "permutation",
    "--reference-items": "permutation",
    "--statistic": "permutation",
    "--alpha": "permutation",  # (cap and benbench validate at their own fixed levels; QA)
    "--lenient": "benbench",
    "--splits": "cap",
    "--train-split": "cap",
    "--task": "cap",
    "--subset": "cap",
    "--max-new-tokens": "cap",
    "--no-loglik": "cap",
}
"""Options one method reads; given to another, they are said to be ignored."""


@user_errors
def run(**kw: Any) -> None:
    from ..backends import check_model_spec, parse_model_options
    from ..validate import TrainConfig, ValidateConfig, plot_summary, run_validation

    build = _METHODS.get(kw["method"])
    if build is None:
        raise ConfigError(f"--method {kw['method']!r}: expected one of {', '.join(_METHODS)}")
    kw = drop_ignored(kw, command, _METHOD_ONLY, kw["method"], "--method {}")
    config = ValidateConfig(
        n_items=kw["n_items"],
        epochs=_parse_epochs(kw["epochs"]),
        seed=kw["seed"],
        baseline=not kw["no_baseline"],
        keep_checkpoints=not kw["delete_checkpoints"],
        train=TrainConfig(
            lr=kw["lr"],
            batch_items=kw["train_batch_items"],
            max_batch_tokens=kw["train_batch_tokens"],
            seed=kw["seed"],
        ),
    )
    check_model_spec(kw["model"], kw["dtype"])  # before the benchmark's messages
    method, default_name = build(kw)
    out = kw["out"] or Path("runs") / default_name
    check_output_folder(out)
    cache = open_cache(kw)
    progress = quiet_progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        time_left_column(),
    )
    current: dict[str, Any] = {}

    def on_phase(text: str) -> None:
        progress.console.print(styled("dim", f"{text} ..."))

    def begin(description: str, total: int, done: int = 0) -> None:
        # a finished bar's clock stops: rich keeps counting a task until it is stopped, so every
        # earlier bar showed the time of the whole run
        if "id" in current:
            progress.stop_task(current["id"])
        current["id"] = progress.add_task(description, total=total, completed=done)

    def on_train_start(total: int) -> None:
        begin("training", total)

    def on_score_start(label: str, total: int, done: int) -> None:
        begin(f"scoring {label}", total, done)

    def advance(n: float) -> None:
        progress.advance(current["id"], n)

    with progress:
        outcome = run_validation(
            method,
            kw["model"],
            config,
            out,
            device=kw["device"],
            dtype=kw["dtype"],
            options=parse_model_options(kw["model_opt"]),
            cache=cache,
            overwrite=kw["overwrite"],
            on_phase=on_phase,
            on_train_start=on_train_start,
            on_train_step=advance,
            on_score_start=on_score_start,
            on_items=advance,
        )
        if "id" in current:
            progress.stop_task(current["id"])
    print_validation_summary(outcome.summary)
    from ..validate.report import plot_roc

    plot = plot_summary(outcome.summary, outcome.run_dir / "validation.png")
    roc = plot_roc(outcome.summary, outcome.run_dir / "validation-roc.png")
    if plot is None:
        err_console.print("matplotlib is not installed: no plot (pip install matplotlib)")
    console.print(
        f"run folder: {outcome.run_dir} (summary.json, split.json, epoch-*/"
        + (", validation.png" if plot else "")
        + (", validation-roc.png" if roc else "")
        + ")"
    )
    exit_if_skipped(len(outcome.summary["skipped_rows"]))  # listed there, as in other commands


def _auc_ci(test: dict[str, Any]) -> str:
    ci = test.get("auc_ci")
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else " (no interval: too few items)"


def print_validation_summary(summary: dict[str, Any]) -> None:
    from ..validate.report import tables

    split = summary["split"]
    method = summary.get("validated_method", "permutation")
    what = (
        f"scenario {summary['config']['scenario']}"
        if method == "permutation"
        else f"method {method}"
        + (f", trained on {split['trained_split']}" if "trained_split" in split else "")
    )
    console.print(
        f"model {summary['model']['spec']}, benchmark {summary['benchmark']['source']}: "
        f"{split['n_leaked']} leaked + {split['n_clean']} clean items, {what}"
    )
    for log in summary["training"]:
        console.print(
            f"  epoch {log['epoch']}: mean training loss {log['mean_loss']:.3f} nats/token "
            f"({plural(log['steps'], 'step')}, {log['seconds']:.0f} s)"
        )
    for title, head, body in tables(summary):
        t = Table(title=title, title_justify="left", box=box.SIMPLE, pad_edge=False)
        for k, col in enumerate(head):
            # never narrower than its longest word: one word that does not fit is cut, not
            # wrapped ('inconclusi…' at 160 columns; QA)
            words = [len(w) for row in body for w in str(row[k]).split()] if body else [0]
            t.add_column(
                col,
                justify="left" if k in (1,) else "right",
                no_wrap=k == 1,
                min_width=min(max(words, default=0), 24),
            )
        last = None
        for row in body:
            if last is not None and row[0] != last:
                t.add_section()
            last = row[0]
            t.add_row(*row)
        console.print(t)
    for res in summary["results"]:
        ds = res.get("dataset") or {}
        mem = ds.get("membership")
        nat = ds.get("permutation_natural_order") or {}
        rest = (ds.get("permutation_without_natural_order") or {}).get("alg1") or {}
        parts = []
        comb = ds.get("combined")
        if comb:
            parts.append(
                f"combined (gap + Min-K%++) evaluated vs reference items: AUC {comb['auc']:.2f}"
                f"{_auc_ci(comb)}, p = {comb['p_value']:.2e}"
            )
        if mem:
            parts.append(
                f"membership ({mem['statistic']}) evaluated vs reference items: AUC "
                f"{mem['auc']:.2f}{_auc_ci(mem)}, p = {mem['p_value']:.2e}"
            )
        if nat.get("n_items"):
            parts.append(
                f"{plural(nat['n_items'], 'naturally ordered item')} (Algorithm 1 flags "
                f"{nat['alg1_count']}); Algorithm 1 on the others {rest.get('count')} of "
                f"{(ds.get('permutation_without_natural_order') or {}).get('n_items')} "
                f"(p = {rest.get('p_value', float('nan')):.2e})"
            )
        if parts:
            console.print(f"epoch {res['epochs']}: " + "; ".join(parts))
