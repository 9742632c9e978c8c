"""The `contamscope` command line."""

from __future__ import annotations

import typer

from .. import __version__
from . import benbench, cache, card, membership, permutation, report, validate
from . import cap as cap_cli
from . import sweep as sweep_cli

app = typer.Typer(
    name="contamscope",
    help="Has this model seen this benchmark's test set? Benchmark-contamination detection.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("permutation", epilog=permutation.EPILOG, no_args_is_help=False)(permutation.command)
app.add_typer(cache.app, name="cache")
app.command("validate", epilog=validate.EPILOG, no_args_is_help=False)(validate.command)
app.command("report", epilog=report.REPORT_EPILOG)(report.report_command)
app.command("leaderboard", epilog=report.LEADERBOARD_EPILOG)(report.leaderboard_command)
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

    for name, desc in FORMATS.items():
        typer.echo(f"{name:14} {desc}")


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
    app()
