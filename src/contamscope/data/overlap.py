"""Items that more than one split holds: the same text under other ids or files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contamscope.data.items import content_key

__all__ = ["SplitOverlap", "split_overlap", "repeats"]


@dataclass
class SplitOverlap:
    """Items of a split whose text is also in another split, and repeats within the split."""

    shared: dict[str, list[str]]
    """Per split, the ids of its items whose text (:func:`content_key`) is in another split."""
    shared_with: dict[str, dict[str, int]]
    """Per split, how many of its items each other split also holds."""
    duplicates: dict[str, int]
    """Per split, items that repeat the text of an earlier item of the same split."""
    repeated: dict[str, dict[str, str]]
    """Per split, :func:`repeats` of its items: ``{id of the repeat: id of the first}``."""

    def left_out(self, drop: bool, drop_repeats: bool = False) -> dict[str, set[str]]:
        """Per split, the ids ``--drop-shared`` (``drop``) and ``--drop-repeats`` leave out."""
        return {
            s: (set(ids) if drop else set()) | (set(self.repeated[s]) if drop_repeats else set())
            for s, ids in self.shared.items()
        }

    def counts(self) -> dict[str, dict[str, Any]]:
        """``{split: {"shared": n, "shared_with": {split: n}, "duplicates": n}}`` (summary)."""
        return {
            s: {
                "shared": len(ids),
                "shared_with": self.shared_with[s],
                "duplicates": self.duplicates[s],
            }
            for s, ids in self.shared.items()
        }


def split_overlap(splits: Mapping[str, Sequence[Any]]) -> SplitOverlap:
    """Which items appear in more than one split (the same :func:`content_key`: whitespace,
    case, width and zero-width characters aside).

    CAP and BenBench compare splits (trained on or not); an item in two splits is on both sides
    of the comparison and pulls the difference towards 0 (FinEval's dev and val share 8
    questions, MATH's train and test 1 problem).

    >>> from contamscope.data.items import QAItem
    >>> a, b = QAItem("1", "Q one"), QAItem("2", "Q two")
    >>> ov = split_overlap({"dev": [a, b, QAItem("3", "q  ONE")], "val": [QAItem("9", "Q two")]})
    >>> ov.shared, ov.duplicates
    ({'dev': ['2'], 'val': ['9']}, {'dev': 1, 'val': 0})
    """
    keys = {s: [content_key(it) for it in items] for s, items in splits.items()}
    sets = {s: set(k) for s, k in keys.items()}
    shared: dict[str, list[str]] = {}
    shared_with: dict[str, dict[str, int]] = {}
    for s, items in splits.items():
        others = {o: sets[o] for o in splits if o != s}
        shared[s] = [
            it.id for it, k in zip(items, keys[s]) if any(k in ks for ks in others.values())
        ]
        shared_with[s] = {
            o: n for o, ks in others.items() if (n := sum(1 for k in keys[s] if k in ks))
        }
    repeated = {s: repeats(items) for s, items in splits.items()}
    duplicates = {s: len(r) for s, r in repeated.items()}
    return SplitOverlap(shared, shared_with, duplicates, repeated)


def repeats(items: Sequence[Any]) -> dict[str, str]:
    """Items that repeat the text of an earlier item (:func:`content_key`: question and option
    set, as :func:`~contamscope.data.items.same_text` reads them): ``{id of the repeat: id of
    the first}``.

    A repeated item is not new evidence: a model scores two copies alike, so counting both
    counts one observation twice (MMLU's test set repeats 106 questions).

    >>> from contamscope.data.items import MCQItem
    >>> repeats([MCQItem("a", "2+2?", ("4", "3")), MCQItem("b", "2 + 2?", ("4", "3")),
    ...          MCQItem("c", " 2+2? ", ("3", "4"))])
    {'c': 'a'}
    """
    first: dict[tuple[str, ...], str] = {}
    out: dict[str, str] = {}
    for it in items:
        key = content_key(it)
        if key in first:
            out[it.id] = first[key]
        else:
            first[key] = it.id
    return out
