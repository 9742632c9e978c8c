"""Shared CLI plumbing: one-line errors, exit codes, the console."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import rich.table
import typer
from rich.console import Console
from rich.text import Text

from ..errors import ConfigError, ContamscopeError
from ..wording import plural

if TYPE_CHECKING:
    from ..data.overlap import SplitOverlap
    from ..store import ScoreCache

__all__ = [
    "slug",
    "console",
    "err_console",
    "user_errors",
    "EXIT_OK",
    "EXIT_USER_ERROR",
    "EXIT_ROWS_SKIPPED",
    "EXIT_SIGNAL",
    "FAIL_ON_SIGNAL_OPT",
    "list_skipped",
    "exit_if_skipped",
    "has_signal",
    "say_overlap",
    "reading_options",
    "open_cache",
    "pick_items",
    "REPORT_OPT",
    "MODEL_OPTIONS_HELP",
    "TEMPLATE_HELP",
]

REPORT_OPT: Any = typer.Option(
    False, "--report", help="Also write the HTML report (RUN_DIR/report.html)."
)
"""``--report`` of the commands that make a run folder."""

MODEL_OPTIONS_HELP = (
    "Model option key=value, repeatable. hf: bos=TOKEN|none, max_batch_tokens=N, "
    "max_tree_nodes=N (fixes the subtree size; a CPU otherwise picks it per question), "
    "plan_workers=0|1, fuse=auto|on|off (fused kernels; auto: on with CUDA), revision=REV, "
    "trust_remote_code=true, attn=sdpa|eager. "
    "openai: bos=TEXT (needed by benbench and membership), max_connections=8, timeout=120, "
    "retries=5, backoff=0.5, api_key_env=VAR, logprobs=auto|echo|prompt_logprobs, "
    "canary=full|structural. vllm: tensor_parallel_size=N, gpu_memory_utilization=F, "
    "max_model_len=N, enforce_eager=true, bos=TOKEN|none, revision=REV, trust_remote_code=true. "
    "See docs/backends.md."
)
"""Help of ``-M``: every backend's options (a test keeps it in step with the backends)."""

TEMPLATE_HELP = (
    "Prompt layout: paper (the paper's code), paper-script (that and its script's quirks: a "
    "newline before the question, a space after the third option line), mmlu, or your own as "
    "JSON, e.g. "
    '\'{"question": "Question: {question}\\nOptions:\\n", "option": "({label}) {text}\\n"}\', '
    "or a .json file holding that."
)
"""Help of ``--template`` (permutation, membership, validate, sweep)."""

EXIT_OK = 0
EXIT_USER_ERROR = 2
"""A fatal problem the user can fix (bad option, unreadable file, unknown model)."""
EXIT_ROWS_SKIPPED = 3
"""The run finished, but some input rows were skipped (listed in summary.json)."""
EXIT_SIGNAL = 4
"""The run finished and its verdict found a contamination signal, under ``--fail-on-signal``
(a gate for CI: without it a verdict never sets the exit code)."""
EXIT_INTERRUPTED = 130

FAIL_ON_SIGNAL_OPT = typer.Option(
    False,
    "--fail-on-signal",
    help="Exit with code 4 when the verdict finds a contamination signal (a gate for CI; "
    "everything is written first). An inconclusive verdict or one with nothing to test is no "
    "signal.",
)


def _file_width(stream: object) -> int | None:
    """Width of output that goes to a file or pipe: rich lays it out for 80 columns, which cut
    the numbers of wide tables to "0.3…" in a log; 200 keeps them whole. A terminal (or an
    explicit ``COLUMNS``) keeps its own width."""
    isatty = getattr(stream, "isatty", None)
    if "COLUMNS" in os.environ or (isatty is not None and isatty()):
        return None
    return 200


class Table(rich.table.Table):
    """rich's table, whose cells fold onto a second line where the width is short rather than
    end in "…": under ``COLUMNS=40`` a p-value of 1.0 read ``1.0…`` and an interval
    ``[0.0…`` (the numbers were cut, not whole; locale QA)."""

    def add_column(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("overflow", "fold")
        super().add_column(*args, **kwargs)

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        while len(self.columns) < len(renderables):  # (rich makes them itself, cutting with "…")
            self.add_column()
        super().add_row(*renderables, **kwargs)


# no markup: file names, row text and model names may hold brackets ("d/x[/]y.csv"); styles
# come from :func:`styled`
console = Console(markup=False, width=_file_width(sys.stdout))
err_console = Console(stderr=True, markup=False, width=_file_width(sys.stderr))


def stderr_is_terminal() -> bool:
    """Whether stderr is a terminal itself: rich also says so under ``FORCE_COLOR`` (CI
    services set it for coloured logs), where a live bar or spinner wrote carriage returns
    into the log (CI QA)."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty is not None and isatty())


def status(text: str) -> contextlib.AbstractContextManager[object]:
    """A spinner with ``text`` on stderr while a step runs, on a terminal only: it was drawn
    on stdout, where its frames came before ``inspect --json``'s JSON under ``FORCE_COLOR``
    (CI QA)."""
    if not stderr_is_terminal():
        return contextlib.nullcontext()
    return err_console.status(text)


@contextlib.contextmanager
def run_folders_as_written(*folders: Path) -> Iterator[None]:
    """Read run folders: a value of the wrong type or a missing key in their summary.json,
    settings.json or items.jsonl (edited by hand, another version's) is one line naming them,
    not a traceback."""
    from ..errors import StoreError

    try:
        yield
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        names = " and ".join(str(f) for f in folders)
        detail = f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}"
        raise StoreError(
            f"{names}: a summary.json, settings.json or items.jsonl there is not as contamscope "
            f"writes it ({detail})"
        ) from None


def drop_ignored(
    kw: dict[str, Any],
    command: Callable[..., Any],
    readers: Mapping[str, str],
    current: str,
    what: str,
) -> dict[str, Any]:
    """``kw`` with each option of ``readers`` (flag -> what reads it) that was given but is
    not read by ``current`` said to be ignored ("it applies to ``what``") and set back to
    ``command``'s default: ignored as said, not checked, not recorded."""
    import inspect

    params = inspect.signature(command).parameters
    out = dict(kw)
    for opt, reader in readers.items():
        key = opt.lstrip("-").replace("-", "_")
        default = params[key].default.default  # typer keeps it in the OptionInfo
        if reader != current and kw[key] != default:
            err_console.print(
                styled(
                    "yellow",
                    "ignored",
                    f" {opt}: it applies to {what.format(reader)}; this is {current}",
                ),
                highlight=False,
            )
            out[key] = default
    return out


def styled(style: str, text: str, rest: str = "") -> Text:
    """``text`` in ``style`` followed by ``rest`` unstyled, neither read as markup."""
    return Text.assemble((text, style), rest)


def warn(text: str) -> None:
    """``warning: text`` on stderr, one line however long (a log keeps it whole for grep)."""
    err_console.print(styled("yellow", "warning", f": {text}"), highlight=False, soft_wrap=True)


def list_skipped(
    problems: Sequence[object],
    label: str = "skipped",
    shown: int = 10,
    listed: str = "summary.json",
    notes: Sequence[str] = (),
) -> None:
    """The first ``shown`` skipped input rows (``file:line: reason``), one line each, on stderr
    (``listed``: where all of them are), then ``notes`` (what was changed in the items read:
    ``LoadResult.notes``)."""
    for n in notes:
        err_console.print(styled("yellow", "note", f": {n}"), highlight=False, soft_wrap=True)
    for p in problems[:shown]:
        err_console.print(styled("yellow", label, f" {p}"), highlight=False, soft_wrap=True)
    if len(problems) > shown:
        err_console.print(
            styled(
                "yellow",
                label,
                f" ... and {len(problems) - shown} more rows (listed in {listed})",
            )
        )


class ReportUnwritten(SystemExit):
    """Exit code 2 of a finished run whose report could not be written (said above it); the
    run itself is saved (a sweep tells its pairs' apart from their failures)."""


def exit_if_skipped(
    n: int, what: str = "", *, signal: bool = False, pair: bool = False, unwritten: bool = False
) -> None:
    """End a finished run with exit code 3 when ``n`` input rows (or ``what``: another kind of
    input, named in the lines above) were skipped; with ``signal`` (``--fail-on-signal`` and a
    verdict that found one: :func:`has_signal`) with exit code 4, which a gate must not miss
    for a skipped row; with ``unwritten`` (its report could not be written, said above) with
    exit code 2, unless a signal says 4. A sweep's ``pair`` says no exit code: the sweep's own
    comes at its end (a pair's "exit code 3" was printed where the sweep exited 2; CI QA)."""
    if n:
        said = (
            f"{plural(n, what)} left out"
            if what
            else (f"{n} input row{'s were' if n != 1 else ' was'} skipped")
        )
        ends = EXIT_SIGNAL if signal else EXIT_USER_ERROR if unwritten else EXIT_ROWS_SKIPPED
        code = f"exit code {ends}"
        where = f" ({code})" if what else f" ({code}; see summary.json)"
        where = " (see summary.json)" if pair else where
        err_console.print(styled("yellow", said, where))
    if signal:
        err_console.print(
            styled(
                "bold red", "contamination signal:", f" exit code {EXIT_SIGNAL} (--fail-on-signal)"
            )
        )
        raise SystemExit(EXIT_SIGNAL)
    if unwritten:
        raise ReportUnwritten(EXIT_USER_ERROR)
    if n:
        raise SystemExit(EXIT_ROWS_SKIPPED)


def has_signal(summary: dict[str, Any]) -> bool:
    """Whether a run's verdict found a contamination signal: ``signal`` true, or for CAP (its
    label names the split) a label "likely contaminated by SPLIT" (not "likely fine-tuned on
    SPLIT": a model trained on its training split); an inconclusive verdict, one with nothing
    to test, and a run without a verdict did not."""
    from ..pipeline.outcome import summary_verdict

    v = summary_verdict(summary)
    if v is None:
        return False
    if "signal" in v:
        return v["signal"] is True
    return str(v.get("label") or "").startswith("likely contaminated by ")


F = TypeVar("F", bound=Callable[..., Any])


_SPEC_OPTIONS = {
    "benchmark": "--benchmark",
    "train": "--train",
    "reference": "--reference",
    "train_reference": "--train-reference",
    "model": "--model",
    "paraphraser": "--paraphraser",
    "embedder": "--embedder",
    "benchmarks": "--benchmarks",
    "models": "--models",
    "reference_benchmark": "--reference-benchmark",
    "baseline": "--baseline",
}
"""The commands' arguments that name a file, folder or spec, with their options."""


def name_option(message: str, kw: dict[str, Any]) -> str:
    """A loader's error about a whole file or spec (``SPEC: why``, as the Python API says it)
    with the option it was given as in front: ``--benchmark tests.jsonl: no such file or
    folder``. Errors naming a line (``SPEC:3: ...``) or an option already are left as they are.

    >>> name_option("x.csv: no such file or folder", {"benchmark": "x.csv"})
    '--benchmark x.csv: no such file or folder'
    >>> name_option("f.csv: no such file or folder", {"reference_benchmark": "f.csv"})
    '--reference-benchmark f.csv: no such file or folder'
    >>> name_option("x.csv:3: no question", {"benchmark": "x.csv"})
    'x.csv:3: no question'
    >>> name_option("-: no such file or folder", {"benchmark": "-"})
    '--benchmark -: no such file or folder'
    """
    if message.startswith("--"):
        return message
    for key, option in _SPEC_OPTIONS.items():
        given = kw.get(key)
        if key in ("benchmarks", "models") and isinstance(given, str):  # sweep's lists
            given = [v.strip() for v in given.split(",")]
        for value in given if isinstance(given, list) else [given]:
            if value and message.startswith(f"{value}: "):
                return f"{option} {message}"
    return message


def _normalize_model_specs(kw: dict[str, Any]) -> None:
    """``--model``, ``--paraphraser`` and sweep's ``--models`` and ``--baseline`` naming a local model folder or
    ``.gguf`` file without ``hf:`` read as ``hf:PATH`` (stored so in the run folder)."""
    from ..backends.registry import normalize_model_spec

    for key in ("model", "paraphraser", "baseline"):
        if isinstance(kw.get(key), str):
            kw[key] = normalize_model_spec(kw[key])
    if isinstance(kw.get("models"), str):
        kw["models"] = ",".join(normalize_model_spec(m.strip()) for m in kw["models"].split(","))


def _one_selection(kw: Mapping[str, Any]) -> None:
    """``--limit`` and ``--sample`` together: refused before any work
    (:func:`~contamscope.pipeline.permutation.one_selection`)."""
    from ..pipeline.permutation import one_selection

    one_selection(kw.get("limit"), kw.get("sample"))


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler's time limit) and SIGHUP (a closed terminal, tmux or ssh
    session) raise :class:`KeyboardInterrupt`, as Ctrl-C does, so a command ends the same way:
    the batches scored kept, "interrupted", exit 130 (a killed scoring run ended at -15,
    or -1, with no word and its last batch unwritten; QA). A SIGHUP that is ignored (``nohup``)
    stays ignored."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    caught = [signal.SIGTERM]
    hup = getattr(signal, "SIGHUP", None)  # (not on Windows)
    if hup is not None and signal.getsignal(hup) is not signal.SIG_IGN:
        caught.append(hup)
    try:
        previous = {sig: signal.signal(sig, stop) for sig in caught}
    except ValueError:  # not the main thread: no handler to set
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def user_errors(fn: F) -> F:
    """Turn user errors into one line on stderr and a non-zero exit; never a traceback.
    Ctrl-C and SIGTERM end it with "interrupted" and exit 130."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            _normalize_model_specs(kwargs)
            _one_selection(kwargs)
            progress_seconds()  # a bad value is said at once, terminal or not (QA)
            with sigterm_as_interrupt():
                return fn(*args, **kwargs)
        except ContamscopeError as exc:
            line = name_option(str(exc), kwargs)
            err_console.print(
                styled("bold red", "error:", f" {line}"), highlight=False, soft_wrap=True
            )
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            # (after a hangup the terminal is gone: the line cannot be written, the exit stays)
            with contextlib.suppress(OSError):
                # (a report or card has nothing to resume: its old file is kept whole; QA)
                err_console.print(
                    "interrupted; re-run the same command to finish (a run resumes where it "
                    "stopped)",
                    highlight=False,
                )
            sys.exit(EXIT_INTERRUPTED)

    return wrapper  # type: ignore[return-value]


def _clock(seconds: float | None) -> str:
    """``h:mm:ss`` of ``seconds``, as rich's columns write it.

    >>> _clock(3725.4), _clock(None)
    ('1:02:05', '-:--:--')
    """
    if seconds is None:
        return "-:--:--"
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def time_left(task: Any) -> float | None:
    """Seconds left of a rich progress ``task``, at its pace since it began: the items it did
    (less those done when it was added, ``completed=``: a resumed run's) over its elapsed
    time. rich's own estimate took the pace of the last advances: a CAP batch's many small
    advances as it ended said "0:00:01 left" and kept saying it for the minutes the next batch
    took (HTTP QA). None before its first item, when finished, or with no total."""
    if not task.total or task.finished:
        return None
    done = task.completed - float(task.fields.get("base") or 0)
    took = task.elapsed
    if took is None or done <= 0:
        return None
    return max(0.0, (task.total - task.completed) * took / done)


def time_left_column() -> Any:
    """The bar's time-left column, by :func:`time_left`."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class TimeLeftColumn(ProgressColumn):
        max_refresh = 0.5

        def render(self, task: Any) -> Text:
            return Text(_clock(time_left(task)), style="progress.remaining")

    return TimeLeftColumn()


def progress_seconds() -> float:
    """Seconds between the plain progress lines written where stderr is not a terminal (a
    log file, ``nohup``, a pipe): ``CONTAMSCOPE_PROGRESS_SECONDS``, default 60."""
    raw = os.environ.get("CONTAMSCOPE_PROGRESS_SECONDS", "").strip()
    try:
        return max(0.0, float(raw)) if raw else 60.0
    except ValueError:
        raise ConfigError(
            f"CONTAMSCOPE_PROGRESS_SECONDS={raw!r}: expected a number of seconds"
        ) from None


def quiet_progress(*columns: Any, **kwargs: Any) -> Any:
    """A rich ``Progress`` on stderr that shows nothing until its first task: used as a
    context, it starts with that task, so a run refused before any (other settings in the
    folder, too few items) prints its one error line alone (rich printed an empty line on
    stopping a display that never showed a bar).

    Where stderr is not a terminal, rich draws the bar only when it stops, so a log showed
    nothing of a run for hours (QA): there no bar is drawn, and a plain line (``scoring: 4/12,
    0:01:30 elapsed, 0:03:00 left``) is written every :func:`progress_seconds`, by a clock of
    its own (written only as a batch ended, a log stayed silent for the minutes a batch of the
    real model took; upgrade QA), and once more as the display stops, with where each task
    ended (an interrupted run's count included)."""
    import threading
    import time

    from rich.progress import Progress

    every = progress_seconds() if not stderr_is_terminal() else None

    class _Quiet(Progress):
        started = False
        said = time.monotonic()
        shown: dict[Any, float] = {}  # (per task: the count its last line said)
        _clock_stop: threading.Event | None = None
        _clock: threading.Thread | None = None

        def _say(self, advanced: Any = None, last: bool = False) -> None:
            """One plain line, at most every ``every`` seconds: of the task just advanced, or
            from the clock, of each task still running (the finished phases of a validate run
            were said again on every tick, their elapsed time still growing; QA); ``last``:
            of every task, now (where the bar stops: rich drew its bar into the log there)."""
            if every is None or (not last and time.monotonic() - self.said < every):
                return
            self.said = time.monotonic()
            for task in self.tasks:
                if last:  # where each task ended, unless a line said so already
                    if self.shown.get(task.id) == task.completed:
                        continue
                elif (task.id != advanced) if advanced is not None else task.finished:
                    continue
                self.shown[task.id] = task.completed
                done = f"{task.completed:.0f}" + (f"/{task.total:.0f}" if task.total else "")
                left = time_left(task)
                tail = f", {_clock(left)} left" if left is not None else ""
                took = task.finished_time if task.finished else task.elapsed  # (not since)
                with contextlib.suppress(OSError):  # (a log that went away: the run goes on)
                    self.console.print(
                        f"{task.description}: {done}, {_clock(took)} elapsed{tail}",
                        highlight=False,
                        soft_wrap=True,
                    )

        def advance(self, task_id: Any, advance: float = 1) -> None:
            super().advance(task_id, advance)
            self._say(task_id)

        def __enter__(self) -> _Quiet:
            return self

        def __exit__(self, *exc: object) -> None:
            if self._clock_stop is not None:
                self._clock_stop.set()
                if self._clock is not None:  # (a line it is writing ends before the bar's)
                    self._clock.join(timeout=1.0)
            if self.started and every is None:
                try:
                    self.stop()
                except OSError:  # a closed terminal (SIGHUP): an EIO replaced the interrupt
                    if exc[0] is None:
                        raise
            if self.started:
                self._say(last=True)

        def add_task(self, *args: Any, **kw: Any) -> Any:
            if not self.started:
                self.started = True
                if every is None:  # a terminal: the bar (a log gets plain lines only: rich
                    self.start()  # drew its bar there once, as the run ended)
                if every:  # the lines come while a long batch runs, not only as it ends
                    stop = self._clock_stop = threading.Event()

                    def tick() -> None:
                        while not stop.wait(every):
                            self._say()

                    self._clock = threading.Thread(
                        target=tick, name="contamscope-progress", daemon=True
                    )
                    self._clock.start()
            kw.setdefault("base", kw.get("completed") or 0)  # (for time_left)
            return super().add_task(*args, **kw)

    # the speed (and so the time left) from the last hour's advances: rich's 30 s kept none
    # while batches of the real model came minutes apart, and no time left was said (QA)
    kwargs.setdefault("speed_estimate_period", 3600.0)
    return _Quiet(*columns, console=err_console, **kwargs)


class ItemProgress:
    """Progress bar of a resumable per-item run, with the pipelines' ``on_start``/``on_items``.

    ``with ItemProgress("scoring", out) as bar: run(..., on_start=bar.on_start,
    on_items=bar.on_items)``; a resumed run says how many items were already done.
    """

    def __init__(self, verb: str, out: object, *, eta: bool = True) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        columns: list[Any] = [
            TextColumn(f"[bold]{verb}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        ]
        if eta:
            columns += [TextColumn("ETA"), time_left_column()]
        self.progress = quiet_progress(*columns)
        self.verb = verb
        self.out = out
        self._task: Any = None

    def on_start(self, total: int, done: int) -> None:
        if done:
            err_console.print(f"resuming: {done} of {total} items already done in {self.out}")
        self._task = self.progress.add_task(self.verb, total=total, completed=done)

    def on_items(self, n: float) -> None:  # a fraction of an item while one generates (cap)
        self.progress.advance(self._task, n)

    def __enter__(self) -> ItemProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)  # type: ignore[arg-type]


def say_overlap(
    overlap: SplitOverlap,
    dropped: bool,
    dropped_repeats: bool = False,
    selected: SplitOverlap | None = None,
) -> None:
    """Name the items that more than one split holds (on both sides of a comparison of the
    splits), and the repeats within a split, on stderr. ``overlap`` is of the whole splits;
    ``selected``, the overlap of the items a ``--limit`` or ``--sample`` chose, says how many
    of those are among them (under ``--limit 3`` "8 items of split dev also in split val"
    read as if they were in the run)."""

    def among(n: int | None) -> str:
        return "" if selected is None else f", {n or 0} of them among the selected items"

    names = list(overlap.shared_with)
    for i, s in enumerate(names):
        for o in names[i + 1 :]:
            n = overlap.shared_with[s].get(o)
            if n:
                what = (
                    "left out of both"
                    if dropped
                    else "kept"
                    + among(selected.shared_with[s].get(o) if selected else None)
                    + "; --drop-shared leaves them out"
                )
                err_console.print(
                    styled(
                        "yellow",
                        "overlap:",
                        f" {plural(n, 'item')} of split {s} also in split {o} (same text;"
                        f" first: {s}/{overlap.shared[s][0]}): {what}",
                    ),
                    highlight=False,
                    soft_wrap=True,
                )
    for s, rep in overlap.repeated.items():
        if rep:
            again, first = next(iter(rep.items()))
            what = (
                "left out"
                if dropped_repeats
                else "kept"
                + among(len(selected.repeated[s]) if selected else None)
                + "; --drop-repeats leaves them out"
            )
            err_console.print(
                styled(
                    "yellow",
                    "repeats:",
                    f" split {s} holds {plural(len(rep), 'item')} repeating the text of an "
                    f"earlier one (first: {again} repeats {first}): {what}",
                ),
                highlight=False,
                soft_wrap=True,
            )


def refuse_empty(selected: Mapping[str, Sequence[Any]], dropped_shared: bool) -> None:
    """A split left without items is a user error before the model loads (a run of it ended
    with empty statistics and exit 0)."""
    for name, items in selected.items():
        if not items:
            raise ConfigError(
                f"--drop-shared left no items in split {name} (each is in another split too)"
                if dropped_shared
                else f"no items are selected in split {name}"
            )


def reading_options(kw: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The options that decide how input rows become items (``--format``, ``--fields`` ...),
    for a run's settings: a resumed run with another mapping is refused rather than its old
    records reused. Only the options given are named, so runs that gave none resume as before."""
    names = {"fmt": "format"}
    return {names.get(k, k): kw[k] for k in ("fmt", "fields", *keys) if kw.get(k) is not None}


def subject_list(kw: dict[str, Any]) -> list[str] | None:
    """``--subjects a, b`` -> ["a", "b"]; None when not given. Refuses a value naming none."""
    text = kw.get("subjects")
    if text is None:
        return None
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise ConfigError(f"--subjects {text!r} names no subject (comma-separated names)")
    return list(dict.fromkeys(names))


def check_run_folder(out: Path, overwrite: bool = False, method: str | None = None) -> None:
    """``--out`` can be a run folder (not a folder of other files nor another ``method``'s
    run, unless ``overwrite``), and no other process is writing it: checked before the model
    loads (the run's own lock said so only after the load, a minute in: QA)."""
    from ..paths import check_output_folder
    from ..store.run import refuse_busy, refuse_foreign

    check_output_folder(out)
    refuse_busy(out)
    refuse_foreign(out, overwrite, method)


def check_cache_flags(kw: Mapping[str, Any]) -> None:
    """ConfigError where ``--no-cache`` and ``--cache-dir`` are both given: checked before a
    Ray cluster starts too (said after 10 s of start-up; Ray QA)."""
    if kw.get("no_cache") and kw.get("cache_dir") is not None:
        raise ConfigError(
            "--no-cache and --cache-dir contradict each other: --no-cache reads and writes "
            "no cache; give one of them"
        )


def open_cache(kw: dict[str, Any]) -> ScoreCache | None:
    """The score cache of ``--cache-dir`` (default: the user cache), or None with ``--no-cache``."""
    from ..paths import default_score_db
    from ..store import ScoreCache

    check_cache_flags(kw)
    if kw["no_cache"]:
        return None
    # (one it cannot write is opened read-only, said by a ContamscopeWarning: a note line)
    given = kw["cache_dir"]
    cache = ScoreCache(
        given / "scores.sqlite" if given else default_score_db(),
        what="--cache-dir" if given else None,
    )
    say_unread_wal(cache)
    return cache


def say_unread_wal(cache: ScoreCache) -> None:
    """Warn when a read-only cache's write-ahead log cannot be read: the scores in it are
    not seen (not lost: they are in the file, merged when the cache is next opened writable)."""
    if cache.unread_wal is not None:
        err_console.print(
            styled(
                "yellow",
                f"warning: {cache.unread_wal} holds scores not yet merged into the cache file",
                ", and they cannot be read here (a read-only folder without the "
                f"{cache.unread_wal.name[:-4]}-shm file): they are not used. A run that uses the "
                "cache where it can be written merges them",
            ),
            soft_wrap=True,
        )


T = TypeVar("T")


def pick_items(items: Sequence[T], kw: dict[str, Any], where: str = "") -> list[T]:
    """``--sample`` or ``--limit`` of ``items`` (:func:`~contamscope.pipeline.select_items`),
    saying so when ``--sample`` asks for more items than there are (``where``: e.g. a split)."""
    from ..pipeline import select_items

    sample = kw.get("sample")
    if sample is not None and sample > len(items):
        err_console.print(
            styled(
                "yellow",
                "note",
                f" --sample {sample} is more than the {plural(len(items), 'item')}"
                f"{' of ' + where if where else ''}; all are used",
            ),
            highlight=False,
        )
    return select_items(items, limit=kw.get("limit"), sample=sample, seed=kw["seed"])


_GENERIC_NAMES = frozenset({"test", "train", "val", "valid", "validation", "dev", "data", "eval"})
"""File or folder names that say nothing alone: a default run folder takes the parent's too."""


def slug(text: str, *, stem: bool = False, parent_of_generic: bool = True) -> str:
    """A file-system-safe short name of a model spec or benchmark path for a default run
    folder: the last part of the path (without its extension with ``stem``), after its
    parent's name where the last part is generic (``gsm8k/test.jsonl`` -> ``gsm8k-test``, so
    it no longer shares ``runs/benbench-MODEL-test`` with ``math/test.jsonl``).

    >>> slug("../data/gsm8k/test.jsonl", stem=True), slug("hf:./my model"), slug("mmlu")
    ('gsm8k-test', 'my-model', 'mmlu')
    """
    path = Path(text)
    base = (path.stem if stem else path.name) or text
    parent = path.parent.name
    if parent_of_generic and base.lower() in _GENERIC_NAMES and parent not in ("", ".", ".."):
        base = f"{parent}-{base}"
    keep = "".join(c if c.isalnum() or c in "-_." else "-" for c in base)
    return keep.strip("-.")[:40] or "run"
