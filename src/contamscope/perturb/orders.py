"""Option orders: every permutation up to a cap, seeded Monte Carlo samples above it.

An order is a tuple of original option indices: ``order[k]`` is the original option shown at
position ``k``. The original order (the identity) is always first.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["OrderSet", "option_orders", "apply_order"]


@dataclass(frozen=True)
class OrderSet:
    """The orders scored for one item and how they were chosen."""

    orders: tuple[tuple[int, ...], ...]
    """Orders as tuples of original option indices; ``orders[0]`` is the original order."""
    exhaustive: bool
    """True when ``orders`` holds all n! orders; False for a Monte Carlo sample."""
    seed: int | None = None
    """Seed of the Monte Carlo sample (None when exhaustive)."""


def _item_seed(seed: int, key: str) -> int:
    digest = hashlib.sha256(f"{seed}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def every_order(n_options: int, *, max_exhaustive: int, mc_orders: int) -> bool:
    """Whether an item of ``n_options`` options is scored in all its orders
    (:func:`option_orders`): up to ``max_exhaustive`` options, or where ``mc_orders`` is as
    many as its other orders."""
    return n_options <= max_exhaustive or mc_orders >= math.factorial(n_options) - 1


def option_orders(
    n_options: int, *, max_exhaustive: int = 6, mc_orders: int = 719, seed: int = 0, key: str = ""
) -> OrderSet:
    """Orders to score for an item with ``n_options`` options.

    Up to ``max_exhaustive`` options, all ``n!`` orders (identity first, then lexicographic).
    Above it, the identity plus ``mc_orders`` distinct non-identity orders drawn uniformly at random
    with a seed derived from ``seed`` and ``key`` (the item id), so a given item always gets the
    same sample, independently of which other items are in the run.

    >>> option_orders(3).orders[:3]
    ((0, 1, 2), (0, 2, 1), (1, 0, 2))
    >>> len(option_orders(7, max_exhaustive=6, mc_orders=99, key="q1").orders)
    100

    ``mc_orders`` as many as the other orders, or more, is every order: exhaustive (a sample
    of 30 of the 23 other orders of 4 options scored all 24 and was said to be a Monte Carlo
    one, with Monte Carlo p-values; statistics QA).

    >>> option_orders(4, max_exhaustive=3, mc_orders=30).exhaustive
    True
    """
    if n_options < 2:
        raise ValueError(f"at least 2 options are needed, got {n_options}")
    total = math.factorial(n_options)
    if every_order(n_options, max_exhaustive=max_exhaustive, mc_orders=mc_orders):
        return OrderSet(tuple(itertools.permutations(range(n_options))), exhaustive=True)
    k = min(mc_orders, total - 1)
    if k < 1:
        raise ValueError("mc_orders must be at least 1")
    item_seed = _item_seed(seed, key)
    rng = np.random.default_rng(item_seed)
    identity = tuple(range(n_options))
    chosen: dict[tuple[int, ...], None] = {}
    while len(chosen) < k:
        perm = tuple(int(i) for i in rng.permutation(n_options))
        if perm != identity:
            chosen.setdefault(perm, None)
    return OrderSet((identity, *chosen), exhaustive=False, seed=seed)


def apply_order(options: tuple[str, ...], order: tuple[int, ...]) -> tuple[str, ...]:
    """Options rearranged by ``order``: ``apply_order(("x", "y"), (1, 0)) == ("y", "x")``."""
    return tuple(options[i] for i in order)
