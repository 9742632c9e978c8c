"""Which items leak, and the text the model is trained on.

Items are drawn with a seed, then split in half: the *leaked* half is written out as plain text
in exactly the layout the permutation pipeline scores (the template's prefix followed by its
option block), the *clean* half is never trained on. Scenario ``a`` keeps the published option
order; scenario ``b`` writes each leaked item in one random non-original order (the paper's
shuffled scenario), recorded per item.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..data.items import MCQItem
from ..errors import ConfigError
from ..perturb import PromptTemplate
from ..perturb.exchangeability import non_exchangeable_reason

__all__ = ["Scenario", "Split", "split_items", "training_order", "training_text"]

Scenario = Literal["a", "b"]
"""``a``: trained in the original option order; ``b``: in a random order per item."""


@dataclass(frozen=True)
class Split:
    """The evaluated items and their ground truth."""

    items: tuple[MCQItem, ...]
    """All evaluated items, in benchmark order."""
    leaked: tuple[MCQItem, ...]
    """The half written into the training data."""
    clean: tuple[MCQItem, ...]
    """The half never trained on."""

    @property
    def leaked_ids(self) -> set[str]:
        return {it.id for it in self.leaked}


def split_items(
    items: Sequence[MCQItem],
    n_items: int,
    *,
    seed: int = 0,
    include_non_exchangeable: bool = False,
) -> Split:
    """Draw ``n_items`` items with ``seed`` and split them in half (leaked gets the extra one).

    Items whose options refer to each other ('All of the above') are left out of the draw unless
    ``include_non_exchangeable``, since the permutation pipeline would exclude them.

    >>> from contamscope.data.items import MCQItem
    >>> its = [MCQItem(id=f"q{i}", question="?", options=("x", "y"), answer=0) for i in range(10)]
    >>> s = split_items(its, 6, seed=1)
    >>> len(s.items), len(s.leaked), len(s.clean), s.leaked_ids.isdisjoint(c.id for c in s.clean)
    (6, 3, 3, True)
    """
    if n_items < 2:
        raise ConfigError("--n-items must be at least 2 (one leaked, one clean)")
    pool = [
        it
        for it in items
        if include_non_exchangeable or non_exchangeable_reason(it.options) is None
    ]
    if len(pool) < n_items:
        raise ConfigError(
            f"--n-items {n_items}: only {len(pool)} usable items in the benchmark"
            + ("" if include_non_exchangeable else " (non-exchangeable items left out)")
        )
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(len(pool)), n_items))
    picked = [pool[i] for i in chosen]
    shuffled = picked[:]
    rng.shuffle(shuffled)
    half = (n_items + 1) // 2
    leaked_ids = {it.id for it in shuffled[:half]}
    return Split(
        items=tuple(picked),
        leaked=tuple(it for it in picked if it.id in leaked_ids),
        clean=tuple(it for it in picked if it.id not in leaked_ids),
    )


def training_order(item: MCQItem, scenario: Scenario, seed: int) -> tuple[int, ...]:
    """The option order a leaked item is trained in (identity in scenario ``a``).

    Scenario ``b`` draws a non-identity order from a generator seeded by ``seed`` and the item
    id, so an item's order does not depend on which other items were drawn.

    >>> from contamscope.data.items import MCQItem
    >>> it = MCQItem(id="q", question="?", options=("w", "x", "y", "z"), answer=0)
    >>> training_order(it, "a", 0)
    (0, 1, 2, 3)
    >>> training_order(it, "b", 0) != (0, 1, 2, 3)
    True
    """
    identity = tuple(range(item.n_options))
    if scenario == "a":
        return identity
    if scenario != "b":
        raise ConfigError(f"--scenario {scenario!r}: expected a or b")
    rng = random.Random(f"{seed}\x00{item.id}")
    while True:
        order = list(identity)
        rng.shuffle(order)
        if tuple(order) != identity:
            return tuple(order)


def training_text(item: MCQItem, template: PromptTemplate, order: tuple[int, ...]) -> str:
    """Plain training text of an item: the scored prefix followed by the option block."""
    return template.prefix(item) + template.continuation(item, order)
