"""Order and text familiarity together: the reference-calibrated combined test.

A model that saw a multiple-choice item in training tends to show two things: it prefers the
published option order to the other orders (the permutation gap: the original order's log-prob
minus the mean of the other orders', :func:`~.permutation.gap`), and it finds the item's text
more predictable than comparable unseen text (Min-K%++, :mod:`.membership`). The two signals
come from different parts of the model's behaviour and have largely independent noise, so their
combination detects a single exposure that neither detects reliably alone (docs/methods.md gives
the measured power).

Combination by pooled ranks, with no assumption about the scale or shape of either statistic.
For a benchmark item ``x`` with statistics ``x_1 .. x_C`` and reference items ``r_1 .. r_R``
(texts the model cannot have seen), pool ``P = {x, r_1, .., r_R}``; each member's combined score
is the sum over statistics of its rank within ``P`` (ties: average ranks):

    T(z) = sum_c rank_c(z; P),      p(x) = #{z in P : T(z) >= T(x)} / (R + 1).

    H0 (item): x's statistics vector is exchangeable with the references' (the model is no more
    familiar with the item, in order or in text, than with items it never saw).

``T`` is a symmetric function of the pool, so under H0 the rank of ``T(x)`` among the ``R + 1``
values is uniform and ``P(p <= alpha) <= alpha`` (a "full conformal" p-value). Dataset level,
``T`` is computed over the pool of all benchmark and reference items (again symmetric), so under
"benchmark and reference vectors come from one distribution" the labels are exchangeable and the
one-sided Mann-Whitney test of benchmark vs reference scores is valid. Pure numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import rankdata

from ..errors import ConfigError
from .membership import MembershipResult, MembershipTest, benjamini_hochberg, mann_whitney

__all__ = [
    "COMBINED_COMPONENTS",
    "COMBINED_NULL",
    "CombinedTest",
    "CombinedResult",
    "pooled_rank_p_values",
    "pooled_rank_scores",
]

COMBINED_COMPONENTS = ("gap", "min_k_pp")
"""The statistics the combined test ranks: the permutation gap and Min-K%++."""

COMBINED_NULL = (
    "H0 (per item): the item's (permutation gap, Min-K%++) pair is exchangeable with the "
    "reference items' pairs (the model is no more familiar with the item's option order or text "
    "than with items it cannot have seen)"
)


def _matrix(values: Sequence[Sequence[float]] | NDArray[Any], what: str) -> NDArray[np.float64]:
    m = np.asarray(values, dtype=np.float64)
    if m.ndim == 1:
        m = m[:, None]
    if m.ndim != 2 or not np.isfinite(m).all():
        raise ValueError(f"{what}: expected finite rows of statistics")
    return m


def pooled_rank_p_values(
    benchmark: Sequence[Sequence[float]] | NDArray[Any],
    reference: Sequence[Sequence[float]] | NDArray[Any],
    chunk: int = 256,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Full-conformal p-value of each benchmark row against the reference rows, and its combined
    score ``T(x) / (C (R + 1))`` (in (0, 1]; comparable across items, which share the references).

    >>> p, t = pooled_rank_p_values([[5.0, 5.0], [0.5, 0.5]], [[0, 0], [1, 1], [2, 2], [3, 3]])
    >>> p.tolist(), t.tolist()
    ([0.2, 0.8], [1.0, 0.4])
    """
    x = _matrix(benchmark, "benchmark")
    r = _matrix(reference, "reference")
    if r.shape[0] == 0:
        raise ConfigError("the reference set is empty: no p-values can be computed")
    if x.shape[1] != r.shape[1]:
        raise ValueError("benchmark and reference rows need the same statistics")
    n_ref, n_stat = r.shape
    base = np.stack([rankdata(r[:, c]) for c in range(n_stat)], axis=1)  # ranks among refs
    ref_sorted = np.sort(r, axis=0)
    p = np.empty(x.shape[0])
    t = np.empty(x.shape[0])
    for s in range(0, x.shape[0], chunk):
        xs = x[s : s + chunk]
        # the item's rank in its pool: 1 + #{r < x} + #{r == x} / 2
        rank_x = np.zeros(xs.shape[0])
        for c in range(n_stat):
            lo = np.searchsorted(ref_sorted[:, c], xs[:, c], side="left")
            hi = np.searchsorted(ref_sorted[:, c], xs[:, c], side="right")
            rank_x += 1 + (lo + hi) / 2
        # each reference's rank in the pool: its rank among the references, +1 if x is below
        # it, +1/2 if x ties it
        rank_r = base.sum(axis=1)[None, :] + (
            (xs[:, None, :] < r[None, :, :]) + 0.5 * (xs[:, None, :] == r[None, :, :])
        ).sum(axis=2)
        p[s : s + chunk] = (1 + (rank_r >= rank_x[:, None] - 1e-9).sum(axis=1)) / (n_ref + 1)
        t[s : s + chunk] = rank_x / (n_stat * (n_ref + 1))
    return p, t


def pooled_rank_scores(
    benchmark: Sequence[Sequence[float]] | NDArray[Any],
    reference: Sequence[Sequence[float]] | NDArray[Any],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Combined scores ``T`` (sum of ranks) of every row in the pool of all benchmark and
    reference rows, split back into the two sets (for the dataset-level test)."""
    x = _matrix(benchmark, "benchmark")
    r = _matrix(reference, "reference")
    pool = np.vstack([x, r])
    total = sum(rankdata(pool[:, c]) for c in range(pool.shape[1]))
    return total[: x.shape[0]], total[x.shape[0] :]


@dataclass(frozen=True)
class CombinedResult(MembershipResult):
    """Per-item p-values, flags and the dataset-level test (as a membership result), and each
    item's combined score."""

    scores: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    """Each item's combined score in its own pool (higher = more familiar)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "null_hypothesis": COMBINED_NULL,
            "components": list(COMBINED_COMPONENTS),
            "p_value": "full conformal on pooled ranks: #{z in pool: T(z) >= T(x)} / (R + 1), "
            "T = sum of the item's ranks among itself and the references",
            "dataset_test": {
                **self.dataset.to_dict(),
                "statistic": "combined score T over the pool of all benchmark and reference items",
            },
        }


@dataclass(frozen=True)
class CombinedTest(MembershipTest):
    """The reference-calibrated combined test (settings as :class:`MembershipTest`; ``score`` takes
    one row of component statistics per item).

    >>> ref = [[float(i), float(-i)] for i in range(40)]
    >>> r = CombinedTest(alpha=0.05, n_boot=200).score([[99.0, 99.0], [20.0, -20.0]], ref)
    >>> r.flags.tolist(), round(float(r.p_values[0]), 4)
    ([True, False], 0.0244)
    """

    def score(
        self, benchmark: Sequence[Any] | NDArray[Any], reference: Sequence[Any] | NDArray[Any]
    ) -> CombinedResult:
        """Test every benchmark row (one value per component) against the reference rows."""
        p, t = pooled_rank_p_values(benchmark, reference)
        q = benjamini_hochberg(p) if self.fdr else None
        flags = (q if q is not None else p) <= self.alpha + 1e-12
        tb, tr = pooled_rank_scores(benchmark, reference)
        dataset = mann_whitney(tb, tr, n_boot=self.n_boot, seed=self.seed)
        n_ref = int(np.asarray(reference, dtype=np.float64).shape[0])
        return CombinedResult(p, q, flags, self.alpha, self.fdr, n_ref, dataset, scores=t)
