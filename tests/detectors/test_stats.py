"""Known-answer and simulation tests for the dataset-level permutation statistics."""

from __future__ import annotations

import itertools
import json
import math
import time
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats as sps

from contamscope.detectors import (
    UNANCHORED_NULL_NOTE,
    Algorithm2,
    PermutationItemScore,
    poisson_binomial_sf,
    rank_p_value,
    score_item,
    summarize,
    wilson_interval,
)


class _FastAlg2(Algorithm2):
    """Algorithm 2 with a cheap stand-in outlier score, so simulations of 1000s of items are fast.

    The score is minus the maximum's lead over the runner-up in standard deviations (scaled), so an
    isolated maximum scores low, as with IsolationForest; summaries only read the stored numbers.
    """

    def outlier_scores(self, logprobs: object) -> NDArray[np.float64]:
        lp = np.asarray(logprobs, dtype=np.float64)
        srt = np.sort(lp)
        lead = (srt[-1] - srt[-2]) / (lp.std() + 1e-12)
        out = np.zeros_like(lp)
        out[lp == srt[-1]] = -0.3 * lead
        return out


def _items(
    n_items: int, n_orders: int = 24, *, leak: float = 0.0, seed: int = 0, n_options: int = 4
) -> list[PermutationItemScore]:
    """Simulate items: N(0,1) log-probs; a fraction ``leak`` gets the original pushed to the top."""
    rng = np.random.default_rng(seed)
    alg2 = _FastAlg2()
    out = []
    exhaustive = n_orders == math.factorial(n_options)
    for i in range(n_items):
        lp = rng.normal(size=n_orders)
        if i < leak * n_items:
            lp[0] = lp.max() + 1.0
        out.append(score_item(lp, n_options=n_options, exhaustive=exhaustive, alg2=alg2))
    return out


# --------------------------------------------------------------------------- helpers


def test_wilson_interval_known_values() -> None:
    lo, hi = wilson_interval(0, 10)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson_interval(5, 100)
    assert (lo, hi) == pytest.approx((0.02154, 0.11175), abs=1e-5)
    # symmetry: the interval for k failures mirrors the one for k successes
    a, b = wilson_interval(3, 40)
    c, d = wilson_interval(37, 40)
    assert (a, b) == pytest.approx((1 - d, 1 - c))


def test_wilson_interval_rejects_bad_input() -> None:
    for k, n in [(1, 0), (-1, 5), (6, 5)]:
        with pytest.raises(ValueError):
            wilson_interval(k, n)


@pytest.mark.parametrize(("k", "n", "p"), [(0, 50, 0.1), (7, 50, 0.1), (60, 1000, 1 / 24)])
def test_poisson_binomial_equals_binomial_for_equal_probs(k: int, n: int, p: float) -> None:
    assert poisson_binomial_sf(k, [p] * n) == pytest.approx(sps.binom.sf(k - 1, n, p), rel=1e-10)


def test_poisson_binomial_against_brute_force() -> None:
    probs = [0.05, 0.3, 0.3, 0.9, 1 / 24, 1 / 120, 0.5, 0.0]
    pmf = np.zeros(len(probs) + 1)
    for bits in itertools.product([0, 1], repeat=len(probs)):
        w = math.prod(p if b else 1 - p for p, b in zip(probs, bits, strict=True))
        pmf[sum(bits)] += w
    for k in range(len(probs) + 2):
        assert poisson_binomial_sf(k, probs) == pytest.approx(pmf[k:].sum(), abs=1e-14)


def test_poisson_binomial_edges() -> None:
    assert poisson_binomial_sf(0, []) == 1.0
    assert poisson_binomial_sf(1, []) == 0.0
    assert poisson_binomial_sf(2, [1.0, 1.0, 0.0]) == 1.0
    assert poisson_binomial_sf(3, [1.0, 1.0, 0.0]) == 0.0
    with pytest.raises(ValueError):
        poisson_binomial_sf(1, [0.5, 1.5])


def test_poisson_binomial_fast_on_15000_distinct_probabilities() -> None:
    probs = np.random.default_rng(0).uniform(0.0, 0.1, 15_000)
    t0 = time.perf_counter()
    p = poisson_binomial_sf(800, probs)
    assert time.perf_counter() - t0 < 1.0
    # normal approximation as a sanity check of the value
    mu, sd = probs.sum(), math.sqrt((probs * (1 - probs)).sum())
    assert p == pytest.approx(sps.norm.sf((799.5 - mu) / sd), abs=0.01)


# --------------------------------------------------------------------------- calibration


def test_rank_p_values_are_calibrated_under_h0() -> None:
    """Exhaustive, N = 24: P(p <= 0.05) = floor(0.05 * 24) / 24 = 1/24 and P(p <= k/24) = k/24."""
    rng = np.random.default_rng(1)
    lps = rng.normal(size=(20_000, 24))
    p = np.array([rank_p_value(row, exhaustive=True) for row in lps])
    se = math.sqrt((1 / 24) * (23 / 24) / p.size)
    assert abs(np.mean(p <= 0.05) - 1 / 24) < 4 * se
    for k in (3, 6, 12):
        assert abs(np.mean(p <= k / 24 + 1e-12) - k / 24) < 0.015


def test_monte_carlo_p_values_are_calibrated_under_h0() -> None:
    """MC: original + K = 49 orders drawn from 720 exchangeable ones; P(p <= 0.05) = 2/50."""
    rng = np.random.default_rng(2)
    hits = 0
    n_sim = 5_000
    for _ in range(n_sim):
        pool = rng.normal(size=720)  # all 720 orders of 6 options; pool[0] is the original
        others = rng.choice(np.arange(1, 720), size=49, replace=False)
        hits += rank_p_value(np.r_[pool[0], pool[others]], exhaustive=False) <= 0.05
    se = math.sqrt(0.04 * 0.96 / n_sim)
    assert abs(hits / n_sim - 0.04) < 4 * se


# --------------------------------------------------------------------------- summarize


def test_summary_under_h0() -> None:
    s = summarize(_items(1000, seed=10))
    assert s.n_items == 1000 and s.n_exhaustive == 1000
    assert s.alg1 is not None and s.rank is not None and s.gap is not None
    assert s.alg1.chance == pytest.approx(1 / 24)
    assert abs(s.alg1.rate - 1 / 24) < 4 * math.sqrt((1 / 24) * (23 / 24) / 1000)
    assert s.alg1.p_value > 0.01
    assert s.alg1.excess_ci[0] < 0 < s.alg1.excess_ci[1]
    assert s.rank.expected == pytest.approx(1 / 24)
    assert s.rank.p_value > 0.01
    assert s.rank.mean_p_value == pytest.approx(s.rank.mean_p_value_null, abs=0.03)
    assert s.gap.p_value is not None and s.gap.p_value > 0.01
    assert s.gap.ci is not None and s.gap.ci[0] < 0 < s.gap.ci[1]
    (a2,) = s.alg2
    assert a2.anchored_p_value is not None and a2.anchored_p_value > 0.01


def test_summary_detects_injected_leakage() -> None:
    s = summarize(_items(1000, leak=0.2, seed=10))
    assert s.alg1 is not None and s.rank is not None and s.gap is not None
    assert s.alg1.p_value < 1e-20
    assert s.alg1.excess_ci[0] > 0.1
    assert s.rank.p_value < 1e-20
    assert s.gap.p_value == pytest.approx(1 / 20_001)  # no draw reached it: the smallest MC p
    assert s.gap.mean is not None and s.gap.mean > 0
    (a2,) = s.alg2
    assert a2.anchored_p_value is not None and a2.anchored_p_value < 1e-10
    assert a2.anchored_count > 150


def test_summary_alg1_uses_binomtest_when_all_n_equal() -> None:
    items = _items(300, seed=3)
    s = summarize(items)
    assert s.alg1 is not None
    k = s.alg1.count
    assert s.alg1.p_value == pytest.approx(sps.binom.sf(k - 1, 300, 1 / 24), rel=1e-9)


def test_summary_mixed_n_uses_poisson_binomial() -> None:
    items = _items(200, seed=4) + _items(100, n_orders=120, n_options=5, seed=5)
    s = summarize(items, alpha=0.05)
    assert s.alg1 is not None and s.rank is not None
    null = [1 / 24] * 200 + [1 / 120] * 100
    assert s.alg1.chance == pytest.approx(np.mean(null))
    assert s.alg1.p_value == pytest.approx(poisson_binomial_sf(s.alg1.count, null), rel=1e-12)
    levels = [1 / 24] * 200 + [6 / 120] * 100  # floor(0.05 N) / N
    assert s.rank.expected == pytest.approx(np.mean(levels))
    assert s.rank.p_value == pytest.approx(poisson_binomial_sf(s.rank.count, levels), rel=1e-12)
    # default thresholds differ by number of options: each summarised over its own items
    by_delta = {a.delta: a.n_items for a in s.alg2}
    assert by_delta == {-0.25: 100, -0.2: 200}


def test_summary_rank_expected_level_is_floor_alpha_n_over_n() -> None:
    s = summarize(_items(50, n_orders=120, n_options=5, seed=6), alpha=0.1)
    assert s.rank is not None and s.rank.expected == pytest.approx(12 / 120)
    s = summarize(_items(50, n_orders=6, n_options=3, seed=6), alpha=0.05)
    assert s.rank is not None and s.rank.expected == 0.0 and s.rank.p_value == 1.0


def test_summary_alg2_numbers() -> None:
    items = _items(400, leak=0.1, seed=8)
    s = summarize(items, deltas=[-0.2, -0.9])
    a, b = sorted(s.alg2, key=lambda x: x.delta, reverse=True)
    assert a.delta == -0.2 and a.n_items == 400
    assert a.count == sum(it.alg2_flags[-0.2] for it in items)
    assert a.anchored_count == sum(it.alg2_anchored[-0.2] for it in items)
    null = [it.null_anchored[-0.2] for it in items]
    assert a.anchored_null_expected == pytest.approx(np.mean(null))
    assert a.anchored_p_value == pytest.approx(poisson_binomial_sf(a.anchored_count, null))
    assert a.rate_ci is not None and a.rate_ci[0] <= a.rate <= a.rate_ci[1]  # type: ignore[operator]
    assert a.null_rate_note == UNANCHORED_NULL_NOTE and "clean" in a.null_rate_note
    assert b.delta == -0.9 and b.n_items == 0 and b.rate is None and b.anchored_p_value is None


def test_summary_zero_items() -> None:
    s = summarize([])
    assert s.n_items == 0 and s.alg1 is None and s.rank is None and s.gap is None
    assert s.alg2 == ()
    d = json.loads(json.dumps(s.to_dict()))
    assert d["n_items"] == 0 and d["alg1"] is None


def _without_logprobs(item: PermutationItemScore) -> PermutationItemScore:
    """As records stored without their log-probs are read back: no randomization null."""
    d = {k: v for k, v in item.to_dict().items() if k != "logprobs"}
    out = PermutationItemScore.from_dict(d)
    assert not out.gap_null
    return out


def test_summary_single_item() -> None:
    (item,) = _items(1, seed=1)
    s = summarize([item])
    assert s.n_items == 1 and s.gap is not None and s.alg1 is not None
    assert 0.0 <= s.alg1.p_value <= 1.0
    # one item: the randomization test is exact over its 24 orders (the t-test is undefined)
    null = np.asarray(item.gap_null)
    assert s.gap.method == "randomization (exact)" and s.gap.n_resamples == 24
    assert s.gap.p_value == pytest.approx(float(np.mean(null >= null[0] - 1e-9)))
    assert s.gap.ci is None and s.gap.t is None and s.gap.reason is None
    t = summarize([_without_logprobs(item)]).gap
    assert t is not None and t.p_value is None and t.reason == "needs at least 2 items"


def test_summary_identical_gaps() -> None:
    item = _items(1, seed=2)[0]
    s = summarize([item] * 5)
    assert s.gap is not None and s.gap.ci is None and s.gap.t is None
    assert s.gap.p_value is not None and s.gap.method.startswith("randomization")
    t = summarize([_without_logprobs(item)] * 5).gap
    assert t is not None and t.p_value is None and t.method == "t-test"
    assert t.reason is not None and "identical" in t.reason


def test_gap_test_known_answer() -> None:
    base = _items(3, seed=9)
    items = [
        PermutationItemScore.from_dict({**it.to_dict(), "gap": g})
        for it, g in zip(base, (1.0, 2.0, 3.0), strict=True)
    ]
    s = summarize(items)
    assert s.gap is not None and s.gap.mean == pytest.approx(2.0)
    assert s.gap.t == pytest.approx(2.0 / (1.0 / math.sqrt(3)))
    assert s.gap.p_value == pytest.approx(sps.t.sf(2.0 * math.sqrt(3), 2))
    half = sps.t.ppf(0.975, 2) / math.sqrt(3)
    assert s.gap.ci == pytest.approx((2.0 - half, 2.0 + half))


def test_summary_to_dict_is_json() -> None:
    s = summarize(_items(30, leak=0.3, seed=12))
    d = json.loads(json.dumps(s.to_dict()))
    assert set(d) == {"n_items", "alpha", "n_exhaustive", "alg1", "rank", "gap", "alg2"}
    assert "-0.2" in d["alg2"] and d["alg2"]["-0.2"]["n_items"] == 30
    assert isinstance(d["alg1"]["rate_ci"], list)


def test_summarize_rejects_bad_alpha() -> None:
    with pytest.raises(ValueError):
        summarize([], alpha=1.5)


def _item_of(logprobs: Any, n_options: int) -> PermutationItemScore:
    lp = np.asarray(logprobs, dtype=float)
    d = score_item(lp, n_options=n_options, exhaustive=True, alg2=_FastAlg2()).to_dict()
    return PermutationItemScore.from_dict({**d, "logprobs": lp.tolist()})  # as a stored record


def test_gap_test_is_an_exact_randomization_test_for_few_items() -> None:
    """Two orders per item: each gap is +-d with probability 1/2, so the 8 assignments of
    +-1 +-2 +-3 give the p-value by hand: P(sum >= 1 + 2 - 3 = 0) = 5/8."""
    items = [_item_of([0.0, -1.0], 2), _item_of([0.0, -2.0], 2), _item_of([-3.0, 0.0], 2)]
    assert [it.gap_null for it in items] == [(1.0, -1.0), (2.0, -2.0), (-3.0, 3.0)]
    g = summarize(items).gap
    assert g is not None and g.method == "randomization (exact)" and g.n_resamples == 8
    assert g.p_value == pytest.approx(5 / 8)
    assert g.t is not None and g.ci is not None  # the t statistic and interval stay
    # the null range: the 8 equally likely sums are -6, -4, -2, 0, 0, 2, 4, 6; their 2.5% and
    # 97.5% quantiles are -6 and 6, a mean gap of -2 and +2
    assert g.null_range == pytest.approx((-2.0, 2.0))


def test_the_gap_null_range_agrees_with_its_p_value() -> None:
    """A mean gap of +3.6 nats showed a t interval [-0.45, +7.64] beside p = 0.004 (journey
    audit): two procedures. The null range comes from the p-value's own assignments, so a
    mean above it always has p <= 0.025, and one inside it p >= 0.025 (exactly, when
    enumerated; here 24^3 assignments)."""
    rng = np.random.default_rng(7)
    seen = set()
    for trial in range(40):
        items = []
        for _ in range(3):
            lp = rng.normal(size=24) * rng.uniform(0.5, 3.0)
            if trial % 2:  # half of them with the original pushed up
                lp[0] = lp.max() + rng.uniform(0, 2)
            items.append(_item_of(lp, 4))
        g = summarize(items).gap
        assert g is not None and g.null_range is not None and g.p_value is not None
        lo, hi = g.null_range
        assert lo < 0 < hi
        above = g.mean is not None and g.mean > hi + 1e-12
        assert (g.p_value <= 0.025) if above else (g.p_value >= 0.025 or g.mean >= hi - 1e-9)
        seen.add(above)
    assert seen == {True, False}


def test_gap_test_few_similar_items_is_not_a_false_signal() -> None:
    """Three items whose original sits at rank 9 of 24 with nearly equal gaps: a t-test sees a
    tiny sample variance and calls it significant; under H0 such gaps are common."""
    base = -np.arange(24, dtype=float)  # original at index 0 takes the 9th largest value
    base[[0, 8]] = base[[8, 0]]
    items = [_item_of(base * s, 4) for s in (1.0, 1.01, 0.99)]
    assert [it.rank for it in items] == [9, 9, 9]
    gaps = [it.gap for it in items]
    assert sps.ttest_1samp(gaps, 0.0, alternative="greater").pvalue < 0.001
    g = summarize(items).gap
    assert g is not None and g.method == "randomization (exact)" and g.n_resamples == 24**3
    assert g.p_value is not None and g.p_value > 0.1


def test_gap_test_monte_carlo_and_t_test_ranges() -> None:
    rng = np.random.default_rng(3)
    five = [_item_of(rng.normal(size=120), 5) for _ in range(3)]  # 120**3 assignments
    g = summarize(five).gap
    assert g is not None and g.method == "randomization (Monte Carlo)"
    assert g.n_resamples == 20_000 and 0 < g.p_value <= 1  # type: ignore[operator]
    assert summarize(five).gap == g  # seeded: the same p-value every time
    # at any number of items: the t-test was used from 200 items on, and a long lower tail of
    # the order log-probs made it flag 21% of clean data sets at p <= 0.05 (200 items)
    many = [_item_of(-40 - np.exp(rng.normal(0, 2, size=24)), 4) for _ in range(300)]
    g = summarize(many).gap
    assert g is not None and g.method == "randomization (Monte Carlo)"
    stored = [PermutationItemScore.from_dict(it.to_dict()) for it in _items(5, seed=4)]
    assert summarize(stored).gap.method == "t-test"  # type: ignore[union-attr]  # no log-probs


def test_rate_intervals_agree_with_the_exact_tests() -> None:
    """A Wilson interval of 1 flag in 4 items excluded chance (1/24) while the exact p was
    0.16. The Clopper-Pearson interval inverts the exact test: whenever it excludes the null
    rate, the exact (Poisson-binomial) p-value is below 0.025, for every count of flags."""
    from contamscope.detectors.stats import exact_interval

    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 4, 5, 8, 12, 20, 50):
        for _ in range(20):  # per-item null probabilities as ties and 4/5-option items make
            null = rng.choice([1 / 24, 1 / 12, 1 / 120, 1 / 60, 1 / 8], size=n)
            for k in range(n + 1):
                lo, _ = exact_interval(k, n)
                if lo > null.mean():
                    assert poisson_binomial_sf(k, null) < 0.025, (n, k, null)
    top, bottom = np.linspace(0, -1, 24), np.linspace(-1, 0, 24)  # original first / last
    s = summarize([_item_of(top, 4)] + [_item_of(bottom, 4)] * 3)
    assert s.alg1 is not None and s.alg1.count == 1
    assert s.alg1.excess_ci[0] < 0 and s.alg1.p_value > 0.05
    # at least 95% coverage where the Wilson interval had 84%
    p = 1 / 24
    cover = sum(
        sps.binom.pmf(k, 4, p)
        for k in range(5)
        if exact_interval(k, 4)[0] <= p <= exact_interval(k, 4)[1]
    )
    assert cover >= 0.95 and wilson_cover_4(p) < 0.95


def wilson_cover_4(p: float) -> float:
    return float(
        sum(
            sps.binom.pmf(k, 4, p)
            for k in range(5)
            if wilson_interval(k, 4)[0] <= p <= wilson_interval(k, 4)[1]
        )
    )


def test_resampled_p_values_and_intervals_do_not_depend_on_the_items_order() -> None:
    """The same items in another order (a shuffled copy of a benchmark) gave another Monte
    Carlo p-value: 0.8929 against 0.8950 for the mean gap (QA). The draws now follow an order
    of the items' own values; so do BenBench's split-label test and bootstrap interval."""
    from contamscope.detectors.benbench import delta_stats, split_label_p
    from contamscope.detectors.stats import randomization_test

    rng = np.random.default_rng(1)
    nulls = [rng.normal(size=24) for _ in range(20)]  # 24^20 assignments: Monte Carlo
    first = randomization_test(nulls)
    assert first[1] == "randomization (Monte Carlo)"
    assert randomization_test(nulls[::-1]) == first
    assert randomization_test([nulls[i] for i in rng.permutation(20)]) == first
    o, r = rng.normal(size=30), rng.normal(size=30)
    turn = rng.permutation(30)
    a, b = delta_stats(o, r), delta_stats(o[turn], r[turn])
    assert a["ci"] == pytest.approx(b["ci"], abs=1e-12)
    assert a["relative_ci"] == pytest.approx(b["relative_ci"], abs=1e-12)
    assert split_label_p(o, r) == split_label_p(o[turn], r[::-1])


def test_the_gap_tests_draws_follow_the_items_texts_not_their_values_or_rows() -> None:
    """Log-probs that moved by 1e-5 (another --batch-items) reordered the items, which were
    drawn in an order of their values: the Monte Carlo p moved by its error, 0.3771 against
    0.3803 (unattended-operator QA). Drawn in the order of the item ids, a shuffled copy of an
    MMLU file (ids are row numbers) moved it instead, 0.1849 against 0.1863 (diff-review QA).
    Drawn in the order of the items' texts, neither moves it."""
    from contamscope.detectors.permutation import item_score_from_dict, score_item
    from contamscope.detectors.stats import summarize

    rng = np.random.default_rng(5)
    base = [rng.normal(-20, 1, size=24) for _ in range(12)]  # 24^12: Monte Carlo
    moved = [lp + rng.uniform(-1e-5, 1e-5, size=24) for lp in base]

    def p_value(logprobs: list[np.ndarray], rows: list[int]) -> float:
        scores = []
        for pos, k in enumerate(rows):  # the item of text k at row pos: id "mix_test-{pos}"
            rec = score_item(logprobs[k], n_options=4, exhaustive=True).to_dict()
            rec |= {"id": f"mix_test-{pos}", "prefix": f"Question {k}?:\n"}
            rec |= {"continuations": [f"A:{k}\nB:x\n"], "logprobs": list(logprobs[k])}
            scores.append(item_score_from_dict(rec))
        gap = summarize(scores).gap
        assert gap.method == "randomization (Monte Carlo)"
        return gap.p_value  # type: ignore[return-value]

    rows = list(range(12))
    first = p_value(base, rows)
    # the same draws: only a draw within 1e-5 of the observed sum can change sides (by value
    # the draws were others: 0.6907 against 0.6884)
    assert p_value(moved, rows) == pytest.approx(first, abs=3 / 20_001)
    assert p_value(base, list(rng.permutation(12))) == pytest.approx(first, abs=1e-12)


def test_cap_and_membership_resampling_do_not_depend_on_the_items_order() -> None:
    """As the gap test: CAP's bootstrap and relabelling and membership's AUC bootstrap read
    the items in an order of their own values. (compare's tests keep the items' order: there
    swapping A and B mirrors the p-values exactly, which a canonical order would break.)"""
    from contamscope.detectors.cap import compare_splits, split_score
    from contamscope.detectors.membership import bootstrap_aucs

    rng = np.random.default_rng(3)
    m, c = rng.integers(0, 2, 30).astype(float), rng.integers(0, 2, 30).astype(float)
    ref, other = (m[:12], c[:12]), (m[12:], c[12:])
    t1, t2 = rng.permutation(12), rng.permutation(18)
    shuffled = (ref[0][t1], ref[1][t1]), (other[0][t2], other[1][t2])

    def cmp(r: Any, o: Any) -> Any:
        r, o = tuple(map(list, r)), tuple(map(list, o))
        out = compare_splits("a", "b", r, o, split_score(*r), split_score(*o), n_boot=400)
        return (out.ci_low, out.ci_high, out.p_value, out.excess_ci_low, out.excess_p_value)

    assert cmp(ref, other) == cmp(*shuffled)
    x, y = rng.normal(size=25), rng.normal(size=40)
    turned = bootstrap_aucs(x[::-1], y[rng.permutation(40)], 300, 0)
    assert np.array_equal(bootstrap_aucs(x, y, 300, 0), turned)


def test_benbench_interval_follows_the_items_texts_not_their_values() -> None:
    """BenBench's bootstrap drew the items in an order of their values: two perplexities
    that differ in their last digits (another batch size) traded places, and their pairs
    with them, so the interval moved by its Monte Carlo error. Keyed by the items' texts,
    it stays (to the float noise)."""
    from contamscope.detectors.benbench import delta_stats
    from contamscope.pipeline.benbench import BenBenchConfig, _item_metrics, _split_stats

    rng = np.random.default_rng(3)
    o = np.repeat(rng.uniform(5, 20, size=15), 2)  # pairs of near-equal perplexities
    r = rng.uniform(5, 20, size=30)
    o_a = o + rng.uniform(-1e-9, 1e-9, size=30)
    o_b = o + rng.uniform(-1e-9, 1e-9, size=30)
    keys = [f"item {i}" for i in range(30)]
    turn = rng.permutation(30)
    by_value = delta_stats(o_a, r)["ci"], delta_stats(o_b, r)["ci"]
    assert abs(by_value[0][0] - by_value[1][0]) > 1e-6  # the failure this fixes
    keyed = delta_stats(o_a, r, keys=keys)["ci"]
    moved = delta_stats(o_b[turn], r[turn], keys=[keys[i] for i in turn])["ci"]
    assert keyed == pytest.approx(moved, abs=1e-7)

    def record(i: int, ppl: float, ref: float) -> dict[str, Any]:
        def version(name: str, p: float) -> dict[str, Any]:
            ng = {"exact": 0.5, "rouge": 0.5, "edit": 0.5}
            ng |= {"all_exact": False, "all_rouge": False, "all_edit": False}
            ppl_d = {"ppl": p, "nll": float(np.log(p)), "n_tokens": 10}
            return {
                "name": name,
                "question": f"Q{i}?",
                "answer": f"A{i}",
                "ppl": ppl_d,
                "ngram": ng,
            }

        rec = {"id": f"test/{i}", "excluded": None}
        rec["versions"] = [version("original", ppl), version("para", ref)]
        _item_metrics(rec)
        return rec

    cfg = BenBenchConfig()
    first = _split_stats([record(i, o_a[i], r[i]) for i in range(30)], cfg)
    again = _split_stats([record(i, o_b[i], r[i]) for i in turn], cfg)
    assert first["delta"]["ppl"]["ci"] == pytest.approx(again["delta"]["ppl"]["ci"], abs=1e-7)
    # the paraphrase test's draws too (2^30 relabellings: Monte Carlo); by value its p moved
    # (diff-review QA)
    assert first["delta"]["ppl"]["test"] == "randomization (Monte Carlo)"
    assert first["delta"]["ppl"]["p_value"] == again["delta"]["ppl"]["p_value"]
    # keys given twice cannot order the items: by value, as without keys (they gave another
    # interval for the same items shuffled; diff-review QA)
    from contamscope.detectors.benbench import paraphrase_test

    with pytest.raises(ValueError, match="one key per item"):  # (an IndexError; QA)
        paraphrase_test([1.0, 2.0], [[0.5], [1.5]], lower_is_familiar=True, keys=["a"])
    twice = ["same"] * 30
    assert delta_stats(o_a, r, keys=twice)["ci"] == delta_stats(o_a, r)["ci"]
    assert delta_stats(o_a[turn], r[turn], keys=twice)["ci"] == pytest.approx(
        delta_stats(o_a, r)["ci"], abs=1e-12
    )


def test_bootstrap_aucs_by_counts_equal_the_resampled_values_auc() -> None:
    """bootstrap_aucs takes each resample's AUC from how often it drew each item: the same
    number, tie for tie, as the AUC of the resampled values themselves (each chunk draws its
    benchmark indices, then its reference indices)."""
    from contamscope.detectors.membership import _auc, bootstrap_aucs

    rng = np.random.default_rng(1)
    x, y = np.round(rng.normal(size=7), 1), np.round(rng.normal(size=13), 1)  # with ties
    draw = np.random.default_rng(5)
    ix, iy = draw.integers(0, 7, (400, 7)), draw.integers(0, 13, (400, 13))
    xs, ys = np.sort(x), np.sort(y)
    each = [_auc(xs[ix[b]], np.sort(ys[iy[b]])) for b in range(400)]
    assert np.array_equal(bootstrap_aucs(x, y, 400, 5), np.array(each))
