"""Checks of the items a Python caller hands a pipeline (the commands' loaders guarantee them)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..errors import ConfigError

__all__ = ["check_items"]


def check_items(items: Sequence[object], kind: type, method: str, where: str = "items") -> None:
    """Refuse items of another kind than ``kind`` (BenBench's question-answer items given to
    the permutation test, ...) and ids given twice (each would be counted twice).

    >>> from contamscope.data import MCQItem
    >>> a = MCQItem("a", "2+2?", ("3", "4"))
    >>> check_items([a, a], MCQItem, "the permutation test")
    Traceback (most recent call last):
    ...
    contamscope.errors.ConfigError: items: id 'a' is given 2 times; each item must appear once
    """
    wrong = next((it for it in items if not isinstance(it, kind)), None)
    if wrong is not None:
        raise ConfigError(
            f"{where}: {getattr(wrong, 'id', wrong)!r} is a {type(wrong).__name__}; {method} "
            f"reads {kind.__name__} items"
        )
    ids = Counter(getattr(it, "id", None) for it in items)
    repeated = [(k, n) for k, n in ids.items() if n > 1]
    if repeated:
        (k, n), more = repeated[0], len(repeated) - 1
        also = f" ({more} more ids repeated)" if more else ""
        raise ConfigError(f"{where}: id {k!r} is given {n} times{also}; each item must appear once")
