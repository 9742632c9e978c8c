"""`contamscope card`: a Benchmark Transparency Card (Xu et al. 2024) from one model's run
folders (:mod:`contamscope.report.card` builds it)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import console, err_console, styled, user_errors

EPILOG = """
Examples:

  contamscope card --run runs/benbench-smollm2-test --out card.md

  contamscope card --run runs/gsm8k --run runs/math --model-name "My-7B" --out my-7b-card.md

  contamscope card --run runs/benbench-gsm8k --run runs/my-7b-mmlu --run runs/membership-anatomy --out card.md

BenBench runs give the paper's table; permutation, membership and CAP runs of the same model
add one row each (their leaderboard estimate with its 95% CI and p-value).

Exit codes: 0 ok, 2 user error.
"""


def command(
    run: list[Path] = typer.Option(
        ...,
        "--run",
        help="Run folder (or its summary.json) of the model: benbench, permutation, membership, "
        "cap. Repeatable.",
    ),
    out: Path = typer.Option(
        Path("card.md"), "--out", "-o", help="Markdown card; the JSON goes next to it."
    ),
    model_name: str | None = typer.Option(
        None, "--model-name", help="Model name shown on the card."
    ),
    overwrite: bool = typer.Option(
        False,
        "--overwrite",
        help="Replace --out even when it holds another model's card or a file that is no card "
        "(a card of the same model is always updated).",
    ),
) -> None:
    """Write a Benchmark Transparency Card (Markdown + JSON) from a model's runs."""
    _write(run, out, model_name, overwrite)


@user_errors
def _write(runs: list[Path], out: Path, model_name: str | None, overwrite: bool) -> None:
    from ..report.card import write_card

    said: list[str] = []
    md, js, card = write_card(runs, out, model_name, overwrite=overwrite, said=said)
    console.print(f"wrote {md} and {js}", highlight=False, soft_wrap=True)
    for line in said:
        err_console.print(styled("dim", "", line), highlight=False, soft_wrap=True)
    for note in card["notes"]:
        err_console.print(styled("yellow", "note:", f" {note}"), highlight=False)
