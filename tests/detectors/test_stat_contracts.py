"""Documented contracts of the statistics (stats.py, membership.py, compare.py), each checked
against a value computed here, independently of the code under test (mutation QA): scipy, an
enumeration, or the formula the docstring states, written out."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats as sps

from contamscope.detectors import PermutationItemScore, score_item, summarize
from contamscope.detectors.compare import SIGN_FLIP_DRAWS, sign_flip_test
from contamscope.detectors.membership import MembershipTest, bootstrap_aucs, mann_whitney
from contamscope.detectors.permutation import Algorithm2
from contamscope.detectors.stats import (
    alg2_against_reference,
    cluster_ci,
    clustered_interval,
    expanded_tail,
    randomization_test,
    tail_draws,
)


class _NoOutliers(Algorithm2):
    """Algorithm 2 with every outlier score 0 (no IsolationForest: fast, never flags)."""

    def outlier_scores(self, logprobs: Any) -> NDArray[np.float64]:
        return np.zeros(np.asarray(logprobs).size)


def _item(logprobs: Any, n_options: int) -> PermutationItemScore:
    lp = np.asarray(logprobs, dtype=np.float64)
    exhaustive = lp.size == math.factorial(n_options)
    return score_item(lp, n_options=n_options, exhaustive=exhaustive, alg2=_NoOutliers())


def _flagged(flag: bool) -> PermutationItemScore:
    """An item whose Algorithm-2 flag at delta -0.2 is ``flag`` (as a stored record reads)."""
    d = _item([-10.0, -10.1, -10.2, -10.3, -10.4, -10.5], 3).to_dict()
    return PermutationItemScore.from_dict({**d, "alg2": {"-0.2": flag}})


# --------------------------------------------------------------------------- stats.py


def test_reference_test_is_one_sided_benchmark_rate_above_reference() -> None:
    """alg2_against_reference: "Fisher's exact one-sided test that the benchmark's rate is
    higher": P(X >= k) for X hypergeometric (the benchmark's share of all flags, margins
    fixed). A benchmark rate BELOW the reference rate is no evidence (mutation QA)."""
    # benchmark 0 of 10 flagged, reference 8 of 10: P(X >= 0) = 1
    low = alg2_against_reference(
        [_flagged(False)] * 10, [_flagged(True)] * 8 + [_flagged(False)] * 2
    )
    assert low["-0.2"]["p_value"] == pytest.approx(1.0)
    # benchmark 8 of 10, reference 0 of 10: X ~ Hypergeom(20 items, 8 flags, 10 drawn)
    high = alg2_against_reference(
        [_flagged(True)] * 8 + [_flagged(False)] * 2, [_flagged(False)] * 10
    )
    expected = float(sps.hypergeom.sf(8 - 1, 20, 8, 10))
    assert high["-0.2"]["p_value"] == pytest.approx(expected, rel=1e-9)
    assert high["-0.2"]["reference_count"] == 0 and high["-0.2"]["reference_n"] == 10


def test_cluster_ci_never_narrower_than_the_independent_items_t_interval() -> None:
    """cluster_ci: "the variance taken as at least the one counting items as independent
    (grouping never narrows the interval)". Negatively correlated pairs make the cluster-robust
    variance small; the interval must still contain m +- t_{0.975, n-1} sd / sqrt(n)
    (mutation QA)."""
    d = np.array([2.0, -2.0, 1.5, -1.5, 0.5, 0.1, 0.3, 0.2])
    units = [[0, 1], [2, 3], [4], [5], [6], [7]]
    ci = cluster_ci(d, units)
    assert ci is not None
    n, m = d.size, float(d.mean())
    half = float(sps.t.ppf(0.975, n - 1)) * float(np.std(d, ddof=1)) / math.sqrt(n)
    assert ci[0] <= m - half + 1e-12 and ci[1] >= m + half - 1e-12
    assert ci[0] < m < ci[1]


def test_clustered_interval_contains_the_exact_interval_when_groups_are_anticorrelated() -> None:
    """clustered_interval: the design effect is "taken as at least 1 so that grouping never
    narrows the interval". Pairs holding one flag each (negatively correlated) must still give
    an interval containing the exact Clopper-Pearson one of k / n (mutation QA)."""
    flags = [bool(f) for f in (1, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0)]
    units = [[0, 1], [2, 3], [4, 5], [6], [7], [8], [9], [10], [11]]
    lo, hi = clustered_interval(flags, units)
    cp = sps.binomtest(sum(flags), len(flags)).proportion_ci(0.95, method="exact")
    assert lo <= cp.low + 1e-12 and hi >= cp.high - 1e-12


@pytest.mark.parametrize("n", [2, 3, 5, 12, 100])
def test_expanded_tail_is_its_stated_formula(n: int) -> None:
    """expanded_tail: "Phi(-sqrt(n / (n - 1)) * t_{n-1, (1 - level) / 2})", below (1 - level)
    / 2 and tending to it as n grows (mutation QA)."""
    t = float(sps.t.ppf(0.975, n - 1))
    expected = float(sps.norm.cdf(-math.sqrt(n / (n - 1)) * t))
    assert expanded_tail(n) == pytest.approx(expected, rel=1e-9, abs=0)
    assert expanded_tail(n) < 0.025
    level = 0.9
    t90 = float(sps.t.ppf(0.95, n - 1))
    assert expanded_tail(n, level) == pytest.approx(
        float(sps.norm.cdf(-math.sqrt(n / (n - 1)) * t90)), rel=1e-9, abs=0
    )


def test_randomization_null_range_is_the_central_95_percent_of_the_enumerated_sums() -> None:
    """randomization_test: "the central 95% range of the sum under H0 (its 2.5% and 97.5%
    quantiles over the same assignments)"; GapTest.null_range: "an observed mean above it has
    p <= 0.025 (exactly so when enumerated)". Checked against every assignment enumerated here:
    at most 2.5% of sums lie above the upper end, more than 2.5% at or above it (mutation
    QA)."""
    rng = np.random.default_rng(11)
    for _ in range(5):
        nulls = [rng.normal(size=6) for _ in range(4)]  # 6^4 = 1296 assignments
        sums = np.array([sum(c) for c in itertools.product(*nulls)])
        _, method, count, (lo, hi) = randomization_test(nulls)
        assert method == "randomization (exact)" and count == sums.size
        tol = 1e-9
        assert np.mean(sums > hi + tol) <= 0.025 < np.mean(sums >= hi - tol)
        assert np.mean(sums < lo - tol) <= 0.025 < np.mean(sums <= lo + tol)
    # the same range on the mean-gap scale, from items' own gaps
    items = [_item(rng.normal(size=24), 4) for _ in range(3)]  # 24^3 assignments
    g = summarize(items).gap
    assert g is not None and g.null_range is not None and g.method == "randomization (exact)"
    nulls = [np.asarray(it.gap_null) for it in items]
    means = np.add.outer(np.add.outer(nulls[0], nulls[1]), nulls[2]).ravel() / 3
    lo, hi = g.null_range
    assert np.mean(means > hi + 1e-9) <= 0.025 < np.mean(means >= hi - 1e-9)
    assert np.mean(means < lo - 1e-9) <= 0.025 < np.mean(means <= lo + 1e-9)


def test_rank_count_includes_items_whose_p_value_equals_alpha() -> None:
    """RankSummary.count: "Items with p_value <= alpha". With 24 orders and alpha = 3/24, an
    item whose original ranks 3rd has p = #{lp >= lp_0} / N = 3/24 = alpha exactly and counts
    (mutation QA)."""
    lp = -np.arange(24, dtype=float)
    lp[[0, 2]] = lp[[2, 0]]  # the original takes the 3rd largest value
    top = -np.arange(24, dtype=float)  # the original is the largest
    low = lp[::-1].copy()  # the original is the smallest
    items = [_item(lp, 4), _item(lp, 4), _item(top, 4), _item(low, 4)]
    alpha = 3 / 24
    exact_p = [Fraction(int(np.count_nonzero(x >= x[0])), x.size) for x in (lp, lp, top, low)]
    assert exact_p == [Fraction(3, 24), Fraction(3, 24), Fraction(1, 24), Fraction(1)]
    expected_count = sum(p <= Fraction(3, 24) for p in exact_p)
    rank = summarize(items, alpha=alpha).rank
    assert rank is not None
    assert rank.count == expected_count == 3
    assert rank.rate == pytest.approx(3 / 4)


def test_rank_mean_p_value_null_is_the_mean_of_n_plus_one_over_two_n() -> None:
    """RankSummary.mean_p_value_null: "Mean p-value expected under H0 without ties,
    mean((N_i + 1) / (2 N_i))": the mean of 1/N, 2/N, ..., N/N per item, averaged over items
    with 6 and with 24 orders (mutation QA)."""
    rng = np.random.default_rng(0)
    items = [_item(rng.normal(size=6), 3) for _ in range(3)]
    items += [_item(rng.normal(size=24), 4) for _ in range(2)]
    per_item = [float(np.mean(np.arange(1, n + 1) / n)) for n in (6, 6, 6, 24, 24)]
    rank = summarize(items).rank
    assert rank is not None
    assert rank.mean_p_value_null == pytest.approx(float(np.mean(per_item)), rel=1e-12)
    assert rank.mean_p_value_null == pytest.approx((3 * 7 / 12 + 2 * 25 / 48) / 5, rel=1e-12)


# --------------------------------------------------------------------------- membership.py


def test_auc_interval_is_the_expanded_percentile_interval() -> None:
    """mann_whitney / DatasetTest.auc_ci: "expanded stratified bootstrap percentile (Hesterberg
    2015; at the smaller sample's size)": the bootstrap AUCs' quantiles at Phi(-sqrt(n/(n-1))
    t_{n-1, 0.025}), n the smaller sample, so strictly wider than the plain 2.5%-97.5% one
    (mutation QA)."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(0.5, 1, 6), rng.normal(0, 1, 40)
    t = mann_whitney(x, y, n_boot=2000, seed=0)
    assert t.auc_ci is not None
    n = 6
    tail = float(sps.norm.cdf(-math.sqrt(n / (n - 1)) * float(sps.t.ppf(0.975, n - 1))))
    boots = bootstrap_aucs(x, y, tail_draws(2000, tail, 46), 0)  # 25 beyond each end
    lo, hi = np.quantile(boots, [tail, 1 - tail])
    assert t.auc_ci == pytest.approx((float(lo), float(hi)), rel=1e-12)
    plain_lo, plain_hi = np.quantile(boots, [0.025, 0.975])
    assert t.auc_ci[0] < plain_lo and t.auc_ci[1] > plain_hi


def test_attainable_rate_is_floor_alpha_r_plus_one_over_r_plus_one() -> None:
    """MembershipResult.attainable_rate: "a conformal p-value takes values k / (R + 1), so
    P(p <= alpha) <= floor(alpha (R + 1)) / (R + 1)": with 30 references and alpha 0.05 the
    largest attainable p-value at or below alpha is 1/31, not 0.05 (mutation QA)."""
    ref = np.linspace(0, 1, 30)
    r = MembershipTest(alpha=0.05, n_boot=200).score(np.linspace(0, 1, 10), ref)
    r1 = ref.size + 1
    support = [Fraction(k, r1) for k in range(1, r1 + 1)]
    largest = max(p for p in support if p <= Fraction(5, 100))
    assert largest == Fraction(1, 31)
    assert r.attainable_rate == pytest.approx(float(largest), rel=1e-12)
    d = r.to_dict()
    assert d["false_positive_rate_at_most"] == pytest.approx(1 / 31, rel=1e-12)
    assert d["expected_false_flags_under_h0_at_most"] == pytest.approx(10 / 31, rel=1e-12)


def test_mann_whitney_is_exact_for_few_items_without_ties() -> None:
    """mann_whitney uses "scipy's own rule for method='auto'": exact when a sample has at most
    8 values and nothing is tied. 3 items above all of 20 references: exactly 1 of the
    C(23, 3) equally likely placements is as extreme, p = 1 / 1771 (mutation QA)."""
    x = [3.05, 4.1, 5.2]
    y = [0.1 * i for i in range(20)]
    t = mann_whitney(x, y, n_boot=200)
    assert t.method == "exact"
    assert t.p_value == pytest.approx(1 / math.comb(23, 3), rel=1e-9)
    # a less extreme placement: scipy's exact distribution
    x2 = [0.55, 1.25, 3.0]
    t2 = mann_whitney(x2, y, n_boot=200)
    ref = sps.mannwhitneyu(x2, y, alternative="greater", method="exact").pvalue
    assert t2.method == "exact" and t2.p_value == pytest.approx(float(ref), rel=1e-9)


# --------------------------------------------------------------------------- compare.py


def test_monte_carlo_sign_flip_p_value_is_never_zero() -> None:
    """sign_flip_test: Monte Carlo beyond SIGN_FLIP_EXACT differences, "p = (hits + 1) /
    (draws + 1)", so no p-value is below 1 / (SIGN_FLIP_DRAWS + 1) even when no draw reaches
    the observed sum (30 equal differences: P = 2^-30) (mutation QA)."""
    r = sign_flip_test([1.0] * 30)
    assert r["method"] == "sign flip (Monte Carlo)" and r["n_resamples"] == SIGN_FLIP_DRAWS
    floor = 1 / (SIGN_FLIP_DRAWS + 1)
    assert r["b_greater"] >= floor - 1e-15
    assert r["two_sided"] >= 2 * floor - 1e-15
    assert r["a_greater"] == pytest.approx(1.0)  # every sum is <= the largest possible one
