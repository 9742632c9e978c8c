"""Prompt templates: how an item and an option order become (prefix, continuation) text.

The score of an order is log p(continuation | prefix), where the prefix is the question and the
continuation is the block of labelled option lines. The question's own probability is the same
in every order, so conditioning on it loses nothing and lets the question be run once.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..data.items import MCQItem, option_labels
from ..errors import ConfigError
from ..wording import json_error
from .orders import apply_order

_PLACEHOLDER = re.compile(r"\{(\w*)\}")
"""What reads as a placeholder: a word (or nothing) in braces."""

ANSWER_CUE = "Answer:"
"""What follows the options when a method asks the model for the answer letter."""

__all__ = ["PromptTemplate", "TEMPLATES", "TemplateField", "get_template"]


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
    answer: str = ANSWER_CUE
    """Text after the options where a generating method (CAP) asks for the answer letter; the
    option-order scoring does not use it."""
    options: tuple[str, ...] = ()
    """Option line formats by position (the first line's, the second's, ...) where a layout
    differs by position (``paper-script``'s space after the third line); positions past them
    use ``option``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(self.options))
        if "{question}" not in self.question:
            raise ConfigError(f"template {self.name!r}: the question format needs {{question}}")
        for part, fmt in [("option", self.option)] + [
            (f"options[{i}]", x) for i, x in enumerate(self.options)
        ]:
            if "{text}" not in fmt:
                raise ConfigError(f"template {self.name!r}: the {part} format needs {{text}}")
            self._only(part, fmt, ("label", "text"))
        self._only("question", self.question, ("question",))
        self._only("answer", self.answer, ())

    def _only(self, part: str, fmt: str, fills: tuple[str, ...]) -> None:
        """Refuse a ``{name}`` the ``part`` format does not fill: it was scored as written,
        a typo (``{Label}``) silently so (QA)."""
        unknown = next(
            (m.group() for m in _PLACEHOLDER.finditer(fmt) if m[1] not in fills),
            None,
        )
        if unknown is not None:
            filled = " and ".join(f"{{{f}}}" for f in fills)
            raise ConfigError(
                f"template {self.name!r}: the {part} format has {unknown}, which nothing fills "
                f"in ({f'it fills {filled} only' if fills else 'the cue is sent as written'})"
            )

    def prefix(self, item: MCQItem) -> str:
        """The conditioning text (identical for every order of the item)."""
        return self.question.replace("{question}", item.question)

    def continuation(self, item: MCQItem, order: tuple[int, ...]) -> str:
        """The scored text: the option lines for ``order``."""
        labels = option_labels(len(order))
        texts = apply_order(item.options, order)
        return "".join(
            self.line(i).replace("{label}", lab).replace("{text}", txt)
            for i, (lab, txt) in enumerate(zip(labels, texts))
        )

    def line(self, position: int) -> str:
        """The option line format at 0-based ``position``."""
        return self.options[position] if position < len(self.options) else self.option

    def prompt(self, item: MCQItem) -> str:
        """The item in its published order followed by the answer cue: what a generating
        method (CAP) sends to ask for the answer letter."""
        options = self.continuation(item, tuple(range(item.n_options)))
        return self.prefix(item) + options + self.answer

    def describe(self) -> dict[str, str | list[str]]:
        """The template as run records keep it (:func:`get_template` reads it back)."""
        out: dict[str, str | list[str]] = {
            "name": self.name,
            "question": self.question,
            "option": self.option,
        }
        if self.answer != ANSWER_CUE:  # run folders written before the cue existed still match
            out["answer"] = self.answer
        if self.options:
            out["options"] = list(self.options)
        return out


TEMPLATES: dict[str, PromptTemplate] = {
    # The layout of the paper's published code: question followed by ':' and a newline, then
    # 'A:text' lines; its log-prob is summed from the first option label to the end. The
    # published script also starts with a newline (here the model's BOS token starts the text)
    # and leaves a stray space after the third option line; "paper-script" keeps both. The space
    # is not the same in every order: it follows whichever option is third, and moves orders'
    # log-probs by several nats, unevenly (measured in docs/statistics.md).
    "paper": PromptTemplate("paper"),
    "paper-script": PromptTemplate(
        "paper-script",
        question="\n{question}:\n",
        options=("{label}:{text}\n", "{label}:{text}\n", "{label}:{text} \n"),
    ),
    # The common MMLU evaluation layout.
    "mmlu": PromptTemplate("mmlu", question="{question}\n", option="{label}. {text}\n"),
}


_TEMPLATE_KEYS = ("name", "question", "option", "answer", "options")
_CUSTOM_HELP = (
    'a JSON object {"question": "...{question}...", "option": "...{label}...{text}..."} or a '
    ".json file holding one"
)


def as_template(value: object) -> PromptTemplate:
    """A config's ``template``: a :class:`PromptTemplate`, or a spec :func:`get_template` reads.

    >>> as_template(123)
    Traceback (most recent call last):
    ...
    contamscope.errors.ConfigError: --template (template): expected a PromptTemplate or a template spec such as 'paper', not int
    """
    if isinstance(value, PromptTemplate):
        return value
    if isinstance(value, str):
        return get_template(value)
    raise ConfigError(
        "--template (template): expected a PromptTemplate or a template spec such as 'paper', "
        f"not {type(value).__name__}"
    )


_T = TypeVar("_T", PromptTemplate, "PromptTemplate | None")


class TemplateField(Generic[_T]):
    """A config's ``template`` field (a dataclass field whose default is this descriptor):
    given a :class:`PromptTemplate` or a spec :func:`get_template` reads (``"paper"``), read
    as the template. A type checker sees both: the config's ``__init__`` takes a name, and
    ``config.template.prefix(...)`` is a template's (the field said ``PromptTemplate`` only,
    and ``template="paper"``, as the docs write it, failed a user's type check)."""

    def __init__(self, default: _T) -> None:
        self._default: _T = default
        self._slot = "template"

    def __set_name__(self, owner: type, name: str) -> None:
        # held under the field's own name, where a plain field kept it: a config pickled
        # before the field was a descriptor reads back with its template (it read the default)
        self._slot = name

    def __get__(self, obj: object | None, owner: Any = None) -> _T:
        if obj is None:  # the dataclass's default
            return self._default
        state = obj.__dict__
        # (a config pickled while the value was kept as "_template" reads back with it too)
        held = state.get(self._slot, state.get(f"_{self._slot}", self._default))
        return as_template(held) if isinstance(held, str) else held  # type: ignore[no-any-return]

    def __set__(self, obj: object, value: _T | str) -> None:
        held = None if value is None and self._default is None else as_template(value)
        obj.__dict__[self._slot] = held


def get_template(spec: str) -> PromptTemplate:
    r"""A named template (``paper``, ``paper-script``, ``mmlu``), a JSON object ``{"question": ..., "option": ...,
    "name": ..., "answer": ...}`` (``name`` optional, default ``custom``; ``answer`` optional,
    the cue after the options where CAP asks for the letter, default ``Answer:``) or the path
    of a ``.json`` file holding one. Anything else raises a one-line ConfigError naming ``--template``.

    >>> t = get_template('{"question": "Question: {question}\n", "option": "({label}) {text}\n"}')
    >>> t.name, t.option
    ('custom', '({label}) {text}\n')
    """
    if spec in TEMPLATES:
        return TEMPLATES[spec]
    where = f"--template {spec!r}"
    text = spec.strip()
    if not text.startswith(("{", "[")):
        path = Path(spec).expanduser()
        if not (path.is_file() or path.suffix.lower() == ".json"):
            raise ConfigError(
                f"unknown {where}; known: {', '.join(sorted(TEMPLATES))}, or {_CUSTOM_HELP}"
            )
        where = f"--template {spec}"
        try:
            text = path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise ConfigError(f"{where}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{where}: cannot read it as UTF-8 text ({e})") from None
    else:
        where = "--template"
    try:
        obj = json.loads(text, strict=False)  # a newline typed into a format is one
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: not JSON ({json_error(e)})") from None
    if not isinstance(obj, dict):
        raise ConfigError(f"{where}: expected {_CUSTOM_HELP}")
    unknown = [k for k in obj if k not in _TEMPLATE_KEYS]
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}; expected {', '.join(_TEMPLATE_KEYS)}"
        )
    missing = [k for k in ("question", "option") if k not in obj]
    if missing:
        raise ConfigError(f"{where}: no {missing[0]!r} format; expected {_CUSTOM_HELP}")
    bad = next((k for k, v in obj.items() if not isinstance(v, str) and k != "options"), None)
    if bad is not None:
        raise ConfigError(f"{where}: {bad!r} must be a string, got {type(obj[bad]).__name__}")
    options = obj.get("options", [])
    if not isinstance(options, list) or not all(isinstance(x, str) for x in options):
        raise ConfigError(
            f"{where}: 'options' must be a list of option line formats (the first line's, the "
            "second's, ...), each a string"
        )
    name = obj.get("name") or "custom"
    if name in TEMPLATES and (obj["question"], obj["option"], tuple(options)) != (
        TEMPLATES[name].question,
        TEMPLATES[name].option,
        TEMPLATES[name].options,
    ):
        raise ConfigError(f"{where}: the name {name!r} is a built-in template's; choose another")
    try:
        return PromptTemplate(
            name, obj["question"], obj["option"], obj.get("answer", ANSWER_CUE), tuple(options)
        )
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
