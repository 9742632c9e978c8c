"""Paraphrase requests for BenBench reference versions, and the check that a paraphrase keeps
the final answer. Pure: building a prompt and judging a reply need no model.

>>> p = Paraphrase.from_reply("Question: How many?\\nAnswer: 2 + 2 = 4\\n#### 4", "1 + 3 = 4\\n#### 4")
>>> p.ok, p.question, p.answer
(True, 'How many?', '2 + 2 = 4\\n#### 4')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contamscope.data.qa import boxed_answer, final_answer, gsm8k_final

__all__ = ["PARAPHRASE_PROMPT", "paraphrase_prompt", "Paraphrase", "same_final_answer"]

PARAPHRASE_PROMPT = (
    "Rewrite the following math problem and its worked solution in different words. Keep every "
    "number, every calculation and the final answer exactly the same; change only the wording. "
    "{keep}Reply in exactly this form and with nothing else:\n"
    "Question: <the rewritten problem>\n"
    "Answer: <the rewritten solution>\n\n"
    "Question: {question}\n"
    "Answer: {answer}"
)
"""The instruction sent to the paraphrasing model (one user turn of its chat template)."""

_KEEP_GSM8K = "End the solution with the same last line '#### {final}'. "
_KEEP_BOXED = "Keep the final answer in \\boxed{{{final}}}. "


def paraphrase_prompt(question: str, answer: str) -> str:
    """The paraphrasing instruction for one item (mentions how its final answer is written)."""
    keep = ""
    fin = gsm8k_final(answer)
    if fin is not None:
        keep = _KEEP_GSM8K.format(final=fin)
    else:
        boxed = boxed_answer(answer)
        if boxed is not None:
            keep = _KEEP_BOXED.format(final=boxed)
    return PARAPHRASE_PROMPT.format(keep=keep, question=question, answer=answer)


def _norm_number(text: str) -> str:
    t = text.strip().rstrip(".").replace(",", "").replace("$", "")
    try:
        x = float(t)
    except ValueError:
        return t
    return str(int(x)) if x == int(x) else repr(x)


def same_final_answer(original: str, paraphrase: str) -> tuple[bool, str]:
    """Whether the paraphrased solution keeps the original's final answer, and why not.

    GSM8K: the number after ``####`` (commas, ``$`` and ``.0`` ignored); MATH: the last
    ``\\boxed{}`` (spaces ignored). A paraphrase that loses the final answer fails. When the
    *original* has none (a generic benchmark), nothing can be checked: the paraphrase is accepted
    with the reason ``unchecked: ...``, which run records count and report.

    >>> same_final_answer("x\\n#### 1,000", "y\\n#### 1000")
    (True, '')
    >>> same_final_answer("x\\n#### 12", "y\\n#### 13")
    (False, "final answer changed: '12' -> '13'")
    """
    want = final_answer(original)
    if want is None:
        return True, "unchecked: the original has no final answer ('####' or \\boxed{})"
    got = final_answer(paraphrase)
    if got is None:
        return False, "the paraphrase has no final answer ('####' or \\boxed{})"
    if _norm_number(want) != _norm_number(got):
        return False, f"final answer changed: {want!r} -> {got!r}"
    return True, ""


def _words(text: str) -> list[str]:
    return text.split()


_REPLY = re.compile(r"Question:\s*(?P<q>.*?)\s*\n\s*Answer:\s*(?P<a>.*)", re.S)


@dataclass(frozen=True)
class Paraphrase:
    """A paraphrased (question, answer), or why a reply could not be used."""

    question: str | None
    answer: str | None
    ok: bool
    reason: str = ""
    """Empty when ``ok``; else a one-line reason (unparseable reply, answer changed ...)."""

    @classmethod
    def from_reply(cls, reply: str, original_answer: str) -> Paraphrase:
        """Parse a ``Question: ...\\nAnswer: ...`` reply and check its final answer."""
        m = _REPLY.search(reply)
        if not m:
            return cls(None, None, False, "reply not in the 'Question: ... Answer: ...' form")
        q, a = m.group("q").strip(), m.group("a").strip()
        if not q or not a:
            return cls(q or None, a or None, False, "empty question or answer in the reply")
        ok, why = same_final_answer(original_answer, a)
        return cls(q, a, ok, why)

    @classmethod
    def given(
        cls,
        question: str | None,
        answer: str | None,
        original_answer: str,
        original_question: str | None = None,
    ) -> Paraphrase:
        """A paraphrase read from a file: stripped and checked the same way as a generated one,
        and refused when it is the original's own text (a reference read as the original).

        The published GSM8K rewrites start every answer with a space: kept, it is one more
        token, scored on the paraphrase only, which makes paraphrases look harder.

        >>> Paraphrase.given("Q?", " it is 3\\n#### 3", "so 3\\n#### 3").answer
        'it is 3\\n#### 3'
        >>> Paraphrase.given("Q?", "so  3\\n#### 3", "so 3\\n#### 3", "Q? ").reason
        'identical to the original (whitespace aside): not a paraphrase'
        """
        q, a = (question or "").strip(), (answer or "").strip()
        if not q or not a:
            return cls(q or None, a or None, False, "empty paraphrased question or answer")
        if (
            original_question is not None
            and _words(q) == _words(original_question)
            and _words(a) == _words(original_answer)
        ):
            why = "identical to the original (whitespace aside): not a paraphrase"
            return cls(q, a, False, why)
        ok, why = same_final_answer(original_answer, a)
        return cls(q, a, ok, why)
