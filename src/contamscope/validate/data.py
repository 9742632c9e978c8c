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
from typing import Any, Literal

from ..data.items import MCQItem
from ..errors import ConfigError
from ..perturb import PromptTemplate
from ..perturb.exchangeability import non_exchangeable_reason
from ..wording import plural

__all__ = [
    "Scenario",
    "Split",
    "option_set_key",
    "draw_reference",
    "split_items",
    "training_order",
    "training_text",
]

Scenario = Literal["a", "b"]
"""``a``: trained in the original option order; ``b``: in a random order per item."""


@dataclass(frozen=True)
class Split:
    """The evaluated items and their ground truth."""

    items: tuple[Any, ...]
    """All evaluated items, in benchmark order (``MCQItem`` or ``QAItem``)."""
    leaked: tuple[Any, ...]
    """The part written into the training data."""
    clean: tuple[Any, ...]
    """The part never trained on."""

    @property
    def leaked_ids(self) -> set[str]:
        return {it.id for it in self.leaked}


def option_set_key(item: Any) -> tuple[str, ...] | None:
    """The normalised option set of a multiple-choice item (None for items without options).

    Case, surrounding and repeated whitespace and the order of the options are ignored, so two
    items whose option blocks hold the same texts get the same key.

    >>> from contamscope.data.items import MCQItem
    >>> a = MCQItem(id="a", question="?", options=("Wrong, Wrong", "Not wrong,  wrong"), answer=0)
    >>> b = MCQItem(id="b", question="!", options=("not wrong, wrong", "Wrong, Wrong"), answer=1)
    >>> option_set_key(a) == option_set_key(b)
    True
    """
    options = getattr(item, "options", None)
    if not options:
        return None
    return tuple(sorted(" ".join(str(o).split()).casefold() for o in options))


def split_items(
    items: Sequence[Any],
    n_items: int,
    *,
    seed: int = 0,
    include_non_exchangeable: bool = False,
) -> Split:
    """Draw ``n_items`` items with ``seed`` and split them in half (one half may get the extra
    item).

    Items whose options refer to each other ('All of the above') are left out of the draw unless
    ``include_non_exchangeable``, since the permutation pipeline would exclude them. Drawn items
    that share an identical option set (MMLU ``moral_scenarios``: the same four-option block for
    every question) are one unit: the whole group is leaked or the whole group is clean, since
    training on one of them teaches the others' option order. The groups are put in a seeded
    random order, the shortest run of them from the start that holds half of the items is one
    half and the rest the other, and a seeded coin says which half is leaked: every group is
    leaked with probability 1/2 whatever its size. (Groups used to be ordered by their first
    member in a shuffled list, which puts large groups first: MMLU's moral_scenarios block was
    leaked in 289 of 300 draws of 100 items, and so were most naturally ordered items, which
    lowered the clean half's false-positive rates.) With large groups the halves can be
    unequal. Items without options (QA) are each their own unit.

    >>> from contamscope.data.items import MCQItem
    >>> its = [MCQItem(id=f"q{i}", question="?", options=(f"x{i}", "y"), answer=0) for i in range(10)]
    >>> s = split_items(its, 6, seed=1)
    >>> len(s.items), len(s.leaked), len(s.clean), s.leaked_ids.isdisjoint(c.id for c in s.clean)
    (6, 3, 3, True)
    >>> its += [MCQItem(id=f"m{i}", question="?", options=("Wrong", "Not wrong"), answer=0)
    ...         for i in range(6)]
    >>> s = split_items(its, 16, seed=0)
    >>> leaked_m = {it.id for it in s.leaked if it.id.startswith("m")}
    >>> leaked_m in (set(), {f"m{i}" for i in range(6)})  # the shared block stays together
    True
    """
    if n_items < 2:
        raise ConfigError("--n-items must be at least 2 (one leaked, one clean)")
    pool = [
        it
        for it in items
        if include_non_exchangeable
        or not getattr(it, "options", None)
        or non_exchangeable_reason(it.options) is None
    ]
    if len(pool) < n_items:
        raise ConfigError(
            f"--n-items {n_items}: only {len(pool)} usable items in the benchmark"
            + (
                f" ({plural(len(items) - len(pool), 'non-exchangeable item')} left out)"
                if len(pool) < len(items)
                else ""
            )
        )
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(len(pool)), n_items))
    picked = [pool[i] for i in chosen]
    shuffled = picked[:]
    rng.shuffle(shuffled)
    half = (n_items + 1) // 2
    groups: dict[Any, list[Any]] = {}
    for it in shuffled:
        key = option_set_key(it)
        groups.setdefault(("options", key) if key is not None else ("id", it.id), []).append(it)
    units = list(groups.values())
    rng.shuffle(units)  # a uniform order of the groups, not size-biased
    first: set[str] = set()
    for members in units:
        if len(first) >= half:
            break
        first.update(it.id for it in members)
    if len(first) == n_items:
        raise ConfigError(
            f"--n-items {n_items}: the drawn items share one option set, so none is left clean"
        )
    leaked_ids = first if rng.random() < 0.5 else {it.id for it in picked} - first
    return Split(
        items=tuple(picked),
        leaked=tuple(it for it in picked if it.id in leaked_ids),
        clean=tuple(it for it in picked if it.id not in leaked_ids),
    )


def draw_reference(
    items: Sequence[Any],
    split: Split,
    k: int | None,
    *,
    seed: int = 0,
    include_non_exchangeable: bool = False,
) -> tuple[Any, ...]:
    """``k`` reference items for the membership test: never trained on, not evaluated, and not
    sharing an option set with any evaluated item (training on a shared block would make them
    familiar). They stand for items the model cannot have seen (written after its cut-off); drawn
    with their own seed stream, so the evaluated split does not depend on ``k``. ``k=None``
    returns every candidate.

    >>> from contamscope.data.items import MCQItem
    >>> its = [MCQItem(id=f"q{i}", question="?", options=(f"x{i}", "y"), answer=0) for i in range(20)]
    >>> s = split_items(its, 6, seed=1)
    >>> ref = draw_reference(its, s, 5, seed=1)
    >>> len(ref), {r.id for r in ref}.isdisjoint(it.id for it in s.items)
    (5, True)
    """
    if k is not None and k <= 0:
        return ()
    taken = {it.id for it in split.items}
    keys = {option_set_key(it) for it in split.items} - {None}
    pool = [
        it
        for it in items
        if it.id not in taken
        and option_set_key(it) not in keys
        and (
            include_non_exchangeable
            or not getattr(it, "options", None)
            or non_exchangeable_reason(it.options) is None
        )
    ]
    if k is None:
        return tuple(pool)
    if len(pool) < k:
        raise ConfigError(
            f"--reference-items {k}: only {len(pool)} items are left outside the evaluated ones"
        )
    rng = random.Random(f"reference:{seed}")
    return tuple(pool[i] for i in sorted(rng.sample(range(len(pool)), k)))


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
