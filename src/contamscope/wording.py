"""Small wording helpers for messages and reports."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence

__all__ = ["plural", "number", "value", "pp_text", "md_cell", "json_error", "first_few"]


def shell(path: object) -> str:
    """``path`` as one shell word, for a command printed to be copied (a folder named
    ``a b`` was printed bare: pasted, it was two arguments; QA).

    A name starting with ``-`` is written ``./-out``: bare, the command read it as an option
    (``contamscope report -out``: "Missing argument"; locale QA).

    >>> shell("runs/a b"), shell("runs/plain"), shell("-out")
    ("'runs/a b'", 'runs/plain', './-out')
    """
    text = str(path)
    return shlex.quote("./" + text if text.startswith("-") else text)


def first_few(names: Sequence[str], n: int = 3) -> str:
    """The first ``n`` of ``names`` and how many more.

    >>> first_few(["a", "b", "c", "d", "e"]), first_few(["a"])
    ('a, b, c and 2 more', 'a')
    """
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


TOO_DEEP = "not valid JSON here (nested too deeply to read)"
"""What a JSON text too deeply nested for Python's parser (a RecursionError) is called."""


def json_error(e: json.JSONDecodeError, *, line: bool = True) -> str:
    """JSON's message with where it stopped, for an error whose file (and line, with
    ``line=False``) is named already: ``"Unterminated string starting at line 3 column 5"``
    (the message ends in "at"; it was cut short there, or said "at at").

    >>> json_error(json.JSONDecodeError("Expecting value", '{"a": }', 6))
    'Expecting value at line 1 column 7'
    >>> json_error(json.JSONDecodeError("Unterminated string starting at", '["a', 1), line=False)
    'Unterminated string starting at column 2'

    A comma before a closing bracket (JSON allows none; a list edited by hand, the last record
    deleted) is named where it is, not only where JSON stopped, a line later (QA):

    >>> json_error(json.JSONDecodeError("Expecting value", '[{"a": 1},\\n]', 11))
    'Expecting value at line 2 column 1; a trailing comma at line 1 column 10? JSON allows none'
    """
    where = f"line {e.lineno} column {e.colno}" if line else f"column {e.colno}"
    said = f"{e.msg}{' ' if e.msg.endswith(' at') else ' at '}{where}"
    doc, at = e.doc, e.pos
    before = len(doc[:at].rstrip()) - 1
    if before >= 0 and doc[before] == "," and doc[at : at + 1] in ("]", "}"):
        start = doc.rfind("\n", 0, before) + 1
        comma = f"line {doc.count(chr(10), 0, before) + 1} " if line else ""
        said += f"; a trailing comma at {comma}column {before - start + 1}? JSON allows none"
    return said


def md_cell(x: object) -> str:
    """``x`` as text for Markdown (a table cell, a list item): ``|`` would end a cell, and a
    ``<`` before a letter (``hf:my<model>``) or an ``&`` that spells an entity (``&amp;``) would
    be read as HTML; other ``<`` and ``&`` (``p <= 0.05``, ``Q&A``) show as they are.

    >>> md_cell('hf:my<model>&amp;"q"|x <= 5 & <3')
    'hf:my&lt;model>&amp;amp;"q"\\\\|x <= 5 & <3'
    >>> md_cell("a\\n| forged | row")  # a line break would end the table row
    'a \\\\| forged \\\\| row'
    """
    text = re.sub(r"&(?=#?\w+;)", "&amp;", " ".join(str(x).splitlines()))  # (a row, one line)
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text).replace("|", "\\|")


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` (with thousands separators) and the noun in the right number.

    >>> plural(1, "item"), plural(0, "item"), plural(1024, "query", "queries")
    ('1 item', '0 items', '1,024 queries')
    """
    return f"{n:,} {noun if n == 1 else (nouns or noun + 's')}"


def level_pct(alpha: float) -> str:
    """A test's level as a percentage, to its own digits: ``{alpha:.0%}`` said "at 0%" for
    --alpha 0.001 and "at 7% (p = 0.070)" for 0.07 against p = 0.0703 (compare QA).

    >>> level_pct(0.05), level_pct(0.001), level_pct(0.065), level_pct(1e-6)
    ('5%', '0.1%', '6.5%', '0.0001%')
    """
    return f"{100 * alpha:.3g}%"


def all_of(n: int, noun: str, nouns: str | None = None) -> str:
    """``all 3 items`` / ``the 1 item``, for a claim about every one of ``n``.

    >>> all_of(3, "analysed item"), all_of(1, "analysed item")
    ('all 3 analysed items', 'the 1 analysed item')
    """
    return f"the 1 {noun}" if n == 1 else f"all {plural(n, noun, nouns)}"


def reason_counts(counts: Mapping[str, int]) -> str:
    """Exclusion reasons with their counts, as a sentence's parenthesis says them.

    >>> reason_counts({"too long": 2, "no tokens": 1})
    'too long: 2; no tokens: 1'
    """
    return "; ".join(f"{why}: {n}" for why, n in counts.items())


def number(x: float, signed: bool = False) -> str:
    """Three decimals, one from 1,000 on, and 4 significant digits from 10^5 on (a perplexity
    of a model that never saw such text is 10^28, whose 29 digits say nothing).

    >>> number(48830.2), number(5.778e28), number(-0.0123, signed=True)
    ('48830.2', '5.778e+28', '-0.012')
    """
    sign = "+" if signed else ""
    if abs(x) >= 1e5:
        return f"{x:{sign}.3e}"
    return _fixed(x, f"{sign}.1f" if abs(x) >= 1000 else f"{sign}.3f")


def _fixed(x: float, spec: str) -> str:
    """``format(x, spec)`` without a minus on a number that rounds to zero ("-0.000" for
    -0.0004 read as a negative difference).

    >>> _fixed(-0.0004, ".3f"), _fixed(-0.0004, "+.3f"), _fixed(-0.04, ".1f")
    ('0.000', '+0.000', '0.0')
    """
    text = format(x, spec)
    if text.startswith("-") and float(text) == 0:
        return ("+" if spec.startswith("+") else "") + text[1:]
    return text


def value(x: float | None, pct: bool = False) -> str:
    """A table cell: ``-`` for no value, a rate as a percentage, else :func:`number`.

    >>> value(None), value(0.125, pct=True), value(2.5)
    ('-', '12.5%', '2.500')
    """
    if x is None:
        return "-"
    return f"{_fixed(100 * x, '.1f')}%" if pct else number(x)


def pp_text(x: float | None, unit: str = " pp") -> str:
    """A difference of two rates in percentage points, signed ("-" for None).

    >>> pp_text(-0.025), pp_text(0.0), pp_text(None), pp_text(0.1, unit="")
    ('-2.5 pp', '+0.0 pp', '-', '+10.0')
    """
    if x is None:
        return "-"
    return f"{_fixed(100 * x, '+.1f')}{unit}"
