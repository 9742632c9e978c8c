"""Items that share one option list in one order: one draw of the published order, not several.

The dataset tests of :mod:`.stats` take each item's published order as an independent uniform
draw from its orders. Items with different questions but the same options in the same order
(MMLU's "Yes / No / Maybe" lists, a writer's four answer choices reused over a page of questions)
break that: their published orders are one choice, repeated, and a model's preference for one
arrangement of those options shows in every item of the group at once. Counted as independent,
five such items on a random-weight model gave a gap-test p of 0.00045.

The null hypothesis that still holds for such a group, and what the tests here use: *the group's
one published arrangement is a uniform draw from the orders, the same draw for every item of the
group*, independently across groups and items that share nothing. Each group's joint null
distribution is then known exactly by relabelling all of its items' orders at once: the ``N``
aligned columns of its log-probs, each with probability ``1/N``. A group of one is the usual
item-level null.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from contamscope.data.items import same_text
from contamscope.detectors.permutation import gap_values

__all__ = [
    "SHARED_NULL",
    "SharedOrders",
    "count_sf",
    "group_count_pmf",
    "shared_orders",
]

SHARED_NULL = (
    "items with the same options in the same published order count as one draw of that order: "
    "under H0 the group's arrangement is a uniform draw, the same for all of its items"
)
"""What the dataset tests assume of items that share one option list in one order."""

_EPS = 1e-9


@dataclass(frozen=True)
class SharedOrders:
    """Items that share one option list in one published order."""

    members: tuple[int, ...]
    """Indices, into the items summarised, of the group's items relabelled together (two or
    more, unless others of the list are ``left_out``)."""
    logprobs: NDArray[np.float64]
    """One row per member, one column per order, the columns aligned (the same arrangement of
    the shared options in every row); column 0 is the published order."""
    left_out: tuple[int, ...] = ()
    """Indices of items of the group scored under other orders than ``members`` (Monte Carlo
    samples drawn per item), which cannot be relabelled with them: left out of the dataset
    tests, their counts and rates too."""

    def gap_null(self) -> NDArray[np.float64]:
        """The group's summed gap under each relabelling (index 0: observed)."""
        return np.sum([np.asarray(gap_values(row)) for row in self.logprobs], axis=0)

    def max_indicators(self) -> NDArray[np.bool_]:
        """Per member and column, whether that column is the member's maximum."""
        lp = self.logprobs
        return lp == lp.max(axis=1, keepdims=True)

    def unique_max(self) -> NDArray[np.bool_]:
        """Per member, whether its maximum is attained by one order only."""
        return np.asarray(self.max_indicators().sum(axis=1) == 1)

    def rank_indicators(self, alpha: float) -> NDArray[np.bool_]:
        """Per member and column, whether that column, as the original, has rank p <= alpha
        (:func:`~contamscope.detectors.permutation.rank_p_value`: ties count against)."""
        lp = self.logprobs
        n = lp.shape[1]
        p = (lp[:, None, :] >= lp[:, :, None]).sum(axis=2) / n
        return np.asarray(p <= alpha + _EPS)


def group_count_pmf(indicators: NDArray[np.bool_]) -> NDArray[np.float64]:
    """The pmf of a group's count (how many members fire) when one column, drawn uniformly,
    is the group's original: ``indicators`` has one row per member, one column per order.

    >>> group_count_pmf(np.array([[True, False, False], [True, False, True]]))
    array([0.33333333, 0.33333333, 0.33333333])
    """
    counts = np.asarray(indicators, dtype=bool).sum(axis=0)
    n_members = int(np.asarray(indicators).shape[0])
    return np.bincount(counts, minlength=n_members + 1).astype(np.float64) / counts.size


def count_sf(k: int, single: NDArray[np.float64], groups: Sequence[NDArray[np.float64]]) -> float:
    """``P(X >= k)`` for ``X`` the sum of independent Bernoulli(``single[i]``) and independent
    group counts with pmfs ``groups`` (exact, by convolution; all terms non-negative).

    >>> round(count_sf(1, np.array([0.5]), [np.array([0.5, 0.0, 0.5])]), 6)
    0.75
    """
    from contamscope.detectors.stats import _poisson_binomial_pmf, convolve_all

    inner = single[(single > 0.0) & (single < 1.0)]
    sure = int(np.count_nonzero(single >= 1.0))
    pmf = convolve_all(
        [_poisson_binomial_pmf(inner)] + [np.asarray(g, dtype=np.float64) for g in groups]
    )
    rest = k - sure
    if rest <= 0:
        return 1.0
    return float(min(1.0, max(0.0, pmf[rest:].sum()))) if rest < pmf.size else 0.0


def shared_orders(
    records: Sequence[Mapping[str, Any]], options: Mapping[str, Sequence[str]]
) -> list[SharedOrders]:
    """The groups of ``records`` (permutation records with their ``orders`` and ``logprobs``)
    whose items have the same options in the same published order (as
    :func:`~contamscope.data.items.same_text` reads them; ``options``: each item's options by
    id). Records whose id has no options are never grouped.

    >>> recs = [{"id": i, "orders": [[0, 1], [1, 0]], "logprobs": [-1.0, -2.0]} for i in "abc"]
    >>> [g.members for g in shared_orders(recs, {"a": ["x", "y"], "b": ["x ", "Y"], "c": ["y", "x"]})]
    [(0, 1)]
    """
    by_key: dict[tuple[str, ...], list[int]] = {}
    for i, r in enumerate(records):
        opts = options.get(str(r.get("id")))
        if opts is None or not r.get("logprobs"):
            continue
        by_key.setdefault(tuple(same_text(o) for o in opts), []).append(i)
    out: list[SharedOrders] = []
    for members in by_key.values():
        if len(members) < 2:
            continue
        # the members scored under one set of orders are relabelled together: the largest
        # such set (all of them, unless Monte Carlo orders were drawn per item)
        sets: dict[frozenset[tuple[int, ...]], list[int]] = {}
        for i in members:
            sets.setdefault(frozenset(tuple(o) for o in records[i]["orders"]), []).append(i)
        joint = max(sets.values(), key=len)
        left = tuple(i for i in members if i not in joint)
        first = [tuple(o) for o in records[joint[0]]["orders"]]
        rows = []
        for i in joint:
            column = {tuple(o): j for j, o in enumerate(records[i]["orders"])}
            lp = records[i]["logprobs"]
            rows.append([float(lp[column[o]]) for o in first])
        out.append(SharedOrders(tuple(joint), np.array(rows, dtype=np.float64), left))
    return out
