"""Small wording helpers for messages and reports."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` and the noun in the right number.

    >>> plural(1, "item"), plural(0, "item"), plural(2, "query", "queries")
    ('1 item', '0 items', '2 queries')
    """
    return f"{n} {noun if n == 1 else (nouns or noun + 's')}"
