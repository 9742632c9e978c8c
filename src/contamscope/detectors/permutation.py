"""Item-level detectors of the option-permutation method (Ni et al., AAAI 2025).

A multiple-choice item with ``n`` options is scored under ``N`` orders of its options: all ``n!``
orders (*exhaustive*) or, above a cap, the original plus ``K`` seeded random distinct orders
(*Monte Carlo*, ``N = K + 1``). Every function here takes the resulting log-probabilities as a
1-D sequence ``logprobs`` with the ORIGINAL order at index 0. Nothing here touches a model.

Faithful paper modes and calibrated modes sit side by side:

* :class:`Algorithm1` -- the paper's scenario (a): "leaked" when the original order has the
  highest log-prob. Under the null its item-level false-positive rate is at most ``1/N``.
* :class:`Algorithm2` -- the paper's scenario (b), as in its published code: an IsolationForest
  over the ``N`` values; "leaked" when the maximum is an outlier (score below ``delta``). Its
  false-positive rate is not known from the item alone (see ``docs/statistics.md``). The
  *anchored* variant also requires the maximum to be the original order; its null rate is exact.
* :func:`rank_p_value` and :func:`gap` -- calibrated statistics: an exact permutation p-value of the
  original order and the original's lead over the mean of the others.

:func:`score_item` runs all of them on one item and returns a JSON-friendly
:class:`PermutationItemScore`; :mod:`contamscope.detectors.stats` aggregates those over a dataset.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from contamscope.errors import ConfigError

__all__ = [
    "gap_values",
    "Alg1Result",
    "Alg2Result",
    "Algorithm1",
    "Algorithm2",
    "PermutationItemScore",
    "TiesMode",
    "check_deltas",
    "default_deltas",
    "delta_key",
    "gap",
    "item_score_from_dict",
    "rank_p_value",
    "rethreshold",
    "score_item",
]

TiesMode = Literal["not_leaked", "leaked"]
"""What Algorithm 1 answers when the original order ties for the maximum."""

_FloatArray = NDArray[np.float64]


def _as_logprobs(logprobs: Sequence[float] | NDArray[Any]) -> _FloatArray:
    """Validate and convert ``logprobs`` to a 1-D float array (at least 2 finite values)."""
    arr = np.asarray(logprobs, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"logprobs must be 1-D (one value per order), got shape {arr.shape}")
    if arr.size < 2:
        raise ValueError(
            f"logprobs needs the original and at least one other order, got {arr.size}"
        )
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"logprobs must be finite; value at index {bad} is {arr[bad]}")
    return arr


SCORE_RANGE = (-0.5, 0.5)
"""Where Algorithm 2's outlier score lies (IsolationForest's decision function with
``contamination="auto"``: the path-length score in [-1, 0] less its offset -0.5)."""


def check_deltas(deltas: Sequence[float], given: str) -> None:
    """Refuse a threshold outside :data:`SCORE_RANGE` (``--deltas 5`` flagged every item, and
    ran without a word); ``given`` is the option as the user wrote it.

    >>> check_deltas([-0.2, 0.1], "-0.2,0.1")
    >>> check_deltas([5.0], "5")
    Traceback (most recent call last):
    ...
    contamscope.errors.ConfigError: --deltas 5: 5 is outside [-0.5, 0.5], where the outlier score lies: it would flag every item; the paper's are -0.2 (up to 4 options) and -0.25
    """
    from ..errors import ConfigError

    low, high = SCORE_RANGE
    for d in deltas:
        if not low <= d <= high:
            every = "every item" if d > high else "no item"
            raise ConfigError(
                f"--deltas {given}: {d:g} is outside [{low:g}, {high:g}], where the outlier "
                f"score lies: it would flag {every}; the paper's are -0.2 (up to 4 options) and -0.25"
            )


def delta_key(delta: float) -> str:
    """JSON key for an outlier threshold: ``delta_key(-0.2) == "-0.2"`` (shortest round-trip repr)."""
    return repr(float(delta))


# --------------------------------------------------------------------------- Algorithm 1


@dataclass(frozen=True)
class Alg1Result:
    """Result of :class:`Algorithm1` on one item."""

    leaked: bool
    """The paper's verdict "L": the original order has the highest log-prob (ties per ``ties``)."""
    rank: int
    """1-based rank of the original among all orders: ``1 + #{others strictly greater}``."""
    n_tied: int
    """Number of OTHER orders whose log-prob equals the original's exactly."""


class Algorithm1:
    """Scenario (a) of Ni et al.: the original order is leaked if it has the maximum log-prob.

    Parameters
    ----------
    ties:
        ``"not_leaked"`` (default): an original that only ties for the maximum is not leaked, so
        the verdict needs a strict maximum and its null rate is at most ``1/N``.
        ``"leaked"``: ties count as leaked (the paper's ``log p1* = max(P)`` read literally); the
        null rate is then ``m/N`` where ``m`` orders share the maximum.

    Examples
    --------
    >>> Algorithm1().score([-1.0, -2.0, -3.0])
    Alg1Result(leaked=True, rank=1, n_tied=0)
    >>> Algorithm1().score([-1.0, -1.0, -3.0]).leaked
    False
    >>> Algorithm1(ties="leaked").score([-1.0, -1.0, -3.0]).leaked
    True
    """

    def __init__(self, ties: TiesMode = "not_leaked") -> None:
        if ties not in get_args(TiesMode):
            raise ConfigError(f"ties must be one of {get_args(TiesMode)}, got {ties!r}")
        self.ties: TiesMode = ties

    def __repr__(self) -> str:
        return f"Algorithm1(ties={self.ties!r})"

    def score(self, logprobs: Sequence[float] | NDArray[Any]) -> Alg1Result:
        """Rank the original order (index 0) among all ``N`` orders."""
        lp = _as_logprobs(logprobs)
        others = lp[1:]
        n_greater = int(np.count_nonzero(others > lp[0]))
        n_tied = int(np.count_nonzero(others == lp[0]))
        leaked = n_greater == 0 and (n_tied == 0 or self.ties == "leaked")
        return Alg1Result(leaked=leaked, rank=1 + n_greater, n_tied=n_tied)

    def null_probability(self, logprobs: Sequence[float] | NDArray[Any]) -> float:
        """Exact probability that :meth:`score` says leaked if the original were a random order.

        Under H0 the original's log-prob is a uniform draw from the ``N`` values (see
        :func:`rank_p_value`). With ``m`` orders sharing the maximum this is ``1/N`` when ``m == 1``
        and, for ``m > 1``, ``0`` (``ties="not_leaked"``) or ``m/N`` (``ties="leaked"``).
        """
        lp = _as_logprobs(logprobs)
        m = int(np.count_nonzero(lp == lp.max()))
        if m == 1:
            return 1.0 / lp.size
        return m / lp.size if self.ties == "leaked" else 0.0


# --------------------------------------------------------------------------- Algorithm 2


def default_deltas(n_options: int) -> tuple[float, ...]:
    """The paper's outlier thresholds: ``(-0.2,)`` for up to 4 options, ``(-0.25,)`` for 5 or more.

    The paper prints the thresholds without their sign (0.2 for MMLU, CMMLU, C-Eval; 0.25 for the
    5-option CMB); IsolationForest's ``decision_function`` is negative for outliers, so the
    thresholds in use are negative.
    """
    if n_options < 2:
        raise ConfigError(f"an item needs at least 2 options, got {n_options}")
    return (-0.2,) if n_options <= 4 else (-0.25,)


@dataclass(frozen=True)
class Alg2Result:
    """Result of :class:`Algorithm2` on one item."""

    score: float
    """IsolationForest ``decision_function`` at the maximum log-prob (negative = outlier)."""
    argmax: int
    """Index of the maximum log-prob (first one when tied); 0 is the original order."""
    flags: dict[float, bool]
    """The paper's verdict "L" per threshold: ``score < delta`` (ignores which order is original)."""
    anchored: dict[float, bool]
    """Scenario-(a) variant per threshold: flagged AND the maximum is the original (``argmax == 0``)."""


class Algorithm2:
    """Scenario (b) of Ni et al.: the maximum log-prob is an IsolationForest outlier.

    Faithful to the published code: ``IsolationForest(n_estimators=100, contamination='auto',
    random_state=42)`` is fit on the ``N`` values reshaped to ``(-1, 1)``, ``decision_function`` is
    evaluated on the same values, and the item is flagged when the score at ``argmax(logprobs)``
    is below ``delta``. Deterministic for a fixed ``random_state``.

    Parameters
    ----------
    deltas:
        Outlier thresholds to evaluate; ``None`` uses :func:`default_deltas` for the item's number
        of options (-0.2 for n <= 4, -0.25 for n >= 5).
    n_estimators, contamination, random_state:
        Passed to :class:`sklearn.ensemble.IsolationForest`.
    """

    def __init__(
        self,
        deltas: Sequence[float] | None = None,
        n_estimators: int = 100,
        contamination: float | Literal["auto"] = "auto",
        random_state: int = 42,
    ) -> None:
        if deltas is not None:
            deltas = tuple(float(d) for d in deltas)
            if not deltas or not all(math.isfinite(d) for d in deltas):
                raise ConfigError(
                    f"deltas must be a non-empty list of finite numbers, got {deltas}"
                )
        if n_estimators < 1:
            raise ConfigError(f"n_estimators must be >= 1, got {n_estimators}")
        self.deltas: tuple[float, ...] | None = deltas
        self.n_estimators = n_estimators
        self.contamination = contamination
        self.random_state = random_state

    def __repr__(self) -> str:
        return (
            f"Algorithm2(deltas={self.deltas!r}, n_estimators={self.n_estimators}, "
            f"contamination={self.contamination!r}, random_state={self.random_state})"
        )

    def deltas_for(self, n_options: int) -> tuple[float, ...]:
        """The thresholds used for an item with ``n_options`` options."""
        return self.deltas if self.deltas is not None else default_deltas(n_options)

    def outlier_scores(self, logprobs: Sequence[float] | NDArray[Any]) -> _FloatArray:
        """IsolationForest ``decision_function`` of every value (index-aligned with ``logprobs``).

        For ``N <= 256`` (every tree sees all values) the scores depend only on the multiset of
        values, not on their positions; above that sklearn subsamples 256 rows per tree. There,
        with ``contamination="auto"``, they are computed by :mod:`.iforest` (scikit-learn's own
        trees without the estimator's overhead: the same numbers, about 20x faster), where it
        passes its check against the estimator.
        """
        from . import iforest

        lp = _as_logprobs(logprobs)
        if self.contamination == "auto" and lp.size <= iforest.MAX_VALUES and iforest.available():
            return iforest.isolation_scores(lp, self.n_estimators, self.random_state)
        return iforest.sklearn_scores(lp, self.n_estimators, self.random_state, self.contamination)

    def score(self, logprobs: Sequence[float] | NDArray[Any], n_options: int) -> Alg2Result:
        """Run Algorithm 2 on one item's log-probs (original order at index 0)."""
        lp = _as_logprobs(logprobs)
        return self._result(lp, self.outlier_scores(lp), n_options)

    def _result(self, lp: _FloatArray, scores: _FloatArray, n_options: int) -> Alg2Result:
        argmax = int(np.argmax(lp))
        s = float(scores[argmax])
        flags = {d: s < d for d in self.deltas_for(n_options)}
        anchored = {d: f and argmax == 0 for d, f in flags.items()}
        return Alg2Result(score=s, argmax=argmax, flags=flags, anchored=anchored)


# --------------------------------------------------------------------------- calibrated statistics


def rank_p_value(logprobs: Sequence[float] | NDArray[Any], exhaustive: bool) -> float:
    """Exact permutation p-value that the original order (index 0) is favoured.

    H0 (not leaked): the original order is exchangeable with the others, i.e. its log-prob is a
    uniformly random draw from the ``N`` values. Small p means the original is unusually high.

    * Exhaustive (all ``n!`` orders, ``N = n!``): ``p = #{j : lp_j >= lp_0} / N``, ``j`` running over
      all orders including the original. Ties count against leakage, so the test is valid
      (``P(p <= a) <= floor(a*N)/N``, with equality when there are no ties).
    * Monte Carlo (original + ``K`` random distinct orders, ``N = K + 1``):
      ``p = (1 + #{j >= 1 : lp_j >= lp_0}) / (K + 1)``, the standard valid Monte Carlo permutation
      p-value: under H0 the original is exchangeable with the ``K`` randomly drawn orders.

    Both are the same formula; ``exhaustive`` is accepted so the caller states which case holds and
    it is recorded, not because the arithmetic differs. The smallest attainable value is ``1/N``.

    >>> rank_p_value([-1.0, -2.0, -3.0, -4.0], exhaustive=False)
    0.25
    >>> rank_p_value([-2.0, -1.0, -2.0, -4.0], exhaustive=False)
    0.75
    """
    del exhaustive  # same arithmetic in both cases (see docstring)
    lp = _as_logprobs(logprobs)
    return float(np.count_nonzero(lp >= lp[0])) / lp.size


def gap(logprobs: Sequence[float] | NDArray[Any]) -> float:
    """The original's log-prob minus the mean log-prob of the other orders.

    Under H0 its expectation given the set of values is exactly 0 (the original is a uniform draw
    from them), which makes a dataset-level test of "mean gap > 0" valid.

    >>> gap([-1.0, -2.0, -4.0])
    2.0
    """
    lp = _as_logprobs(logprobs)
    return float(lp[0] - lp[1:].mean())


def gap_values(logprobs: Sequence[float] | NDArray[Any]) -> tuple[float, ...]:
    """The gap each scored order would have if it were the original (index 0: the observed gap).

    Under H0 the original is a uniform draw from the orders, so these ``N`` values, each with
    probability ``1/N``, are the gap's exact null distribution given the item's values.

    >>> gap_values([-1.0, -2.0, -4.0])
    (2.0, 0.5, -2.5)
    """
    lp = _as_logprobs(logprobs)
    n = lp.size
    if n < 2:
        return (0.0,) * n
    total = float(lp.sum())
    return tuple(float(x - (total - x) / (n - 1)) for x in lp)


# --------------------------------------------------------------------------- one item, everything


def _keyed(d: Mapping[float, Any]) -> dict[str, Any]:
    return {delta_key(k): v for k, v in d.items()}


def _unkeyed(d: Mapping[str, Any], cast: type) -> dict[float, Any]:
    return {float(k): cast(v) for k, v in d.items()}


@dataclass(frozen=True)
class PermutationItemScore:
    """Everything the permutation method says about one item (what the pipeline stores)."""

    n_options: int
    """Number of options of the item."""
    n_orders: int
    """``N``: number of orders scored, the original included."""
    exhaustive: bool
    """True when all ``n!`` orders were scored; False for Monte Carlo (original + ``N-1`` random)."""
    rank: int
    """1-based rank of the original (1 = highest; ``1 + #{others strictly greater}``)."""
    n_tied: int
    """Number of other orders with exactly the original's log-prob."""
    p_value: float
    """Exact permutation p-value of the original order (:func:`rank_p_value`)."""
    gap: float
    """Original log-prob minus the mean of the others (:func:`gap`)."""
    alg1: bool
    """Algorithm 1 (paper, scenario a) verdict."""
    alg1_null: float
    """Exact probability that Algorithm 1 fires on this item under H0, given its values."""
    alg2_score: float
    """IsolationForest score at the maximum log-prob."""
    alg2_argmax: int
    """Index of the maximum log-prob (0 = original)."""
    alg2_flags: dict[float, bool]
    """Algorithm 2 (paper, scenario b) verdict per threshold ``delta``."""
    alg2_anchored: dict[float, bool]
    """Algorithm 2 flag AND the maximum is the original, per threshold."""
    null_anchored: dict[float, float]
    """Exact H0 probability that the anchored flag fires, per threshold (see :func:`score_item`)."""
    gap_null: tuple[float, ...] | None = field(default=None, compare=False, repr=False)
    """:func:`gap_values` of the item (its gap's null distribution), when the log-probs are known;
    not stored by :meth:`to_dict` (records keep the log-probs it is computed from)."""
    key: str = field(default="", compare=False, repr=False)
    """A digest of the item's texts (its prefix and published order's continuation) and id,
    when rebuilt from a record (:meth:`from_dict`): the gap test takes its Monte Carlo draws
    over the items in the order of these keys, which neither the order of the rows nor the
    log-probs' rounding change (an id alone is a row number in MMLU's CSV files)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict; threshold keys are strings such as ``"-0.2"``."""
        return {
            "n_options": self.n_options,
            "n_orders": self.n_orders,
            "exhaustive": self.exhaustive,
            "rank": self.rank,
            "n_tied": self.n_tied,
            "p_value": self.p_value,
            "gap": self.gap,
            "alg1": self.alg1,
            "alg1_null": self.alg1_null,
            "alg2_score": self.alg2_score,
            "alg2_argmax": self.alg2_argmax,
            "alg2": _keyed(self.alg2_flags),
            "alg2_anchored": _keyed(self.alg2_anchored),
            "null_anchored": _keyed(self.null_anchored),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PermutationItemScore:
        """Inverse of :meth:`to_dict` (for re-analysing stored runs)."""
        return cls(
            n_options=int(d["n_options"]),
            n_orders=int(d["n_orders"]),
            exhaustive=bool(d["exhaustive"]),
            rank=int(d["rank"]),
            n_tied=int(d["n_tied"]),
            p_value=float(d["p_value"]),
            gap=float(d["gap"]),
            alg1=bool(d["alg1"]),
            alg1_null=float(d["alg1_null"]),
            alg2_score=float(d["alg2_score"]),
            alg2_argmax=int(d["alg2_argmax"]),
            alg2_flags=_unkeyed(d["alg2"], bool),
            alg2_anchored=_unkeyed(d["alg2_anchored"], bool),
            null_anchored=_unkeyed(d["null_anchored"], float),
            gap_null=gap_values(lps) if len(lps := d.get("logprobs") or ()) > 1 else None,
            key=_item_key(d),
        )


def _item_key(d: Mapping[str, Any]) -> str:
    """:attr:`PermutationItemScore.key` of a record: its texts' digest, then its id (which
    orders only items of identical texts, whose log-probs are identical too)."""
    conts = d.get("continuations") or [""]
    text = f"{d.get('prefix') or ''}\x00{conts[0]}"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{digest}\x00{d.get('id') or ''}" if d.get("prefix") or d.get("id") else ""


def item_score_from_dict(d: Mapping[str, Any]) -> PermutationItemScore:
    """Rebuild a :class:`PermutationItemScore` from a stored record (extra keys are ignored)."""
    return PermutationItemScore.from_dict(d)


def score_item(
    logprobs: Sequence[float] | NDArray[Any],
    *,
    n_options: int,
    exhaustive: bool,
    alg1: Algorithm1 | None = None,
    alg2: Algorithm2 | None = None,
) -> PermutationItemScore:
    """Score one item with every permutation statistic (called once per item by the pipeline).

    ``logprobs`` holds one log-prob per order, the original first. ``exhaustive`` must be True
    exactly when ``len(logprobs) == n_options!``.

    Null of the anchored Algorithm-2 flag (exact, no randomness): under H0 the original is a
    uniformly random one of the ``N`` orders, and the outlier score at the maximum does not depend
    on which order is the original (exactly so for ``N <= 256``, where the forest sees every value;
    an approximation above). The anchored flag fires when the original attains the maximum and that
    score is below ``delta``, so ``P0(delta) = 1[score < delta] * m / N`` where ``m`` orders share
    the maximum (``m = 1``, i.e. ``1/N``, in the usual untied case; with a tie the original, at
    index 0, is always the first maximum, so every tied position counts).
    """
    lp = _as_logprobs(logprobs)
    alg1 = alg1 if alg1 is not None else Algorithm1()
    alg2 = alg2 if alg2 is not None else Algorithm2()
    if n_options < 2:
        raise ValueError(f"n_options must be >= 2, got {n_options}")
    n_perm = math.factorial(n_options)
    if exhaustive and lp.size != n_perm:
        raise ValueError(
            f"exhaustive scoring of {n_options} options needs {n_perm} log-probs, got {lp.size}"
        )
    if lp.size > n_perm:
        raise ValueError(
            f"{lp.size} log-probs but only {n_perm} distinct orders of {n_options} options"
        )

    return _thresholded(
        lp, n_options, exhaustive, alg1, alg2._result(lp, alg2.outlier_scores(lp), n_options)
    )


def rethreshold(
    score: PermutationItemScore,
    logprobs: Sequence[float] | NDArray[Any],
    *,
    alg1: Algorithm1 | None = None,
    alg2: Algorithm2 | None = None,
) -> PermutationItemScore:
    """``score`` (an item's stored result) under other thresholds: Algorithm 1's ``ties`` and
    Algorithm 2's ``deltas``, from the item's log-probs and its stored outlier score, so no
    forest is fit again and the result equals :func:`score_item` run with ``alg1`` and ``alg2``
    (the forest's scores do not depend on the thresholds).

    >>> lp = [-1.0, -1.0, -5.0, -6.0, -7.0, -8.0]
    >>> s = score_item(lp, n_options=3, exhaustive=True)
    >>> s.alg1, rethreshold(s, lp, alg1=Algorithm1(ties="leaked")).alg1
    (False, True)
    >>> sorted(rethreshold(s, lp, alg2=Algorithm2(deltas=[-0.1, 0.5])).alg2_flags)
    [-0.1, 0.5]
    """
    lp = _as_logprobs(logprobs)
    if lp.size != score.n_orders:
        raise ValueError(f"{lp.size} log-probs for an item scored under {score.n_orders} orders")
    alg2 = alg2 if alg2 is not None else Algorithm2()
    argmax = int(np.argmax(lp))
    if argmax != score.alg2_argmax:
        raise ValueError(
            f"the log-probs' maximum is order {argmax}, the stored score's {score.alg2_argmax}"
        )
    r2 = alg2._result(lp, np.full(lp.size, score.alg2_score), score.n_options)
    return _thresholded(lp, score.n_options, score.exhaustive, alg1 or Algorithm1(), r2)


def _thresholded(
    lp: _FloatArray, n_options: int, exhaustive: bool, alg1: Algorithm1, r2: Alg2Result
) -> PermutationItemScore:
    """Every statistic of one item from its log-probs and Algorithm 2's result."""
    r1 = alg1.score(lp)
    m = int(np.count_nonzero(lp == lp[r2.argmax]))
    null_anchored = {d: (m / lp.size if r2.score < d else 0.0) for d in r2.flags}
    return PermutationItemScore(
        n_options=n_options,
        n_orders=int(lp.size),
        exhaustive=bool(exhaustive),
        rank=r1.rank,
        n_tied=r1.n_tied,
        p_value=rank_p_value(lp, exhaustive),
        gap=gap(lp),
        alg1=r1.leaked,
        alg1_null=alg1.null_probability(lp),
        alg2_score=r2.score,
        alg2_argmax=r2.argmax,
        alg2_flags=r2.flags,
        alg2_anchored=r2.anchored,
        null_anchored=null_anchored,
        gap_null=gap_values(lp),
    )
