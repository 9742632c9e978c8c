"""Low-level readers: CSV records with their start lines, JSON Lines, whole-file JSON lists."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contamscope.data.records import RowError
from contamscope.errors import DataError

__all__ = [
    "csv_rows",
    "decode_text",
    "jsonl_lines",
    "json_object",
    "load_json_list",
    "header_text",
]

_CSV_FIELD_LIMIT = 2**31 - 1
"""Long C-Eval / CMMLU texts exceed the csv module's default 128 KiB field limit."""


_UTF8_BOM = b"\xef\xbb\xbf"


def decode_text(path: Path, raw: bytes) -> str:
    """A data file's bytes as text: UTF-8 (a leading BOM dropped), else a one-line DataError
    naming the byte, or UTF-16 without a byte-order mark (which decodes as UTF-8 with a NUL
    between every two ASCII letters)."""
    skip = len(_UTF8_BOM) if raw.startswith(_UTF8_BOM) else 0
    try:
        text = raw[skip:].decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(
            f"{path}: not UTF-8 text (byte offset {e.start + skip}); re-save as UTF-8"
        ) from None
    head = raw[:4096]
    if head and head.count(0) > len(head) // 4:
        raise DataError(
            f"{path}: looks like UTF-16 without a byte-order mark (NUL bytes between the "
            "characters); re-save as UTF-8"
        )
    return text


def csv_rows(text: str) -> Iterator[tuple[int, list[str]]]:
    """(start line, cells) per CSV record; blank and all-empty records are skipped."""
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)
    reader = csv.reader(io.StringIO(text, newline=""))
    end = 0
    for row in reader:
        start, end = end + 1, reader.line_num
        if any(cell.strip() for cell in row):
            yield start, row


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line, text) per non-blank line; split on ``\\n`` only (JSON may hold U+2028)."""
    for i, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield i, line.rstrip("\r")


_SURROGATE = "a lone surrogate escape (such as \\ud83d, half of an emoji), which is no character"


def _text_problem(value: Any) -> str | None:
    """Why ``value`` holds text no model can read, or None: JSON may escape half of a UTF-16
    pair ("\\ud83d"), which Python keeps as a lone surrogate and tokenizers refuse."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE
    return None


def json_object(line: str) -> dict[str, Any]:
    """Parse one JSON Lines record; anything but a JSON object of readable text is a row
    problem."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as e:
        raise RowError(f"invalid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise RowError("invalid JSON (nested too deeply)") from None
    if not isinstance(value, dict):
        raise RowError(f"expected a JSON object, got {type(value).__name__}")
    problem = _text_problem(value)
    if problem:
        raise RowError(f"invalid text: {problem}")
    return value


def load_json_list(path: Path, text: str) -> list[Any]:
    """Parse a whole-file JSON list of records (file-level errors raise DataError)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        hint = "; if it is JSON Lines use --format jsonl" if e.msg == "Extra data" else ""
        raise DataError(
            f"{path}: not JSON ({e.msg} at line {e.lineno} column {e.colno}){hint}"
        ) from None
    except RecursionError:
        raise DataError(f"{path}: not usable JSON (nested too deeply)") from None
    if not isinstance(value, list):
        raise DataError(
            f"{path}: expected a JSON list of question records, got {type(value).__name__}"
        )
    bad = [i for i, rec in enumerate(value, start=1) if _text_problem(rec)]
    if bad:
        raise DataError(
            f"{path}: record {bad[0]} of the list"
            + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
            + f" holds {_SURROGATE}; fix or remove it"
        )
    return value


def header_text(row: list[str]) -> str:
    """A header row quoted for an error message, shortened to 80 characters."""
    text = ",".join(row)
    return repr(text if len(text) <= 80 else text[:77] + "...")
