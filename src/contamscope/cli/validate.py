"""`contamscope validate`: injected-contamination experiment measuring the detectors' accuracy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from ..errors import ConfigError
from .common import console, err_console, user_errors

EPILOG = """
Examples:

  contamscope validate --model smollm2 --benchmark mmlu --n-items 100 --epochs 1,3,5

  contamscope validate --model smollm2 --benchmark ../data/mmlu/test --n-items 200 --scenario b --out runs/val-b

  contamscope validate --model hf:Qwen/Qwen2-0.5B --benchmark mmlu --n-items 1000 --epochs 1,2,3,5,10 --device cuda

Half of the drawn items are trained on (leaked), half are not (clean); each detector is scored
against that ground truth after every epoch count (epoch 0 = the untrained model).
Re-running the same command with the same --out reuses finished checkpoints and scores.
Only the permutation method is validated so far (BenBench and CAP: not yet).
Exit codes: 0 ok, 2 user error, 130 interrupted.
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
        "smollm2", "--model", "-m", help="Model to contaminate: smollm2 or hf:PATH_OR_HUB_ID."
    ),
    benchmark: str = typer.Option(
        "mmlu", "--benchmark", "-b", help="mmlu (bundled), a file or folder, or hf:DATASET."
    ),
    method: str = typer.Option(
        "permutation", "--method", help="Detection method to validate (permutation)."
    ),
    n_items: int = typer.Option(
        100, "--n-items", "-n", min=2, help="Items drawn; half leaked, half clean."
    ),
    epochs: str = typer.Option(
        "1,2,3,5", "--epochs", help="Epoch counts to checkpoint and evaluate, comma-separated."
    ),
    scenario: str = typer.Option(
        "a",
        "--scenario",
        help="a: train in the original option order; b: a random order per item.",
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        help="Run folder (default: runs/validate-<model>-<benchmark>-<scenario>).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the draw, split, orders and training."),
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
    split: str | None = typer.Option(None, "--split", help="Sub-folder of a benchmark folder."),
    subjects: str | None = typer.Option(
        None, "--subjects", help="Comma-separated subjects to keep."
    ),
    template: str = typer.Option("paper", "--template", help="Prompt layout: paper or mmlu."),
    deltas: str | None = typer.Option(
        None, "--deltas", help="Algorithm 2 thresholds (default: the paper's -0.2,-0.17,-0.15)."
    ),
    alpha: float = typer.Option(0.05, "--alpha", help="Level of the calibrated rank test."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N."),
    dtype: str = typer.Option("auto", "--dtype", help="Scoring dtype (training is float32)."),
    model_opt: list[str] | None = typer.Option(None, "-M", help="Model option key=value."),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="Score cache folder."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not use the score cache."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start the run folder afresh."),
) -> None:
    """How accurate are the detectors? Contaminate a model copy on purpose and measure."""
    run(**locals())


@user_errors
def run(**kw: Any) -> None:
    from ..backends import parse_model_options
    from ..data import load_benchmark
    from ..paths import default_score_db
    from ..perturb import get_template
    from ..pipeline import PermutationConfig
    from ..store import ScoreCache
    from ..validate import PAPER_DELTAS, TrainConfig, ValidateConfig, plot_summary, run_validation
    from .permutation import _parse_deltas, _slug

    if kw["method"] != "permutation":
        raise ConfigError(
            f"--method {kw['method']!r}: only permutation can be validated so far "
            "(BenBench and CAP validation are not implemented yet)"
        )
    config = ValidateConfig(
        n_items=kw["n_items"],
        epochs=_parse_epochs(kw["epochs"]),
        scenario=kw["scenario"],
        seed=kw["seed"],
        baseline=not kw["no_baseline"],
        keep_checkpoints=not kw["delete_checkpoints"],
        train=TrainConfig(
            lr=kw["lr"],
            batch_items=kw["train_batch_items"],
            max_batch_tokens=kw["train_batch_tokens"],
            seed=kw["seed"],
        ),
        permutation=PermutationConfig(
            template=get_template(kw["template"]),
            seed=kw["seed"],
            deltas=_parse_deltas(kw["deltas"]) or PAPER_DELTAS,
            alpha=kw["alpha"],
        ),
    )
    subjects = [s.strip() for s in kw["subjects"].split(",")] if kw["subjects"] else None
    loaded = load_benchmark(kw["benchmark"], format=kw["fmt"], subjects=subjects, split=kw["split"])
    if loaded.problems:
        err_console.print(f"[yellow]{len(loaded.problems)} input rows skipped[/] while loading")
    out = kw["out"] or Path("runs") / (
        f"validate-{_slug(kw['model'])}-{_slug(kw['benchmark'])}-{kw['scenario']}"
    )
    cache = (
        None
        if kw["no_cache"]
        else ScoreCache(
            (kw["cache_dir"] / "scores.sqlite") if kw["cache_dir"] else default_score_db()
        )
    )
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err_console,
    )
    current: dict[str, Any] = {}

    def on_phase(text: str) -> None:
        progress.console.print(f"[dim]{text} ...[/]")

    def on_train_start(total: int) -> None:
        current["id"] = progress.add_task("training", total=total)

    def on_score_start(label: str, total: int, done: int) -> None:
        current["id"] = progress.add_task(f"scoring {label}", total=total, completed=done)

    def advance(n: int) -> None:
        progress.advance(current["id"], n)

    with progress:
        outcome = run_validation(
            loaded,
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
    print_validation_summary(outcome.summary)
    plot = plot_summary(outcome.summary, outcome.run_dir / "validation.png")
    if plot is None:
        err_console.print("matplotlib is not installed: no plot (pip install matplotlib)")
    console.print(
        f"run folder: {outcome.run_dir} (summary.json, split.json, epoch-*/"
        + (", validation.png)" if plot else ")")
    )


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def print_validation_summary(summary: dict[str, Any]) -> None:
    split = summary["split"]
    console.print(
        f"model {summary['model']['spec']}, benchmark {summary['benchmark']['source']}: "
        f"{split['n_leaked']} leaked + {split['n_clean']} clean items, "
        f"scenario {summary['config']['scenario']}"
    )
    for log in summary["training"]:
        console.print(
            f"  epoch {log['epoch']}: mean training loss {log['mean_loss']:.3f} nats/token "
            f"({log['steps']} steps, {log['seconds']:.0f} s)"
        )
    t = Table(
        title="Detector accuracy vs training epochs (positive = leaked; FPR on the clean half)",
        title_justify="left",
        box=box.SIMPLE,
        pad_edge=False,
    )
    t.add_column("ep", justify="right")
    t.add_column("detector", no_wrap=True, min_width=19)
    for col in ("acc", "prec", "recall", "F1", "AUC", "FPR"):
        t.add_column(col, justify="right", no_wrap=True)
    for res in summary["results"]:
        for name, m in res["detectors"].items():
            t.add_row(
                str(res["epochs"]),
                name,
                *(_f(m[k]) for k in ("accuracy", "precision", "recall", "f1", "auc", "fpr")),
            )
        t.add_section()
    console.print(t)
    console.print("95% intervals of the false-positive rates are in summary.json (fpr_ci).")
