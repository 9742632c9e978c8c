"""Reference-calibrated membership test: is the model more familiar with an item's text than
with texts it cannot have seen?

Per item, a *familiarity statistic* of its original text (higher = more familiar) is computed
from teacher-forced per-token log-probs (:func:`item_statistics`):

* ``loss``: mean token log-prob (the negative of the usual loss);
* ``min_k``: Min-K% (Shi et al. 2024), mean of the lowest ``k`` fraction of token log-probs;
* ``min_k_pp``: Min-K%++ (Zhang et al. 2024), each token's log-prob standardised by the mean and
  std of log p over the vocabulary at its position, then the mean of the lowest ``k`` fraction;
* ``zlib``: sum of token log-probs divided by the zlib-compressed length of the text in bytes
  (Carlini et al. 2021's zlib ratio, signed so that higher = more familiar; their code divides
  the mean log-prob, which makes the ratio fall with the text's length: docs/methods.md).

The same statistic on *reference items* (texts the model cannot have seen, e.g. written after its
training cut-off) calibrates it. For one benchmark item with statistic ``s`` and references
``r_1 .. r_R``:

    H0 (item): s is exchangeable with r_1 .. r_R (the model is no more familiar with the item
    than with unseen items of the same kind).

The conformal p-value ``p = (1 + #{j: r_j >= s}) / (R + 1)`` is super-uniform under H0, so
flagging at ``p <= alpha`` has false-positive rate ``<= alpha`` (marginally over the draw of the
references; exactly ``floor(alpha (R+1)) / (R+1)`` without ties). The p-values of many items share
one reference set, so they are positively dependent (PRDS); Benjamini-Hochberg on them still
controls the false-discovery rate (Bates et al. 2023, "Testing for outliers with conformal
p-values").

Dataset level (:func:`mann_whitney`):

    H0 (dataset): the benchmark items' statistics and the references' are draws from one
    distribution; H1: benchmark items are stochastically larger (more familiar).

One-sided Mann-Whitney U test, with the AUC ``P(bench > ref) + P(tie)/2`` as effect size and a
stratified bootstrap percentile CI. Pure numpy/scipy: no model, no torch.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats as sps

from ..errors import ConfigError
from ..wording import plural
from .stats import expanded_tail, tail_draws

__all__ = [
    "STATISTICS",
    "ITEM_NULL",
    "DATASET_NULL",
    "MembershipTest",
    "MembershipResult",
    "DatasetTest",
    "item_statistics",
    "lowest_k_mean",
    "conformal_p_values",
    "benjamini_hochberg",
    "mann_whitney",
]

STATISTICS = ("min_k_pp", "min_k", "loss", "zlib")
"""Familiarity statistics (higher = more familiar); ``min_k_pp`` needs vocabulary mean/std."""

ITEM_NULL = (
    "H0 (per item): the item's statistic is exchangeable with the reference items' statistics "
    "(the model is no more familiar with it than with texts it cannot have seen)"
)
DATASET_NULL = (
    "H0 (dataset): benchmark and reference statistics come from one distribution; H1: benchmark "
    "items are stochastically more familiar (one-sided Mann-Whitney U)"
)
_STD_FLOOR = 1e-6
"""Min-K%++ divides by the std of log p; a (near) one-hot distribution has std ~ 0."""


def lowest_k_mean(values: Sequence[float] | NDArray[Any], k: float) -> float:
    """Mean of the lowest ``max(1, floor(k * n))`` values (Min-K%'s selection; NaN if empty).

    >>> lowest_k_mean([-1.0, -5.0, -2.0, -0.5, -3.0], 0.4)
    -4.0
    >>> lowest_k_mean([-1.0, -2.0], 0.2)
    -2.0
    """
    x = np.sort(np.asarray(values, dtype=np.float64))
    if x.size == 0:
        return math.nan
    n = max(1, int(math.floor(k * x.size + 1e-9)))
    return float(x[:n].mean())


def item_statistics(
    logprobs: Sequence[float],
    text: str,
    *,
    mean_logprob: Sequence[float] | None = None,
    std_logprob: Sequence[float] | None = None,
    k: float = 0.2,
) -> dict[str, float | None]:
    """Every familiarity statistic of one text from its per-token log-probs (higher = more
    familiar). ``min_k_pp`` is None without the vocabulary mean/std.

    >>> s = item_statistics([-1.0, -3.0, -2.0, -0.5, -4.0], "abc", k=0.4)
    >>> s["loss"], s["min_k"], round(s["zlib"], 4), s["min_k_pp"]
    (-2.1, -3.5, -0.9545, None)
    >>> item_statistics([-1.0, -3.0], "ab", mean_logprob=[-2.0, -2.0],
    ...                 std_logprob=[1.0, 0.5], k=0.5)["min_k_pp"]
    -2.0
    """
    if not 0 < k <= 1:
        raise ConfigError(f"--k {k}: expected a fraction in (0, 1]")
    lp = np.asarray(logprobs, dtype=np.float64)
    if lp.size == 0 or not np.isfinite(lp).all():
        return {name: None for name in STATISTICS}
    out: dict[str, float | None] = {
        "loss": float(lp.mean()),
        "min_k": lowest_k_mean(lp, k),
        "zlib": float(lp.sum()) / len(zlib.compress(text.encode("utf-8"))),
        "min_k_pp": None,
    }
    if mean_logprob is not None and std_logprob is not None:
        mu = np.asarray(mean_logprob, dtype=np.float64)
        sd = np.maximum(np.asarray(std_logprob, dtype=np.float64), _STD_FLOOR)
        if mu.shape != lp.shape or sd.shape != lp.shape:
            raise ValueError("mean_logprob / std_logprob must have one value per token")
        out["min_k_pp"] = lowest_k_mean((lp - mu) / sd, k)
    return out


def conformal_p_values(
    scores: Sequence[float] | NDArray[Any], reference: Sequence[float] | NDArray[Any]
) -> NDArray[np.float64]:
    """``p_i = (1 + #{j: reference_j >= scores_i}) / (R + 1)`` (one-sided: large = familiar).

    Under H0 (``scores_i`` exchangeable with the references) ``P(p_i <= a) <= a`` for every a.

    >>> conformal_p_values([0.5, 3.0, -9.0], [0.0, 1.0, 2.0, 0.5])
    array([0.8, 0.2, 1. ])
    """
    ref = np.sort(np.asarray(reference, dtype=np.float64))
    s = np.asarray(scores, dtype=np.float64)
    if ref.size == 0:
        raise ConfigError("the reference set is empty: no p-values can be computed")
    at_least = ref.size - np.searchsorted(ref, s, side="left")
    return np.asarray((1.0 + at_least) / (ref.size + 1.0), dtype=np.float64)


def benjamini_hochberg(p_values: Sequence[float] | NDArray[Any]) -> NDArray[np.float64]:
    """Benjamini-Hochberg adjusted p-values (q-values): flag ``q <= alpha`` for FDR <= alpha.

    >>> benjamini_hochberg([0.01, 0.04, 0.03, 0.5]).round(4).tolist()
    [0.04, 0.0533, 0.0533, 0.5]
    """
    p = np.asarray(p_values, dtype=np.float64)
    n = p.size
    if n == 0:
        return p.copy()
    order = np.argsort(p)
    ranked = p[order] * n / np.arange(1, n + 1)
    q = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(n)
    out[order] = np.minimum(q, 1.0)
    return out


def _auc(x: NDArray[np.float64], y_sorted: NDArray[np.float64]) -> float:
    """P(X > Y) + P(X = Y) / 2 against sorted ``y``."""
    below = np.searchsorted(y_sorted, x, side="left")
    upto = np.searchsorted(y_sorted, x, side="right")
    return float((below + upto).sum() / (2.0 * x.size * y_sorted.size))


@dataclass(frozen=True)
class DatasetTest:
    """One-sided Mann-Whitney U test of benchmark vs reference statistics."""

    n_benchmark: int
    n_reference: int
    u: float
    """U statistic of the benchmark sample (pairs bench > ref, ties counted half)."""
    p_value: float
    """One-sided (benchmark more familiar) p-value under :data:`DATASET_NULL`."""
    auc: float
    """U / (n_benchmark n_reference): P(bench > ref) + P(tie)/2; 0.5 under H0."""
    auc_ci: tuple[float, float] | None
    """Stratified bootstrap percentile interval of the AUC; None with fewer than
    :data:`MIN_CI_ITEMS` benchmark items."""
    confidence: float
    n_boot: int
    method: str
    """How the p-value was computed (scipy's exact or asymptotic, tie-corrected)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "null_hypothesis": DATASET_NULL,
            "test": "Mann-Whitney U, one-sided (benchmark > reference)",
            "n_benchmark": self.n_benchmark,
            "n_reference": self.n_reference,
            "u": self.u,
            "p_value": self.p_value,
            "p_value_method": self.method,
            "auc": self.auc,
            "auc_ci": list(self.auc_ci) if self.auc_ci is not None else None,
            "auc_ci_level": self.confidence,
            "auc_ci_method": "expanded stratified bootstrap percentile (Hesterberg 2015; "
            f"at the smaller sample's size), {self.n_boot} resamples",
        }


MIN_CI_ITEMS = 5
"""Benchmark items, and reference items, the AUC's interval needs. It is the *expanded*
bootstrap percentile interval
(:func:`~contamscope.detectors.stats.expanded_tail` at the smaller sample's size). Against 40
references, 400 identically distributed or shifted sets per size (benchmarks/membership_null.py),
it covered the true AUC in 93.8-96.5% of sets of 5 to 50 items, where the plain percentile
interval covered 84.8-90.2% with 5-8 items. With 2-3 items even the expanded one covered
81-95%: the Mann-Whitney p-value holds at any size, the interval does not, so it is left out.
So with fewer references (one gave [1.000, 1.000] beside p = 0.111)."""


_BOOT_ENTRIES = 4_000_000
"""Resampled item counts :func:`bootstrap_aucs` holds at once (32 MB of int64)."""


def bootstrap_aucs(
    x: NDArray[np.float64], y: NDArray[np.float64], n_boot: int, seed: int
) -> NDArray[np.float64]:
    """The AUC of ``n_boot`` stratified resamples (each sample resampled on its own).

    A resample is held as how many times it drew each item, and its AUC is taken from the
    cumulative counts of the sorted references below and up to each benchmark value: the
    same number as the AUC of the resampled values, in time linear in the sizes, many
    resamples at once (the tail draws of few items are 26,000 resamples: 0.7 s a loop
    of one resample at a time, 0.03 s so).

    >>> x, y = np.array([1.0, 2.0, 3.0]), np.array([0.0, 2.0, 5.0, 6.0])
    >>> bool(np.all((bootstrap_aucs(x, y, 50, 0) >= 0) & (bootstrap_aucs(x, y, 50, 0) <= 1)))
    True
    """
    x, y = np.sort(x), np.sort(y)  # resampled by the items, not by the order they came in
    nx, ny = x.size, y.size
    below = np.searchsorted(y, x, side="left")  # references under each benchmark value
    upto = np.searchsorted(y, x, side="right")  # ...and tied with it too
    rng = np.random.default_rng(seed)
    boots = np.empty(n_boot)
    chunk = max(1, _BOOT_ENTRIES // (nx + ny + 1))
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        rows = np.arange(b)[:, None]
        cx = np.bincount((rng.integers(0, nx, (b, nx)) + rows * nx).ravel(), minlength=b * nx)
        cy = np.bincount((rng.integers(0, ny, (b, ny)) + rows * ny).ravel(), minlength=b * ny)
        cum = np.zeros((b, ny + 1), dtype=np.int64)
        np.cumsum(cy.reshape(b, ny), axis=1, out=cum[:, 1:])
        pairs = (cx.reshape(b, nx) * (cum[:, below] + cum[:, upto])).sum(axis=1)
        boots[start : start + b] = pairs / (2.0 * nx * ny)
    return boots


def mann_whitney(
    benchmark: Sequence[float] | NDArray[Any],
    reference: Sequence[float] | NDArray[Any],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> DatasetTest:
    """Dataset-level test of :data:`DATASET_NULL` with the AUC and its bootstrap CI.

    >>> t = mann_whitney([3.0, 4.0, 5.0], [0.0, 1.0, 2.0], n_boot=200)
    >>> t.auc, round(t.p_value, 4), t.auc_ci   # no interval under MIN_CI_ITEMS items
    (1.0, 0.05, None)
    """
    x = np.asarray(benchmark, dtype=np.float64)
    y = np.asarray(reference, dtype=np.float64)
    if x.size == 0 or y.size == 0:
        raise ConfigError("the Mann-Whitney test needs at least one benchmark and one reference")
    ties = np.unique(np.r_[x, y]).size < x.size + y.size
    # scipy's own rule for method="auto", made explicit so that the record says which was used
    method = "asymptotic" if (x.size > 8 and y.size > 8) or ties else "exact"
    res = sps.mannwhitneyu(x, y, alternative="greater", method=method)
    if method == "asymptotic":
        method = "asymptotic (normal, tie-corrected, continuity-corrected)"
    auc = _auc(x, np.sort(y))
    ci = None
    if min(x.size, y.size) >= MIN_CI_ITEMS:  # with 1 reference: the bootstrap's min and max
        tail = expanded_tail(min(x.size, y.size), confidence)
        n_boot = tail_draws(n_boot, tail, x.size + y.size)  # 25 beyond each end at least
        lo, hi = np.quantile(bootstrap_aucs(x, y, n_boot, seed), [tail, 1 - tail])
        ci = (float(lo), float(hi))
    return DatasetTest(
        n_benchmark=int(x.size),
        n_reference=int(y.size),
        u=float(res.statistic),
        p_value=float(res.pvalue),
        auc=auc,
        auc_ci=ci,
        confidence=confidence,
        n_boot=n_boot,
        method=method,
    )


@dataclass(frozen=True)
class MembershipResult:
    """Per-item p-values and flags, and the dataset-level test."""

    p_values: NDArray[np.float64]
    """Conformal p-values, one per benchmark item (order of the input)."""
    q_values: NDArray[np.float64] | None
    """Benjamini-Hochberg q-values (None unless the test was built with ``fdr=True``)."""
    flags: NDArray[np.bool_]
    """``p <= alpha`` (or ``q <= alpha`` with ``fdr``)."""
    alpha: float
    fdr: bool
    n_reference: int
    dataset: DatasetTest

    @property
    def min_p(self) -> float:
        """Smallest attainable p-value, 1 / (R + 1): with ``alpha`` below it nothing can be
        flagged."""
        return 1.0 / (self.n_reference + 1)

    @property
    def attainable_rate(self) -> float:
        """The largest false-positive rate a flag at ``alpha`` can have: a conformal p-value
        takes values ``k / (R + 1)``, so ``P(p <= alpha) <= floor(alpha (R + 1)) / (R + 1)``."""
        r1 = self.n_reference + 1
        return math.floor(self.alpha * r1 + 1e-9) / r1

    @property
    def false_flags_95(self) -> int:
        """The 95th percentile of the number of items flagged when none leaked (at most that
        many in 95% of reference sets). Given the references, each unseen item is flagged
        with the same chance B, and B ~ Beta(k, R + 1 - k) over reference sets (k = floor(alpha
        (R + 1))): the count is beta-binomial, wider than the binomial of independent items
        (40 items and 40 references at 0.05: up to 6, where the binomial says 4; simulated,
        97% of 4,000 reference sets flagged 6 or fewer)."""
        n, r1 = int(self.p_values.size), self.n_reference + 1
        k = math.floor(self.alpha * r1 + 1e-9)
        if n == 0 or k == 0:
            return 0
        from scipy.stats import betabinom

        return int(betabinom(n, k, r1 - k).ppf(0.95))

    def error_rate_statement(self) -> str:
        n = int(self.p_values.size)
        none = (
            f"; with {self.n_reference} references the smallest p-value is "
            f"{self.min_p:.3g} > {self.alpha:g}, so no item can be flagged"
            if self.alpha < self.min_p
            else ""
        )
        if self.fdr:
            # BH flags the k smallest p-values when p_(k) <= k alpha / n, and no p-value is
            # below 1 / (R + 1): a flag needs at least this many items flagged together
            together = math.ceil(n * self.min_p / self.alpha - 1e-9) if n else 0
            few = (
                f"; with {self.n_reference} references and {plural(n, 'item')}, no item is "
                f"flagged unless at least {together} are, each at p <= "
                f"{together * self.alpha / n:.3g} (more references lower that)"
                if not none and together >= 2
                else ""
            )
            return (
                f"flag = Benjamini-Hochberg q <= {self.alpha:g}: among flagged items, the expected "
                f"fraction that are not more familiar than unseen text is <= {self.alpha:g} "
                f"(conformal p-values sharing one reference set are PRDS){none}{few}"
            )
        if none:  # a rate of 0 of 0 flags says nothing: say why and what would help
            need = math.ceil(1 / self.alpha - 1 - 1e-9)
            return (
                f"no item can be flagged: with {self.n_reference} references the smallest "
                f"conformal p-value is {self.min_p:.3g} > alpha {self.alpha:g} (give at least "
                f"{need} references)"
            )
        rate = self.attainable_rate
        return (
            f"flag = conformal p <= {self.alpha:g}: each item the model is no more familiar with "
            f"than with the references is flagged with probability <= {rate:.3g} "
            f"(false-positive rate; about {_expected(rate * n)} of {plural(n, 'item')} flagged "
            f"if none leaked, up to {self.false_flags_95} for 95% of reference sets: the items "
            "share one)"
            f"{none}"
        )

    def to_dict(self) -> dict[str, Any]:
        n = int(self.p_values.size)
        flagged = int(self.flags.sum())
        return {
            "null_hypothesis": ITEM_NULL,
            "p_value": "conformal: (1 + #{reference >= s}) / (R + 1), one-sided",
            "alpha": self.alpha,
            "fdr": self.fdr,
            "error_rate": self.error_rate_statement(),
            "n_items": n,
            "n_reference": self.n_reference,
            "min_attainable_p": self.min_p,
            "flagged": flagged,
            "flagged_fraction": flagged / n if n else None,
            "false_positive_rate_at_most": None if self.fdr else self.attainable_rate,
            "expected_false_flags_under_h0_at_most": None if self.fdr else self.attainable_rate * n,
            "false_flags_under_h0_95pct": None if self.fdr else self.false_flags_95,
            "dataset_test": self.dataset.to_dict(),
        }


@dataclass(frozen=True)
class MembershipTest:
    """Reference-calibrated membership test (scikit-learn shape: settings here, ``score``).

    >>> r = MembershipTest(alpha=0.25, n_boot=200).score([9.0, 0.5], [0.0, 1.0, 2.0])
    >>> r.p_values.tolist(), r.flags.tolist()
    ([0.25, 0.75], [True, False])
    """

    alpha: float = 0.05
    """Per-item level: false-positive rate (or FDR with ``fdr``) of the flags."""
    fdr: bool = False
    """Flag by Benjamini-Hochberg q-values instead of raw p-values."""
    n_boot: int = 2000
    """Bootstrap resamples of the AUC's CI."""
    seed: int = 0
    """Seed of the bootstrap."""

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ConfigError(f"--alpha {self.alpha}: must be between 0 and 1")
        if self.n_boot < 100:
            raise ConfigError(f"--bootstrap (n_boot) {self.n_boot}: must be at least 100")

    def score(
        self, benchmark: Sequence[float] | NDArray[Any], reference: Sequence[float] | NDArray[Any]
    ) -> MembershipResult:
        """Test every benchmark statistic against the reference statistics (finite values)."""
        x = np.asarray(benchmark, dtype=np.float64)
        y = np.asarray(reference, dtype=np.float64)
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            raise ValueError("statistics must be finite (drop excluded items first)")
        p = conformal_p_values(x, y)
        q = benjamini_hochberg(p) if self.fdr else None
        flags = (q if q is not None else p) <= self.alpha + 1e-12
        dataset = mann_whitney(x, y, n_boot=self.n_boot, seed=self.seed)
        return MembershipResult(p, q, flags, self.alpha, self.fdr, int(y.size), dataset)


def _expected(count: float) -> str:
    """An expected number of items: one decimal, two significant digits below 1 ('0.038',
    not '0.0')."""
    return f"{count:.1f}" if count >= 0.95 or count == 0 else f"{count:.2g}"
