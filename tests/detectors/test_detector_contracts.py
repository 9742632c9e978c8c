"""Documented contracts of the combined test, the CAP lean comparison and the permutation
verdict (combined.py, compare_cap.py, verdict.py), each checked against a value computed here,
independently of the code under test (mutation QA): an enumeration, exact fractions, scipy, or
the formula the docstring states, written out."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from contamscope.detectors.combined import CombinedTest
from contamscope.detectors.compare_cap import SWAP_EXACT, compare_leans, lean_difference
from contamscope.detectors.verdict import VERDICT_ALPHA, verdict, verdict_p_value

# --------------------------------------------------------------------------- combined.py


def _pool_p(x: list[float], refs: list[list[float]]) -> Fraction:
    """The docstring's full-conformal p: #{z in P : T(z) >= T(x)} / (R + 1), T the sum over
    statistics of each pool member's average rank in P = {x, r_1 .. r_R}."""
    pool = [x, *refs]
    t = [Fraction(0)] * len(pool)
    for c in range(len(x)):
        for i, z in enumerate(pool):
            below = sum(w[c] < z[c] for w in pool)
            tied = sum(w[c] == z[c] for w in pool)  # z itself included
            t[i] += below + Fraction(tied + 1, 2)
    return Fraction(sum(ti >= t[0] for ti in t), len(pool))


def _bh(ps: list[Fraction]) -> list[Fraction]:
    """Benjamini-Hochberg q-values written out: q_i = min over p_j >= p_i of p_j m / rank_j."""
    m = len(ps)
    ranked = sorted(ps)
    return [
        min(min(Fraction(1), ranked[j] * m / (j + 1)) for j in range(m) if ranked[j] >= p)
        for p in ps
    ]


def test_combined_fdr_flags_by_benjamini_hochberg_q_values() -> None:
    """``--fdr``: "Flag by Benjamini-Hochberg q-values (FDR <= alpha) instead": three items at
    p = 1/41 of four have q = 4/3 x 1/41 = 0.0325, above alpha 0.03, so none is flagged,
    although each p is below it (mutation QA)."""
    refs = [[float(i), float(-i)] for i in range(40)]
    bench = [[99.0, 99.0], [98.0, 98.0], [20.0, -20.0], [39.5, 0.5]]
    ps = [_pool_p(x, refs) for x in bench]
    assert ps == [Fraction(1, 41), Fraction(1, 41), Fraction(1), Fraction(1, 41)]
    qs = _bh(ps)
    assert qs == [Fraction(4, 123), Fraction(4, 123), Fraction(1), Fraction(4, 123)]
    alpha = 0.03
    r = CombinedTest(alpha=alpha, n_boot=200, fdr=True).score(bench, refs)
    assert r.p_values.tolist() == pytest.approx([float(p) for p in ps])
    assert r.q_values is not None
    assert r.q_values.tolist() == pytest.approx([float(q) for q in qs])
    assert r.flags.tolist() == [q <= alpha for q in qs] == [False] * 4
    # without --fdr the same p-values are flagged by p <= alpha
    raw = CombinedTest(alpha=alpha, n_boot=200).score(bench, refs)
    assert raw.flags.tolist() == [p <= alpha for p in ps] == [True, True, False, True]


# --------------------------------------------------------------------------- compare_cap.py


def _item_d(split: tuple[Any, ...]) -> np.ndarray:
    """Per item, B's lean minus A's on the excess scale: (M_B - C_B) - (M_A - C_A)."""
    ma, ca, mb, cb = (np.asarray(x, dtype=np.int64) for x in split)
    return (mb - cb) - (ma - ca)


def _swap_null(ref: tuple[Any, ...], other: tuple[Any, ...]) -> tuple[np.ndarray, int]:
    """Every assignment of the swap test, enumerated: swapping A's and B's readings of an item
    flips the sign of its d, and D = mean_other(d) - mean_ref(d). Returned as integers scaled
    by n_ref * n_other (exact), with the observed D likewise."""
    dr, do = _item_d(ref), _item_d(other)
    w = np.concatenate([-dr * do.size, do * dr.size])  # D * n_ref * n_other = sum of w_i
    signs = np.array(list(itertools.product((1, -1), repeat=w.size)), dtype=np.int64)
    return signs @ w, int(w.sum())


def test_two_sided_swap_p_is_twice_the_smaller_one_sided_p() -> None:
    """lean_difference: "``two_sided`` (twice the smaller, at most 1)"; the docstring's example
    reaches D = 2 in 1 of 2^4 swaps, so b_greater = 1/16 and two_sided = 1/8 (mutation QA)."""
    ref = ([1, 0, 1, 0], [1, 0, 1, 0], [1, 0, 1, 0], [1, 0, 1, 0])
    other = ([0] * 4, [1] * 4, [1] * 4, [0] * 4)
    null, obs = _swap_null(ref, other)
    p_ge = Fraction(int((null >= obs).sum()), null.size)
    p_le = Fraction(int((null <= obs).sum()), null.size)
    assert (p_ge, p_le) == (Fraction(1, 16), Fraction(1))
    r = lean_difference(ref, other)
    assert r["b_greater"] == float(p_ge) and r["a_greater"] == float(p_le)
    assert r["two_sided"] == float(min(Fraction(1), 2 * min(p_ge, p_le))) == 0.125
    # the combined p of one test is its two-sided p (times 1 test)
    assert compare_leans({"accuracy/test": (ref, other)})["p_value"] == 0.125


def test_swap_test_enumerates_exactly_at_swap_exact_differing_items() -> None:
    """ "exactly, over every assignment of the items whose readings differ when there are at
    most SWAP_EXACT of them": 14 differing items give all 2^14 assignments and the exact
    one-sided p, not a Monte Carlo estimate (mutation QA)."""
    ref = (
        [1, 0, 1, 0, 1, 0, 1],
        [1, 1, 0, 0, 1, 1, 0],
        [0, 1, 0, 1, 0, 1, 0],
        [0, 0, 1, 1, 0, 0, 1],
    )
    other = ([0] * 7, [1] * 7, [1] * 7, [0, 0, 0, 0, 0, 1, 1])
    differing = sum(
        (a_m, a_c) != (b_m, b_c) for split in (ref, other) for a_m, a_c, b_m, b_c in zip(*split)
    )
    assert differing == SWAP_EXACT == 14
    null, obs = _swap_null(ref, other)
    assert null.size == 2**14
    p_ge = Fraction(int((null >= obs).sum()), null.size)
    p_le = Fraction(int((null <= obs).sum()), null.size)
    r = lean_difference(ref, other)
    assert r["method"] == "swap test (exact)" and r["n_resamples"] == 2**14
    assert r["b_greater"] == float(p_ge) and r["a_greater"] == float(p_le)
    assert r["two_sided"] == float(min(Fraction(1), 2 * min(p_ge, p_le)))


def test_compare_leans_p_floor_is_a_lower_bound_set_by_the_largest_test() -> None:
    """paired_p_floor: "A lower bound on the combined p-value n_tests paired tests can give on
    n_items pairs ... each test's most extreme outcome ... has two-sided p = 2 / 2^n, and the
    combined p is the smallest times n_tests". The larger test (14 items) reaches its extreme
    here, so the combined p is 2 x 2 / 2^14, and the floor can be no higher (mutation QA)."""
    # every item differs, all one way: B leans toward the other split on each
    big = (([1] * 7, [0] * 7, [0] * 7, [1] * 7), ([0] * 7, [1] * 7, [1] * 7, [0] * 7))
    small = (([1] * 5, [0] * 5, [0] * 5, [1] * 5), ([0] * 5, [1] * 5, [1] * 5, [0] * 5))
    n_tests = 2
    c = compare_leans({"acc/test": big, "acc2/test": small})
    assert c["acc/test"]["two_sided"] == 2 / 2**14 and c["acc2/test"]["two_sided"] == 2 / 2**10
    assert c["p_value"] == n_tests * 2 / 2**14
    assert c["p_floor"] == n_tests * 2.0 ** (1 - 14)
    assert c["p_floor"] <= c["p_value"]


def _bootstrap_pmf(split: tuple[Any, ...]) -> dict[Fraction, Fraction]:
    """Exact distribution of mean(d) over a resample of the split's items with replacement."""
    d = [int(v) for v in _item_d(split)]
    n = len(d)
    sums: dict[int, Fraction] = {0: Fraction(1)}
    for _ in range(n):
        nxt: dict[int, Fraction] = {}
        for s, p in sums.items():
            for v in d:
                nxt[s + v] = nxt.get(s + v, Fraction(0)) + p / n
        sums = nxt
    return {Fraction(s, n): p for s, p in sums.items()}


def _quantile(pmf: dict[Fraction, Fraction], q: float) -> float:
    """The smallest value whose cumulative probability reaches q."""
    total = Fraction(0)
    for v in sorted(pmf):
        total += pmf[v]
        if total >= q:
            return float(v)
    raise AssertionError("q above 1")


def test_bootstrap_interval_is_the_expanded_percentile_interval() -> None:
    """ "The 95% interval is the expanded percentile interval of D over a paired bootstrap":
    with 7 items per split its tails are Phi(-sqrt(7/6) t_{6, 0.975}) = 0.41%, not 2.5%, so
    it reaches beyond the exact bootstrap distribution's 2.5% and 97.5% quantiles, and not
    beyond its 0.05% and 99.95% ones (mutation QA)."""
    ref = (
        [1, 0, 1, 0, 1, 0, 1],
        [1, 1, 1, 0, 1, 0, 1],
        [1, 1, 1, 1, 1, 0, 1],
        [1, 1, 0, 0, 1, 1, 1],
    )
    other = ([0] * 7, [1] * 7, [1, 1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 1])
    n = 7
    tail = float(sps.norm.sf(math.sqrt(n / (n - 1)) * sps.t.ppf(0.975, n - 1)))
    assert 0.004 < tail < 0.0042
    # D* = mean_other(d*) - mean_ref(d*), the splits resampled independently
    po, pr = _bootstrap_pmf(other), _bootstrap_pmf(ref)
    pd: dict[Fraction, Fraction] = {}
    for vo, a in po.items():
        for vr, b in pr.items():
            pd[vo - vr] = pd.get(vo - vr, Fraction(0)) + a * b
    assert sum(pd.values()) == 1
    r = lean_difference(ref, other)
    assert r["ci"] is not None and "expanded percentile" in r["ci_method"]
    low, high = r["ci"]
    assert low < _quantile(pd, 0.025) and high > _quantile(pd, 0.975)
    assert low >= _quantile(pd, 0.0005) and high <= _quantile(pd, 0.9995)
    assert low <= r["difference"] <= high


# --------------------------------------------------------------------------- verdict.py


def test_bonferroni_level_counts_only_the_tests_computed() -> None:
    """verdict_tests: "The verdict's three tests' p-values (None: not computed) and the
    Bonferroni level each must reach for 5% overall"; verdict_p_value is "at or below 5%
    exactly where verdict finds a leakage signal". Two tests computed: level 0.05 / 2, and
    p = 0.02 is a signal (mutation QA)."""
    stats = {"n_items": 3, "alg1": {"p_value": 0.02}, "rank": {"p_value": 0.5}, "gap": None}
    n_computed = 2
    level = VERDICT_ALPHA / n_computed
    signal, sentence = verdict(stats)
    assert signal is True and level >= 0.02
    assert f"each p <= {level:.3g}, 5% overall" in sentence
    assert verdict_p_value(stats) == pytest.approx(n_computed * 0.02)
    # the two readings agree for every combination of computed tests
    for ps in itertools.product((None, 0.012, 0.02, 0.03, 0.3), repeat=3):
        stats = {
            "n_items": 5,
            **{k: {"p_value": p} for k, p in zip(("alg1", "rank", "gap"), ps)},
        }
        computed = [p for p in ps if p is not None]
        if not computed:
            continue
        want = min(computed) <= VERDICT_ALPHA / len(computed)
        assert verdict(stats)[0] is want, ps
        assert (verdict_p_value(stats) <= VERDICT_ALPHA) is want, ps


def test_a_single_test_at_exactly_the_level_is_a_signal() -> None:
    """verdict_p_value: "at or below 5% exactly where verdict finds a leakage signal"; the
    signal sentence says "each p <= level": one test at p = 0.05 exactly is a signal
    (mutation QA)."""
    stats = {"n_items": 3, "alg1": {"p_value": 0.05}, "rank": None, "gap": None}
    assert verdict_p_value(stats) == 0.05
    signal, sentence = verdict(stats)
    assert signal is True and sentence.startswith("LEAKAGE SIGNAL")
