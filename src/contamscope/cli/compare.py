"""`contamscope compare`: two permutation runs (or two BenBench, membership or CAP runs) on the
same items, paired item by item (:mod:`contamscope.pipeline.compare`). Reads the run folders
only: nothing is scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ..errors import ConfigError
from .common import Table, console, err_console, run_folders_as_written, styled, user_errors, warn

EPILOG = """
Examples:

  contamscope compare runs/base-mmlu runs/tuned-mmlu      # did fine-tuning make B more familiar?

  contamscope compare runs/sweep/smollm2__mmlu runs/sweep/gemma3__mmlu --out compare.md

  contamscope compare runs/a runs/b --json > compare.json

  contamscope compare runs/base-gsm8k-bb runs/tuned-gsm8k-bb   # two benbench runs

  contamscope compare runs/base-mem runs/tuned-mem   # two membership runs (same references)

  contamscope compare runs/base-cap runs/tuned-cap   # two cap runs (same splits and edits)

Exit codes: 0 ok, 2 user error (two runs that cannot be compared: said why).
"""

OUT_SUFFIXES = (".json", ".md", ".html")


def command(
    run_a: Path = typer.Argument(
        ..., metavar="RUN_A", help="Run folder of model A (e.g. the base model)."
    ),
    run_b: Path = typer.Argument(
        ..., metavar="RUN_B", help="Run folder of model B (e.g. its fine-tuned copy)."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        help="Also write the comparison: .json (everything), .md (tables) or .html (a self-contained page with plots and item table).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON only."),
    alpha: float = typer.Option(
        0.05, "--alpha", min=1e-6, max=0.5, help="Level of the verdict (false-positive rate)."
    ),
) -> None:
    """Is model B more familiar with the benchmark than model A? Nothing is scored.

    Two permutation runs: is B more drawn to the published option orders?

    Two BenBench runs: is B more familiar with the original wording than with paraphrases?

    Two membership runs: does B tell the benchmark from the reference items better?

    Two CAP runs: does B's performance outrun its consistency more on a tested split than A's,
    relative to the reference split?"""
    _compare(run_a, run_b, out, as_json, alpha)


@user_errors
def _compare(run_a: Path, run_b: Path, out: Path | None, as_json: bool, alpha: float) -> None:
    from ..pipeline.compare import compare_runs
    from ..report.compare import write_compare

    if out is not None and out.suffix.lower() not in OUT_SUFFIXES:
        raise ConfigError(
            f"--out {out}: write .json, .md or .html (got '{out.suffix or 'no suffix'}')"
        )
    with run_folders_as_written(run_a, run_b):
        result = compare_runs(run_a, run_b, alpha=alpha)
    if out is not None:
        write_compare(result, out)
    if as_json:
        typer.echo(json.dumps(result, indent=1))
        return
    print_comparison(result)
    if out is not None:
        console.print(f"wrote {out}", highlight=False)


def _head_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """What was compared: the benchmark (and references) and the items paired."""
    c = result["counts"]
    if result.get("method") == "membership":
        return [
            ("benchmark", str(result["benchmark"])),
            ("references", str(result["reference"])),
            ("items", f"{c['benchmark']} benchmark and {c['reference']} reference scored in both"),
        ]
    left = [  # ("1 only in both, from other paraphrases" said it of items in both; QA)
        f"{n} {w}"
        for n, w in (
            (c["only_a"], "only in A"),
            (c["only_b"], "only in B"),
            (c.get("other_orders"), "in both, scored under other orders"),
            (c.get("other_paraphrases"), "in both, from other paraphrases"),
            (c.get("other_modifications"), "in both, from other modified inputs"),
        )
        if n
    ]
    not_paired = f" (not paired: {'; '.join(left)})" if left else ""
    if result.get("method") == "cap":
        per = ", ".join(f"{s} {n}" for s, n in c["by_split"].items())
        return [
            (
                "benchmark",
                f"{result['benchmark']} (task {result['task']}; reference split "
                f"{result['reference_split']})",
            ),
            ("items", f"{c['paired']} analysed in both from the same texts ({per}){not_paired}"),
        ]
    if result.get("method") == "benbench":
        splits = c["by_split"]
        per_split = (
            " (" + ", ".join(f"{s} {n}" for s, n in splits.items()) + ")" if len(splits) > 1 else ""
        )
        return [
            ("benchmark", f"{result['benchmark']} (tested: {result['tested_on']})"),
            ("items", f"{c['paired']} analysed in both from the same texts{per_split}{not_paired}"),
        ]
    return [
        ("benchmark", f"{result['benchmark']} (template {result['template']})"),
        ("items", f"{c['paired']} scored in both{not_paired}"),
    ]


def print_comparison(result: dict[str, Any]) -> None:
    from ..report.compare import table

    a, b = result["a"], result["b"]
    head = Table.grid(padding=(0, 2))
    head.add_row("A", f"{a['model']}  ({a['run']})")
    head.add_row("B", f"{b['model']}  ({b['run']})")
    for name, text in _head_rows(result):
        head.add_row(name, text)
    console.print(head)
    if result["same_model"]:
        err_console.print(
            styled(
                "yellow",
                "note:",
                " A and B are the same model set-up (fingerprint): any difference is noise",
            ),
            highlight=False,
        )
    stats = result["statistics"]
    header, body, notes = table(result)
    t = Table(
        title=f"Paired test (H0: {result['null_hypothesis']})",
        title_justify="left",
    )
    for col in header:
        t.add_column(col, justify="left" if col == header[0] or col == "test" else "right")
    for row in body:
        t.add_row(*row)
    console.print(t)
    warned = result.get("warnings") or []
    for line in warned:
        warn(line)
    for line in notes[len(warned) :]:  # (table() puts the warnings first)
        console.print(line, highlight=False)
    v = result["verdict"]
    style = "bold red" if stats["direction"] != "none" else "bold green"
    console.print(styled(style, v["label"] + ":", " " + v["text"]), highlight=False)
