"""The reference-calibrated combined test: pooled-rank p-values, calibration and power."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import rankdata

from contamscope.detectors.combined import (
    CombinedTest,
    pooled_rank_p_values,
    pooled_rank_scores,
)


def _brute(x: np.ndarray, refs: np.ndarray) -> tuple[float, float]:
    pool = np.vstack([refs, x[None]])
    t = sum(rankdata(pool[:, c]) for c in range(pool.shape[1]))
    return float((t >= t[-1]).sum() / len(pool)), float(t[-1] / (pool.shape[1] * len(pool)))


def test_vectorised_p_values_equal_the_pool_by_pool_computation() -> None:
    rng = np.random.default_rng(0)
    refs = np.round(rng.normal(size=(37, 3)), 1)  # rounded: many ties
    bench = np.round(rng.normal(size=(300, 3)), 1)
    p, t = pooled_rank_p_values(bench, refs, chunk=64)
    want = np.array([_brute(x, refs) for x in bench])
    assert np.allclose(p, want[:, 0]) and np.allclose(t, want[:, 1])


def test_false_positive_rate_at_most_alpha_under_h0() -> None:
    """Benchmark rows drawn like the references (correlated, heavy-tailed statistics): over
    many reference draws, P(p <= alpha) <= alpha."""
    rng = np.random.default_rng(1)
    flagged = total = 0
    for _ in range(200):
        cov = [[1.0, 0.6], [0.6, 1.0]]
        refs = rng.multivariate_normal([0, 0], cov, size=60) ** 3
        bench = rng.multivariate_normal([0, 0], cov, size=50) ** 3
        p, _ = pooled_rank_p_values(bench, refs)
        flagged += int((p <= 0.05).sum())
        total += p.size
    rate = flagged / total
    # the exact level is floor(0.05 * 61) / 61 = 3/61 = 0.049; 10,000 draws: SE ~0.002
    assert rate == pytest.approx(3 / 61, abs=0.008)


def test_two_weak_signals_together_beat_each_alone() -> None:
    """Leaked items shifted by half a standard deviation in each of two independent statistics
    are flagged more often by the combination than by either statistic's own conformal test."""
    rng = np.random.default_rng(2)
    refs = rng.normal(size=(200, 2))
    leaked = rng.normal(size=(2000, 2)) + 1.0
    both, _ = pooled_rank_p_values(leaked, refs)
    one, _ = pooled_rank_p_values(leaked[:, :1], refs[:, :1])
    other, _ = pooled_rank_p_values(leaked[:, 1:], refs[:, 1:])
    power = [(p <= 0.05).mean() for p in (both, one, other)]
    assert power[0] > max(power[1:]) + 0.05


def test_dataset_level_scores_and_test() -> None:
    rng = np.random.default_rng(3)
    refs = rng.normal(size=(80, 2))
    same = rng.normal(size=(80, 2))
    tb, tr = pooled_rank_scores(same, refs)
    assert tb.size == 80 and tr.size == 80
    assert tb.sum() + tr.sum() == pytest.approx(2 * 160 * 161 / 2)  # all ranks, twice
    null = CombinedTest(n_boot=200).score(same, refs)
    assert null.dataset.p_value > 0.01 and 0.35 < null.dataset.auc < 0.65
    shifted = CombinedTest(n_boot=200).score(same + 1.0, refs)
    assert shifted.dataset.p_value < 1e-6 and shifted.dataset.auc > 0.8
    d = shifted.to_dict()
    assert d["components"] == ["gap", "min_k_pp"] and "H0 (per item)" in d["null_hypothesis"]
    assert d["flagged"] == int(shifted.flags.sum())


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        pooled_rank_p_values([[np.nan, 1.0]], [[0.0, 0.0]])
    with pytest.raises(ValueError, match="same statistics"):
        pooled_rank_p_values([[1.0, 2.0]], [[0.0]])
