"""The `contamscope` command line."""

from __future__ import annotations

import sys

import typer

from .. import __version__
from . import (
    benbench,
    cache,
    card,
    compare,
    inspect_benchmark,
    membership,
    permutation,
    reanalyse,
    report,
    validate,
)
from . import cap as cap_cli
from . import sweep as sweep_cli
from .common import EXIT_USER_ERROR, err_console, styled


def _flags_without_a_type() -> None:
    """Help shows an on/off flag as ``--overwrite`` alone: typer 0.29 writes ``--overwrite
    <bool>``, which reads as if a value had to follow (journey audit). Other types are kept."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "flags_hidden", False):
        return  # another typer: its own display

    def display_type_rich(self: TyperOption, ctx: object) -> str | None:
        if self.is_flag and not self.count:
            return None
        return shown(self, ctx)  # type: ignore[no-any-return]

    display_type_rich.flags_hidden = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_without_a_type()

app = typer.Typer(
    name="contamscope",
    help="Has this model seen this benchmark's test set? Benchmark-contamination detection.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("permutation", epilog=permutation.EPILOG, no_args_is_help=False)(permutation.command)
app.command("inspect", epilog=inspect_benchmark.EPILOG, no_args_is_help=False)(
    inspect_benchmark.command
)
app.add_typer(cache.app, name="cache")
app.command("validate", epilog=validate.EPILOG, no_args_is_help=False)(validate.command)
app.command("reanalyse", epilog=reanalyse.EPILOG, no_args_is_help=True)(reanalyse.command)
app.command("report", epilog=report.REPORT_EPILOG)(report.report_command)
app.command("leaderboard", epilog=report.LEADERBOARD_EPILOG)(report.leaderboard_command)
app.command("compare", epilog=compare.EPILOG, no_args_is_help=True)(compare.command)
app.command("benbench", epilog=benbench.EPILOG, no_args_is_help=True)(benbench.command)
app.command("card", epilog=card.EPILOG, no_args_is_help=True)(card.command)
app.command("cap", epilog=cap_cli.EPILOG, no_args_is_help=True)(cap_cli.command)
app.command("sweep", epilog=sweep_cli.EPILOG, no_args_is_help=True)(sweep_cli.command)
app.command("membership", epilog=membership.EPILOG, no_args_is_help=True)(membership.command)


@app.command("formats")
def formats() -> None:
    """List the benchmark formats contamscope reads.

    Example: contamscope formats
    """
    from ..data import FORMATS
    from ..data.qa import QA_FORMATS

    typer.echo("multiple choice (permutation, membership; cap --task mcq with split folders):")
    for name, desc in FORMATS.items():
        typer.echo(f"  {name:16} {desc}")
    typer.echo("question + answer (benbench):")
    for name, desc in QA_FORMATS.items():
        typer.echo(f"  {name:16} {desc}")
    typer.echo(
        "cap: CAP folders as published ([SUBSET_](ori|mod)_SPLIT[_samples].json), a folder of "
        "split subfolders in a multiple-choice format, or generic JSONL/CSV/TSV/JSON with "
        "--fields input=F,output=F,split=F (docs/cap.md)"
    )
    typer.echo(
        "Every CSV format also reads tab-separated files: .tsv, or a .csv or .txt file whose "
        "first line splits at tabs. Text is UTF-8, or UTF-16/UTF-32 with a byte-order mark."
    )


def _version(value: bool) -> None:
    if value:
        typer.echo(f"contamscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Has this model seen this benchmark's test set?"""


def main() -> None:
    """The console script: usage errors (an unknown option, a value out of range) are one line
    naming the option and the help command, exit 2, like every other user error."""
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as exc:  # typer's own click errors (it vendors click)
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            typer.echo(ctx.get_help())  # a command that needs arguments got none: its help
            sys.exit(EXIT_USER_ERROR)
        where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        err_console.print(
            styled("bold red", "error:", f" {message}{where}"), highlight=False, soft_wrap=True
        )
        sys.exit(getattr(exc, "exit_code", EXIT_USER_ERROR))
    except typer.Abort:  # Ctrl-C or end of input at a prompt
        err_console.print("aborted", highlight=False)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
