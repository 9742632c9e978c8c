"""CAP's consistency-preserving modifications (gamma): seeded, pure, and recorded.

- factual (multiple choice): the options are re-ordered and the answer re-mapped;
- logical (question answering): every year is shifted by one constant, which leaves the
  arithmetic intact; items whose reference answer would change are reported;
- semantic (summaries): a paraphrase request for a generation backend; whether it is kept is
  decided later from the embedding similarity.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Any

from ..data.items import MCQItem, QAItem

__all__ = [
    "reorder_options",
    "shift_years",
    "YearShift",
    "shift_item_years",
    "draw_year_shift",
    "PARAPHRASE_PROMPT",
    "paraphrase_prompt",
    "split_context",
]

_YEAR = re.compile(r"(?<![\d.,])(1[89]\d\d|20\d\d)(?![\d]|[.,]\d)")


def reorder_options(item: MCQItem, *, seed: int = 0) -> tuple[MCQItem, tuple[int, ...]]:
    """Return the item with its options in a seeded non-identity order, and that order.

    ``order[k]`` is the original index of the option shown at position ``k``; the answer is
    re-mapped. The order depends only on ``seed`` and the item id.

    >>> it = MCQItem("q1", "2+2?", ("3", "4", "5", "6"), answer=1)
    >>> mod, order = reorder_options(it, seed=0)
    >>> mod.options[mod.answer] == "4" and order != (0, 1, 2, 3)
    True
    """
    n = item.n_options
    rng = random.Random(f"cap-factual:{seed}:{item.id}")
    order = list(range(n))
    while n > 1 and order == list(range(n)):
        rng.shuffle(order)
    options = tuple(item.options[i] for i in order)
    answer = order.index(item.answer) if item.answer is not None else None
    meta = dict(item.meta, cap_order=list(order))
    return replace(item, options=options, answer=answer, meta=meta), tuple(order)


def shift_years(text: str, shift: int) -> tuple[str, int]:
    """Add ``shift`` to every four-digit year 1800-2099 in ``text``; return text and count.

    Numbers that are part of a longer number or a decimal are left alone.

    >>> shift_years("revenue in 2019 vs 2018 was 1,2019.5 and 12019", 34)
    ('revenue in 2053 vs 2052 was 1,2019.5 and 12019', 2)
    """
    count = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return str(int(m.group(1)) + shift)

    return _YEAR.sub(sub, text), count


def draw_year_shift(seed: int, low: int = 20, high: int = 40) -> int:
    """A seeded constant shift with magnitude in [low, high] and a random sign.

    >>> draw_year_shift(0) == draw_year_shift(0)
    True
    """
    rng = random.Random(f"cap-logical:{seed}")
    return rng.choice((-1, 1)) * rng.randint(low, high)


@dataclass(frozen=True)
class YearShift:
    """What the logical modification did to one item."""

    shift: int
    """Years added to every year."""
    n_input: int
    """Years shifted in the input."""
    n_answer: int
    """Years in the reference answer: the edit would change the answer when this is > 0."""

    @property
    def changes_answer(self) -> bool:
        return self.n_answer > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "logical",
            "year_shift": self.shift,
            "years_in_input": self.n_input,
            "years_in_answer": self.n_answer,
            "changes_answer": self.changes_answer,
        }


def shift_item_years(item: QAItem, shift: int) -> tuple[QAItem, YearShift]:
    """The item with every year in its input and reference shifted by ``shift``.

    >>> it = QAItem("x", "In 2019 sales were 5; in 2020, 7. Growth?", "2")
    >>> mod, what = shift_item_years(it, 10)
    >>> mod.question, what.n_input, what.changes_answer
    ('In 2029 sales were 5; in 2030, 7. Growth?', 2, False)
    """
    question, n_in = shift_years(item.question, shift)
    answer, n_ans = shift_years(item.answer, shift) if item.answer is not None else (None, 0)
    return replace(item, question=question, answer=answer), YearShift(shift, n_in, n_ans)


PARAPHRASE_PROMPT = (
    "Rewrite the following text so that it keeps exactly the same meaning, facts and numbers, "
    "but uses different wording. Keep one sentence per line. Output only the rewritten text.\n\n"
    "Text:\n{text}\n\nRewritten text:\n"
)
"""Paraphrase request (after the paper's Table 12: same meaning and facts, new wording)."""


def split_context(text: str, marker: str = "Context:") -> tuple[str, str]:
    """Split an input into (instruction head, passage) at the first ``marker``.

    Only the passage is paraphrased; without the marker the whole text is the passage.

    >>> split_context("Summarize.\\nContext:The call began.")
    ('Summarize.\\nContext:', 'The call began.')
    """
    head, sep, body = text.partition(marker)
    if not sep:
        return "", text
    return head + sep, body


def paraphrase_prompt(passage: str, template: str = PARAPHRASE_PROMPT) -> str:
    """The generation prompt asking for a paraphrase of ``passage``."""
    return template.format(text=passage.strip())
