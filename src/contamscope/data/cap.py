"""Load benchmarks for CAP: original items per split, and the modified versions when supplied.

Readable inputs:

- a CAP data folder (as published with the paper): ``[SUBSET_](ori|mod)_SPLIT[_samples].json``,
  each a JSON list of ``{input, output}`` (ECTSum adds ``idx``); ``mod`` files are the
  consistency-modified versions of ``ori``, record by record. FinEval prompts (multiple choice)
  are parsed into :class:`MCQItem` with the regular expression the FinEval README gives; the others
  become :class:`QAItem` (FinQA, AlphaFin: QA; ECTSum: summaries);
- a folder in a multiple-choice format contamscope reads, with split subfolders (MMLU, C-Eval);
- a JSONL / CSV / JSON file holding all splits with a split field, or a folder with one such file
  per split (``train.jsonl``, ``test.jsonl``), mapped with :class:`CapFields`.
"""

from __future__ import annotations

import hashlib
import os
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from contamscope.data.items import LoadResult, MCQItem, QAItem, RowProblem, spec_text
from contamscope.data.loaders import load_benchmark
from contamscope.data.readers import (
    decode_text,
    json_list_lines,
    json_object,
    jsonl_lines,
    load_json_list,
    not_a_file,
    read_table,
    table_suffix,
)
from contamscope.data.records import RowError, question_text
from contamscope.errors import ConfigError, DataError
from contamscope.wording import plural

CAP_LINES = (
    "CAP's .json files hold one JSON list of records ([{...}, {...}]), not JSON Lines: write "
    "the records as one list (generic split files may be SPLIT.jsonl instead)"
)
"""What a CAP ori/mod file that reads as JSON Lines is told (--format reads no CAP folder)."""

__all__ = [
    "CapFields",
    "CapSplit",
    "CapData",
    "load_cap",
    "parse_fineval",
    "layout_note",
    "FINEVAL_PROMPT",
    "Task",
    "TASKS",
]

Task = Literal["mcq", "qa", "summary"]
TASKS: tuple[str, ...] = ("mcq", "qa", "summary")
CapItem = MCQItem | QAItem

_FINEVAL_HEAD = "请回答选择题，从选项A，B，C，D中选择，回答问题。\n问题: "
_FINEVAL_END = re.compile(r"\]\n ?答案： ?\n?\Z")


def _fineval_parts(prompt: str) -> tuple[str, tuple[str, str, str, str]] | None:
    """Question and options of a FinEval prompt, as FinEval's README expression reads them
    (``^HEAD(?P<q>.*)\\n ?选项：\\['A': ?(?P<A>.*), 'B': ?(?P<B>.*), 'C': ?(?P<C>.*),
    'D': ?(?P<D>.*)\\]\\n ?答案： ?$``, DOTALL, each group as long as it can be), found from
    the right without backtracking: that expression took 13 s on a 1,351-character row of
    repeated option lists, and hours on a few kB (security QA). None if not one."""
    end = _FINEVAL_END.search(prompt)
    if not prompt.startswith(_FINEVAL_HEAD) or end is None:
        return None
    body = prompt[len(_FINEVAL_HEAD) : end.start()]
    parts: list[str] = []
    for label in "DCB":
        cut = body.rfind(f", '{label}':")
        if cut < 0:
            return None
        value = body[cut + 6 :]
        parts.append(value[1:] if value.startswith(" ") else value)
        body = body[:cut]
    cut = max(body.rfind("\n选项：['A':"), body.rfind("\n 选项：['A':"))
    if cut < 0:
        return None
    value = body[cut:].split(":", 1)[1]  # (the marker's one colon is the ASCII one after A')
    parts.append(value[1:] if value.startswith(" ") else value)
    d, c, b, a = parts
    return body[:cut], (a, b, c, d)


FINEVAL_PROMPT = (
    "请回答选择题，从选项A，B，C，D中选择，回答问题。\n问题: {question}\n选项：[{options}]\n答案："
)
"""FinEval's prompt layout (the ``mod`` files' spacing); used to render generated modifications."""

_PAIR_FILE = re.compile(
    r"^(?:(?P<subset>[A-Za-z0-9]+)_)?(?P<kind>ori|mod)_(?P<split>[A-Za-z0-9]+)(?P<samples>_samples)?\.json$"
)
_GENERIC_EXT = (".jsonl", ".csv", ".tsv", ".json")


@dataclass(frozen=True)
class CapFields:
    """Record fields for generic JSONL/CSV/JSON CAP data (``--fields input=question,...``)."""

    input: str = "input"
    """Field with the model input (question, prompt or passage)."""
    output: str | None = "output"
    """Field with the reference answer / summary (empty or missing: no reference)."""
    split: str | None = "split"
    """Field naming the split of a record (files holding several splits)."""
    id: str | None = "id"
    """Field with a unique id; missing = file stem + record number."""
    modified: str | None = None
    """Field with a supplied modified input (optional; otherwise contamscope modifies)."""
    given: frozenset[str] = field(default=frozenset(), repr=False)
    """The keys ``--fields`` named: a name given that no record has is refused (a typo in
    ``modified=`` had every item modified by contamscope instead, exit 0; QA). A key set to
    another value than its default counts as given too."""

    def named(self) -> dict[str, str]:
        """The field names given (by ``--fields`` or as other values than the defaults)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            named = f.name in self.given or value != f.default
            if f.name != "given" and value is not None and named:
                out[f.name] = value
        return out

    def check_seen(
        self, records: Iterable[dict[str, Any]], source: str, keys: Iterable[str]
    ) -> None:
        """Refuse a field of ``keys`` given by name that no record of ``source`` has."""
        wanted = {k: v for k, v in self.named().items() if k in set(keys)}
        if not wanted:
            return
        seen: set[str] = set()
        for rec in records:
            seen.update(rec)
        for key, name in wanted.items():
            if name not in seen:
                raise ConfigError(f"--fields {key}={name}: no record of {source} has that field")

    @classmethod
    def parse(cls, spec: str) -> CapFields:
        """``CapFields.parse("input=question,output=answer,split=part")``; unknown keys refused."""
        known = [f.name for f in fields(cls) if f.name != "given"]
        values: dict[str, Any] = {}
        for part in (p.strip() for p in spec.split(",") if p.strip()):
            key, eq, value = (x.strip() for x in part.partition("="))
            if not eq or key not in known:
                raise ConfigError(
                    f"--fields {part!r}: expected key=value with key one of {', '.join(known)}"
                )
            if "=" in value:  # 'input=question output=answer' read as one odd field name
                raise ConfigError(
                    f"--fields {part!r}: a field name with '=' in it; separate key=value pairs "
                    "with commas"
                )
            if key == "input" and not value:
                raise ConfigError("--fields: input needs a field name")
            values[key] = value or None
        return cls(**values, given=frozenset(values))


@dataclass
class CapSplit:
    """The items of one split and, when supplied, their modified versions."""

    name: str
    """Split name as given in ``--splits``."""
    items: list[CapItem]
    """Original items (:class:`MCQItem` or :class:`QAItem`) in file order."""
    modified: dict[str, CapItem] | None = None
    """Supplied modified item per original id (``mod`` files), or None: contamscope modifies."""
    files: list[str] = field(default_factory=list)
    """Files read for this split."""
    layout_note: str | None = None
    """Set when the supplied modified inputs are framed unlike the originals (another prompt
    layout around every item: see :func:`layout_note`), else None."""

    def __repr__(self) -> str:
        """One line: the items' count, not the items (megabytes for a real split)."""
        mod = "none" if self.modified is None else str(len(self.modified))
        return f"CapSplit(name={self.name!r}, items={len(self.items)}, modified={mod})"


@dataclass
class CapData:
    """Everything ``load_cap`` read."""

    task: Task
    """``mcq``, ``qa`` or ``summary``."""
    task_detected: bool
    """True when the task was inferred from the data rather than given."""
    splits: dict[str, CapSplit]
    problems: list[RowProblem]
    source: str
    format: str
    """``cap-pairs``, ``cap-pairs+fineval``, ``mcq:<format>``, or ``generic``."""
    content_hash: str
    notes: list[str] = field(default_factory=list)
    """What loading changed in the items read (multiple-choice folders: labels the options
    carried, as :attr:`LoadResult.notes <contamscope.data.items.LoadResult.notes>`)."""

    def __repr__(self) -> str:
        """One line, as :class:`~contamscope.data.items.LoadResult` prints: the items of every
        split printed whole ran to 1.3 MB for FinEval's two splits."""
        splits = ", ".join(f"{k}={len(v.items)}" for k, v in self.splits.items())
        return (
            f"CapData(source={self.source!r}, format={self.format!r}, task={self.task!r}, "
            f"splits=({splits}), problems={len(self.problems)}, "
            f"content_hash={self.content_hash[:12]!r})"
        )


def parse_fineval(prompt: str) -> tuple[str, tuple[str, str, str, str]]:
    """Question and options of a FinEval prompt (README regular expression); RowError if not one.

    >>> parse_fineval("请回答选择题，从选项A，B，C，D中选择，回答问题。\\n问题: 1+1=____。\\n 选项：['A':1, 'B': 2, 'C':3, 'D':4]\\n 答案： ")
    ('1+1=____。', ('1', '2', '3', '4'))
    """
    parts = _fineval_parts(prompt)
    if parts is None:
        raise RowError("input is not a FinEval prompt (README format)")
    return parts


class _Collector:
    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.problems: list[RowProblem] = []
        self.list_lines: dict[str, list[int | None]] = {}
        """Per JSON-list file, the line each record starts on: its records are numbered
        (ids, pairs) by their place in the list, its problems named by their line."""

    def problem(self, source: str, line: int | None, reason: str) -> None:
        """A problem of ``source`` at ``line``: for a JSON list, the record's number (kept
        so while loading: records pair by it), named by its line in :meth:`located`."""
        p = RowProblem(source, line, reason)
        if self.strict:
            raise DataError(str(self._located(p)))
        self.problems.append(p)

    def _located(self, p: RowProblem) -> RowProblem:
        starts = self.list_lines.get(p.source)
        if starts is None or p.line is None or not 0 < p.line <= len(starts):
            return p
        # (a record's number was given as its line: 'ori_dev.json:3' for line 11; QA)
        return RowProblem(p.source, starts[p.line - 1], f"record {p.line} of the list: {p.reason}")

    def located(self) -> list[RowProblem]:
        """The problems as the user reads them: a JSON list's records by line and number, each
        file's in the order of its records (a mod record's pairing problem, found after the
        file was read, came after a later record's; QA)."""
        files: dict[str, int] = {}
        for p in self.problems:
            files.setdefault(p.source, len(files))
        ordered = sorted(
            self.problems, key=lambda p: (files[p.source], -1 if p.line is None else p.line)
        )
        return [self._located(p) for p in ordered]


def _read(path: Path, digest: Any) -> str:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
    digest.update(raw)
    return decode_text(path, raw, by_line=path.suffix.lower() == ".jsonl")


def _json_list(path: Path, text: str) -> list[Any]:
    """A CAP JSON file's list of records; an empty file or list is a one-line error (an
    empty file read as 'not JSON (Expecting value ...)', a list as 'empty file'; QA)."""
    if not text.strip():
        raise DataError(f"{path}: no records (empty file)")
    listed = load_json_list(path, text, CAP_LINES)
    if not listed:
        raise DataError(f"{path}: no records (an empty JSON list)")
    return listed


def _records(path: Path, text: str, col: _Collector) -> list[tuple[int, dict[str, Any]]]:
    """(line or record number, record) of a JSON list, JSONL or CSV file; bad rows collected."""
    out: list[tuple[int, dict[str, Any]]] = []
    suffix = table_suffix(path, text)
    if suffix == ".json":
        listed = _json_list(path, text)
        col.list_lines[str(path)] = json_list_lines(text, listed)
        for i, rec in enumerate(listed, start=1):
            if isinstance(rec, dict):
                out.append((i, rec))
            elif isinstance(rec, RowError):  # a key given twice (load_json_list)
                col.problem(str(path), i, str(rec))
            else:
                col.problem(str(path), i, f"expected a JSON object, got {type(rec).__name__}")
    elif suffix == ".jsonl":
        for line, raw in jsonl_lines(text):
            try:
                out.append((line, json_object(raw)))
            except RowError as e:
                col.problem(str(path), line, str(e))
    elif suffix == ".csv":
        first, rows = read_table(path, text)
        if first is None:
            return out
        header = [h.strip() for h in first[1]]
        for line, cells in rows:
            if isinstance(cells, RowError):
                col.problem(str(path), line, str(cells))
                continue
            if len(cells) != len(header):
                col.problem(str(path), line, f"{len(cells)} cells, header has {len(header)}")
                continue
            out.append((line, dict(zip(header, cells))))
    else:
        raise DataError(f"{path}: unsupported file type (use .json, .jsonl, .csv or .tsv)")
    if not out and not col.problems:
        raise DataError(f"{path}: no records (empty file)")
    return out


def _text(rec: dict[str, Any], name: str | None, what: str) -> str | None:
    if name is None:
        return None
    value = rec.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(getattr(value, "text", value))  # (a JSON number as the file wrote it)
    if not isinstance(value, str):
        raise RowError(f"{what} field {name!r} is not text ({type(value).__name__})")
    return value


def _make_item(
    rec: dict[str, Any],
    cf: CapFields,
    *,
    mcq: bool,
    split: str,
    source: str,
    line: int,
    default_id: str,
) -> CapItem:
    if cf.input not in rec:
        raise RowError(f"missing field {cf.input!r}")
    prompt = question_text(rec[cf.input], cf.input)
    output = _text(rec, cf.output, "output")
    raw_id = _text(rec, cf.id, "id")
    item_id = raw_id.strip() if raw_id else default_id
    meta = {"input": prompt}
    if mcq:
        question, options = parse_fineval(prompt)
        answer = None
        if output is not None:
            letter = output.strip().upper()
            if letter not in "ABCD" or len(letter) != 1:
                raise RowError(f"answer {output!r} is not one of A, B, C, D")
            answer = "ABCD".index(letter)
        meta["prompt_style"] = "fineval"
        return MCQItem(item_id, question, options, answer, None, source, line, meta)
    return QAItem(item_id, prompt, output, split, None, source, line, meta)


def _by_split(
    path: Path, records: list[tuple[int, dict[str, Any]]], cf: CapFields, col: _Collector
) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """The records of a file that holds every split, grouped by their split field (a record
    without one is a problem, reported once whatever the number of splits asked for)."""
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for line, rec in records:
        value = rec.get(cf.split) if cf.split is not None else None
        if value is None or isinstance(value, (dict, list)) or not str(value).strip():
            col.problem(str(path), line, f"missing split field {cf.split!r}")
            continue
        # "Test" and "TRAIN" are the test and train splits (they were dropped silently; QA)
        out.setdefault(str(value).strip().casefold(), []).append((line, rec))
    return out


def _collect(
    path: Path,
    records: list[tuple[int, dict[str, Any]]],
    cf: CapFields,
    col: _Collector,
    *,
    mcq: bool,
    split: str,
) -> tuple[list[CapItem], list[str | None]]:
    """Items of one file's records (all of split ``split``) and their supplied modifications."""
    items: list[CapItem] = []
    mods: list[str | None] = []
    seen: dict[str, int] = {}
    for line, rec in records:
        try:
            item = _make_item(
                rec,
                cf,
                mcq=mcq,
                split=split,
                source=str(path),
                line=line,
                default_id=f"{path.stem}-{line}",
            )
            mod = _text(rec, cf.modified, "modified")
        except RowError as e:
            col.problem(str(path), line, str(e))
            continue
        if item.id in seen:
            where = "record" if str(path) in col.list_lines else "line"
            col.problem(
                str(path), line, f"duplicate id {item.id!r} (first at {where} {seen[item.id]})"
            )
            continue
        seen[item.id] = line
        items.append(item)
        mods.append(mod)
    return items, mods


def _detect_task(first_inputs: Sequence[str], outputs: Sequence[str]) -> str:
    if first_inputs and _fineval_parts(first_inputs[0]) is not None:
        return "mcq"
    lengths = [len(o) for o in outputs if o]
    return "summary" if lengths and statistics.median(lengths) >= 200 else "qa"


def _set_name(key: tuple[str | None, bool]) -> str:
    """The --subset name of a file set: its prefix, ``samples``, or both (``report_samples``);
    empty for the plain ``ori_SPLIT.json``."""
    return "_".join(x for x in (key[0], "samples" if key[1] else None) if x)


def _in_subset(key: tuple[str | None, bool], subset: str) -> bool:
    return key[0] == subset or (subset == "samples" and key[1]) or _set_name(key) == subset


def _pair_files(folder: Path, split: str, subset: str | None) -> tuple[Path, Path | None]:
    cands: dict[tuple[str | None, bool], dict[str, Path]] = {}
    for p in sorted(folder.iterdir()):
        m = _PAIR_FILE.match(p.name)
        if m and m.group("split") == split:
            key = (m.group("subset"), bool(m.group("samples")))
            cands.setdefault(key, {})[m.group("kind")] = p
    with_ori = {k: v for k, v in cands.items() if "ori" in v}
    if subset is not None:
        exact = {k: v for k, v in with_ori.items() if _set_name(k) == subset}
        with_ori = exact or {k: v for k, v in with_ori.items() if _in_subset(k, subset)}
    if not with_ori:
        found = sorted(  # the splits of the set asked for (all of them listed those of others)
            {
                m.group("split")
                for p in folder.iterdir()
                if (m := _PAIR_FILE.match(p.name))
                and m.group("kind") == "ori"
                and (
                    subset is None
                    or _in_subset((m.group("subset"), bool(m.group("samples"))), subset)
                )
            }
        )
        extra = f" with --subset {subset}" if subset else ""
        raise ConfigError(
            f"split {split!r}: no ori_{split}*.json in {folder}{extra} (splits there: {', '.join(found) or 'none'})"
        )
    if len(with_ori) > 1:
        plain = [k for k in with_ori if k == (None, False)]
        if not plain:  # (named report_full, which --subset refused; QA)
            names = sorted(_set_name(k) for k in with_ori)
            raise ConfigError(
                f"split {split!r}: several file sets in {folder} ({', '.join(names)}); "
                "pick one with --subset NAME"
            )
        key = plain[0]
    else:
        key = next(iter(with_ori))
    return with_ori[key]["ori"], with_ori[key].get("mod")


def _cap_folder(path: Path) -> Path | None:
    for folder in (path, path / "data"):
        if folder.is_dir() and any(_PAIR_FILE.match(p.name) for p in folder.iterdir()):
            return folder
    return None


def load_cap(
    spec: str | os.PathLike[str],
    splits: Sequence[str],
    *,
    task: str | None = None,
    subset: str | None = None,
    fields: CapFields | None = None,
    mcq_format: str | None = None,
    strict: bool = False,
) -> CapData:
    """Load ``splits`` of a CAP benchmark (see the module docstring for what ``spec`` may be).

    ``task`` (``mcq``, ``qa``, ``summary``) is detected when None: FinEval prompts and
    multiple-choice formats are ``mcq``; free text is ``summary`` when the median reference is at
    least 200 characters, else ``qa``. Malformed rows are skipped and listed (``strict`` makes
    the first one fatal); a missing split is a :class:`ConfigError`.
    """
    spec = spec_text(spec)
    if task is not None and task not in TASKS:
        raise ConfigError(f"--task {task!r}: expected one of {', '.join(TASKS)}")
    if not splits or len(set(splits)) != len(splits):
        raise ConfigError("--splits: give two or more different split names, e.g. train,test")
    path = Path(spec).expanduser()
    if not (path.is_file() or path.is_dir()):
        raise DataError(f"{spec}: {not_a_file(path)}")
    cf = fields or CapFields()
    col = _Collector(strict)
    digest = hashlib.sha256()
    folder = _cap_folder(path) if path.is_dir() else None
    if folder is not None:
        kind = "a CAP folder of ori/mod files"
        _unused(spec, kind, ("--format", mcq_format))
        return _load_pairs(folder, splits, task, subset, cf, col, digest)
    if path.is_dir() and any((path / s).is_dir() for s in splits):
        kind = "a folder of multiple-choice split subfolders"
        _unused(spec, kind, ("--subset", subset), ("--fields", fields))
        return _load_mcq_folders(path, splits, task, mcq_format, strict)
    kind = "a folder of split files" if path.is_dir() else "one file"
    _unused(spec, kind, ("--format", mcq_format), ("--subset", subset))
    return _load_generic(path, splits, task, cf, col, digest)


_READ_BY = {
    "--format": "a folder of multiple-choice split subfolders",
    "--subset": "a CAP folder of ori/mod files",
    "--fields": "CAP ori/mod files and generic JSONL/CSV/JSON files",
}
"""The kind of CAP data that reads each of these options."""


def _unused(spec: str, kind: str, *given: tuple[str, object]) -> None:
    """An option this kind of CAP data never reads is a user error, not silently dropped."""
    for name, value in given:
        if value is not None:
            raise ConfigError(f"{name} is read only for {_READ_BY[name]}; {spec} is {kind}")


def _load_pairs(
    folder: Path,
    splits: Sequence[str],
    task: str | None,
    subset: str | None,
    cf: CapFields,
    col: _Collector,
    digest: Any,
) -> CapData:
    files = {s: _pair_files(folder, s, subset) for s in splits}
    texts = {s: _read(files[s][0], digest) for s in splits}
    detected = task is None
    first = _json_list(files[splits[0]][0], texts[splits[0]])[:50]
    looks = _detect_task(  # the first record with a text input (bad rows are named later)
        [r["input"] for r in first if isinstance(r, dict) and isinstance(r.get("input"), str)][:1],
        [str(r.get("output") or "") for r in first if isinstance(r, dict)],
    )
    if task is None:
        task = looks
    elif looks == "mcq" and task != "mcq":  # a run that could only end "no evidence"
        raise ConfigError(
            f"--task {task}: {files[splits[0]][0]} holds multiple-choice prompts with letter "
            f"answers; a {task} task's overlap scores of single letters say nothing of the "
            "model: leave --task out (these are read as mcq)"
        )
    unread = sorted(k for k in cf.named() if k in ("split", "id", "modified"))
    if unread:  # (given, and silently not read)
        raise ConfigError(
            f"--fields {unread[0]}={cf.named()[unread[0]]}: {folder} is a CAP folder of ori/mod "
            "files, whose --fields reads input and output only (the split is the file's, the id "
            "its idx, the modified input the mod file's)"
        )
    pair_cf = CapFields(cf.input, cf.output, None, "idx", None)
    ori = {s: _records(files[s][0], texts[s], col) for s in splits}
    cf.check_seen((rec for s in splits for _, rec in ori[s]), str(folder), ("input", "output"))
    out: dict[str, CapSplit] = {}
    for s in splits:
        ori_path, mod_path = files[s]
        items, _ = _collect(ori_path, ori[s], pair_cf, col, mcq=task == "mcq", split=s)
        modified = None
        names = [str(ori_path)]
        if mod_path is not None:
            names.append(str(mod_path))
            modified = _pair_mods(ori_path, mod_path, items, pair_cf, col, task == "mcq", s, digest)
        out[s] = CapSplit(s, items, modified, names)
    fmt = "cap-pairs+fineval" if task == "mcq" else "cap-pairs"
    return _finish(task, detected, out, col, str(folder), fmt, digest)


def _pair_mods(
    ori_path: Path,
    mod_path: Path,
    items: list[CapItem],
    cf: CapFields,
    col: _Collector,
    mcq: bool,
    split: str,
    digest: Any,
) -> dict[str, Any]:
    """Modified items keyed by the original's id; records are paired by position."""
    text = _read(mod_path, digest)
    ori_n = len(_json_list(ori_path, _read(ori_path, hashlib.sha256())))
    mods, _ = _collect(mod_path, _records(mod_path, text, col), cf, col, mcq=mcq, split=split)
    answered = {it.line for it in items if it.answer is not None}
    for m in mods:  # (it paired as a supplied modification with no answer to score; QA)
        if m.answer is None and m.line in answered:
            col.problem(
                str(mod_path), m.line, f"missing field {cf.output!r}: the modified input's answer"
            )
    by_line = {m.line: m for m in mods if m.answer is not None or m.line not in answered}
    n_mod = len(_json_list(mod_path, text))
    if n_mod != ori_n:
        raise DataError(
            f"{mod_path}: {n_mod} records but {ori_path.name} has {ori_n}; mod files must pair "
            "with ori files record by record"
        )
    unlike = _unlike_pairs(items, by_line)
    checked = sum(1 for it in items if it.line in by_line)
    if checked >= 2 and 2 * len(unlike) > checked:
        line, other = next(iter(unlike.items()))
        raise DataError(
            f"{mod_path}: its records do not pair with {ori_path.name} by position "
            f"({len(unlike)} of {checked} modified inputs are more like another "
            f"original's; first: record {line} is more like original record {other}); mod "
            "files must list the modifications in the ori file's order"
        )
    out: dict[str, Any] = {}
    for item in items:
        mod = by_line.get(item.line)
        like = unlike.get(item.line) if item.line is not None else None
        if mod is None or like is not None:
            reason = (
                "modified record unusable"
                if mod is None
                else f"modified record is more like original record {like} than its own "
                "(paired by position)"
            )
            note = "item uses a generated modification"
            named = next(  # the record's own problem, named when it was read: one problem
                (
                    k
                    for k, p in enumerate(col.problems)
                    if (p.source, p.line) == (str(mod_path), item.line)
                ),
                None,
            )
            if mod is None and named is not None:
                old = col.problems[named]
                col.problems[named] = RowProblem(old.source, old.line, f"{old.reason}; {note}")
            else:
                col.problem(str(mod_path), item.line, f"{reason}; {note}")
            continue
        out[item.id] = mod
    return out


PAIRING_MARGIN = 0.1
"""How much more like another original (cosine similarity of character-trigram sets) a modified
input must be than like its own original for the pair to count as misaligned. On the CAP paper's
published files (AlphaFin, ECTSum, FinEval, FinQA) a pair's own similarity is 0.79-1.0 and the
most similar other original is at most 0.002 above it (originals that share their context).

A modified input that resembles *no* original (one of another split's, swapped in) is not caught:
no floor on a pair's own similarity separates it. On those files a true pair's own similarity is
as low as 0.79 (ECTSum's paraphrased transcripts), while a modified input reaches 0.64-0.99 with
the most similar *unrelated* original of its file (FinQA 0.99, FinEval 0.95: shared prompt
templates and passages)."""


def _trigram_matrix(texts: Sequence[str]) -> Any:
    """Rows of L2-normalised 0/1 indicators of each text's character trigrams (hashed into
    2^20 columns), a sparse matrix."""
    from scipy import sparse

    rows, cols = [], []
    for i, text in enumerate(texts):
        a = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        if len(a) < 3:
            a = np.pad(a, (0, 3 - len(a)))
        h = np.unique((a[:-2] * np.uint64(1000003) + a[1:-1] * np.uint64(7919) + a[2:]) % (1 << 20))
        rows.append(np.full(len(h), i))
        cols.append(h)
    r, c = np.concatenate(rows), np.concatenate(cols)
    m = sparse.csr_matrix((np.ones(len(r), np.float32), (r, c)), shape=(len(texts), 1 << 20))
    norms = np.sqrt(np.asarray(m.sum(axis=1)).ravel())
    return sparse.diags(1.0 / np.maximum(norms, 1.0)) @ m


def _unlike_pairs(items: Sequence[CapItem], mods: dict[int | None, CapItem]) -> dict[int, int]:
    """Lines whose modified input is clearly more like another original than like its own
    (the mod file in another order than the ori file), with that original's line.

    >>> a, b = QAItem("a", "the cat sat on the mat", None, "t", line=1), QAItem("b", "stock prices fell sharply", None, "t", line=2)
    >>> _unlike_pairs([a, b], {1: QAItem("x", "stock prices fell hard", None, "t"), 2: a})
    {1: 2, 2: 1}
    >>> _unlike_pairs([a, b], {1: QAItem("x", "the cat sat on a mat", None, "t"), 2: b})
    {}
    """
    paired = [it for it in items if it.line is not None and it.line in mods]
    if len(paired) < 2:
        return {}
    ori = _trigram_matrix([it.meta.get("input") or it.question for it in paired])
    mod = _trigram_matrix(
        [mods[it.line].meta.get("input") or mods[it.line].question for it in paired]
    )
    out: dict[int, int] = {}
    for start in range(0, len(paired), 1024):  # bounded memory: 1024 x n similarities at a time
        sims = (mod[start : start + 1024] @ ori.T).toarray()
        for k, row in enumerate(sims):
            i = start + k
            own = row[i]
            row[i] = -1.0
            j = int(row.argmax())
            if row[j] > own + PAIRING_MARGIN:
                out[paired[i].line] = paired[j].line  # type: ignore[index,assignment]
    return out


LAYOUT_MIN_PAIRS = 5
"""Pairs a split needs before :func:`layout_note` compares the frames of its inputs: with fewer,
text the items share by chance reads as a frame."""


def _frame(texts: Sequence[str], end: bool) -> str:
    """The text every one of ``texts`` starts with (``end``: ends with)."""
    if end:
        return os.path.commonprefix([t[::-1] for t in texts])[::-1]
    return os.path.commonprefix(list(texts))


TEMPLATE_FIX = "; --template lays out both alike"
"""The advice ending a multiple-choice :func:`layout_note` (for ``cap``: commands without
``--template`` say their own)."""


def layout_note(split: CapSplit, mcq: bool) -> str | None:
    """A warning when the supplied modified inputs of ``split`` are spaced unlike the originals:
    every original starts (or ends) with one text, every modified input with another that
    differs from it in whitespace only. The PCR then measures that layout change as well as the
    modification (FinEval's published ``mod`` files end ``\\n答案：``, its originals
    ``\\n 答案： ``); frames that differ otherwise are taken for the modification (a year
    shifted in every item's last words). None when the frames agree or fewer than
    :data:`LAYOUT_MIN_PAIRS` pair.

    >>> ori = [QAItem(str(i), f"Q: item {i}?\\nA: ", None, "t") for i in range(5)]
    >>> mod = {it.id: QAItem(it.id, it.question.replace("A: ", "A:"), None, "t") for it in ori}
    >>> print(layout_note(CapSplit("t", ori, mod, ["o.json", "m.json"]), False))
    m.json: every modified input ends '?\\nA:' where every original ends '?\\nA: ': the prompts' spacing differs in every pair, so M modified, C and the PCR measure that change as well as the modification
    >>> yr = [QAItem(str(i), f"Growth of unit {i} in 2019?", None, "t") for i in range(5)]
    >>> mod = {it.id: QAItem(it.id, it.question.replace("2019", "2020"), None, "t") for it in yr}
    >>> layout_note(CapSplit("t", yr, mod, ["o.json", "m.json"]), False) is None  # the change
    True
    >>> mod = {it.id: QAItem(it.id, it.question.replace(it.id, it.id + "0"), None, "t") for it in ori}
    >>> layout_note(CapSplit("t", ori, mod, ["o.json", "m.json"]), False) is None
    True
    """
    mods = split.modified or {}
    pairs = [(it, mods[it.id]) for it in split.items if it.id in mods]
    if len(pairs) < LAYOUT_MIN_PAIRS:
        return None
    ori = [it.meta.get("input") or it.question for it, _ in pairs]
    mod = [m.meta.get("input") or m.question for _, m in pairs]
    where = split.files[-1] if split.files else f"split {split.name!r}"
    for end, verb in ((False, "starts with"), (True, "ends")):
        a, b = _frame(ori, end), _frame(mod, end)
        if a == b or "".join(a.split()) != "".join(b.split()):
            continue  # alike, or unlike beyond spacing: the modification itself ("in 2020?")
        k = len(_frame([a, b], end))  # the part both frames share, shown as context (12 chars)
        a_, b_ = (a[-k - 12 :], b[-k - 12 :]) if end else (a[: k + 12], b[: k + 12])
        fix = TEMPLATE_FIX if mcq else ""
        return (
            f"{where}: every modified input {verb} {b_!r} where every original {verb} {a_!r}: "
            "the prompts' spacing differs in every pair, so M modified, C and the PCR measure "
            f"that change as well as the modification{fix}"
        )
    return None


def _load_mcq_folders(
    path: Path, splits: Sequence[str], task: str | None, mcq_format: str | None, strict: bool
) -> CapData:
    if task not in (None, "mcq"):
        raise ConfigError(f"{path}: split subfolders hold multiple-choice files; use --task mcq")
    out: dict[str, CapSplit] = {}
    problems: list[RowProblem] = []
    notes: list[str] = []
    digest = hashlib.sha256()
    fmt = "?"
    for s in splits:
        if not (path / s).is_dir():
            have = sorted(p.name for p in path.iterdir() if p.is_dir())
            raise ConfigError(f"split {s!r}: no folder {path / s} (folders: {', '.join(have)})")
        loaded: LoadResult = load_benchmark(str(path), split=s, format=mcq_format, strict=strict)
        digest.update(loaded.content_hash.encode())
        problems.extend(loaded.problems)
        notes.extend(f"split {s}: {n}" for n in loaded.notes)
        out[s] = CapSplit(s, list(loaded.items), None, loaded.files)
        fmt = f"mcq:{loaded.format}"
    col = _Collector(strict)
    col.problems = problems
    return _finish("mcq", task is None, out, col, str(path), fmt, digest, notes)


def _load_generic(
    path: Path,
    splits: Sequence[str],
    task: str | None,
    cf: CapFields,
    col: _Collector,
    digest: Any,
) -> CapData:
    if task == "mcq":
        raise ConfigError(
            f"{path}: multiple-choice CAP data must be FinEval-style pairs or a folder with split "
            "subfolders in a multiple-choice format"
        )
    per_split: dict[str, list[Path]] = {}
    if path.is_dir():
        for s in splits:
            found = [path / f"{s}{ext}" for ext in _GENERIC_EXT if (path / f"{s}{ext}").is_file()]
            if not found:
                raise ConfigError(
                    f"split {s!r}: no {s}.jsonl, {s}.csv, {s}.tsv or {s}.json in {path}"
                )
            if len(found) > 1:  # the others were ignored without a word (QA)
                raise ConfigError(
                    f"split {s!r}: {' and '.join(f.name for f in found)} in {path}; which is "
                    "the split is not clear: keep one"
                )
            per_split[s] = found
        by_field = False
        if "split" in cf.named():  # (read nowhere: said, as an ori/mod folder says it; QA)
            raise ConfigError(
                f"--fields split={cf.named()['split']}: {path} is a folder of split files, "
                "whose split is each file's name (train.jsonl, test.jsonl)"
            )
    else:
        per_split = {s: [path] for s in splits}
        by_field = True
    parsed: dict[Path, list[tuple[int, dict[str, Any]]]] = {}
    grouped: dict[Path, dict[str, list[tuple[int, dict[str, Any]]]]] = {}
    for s in splits:
        for p in per_split[s]:
            if p not in parsed:  # each file read and its bad rows reported once
                parsed[p] = _records(p, _read(p, digest), col)
    cf.check_seen(
        (rec for recs in parsed.values() for _, rec in recs),
        str(path),
        ("input", "output", "id", "modified", "split")
        if by_field
        else ("input", "output", "id", "modified"),
    )
    out: dict[str, CapSplit] = {}
    notes: list[str] = []
    for s in splits:
        items: list[CapItem] = []
        supplied: dict[str, Any] = {}
        for p in per_split[s]:
            if by_field and p not in grouped:
                grouped[p] = _by_split(p, parsed[p], cf, col)
            records = grouped[p].get(s.strip().casefold(), []) if by_field else parsed[p]
            got, mods = _collect(p, records, cf, col, mcq=False, split=s)
            items.extend(got)
            for it, mod in zip(got, mods):
                if mod is not None and isinstance(it, QAItem):
                    supplied[it.id] = QAItem(
                        it.id, mod, it.answer, s, None, it.source, it.line, {"input": mod}
                    )
        if not items:
            mine = [p for p in col.located() if Path(p.source) in per_split[s]]
            skipped = (
                f" ({plural(len(mine), 'row')} skipped; first: {mine[0]})" if mine else ""
            )  # every row lacking a --fields name said only "no items"
            values = sorted({v for g in grouped.values() for v in g}) if by_field else []
            raise ConfigError(
                f"split {s!r}: no items in {path}"
                + (f" with {cf.split}={s} (its values: {', '.join(values)})" if by_field else "")
                + skipped
            )
        modified = supplied if cf.modified is not None else None
        out[s] = CapSplit(s, items, modified, [str(p) for p in per_split[s]])
        if modified is not None and 0 < len(modified) < len(items):  # said: two kinds (QA)
            notes.append(
                f"split {s}: {len(items) - len(modified)} of {len(items)} items have no "
                f"{cf.modified!r} value; contamscope modifies those itself, the others are "
                "yours: the split's C and PCR mix both kinds of modification"
            )
    detected = task is None
    if task is None:
        first = out[splits[0]].items
        task = _detect_task([], [str(it.answer or "") for it in first[:50]])
    return _finish(task, detected, out, col, str(path), "generic", digest, notes)


def _finish(
    task: str,
    detected: bool,
    splits: dict[str, CapSplit],
    col: _Collector,
    source: str,
    fmt: str,
    digest: Any,
    notes: Sequence[str] = (),
) -> CapData:
    for s in splits.values():
        if not s.items:
            first = col.located()[0] if col.problems else "no records"
            raise DataError(f"split {s.name!r}: no usable items (first problem: {first})")
        if s.modified:
            s.layout_note = layout_note(s, task == "mcq")
    located = col.located()
    # (load_cap checked a given task; a detected one is one of them)
    return CapData(
        cast(Task, task), detected, splits, located, source, fmt, digest.hexdigest(), list(notes)
    )
