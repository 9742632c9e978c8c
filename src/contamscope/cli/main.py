"""The `contamscope` command line."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import stat
import sys
from typing import Any, NoReturn

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


def _whole_option_names() -> None:
    """Help at 80 columns shows option names whole: typer's table of options cut them to
    ``--include-non-exchang…`` where a help text held a long word (a field map's example),
    so a user on a standard terminal could not learn a flag's name (CI QA). The names'
    columns do not wrap (below 72 columns they fold instead: whole names there left no room
    for the help, and at 40 it was not shown at all); a flag's other name (``--exclude-x`` of
    ``--include-x``) goes under it, not in a column of its own that took a fifth of the width;
    the type and help columns fold a word too long for them (the help's parts, as typer
    groups them, one under the other: its grid cut them; diff-review QA)."""
    import rich.columns
    import rich.console
    import rich.table
    import rich.text
    import typer.rich_utils as ru

    if getattr(ru.Table, "names_whole", False) or ru.Table is not rich.table.Table:
        return  # another typer: its own table

    class OptionsTable(rich.table.Table):
        names_whole = True

        def add_row(self, *cells: Any, **kw: Any) -> None:
            at = len(cells) - 6  # [required,] long, short, other long, other short, type, help
            if self.show_header or at not in (0, 1):
                super().add_row(*cells, **kw)
                return
            row = list(cells)
            for name, other in ((at, at + 2), (at + 1, at + 3)):
                if isinstance(row[other], rich.text.Text) and row[other].plain:
                    row[name] = rich.text.Text("\n").join([row[name], row[other]])
            del row[at + 2 : at + 4]  # (the other names' columns, empty now, took width)
            if isinstance(row[-1], rich.columns.Columns):
                row[-1] = rich.console.Group(*row[-1].renderables)
            if not self.columns:
                whole = rich.console.Console().width >= 72
                for i in range(len(row)):
                    named = i < len(row) - 2
                    self.add_column(
                        no_wrap=named and whole, overflow="ellipsis" if named and whole else "fold"
                    )
            super().add_row(*row, **kw)

    ru.Table = OptionsTable  # type: ignore[misc]


_whole_option_names()


def reflow(epilog: str) -> str:
    r"""An epilog's paragraphs as one line each, for the terminal to wrap: typer keeps single
    line breaks, and at 80 columns lines written for 100 broke in two ("(re-run to" /
    "resume)."; CI QA). Indented lines (examples) and headings ending in ":" stay as they are.

    >>> reflow("Examples:\n\n  cs run --x\n\nOne line\nand the next.\n")
    'Examples:\n\n  cs run --x\n\nOne line and the next.'
    """
    out = []
    for para in epilog.strip("\n").split("\n\n"):
        lines = para.split("\n")
        keep = any(ln.startswith(" ") for ln in lines) or len(lines) == 1
        out.append(para if keep else " ".join(ln.strip() for ln in lines))
    return "\n\n".join(out)


app = typer.Typer(
    name="contamscope",
    help="Has this model seen this benchmark's test set? Benchmark-contamination detection.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("permutation", epilog=reflow(permutation.EPILOG), no_args_is_help=False)(
    permutation.command
)
app.command("inspect", epilog=reflow(inspect_benchmark.EPILOG), no_args_is_help=False)(
    inspect_benchmark.command
)
app.add_typer(cache.app, name="cache")
app.command("validate", epilog=reflow(validate.EPILOG), no_args_is_help=False)(validate.command)
app.command("reanalyse", epilog=reflow(reanalyse.EPILOG), no_args_is_help=True)(reanalyse.command)
app.command("report", epilog=reflow(report.REPORT_EPILOG))(report.report_command)
app.command("leaderboard", epilog=reflow(report.LEADERBOARD_EPILOG))(report.leaderboard_command)
app.command("compare", epilog=reflow(compare.EPILOG), no_args_is_help=True)(compare.command)
app.command("benbench", epilog=reflow(benbench.EPILOG), no_args_is_help=True)(benbench.command)
app.command("card", epilog=reflow(card.EPILOG), no_args_is_help=True)(card.command)
app.command("cap", epilog=reflow(cap_cli.EPILOG), no_args_is_help=True)(cap_cli.command)
app.command("sweep", epilog=reflow(sweep_cli.EPILOG), no_args_is_help=True)(sweep_cli.command)
app.command("membership", epilog=reflow(membership.EPILOG), no_args_is_help=True)(
    membership.command
)


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


EXIT_OUTPUT_CLOSED = 141
"""128 + SIGPIPE: stdout's reader went before all was written (``contamscope formats | head
-1``), the status of a Unix tool the signal ends."""


def _stdout_pipe() -> tuple[int, int] | None:
    """Stdout's descriptor and a duplicate of it where it is a pipe or socket (rich puts
    /dev/null in its place when it finds the reader gone), else None."""
    try:
        fd = sys.stdout.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):  # replaced by a test runner, closed
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)) or not hasattr(select, "poll"):
        return None
    return fd, os.dup(fd)


def _reader_gone(pipe: tuple[int, int]) -> bool:
    """Whether stdout's pipe has lost its reader (a broken pipe of a worker or a server is
    not this)."""
    poller = select.poll()
    poller.register(pipe[1], select.POLLOUT)
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))


def _end_output_closed(pipe: tuple[int, int]) -> NoReturn:
    """End quietly with :data:`EXIT_OUTPUT_CLOSED`; what was not written goes to /dev/null, so
    Python's own flush at exit prints no "Exception ignored"."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, pipe[0])
    sys.exit(EXIT_OUTPUT_CLOSED)


def main() -> None:
    """The console script. Stdout closed early ends it as SIGPIPE ends a Unix tool: quietly,
    :data:`EXIT_OUTPUT_CLOSED` (typer and rich end with 1, the status of a prompt answered
    no, and say nothing)."""
    _escape_what_cannot_be_written()
    pipe = _stdout_pipe()
    try:
        _main(pipe)
    except BrokenPipeError:
        if pipe is None or not _reader_gone(pipe):
            raise
        _end_output_closed(pipe)
    except OSError as exc:  # a full disk or a failing device under stdout or a file written:
        if exc.errno not in _WRITE_FAILURES:  # one line, not a traceback (docs QA)
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        with contextlib.suppress(OSError):
            err_console.print(
                styled("bold red", "error:", f" cannot write the output{where}: {exc.strerror}"),
                highlight=False,
                soft_wrap=True,
            )
        with contextlib.suppress(OSError):
            sys.stderr.flush()
        os._exit(EXIT_USER_ERROR)  # (Python's flush of the full stdout at exit would fail again)


def _escape_what_cannot_be_written() -> None:
    """Stdout writes a character its encoding lacks as a backslash escape, as stderr does:
    under ``PYTHONIOENCODING=ascii`` a Chinese file name in a summary was a UnicodeEncodeError
    after the run was written (a sweep never got past it, and ``reanalyse`` called the run
    folder damaged; locale QA)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


_WRITE_FAILURES = {errno.ENOSPC, errno.EIO, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
"""The errors of a write that failed for want of room or a device, not of a program's fault."""


def _notes_as_lines() -> None:
    """contamscope's own warnings (:class:`~contamscope.errors.ContamscopeWarning`) print as
    one ``note:`` line each; other warnings as Python prints them."""
    import warnings

    from ..errors import ContamscopeWarning

    python_show = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], *args: Any, **kw: Any) -> None:
        if issubclass(category, ContamscopeWarning):
            note = styled("yellow", "note:", f" {message}")
            err_console.print(note, highlight=False, soft_wrap=True)
        else:
            python_show(message, category, *args, **kw)

    warnings.showwarning = show


def _main(pipe: tuple[int, int] | None) -> None:
    """Usage errors (an unknown option, a value out of range) are one line naming the option
    and the help command, exit 2, like every other user error."""
    _notes_as_lines()
    # transformers' own warnings and progress bars stay off for the whole command (the library
    # silences them only while it loads a model; read when transformers is imported)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # matplotlib's own warnings too: with a read-only or missing HOME it said in two lines that
    # it made a temporary config folder, before every report (locale QA)
    logging.getLogger("matplotlib").setLevel(logging.ERROR)
    try:
        try:
            code = app(standalone_mode=False)
        except SystemExit as exc:  # typer's and rich's end on a broken pipe
            if exc.code == 1 and pipe is not None and _reader_gone(pipe):
                _end_output_closed(pipe)
            raise
        if sys.stdout is not None:  # (None: started with stdout closed, ``>&-``)
            sys.stdout.flush()  # a closed pipe is found here, not in Python's flush at exit
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
    except typer.Abort:  # Ctrl-C or end of input at a prompt (or none: stdin closed)
        err_console.print("aborted", highlight=False)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
