"""Toy benchmark rows shared by the CLI tests (imported like cli_runner)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any


def sorted_and_shuffled(n: int, seed: int) -> tuple[list[str], list[str]]:
    """``n`` MMLU-CSV rows whose four numbers are sorted (a benchmark ordered by convention),
    and ``n`` rows of other numbers in an order neither sorted nor reversed (references
    written otherwise)."""
    rng = random.Random(seed)
    rows, refs = [], []
    for i in range(n):
        values = sorted(rng.sample(range(1, 99), 4))
        rows.append(f"How many units in case {i}?," + ",".join(map(str, values)) + ",A")
        values = rng.sample(range(1, 99), 4)
        while values in (sorted(values), sorted(values, reverse=True)):
            rng.shuffle(values)
        refs.append(f"How many parts in crate {i}?," + ",".join(map(str, values)) + ",B")
    return rows, refs


WORDS = ["river", "stone", "cloud", "lamp", "seven", "orange", "quiet", "market", "violin",
         "paper", "engine", "garden"]  # fmt: skip


def word_rows(n: int, seed: int = 0) -> list[str]:
    """``n`` MMLU-CSV rows of random words: reference items no model has seen."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        q = " ".join(rng.sample(WORDS, 5)).capitalize() + "?"
        rows.append(
            ",".join([q] + [" ".join(rng.sample(WORDS, 2)) for _ in range(4)] + ["ABCD"[i % 4]])
        )
    return rows


QA_ROWS = [
    {
        "question": "Tom has 3 apples and buys 4 more apples at the shop.",
        "answer": "He has 3 + 4 = 7 apples in total now.\n#### 7",
        "rewritten_question": "At the shop Tom buys 4 apples; he already had 3.",
        "rewritten_answer": "In total 3 + 4 = 7 apples.\n#### 7",
    },
    {
        "question": "A box holds 12 pens and 5 are taken out of it.",
        "answer": "12 - 5 = 7 pens remain in the box.\n#### 7",
        "rewritten_question": "Five pens leave a box of twelve.",
        "rewritten_answer": "The box keeps 12 - 5 = 8 pens.\n#### 8",
    },  # answer changed: not used
    {"question": "Hi?", "answer": "7"},  # too short for any 5-gram
]
"""GSM8K-style rows with BenBench's inline paraphrases (``rewritten_*``)."""


def write_jsonl(path: Path, rows: list[object]) -> Path:
    """``rows``, one JSON value a line."""
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def write(folder: Path, name: str, text: str) -> Path:
    """``text`` written as UTF-8 to ``folder/name`` (its folders made): a benchmark file."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def line(rec: Any) -> str:
    """A JSON Lines row of ``rec`` (a string as it is)."""
    return (rec if isinstance(rec, str) else json.dumps(rec, ensure_ascii=False)) + "\n"
