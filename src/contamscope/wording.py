"""Small wording helpers for messages and reports."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` (with thousands separators) and the noun in the right number.

    >>> plural(1, "item"), plural(0, "item"), plural(1024, "query", "queries")
    ('1 item', '0 items', '1,024 queries')
    """
    return f"{n:,} {noun if n == 1 else (nouns or noun + 's')}"
