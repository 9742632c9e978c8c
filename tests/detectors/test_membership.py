"""Reference-calibrated membership test: statistics, conformal p-values, Mann-Whitney, BH.

The error-rate guarantees are checked by simulation: under H0 the flagged fraction stays within
alpha + 3 standard errors; under a shift the test has power.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from scipy import stats as sps

from contamscope.detectors.membership import (
    MembershipTest,
    benjamini_hochberg,
    conformal_p_values,
    item_statistics,
    lowest_k_mean,
    mann_whitney,
)
from contamscope.errors import ConfigError

DRAWS = 2000


def _se(alpha: float, n: int) -> float:
    return math.sqrt(alpha * (1 - alpha) / n)


# --------------------------------------------------------------------------- statistics


def test_item_statistics_known_answers() -> None:
    lp = [-0.1, -2.0, -0.3, -5.0, -0.2, -1.0, -0.4, -0.6, -0.05, -3.0]
    mu = [-2.0] * 10
    sd = [0.5, 1.0, 2.0, 1.0, 0.25, 1.0, 1.0, 2.0, 1.0, 4.0]
    text = "The quick brown fox jumps over the lazy dog."
    s = item_statistics(lp, text, mean_logprob=mu, std_logprob=sd, k=0.2)
    assert s["loss"] == pytest.approx(np.mean(lp))
    assert s["min_k"] == pytest.approx((-5.0 + -3.0) / 2)  # lowest 2 of 10
    z = [(a - m) / d for a, m, d in zip(lp, mu, sd)]
    assert s["min_k_pp"] == pytest.approx(np.mean(sorted(z)[:2]))
    assert s["zlib"] == pytest.approx(sum(lp) / len(zlib.compress(text.encode())))
    # without vocabulary statistics Min-K%++ is unavailable, the rest unchanged
    assert item_statistics(lp, text)["min_k_pp"] is None


def test_min_k_pp_is_min_k_for_standard_vocabulary_stats() -> None:
    lp = list(np.linspace(-6, -0.1, 25))
    s = item_statistics(lp, "x", mean_logprob=[0.0] * 25, std_logprob=[1.0] * 25, k=0.2)
    assert s["min_k_pp"] == pytest.approx(s["min_k"])


def test_statistics_of_unscorable_text_are_none() -> None:
    assert set(item_statistics([], "").values()) == {None}
    assert set(item_statistics([-1.0, math.nan], "ab").values()) == {None}
    with pytest.raises(ConfigError):
        item_statistics([-1.0], "a", k=0.0)


def test_lowest_k_takes_at_least_one_token() -> None:
    assert lowest_k_mean([-3.0, -1.0], 0.2) == -3.0
    assert lowest_k_mean(list(range(10)), 1.0) == 4.5


# --------------------------------------------------------------------------- conformal p-values


def test_conformal_p_value_counts_ties_against_the_item() -> None:
    p = conformal_p_values([1.0, 1.5, 5.0], [1.0, 1.0, 2.0, 3.0])
    assert p.tolist() == [5 / 5, 3 / 5, 1 / 5]


@pytest.mark.parametrize("n_ref,alpha", [(19, 0.05), (50, 0.05), (99, 0.1), (30, 0.2)])
def test_conformal_false_positive_rate_by_simulation(n_ref: int, alpha: float) -> None:
    """H0: item and references exchangeable -> P(p <= alpha) <= alpha (exactly
    floor(alpha (R+1)) / (R+1) for continuous statistics)."""
    rng = np.random.default_rng(7)
    ref = rng.normal(size=(DRAWS, n_ref))
    item = rng.normal(size=DRAWS)
    flagged = np.array(
        [conformal_p_values([item[d]], ref[d])[0] <= alpha + 1e-12 for d in range(DRAWS)]
    )
    rate = flagged.mean()
    exact = math.floor(alpha * (n_ref + 1) + 1e-9) / (n_ref + 1)
    assert rate <= alpha + 3 * _se(alpha, DRAWS)
    assert abs(rate - exact) <= 3 * _se(exact, DRAWS)  # and it is not trivially conservative


def test_conformal_fpr_holds_with_heavy_ties() -> None:
    """Discrete statistics (many ties) stay valid: ties count against the item."""
    rng = np.random.default_rng(3)
    flagged = [
        conformal_p_values(rng.integers(0, 4, 1), rng.integers(0, 4, 40))[0] <= 0.05
        for _ in range(DRAWS)
    ]
    assert np.mean(flagged) <= 0.05 + 3 * _se(0.05, DRAWS)


def test_conformal_power_under_a_shift() -> None:
    rng = np.random.default_rng(11)
    ref = rng.normal(size=(DRAWS, 99))
    item = rng.normal(loc=3.0, size=DRAWS)
    power = np.mean([conformal_p_values([item[d]], ref[d])[0] <= 0.05 for d in range(DRAWS)])
    # true power: P(N(3,1) above the 95.x% point of N(0,1)) ~ 0.91
    assert power > 0.85


# --------------------------------------------------------------------------- dataset level


def test_mann_whitney_auc_and_u_agree_with_scipy() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(0.5, 1, 40), rng.normal(0, 1, 60)
    t = mann_whitney(x, y, n_boot=500)
    ref = sps.mannwhitneyu(x, y, alternative="greater")
    assert t.u == pytest.approx(ref.statistic)
    assert t.p_value == pytest.approx(ref.pvalue)
    assert t.auc == pytest.approx(ref.statistic / (40 * 60))
    assert t.auc_ci is not None and t.auc_ci[0] < t.auc < t.auc_ci[1]
    # ties count half
    assert mann_whitney([1.0], [1.0, 0.0], n_boot=100).auc == pytest.approx(0.75)


def test_mann_whitney_size_and_power_by_simulation() -> None:
    rng = np.random.default_rng(5)
    null = [
        mann_whitney(rng.normal(size=20), rng.normal(size=30), n_boot=100).p_value
        for _ in range(400)
    ]
    assert np.mean(np.array(null) <= 0.05) <= 0.05 + 3 * _se(0.05, 400)
    shifted = [
        mann_whitney(rng.normal(1.0, 1, 20), rng.normal(size=30), n_boot=100).p_value
        for _ in range(200)
    ]
    assert np.mean(np.array(shifted) <= 0.05) > 0.85


def _auc_coverage(n_bench: int, n_ref: int, sets: int, seed: int) -> float:
    """Share of ``sets`` data sets (shift 1 between unit normals: AUC = Phi(1/sqrt(2)) ~ 0.760)
    whose AUC interval covers the true AUC."""
    true = sps.norm.cdf(1 / math.sqrt(2))
    rng = np.random.default_rng(seed)
    hits = []
    for _ in range(sets):
        t = mann_whitney(rng.normal(1, 1, n_bench), rng.normal(0, 1, n_ref), n_boot=300)
        assert t.auc_ci is not None and "expanded" in t.to_dict()["auc_ci_method"]
        hits.append(t.auc_ci[0] <= true <= t.auc_ci[1])
    return float(np.mean(hits))


def test_auc_ci_covers_the_true_auc() -> None:
    assert _auc_coverage(60, 60, 200, 9) >= 0.95 - 3 * _se(0.95, 200)


def test_auc_interval_covers_from_few_items() -> None:
    """The plain percentile interval covered 85-90% of sets with 5-6 items (so it was shipped
    only from 10); the expanded one, at the smaller sample's size, holds its 95% there."""
    from contamscope.detectors.membership import MIN_CI_ITEMS

    assert MIN_CI_ITEMS == 5
    assert _auc_coverage(6, 40, 300, 4) >= 0.95 - 2 * _se(0.95, 300)


def test_no_auc_interval_from_too_few_items() -> None:
    """One benchmark item printed "AUC 0.700 [0.575, 0.850] ... p = 0.317": an interval that
    excludes 0.5 beside a test far from significant (helper audit). Under MIN_CI_ITEMS items
    the bootstrap covers far less than 95%, so there is no interval; from there it holds."""
    from contamscope.detectors.membership import MIN_CI_ITEMS

    rng = np.random.default_rng(2)
    y = rng.normal(size=40)
    assert mann_whitney([0.7], y, n_boot=100).auc_ci is None
    assert mann_whitney(rng.normal(size=MIN_CI_ITEMS - 1), y, n_boot=100).auc_ci is None
    assert mann_whitney(rng.normal(size=MIN_CI_ITEMS), y, n_boot=100).auc_ci is not None
    assert mann_whitney([0.7], y, n_boot=100).to_dict()["auc_ci"] is None


# --------------------------------------------------------------------------- BH and the test


def test_benjamini_hochberg_matches_scipy() -> None:
    p = np.random.default_rng(2).uniform(size=50) ** 2
    assert benjamini_hochberg(p) == pytest.approx(sps.false_discovery_control(p, method="bh"))


def test_bh_on_conformal_p_values_controls_fdr() -> None:
    """20 leaked items (shift 4) among 100, one shared reference set of 200: FDR <= alpha."""
    rng = np.random.default_rng(4)
    fdp = []
    for _ in range(300):
        ref = rng.normal(size=200)
        leaked = np.r_[np.ones(20, bool), np.zeros(80, bool)]
        items = rng.normal(size=100) + 4.0 * leaked
        r = MembershipTest(alpha=0.1, fdr=True, n_boot=100).score(items, ref)
        n_flag = r.flags.sum()
        fdp.append((r.flags & ~leaked).sum() / max(n_flag, 1))
    assert np.mean(fdp) <= 0.1 + 3 * np.std(fdp) / math.sqrt(len(fdp))


def test_membership_test_flags_and_statement() -> None:
    rng = np.random.default_rng(1)
    ref = rng.normal(size=99)
    items = np.r_[rng.normal(size=30), rng.normal(5, 1, 30)]
    r = MembershipTest(alpha=0.05, n_boot=200).score(items, ref)
    assert r.flags[30:].all()  # the shifted ones
    assert r.flags.tolist() == (r.p_values <= 0.05).tolist()
    d = r.to_dict()
    assert d["flagged"] == int(r.flags.sum()) and d["n_reference"] == 99
    assert "<= 0.05" in d["error_rate"] and d["null_hypothesis"].startswith("H0")
    assert d["dataset_test"]["auc"] > 0.5 and d["dataset_test"]["p_value"] < 0.05


def test_too_few_references_cannot_flag_and_says_so() -> None:
    r = MembershipTest(alpha=0.05, n_boot=100).score([100.0], [0.0] * 10)
    assert r.p_values[0] == pytest.approx(1 / 11) and not r.flags[0]
    # it said "flagged with probability <= 0 (... about 0.0 of 1 items ...)" before the reason
    assert r.error_rate_statement() == (
        "no item can be flagged: with 10 references the smallest conformal p-value is 0.0909 > "
        "alpha 0.05 (give at least 19 references)"
    )
    ok = MembershipTest(alpha=0.05, n_boot=100).score([100.0], [0.0] * 19)
    assert ok.flags[0] and "flagged with probability <= 0.05" in ok.error_rate_statement()


def test_fdr_with_few_references_says_how_many_items_a_flag_needs() -> None:
    """With --fdr, 20 references and 20 items nothing could be flagged unless every item
    was, and the run said nothing of it (membership QA): q 0.136 at best, flags 0."""
    rng = np.random.default_rng(0)
    few = MembershipTest(alpha=0.05, fdr=True, n_boot=100).score(
        np.r_[rng.normal(5, 1, 19), 0.0], rng.normal(size=20)
    )
    assert not few.flags.any()  # 19 of 20 at the smallest p, 1/21: q = 20/21/19 > 0.05
    assert few.error_rate_statement().endswith(
        "; with 20 references and 20 items, no item is flagged unless at least 20 are, each at "
        "p <= 0.05 (more references lower that)"
    )
    many = MembershipTest(alpha=0.05, fdr=True, n_boot=100).score(
        np.r_[rng.normal(5, 1, 2), np.zeros(18)], rng.normal(size=2000)
    )
    assert many.flags.sum() == 2 and many.error_rate_statement().endswith("are PRDS)")


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigError):
        MembershipTest(alpha=1.5)
    with pytest.raises(ConfigError):
        conformal_p_values([1.0], [])
    with pytest.raises(ValueError):
        MembershipTest().score([math.nan], [1.0])


def test_no_auc_interval_with_fewer_than_five_references() -> None:
    """One reference gave the interval [1.000, 1.000] beside p = 0.111: the bootstrap's
    minimum and maximum, which says nothing (the interval rule reads the smaller sample)."""
    from contamscope.detectors.membership import MIN_CI_ITEMS, mann_whitney

    bench = [float(i) for i in range(1, 9)]
    one = mann_whitney(bench, [0.5], n_boot=200)
    assert one.auc == 1.0 and one.p_value == pytest.approx(1 / 9) and one.auc_ci is None
    assert mann_whitney(bench, [0.5, 3.5, 4.5, 5.5, 9.5][:MIN_CI_ITEMS], n_boot=200).auc_ci


def test_the_spread_of_false_flags_is_stated_for_the_shared_reference_set() -> None:
    """The terminal gave the expected count of false flags only (1.9 of 40); the items share
    one reference set, so the count is beta-binomial, far wider than a binomial: simulated,
    the stated 95th percentile holds over fresh reference sets."""
    rng = np.random.default_rng(7)
    test = MembershipTest(alpha=0.05, n_boot=100)
    first = test.score(rng.normal(size=40), rng.normal(size=40))
    assert first.false_flags_95 == 6  # the binomial of 40 independent items at 2/41: 4
    said = first.error_rate_statement()
    assert "about 2.0 of 40 items flagged if none leaked, up to 6 for 95% of reference sets" in said
    assert first.to_dict()["false_flags_under_h0_95pct"] == 6
    counts = [
        int(test.score(rng.normal(size=40), rng.normal(size=40)).flags.sum()) for _ in range(800)
    ]
    assert 0.94 <= np.mean(np.array(counts) <= 6) <= 0.99
    assert np.mean(np.array(counts) <= 4) < 0.93  # the binomial's bound would not hold
