"""`contamscope compare`: two permutation runs on the same items, paired item by item
(:mod:`contamscope.pipeline.compare`). Reads the run folders only: nothing is scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ..detectors.verdict import p_text, pct_text
from ..errors import ConfigError
from .common import console, err_console, styled, user_errors

EPILOG = """
Examples:

  contamscope compare runs/base-mmlu runs/tuned-mmlu      # did fine-tuning make B more familiar?

  contamscope compare runs/sweep/smollm2__mmlu runs/sweep/gemma3__mmlu --out compare.md

  contamscope compare runs/a runs/b --json > compare.json
"""

OUT_SUFFIXES = (".json", ".md")


def command(
    run_a: Path = typer.Argument(..., help="Run folder of model A (e.g. the base model)."),
    run_b: Path = typer.Argument(..., help="Run folder of model B (e.g. its fine-tuned copy)."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Also write the comparison: .json (everything) or .md (tables)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON only."),
    alpha: float = typer.Option(
        0.05, "--alpha", min=1e-6, max=0.5, help="Level of the verdict (false-positive rate)."
    ),
) -> None:
    """Is model B more drawn to the published option orders than model A? Pairs two permutation
    runs on the same benchmark item by item; nothing is scored."""
    _compare(run_a, run_b, out, as_json, alpha)


@user_errors
def _compare(run_a: Path, run_b: Path, out: Path | None, as_json: bool, alpha: float) -> None:
    from ..pipeline.compare import compare_runs

    if out is not None and out.suffix.lower() not in OUT_SUFFIXES:
        raise ConfigError(f"--out {out}: write .json or .md (got '{out.suffix or 'no suffix'}')")
    result = compare_runs(run_a, run_b, alpha=alpha)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        text = (
            json.dumps(result, indent=1) + "\n"
            if out.suffix.lower() == ".json"
            else markdown(result)
        )
        out.write_text(text, encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(result, indent=1))
        return
    print_comparison(result)
    if out is not None:
        console.print(f"wrote {out}", highlight=False)


def _signed(x: float | None, pct: bool) -> str:
    if x is None:
        return "-"
    return f"{x:+.1%}" if pct else f"{x:+.3f}"


def _ci(ci: list[float] | None, pct: bool) -> str:
    if not ci:
        return "-"
    return f"[{_signed(ci[0], pct)}, {_signed(ci[1], pct)}]"


def rows(stats: dict[str, Any]) -> list[list[str]]:
    """The three paired tests as table rows: statistic, A, B, B - A, its CI, p, test."""
    a1, sh, gp = stats["alg1"], stats["share"], stats["gap"]
    return [
        [
            "Algorithm 1: original is the max",
            f"{pct_text(a1['a'])} ({a1['a_count']})",
            f"{pct_text(a1['b'])} ({a1['b_count']})",
            _signed(a1["difference"], True),
            _ci(a1["ci"], True),
            p_text(a1["two_sided"]),
            f"McNemar: {a1['b_only']} B only, {a1['a_only']} A only",
        ],
        [
            "Share of other orders the original beats",
            f"{sh['a']:.3f}",
            f"{sh['b']:.3f}",
            _signed(sh["difference"], False),
            _ci(sh["ci"], False),
            p_text(sh["two_sided"]),
            sh["method"],
        ],
        [
            "Mean gap, original - others (nats)",
            f"{gp['a']:.3f}",
            f"{gp['b']:.3f}",
            _signed(gp["difference"], False),
            _ci(gp["ci"], False),
            p_text(gp["two_sided"]),
            gp["method"],
        ],
    ]


HEADER = ["statistic", "A", "B", "B - A", "95% CI", "p (two-sided)", "test"]


def _lines(result: dict[str, Any]) -> list[str]:
    """The lines printed under the table (and written under it in Markdown)."""
    c = result["counts"]
    out = []
    wn = result.get("without_natural")
    if wn and wn.get("n_items"):
        out.append(
            f"Without the {c['natural_order']} items with a natural option order "
            f"({wn['n_items']} items): Algorithm 1 {_signed(wn['alg1']['difference'], True)} "
            f"(p = {p_text(wn['alg1']['two_sided'])}), share "
            f"{_signed(wn['share']['difference'], False)} (p = {p_text(wn['share']['two_sided'])}), "
            f"gap {_signed(wn['gap']['difference'], False)} (p = {p_text(wn['gap']['two_sided'])})"
        )
    subj = result.get("by_subject")
    if subj:
        flagged = [r for r in subj["rows"] if r["flagged"]]
        if flagged:
            shown = ", ".join(
                f"{r['subject']} (toward {r['toward']}, q = {p_text(r['q_value'])})"
                for r in flagged[:5]
            )
            more = f" and {len(flagged) - 5} more" if len(flagged) > 5 else ""
            out.append(
                f"by subject (Benjamini-Hochberg, 5% false discoveries): {shown}{more} "
                f"of {len(subj['rows'])} differ"
            )
        else:
            out.append(
                "by subject (Benjamini-Hochberg, 5% false discoveries): none of "
                f"{len(subj['rows'])} subjects differs"
            )
    items = result["items"]
    for key, who in (("alg1_b_only", "B"), ("alg1_a_only", "A")):
        n = result["statistics"]["alg1"][f"{who.lower()}_only"]
        if n:
            ids = ", ".join(items[key][:8]) + (" ..." if n > 8 else "")
            out.append(f"original ranked first by {who} only ({n}): {ids}")
    return out


def print_comparison(result: dict[str, Any]) -> None:
    a, b, c = result["a"], result["b"], result["counts"]
    head = Table.grid(padding=(0, 2))
    head.add_row("A", f"{a['model']}  ({a['run']})")
    head.add_row("B", f"{b['model']}  ({b['run']})")
    head.add_row("benchmark", f"{result['benchmark']} (template {result['template']})")
    left = [
        f"{n} only in {w}"
        for n, w in (
            (c["only_a"], "A"),
            (c["only_b"], "B"),
            (c["other_orders"], "both, scored under other orders"),
        )
        if n
    ]
    head.add_row(
        "items",
        f"{c['paired']} scored in both" + (f" (not paired: {'; '.join(left)})" if left else ""),
    )
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
    t = Table(
        title=f"Paired test (H0: {result['null_hypothesis']})",
        title_justify="left",
    )
    for col in HEADER:
        t.add_column(col, justify="left" if col in ("statistic", "test") else "right")
    for row in rows(stats):
        t.add_row(*row)
    console.print(t)
    for line in _lines(result):
        console.print(line, highlight=False)
    v = result["verdict"]
    style = "bold red" if stats["direction"] != "none" else "bold green"
    console.print(styled(style, v["label"] + ":", " " + v["text"]), highlight=False)


def markdown(result: dict[str, Any]) -> str:
    """The comparison as Markdown: runs, counts, the paired tests, notes and verdict."""

    def md(x: str) -> str:
        return x.replace("|", "\\|")

    a, b, c = result["a"], result["b"], result["counts"]
    out = [
        "# contamscope compare",
        "",
        f"- A: `{md(a['model'])}` ({md(a['run'])})",
        f"- B: `{md(b['model'])}` ({md(b['run'])})",
        f"- benchmark: {md(result['benchmark'])} (template {result['template']})",
        f"- items scored in both: {c['paired']} (only in A: {c['only_a']}, only in B: "
        f"{c['only_b']}, under other orders: {c['other_orders']})",
        f"- H0: {result['null_hypothesis']}",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    out += ["| " + " | ".join(md(x) for x in row) + " |" for row in rows(result["statistics"])]
    out.append("")
    out += [f"{md(line)}  " for line in _lines(result)]
    v = result["verdict"]
    out += ["", f"**{v['label']}**: {md(v['text'])}", ""]
    return "\n".join(out)
