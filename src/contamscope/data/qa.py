"""Load free-text (question, answer) benchmarks: GSM8K, MATH, MATH-500, BenBench, generic files.

Formats (detected from the first record, or given):

- ``gsm8k-jsonl``: ``{question, answer}``, the answer ends with ``#### N`` (the final answer).
- ``math-jsonl``: ``{problem, solution, level?, type?}``; final answer = last ``\\boxed{...}``.
- ``math500-jsonl``: ``{problem, solution, answer, subject, unique_id}``.
- ``benbench-jsonl``: the BenBench files; originals as GSM8K / MATH, rewritten files add
  ``rewritten_question, rewritten_answer`` (kept in ``meta["paraphrase"]``, the item being the
  original).
- ``qa-jsonl`` / ``qa-csv``: generic, fields per a :class:`~contamscope.data.records.FieldMap`
  (``question=``, ``answer=``, ``id=``, ``subject=``; options are not used).
- ``hf:DATASET[:CONFIG]`` through ``datasets`` when online.

Rows without a question or an answer are skipped as row problems (``strict`` makes them fatal).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from contamscope.data.items import LoadResult, QAItem, spec_text
from contamscope.data.readers import (
    decode_text,
    json_object,
    jsonl_lines,
    not_a_file,
    read_table,
    table_suffix,
)
from contamscope.data.records import (
    AUTO_OPTION_FIELDS,
    FieldMap,
    RowError,
    Sink,
    clean_text,
    question_text,
)
from contamscope.errors import ConfigError, DataError
from contamscope.wording import plural

__all__ = ["QA_FORMATS", "load_qa", "final_answer", "gsm8k_final", "boxed_answer"]

QA_FORMATS: dict[str, str] = {
    "gsm8k-jsonl": "GSM8K JSONL {question, answer ending in '#### N'}",
    "math-jsonl": "MATH JSONL {problem, solution, level, type}; final answer = last \\boxed{}",
    "math500-jsonl": "MATH-500 JSONL {problem, solution, answer, subject, unique_id}",
    "benbench-jsonl": "BenBench original/rewritten JSONL (rewritten_question, rewritten_answer kept as the paraphrase)",
    "qa-jsonl": "generic JSON Lines, fields per --fields question=...,answer=...,id=...",
    "qa-csv": "generic CSV with a header row, columns per --fields",
}
"""QA format name -> one-line description."""


def _given(value: object) -> bool:
    """A field value that is there: not None and not blank (a number 0 is)."""
    return value is not None and bool(str(value).strip())


def gsm8k_final(answer: str) -> str | None:
    """The number after ``####`` in a GSM8K solution, commas removed: the line after the last
    marker, as GSM8K's own ``answer.split("####")[-1]`` reads it (the first marker's rest was
    taken whole: ``#### 4`` then ``#### 5`` read as ``'4\n#### 5'``, and a line after the
    number went into the answer; input QA).

    >>> gsm8k_final("3 + 4 = <<3+4=7>>7\\n#### 7")
    '7'
    >>> gsm8k_final("#### 1,200") , gsm8k_final("no marker"), gsm8k_final("x ####  ")
    ('1200', None, None)
    >>> gsm8k_final("#### 4\\n#### 5"), gsm8k_final("#### 72\\nSo the answer is 72.")
    ('5', '72')
    """
    at = answer.rfind("####")
    if at < 0:
        return None
    rest = answer[at + 4 :].strip()
    line = rest.splitlines()[0] if rest else ""
    return line.replace(",", "").strip() or None


def boxed_answer(solution: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (balanced braces), spaces removed.

    >>> boxed_answer(r"so $x = \\boxed{\\frac{1}{2}}$.")
    '\\\\frac{1}{2}'
    """
    start = solution.rfind("\\boxed")
    if start < 0:
        return None
    i = solution.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(solution)):
        if solution[j] == "{":
            depth += 1
        elif solution[j] == "}":
            depth -= 1
            if depth == 0:
                return solution[i + 1 : j].replace(" ", "")
    return None


def final_answer(answer: str) -> str | None:
    """Final answer of a worked solution: GSM8K's ``#### N``, else MATH's last ``\\boxed{}``."""
    return gsm8k_final(answer) or boxed_answer(answer)


def _answer_text(value: object, name: str = "answer") -> str:
    if value is None:
        raise RowError(f"missing {name}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(getattr(value, "text", value))  # (a JSON number as the file wrote it)
    if not isinstance(value, str):
        raise RowError(f"{name} is not text ({type(value).__name__})")
    text = clean_text(value)
    if not text.strip():
        raise RowError(f"empty {name}")
    return text


def _detect(rec: Mapping[str, Any], fm: FieldMap | None) -> str:
    if fm is not None:
        return "qa-jsonl"
    if "rewritten_question" in rec or "rewritten_answer" in rec:
        return "benbench-jsonl"
    if "problem" in rec and "solution" in rec:
        return "math500-jsonl" if "unique_id" in rec else "math-jsonl"
    if "question" in rec and "answer" in rec:
        return "gsm8k-jsonl"
    raise RowError(
        f"cannot tell the format from fields {sorted(rec)[:8]}; pass --format qa-jsonl "
        "--fields question=...,answer=..."
    )


def _refuse_multiple_choice(path: Path, rec: Mapping[str, Any]) -> None:
    """DataError where the first record has options (``choices``, ``choice0``..., ``A``-``D``):
    its answer is a letter or an option's index, and the options would be dropped."""
    keys = {str(k) for k in rec}
    named = [k for k in AUTO_OPTION_FIELDS if isinstance(rec.get(k), list | dict)]
    named += sorted(k for k in keys if re.fullmatch(r"choice\d+|option_?[a-e]", k.lower()))
    if {"A", "B", "C", "D"} <= keys:
        named += ["A", "B", "C", "D"]
    if named:
        raise DataError(
            f"{path}: multiple-choice items (option fields {', '.join(named[:4])}): this "
            "command reads question/answer items (GSM8K, MATH); multiple-choice benchmarks go "
            "to permutation or membership"
        )


def _split_of(path: Path) -> str | None:
    stem = path.stem.lower()
    for name in ("train", "test", "dev", "val", "validation"):
        if re.search(rf"(^|[-_.]){name}($|[-_.])", stem):
            return name
    return None


def _make_item(
    rec: Mapping[str, Any],
    fmt: str,
    fm: FieldMap,
    *,
    source: str,
    line: int | None,
    default_id: str,
    split: str | None,
) -> QAItem:
    meta: dict[str, Any] = {}
    subject = None
    item_id = default_id
    if fmt == "qa-jsonl":
        if fm.question not in rec:
            raise RowError(f"missing field {fm.question!r}")
        q = question_text(rec[fm.question])
        if fm.answer is None:
            raise RowError("the field map names no answer field")
        a = _answer_text(rec.get(fm.answer), fm.answer)
        if fm.id and _given(rec.get(fm.id)):  # an id 0 is an id (QA: it was lost)
            item_id = str(rec[fm.id])
        if fm.subject and _given(rec.get(fm.subject)):
            subject = str(rec[fm.subject])
        used = {fm.question, fm.answer, fm.id, fm.subject}
        meta = {k: v for k, v in rec.items() if k not in used}
    elif fmt in ("math-jsonl", "math500-jsonl") or (fmt == "benbench-jsonl" and "problem" in rec):
        q = question_text(rec.get("problem"), "problem")
        a = _answer_text(rec.get("solution"), "solution")
        subject = rec.get("type") or rec.get("subject")
        if rec.get("unique_id"):
            item_id = str(rec["unique_id"])
        if fmt == "math500-jsonl" and rec.get("answer") not in (None, ""):
            meta["final_answer"] = str(rec["answer"]).replace(" ", "")
        if rec.get("level"):
            meta["level"] = rec["level"]
    else:
        q = question_text(rec.get("question"))
        a = _answer_text(rec.get("answer"))
    if fmt == "benbench-jsonl" and ("rewritten_question" in rec or "rewritten_answer" in rec):
        rq = rec.get("rewritten_question")
        ra = rec.get("rewritten_answer")
        meta["paraphrase"] = {
            "question": rq if isinstance(rq, str) else None,
            "answer": ra if isinstance(ra, str) else None,
        }
    meta.setdefault("final_answer", final_answer(a))
    if item_id == default_id:  # made from the file name and row number, not the data's own
        meta["id_generated"] = True
    return QAItem(
        id=item_id,
        question=q,
        answer=a,
        split=split,
        subject=str(subject) if subject else None,
        source=source,
        line=line,
        meta=meta,
    )


def _records(path: Path, text: str, fmt: str | None) -> Iterable[tuple[int | None, Any]]:
    if fmt == "qa-csv":  # load_qa resolved the format from the file
        header, rows = read_table(path, text)
        if header is None:
            return
        names = [h.strip() for h in header[1]]
        for line, cells in rows:
            if isinstance(cells, RowError):
                yield line, cells
            elif len(cells) != len(names):  # a shifted row would map cells to other columns
                yield line, RowError(f"{len(cells)} cells, the header has {len(names)}")
            else:
                yield line, dict(zip(names, cells))
        return
    for line, raw in jsonl_lines(text):
        yield line, raw


def load_qa(
    spec: str | os.PathLike[str],
    *,
    format: str | None = None,
    field_map: FieldMap | None = None,
    split: str | None = None,
    strict: bool = False,
) -> LoadResult[QAItem]:
    """Load question/answer items from a file (or ``hf:DATASET[:CONFIG]``).

    ``split`` labels the items (default: ``train`` / ``test`` ... from the file name, for
    ``hf:`` the split loaded). Ids are the file stem + ``-`` + 0-based row unless the records
    have ids (MATH-500 ``unique_id``, or the field map's ``id``).

    >>> from contamscope.data.qa import load_qa  # doctest: +SKIP
    >>> load_qa("../shared/benchdata/gsm8k/test.jsonl").items[0].meta["final_answer"]  # doctest: +SKIP
    '18'
    """
    spec = spec_text(spec)
    if format is not None and format not in QA_FORMATS:
        from .formats import FORMATS

        if format in FORMATS:  # listed by `contamscope formats`: "unknown" misled (QA)
            raise ConfigError(
                f"--format {format!r}: a multiple-choice format (permutation, membership and "
                f"cap read it); question-and-answer formats: {', '.join(QA_FORMATS)}"
            )
        raise ConfigError(f"--format {format!r}: unknown QA format; known: {', '.join(QA_FORMATS)}")
    if field_map is not None and field_map.options is not None:
        raise ConfigError("--fields: options= does not apply to question/answer benchmarks")
    if spec.startswith("hf:"):
        return _load_hf(spec, split=split, field_map=field_map, strict=strict)
    path = Path(spec).expanduser()
    if not path.is_file():
        what = "a folder; give one file" if path.is_dir() else not_a_file(path)
        if spec == "mmlu" and not path.exists():  # the name the multiple-choice methods take
            what = (
                "the bundled MMLU is multiple-choice (for permutation and membership); this "
                "needs question/answer items, e.g. a GSM8K-style JSONL"
            )
        raise DataError(f"{spec}: {what}")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
    text = decode_text(path, raw, by_line=path.suffix.lower() == ".jsonl")
    fm = field_map or FieldMap()
    sink = Sink(strict=strict)
    is_csv = format == "qa-csv" or (format is None and table_suffix(path, text) == ".csv")
    fmt = "qa-csv" if is_csv else format
    if is_csv and field_map is None:
        fm = FieldMap()  # question / answer / id / subject columns by default
    label = split or _split_of(path)
    detected: list[str] = []

    def make(row: Any, row_no: int, line: int | None) -> Any:
        if isinstance(row, RowError):
            raise row
        rec = row if isinstance(row, dict) else json_object(row)
        sink.fields_seen.update(rec)
        if not detected:
            if field_map is None:  # an MMLU file read as question/answer pairs said nothing
                _refuse_multiple_choice(path, rec)
            detected.append(fmt or _detect(rec, field_map))
        kind = "qa-jsonl" if detected[0] in ("qa-csv", "qa-jsonl") else detected[0]
        return _make_item(
            rec,
            kind,
            fm,
            source=str(path),
            line=line,
            default_id=f"{path.stem}-{row_no}",
            split=label,
        )

    n = sink.collect(str(path), _records(path, text, fmt), make)
    if n == 0:
        raise DataError(f"{path}: no items (empty file)")
    if field_map is not None:  # --fields id=qidd that no record has was silently ignored
        field_map.check_seen(sink.fields_seen, str(path))
    if not sink.items:
        raise DataError(
            f"{path}: no usable items ({plural(len(sink.problems), 'row')} skipped; first: "
            f"{sink.problems[0]})"
        )
    result = sink.result(
        source=str(path),
        format=detected[0] if detected else (fmt or "?"),
        content_hash=hashlib.sha256(raw).hexdigest(),
        files=[str(path)],
    )
    return cast(LoadResult[QAItem], result)


def _load_hf(
    spec: str, *, split: str | None, field_map: FieldMap | None, strict: bool
) -> LoadResult[QAItem]:
    name, _, config = spec[len("hf:") :].partition(":")
    if not name:
        raise ConfigError(f"{spec!r}: expected hf:DATASET[:CONFIG], e.g. hf:openai/gsm8k:main")
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            f"{spec}: needs the datasets library: install contamscope[datasets]"
        ) from None
    split = split or "test"
    source = f"{spec} [{split}]"
    try:
        ds = datasets.load_dataset(name, config or None, split=split)
    except (ConnectionError, TimeoutError, OSError, ValueError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise DataError(f"{spec}: could not load the dataset ({first})") from None
    sink = Sink(strict=strict)
    digest = hashlib.sha256()
    base = name.rsplit("/", 1)[-1]
    detected: list[str] = []
    fm = field_map or FieldMap()

    def make(rec: dict[str, Any], row_no: int, line: int | None) -> Any:
        digest.update(json.dumps(rec, sort_keys=True, ensure_ascii=False, default=str).encode())
        if not detected:
            detected.append(_detect(rec, field_map))
        return _make_item(
            rec,
            detected[0],
            fm,
            source=source,
            line=line,
            default_id=f"{base}-{row_no}",
            split=split,
        )

    sink.collect(source, ((i, dict(r)) for i, r in enumerate(ds)), make)
    if not sink.items:
        raise DataError(f"{source}: no usable items ({len(sink.problems)} rows skipped)")
    return cast(
        LoadResult[QAItem],
        sink.result(source=source, format="hf", content_hash=digest.hexdigest(), files=[]),
    )
