"""Read a finished run folder (settings.json, summary.json, items.jsonl); nothing else.

Reports never touch a model or the score cache: everything they show comes from these files.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import ConfigError, StoreError
from ..paths import refuse_special
from ..store.run import (
    RunFolder,
    folder_path,
    interrupted_reanalysis,
    iter_record_lines,
    unique_records,
)
from ..wording import TOO_DEEP, json_error, shell

__all__ = [
    "SUMMARY_VERSION",
    "RunData",
    "load_run",
    "refuse_newer",
    "run_config",
    "sweep_reference_folder",
]

SUMMARY_VERSION = 1
"""The newest summary.json schema version (the ``/N`` of ``schema``) this version reads."""


@dataclass(frozen=True)
class RunData:
    """One run folder, as written by a pipeline."""

    path: Path
    """The run folder."""
    summary: dict[str, Any]
    """Contents of summary.json (schema, provenance, counts, statistics)."""
    settings: dict[str, Any]
    """Contents of settings.json ({} when absent)."""
    damaged: list[str] | None = field(default=None, compare=False)
    """None: a damaged record (a line not UTF-8 or not a JSON object) is an error naming it;
    a list (the report's reading): such lines are left out, their errors listed here, as
    ``reanalyse`` leaves them out (the report refused a folder reanalyse had just analysed;
    QA)."""

    @property
    def items_path(self) -> Path:
        return self.path / "items.jsonl"

    @property
    def schema(self) -> str:
        """The summary schema, e.g. ``contamscope.permutation.summary/1``."""
        return str(self.summary.get("schema") or "")

    @property
    def method(self) -> str:
        """Method name: settings' ``method``, else the second part of the schema."""
        m = self.settings.get("method") or self.summary.get("method")
        if m:
            return str(m)
        parts = self.schema.split(".")
        return parts[1] if len(parts) > 2 else ""

    @property
    def model(self) -> str:
        """The model spec as the user gave it."""
        m = self.summary.get("model")
        return str(m.get("spec") if isinstance(m, dict) else m or self.settings.get("model", "?"))

    @property
    def benchmark(self) -> str:
        """The benchmark source as recorded."""
        b = self.summary.get("benchmark")
        src = b.get("source") if isinstance(b, dict) else b
        if src is None and isinstance(b, dict):  # per-split benchmarks (BenBench: train/test)
            srcs = [v.get("source") for v in b.values() if isinstance(v, dict)]
            src = " + ".join(str(x) for x in srcs if x) or None
        return str(src or self.settings.get("benchmark", "?"))

    @property
    def subjects(self) -> list[str]:
        """The subjects the run was restricted to (``--subjects``); [] for all. Read where the
        summary keeps the selection (under ``benchmark``; a membership run's at the top, a
        list, or in runs from before 2026-11-29 the command's text ``"anatomy,virology"``),
        else the settings'."""
        b = self.summary.get("benchmark")
        for sel in (
            b.get("selection") if isinstance(b, dict) else None,
            self.summary.get("selection"),
            self.settings.get("selection"),
        ):
            subjects = sel.get("subjects") if isinstance(sel, dict) else None
            if isinstance(subjects, str):
                subjects = [s.strip() for s in subjects.split(",") if s.strip()]
            if isinstance(subjects, list) and subjects:
                return [str(x) for x in subjects]
        return []

    def iter_records(self) -> Iterator[dict[str, Any]]:
        """Per-item records in file order; a malformed line is an error naming file:line. An
        id stored twice is read once, its later copy in the earlier one's place, as a run
        resumes it (the report showed both copies, compare took the first; cross-reader QA)."""
        for _, rec in self.iter_numbered_records():
            yield rec

    def iter_numbered_records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """:meth:`iter_records` with each record's line number (a later copy's)."""
        if not self.items_path.exists():
            return
        found: list[str] | None = None if self.damaged is None else []
        records = unique_records(iter_record_lines(self.items_path, found))
        if self.damaged is not None and found is not None:  # (each reading reads it whole)
            self.damaged[:] = found
        yield from records


def records_short(run: RunData) -> tuple[int, int] | None:
    """(records held, records the summary counts) where the run's items.jsonl holds fewer
    item records than its summary.json counts (lines taken out of a finished run); None where
    it holds them all, or the summary does not count them."""
    expected = selected_items(run.summary)
    if expected is None or not run.items_path.exists():
        return None
    held = sum(1 for _ in run.iter_records())
    return (held, expected) if held < expected else None


def selected_items(summary: dict[str, Any]) -> int | None:
    """How many item records the run wrote, by its summary: ``counts.items_selected`` (a
    permutation run), or the sum over the roles or splits that have it (membership's, BenBench's
    and CAP's counts).

    >>> selected_items({"counts": {"test": {"items": 3}, "train": {"items_selected": 4}}})
    7
    """
    counts = summary.get("counts")
    if not isinstance(counts, dict):
        return None
    if isinstance(counts.get("items_selected"), int):
        return int(counts["items_selected"])
    parts = [
        part.get("items_selected", part.get("items"))
        for part in counts.values()
        if isinstance(part, dict)
    ]
    numbers = [n for n in parts if isinstance(n, int)]
    return sum(numbers) if numbers and len(numbers) == len(parts) else None


def _read_json(path: Path) -> dict[str, Any]:
    refuse_special(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise StoreError(
            f"{path}:{exc.lineno}: not valid JSON ({json_error(exc, line=False)})"
        ) from None
    except RecursionError:
        raise StoreError(f"{path}: {TOO_DEEP}") from None
    except UnicodeDecodeError as exc:
        raise StoreError(f"{path}: not UTF-8 text (byte offset {exc.start})") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read ({exc.strerror})") from None
    if not isinstance(obj, dict):
        raise StoreError(f"{path}: expected a JSON object")
    return obj


def load_run(path: RunFolder, *, interrupted_ok: bool = False) -> RunData:
    """Open a run folder (a path or a :class:`~contamscope.store.RunDir`); refuse one without
    summary.json (unfinished or not a run), and (unless ``interrupted_ok``) one whose
    re-analysis was killed between rewriting its records and its summary."""
    path = folder_path(path)
    if path.exists() and not path.is_dir():
        raise StoreError(f"{path}: a file, not a run folder")
    if not path.is_dir():
        raise StoreError(f"{path}: no such run folder")
    if not interrupted_ok:  # (its report mixed two analyses' numbers, exit 0; kill QA)
        refuse_interrupted(path)
    summary_path = path / "summary.json"
    if not summary_path.exists():
        hint = (
            " (run interrupted? re-run its command to finish it)"
            if (path / "items.jsonl").exists()
            else f" (a sweep's folder: its runs are {path / '*'}/, its board leaderboard.html)"
            if (path / "sweep.json").is_file()
            else ""
        )
        raise StoreError(f"{path}: no summary.json, not a finished run folder{hint}")
    settings_path = path / "settings.json"
    settings = _read_json(settings_path) if settings_path.exists() else {}
    run = RunData(path=path, summary=_read_json(summary_path), settings=settings)
    check_statistics(run.summary, run.method, summary_path)
    return run


def refuse_interrupted(path: Path) -> None:
    """Raise :class:`StoreError` for a run folder whose re-analysis was killed between
    rewriting its records and its summary (:func:`~contamscope.store.interrupted_reanalysis`)."""
    request = interrupted_reanalysis(path)
    if request is not None:
        asked = ", ".join(f"{k}={v}" for k, v in request.items()) or "its settings"
        raise StoreError(
            f"{path}: its re-analysis ({asked}) was interrupted, so its records and summary "
            f"may follow different settings; `contamscope reanalyse {shell(path)}` finishes it"
        )


def check_statistics(summary: dict[str, Any], method: str | None, path: Path) -> None:
    """Refuse a summary of a method whose finished summary always holds ``statistics`` when it
    has none: '{}', or one cut down by hand, read as a finished run with no item (QA)."""
    if method in _WITH_STATISTICS and not isinstance(summary.get("statistics"), dict):
        raise StoreError(f"{path}: no 'statistics', not a finished {method} run (damaged?)")


_WITH_STATISTICS = frozenset({"permutation", "benbench", "cap", "membership"})
"""The methods whose finished summary always holds a ``statistics`` object."""


def refuse_newer(run: RunData, action: str) -> None:
    """Refuse a run whose summary.json has a newer schema version than this contamscope reads
    (its fields may mean other things): "upgrade contamscope to ``action`` it"."""
    schema, _, version = run.schema.partition("/")
    newer = version and (not version.isdigit() or int(version) > SUMMARY_VERSION)
    if newer and schema.startswith("contamscope."):
        raise ConfigError(
            f"{run.path}: summary.json has schema {run.schema!r}, newer than this contamscope "
            f"{__version__} reads (version {SUMMARY_VERSION}); upgrade contamscope to {action} it"
        )


def sweep_reference_folder(path: Path | str) -> bool:
    """Whether ``path`` is a sweep's folder of reference runs (``OUT/reference/`` of ``sweep
    --reference-benchmark``): not a run itself, and what ``OUT/*/`` matches besides the pairs."""
    path = Path(path)
    return path.name == "reference" and (path.parent / "sweep.json").is_file()


def answered_by_others(summary: dict[str, Any]) -> str | None:
    """What a served run's replies say of the model that answered: ``model.answered_as`` names
    other models than the spec's (a router's fallback), said once by the run and then only in
    summary.json, so a card published the numbers as the model asked for (QA). None when all
    replies are the model's, or the run is not a served one."""
    model = summary.get("model")
    answered = model.get("answered_as") if isinstance(model, dict) else None
    spec = str(model.get("spec") or "") if isinstance(model, dict) else ""
    if not isinstance(answered, dict) or not answered or "#" not in spec:
        return None
    from ..backends.openai_compat import same_served_model

    asked = spec.rsplit("#", 1)[1]
    counts = {str(k): v for k, v in answered.items() if isinstance(v, int) and v > 0}
    others = {k: v for k, v in counts.items() if not same_served_model(asked, k)}
    if not others:
        return None
    names = ", ".join(f"{k!r} ({v})" for k, v in others.items())
    return (
        f"{sum(others.values())} of the {sum(counts.values())} server replies of the command "
        f"that last wrote the run named another model than {asked!r}: {names} (a router's "
        f"fallback?); their numbers are recorded as those of {asked!r}"
    )


def run_config(run: RunData) -> dict[str, Any]:
    """A run's configuration: summary.json's ``config``, else settings.json's ({} if none)."""
    config = run.summary.get("config") or run.settings.get("config") or {}
    return config if isinstance(config, dict) else {}


def once_per_measurement(ps: Sequence[float | None]) -> list[bool]:
    """For the p-values of copies of one run (a set of ``same_records``), which repeat an
    earlier copy's: one measurement is one test in a family's count (Holm's), however many
    folders hold it. A copy analysed otherwise (another p) stays a test of its own.

    >>> once_per_measurement([0.01, None, 0.01, 0.2])
    [False, False, True, False]
    """
    seen: set[float] = set()
    repeats = []
    for p in ps:
        repeats.append(p is not None and p in seen)
        if p is not None:
            seen.add(p)
    return repeats


def same_records(folders: Sequence[tuple[str, Path]]) -> list[list[int]]:
    """The sets (indices into ``folders``, ``(method, run folder)`` pairs) of two or more runs
    of one method whose ``items.jsonl`` are byte for byte the same: a folder copied, or one
    set-up run twice, one measurement each set (only records of one size are read)."""
    import hashlib

    by_size: dict[tuple[str, int], list[int]] = {}
    for i, (method, folder) in enumerate(folders):
        with contextlib.suppress(OSError):
            size = (folder / "items.jsonl").stat().st_size
            by_size.setdefault((method, size), []).append(i)
    groups: dict[tuple[str, str], list[int]] = {}
    for (method, _), alike in by_size.items():
        for i in alike if len(alike) > 1 else ():
            with contextlib.suppress(OSError):
                records = (folders[i][1] / "items.jsonl").read_bytes()
                groups.setdefault((method, hashlib.sha256(records).hexdigest()), []).append(i)
    return [same for same in groups.values() if len(same) > 1]
