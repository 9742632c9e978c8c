"""Toy benchmark rows shared by the CLI tests (imported like cli_runner)."""

from __future__ import annotations

import random


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
