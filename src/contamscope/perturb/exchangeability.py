"""Detect multiple-choice items whose options are not exchangeable.

The permutation method assumes that shuffling the options leaves the question unchanged, so that a
model that never saw the item has no reason to prefer the published order (H0 of
``docs/statistics.md``). Options that refer to other options break this in two ways:

* the meaning changes: "All of the above" in first position, or "Both A and B" once A and B hold
  different texts;
* even where the meaning survives ("All of these", "Neither"), convention puts such options last,
  so a clean model prefers orders that keep them last and the original order wins more often than
  chance -- a false positive for leakage.

:func:`non_exchangeable_reason` flags both kinds; such items should be left out of the permutation
method. The rules, English and Chinese, case-insensitive:

1. **Phrases** referring to the options. Anywhere in an option: "all/none/any/both/neither/either/
   each/one/some (of) the above/below/foregoing" and any "of the above/below" ("all of the above",
   "none of above", "all the above", "moons contribute to all of the above", "any 2 of the above
   values"). At the start of an option: "all/none/any/both/
   neither/either of these/those/them/the options/the choices/the answers", "all these", "all
   options" ("All of these options.", "All of the options given are correct"); later in a sentence
   these words usually point at things in the question ("neither of them can testify"), so they are
   not flagged there. The whole option being "Both", "Neither", "Either", "Other(s)", "All of them",
   "Both are correct" ... (not "None" or "All" alone: in MMLU "None" is mostly a count or Python's
   ``None``). Chinese: "以上/上述 + 都/均/皆/全/所有" with optional 选项/答案/说法/三项 in between
   ("以上都对", "以上都是", "以上都不是", "以上均正确", "以上皆非", "以上全部", "以上说法都不对"), but not
   "60岁以上" or "县级以上"; "其他选项均可", "其他三个都不对"; and a whole option "都不对", "都对", "全部正确",
   "全对", "均正确", "都不是", "均可", "全部", "以上", "其他".
2. **Label combinations**: two or more distinct option labels of this item (A-D for four options,
   up to J) joined by "and", "or", "nor", ",", "&", "+", "、", "，", "和", "与", "或", "及" ("A and B",
   "A, B, and C", "(a) and (b)", "Neither A nor B", "A B and C", "A+C+D", "A和B", "A、B都对"), or
   written together before a Chinese verdict ("AB都对"). A label is a letter standing alone (not part
   of a word or number) or in parentheses. A single label ("Same as B") is not flagged, nor are
   letters separated only by spaces ("A B"), nor anything inside ``$...$`` formulas.

   The hard cases are letters that *name* things ("Vitamin B and C", "P(A and B)", "A and B are
   equally good athletes"). The rules, in order:

   * bare lower-case letters count only after "both/neither/either" or as the whole option
     ("both a and b", "a and b"), because "a" is an English word, and never with "+" ("a+b");
   * a hyphen, an operator or a function bracket next to the combination means names: "anti-A and
     B", "P(A and B)", "P(C | A, B)";
   * an English word in front decides: a reference after "both, neither, either, only, option(s),
     choice(s), answer(s)" or "all/none/both/neither/any/each/either of"; any other word makes the
     letters names ("Vitamin B and C", "Hepatitis B and C", "Type A and B", "Plan A or B", "Group A
     and B" are NOT references);
   * a naming noun right after means names ("A and B antigens", "B and C vitamins", "A and B blood
     groups");
   * otherwise (nothing or punctuation in front) it is a reference, unless the item uses capital
     letters as names elsewhere -- "P(A)", "A ∩ B", "A is taller", "B6 and D", a formula with a
     capital letter -- in which case it still needs an explicit cue: a word in front as above,
     "only" or "are correct/true" after ("A and C only"), or parenthesised labels ("(A) and (C)").
     So "A and C" next to "B6 and B12" (vitamins) is not flagged, "A and C" next to plain texts is.
   * In Chinese text a combination counts only when the option ends with it or with a verdict
     right after it ("A和B", "A和B都对", "A、B、C均不对", "A和B都包括在内"), and, when Chinese text
     precedes it, only after 选项/选/答案/是/为/有/仅/只/即; so "A与B互斥" (events in a probability
     question), "A，B都有相同的特征向量" (matrices) and "维生素A和B" are not references. With capital
     letters used as names elsewhere, a bare "A和B" ending the option is not flagged either.

A flagged item is a *candidate* for exclusion; the rule errs toward excluding, because a wrongly
kept item can bias the test while a wrongly dropped one only costs a little power.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Sequence

from ..data.items import FULL_WIDTH

__all__ = [
    "CONVENTIONS",
    "REPORTED_ONLY",
    "alphabetical_orders",
    "block_orders",
    "conventions_of",
    "label_orders",
    "natural_order_reason",
    "non_exchangeable_reason",
    "sorted_number_orders",
]

_LETTERS = "ABCDEFGHIJ"

# --------------------------------------------------------------------------- phrases (English)

_QUANT = r"(?:all|none|any|both|neither|either|each|one|some)"
_EN_PHRASES = [
    # "all of the above", "none of above", "all the above", "both of the above", "one of the below"
    re.compile(
        rf"\b{_QUANT}\s+(?:of\s+(?:the\s+)?|the\s+)"
        r"(?:(?:options?|choices?|answers?|alternatives?|responses?)\s+)?"
        r"(?:above|below|foregoing)\b",
        re.IGNORECASE,
    ),
    # "any one or combinations of the above methods", "any 2 of the above values"
    re.compile(r"\bof\s+the\s+(?:above|below|foregoing)\b", re.IGNORECASE),
    # at the start of the option: "All of these", "None of them", "All of the options given ..."
    re.compile(
        r"^\W*(?:all|none|any|both|neither|either)\s+of\s+"
        r"(?:these|those|them|the\s+(?:options|choices|answers|alternatives|responses))\b",
        re.IGNORECASE,
    ),
    # at the start of the option: "All these", "All options are correct"
    re.compile(
        r"^\W*(?:all|none)\s+(?:these|(?:the\s+)?(?:options|choices|answers|alternatives))\b",
        re.IGNORECASE,
    ),
]
# The whole option (ignoring punctuation and case) is one of these.
_EN_WHOLE = re.compile(
    r"(?:both|neither|either|all above|none above|both of them|neither of them|all of them|"
    r"none of them|any of them|both are correct|neither is correct|all are correct|"
    r"none are correct|none is correct|both correct|neither correct|other|others)",
    re.IGNORECASE,
)

# --------------------------------------------------------------------------- phrases (Chinese)

_ZH_PHRASES = [
    # 以上都对 / 以上都是 / 以上都不是 / 以上均正确 / 以上皆非 / 以上全部 / 以上所有 / 以上说法都不对 /
    # 以上答案都不对 / 以上三项都是 / 上述都... ; "60岁以上" etc. are excluded by the look-behind.
    re.compile(
        r"(?<![0-9０-９一二三四五六七八九十百千万岁年次个月天度级倍%％])"
        r"(?:以上|上述|前述|上面)"
        r"(?:选项|答案|说法|所述|各项|各选项|几项|[一二三四五两]项|[一二三四五两]种|[一二三四五两]个)?"
        r"(?:都|均|皆|全|所有|各项)"
    ),
    # 其他选项均可 / 其他三个都不对 / 其它选项都不是
    re.compile(r"其[他它余](?:选项|答案|[一二三四两]个|[一二三四两]项|各项)(?:都|均|皆|全)"),
    # 以上皆非 (covered above), 以上 on its own as the whole option is handled by _ZH_WHOLE
]
_ZH_WHOLE = re.compile(
    r"(?:以上|上述)?(?:选项|答案|说法)?"
    r"(?:都|均|皆|全部?|全都)(?:不)?(?:对|正确|错|错误|是|不是|非|可以|可|符合)|"
    r"以上|上述|以上全部|全部|以上都有|都有可能|以上皆非|皆非|其他|其它"
)

# --------------------------------------------------------------------------- label combinations

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u2e80-\u2fdf"
_CJK_RE = re.compile(f"[{_CJK}]")
_SEP_EN = r"\s*(?:,\s*(?:and|or|&)\s+|,|&|\+|\band\b|\bor\b|\bnor\b)\s*|\s+"
_SEP_ZH = r"\s*(?:、|，|和|与|或|及|以及|跟)\s*"
_SEP_ZH_RE = re.compile(_SEP_ZH)
# A label token: "(A)" or a letter not touching other ASCII letters / digits.
_LABEL = r"(?:\(\s*[A-Ja-j]\s*\)|(?<![A-Za-z0-9])[A-Ja-j](?![A-Za-z0-9]))"
_LABEL_RE = re.compile(_LABEL)
_CHAIN = re.compile(f"{_LABEL}(?:(?:{_SEP_ZH}|{_SEP_EN}){_LABEL})+")
# Adjacent upper-case labels before a Chinese verdict word: "AB都对", "ABC均正确".
_ZH_GLUED = re.compile(r"(?<![A-Za-z0-9])([A-J]{2,5})\s*(?:都|均|皆|全|两项|三项|正确|对|错)")
_ZH_VERDICT = re.compile(
    r"\s*[，,]?\s*(?:(?:都|均|皆|全)(?:不|没)?(?:对|正确|错|错误|是|可以|可|包括在内|有|非|符合|选)"
    r"|两项|正确|对|错)?\s*[。.;；!！]?\s*$"
)
# CJK words after which a Chinese label combination is a reference ("选项A和B", "答案是A、C", "只有A和B").
_ZH_ALLOWED_BEFORE = ("选项", "选", "答案", "是", "为", "有", "仅", "只", "即")

# English words after which a combination is a reference ("Both A and B", "Options A and C").
_CUE_BEFORE = {"both", "neither", "either", "only", "option", "options", "choice", "choices"}
_CUE_BEFORE |= {"answer", "answers"}
_OF_QUANT = {"all", "none", "both", "neither", "any", "each", "either"}
_LOWER_OK_BEFORE = {"both", "neither", "either"}
# ... or after which it is ("A and C only", "A and B are correct", "A, B, and C are true").
_CUE_AFTER = re.compile(
    r"\s*(?:only|are\s+(?:both\s+|all\s+)?(?:correct|true|right|valid|possible)|"
    r"(?:are\s+)?both|(?:are\s+)?all)\b",
    re.IGNORECASE,
)
# Nouns that make "A and B <noun>" a name, not a label reference.
_NAMING_NOUNS = {
    "antigen", "antigens", "blood", "group", "groups", "type", "types", "vitamin", "vitamins",
    "cell", "cells", "allele", "alleles", "gene", "genes", "chain", "chains", "strain", "strains",
    "class", "classes", "grade", "grades", "receptor", "receptors", "site", "sites", "band",
    "bands", "ring", "rings", "horizon", "horizons", "fiber", "fibers", "fibres", "personality",
    "personalities", "virus", "viruses", "hepatitis", "bonds", "shares", "stock", "notes",
}  # fmt: skip
_MATH = "=<>+*/^|∩∪⊂⊃⊆⊇≡∨∧·→↔¬≤≥≠∈×−"
_MATH_BEFORE = re.compile(rf"(?:[{re.escape(_MATH)}]|[A-Za-z0-9]\()\s*$")
_MATH_AFTER = re.compile(rf"\s*(?:[{re.escape(_MATH)})]|\()")
# Evidence that capital letters name things in this item (people, events, sets, vitamins),
# found outside label combinations: "P(A)", "A ∩ B", "A is taller", "B6 and D".
_SYMBOL_USE = [
    re.compile(rf"(?:[A-Za-z]\(|[{re.escape(_MATH)}])\s*[A-J](?![A-Za-z0-9])"),
    re.compile(rf"(?<![A-Za-z0-9])[A-J]\s*[{re.escape(_MATH)}]"),
    re.compile(r"(?<![A-Za-z0-9])[A-J]\s+(?:is|are|was|were|has|does|did)\b"),
    re.compile(r"[A-Z]\d+\s*(?:,|and|or)\s*[A-J](?![A-Za-z0-9])"),
    re.compile(r"(?<![A-Za-z0-9])[A-J]\s*(?:,|and|or)\s*[A-Z]\d+"),
]


def _labels_in(chain: str) -> list[str]:
    """Letters of the label tokens in a matched chain (separators contain no lone letters)."""
    return [re.sub(r"[()\s]", "", tok.group(0)) for tok in _LABEL_RE.finditer(chain)]


def _word_before(text: str) -> tuple[str, str]:
    """(kind, word) of what precedes position ``len(text)``: kind is 'none', 'ascii', 'cjk', 'hyphen'
    or 'punct'; word is the preceding ASCII word (lower-cased; "all of" kept as two words) or the
    last 4 CJK characters."""
    t = text.rstrip()
    if not t:
        return "none", ""
    last = t[-1]
    if last in "-\u2010\u2011'\u2019":
        return "hyphen", ""
    if last.isascii() and last.isalpha():
        m = re.search(r"(?:([A-Za-z]+)\s+)?([A-Za-z]+)$", t)
        if m is None:  # pragma: no cover - last char is a letter
            return "ascii", ""
        word = m.group(2).lower()
        if word == "of" and m.group(1):
            word = f"{m.group(1).lower()} of"
        return "ascii", word
    if _CJK_RE.match(last):
        return "cjk", t[-4:]
    return "punct", ""


_LATEX = re.compile(r"\$[^$]*\$")
_LATEX_SYMBOL = re.compile(r"(?<![A-Za-z\\])[A-J](?![A-Za-z])")


def _symbol_use(options: Sequence[str]) -> bool:
    """True when capital letters name things in this item, outside label combinations."""
    for option in options:
        if any(_LATEX_SYMBOL.search(m.group(0)) for m in _LATEX.finditer(option)):
            return True
        rest = _CHAIN.sub(" ", _LATEX.sub(" ", option))
        if any(p.search(rest) for p in _SYMBOL_USE):
            return True
    return False


def _is_reference(option: str, m: re.Match[str], n_options: int, symbols: bool) -> bool:
    """Decide whether a matched label chain refers to options (see the module docstring)."""
    chain = m.group(0)
    letters = [c.upper() for c in _labels_in(chain)]
    if len(letters) < 2 or len(set(letters)) != len(letters):
        return False
    if not re.search(r"[^\s()A-Ja-j]", chain):
        return False  # only spaces between the letters: "A B", a sequence rather than a reference
    if any(c not in _LETTERS[:n_options] for c in letters):
        return False
    before, after = option[: m.start()], option[m.end() :]
    kind, word = _word_before(before)
    chinese = (
        kind == "cjk" or _SEP_ZH_RE.search(chain) is not None or bool(_CJK_RE.match(after[:1]))
    )
    if chinese:
        if kind == "cjk" and not word.endswith(_ZH_ALLOWED_BEFORE):
            return False
        verdict = _ZH_VERDICT.match(after)
        if verdict is None:
            return False
        return not (symbols and not verdict.group(0).strip(" ，,。.;；!！"))
    if kind == "hyphen" or _MATH_BEFORE.search(before) or _MATH_AFTER.match(after):
        return False
    cue_before = kind == "ascii" and (
        word in _CUE_BEFORE or (word.endswith(" of") and word.split()[0] in _OF_QUANT)
    )
    alone = not re.search(r"\w", before + after)
    cued = cue_before or _CUE_AFTER.match(after) is not None
    bare_lower = re.search(r"(?<![A-Za-z(])[a-j](?![A-Za-z0-9)])", chain) is not None
    lower_ok = alone or (kind == "ascii" and word in _LOWER_OK_BEFORE)
    if bare_lower and ("+" in chain or not lower_ok):
        return False  # "a" is an English word; "a+b" is algebra
    if kind == "ascii" and not cue_before:
        return False  # "Vitamin B and C", "Type A and B", "Plan A or B"
    nxt = re.match(r"\s*([A-Za-z]+)", after)
    if nxt and nxt.group(1).lower() in _NAMING_NOUNS:
        return False  # "A and B antigens"
    all_parenthesized = all(t.group(0).startswith("(") for t in _LABEL_RE.finditer(chain))
    return cued or all_parenthesized or not symbols  # a bare "A and C" needs no symbol use


def _strip_whole(option: str) -> str:
    return re.sub(r"[\W_]+", " ", option).strip()


def _option_reason(option: str, n_options: int, symbols: bool) -> str | None:
    """The reference found in one option, or None."""
    whole = _strip_whole(option)
    if _EN_WHOLE.fullmatch(whole) or _ZH_WHOLE.fullmatch(whole.replace(" ", "")):
        return option.strip()
    for pat in (*_EN_PHRASES, *_ZH_PHRASES):
        found = pat.search(option)
        if found:
            return found.group(0)
    plain = _LATEX.sub(" \u00a7 ", option)  # formulas are not label references
    for chain in _CHAIN.finditer(plain):
        if _is_reference(plain, chain, n_options, symbols):
            return chain.group(0)
    glued = _ZH_GLUED.search(option)
    if glued:
        letters = glued.group(1)
        if len(set(letters)) == len(letters) and all(c in _LETTERS[:n_options] for c in letters):
            return glued.group(0)
    return None


def non_exchangeable_reason(options: Sequence[str]) -> str | None:
    """Why shuffling these options would change the question (or bias the test), else None.

    Returns a short reason naming the first offending option and the text that triggered the rule.

    >>> non_exchangeable_reason(["Paris", "Rome", "Berlin", "All of the above"])
    "option D refers to other options: 'All of the above'"
    >>> non_exchangeable_reason(["Vitamin A", "Vitamin B and C", "Iron", "Zinc"]) is None
    True
    >>> non_exchangeable_reason(["甲", "乙", "丙", "以上都对"])
    "option D refers to other options: '以上都对'"
    >>> non_exchangeable_reason(["same", "Same ", "x", "y"]) is None, non_exchangeable_reason(
    ...     ["4", "2", " 4", "8"])
    (True, "option C repeats option A ('4'): orders that swap them are one text")
    """
    texts = [str(o) for o in options]
    first: dict[str, int] = {}
    for i, option in enumerate(texts):  # a repeat makes orders coincide: the original order's
        # rank is then tied by construction, and Algorithm 1 can never flag the item
        j = first.setdefault(option.strip(), i)
        if j != i:
            return (
                f"option {_label(i)} repeats option {_label(j)} ({option.strip()!r}): orders "
                "that swap them are one text"
            )
    folded = [_fold(t) for t in texts]
    symbols = _symbol_use(folded)
    for i, option in enumerate(folded):
        found = _option_reason(option, len(texts), symbols)
        if found is not None:
            shown = _as_written(found, option, texts[i])
            return f"option {_label(i)} refers to other options: {shown.strip()!r}"
    return None


def _as_written(found: str, folded: str, option: str) -> str:
    """The text of ``option`` where ``found`` is in its folded form (said as written: 'A，B',
    not 'A,B'): :func:`_fold` maps each character to one, so the span is the same.

    >>> [_as_written(found, _fold(o), o) for found, o in [("A,B", "Ａ，Ｂ…"), ("以上都", "ﬁ 以上都对")]]
    ['Ａ，Ｂ', '以上都']
    """
    at = folded.find(found)
    return option[at : at + len(found)] if at >= 0 else found


_FOLD = dict(FULL_WIDTH)
_FOLD.update(str.maketrans("說對選項錯確個兩種誤與僅為餘幾", "说对选项错确个两种误与仅为余几"))


def _fold(option: str) -> str:
    """``option`` as the rules read it: full-width letters and signs as ASCII ("Ａ和Ｂ",
    "A＋B") and the traditional forms of the rules' Chinese words as simplified ("以上說法都
    對"): such items were scored as exchangeable (Chinese QA). Only the full-width block: NFKC
    also made mathematical bold capitals (𝐀 and 𝐁, matrices) read as labels (diff-review QA).

    >>> _fold("Ａ＋Ｂ"), _fold("以上說法都對"), _fold("𝐀 and 𝐁")
    ('A+B', '以上说法都对', '𝐀 and 𝐁')
    """
    return option.translate(_FOLD)


def _label(i: int) -> str:
    return _LETTERS[i] if i < len(_LETTERS) else str(i + 1)


# --------------------------------------------------------------------------- natural orders

_NUMBER = re.compile(r"^\s*[(\[]?\s*([-+]?)\s*[$£€¥]?\s*([-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)")
_TRUTH_WORDS = (
    ("true", "false"),
    ("wrong", "not wrong"),
    ("yes", "no"),
    ("correct", "incorrect"),
    ("valid", "invalid"),
)
_WORD = re.compile(r"[\u3400-\u9fff]|[^\W_]+")
"""A word of :func:`natural_order_reason`'s nesting rule: a Chinese character, or a run of other
letters and digits."""
_NUMERAL = r"\(?(?:i{1,3}|iv|vi{0,3})(?:\)|\b)"
_ROMAN_COMBO = re.compile(
    rf"^\s*{_NUMERAL}(?:[\s,]*(?:(?:and|or|&)[\s,]*)?{_NUMERAL})*\s*(?:only\s*)?(?:\.\s*)?$",
    re.IGNORECASE,
)
"""Options that list numbered statements ("I and II", "(i), (iii) only"): each numeral ends at
a bracket or a word's end, and the separators have one reading, so a text never splits two
ways (a nested-quantifier pattern took 40 s on "IIII...a" of 30 letters; security QA)."""


_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = {
    w: 10 * (i + 2)
    for i, w in enumerate(
        ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
    )
}
_NUMBER_WORD = re.compile(
    r"^\s*(?:("
    + "|".join(_TENS)
    + r")(?:[-\s]("
    + "|".join(_UNITS[1:10])
    + r"))?|("
    + "|".join(_UNITS)
    + r"))\b",
    re.IGNORECASE,
)


_ORDINAL_UNITS = [
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
]
_ORDINAL_TENS = {
    w: 10 * (i + 2)
    for i, w in enumerate(
        [
            "twentieth",
            "thirtieth",
            "fortieth",
            "fiftieth",
            "sixtieth",
            "seventieth",
            "eightieth",
            "ninetieth",
        ]
    )
}
_ORDINAL_WORD = re.compile(
    r"^\s*(?:("
    + "|".join(_TENS)
    + r")[-\s]("
    + "|".join(_ORDINAL_UNITS[:9])
    + r")|("
    + "|".join([*_ORDINAL_UNITS, *_ORDINAL_TENS])
    + r"))\b",
    re.IGNORECASE,
)
_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH = re.compile(r"^\s*(" + "|".join(_MONTHS) + r")\b", re.IGNORECASE)


def _ordinal_word(option: str) -> float | None:
    """The value of a leading English ordinal below 100 ("third", "twenty-first"), or of a
    month's full name (March = 3): orders writers count in."""
    m = _ORDINAL_WORD.match(option)
    if m:
        if m.group(3):
            word = m.group(3).lower()
            if word in _ORDINAL_TENS:
                return float(_ORDINAL_TENS[word])
            return float(_ORDINAL_UNITS.index(word) + 1)
        return float(_TENS[m.group(1).lower()] + _ORDINAL_UNITS.index(m.group(2).lower()) + 1)
    month = _MONTH.match(option)
    return float(_MONTHS.index(month.group(1).lower()) + 1) if month else None


def _number_word(option: str) -> float | None:
    """The value of a leading spelled-out English number below 100 ("seven", "twenty-one"),
    ordinal ("third") or month ("March")."""
    ordinal = _ordinal_word(option)  # first: "twenty-first" is not twenty
    if ordinal is not None:
        return ordinal
    m = _NUMBER_WORD.match(option)
    if not m:
        return None
    if m.group(3):
        return float(_UNITS.index(m.group(3).lower()))
    return float(
        _TENS[m.group(1).lower()] + (_UNITS.index(m.group(2).lower()) if m.group(2) else 0)
    )


_ROMAN = (
    re.compile(r"X{0,3}(?:IX|IV|V?I{0,3})(?![A-Za-z])"),
    re.compile(r"x{0,3}(?:ix|iv|v?i{0,3})(?![A-Za-z])"),
)
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10}
_CHINESE_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
_CHINESE_NUMBER = re.compile(r"[零〇一二两三四五六七八九十]+")
_STEMS = "甲乙丙丁戊己庚辛壬癸"
"""The heavenly stems, Chinese ordinal labels: 甲 乙 丙 丁 name the parties of a law question,
甲类 乙类 classes, 甲型 乙型 types."""


def _roman(numeral: str) -> int:
    values = [_ROMAN_VALUES[c] for c in numeral.upper()]
    return sum(-v if v < w else v for v, w in zip(values, values[1:] + [0]))


def _chinese_number(text: str) -> int | None:
    """The value of a Chinese numeral below 100 ("三", "十二", "二十", "四十五"), or None."""
    head, ten, tail = text.partition("十")
    if not ten:
        return _CHINESE_DIGITS[text] if len(text) == 1 else None
    if len(head) > 1 or len(tail) > 1 or "十" in tail:
        return None
    return 10 * (_CHINESE_DIGITS[head] if head else 1) + (_CHINESE_DIGITS[tail] if tail else 0)


def _leading_number(option: str) -> float | None:
    """The value of the number an option starts with: digits (signs, currency, thousands
    commas, decimals, exponents), an English number word, a Roman numeral (I-XXXIX, either
    case, or one of Unicode's: Ⅳ), a numbered symbol (①, ⑴, ⒈, ㈢), a Chinese numeral below
    100 (三, 十二) or a heavenly stem (甲 = 1, 乙 = 2, ...)."""
    m = _NUMBER.match(option.replace("−", "-"))
    if m:  # (a sign before a currency symbol, "-$5", or after it, "$-5")
        try:
            value = float(m.group(2).replace(",", ""))
        except ValueError:
            return None
        return -value if m.group(1) == "-" else value
    text = option.lstrip(" (（[")
    if not text:
        return None
    first = text[0]
    if first in _STEMS:
        return float(_STEMS.index(first) + 1)
    chinese = _CHINESE_NUMBER.match(text)
    if chinese:
        whole = _chinese_number(chinese.group())
        return None if whole is None else float(whole)
    if not first.isascii() and not unicodedata.category(first).startswith("L"):
        numeric = unicodedata.numeric(first, None)  # Ⅳ, ⅳ, ①, ⑴, ⒈, ㈢, full-width digits
        if numeric is not None:
            return float(numeric)
    for pattern in _ROMAN:
        roman = pattern.match(text)
        if roman and roman.group():
            return float(_roman(roman.group()))
    return _number_word(option)


def _shared_start(texts: Sequence[str]) -> int:
    """Where the options' shared opening ends, backed off to the start of a number or word
    ("Lamina I." / "Lamina II." share "Lamina "; "第11肋" / "第10肋" share "第"; "0.1" / "0.2"
    share nothing a number can follow)."""
    shared = os.path.commonprefix(list(texts))
    end = len(shared)
    while end and _inside_number_or_word(shared, end - 1):
        end -= 1
    return end


def _inside_number_or_word(text: str, i: int) -> bool:
    c = text[i]
    if c in ".,":  # a decimal point or thousands comma after a digit
        return i > 0 and text[i - 1].isdigit()
    return (
        (c.isascii() and c.isalnum())
        or c in _STEMS
        or _CHINESE_NUMBER.match(c) is not None
        or unicodedata.numeric(c, None) is not None
    )


_LABELS = "①②③④⑤⑥⑦⑧⑨⑩⑪⑫⑬⑭⑮⑯⑰⑱⑲⑳" + _STEMS
_LABEL_SEQUENCE = re.compile(
    rf"\s*[{_LABELS}](?:\s*(?:[、，,和与及]\s*)?[{_LABELS}])*\s*(?:[。.]\s*)?"
)
r"""An option that is only statement labels. Each run of spaces has one place to go (two
``\s*`` around an optional separator split it every way: 49 characters of "①  ②  ..." took
over 5 s, each label more multiplying it; review QA)."""


def _label_sequence(option: str) -> tuple[int, ...] | None:
    """The statements an option combines when it is only their labels ("①③④", "①、③",
    "甲乙"), as numbers; else None."""
    if not _LABEL_SEQUENCE.fullmatch(option):
        return None
    return tuple(_LABELS.index(c) for c in option if c in _LABELS)


Orders = list[tuple[int, ...]]
"""Orders of an item's options, each as the published options' indices in the order listed."""


def sorted_number_orders(options: Sequence[object]) -> Orders | None:
    """The increasing and decreasing orders of the options' numbers (after the opening they
    share; :func:`_leading_number` reads them), or None when an option has no number or two
    are equal.

    >>> sorted_number_orders(["Every 8 hours", "Every 4 hours", "Every 12 hours"])
    [(1, 0, 2), (2, 0, 1)]
    """
    texts = [str(o).strip() for o in options]
    start = _shared_start(texts)
    values = [_leading_number(t[start:]) for t in texts]
    known = [v for v in values if v is not None]
    if len(known) < len(texts) or len(set(known)) < len(known):
        return None
    up = tuple(sorted(range(len(known)), key=known.__getitem__))
    return [up, up[::-1]]


def label_orders(options: Sequence[object]) -> Orders | None:
    """The dictionary order of options that are only statement labels ("①③", "甲乙"), or None."""
    labelled = [seq for seq in (_label_sequence(str(o).strip()) for o in options) if seq]
    if len(labelled) < len(options) or len(set(labelled)) < len(labelled):
        return None
    return [tuple(sorted(range(len(labelled)), key=labelled.__getitem__))]


_CYCLES: dict[str, list[tuple[str, ...]]] = {
    "weekdays": [
        ("monday",), ("tuesday",), ("wednesday",), ("thursday",), ("friday",), ("saturday",),
        ("sunday",),
    ],
    "months": [(m,) for m in _MONTHS],
    "seasons": [("spring", "春"), ("summer", "夏"), ("autumn", "fall", "秋"), ("winter", "冬")],
}  # fmt: skip
"""Names that come round in a cycle, each step with its spellings (English names start a
word; a Chinese season is the option's first character after the shared opening: 春分日,
夏至日, 秋季)."""


def _cycle_step(text: str, steps: list[tuple[str, ...]]) -> int | None:
    low = text.lower()
    for i, names in enumerate(steps):
        for name in names:
            if low.startswith(name) and (
                not name.isascii() or not low[len(name) : len(name) + 1].isalpha()
            ):
                return i
    return None


def cycle_orders(options: Sequence[object]) -> Orders | None:
    """The orders that list the options' weekdays, months or seasons in their cycle, from any
    starting point, forwards or backwards (after the opening all share), or None when an option
    is not one or two are the same step.

    >>> cycle_orders(["Sunday", "Monday", "Tuesday", "Wednesday"])[:2]
    [(0, 1, 2, 3), (0, 3, 2, 1)]
    >>> cycle_orders(["Paris", "London", "Rome", "Berlin"]) is None
    True
    """
    texts = [str(o).strip() for o in options]
    start = _shared_start(texts)
    for steps in _CYCLES.values():
        found = [_cycle_step(t[start:], steps) for t in texts]
        known = [f for f in found if f is not None]
        if len(known) < len(texts) or len(set(known)) < len(known):
            continue
        up = sorted(range(len(known)), key=known.__getitem__)
        orders = []
        for k in range(len(up)):
            turn = tuple(up[k:] + up[:k])
            orders += [turn, turn[:1] + turn[1:][::-1]]
        return sorted(set(orders))
    return None


def alphabetical_orders(options: Sequence[object]) -> Orders | None:
    """The alphabetical order of the options (case aside), or None when two read the same."""
    texts = [str(o).strip().lower() for o in options]
    if len(set(texts)) < len(texts):
        return None
    return [tuple(sorted(range(len(texts)), key=texts.__getitem__))]


def block_orders(options: Sequence[object]) -> Orders | None:
    """The orders that list four options forming a 2 x 2 block factor by factor, or None.

    A block is two choices crossed with two ("acute / chronic" x "lymphocytic / myelogenous
    leukemia", "300 J / 600 J" x "into / out of the system", "低温 / 高温" x "长日 / 短日作物"): each
    option's words beyond those all four share are exactly one level of each factor, and each
    level is shared by two options. Writers list such options row by row, and any of the 8
    orders that do (either factor first, either level first in each) is returned, the
    published order's indices permuted: a random order is one of them a third of the time.

    >>> len(block_orders(["acute lymphocytic leukemia", "acute myelogenous leukemia",
    ...                   "chronic lymphocytic leukemia", "chronic myelogenous leukemia"]))
    8
    >>> block_orders(["Paris", "London", "Rome", "Berlin"]) is None
    True
    """
    if len(options) != 4:
        return None
    bags = [{w.lower() for w in _WORD.findall(str(o))} for o in options]
    common = set.intersection(*bags)
    own = [b - common for b in bags]
    for a, b, c, d in ((0, 1, 2, 3), (0, 2, 1, 3), (0, 3, 1, 2)):
        # rows (a, b) and (c, d); columns (a, x) and (b, y) for either pairing of c and d
        for x, y in ((c, d), (d, c)):
            grid = ((a, b), (x, y))
            rows = [(own[r[0]] & own[r[1]]) - own[q[0]] - own[q[1]] for r, q in (grid, grid[::-1])]
            cols = [
                (own[grid[0][k]] & own[grid[1][k]]) - own[grid[0][1 - k]] - own[grid[1][1 - k]]
                for k in (0, 1)
            ]
            if not all(rows + cols):
                continue
            if any(own[grid[r][k]] != rows[r] | cols[k] for r in (0, 1) for k in (0, 1)):
                continue
            orders = set()
            for r0 in (0, 1):
                for k0 in (0, 1):
                    rs, ks = (r0, 1 - r0), (k0, 1 - k0)
                    orders.add(tuple(grid[r][k] for r in rs for k in ks))
                    orders.add(tuple(grid[r][k] for k in ks for r in rs))
            return sorted(orders)
    return None


def natural_order_reason(options: Sequence[object]) -> str | None:
    """Why the published order of these options is a *natural* one, or None.

    Unlike :func:`non_exchangeable_reason`, every order of these options keeps the question's
    meaning, but writers put such options in a conventional order, and a model that never saw the
    item may prefer that order too. Algorithm 1 then flags the item more often than its null rate
    of ``1/n!`` without any leak (H0 of the permutation test, exchangeability of the published
    order, does not hold for them). Rules:

    1. **Sorted numbers**: after the opening all options share ("Lamina ", "Every ", "第",
       "x^2 + y^2 = "; backed off to the start of a word or number), every option starts with a
       number and the values are distinct and strictly increasing or decreasing in the
       published order. A number is digits (signs, currency, thousands commas, decimals,
       exponents), an English number word below 100 ("seven", "twenty-one"), ordinal ("Third
       Amendment", "Sixteenth-century Spain") or month ("January", "March"), a Roman numeral
       ("Quadrant III", "Louis XIV", CMB's "I类 / Ⅱ类 / Ⅲ类"), a numbered symbol (①, ⑴), a
       Chinese numeral ("三级", "第二十届") or a heavenly stem, the Chinese ordinal labels
       (甲 乙 丙 丁: the parties of a law question, "医生甲 / 医生乙"). Of the items whose options
       are all distinct numbers, 851 of 1,275 are sorted in the MMLU test set (67%, where a
       random order of four would be sorted 8% of the time), 922 of 1,343 in C-Eval's test set
       (69%), 31 of 42 in the CMB sample, and 46 of 732 in CMMLU's test set (6%: CMMLU
       shuffled its options).
    2. **A truth-table block**: every option is a comma-separated pair of verdicts from one
       two-word vocabulary (True/False, Wrong/Not wrong, Yes/No, Correct/Incorrect,
       Valid/Invalid), e.g. MMLU's ``Wrong, Wrong / Wrong, Not wrong / Not wrong, Wrong / ...``.
    3. **Statement combinations**: every option is a combination of Roman-numeral statements
       ("I only", "II and III", "(i), (ii), and (iii) only"), in any order; or every option is
       only the labels of numbered statements ("①②", "①④", "②③", "③④"; "甲乙", "甲丙") and
       the options are in dictionary order of those numbers. Of C-Eval's 290 such items, 112
       are in that order (39%, where a random order of four would be 4%).
    4. **Nested options**: each option holds every word of the one before and more (or each
       drops part of the one before): "The ribs / The ribs and sternum / The ribs, sternum and
       clavicle / ...". Words are runs of letters and digits, and each Chinese character, case
       aside. In the MMLU test set 14 items (12 of them anatomy), in CMMLU 1, in C-Eval test 5;
       a clean model put the two of them in an 8-item anatomy sample first, which made the
       verdict read "leakage signal" (journey audit).
    5. **A 2 x 2 block listed row by row** (:func:`block_orders`): "acute lymphocytic / acute
       myelogenous / chronic lymphocytic / chronic myelogenous leukemia". Of the items whose
       options form such a block, 121 of 159 are listed row by row in the MMLU test set (76%,
       where a random order would be 33% of the time) and 107 of 136 in C-Eval's; 47 of 130 in
       CMMLU's (36%, shuffled).
    6. **A cycle in order** (:func:`cycle_orders`): weekdays, months or seasons (春 夏 秋 冬
       too) listed in their cycle from any starting point, forwards or backwards ("Sunday /
       Monday / Tuesday / Wednesday", "秋分日 / 冬至日 / 春分日 / 夏至日"). Of the items whose
       options are all such names, 9 of 9 are in cycle order in the MMLU test set (6 of
       weekdays, 3 of months, 2 of which rule 1 finds), 4 of 5 in C-Eval's (seasons), 0 of 5
       in CMMLU's (shuffled); a random order of four is a cycle order a third of the time.

    >>> natural_order_reason(["1", "2", "5", "11"])
    'numbers in increasing order'
    >>> natural_order_reason(["400 kJ/min.", "200 kJ/min.", "80 kJ/min.", "40 kJ/min."])
    'numbers in decreasing order'
    >>> natural_order_reason(["0", "4", "2", "6"]) is None
    True
    >>> natural_order_reason(["seven", "eight", "nine", "ten"])
    'numbers in increasing order'
    >>> natural_order_reason(["First Amendment", "Sixth Amendment", "Ninth Amendment", "Fourteenth Amendment"])
    'numbers in increasing order'
    >>> natural_order_reason(["I类", "Ⅱ类", "Ⅲ类", "Ⅳ类", "Ⅴ类"])
    'numbers in increasing order'
    >>> natural_order_reason(["Every 4 hours.", "Every 8 hours.", "Every 12 hours.", "Every 16 hours."])
    'numbers in increasing order'
    >>> natural_order_reason(["甲公司", "乙公司", "丙公司", "丁公司"])
    'numbers in increasing order'
    >>> natural_order_reason(["0.1", "0.2", "0.05", "0.08"]) is None
    True
    >>> natural_order_reason(["①②", "①④", "②③", "③④"])
    'combinations of numbered statements'
    >>> natural_order_reason(["①④", "①②", "②③", "③④"]) is None
    True
    >>> natural_order_reason(["One of them", "Ten of them", "Three", "Twenty-one"]) is None
    True
    >>> natural_order_reason(["True, True", "False, False", "True, False", "False, True"])
    'a fixed truth-table block (true/false)'
    >>> natural_order_reason(["I only", "II only", "III only", "I and II only"])
    'combinations of numbered statements'
    >>> natural_order_reason(["Paris", "London", "Rome", "Berlin"]) is None
    True
    >>> natural_order_reason(["hard palate.", "hard palate and upper lip.",
    ...                       "hard palate, upper lip and teeth.", "hard palate, upper lip, teeth and nose."])
    'nested options (each adds to the one before)'
    >>> natural_order_reason(["二价体和单价体", "三价体、二价体和单价体", "二价体", "单价体"]) is None
    True
    >>> natural_order_reason(["Sunday", "Monday", "Tuesday", "Wednesday"])
    'a cycle in order (weekdays, months or seasons)'
    >>> natural_order_reason(["春季", "秋季", "夏季", "冬季"]) is None
    True
    """
    texts = [str(o).strip() for o in options]
    if len(texts) < 2:
        return None
    published = tuple(range(len(texts)))
    numbers = sorted_number_orders(texts)
    if numbers and published in numbers:
        return f"numbers in {'increasing' if numbers[0] == published else 'decreasing'} order"
    for yes, no in _TRUTH_WORDS:
        words = {yes, no}
        parts = [[p.strip().rstrip(".").lower() for p in t.split(",")] for t in texts]
        if all(len(p) >= 2 and all(w in words for w in p) for p in parts):
            return f"a fixed truth-table block ({yes}/{no})"
    if all(_ROMAN_COMBO.match(t) and re.search(r"[ivxIVX]", t) for t in texts):
        return "combinations of numbered statements"
    if label_orders(texts) == [published]:
        return "combinations of numbered statements"
    blocks = block_orders(texts)
    if blocks and published in blocks:
        return "a 2 x 2 block listed row by row"
    cycles = cycle_orders(texts)
    if cycles and published in cycles and len(texts) > 2:
        return "a cycle in order (weekdays, months or seasons)"
    bags = [{w.lower() for w in _WORD.findall(t)} for t in texts]
    if all(bags):
        if all(a < b for a, b in zip(bags, bags[1:])):
            return "nested options (each adds to the one before)"
        if all(a > b for a, b in zip(bags, bags[1:])):
            return "nested options (each drops part of the one before)"
    return None


CONVENTIONS: dict[str, Callable[[Sequence[object]], Orders | None]] = {
    "sorted numbers": sorted_number_orders,
    "statement labels in dictionary order": label_orders,
    "2 x 2 block listed row by row": block_orders,
    "a cycle in order": cycle_orders,
    "alphabetical": alphabetical_orders,
}
"""Writers' conventions for ordering options that can be read from the options alone, each
with the function giving the orders that follow it (None: the options lack its structure)."""

REPORTED_ONLY = frozenset({"alphabetical"})
"""Conventions the verdict does not set aside (:func:`natural_order_reason` does not read
them): a model's pull towards alphabetical order was not measurable (SmolLM2 5.0-6.7% of items
whose favourite order is alphabetical against 4.2% by chance, p >= 0.24;
benchmarks/order_preference.py), while items published in any other convention are set aside."""


def conventions_of(options: Sequence[object]) -> dict[str, Orders]:
    """The conventions of :data:`CONVENTIONS` these options have the structure for, with the
    orders that follow each. Options with numbers or statement labels are not also counted as
    alphabetical (their dictionary order mostly follows the numbers).

    >>> conventions_of(["2 apples", "1 apple", "3 apples"])
    {'sorted numbers': [(1, 0, 2), (2, 0, 1)]}
    """
    found: dict[str, Orders] = {}
    if len(options) < 3:  # two options: either order is sorted, a block needs four
        return found
    for name, orders_of in CONVENTIONS.items():
        if name == "alphabetical" and found:
            break
        orders = orders_of(options)
        if orders:
            found[name] = orders
    return found
