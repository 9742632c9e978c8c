"""Prompt templates: how an item and an option order become (prefix, continuation) text.

The score of an order is log p(continuation | prefix), where the prefix is the question and the
continuation is the block of labelled option lines. The question's own probability is the same
in every order, so conditioning on it loses nothing and lets the question be run once.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..data.items import MCQItem, option_labels
from ..errors import ConfigError
from .orders import apply_order

__all__ = ["PromptTemplate", "TEMPLATES", "get_template"]


@dataclass(frozen=True)
class PromptTemplate:
    """Text layout of a multiple-choice item.

    Labels are positional (A, B, C ... in the order shown), so the label that precedes an option
    changes when the options are permuted, exactly as in a re-ordered benchmark.
    """

    name: str
    """Short name recorded in run records."""
    question: str = "{question}:\n"
    """Format of the prefix; ``{question}`` is replaced by the question text."""
    option: str = "{label}:{text}\n"
    """Format of one option line; ``{label}`` and ``{text}`` are replaced."""

    def __post_init__(self) -> None:
        if "{question}" not in self.question:
            raise ConfigError(f"template {self.name!r}: the question format needs {{question}}")
        if "{text}" not in self.option:
            raise ConfigError(f"template {self.name!r}: the option format needs {{text}}")

    def prefix(self, item: MCQItem) -> str:
        """The conditioning text (identical for every order of the item)."""
        return self.question.replace("{question}", item.question)

    def continuation(self, item: MCQItem, order: tuple[int, ...]) -> str:
        """The scored text: the option lines for ``order``."""
        labels = option_labels(len(order))
        texts = apply_order(item.options, order)
        return "".join(
            self.option.replace("{label}", lab).replace("{text}", txt)
            for lab, txt in zip(labels, texts)
        )

    def describe(self) -> dict[str, str]:
        return {"name": self.name, "question": self.question, "option": self.option}


TEMPLATES: dict[str, PromptTemplate] = {
    # The layout of the paper's published code: question followed by ':' and a newline, then
    # 'A:text' lines; its log-prob is summed from the first option label to the end. (The
    # published script also starts with a newline and leaves a stray space after option C; those
    # quirks are dropped here: the first is replaced by the model's BOS token, the second would
    # be identical in every order.)
    "paper": PromptTemplate("paper"),
    # The common MMLU evaluation layout.
    "mmlu": PromptTemplate("mmlu", question="{question}\n", option="{label}. {text}\n"),
}


def get_template(name: str) -> PromptTemplate:
    """Look up a named template; unknown names raise ConfigError listing the known ones."""
    try:
        return TEMPLATES[name]
    except KeyError:
        raise ConfigError(
            f"unknown --template {name!r}; known: {', '.join(sorted(TEMPLATES))}"
        ) from None
