"""Typed benchmark items."""

from __future__ import annotations

import numbers
import os
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..errors import DataError

__all__ = [
    "MCQItem",
    "QAItem",
    "RowProblem",
    "LoadResult",
    "content_key",
    "same_text",
    "option_labels",
    "spec_text",
]

_LABELS = "ABCDEFGHIJ"

INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff"
"""Zero-width characters (space, non-joiners, word joiner, BOM), as pasted from web pages or
WPS: invisible before an option's label, they hid it from the label rules (a labelled file read
as unlabelled, and the published order won every item; Chinese QA)."""

FULL_WIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
"""Full-width ASCII forms (``？``, ``２``, ``Ａ``) and the ideographic space, as their ASCII
characters (a ``str.translate`` table)."""

_RADICALS = {
    c: unicodedata.normalize("NFKC", chr(c))
    for c in [*range(0x2E80, 0x2EF4), *range(0x2F00, 0x2FD6)]
    if unicodedata.normalize("NFKC", chr(c)) != chr(c)
}
"""Kangxi and supplementary CJK radicals as the ideographs they look like (``⼀`` U+2F00 as
``一``): CMMLU's files hold some in place of the ideographs, so a copy of a question read as
another (review QA)."""

_SAME = FULL_WIDTH | _RADICALS | {ord(c): None for c in INVISIBLE}


def option_labels(n: int) -> tuple[str, ...]:
    """Return the letter labels for ``n`` options: ``option_labels(4) == ('A', 'B', 'C', 'D')``."""
    if not 1 <= n <= len(_LABELS):
        raise ValueError(f"between 1 and {len(_LABELS)} options are supported, got {n}")
    return tuple(_LABELS[:n])


@dataclass(frozen=True)
class MCQItem:
    """One multiple-choice question, options in the benchmark's original order."""

    id: str
    """Unique id within the loaded benchmark (file stem + row number when the file has none)."""
    question: str
    """Question text (stem), without the options."""
    options: tuple[str, ...]
    """Option texts in their published order."""
    answer: int | None = None
    """Index of the correct option in ``options``, or None when the benchmark has no answers."""
    subject: str | None = None
    """Subject / category (e.g. MMLU's ``anatomy``)."""
    source: str | None = None
    """File the item came from."""
    line: int | None = None
    """1-based line of ``source`` where the item's row or record starts (CSV, JSONL, JSON)."""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """Extra fields carried through unchanged."""

    def __post_init__(self) -> None:
        """Options as a tuple (a list given from Python is converted: the item stays hashable),
        and an answer that indexes them: ``MCQItem("q", "2+2?", ["4", "3"], answer=5)`` was
        scored without a word, its accuracy counted against an option that is not there (QA).

        >>> MCQItem("q", "2+2?", ["4", "3"], answer=1).options
        ('4', '3')
        >>> MCQItem("q", "2+2?", ("4", "3"), answer=2)  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        DataError: item q: answer 2 is not an option's index (0 to 1 for its 2 options)
        """
        _check_strings(self.id, question=self.question)
        opts = self.options
        if isinstance(opts, Iterable) and not isinstance(opts, str | bytes):
            opts = tuple(opts)
        if not isinstance(opts, tuple) or not all(isinstance(o, str) for o in opts):
            raise DataError(
                f"item {self.id}: options must be a sequence of strings, got {opts!r:.80}"
            )
        if not 1 <= len(opts) <= len(_LABELS):  # (0 failed in the prompt's labels; library QA)
            raise DataError(
                f"item {self.id}: {len(opts)} options; between 1 and {len(_LABELS)} are supported"
            )
        object.__setattr__(self, "options", opts)
        a = self.answer
        if a is not None and (
            isinstance(a, bool)
            or not isinstance(a, numbers.Integral)
            or not 0 <= a < len(self.options)
        ):
            raise DataError(
                f"item {self.id}: answer {a!r} is not an option's index (0 to "
                f"{len(self.options) - 1} for its {len(self.options)} options)"
            )
        if a is not None and type(a) is not int:
            object.__setattr__(self, "answer", int(a))

    @property
    def n_options(self) -> int:
        return len(self.options)

    @property
    def labels(self) -> tuple[str, ...]:
        return option_labels(len(self.options))


@dataclass(frozen=True)
class QAItem:
    """One free-text item: a question (or passage / prompt) and its reference answer.

    Used by BenBench (GSM8K, MATH: question + worked solution) and CAP (QA and summarisation:
    input + reference output).
    """

    id: str
    """Unique id within the loaded benchmark (file stem + row number when the file has none)."""
    question: str
    """The input text: question, problem, or passage to summarise."""
    answer: str | None = None
    """Reference answer / solution / summary, or None when the benchmark has none."""
    split: str | None = None
    """Benchmark split the item belongs to (``train``, ``test`` ...), when known."""
    subject: str | None = None
    """Subject / category / type (e.g. MATH's ``Algebra``)."""
    source: str | None = None
    """File the item came from."""
    line: int | None = None
    """1-based line of ``source`` where the item's row or record starts (CSV, JSONL, JSON)."""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """Extra fields carried through unchanged (e.g. a paired paraphrase, a final answer)."""

    def __post_init__(self) -> None:
        _check_strings(self.id, question=self.question, answer=self.answer, none_ok=("answer",))


def _check_strings(item_id: Any, none_ok: tuple[str, ...] = (), **fields: Any) -> None:
    """Refuse an item whose id or text fields are not strings (an int id or a None question
    given from Python failed deep in a run, in the prompt or the provenance; library QA)."""
    if not isinstance(item_id, str):
        raise DataError(f"item {item_id!r}: id must be a string, not {type(item_id).__name__}")
    for name, value in fields.items():
        if not isinstance(value, str) and not (value is None and name in none_ok):
            raise DataError(f"item {item_id}: {name} must be a string, not {type(value).__name__}")


ItemT = TypeVar("ItemT", MCQItem, QAItem)


def content_key(item: MCQItem | QAItem) -> tuple[str, ...]:
    """What makes two items the same item whatever their ids and files: the question text and,
    for a multiple-choice item, its set of options (whitespace, case, full-width forms and
    zero-width characters aside, options in any order). Two copies of a question that differ
    only in what a reader cannot see (a pasted U+200B, a full-width ``？`` or ``２``) are one
    question; ``10²`` and ``102`` are two (Unicode's NFKC folded them into one; review QA).

    >>> content_key(MCQItem("a", " 2+2? ", ("4", "3"))) == content_key(MCQItem("b", "2+2?", ("3", "4")))
    True
    >>> content_key(QAItem("q", "What is  GDP?"))
    ('what is gdp?',)
    >>> content_key(QAItem("w", "\u200bＷhat is GDP？")) == content_key(QAItem("q", "What is GDP?"))
    True
    """
    if isinstance(item, MCQItem):
        return (same_text(item.question), *sorted(same_text(o) for o in item.options))
    return (same_text(item.question),)


def same_text(text: str) -> str:
    """``text`` as :func:`content_key` compares it: whitespace collapsed, case folded,
    full-width forms read as their ASCII ones (:data:`FULL_WIDTH`), CJK radicals as the
    ideographs they look like, zero-width characters dropped; superscripts, circled digits and
    other compatibility forms stay themselves.

    >>> same_text(" Ａ\u200b  Fruit？"), same_text("10²") == same_text("102"), same_text("⼀个")
    ('a fruit?', False, '一个')
    """
    return " ".join(str(text).translate(_SAME).split()).casefold()


@dataclass(frozen=True)
class RowProblem:
    """A row that was skipped while loading, with a one-line reason."""

    source: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.reason}"


def item_place(item: Any) -> str:
    """Where an item was read (``file:line``), or its id when it has no line."""
    return f"{item.source}:{item.line}" if item.line is not None else str(item.id)


@dataclass
class LoadResult(Generic[ItemT]):
    """Items loaded from a benchmark, plus what was skipped and where the data came from."""

    items: list[ItemT]
    problems: list[RowProblem]
    source: str
    """Human-readable origin (path, ``bundled:mmlu``, ``hf:...``)."""
    format: str
    """Format name used to parse (``mmlu-csv``, ``cmmlu-csv`` ...)."""
    content_hash: str
    """sha256 over the raw bytes of every file read, in sorted path order."""
    files: list[str] = field(default_factory=list)
    subjects: list[str] | None = None
    """The subjects the items were restricted to when loaded (None: all)."""
    notes: list[str] = field(default_factory=list)
    """What was changed in the items read, one line each (e.g. labels the options carried)."""
    noted: dict[str, list[ItemT]] = field(default_factory=dict, repr=False, compare=False)
    """The items each kind of note is of (``relabelled``, ``label_like``), so that the notes of
    a subset (``subjects``) count that subset's items."""

    def __repr__(self) -> str:
        """One line (every item, printed whole, ran to megabytes for MMLU in a notebook)."""
        subjects = "" if self.subjects is None else f", subjects={len(self.subjects)}"
        return (
            f"LoadResult(source={self.source!r}, format={self.format!r}, "
            f"items={len(self.items)}, problems={len(self.problems)}{subjects}, "
            f"content_hash={self.content_hash[:12]!r})"
        )


def spec_text(spec: object, what: str = "benchmark") -> str:
    """A loader's ``spec`` as text: a name, ``hf:...`` or a path (a :class:`pathlib.Path`
    crashed on ``.startswith``; QA); anything else is one ConfigError.

    >>> from pathlib import Path
    >>> spec_text(Path("data") / "x.csv"), spec_text(Path("mmlu")), spec_text("mmlu")
    ('data/x.csv', './mmlu', 'mmlu')
    >>> spec_text(3)
    Traceback (most recent call last):
    ...
    contamscope.errors.ConfigError: benchmark: expected a name or a path, not int
    """
    if isinstance(spec, str):
        return spec
    if isinstance(spec, os.PathLike):
        path = os.fspath(spec)
        if isinstance(path, str):  # a path is a path: Path("mmlu") is not the bundled set
            return path if os.path.dirname(path) else os.path.join(".", path)
    from ..errors import ConfigError

    raise ConfigError(f"{what}: expected a name or a path, not {type(spec).__name__}")
