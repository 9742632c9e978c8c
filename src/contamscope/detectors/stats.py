"""Dataset-level statistics of the permutation method, from per-item :class:`PermutationItemScore`.

Every test here has the same null hypothesis H0: *for every item, the original order of the
options is exchangeable with the other scored orders* -- the model has no preference for the
published order, so the original's log-prob is a uniformly random draw from the item's ``N``
values, independently across items (items that share one option list in one order are one
draw, relabelled together: :mod:`.shared`). Conditional on the values, the null distribution of every
item-level verdict is then known exactly, which is what the tests below use.
See ``docs/statistics.md`` for the reasoning and the false-positive rate of every threshold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from contamscope.detectors.permutation import PermutationItemScore, delta_key
from contamscope.detectors.shared import SHARED_NULL, SharedOrders, count_sf, group_count_pmf

if TYPE_CHECKING:
    from types import ModuleType

__all__ = [
    "Alg1Summary",
    "Alg2DeltaSummary",
    "GapTest",
    "PermutationSummary",
    "RankSummary",
    "REFERENCE_NULL",
    "UNANCHORED_NULL_NOTE",
    "alg2_against_reference",
    "poisson_binomial_sf",
    "in_own_order",
    "usable_keys",
    "randomization_p",
    "randomization_test",
    "summarize",
    "wilson_interval",
    "exact_interval",
    "cluster_ci",
    "clustered_interval",
    "expanded_tail",
    "tail_draws",
]

UNANCHORED_NULL_NOTE = (
    "The paper's Algorithm-2 flag ignores which order is the original, so relabelling the orders "
    "cannot give its rate under 'not leaked': it is the same function of the item's values whether "
    "or not the item leaked. Its false-positive rate can only be measured on items known to be "
    "clean (e.g. freshly written questions); compare with that rate, not with 0."
)

_EPS = 1e-9  # tolerance for p <= alpha and floor(alpha * N) with floats

_Shared = Sequence[SharedOrders]

SHARED_INTERVALS = (
    "each shared list one cluster: the rates' intervals are Korn and Graubard's Clopper-Pearson "
    "on the effective number of items, the mean gap's a cluster-robust (CR2) t interval, both "
    "with Satterthwaite's degrees of freedom"
)
"""How the intervals count items that share one option list (summary.json's
``shared_orders.intervals``)."""


# --------------------------------------------------------------------------- helpers


def _sps() -> ModuleType:
    """scipy.stats, imported when first needed (0.6 s: commands that print no statistic, such
    as ``--help``, start without it)."""
    from scipy import stats

    return stats


def _check_proportion(k: int, n: int, conf: float) -> None:
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    if not 0 <= k <= n:
        raise ValueError(f"k must be in [0, n], got k={k}, n={n}")
    if not 0.0 < conf < 1.0:
        raise ValueError(f"conf must be in (0, 1), got {conf}")


def exact_interval(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson ("exact") interval for a binomial proportion ``k / n``: it inverts the
    exact binomial test, so it covers at least ``conf`` at every ``n`` and agrees with this
    module's exact p-values (a Wilson interval of 1 flag in 4 items excluded chance 1/24 while
    the exact p was 0.16).

    >>> lo, hi = exact_interval(1, 4)
    >>> round(lo, 4), round(hi, 4)
    (0.0063, 0.8059)
    >>> exact_interval(0, 24)[0], exact_interval(3, 3)[1]
    (0.0, 1.0)
    """
    _check_proportion(k, n, conf)
    tail = (1.0 - conf) / 2.0
    lo = 0.0 if k == 0 else float(_sps().beta.ppf(tail, k, n - k + 1))
    hi = 1.0 if k == n else float(_sps().beta.ppf(1.0 - tail, k + 1, n - k))
    return lo, hi


def wilson_interval(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``k / n``.

    >>> lo, hi = wilson_interval(5, 100)
    >>> round(lo, 4), round(hi, 4)
    (0.0215, 0.1118)
    >>> wilson_interval(0, 24)[0], wilson_interval(3, 3)[1]
    (0.0, 1.0)
    """
    _check_proportion(k, n, conf)
    z = float(_sps().norm.ppf(0.5 + conf / 2.0))
    phat = k / n
    denom = 1.0 + z * z / n
    centre = (phat + z * z / (2 * n)) / denom
    half = z * math.sqrt(phat * (1.0 - phat) / n + z * z / (4 * n * n)) / denom
    # the ends are exactly 0 at k = 0 and 1 at k = n (rounding would leave 5e-17 above the
    # estimate, an interval that does not contain it)
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def expanded_tail(n: int, level: float = 0.95) -> float:
    """The tail probability of the *expanded* bootstrap percentile interval (Hesterberg 2015):
    ``Phi(-sqrt(n / (n - 1)) * t_{n-1, (1 - level) / 2})``. The plain percentile interval of a
    mean over ``n`` items is too narrow by about ``sqrt((n - 1) / n)`` and by using the normal's
    quantile for Student's t; with few items it missed the truth far more than 5% of the time
    (benchmarks/benbench_null.py). Tends to ``(1 - level) / 2`` as ``n`` grows.

    >>> round(expanded_tail(100), 4), round(expanded_tail(5), 5)
    (0.0231, 0.00095)
    """
    t = _sps().t.ppf(1 - (1 - level) / 2, n - 1)
    return float(_sps().norm.sf(math.sqrt(n / (n - 1)) * t))


TAIL_DRAWS = 25
"""Bootstrap resamples an expanded interval keeps beyond each of its ends, at least, when the
cap allows: its end is then an order statistic with 25 beyond it, not the 2nd of 2,000 (at 5
items the tail is 0.00095: a 7-item CAP run's lower end moved by 0.022 between seeds). The
default 2,000 resamples already hold 25 from about 14 items on (26 at 15 items, 50 at many)."""

MAX_DRAWS = 200_000
"""The most resamples :func:`tail_draws` asks for (at 4 items, 0.00012 a tail: 24 beyond it)."""

_DRAWN_ENTRIES = 20_000_000
"""...and at most this many resampled item indices in all (a 5-item split beside one of
1,000 items: 20,000 resamples, not 52,000)."""


def tail_draws(n_boot: int, tail: float, items: int = 1) -> int:
    """How many bootstrap resamples an interval whose ends are the ``tail`` and ``1 - tail``
    quantiles takes: ``n_boot``, or more, so that :data:`TAIL_DRAWS` fall beyond each end,
    capped at :data:`MAX_DRAWS` and at :data:`_DRAWN_ENTRIES` / ``items`` (the items one
    resample draws, all samples together). Deterministic: a re-analysis draws the same.

    >>> tail_draws(2000, expanded_tail(100)), tail_draws(2000, expanded_tail(5))
    (2000, 26203)
    >>> tail_draws(2000, expanded_tail(5), items=1005), tail_draws(2000, expanded_tail(4))
    (19900, 200000)
    """
    if not tail > 0:
        return n_boot
    wanted = math.ceil(TAIL_DRAWS / tail)
    return max(n_boot, min(wanted, MAX_DRAWS, _DRAWN_ENTRIES // max(1, items)))


def _cluster_variance(
    x: NDArray[np.float64], units: Sequence[Sequence[int]]
) -> tuple[float, float]:
    """(variance of the mean of ``x``, its degrees of freedom) when the items of a unit of
    ``units`` (indices, every item in one) are not independent: the bias-reduced cluster-robust
    variance (CR2, Bell and McCaffrey 2002; for a mean, each unit's summed residual squared
    over ``1 - m_c / n``, summed, over ``n^2``) and Satterthwaite's degrees of freedom under
    independence, ``n^2 / sum(m_c^2) - 1``, at least 1. With every unit one item: the sample
    variance over ``n`` and ``n - 1``. CR1 with ``G - 1`` degrees of freedom covered 0.56-0.82
    where one unit holds most items (simulated; a review)."""
    n = x.size
    m = float(x.mean())
    sizes = np.array([len(u) for u in units], dtype=np.float64)
    sums = np.array([float((x[list(u)] - m).sum()) for u in units], dtype=np.float64)
    var = float((sums**2 / (1.0 - sizes / n)).sum()) / n**2
    return var, max(1.0, n**2 / float((sizes**2).sum()) - 1.0)


def cluster_ci(d: NDArray[np.float64], units: Sequence[Sequence[int]]) -> list[float] | None:
    """Two-sided 95% interval of the mean of ``d`` when the items of a unit of ``units`` are
    not independent: a t interval with :func:`_cluster_variance`'s variance (CR2) and degrees
    of freedom, the variance taken as at least the one counting items as independent (grouping
    never narrows the interval); None with fewer than 2 units or no variance. Approximate, as
    the t intervals are (simulated coverage in docs/statistics.md); with every unit one item it
    is the t interval.

    >>> [round(x, 3) for x in cluster_ci(np.array([1.0, 1.0, 0.0, 2.0]), [[0, 1], [2], [3]])]
    [-1.14, 3.14]
    """
    n, g = d.size, len(units)
    if g < 2:
        return None
    var, df = _cluster_variance(d, units)
    if not var > 0:
        return None
    if g < n:  # grouping never narrows the interval (as clustered_interval's deff >= 1)
        var = max(var, float(d.var(ddof=1)) / n)
    half = float(_sps().t.ppf(0.975, df)) * math.sqrt(var)
    m = float(d.mean())
    return [m - half, m + half]


def clustered_interval(
    flags: Sequence[bool] | NDArray[Any], units: Sequence[Sequence[int]], conf: float = 0.95
) -> tuple[float, float]:
    """Interval of the share of ``flags`` that are true when the items of a unit of ``units``
    (indices, every item in one) are not independent: Korn and Graubard's (1998) Clopper-Pearson
    interval on an effective number of items, ``n / deff`` times ``(t_{n-1} / t_{df})^2``,
    where the design effect ``deff`` is the cluster-robust variance of the share
    (:func:`_cluster_variance`, whose degrees of freedom ``df`` are) over the variance counting
    items as independent, taken as at least 1 so that grouping never narrows the interval. Where no item or every item is
    flagged there is no variance to measure ``deff`` by, and the effective number is G (each
    unit one item). With every unit one item it is :func:`exact_interval`; with one unit (every
    item one draw) it is [0, 1]. Approximate where units hold several items, as any interval
    from a few units is (simulated coverage in docs/statistics.md).

    >>> clustered_interval([1, 0, 0, 0], [[0], [1], [2], [3]]) == exact_interval(1, 4)
    True
    >>> [round(x, 3) for x in clustered_interval([1, 1, 1, 0, 0, 0, 0, 0], [[0, 1, 2], [3], [4], [5], [6], [7]])]
    [0.002, 0.979]
    >>> [round(x, 3) for x in exact_interval(3, 8)]
    [0.085, 0.755]
    """
    y = np.asarray(flags, dtype=np.float64)
    n, g = int(y.size), len(units)
    k = int(round(float(y.sum())))
    if g == n:  # no unit holds two items
        return exact_interval(k, n, conf)
    _check_proportion(k, n, conf)
    if g < 2:
        return 0.0, 1.0
    p = k / n
    tail = (1.0 - conf) / 2.0
    if 0 < k < n:
        grouped, df = _cluster_variance(y, units)
        deff = max(1.0, grouped / (p * (1.0 - p) / (n - 1)))
        df_ratio = float(_sps().t.ppf(1.0 - tail, n - 1) / _sps().t.ppf(1.0 - tail, df)) ** 2
        m = n / deff * df_ratio
    else:  # no variance to measure the design effect by: each unit counts as one item
        m = float(g)
    x = p * m
    lo = 0.0 if k == 0 else float(_sps().beta.ppf(tail, x, m - x + 1))
    hi = 1.0 if k == n else float(_sps().beta.ppf(1.0 - tail, x + 1, m - x))
    return lo, hi


def _poisson_binomial_pmf(probs: NDArray[np.float64]) -> NDArray[np.float64]:
    """Exact pmf of a sum of independent Bernoulli(p_i), by grouped exact convolution.

    Equal probabilities are grouped into binomial pmfs (usually only a handful of distinct values:
    ``1/24``, ``1/120``, 0 ...); the groups are then convolved pairwise in a balanced tree. All
    terms are non-negative, so tails keep full relative precision (no FFT).
    """
    values, counts = np.unique(probs, return_counts=True)
    pmfs: list[NDArray[np.float64]] = [
        np.array([1.0 - v, v])
        if c == 1
        else np.asarray(_sps().binom.pmf(np.arange(c + 1), c, v), dtype=np.float64)
        for v, c in zip(values.tolist(), counts.tolist(), strict=True)
    ]
    return convolve_all(pmfs)


def convolve_all(pmfs: list[NDArray[np.float64]]) -> NDArray[np.float64]:
    """The pmf of a sum of independent counts with pmfs ``pmfs`` (each indexed from 0),
    convolved pairwise in a balanced tree, shortest first; all terms are non-negative, so tails
    keep full relative precision (no FFT). No pmf: the sum is 0."""
    if not pmfs:
        return np.ones(1)
    while len(pmfs) > 1:
        pmfs.sort(key=len)
        merged = [np.convolve(pmfs[i], pmfs[i + 1]) for i in range(0, len(pmfs) - 1, 2)]
        if len(pmfs) % 2:
            merged.append(pmfs[-1])
        pmfs = merged
    return np.clip(pmfs[0], 0.0, None)


def poisson_binomial_sf(k: int, probs: Sequence[float] | NDArray[Any]) -> float:
    """``P(X >= k)`` for ``X`` a sum of independent Bernoulli(``probs[i]``) (exact).

    Handles 15,000 items in milliseconds when the probabilities take few distinct values, and in
    well under a second in the worst case (all distinct).

    >>> round(poisson_binomial_sf(1, [0.5, 0.5]), 6)
    0.75
    """
    p = np.asarray(probs, dtype=np.float64).ravel()
    if p.size and (np.any(p < 0.0) or np.any(p > 1.0) or not np.all(np.isfinite(p))):
        raise ValueError("probabilities must lie in [0, 1]")
    n_sure = int(np.count_nonzero(p == 1.0))
    p = p[(p > 0.0) & (p < 1.0)]
    k_rest = k - n_sure
    if k_rest <= 0:
        return 1.0
    if k_rest > p.size:
        return 0.0
    pmf = _poisson_binomial_pmf(p)
    return float(min(1.0, max(0.0, pmf[k_rest:].sum())))


def _binomial_or_pb_sf(k: int, probs: NDArray[np.float64]) -> float:
    """One-sided (greater) p-value of count ``k``: binomtest when all ``probs`` are equal."""
    if probs.size and np.all(probs == probs[0]) and 0.0 < probs[0] < 1.0:
        return float(
            _sps().binomtest(k, int(probs.size), float(probs[0]), alternative="greater").pvalue
        )
    return poisson_binomial_sf(k, probs)


def _none_if_nan(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)


# --------------------------------------------------------------------------- result types


@dataclass(frozen=True)
class Alg1Summary:
    """Algorithm 1 over a dataset: observed rate of "leaked" vs the rate under H0."""

    count: int
    """Items Algorithm 1 calls leaked."""
    rate: float
    """``count / n_items`` (the paper's leaderboard number)."""
    rate_ci: tuple[float, float]
    """Clopper-Pearson 95% interval of ``rate`` (:func:`exact_interval`); with items sharing
    one option list, Korn and Graubard's on the effective number of items
    (:func:`clustered_interval`)."""
    chance: float
    """Mean of ``1/N_i``: the paper's reference level (1/24 for four options, all orders).

    Under H0 the probability that the original is the UNIQUE maximum is at most ``1/N_i``
    (exactly ``1/N_i`` when the maximum is untied)."""
    null_expected: float
    """Mean of the exact per-item null probabilities ``alg1_null`` (equals ``chance`` without ties
    for ``ties='not_leaked'``; differs when maxima are tied)."""
    p_value: float
    """One-sided P(count >= observed | H0), exact: binomial test when every item has the same null
    probability, Poisson-binomial otherwise."""
    excess: float
    """``rate - null_expected``: share of items flagged beyond chance."""
    excess_ci: tuple[float, float]
    """``rate_ci`` minus ``null_expected``."""


@dataclass(frozen=True)
class RankSummary:
    """Calibrated rank test: the permutation p-values of the original order."""

    alpha: float
    """Item-level significance level used for ``count``."""
    mean_p_value: float
    """Mean of the item p-values."""
    mean_p_value_null: float
    """Mean p-value expected under H0 without ties, ``mean((N_i + 1) / (2 N_i))`` (about 0.52)."""
    count: int
    """Items with ``p_value <= alpha``."""
    rate: float
    """``count / n_items``."""
    rate_ci: tuple[float, float]
    """95% interval of ``rate``, as :attr:`Alg1Summary.rate_ci`."""
    expected: float
    """Rate expected under H0: mean of ``floor(alpha * N_i) / N_i`` (exact without ties, an upper
    bound with ties). For 24 orders and alpha=0.05 this is 1/24, not 0.05."""
    p_value: float
    """One-sided P(count >= observed | H0): binomial / Poisson-binomial with the per-item levels."""


@dataclass(frozen=True)
class GapTest:
    """Combined test that the original order is systematically favoured: is the mean gap
    (original minus mean of other orders) above 0? A randomization test, or a one-sided t-test
    for records without their log-probs (see :func:`_gap_test`)."""

    n: int
    """Items used."""
    mean: float | None
    """Mean gap (nats)."""
    ci: tuple[float, float] | None
    """Two-sided 95% t interval of the mean gap (cluster-robust, :func:`cluster_ci`, with items
    sharing one option list): approximate, it covers less than 95% with few items or
    long-tailed log-probs (the p-value is exact); None for one item or identical gaps."""
    t: float | None
    """t statistic."""
    p_value: float | None
    """One-sided p-value (alternative: mean gap > 0); None when undefined (see ``reason``)."""
    reason: str | None = None
    """Why the test is undefined, when it is (only the t-test can be)."""
    method: str = "t-test"
    """How ``p_value`` was computed: ``t-test``, ``randomization (exact)`` or
    ``randomization (Monte Carlo)``."""
    n_resamples: int | None = None
    """Assignments enumerated (exact) or drawn (Monte Carlo) by the randomization test."""
    null_range: tuple[float, float] | None = None
    """Where the mean gap falls under H0: the central 95% of its randomization distribution
    (None for the t-test). An observed mean above it has p <= 0.025 (exactly so when
    enumerated); this, not ``ci``, is the interval that agrees with ``p_value``."""


@dataclass(frozen=True)
class Alg2DeltaSummary:
    """Algorithm 2 at one threshold ``delta``."""

    delta: float
    """Outlier threshold (flag when the IsolationForest score at the maximum is below it)."""
    n_items: int
    """Items evaluated at this threshold (items whose stored thresholds include ``delta``)."""
    count: int
    """Items flagged by the paper's (unanchored) Algorithm 2."""
    rate: float | None
    """Paper flag rate (the leaderboard number for scenario b)."""
    rate_ci: tuple[float, float] | None
    """95% interval of ``rate``, as :attr:`Alg1Summary.rate_ci`."""
    anchored_count: int
    """Items flagged AND whose maximum is the original order."""
    anchored_rate: float | None
    """``anchored_count / n_items``."""
    anchored_null_expected: float | None
    """Mean of the per-item exact null probabilities of the anchored flag."""
    anchored_p_value: float | None
    """One-sided Poisson-binomial P(anchored count >= observed | H0)."""
    null_rate_note: str = UNANCHORED_NULL_NOTE
    """Why the paper's unanchored rate has no null level from the same items."""


def _pair(x: tuple[float, float] | None) -> list[float] | None:
    return None if x is None else [x[0], x[1]]


@dataclass(frozen=True)
class PermutationSummary:
    """Dataset-level summary of the permutation method (see module docstring for H0)."""

    n_items: int
    """Items summarised."""
    alpha: float
    """Item-level level for the rank-test count."""
    n_exhaustive: int
    """Items scored under all ``n!`` orders (the rest are Monte Carlo)."""
    alg1: Alg1Summary | None
    """Algorithm 1 (None when there are no items)."""
    rank: RankSummary | None
    """Calibrated rank test (None when there are no items)."""
    gap: GapTest | None
    """Mean-gap test (None when there are no items)."""
    alg2: tuple[Alg2DeltaSummary, ...] = field(default_factory=tuple)
    """Algorithm 2, one entry per threshold."""
    shared: dict[str, Any] | None = None
    """Groups of items sharing one option list in one order, counted as one draw each
    (:mod:`.shared`); None when there are none."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (tuples become lists, thresholds keyed as strings like ``"-0.2"``)."""
        out: dict[str, Any] = {
            "n_items": self.n_items,
            "alpha": self.alpha,
            "n_exhaustive": self.n_exhaustive,
            "alg1": None,
            "rank": None,
            "gap": None,
            "alg2": {},
        }
        if self.alg1 is not None:
            a = self.alg1
            out["alg1"] = {
                "count": a.count,
                "rate": a.rate,
                "rate_ci": _pair(a.rate_ci),
                "chance": a.chance,
                "null_expected": a.null_expected,
                "p_value": a.p_value,
                "excess": a.excess,
                "excess_ci": _pair(a.excess_ci),
            }
        if self.rank is not None:
            r = self.rank
            out["rank"] = {
                "alpha": r.alpha,
                "mean_p_value": r.mean_p_value,
                "mean_p_value_null": r.mean_p_value_null,
                "count": r.count,
                "rate": r.rate,
                "rate_ci": _pair(r.rate_ci),
                "expected": r.expected,
                "p_value": r.p_value,
            }
        if self.gap is not None:
            g = self.gap
            out["gap"] = {
                "n": g.n,
                "mean": g.mean,
                "ci": _pair(g.ci),
                "t": g.t,
                "p_value": g.p_value,
                "method": g.method,
                "n_resamples": g.n_resamples,
                "null_range": _pair(g.null_range),
                "reason": g.reason,
            }
        if self.shared is not None:
            out["shared_orders"] = self.shared
        for s in self.alg2:
            out["alg2"][delta_key(s.delta)] = {
                "delta": s.delta,
                "n_items": s.n_items,
                "count": s.count,
                "rate": s.rate,
                "rate_ci": _pair(s.rate_ci),
                "anchored_count": s.anchored_count,
                "anchored_rate": s.anchored_rate,
                "anchored_null_expected": s.anchored_null_expected,
                "anchored_p_value": s.anchored_p_value,
                "null_rate_note": s.null_rate_note,
            }
        return out


# --------------------------------------------------------------------------- the tests


def _grouped_sf(
    k: int,
    probs: NDArray[np.float64],
    shared: _Shared,
    indicators: Callable[[SharedOrders], NDArray[np.bool_]],
) -> float:
    """The count test's p-value: per-item null probabilities ``probs`` for items sharing
    nothing, each group's exact joint count distribution (``indicators``: per member and
    column, whether it fires) for the rest."""
    if not shared:
        return _binomial_or_pb_sf(k, probs)
    grouped = {i for g in shared for i in g.members}
    single = np.array([p for i, p in enumerate(probs) if i not in grouped], dtype=np.float64)
    return count_sf(k, single, [group_count_pmf(indicators(g)) for g in shared])


def _units(n: int, shared: _Shared) -> list[list[int]]:
    """The independent draws among ``n`` items: each group of ``shared`` one, every other item
    one."""
    grouped = {i for g in shared for i in g.members}
    return [list(g.members) for g in shared] + [[i] for i in range(n) if i not in grouped]


def _rate_interval(flags: Sequence[bool], shared: _Shared) -> tuple[float, float]:
    """95% interval of the share of ``flags`` that are true: Clopper-Pearson, or with groups
    in ``shared`` (each one draw) :func:`clustered_interval`."""
    if not shared:
        return exact_interval(int(sum(flags)), len(flags))
    return clustered_interval(np.asarray(flags, dtype=bool), _units(len(flags), shared))


def _alg1_summary(items: Sequence[PermutationItemScore], shared: _Shared = ()) -> Alg1Summary:
    n = len(items)
    k = sum(it.alg1 for it in items)
    null = np.array([it.alg1_null for it in items], dtype=np.float64)
    expected = float(null.mean())
    lo, hi = _rate_interval([it.alg1 for it in items], shared)

    def fires(g: SharedOrders) -> NDArray[np.bool_]:
        # a tied maximum fires only where the item's own null says ties count (ties="leaked")
        ties = np.array([items[i].alg1_null > 0.0 for i in g.members])
        return g.max_indicators() & (g.unique_max() | ties)[:, None]

    return Alg1Summary(
        count=k,
        rate=k / n,
        rate_ci=(lo, hi),
        chance=float(np.mean([1.0 / it.n_orders for it in items])),
        null_expected=expected,
        p_value=_grouped_sf(k, null, shared, fires),
        excess=k / n - expected,
        excess_ci=(lo - expected, hi - expected),
    )


def _rank_summary(
    items: Sequence[PermutationItemScore], alpha: float, shared: _Shared = ()
) -> RankSummary:
    n = len(items)
    n_orders = np.array([it.n_orders for it in items], dtype=np.float64)
    p = np.array([it.p_value for it in items], dtype=np.float64)
    levels = np.floor(alpha * n_orders + _EPS) / n_orders
    k = int(np.count_nonzero(p <= alpha + _EPS))
    return RankSummary(
        alpha=alpha,
        mean_p_value=float(p.mean()),
        mean_p_value_null=float(np.mean((n_orders + 1.0) / (2.0 * n_orders))),
        count=k,
        rate=k / n,
        rate_ci=_rate_interval(list(p <= alpha + _EPS), shared),
        expected=float(levels.mean()),
        p_value=_grouped_sf(k, levels, shared, lambda g: g.rank_indicators(alpha)),
    )


def in_own_order(*columns: Any) -> tuple[NDArray[np.float64], ...]:
    """Paired per-item columns re-ordered by their values (the first column first), so that
    seeded resampling draws depend on which items there are, not on the order they came in (a
    shuffled copy of a benchmark gave another p-value; QA).

    >>> in_own_order([2.0, 1.0, 2.0], [0.0, 5.0, -1.0])
    (array([1., 2., 2.]), array([ 5., -1.,  0.]))
    """
    arrays = tuple(np.asarray(c, dtype=np.float64) for c in columns)
    if not arrays or arrays[0].size < 2:
        return arrays
    order = np.lexsort(arrays[::-1])
    return tuple(a[order] for a in arrays)


EXACT_ASSIGNMENTS = 1_000_000
"""The randomization test enumerates every assignment when there are at most this many."""
MC_RESAMPLES = 20_000
"""Monte Carlo draws of the randomization test otherwise (seed 0; smallest p about 5e-5)."""


def usable_keys(keys: Sequence[str] | None, n: int) -> bool:
    """Whether ``keys`` can order ``n`` items: one per item, none empty, all distinct (keys
    given twice would leave those items in the order they came in; those are then ordered by
    their values instead)."""
    return keys is not None and len(keys) == n and len(set(keys)) == n and all(keys)


def randomization_p(
    nulls: list[NDArray[np.float64]], keys: Sequence[str] | None = None
) -> tuple[float, str, int]:
    """One-sided randomization test of a sum over items: ``nulls[i][0]`` is item i's observed
    value and, under H0, any element of ``nulls[i]`` was as likely (the item's original is a
    uniform draw from its versions). Returns (P(sum >= observed sum), method, assignments or
    draws): exact by enumeration up to :data:`EXACT_ASSIGNMENTS`, else :data:`MC_RESAMPLES`
    seeded draws, p = (hits + 1) / (draws + 1).

    >>> randomization_p([np.array([1.0, -1.0])] * 3)   # 3 sign flips: 1 of 8 sums reach 3
    (0.125, 'randomization (exact)', 8)
    """
    p, method, count, _ = randomization_test(nulls, keys)
    return p, method, count


def randomization_test(
    nulls: list[NDArray[np.float64]], keys: Sequence[str] | None = None
) -> tuple[float, str, int, tuple[float, float]]:
    """:func:`randomization_p` and the central 95% range of the sum under H0 (its 2.5% and
    97.5% quantiles over the same assignments or draws): where a sum falls when nothing leaked.

    >>> randomization_test([np.array([1.0, -1.0])] * 3)[3]
    (-3.0, 3.0)

    The items are taken in the order of ``keys`` (distinct: a digest of each item's texts,
    then its id; :attr:`~contamscope.detectors.permutation.PermutationItemScore.key`), else of
    their own values, so the Monte Carlo draws, and the p-value, depend on which items there
    are, not on the order they came in (a shuffled copy of a benchmark gave 0.8929 against
    0.8950; QA). With keys they do not depend on the values either: ordered by value,
    log-probs that moved by 1e-5 (another batch size) reordered the items, and the p-value
    moved by its Monte Carlo error (0.3771 against 0.3803; QA). Ids alone would not do: MMLU's
    are row numbers, which a shuffled copy changes (diff-review QA).
    """
    if keys is not None and usable_keys(keys, len(nulls)):
        nulls = [v for _, v in sorted(zip(keys, nulls), key=lambda kv: (kv[1].size, kv[0]))]
    else:
        nulls = sorted(nulls, key=lambda v: (v.size, np.asarray(v, dtype=np.float64).tobytes()))
    observed = 0.0
    for v in nulls:
        observed += float(v[0])
    tol = 1e-9 * max(1.0, abs(observed))
    total = math.prod(v.size for v in nulls)
    if total <= EXACT_ASSIGNMENTS:
        sums = np.zeros(1)
        for v in nulls:  # the same additions in the same order as ``observed``
            sums = (sums[:, None] + v[None, :]).ravel()
        p = float(np.mean(sums >= observed - tol))
        return p, "randomization (exact)", int(total), _central(sums)
    rng = np.random.default_rng(0)
    hits = 0
    drawn = []
    for start in range(0, MC_RESAMPLES, 5000):
        b = min(5000, MC_RESAMPLES - start)
        sums = np.zeros(b)
        for v in nulls:
            sums += v[rng.integers(0, v.size, size=b)]
        hits += int(np.count_nonzero(sums >= observed - tol))
        drawn.append(sums)
    p = (hits + 1) / (MC_RESAMPLES + 1)
    return p, "randomization (Monte Carlo)", MC_RESAMPLES, _central(np.concatenate(drawn))


def _central(sums: NDArray[np.float64]) -> tuple[float, float]:
    lo, hi = np.quantile(sums, [0.025, 0.975], method="inverted_cdf")
    return float(lo), float(hi)


def _gap_test(items: Sequence[PermutationItemScore], shared: _Shared = ()) -> GapTest:
    """One-sided test of mean gap > 0, with a two-sided 95% t interval of the mean gap.

    Under H0 ``E[g_i | values of item i] = 0`` exactly: the original is a uniform draw from the
    ``N`` values, so ``E[lp_0] = mean(all)`` and ``g = N/(N-1) * (lp_0 - mean(all))``; more, the
    null distribution of ``g_i`` is known: each of the item's :func:`gap_values` with
    probability ``1/N``. When the items carry their log-probs the p-value is that randomization
    test of the sum of gaps, at any number of items: exact over every assignment up to
    :data:`EXACT_ASSIGNMENTS`, else :data:`MC_RESAMPLES` seeded draws. A t-test rests on a
    sample variance that few items often underestimate (3 items of ranks 9, 9 and 7 of 24 gave
    p = 0.002 by t-test; the exact p is 0.17), and long lower tails of the order log-probs keep
    it anti-conservative at thousands of items (simulated: 21% of clean data sets at p <= 0.05
    with 200 items, 14% with 2,000). The one-sided t-test remains only for records without
    their log-probs, and is undefined there for one item or identical gaps. The 95% CI is the
    t interval, cluster-robust where ``shared`` has groups (approximate, see
    docs/statistics.md; None for one item or identical gaps).
    Items of one group in ``shared`` are relabelled together: the group's summed gap under each
    of its orders is one term of the sum.
    """
    g = np.array([it.gap for it in items], dtype=np.float64)
    n = int(g.size)
    if n == 0:
        return GapTest(0, None, None, None, None, reason="no items")
    mean = float(g.mean())
    ci = t = None
    undefined = (
        "needs at least 2 items"
        if n < 2
        else "all gaps are identical (zero variance)"
        if float(np.ptp(g)) == 0.0
        else None
    )
    if undefined is None:
        res = _sps().ttest_1samp(g, 0.0, alternative="greater")
        if shared:  # a group's items are one draw: cluster-robust
            c = cluster_ci(g, _units(n, shared))
            ci = None if c is None else (c[0], c[1])
        else:
            half = float(_sps().t.ppf(0.975, n - 1)) * float(g.std(ddof=1)) / math.sqrt(n)
            ci = (mean - half, mean + half)
        t = _none_if_nan(float(res.statistic))
    if all(it.gap_null for it in items):  # defined for any number of items, any variance
        grouped = {i for g in shared for i in g.members}
        alone = [i for i in range(n) if i not in grouped]
        nulls = [np.asarray(items[i].gap_null, dtype=np.float64) for i in alone]
        nulls += [g.gap_null() for g in shared]
        keys = [items[i].key for i in alone]  # a group by its first member's key
        keys += [min(items[i].key for i in g.members) for g in shared]
        p, method, resamples, (lo, hi) = randomization_test(nulls, keys)
        return GapTest(
            n, mean, ci, t, p, method=method, n_resamples=resamples, null_range=(lo / n, hi / n)
        )
    if undefined is not None:
        return GapTest(n, mean, None, None, None, reason=undefined)
    return GapTest(n, mean, ci, t, _none_if_nan(float(res.pvalue)))


def _alg2_summary(
    items: Sequence[PermutationItemScore], delta: float, shared: _Shared = ()
) -> Alg2DeltaSummary:
    # the groups' members, re-indexed among the items that carry this threshold
    shared = _restricted(shared, [i for i, it in enumerate(items) if delta in it.alg2_flags])
    use = [it for it in items if delta in it.alg2_flags]
    n = len(use)
    k = sum(it.alg2_flags[delta] for it in use)
    ka = sum(it.alg2_anchored.get(delta, False) for it in use)
    if n == 0:
        return Alg2DeltaSummary(delta, 0, 0, None, None, 0, None, None, None)
    null = np.array([it.null_anchored.get(delta, 0.0) for it in use], dtype=np.float64)
    return Alg2DeltaSummary(
        delta=delta,
        n_items=n,
        count=k,
        rate=k / n,
        rate_ci=_rate_interval([it.alg2_flags[delta] for it in use], shared),
        anchored_count=ka,
        anchored_rate=ka / n,
        anchored_null_expected=float(null.mean()),
        anchored_p_value=_grouped_sf(
            ka,
            null,
            shared,
            lambda g: (
                g.max_indicators()
                & np.array([use[i].alg2_flags[delta] for i in g.members], dtype=bool)[:, None]
            ),
        )
        if shared
        else poisson_binomial_sf(ka, null),
    )


def summarize(
    items: Sequence[PermutationItemScore],
    *,
    alpha: float = 0.05,
    deltas: Sequence[float] | None = None,
    shared: _Shared = (),
) -> PermutationSummary:
    """Summarise item scores over a dataset.

    Parameters
    ----------
    items:
        Per-item results from :func:`~contamscope.detectors.permutation.score_item`.
    alpha:
        Item-level level of the rank test whose count is reported (its exact null rate is
        ``mean(floor(alpha*N_i)/N_i)``, reported as ``rank.expected``).
    deltas:
        Algorithm-2 thresholds to summarise; ``None`` = every threshold stored in any item. Each
        threshold is summarised over the items that carry it.

    shared:
        Groups of items with the same options in the same published order
        (:func:`~contamscope.detectors.shared.shared_orders`, indices into ``items``): each
        group's items are relabelled together, one draw of its published order. Items of a
        group scored under other orders than the rest (``left_out``) are left out of the tests.

    No items gives ``n_items=0`` and ``None`` statistics; the tests assume independent items
    apart from the ``shared`` groups.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    shared_block = _shared_block(shared)
    if any(g.left_out for g in shared):  # scored under other orders: cannot be relabelled
        out = {i for g in shared for i in g.left_out}
        keep = [i for i in range(len(items)) if i not in out]
        items = [items[i] for i in keep]
        shared = _restricted(shared, keep)
    shared = tuple(g for g in shared if len(g.members) > 1)
    if deltas is None:
        wanted = sorted({d for it in items for d in it.alg2_flags})
    else:
        wanted = sorted({float(d) for d in deltas})
    alg2 = tuple(_alg2_summary(items, d, shared) for d in wanted)
    if not items:
        return PermutationSummary(0, alpha, 0, None, None, None, alg2, shared_block)
    return PermutationSummary(
        n_items=len(items),
        alpha=alpha,
        n_exhaustive=sum(it.exhaustive for it in items),
        alg1=_alg1_summary(items, shared),
        rank=_rank_summary(items, alpha, shared),
        gap=_gap_test(items, shared),
        alg2=alg2,
        shared=shared_block,
    )


def _restricted(shared: _Shared, keep: Sequence[int]) -> tuple[SharedOrders, ...]:
    """``shared`` among the items ``keep`` (indices, in order): members re-indexed, members
    not kept dropped with their rows."""
    new = {old: j for j, old in enumerate(keep)}
    return tuple(
        SharedOrders(
            tuple(new[i] for i in g.members if i in new),
            g.logprobs[[i in new for i in g.members]],
        )
        for g in shared
    )


def _shared_block(shared: _Shared) -> dict[str, Any] | None:
    """What summary.json says of the groups of items sharing one option list in one order."""
    if not shared:
        return None
    sizes = [len(g.members) + len(g.left_out) for g in shared]
    return {
        "null_hypothesis": SHARED_NULL,
        "n_groups": len(shared),
        "n_items": sum(sizes),
        "largest": max(sizes),
        "n_left_out": sum(len(g.left_out) for g in shared),
        "intervals": SHARED_INTERVALS,
    }


# --------------------------------------------------------------------------- clean reference items

REFERENCE_NULL = (
    "H0: the benchmark items are, for this model, like the reference items known to be clean "
    "(drawn alike, never seen); Algorithm 2's flag rate is then the same on both"
)
"""The null hypothesis of :func:`alg2_against_reference`."""


def alg2_against_reference(
    items: Sequence[PermutationItemScore], reference: Sequence[PermutationItemScore]
) -> dict[str, dict[str, Any]]:
    """Algorithm 2's false-positive rate measured on ``reference`` items known to be clean
    (scored by the same model, with the same thresholds), per threshold: the reference flag
    rate with its Clopper-Pearson 95% interval, and Fisher's exact one-sided test that the
    benchmark's rate is higher (:data:`REFERENCE_NULL`). The paper's Algorithm 2 ignores which
    order is the original, so the same items cannot give its null level; clean items can.

    Keyed by :func:`~contamscope.detectors.permutation.delta_key`; a threshold no reference
    item carries is left out.

    >>> from contamscope.detectors import score_item
    >>> flat = score_item([-10.0, -10.1, -10.2, -10.3, -10.4, -10.5], n_options=3, exhaustive=True)
    >>> out = alg2_against_reference([flat] * 4, [flat] * 8)
    >>> out["-0.2"]["reference_count"], out["-0.2"]["reference_n"], out["-0.2"]["p_value"]
    (0, 8, 1.0)
    """
    out: dict[str, dict[str, Any]] = {}
    for d in sorted({d for it in items for d in it.alg2_flags}):
        bench = [it.alg2_flags[d] for it in items if d in it.alg2_flags]
        ref = [it.alg2_flags[d] for it in reference if d in it.alg2_flags]
        if not ref:
            continue
        k, n, kr, nr = sum(bench), len(bench), sum(ref), len(ref)
        p = _sps().fisher_exact([[k, n - k], [kr, nr - kr]], alternative="greater").pvalue
        out[delta_key(d)] = {
            "reference_count": kr,
            "reference_n": nr,
            "reference_rate": kr / nr,
            "reference_ci": _pair(exact_interval(kr, nr)),
            "p_value": float(p),
            "test": "Fisher's exact test, one-sided (benchmark rate > reference rate)",
        }
    return out
