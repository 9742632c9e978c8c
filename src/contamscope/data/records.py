"""Field mapping and row-level checks shared by every benchmark format.

A row that cannot become an :class:`~contamscope.data.items.MCQItem` raises :class:`RowError` with a
short reason; the format parsers turn it into a :class:`~contamscope.data.items.RowProblem` (or a
:class:`~contamscope.errors.DataError` in strict mode) through :class:`Sink`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from contamscope.data.items import INVISIBLE, LoadResult, MCQItem, RowProblem
from contamscope.errors import ConfigError, DataError
from contamscope.wording import plural

T = TypeVar("T")

__all__ = ["FieldMap", "RowError", "Sink", "clean_text", "parse_answer", "finish_options"]

LABELS = "ABCDEFGHIJ"
MAX_OPTIONS = len(LABELS)
AUTO_OPTION_FIELDS = ("options", "choices", "option")
ANSWER_ALIAS = "answerKey"
"""The answer field read when ``answer`` is neither named nor present (Hugging Face's ARC,
OpenBookQA, CommonsenseQA)."""


class RowError(ValueError):
    """A single row is unusable; the message is the short reason."""


@dataclass(frozen=True)
class FieldMap:
    """Which record fields hold what, for the generic ``jsonl``, ``csv`` and ``json`` formats.

    ``FieldMap.parse("question=stem,options=a|b|c|d,answer=label,id=qid")`` builds one from the
    command-line form.
    """

    question: str = "question"
    """Field with the question text."""
    options: tuple[str, ...] | None = None
    """Option fields in order, e.g. ``("A", "B", "C", "D")``, or one field that holds them all
    (as the automatic fields do). ``None`` = auto: fields ``A``..``J`` (trailing empty ones
    dropped), else in ``options``, ``choices`` or ``option``: a list, a letter-keyed object, or
    an object of ``text`` and ``label`` lists (Hugging Face's ARC, OpenBookQA, CommonsenseQA)."""
    answer: str | None = "answer"
    """Field with the answer: a letter (A..J, any case), a 0-based index, the option's text, or
    the option's own label where the options carry labels. ``None`` (or a record without the
    field, or an empty value) = no answer. Not named: ``answer``, else ``answerKey``."""
    id: str | None = "id"
    """Field with a unique item id; ``None`` or a record without it = file stem + ``-`` + row."""
    subject: str | None = "subject"
    """Field with the subject / category; ``None`` or a record without it = no subject."""
    given: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    """The keys named on the command line (a named answer/id/subject field that no record
    has is then a mistake, not an absence)."""

    @classmethod
    def parse(cls, spec: str) -> FieldMap:
        """Parse ``key=value`` pairs separated by commas; ``options`` takes ``|``-separated fields.

        An empty value unsets an optional field (``answer=`` = no answers); ``options=auto`` is the
        default. Unknown keys raise :class:`~contamscope.errors.ConfigError`.

        >>> FieldMap.parse("question=stem,options=a|b|c|d,answer=label")
        FieldMap(question='stem', options=('a', 'b', 'c', 'd'), answer='label', id='id', subject='subject')
        """
        known = [f.name for f in fields(cls) if f.name != "given"]
        values: dict[str, Any] = {}
        for part in (p.strip() for p in spec.split(",")):
            if not part:
                continue
            key, eq, value = part.partition("=")
            key, value = key.strip(), value.strip()
            if not eq:
                raise ConfigError(f"field map: expected key=value, got {part!r}")
            if key not in known:
                raise ConfigError(
                    f"field map: unknown key {key!r} (known: {', '.join(known)})",
                )
            if key in values:
                raise ConfigError(f"field map: key {key!r} given twice")
            if "=" in value:  # 'question=q answer=a' read as one odd field name
                raise ConfigError(
                    f"field map: {part!r} has a field name with '=' in it; separate key=value "
                    "pairs with commas"
                )
            if key == "question":
                if not value:
                    raise ConfigError("field map: question needs a field name")
                values[key] = value
            elif key == "options":
                values[key] = _parse_option_fields(value)
            else:
                values[key] = value or None
        return cls(**values, given=frozenset(values))

    def check_seen(self, seen: set[str], source: str) -> None:
        """Refuse a named answer, id or subject field that no record of ``source`` has (it
        was silently ignored: items without answers, generated ids)."""
        for key in ("answer", "id", "subject"):
            name = getattr(self, key)
            if key in self.given and name is not None and name not in seen:
                raise ConfigError(f"--fields {key}={name}: no record of {source} has that field")


def _parse_option_fields(value: str) -> tuple[str, ...] | None:
    if value in ("", "auto"):
        return None
    names = tuple(v.strip() for v in value.split("|"))
    if any(not n for n in names):
        raise ConfigError(f"field map: empty option field name in {value!r}")
    if len(names) > MAX_OPTIONS:
        raise ConfigError(
            f"field map: options takes at most {MAX_OPTIONS} fields, got {len(names)}"
        )
    return names  # one field: it holds the options (a list, or an object of them)


def blank(text: str) -> bool:
    """Whether ``text`` shows nothing: spaces (any width) and zero-width characters only."""
    return not text.strip().strip(INVISIBLE).strip()


def clean_text(value: str) -> str:
    """Strip trailing newlines / carriage returns only; everything else is kept as is."""
    return value.rstrip("\r\n")


def _label(i: int) -> str:
    return LABELS[i] if i < MAX_OPTIONS else f"#{i + 1}"


def _option_text(value: object, i: int) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, float) and not math.isfinite(value):  # JSON's NaN, Infinity: no text
        raise RowError(f"option {_label(i)} is {value!r}, not text (NaN or Infinity in the JSON)")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(getattr(value, "text", value))  # (a JSON number as the file wrote it)
    raise RowError(f"option {_label(i)} is not text ({type(value).__name__})")


def finish_options(values: Sequence[object], *, drop_trailing_empty: bool) -> tuple[str, ...]:
    """Check option values (``None`` = missing) and return them as texts.

    With ``drop_trailing_empty`` (formats whose option count varies per row, like CMB's
    ``A``..``E`` with an empty ``E``), missing / empty options at the end are dropped; a missing or
    empty option before a present one is always a problem.
    """
    texts = [_option_text(v, i) for i, v in enumerate(values)]
    if drop_trailing_empty:
        while texts and (texts[-1] is None or blank(texts[-1])):
            texts.pop()
    for i, t in enumerate(texts):
        if t is None:
            raise RowError(f"missing option {_label(i)}")
        if blank(t):
            raise RowError(f"empty option {_label(i)}")
    if len(texts) < 2:
        raise RowError(f"{len(texts)} option(s); at least 2 needed")
    if len(texts) > MAX_OPTIONS:
        raise RowError(f"{len(texts)} options; at most {MAX_OPTIONS} supported")
    return tuple(t for t in texts if t is not None)


def parse_answer(
    raw: object, options: Sequence[str], *, ints: bool = True, text: bool = False
) -> int | None:
    """Return the 0-based index of the answer, or ``None`` when ``raw`` is missing or empty.

    Accepts a letter (``A``..``J``, any case, surrounding spaces ignored), with ``ints`` a 0-based
    index (int or digit string), with ``text`` the exact text of an option. Tried in that order;
    with both, a digit string that is another option's text is ambiguous (a row problem) unless
    it is no valid index.

    >>> parse_answer("4", ["3", "4", "5", "6"], text=True)  # no option 4: the text "4"
    1
    >>> parse_answer(2, ["1", "2", "3"], text=True)  # a JSON number is an index
    2
    >>> parse_answer("x", ["x", "y", "x "], text=True)
    Traceback (most recent call last):
    contamscope.data.records.RowError: answer 'x' is ambiguous: the text of options A, C; give the answer as a letter
    """
    n = len(options)
    idx: int
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise RowError(f"unparseable answer {raw!r}")
    if isinstance(raw, int) and ints:
        idx = raw
    elif isinstance(raw, str):
        s = raw.strip()
        if not s:
            return None
        stripped = [o.strip() for o in options]
        want = clean_text(raw) if text else s  # (an option's text as the loaders clean it)
        if len(s) == 1 and "Ａ" <= s.upper() <= "Ｊ":  # a full-width label ("Ｂ")
            s = chr(ord(s.upper()) - 0xFEE0)
        if len(s) == 1 and s.upper() in LABELS:
            idx = LABELS.index(s.upper())
            if text and s in stripped and stripped.index(s) != idx and idx < n:
                raise RowError(  # "C" with options C, Python, Java, Rust: A's text or label C
                    f"answer {s!r} is ambiguous: option {_label(stripped.index(s))}'s text or "
                    f"the label of option {_label(idx)}; give the answer as a 0-based index"
                )
        elif ints and s.isascii() and s.isdigit():
            idx = int(s)
            j = stripped.index(s) if text and s in stripped else idx
            if j != idx and 0 <= idx < n:  # "1" with options 1, 2, 3, 4: A's text or B's index
                raise RowError(
                    f"answer {s!r} is ambiguous: option {_label(j)}'s text or the 0-based "
                    f"index of option {_label(idx)}; give the answer as a letter"
                )
            idx = j  # an index, or (no such index) the option's text
        elif text and (
            found := [i for i, o in enumerate(options) if o == want or stripped[i] == s]
        ):
            if len(found) > 1:  # (the first was taken without a word; input QA)
                raise RowError(
                    f"answer {_short(s)} is ambiguous: the text of options "
                    f"{', '.join(_label(i) for i in found)}; give the answer as a letter"
                )
            idx = found[0]
        elif _several_labels(s):
            raise RowError(
                f"multiple answers {s!r} are not supported (--fields answer= reads the items "
                "without answers: the permutation test does not use them)"
            )
        else:
            raise RowError(f"unparseable answer {_short(s)}")
    else:
        raise RowError(f"unparseable answer {_short(raw)}")
    numeric = not isinstance(raw, str) or raw.strip().isdigit()
    if numeric and idx == n:
        raise RowError(  # 1..n: the other rows read as the next option, silently (QA)
            f"answer {_short(raw)} is out of range for {n} options (a number is a 0-based "
            "position; if the file counts from 1, its other rows' answers are read as the "
            "next option: give letters, or subtract 1)"
        )
    if not 0 <= idx < n:
        raise RowError(f"answer {_short(raw)} is out of range for {n} options")
    return idx


def _several_labels(answer: str) -> bool:
    """Whether ``answer`` names two or more options: "AB", "A,B", "A、B", "ＡＢ", "a; b" (only
    the first was said to be multiple answers; the others read as unparseable; Chinese QA).

    >>> [_several_labels(a) for a in ("AB", "A, B", "A、C", "ＡＢＣ", "A", "AZ", "A and B")]
    [True, True, True, True, False, False, False]
    """
    letters = re.sub(r"[\s,，、;；/|+]+", "", unicodedata.normalize("NFKC", answer)).upper()
    return 2 <= len(letters) <= MAX_OPTIONS and all(c in LABELS for c in letters)


def _short(value: object, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _auto_option_values(
    rec: Mapping[str, Any],
) -> tuple[list[Any], set[str], list[str] | None]:
    """Option values (``None`` for gaps), the fields they came from and the options' own
    labels where they carry some, for FieldMap.options=None."""
    present = [lab for lab in LABELS if lab in rec]
    listed = [name for name in AUTO_OPTION_FIELDS if name in rec]
    # B, C, D without A: "missing option A" (it said "no options (looked for fields A..J,
    # options, choices, option)"; QA)
    # (a stray "A" beside an options list took the letters' way: "1 option(s)"; QA)
    if present and (len(present) >= 2 or not listed) and ("A" in rec or not listed):
        last = LABELS.index(present[-1])
        return [rec.get(lab) for lab in LABELS[: last + 1]], set(present), None
    if listed:
        return _options_field(listed[0], rec[listed[0]])
    raise RowError("no options (looked for fields A..J, options, choices, option)")


def _options_field(name: str, value: Any) -> tuple[list[Any], set[str], list[str] | None]:
    """The options held by one field: a list, a letter-keyed object, or ``{"text": [...],
    "label": [...]}`` (Hugging Face's ARC and the like: the labels may be A..E or 1..4)."""
    if isinstance(value, list):
        return list(value), {name}, None
    if isinstance(value, dict) and "text" in value and "label" in value:
        texts, labels = value["text"], value["label"]
        if not (isinstance(texts, list) and isinstance(labels, list)):
            raise RowError(f"field {name!r}: its text and label must be lists")
        if len(texts) != len(labels):
            raise RowError(f"field {name!r}: {len(texts)} option texts but {len(labels)} labels")
        return list(texts), {name}, [str(lab).strip() for lab in labels]
    if isinstance(value, dict):
        return letter_keyed(value), {name}, None
    raise RowError(f"field {name!r} must be a list or an object of options")


def letter_keyed(options: Mapping[str, Any]) -> list[Any]:
    """Values of a ``{"A": ..., "B": ...}`` object in label order, ``None`` for gaps."""
    bad = [k for k in options if k not in LABELS]
    if bad:
        raise RowError(f"unexpected option label {_short(bad[0])} (expected A..J)")
    if not options:
        return []
    last = max(LABELS.index(k) for k in options)
    return [options.get(lab) for lab in LABELS[: last + 1]]


def question_text(value: object, name: str = "question") -> str:
    """Check and clean a question value."""
    if value is None:
        raise RowError(f"missing {name}")
    if not isinstance(value, str):
        raise RowError(f"{name} is not text ({type(value).__name__})")
    text = clean_text(value)
    if blank(text):
        raise RowError(f"empty {name}")
    return text


def record_to_item(
    rec: Mapping[str, Any],
    fm: FieldMap,
    *,
    source: str,
    line: int | None,
    default_id: str,
    seen: set[str] | None = None,
) -> MCQItem:
    """Build an item from a generic record (JSON object, CSV row as dict, dataset row);
    ``seen`` collects which of the answer, id and subject fields the record has."""
    if seen is not None:
        seen.update(f for f in (fm.answer, fm.id, fm.subject) if f is not None and f in rec)
    if fm.question not in rec:
        raise RowError(f"missing field {fm.question!r}")
    question = question_text(rec[fm.question])
    used = {fm.question}
    labels = None
    if fm.options is None:
        values, from_fields, labels = _auto_option_values(rec)
    else:
        missing = [f for f in fm.options if f not in rec]
        if missing:
            raise RowError(f"missing option field {missing[0]!r}")
        if len(fm.options) == 1:  # one field holding the options
            values, from_fields, labels = _options_field(fm.options[0], rec[fm.options[0]])
        else:
            values, from_fields = [rec[f] for f in fm.options], set(fm.options)
    # as with options found automatically, empty ones at the end of named fields are absent
    # (a row of a 5-option file with 4); a field missing from the record is still a problem
    options = finish_options(values, drop_trailing_empty=True)
    used.update(from_fields)
    answer = None
    answer_field = fm.answer
    if answer_field == "answer" and "answer" not in fm.given and "answer" not in rec:
        other_case = [k for k in rec if isinstance(k, str) and k.strip().lower() == "answer"]
        # "Answer" was left in the metadata: items without answers, silently (QA)
        answer_field = ANSWER_ALIAS if ANSWER_ALIAS in rec else (other_case or [answer_field])[0]
    if answer_field is not None:
        raw = rec.get(answer_field)
        if (
            isinstance(raw, int)
            and not isinstance(raw, bool)
            and labels is not None
            and str(raw) in labels[: len(options)]
            and labels.index(str(raw)) != raw
        ):  # ARC's labels '1'..'4' and a number answerKey: read two ways (QA)
            at = labels.index(str(raw))
            raise RowError(
                f"answer {raw} is ambiguous: option {_label(at)}'s label or the 0-based "
                f"position of option {_label(raw) if 0 <= raw < 10 else raw}; give the "
                "label as text"
            )
        if labels is not None and isinstance(raw, str) and raw.strip() in labels[: len(options)]:
            answer = labels.index(raw.strip())  # its own label: ARC's '1'..'4' are labels
        else:
            try:
                answer = parse_answer(raw, options, ints=True, text=True)
            except RowError as e:  # "Lima" for "A. Lima": the text the option is read as
                bare = own_labels_removed(options)
                if bare is None or not str(e).startswith("unparseable"):
                    raise
                answer = parse_answer(raw, bare, ints=True, text=True)
        used.add(answer_field)
    item_id = default_id
    if fm.id is not None:
        used.add(fm.id)
        raw_id = rec.get(fm.id)
        if raw_id is not None and str(raw_id).strip():
            item_id = str(raw_id)
    subject = None
    if fm.subject is not None:
        used.add(fm.subject)
        raw_subject = rec.get(fm.subject)
        if raw_subject is not None and str(raw_subject).strip():
            subject = str(raw_subject)
    meta = {k: v for k, v in rec.items() if k not in used}
    return MCQItem(
        id=item_id,
        question=question,
        options=options,
        answer=answer,
        subject=subject,
        source=source,
        line=line,
        meta=meta,
    )


_OWN_LABEL = re.compile(
    # "A. x", "A.北京", "A: x" (":" a space or a non-ASCII character after: not C++'s A::f,
    # "A:B = 1:2"), "(A) x", "a) x", "[A] x", "A - x", "Option A: x", "Ａ．x", "C）x", "B、x";
    # and the label alone ("D.", "D:", "D -"): an empty option
    rf"[\s{INVISIBLE}]*(?:option\s+)?[(（\[【]?([A-Ja-jＡ-Ｊ])\s*"
    r"(?:\.\s*(?!\.)|:(?:\s+|\Z)|:(?=[^\x00-\x7f])|[)）\]】．]\s*|([：、])\s*|\s+[-–](?:\s+|\Z))"
    r"(\S.*)?\Z",
    re.DOTALL | re.IGNORECASE,
)
_LETTER_FIRST = re.compile(r"[A-JＡ-Ｊ](?![A-Za-z])")
"""After "、" or "：" a letter is no label's text: "A、B" is "A and B", "A：B＝1：2" a ratio,
"A、E型肝炎" "hepatitis A and E" (Chinese QA)."""


def own_labels_removed(options: Sequence[str]) -> tuple[str, ...] | None:
    """The options without the labels they carry, when every option starts with its own label
    in order ("A. Paris", "(B) Rome", "C：北京"), else None. Such labels would move with their
    options when the test reorders them, and only the published order would read A, B, C, D.

    >>> own_labels_removed(["A. Paris", "B) Rome", "(C) Oslo", "D：北京"])
    ('Paris', 'Rome', 'Oslo', '北京')
    >>> own_labels_removed(["A dog", "B. cat"]) is None  # "A dog" carries no label
    True
    >>> own_labels_removed(["B. one", "A. two"]) is None  # not its own label
    True
    >>> own_labels_removed(["A::f()", "B::f()"]) is None  # C++ scopes, "A:B = 1:2": no space
    True
    >>> own_labels_removed(["a) x", "b) y"]), own_labels_removed(["[A] x", "Option B: y"])
    (('x', 'y'), ('x', 'y'))
    >>> own_labels_removed(["A - x", "B – y"]), own_labels_removed(["Ａ．甲", "Ｂ．乙"])
    (('x', 'y'), ('甲', '乙'))
    >>> own_labels_removed(["A.北京", "B．H2O", "C.0.5mol"])  # mixed widths, no space
    ('北京', 'H2O', '0.5mol')
    >>> own_labels_removed(["A、B", "B、C"]), own_labels_removed(["A、E型肝炎", "B、C型肝炎"])
    (None, None)

    Genus names abbreviated in label order ("A. thaliana", "B. subtilis", ...) would read as
    labels; no benchmark here has such an item (MMLU, CMMLU, C-Eval, CMB: one MMLU item has
    labels, "(A) Increased ...").
    """
    out, cases = [], set()
    for i, text in enumerate(options):
        m = _OWN_LABEL.match(text)
        label = unicodedata.normalize("NFKC", m.group(1)) if m else ""  # (full-width: ａ, Ａ)
        if m is None or label.upper() != LABELS[i]:
            return None
        if m.group(2) and _LETTER_FIRST.match(m.group(3) or ""):
            return None
        rest = (m.group(3) or "").lstrip(INVISIBLE)  # ("A.\u200b北京": the text is 北京)
        cases.add(label.isupper())
        out.append("" if blank(rest) else rest)  # ("D. ": its label alone, an empty option)
    if all(not text for text in out):
        return None  # ("A.", "B.": no option has text after a label; not a labelling)
    return tuple(out) if len(cases) == 1 else None  # "a)", "B)": not one labelling


_LABEL_LIKE = re.compile(
    # a letter (in label order) or a number (1, 2, ...) and then a label's punctuation that the
    # rule above does not remove: "A，x", "A。x", "〔A〕x", "选项A：x", "1. x", "2) x"; not
    # "1.5", nor answers such as "1%", "2!", "A♯", "3°" (diff-review QA)
    rf"[\s{INVISIBLE}]*(?:选项|option\s*)?[〔(（\[【<《「]?([A-Ja-jＡ-Ｊ]|[1-9１-９])(?![A-Za-z0-9０-９])"
    r"[.．。、，:：;；)）\]】〕>》」](?![0-9０-９])",
    re.IGNORECASE,
)


def own_labels_suspected(options: Sequence[str]) -> bool:
    """Whether every option starts with its own letter or number in order and punctuation, in
    a form :func:`own_labels_removed` does not take (kept as written, said in a note: they may
    be labels, which would move with their options).

    >>> own_labels_suspected(["A，北京", "B，上海"]), own_labels_suspected(["1. x", "2. y"])
    (True, True)
    >>> own_labels_suspected(["1.5", "2.5"]), own_labels_suspected(["A dog", "B cat"])
    (False, False)
    >>> own_labels_suspected(["1%", "2%"]), own_labels_suspected(["A♯", "B♭"])  # answers
    (False, False)
    >>> own_labels_suspected(["1, 2", "2, 3"]), own_labels_suspected(["A, B", "B, C"])
    (False, False)
    >>> own_labels_suspected(["A. x", "B. y"])  # removed, not suspected
    False
    """
    if len(options) < 2:
        return False
    marks = []
    for text in options:
        m = _LABEL_LIKE.match(text)
        if m is None:
            return False
        marks.append(unicodedata.normalize("NFKC", m.group(1)))  # (full-width: ａ, Ａ, １)
    numbers = [str(i + 1) for i in range(len(options))]
    in_order = marks in (numbers, list(LABELS[: len(marks)]), list(LABELS[: len(marks)].lower()))
    return in_order and own_labels_removed(options) is None  # (few items get this far)


def loading_notes(noted: Mapping[str, Sequence[MCQItem]], n_items: int) -> list[str]:
    """The notes of :attr:`LoadResult.noted`'s items, among ``n_items`` read, one line each."""

    def counted(some: Sequence[MCQItem]) -> str:
        first = some[0]
        where = f"{first.source}:{first.line}" if first.line is not None else first.source
        return f"{len(some)} of the {plural(n_items, 'item')} read (first: {where})"

    notes = []
    if relabelled := noted.get("relabelled"):
        notes.append(
            'options beginning with their own labels ("A. ...", "(A) ...") in '
            f"{counted(relabelled)}: the labels were removed; they would move with the options "
            "when the test reorders them, and only the published order would read A, B, C, D"
        )
    if fewer := noted.get("fewer_options"):
        notes.append(
            f"fewer options than most items ({len(fewer[0].options)}) in {counted(fewer)}: "
            "read as items with fewer options; an option field missing, null or empty at "
            "the end of a row reads so: add it if one is missing"
        )
    if label_like := noted.get("label_like"):
        notes.append(
            "options beginning with their own letter or number and punctuation "
            f"({label_like[0].options[0][:12]!r} ...) in {counted(label_like)}: kept as "
            "written; if these are labels, remove them from the file (they would move with the "
            "options when the test reorders them, a false leakage signal)"
        )
    return notes


_OWN_LAYOUTS = ("jsonl", "csv", "json", "hf")
"""The formats of one's own layout (:data:`~contamscope.data.formats.GENERIC_FORMATS` and
Hugging Face rows), where :meth:`Sink.result` says which items have fewer options than most
(a benchmark's own layout, CMB's, varies its option count by design)."""


class Sink:
    """Collects items and problems; enforces unique ids and strict mode; removes the labels
    options carry themselves (:func:`own_labels_removed`), said in ``notes``."""

    def __init__(self, *, strict: bool) -> None:
        self.strict = strict
        self.items: list[MCQItem] = []
        self.problems: list[RowProblem] = []
        self._first_seen: dict[str, tuple[str, int | None]] = {}
        self.fields_seen: set[str] = set()
        """Field-map fields (answer, id, subject) some record had (generic formats)."""
        self.relabelled: list[MCQItem] = []
        """Items whose options carried their own labels (removed)."""
        self.label_like: list[MCQItem] = []
        """Items whose options may begin with labels, kept (:func:`own_labels_suspected`)."""

    def notes(self) -> list[str]:
        """What was changed in items read (not skipped), or may need changing, one line each."""
        return loading_notes(self.noted(), len(self.items))

    def noted(self) -> dict[str, list[MCQItem]]:
        """The items of each kind of note (:attr:`LoadResult.noted`)."""
        return {"relabelled": self.relabelled, "label_like": self.label_like}

    def add(self, item: MCQItem) -> None:
        bare = own_labels_removed(item.options) if isinstance(item, MCQItem) else None
        if bare is not None:
            if "" in bare:  # "D. " or "D. \u200b": kept whole, the labels read in one order
                at = _label(bare.index(""))  # only (diff-review QA)
                self.problem(item.source or "?", item.line, f"empty option {at} (its label alone)")
                return
            item = replace(item, options=bare)
        first = self._first_seen.get(item.id)
        if first is not None:
            where = f"{first[0]}:{first[1]}" if first[1] is not None else first[0]
            hint = (
                "; ids must differ across the benchmark's files: --fields id= numbers the "
                "items instead"
                if first[0] != (item.source or "?")
                else ""
            )
            self.problem(
                item.source or "?",
                item.line,
                f"duplicate id {item.id!r} (first at {where}){hint}",
            )
            return
        self._first_seen[item.id] = (item.source or "?", item.line)
        self.items.append(item)
        if bare is not None:  # counted among the items kept
            self.relabelled.append(item)
        elif isinstance(item, MCQItem) and own_labels_suspected(item.options):
            self.label_like.append(item)

    def collect(
        self,
        source: str,
        rows: Iterable[tuple[int | None, T | RowError]],
        make: Callable[[T, int, int | None], MCQItem],
    ) -> int:
        """Add ``make(row, row_no, line)`` for each ``(line, row)``; a RowError (raised by
        ``make``, or given in place of the row) skips the row as a problem. Returns the number
        of rows seen."""
        n = 0
        for row_no, (line, row) in enumerate(rows):
            n = row_no + 1
            if isinstance(row, RowError):
                self.problem(source, line, str(row))
                continue
            try:
                item = make(row, row_no, line)
            except RowError as e:
                self.problem(source, line, str(e))
                continue
            self.add(item)
        return n

    def problem(self, source: str, line: int | None, reason: str) -> None:
        problem = RowProblem(source=source, line=line, reason=reason)
        if self.strict:
            raise DataError(str(problem))
        self.problems.append(problem)

    def result(
        self, *, source: str, format: str, content_hash: str, files: list[str]
    ) -> LoadResult[MCQItem]:
        noted: dict[str, list[MCQItem]] = self.noted()
        if format in _OWN_LAYOUTS:
            noted["fewer_options"] = self._fewer_options()
        return LoadResult(
            items=self.items,
            problems=self.problems,
            source=source,
            format=format,
            content_hash=content_hash,
            files=files,
            notes=loading_notes(noted, len(self.items)),
            noted=noted,
        )

    def _fewer_options(self) -> list[MCQItem]:
        """Items with fewer options than most of them (more than half share one count): in a
        file of one's own layout a row whose last option key is missing or null read as a
        3-option item without a word, where the same row in a CSV was skipped (QA)."""
        counts: dict[int, int] = {}
        for item in self.items:
            counts[len(item.options)] = counts.get(len(item.options), 0) + 1
        if len(counts) < 2:
            return []
        most, held = max(counts.items(), key=lambda kv: kv[1])
        if 2 * held <= len(self.items):
            return []
        return [item for item in self.items if len(item.options) < most]
