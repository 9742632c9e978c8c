"""Known-answer tests for the item-level permutation detectors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.ensemble import IsolationForest

from contamscope.detectors import (
    Alg1Result,
    Algorithm1,
    Algorithm2,
    PermutationItemScore,
    default_deltas,
    delta_key,
    gap,
    item_score_from_dict,
    rank_p_value,
    rethreshold,
    score_item,
)
from contamscope.errors import ConfigError


def _outlier_item(n: int = 24, at: int = 0, seed: int = 0) -> np.ndarray:
    """Log-probs in a tight cluster with one clear maximum at index ``at``."""
    rng = np.random.default_rng(seed)
    lp = -10.0 + rng.normal(0.0, 0.1, n)
    lp[at] = -5.0
    return lp


# --------------------------------------------------------------------------- Algorithm 1


def test_alg1_original_is_strict_max() -> None:
    assert Algorithm1().score([-1.0, -2.0, -3.0]) == Alg1Result(leaked=True, rank=1, n_tied=0)


def test_alg1_rank_and_ties_counted() -> None:
    # two others strictly greater (-1, -1.5), one equal (-2): rank 3, one tie
    r = Algorithm1().score([-2.0, -1.0, -2.0, -1.5, -4.0])
    assert (r.leaked, r.rank, r.n_tied) == (False, 3, 1)


def test_alg1_original_lowest() -> None:
    assert Algorithm1().score([-9.0, -1.0, -2.0, -3.0]).rank == 4


@pytest.mark.parametrize(("ties", "leaked"), [("not_leaked", False), ("leaked", True)])
def test_alg1_tie_at_max_follows_mode(ties: str, leaked: bool) -> None:
    r = Algorithm1(ties=ties).score([-1.0, -1.0, -3.0])  # type: ignore[arg-type]
    assert (r.leaked, r.rank, r.n_tied) == (leaked, 1, 1)


def test_alg1_rejects_unknown_ties_mode() -> None:
    with pytest.raises(ConfigError):
        Algorithm1(ties="maybe")  # type: ignore[arg-type]


def test_alg1_null_probability() -> None:
    assert Algorithm1().null_probability([-3.0, -1.0, -2.0, -4.0]) == 0.25
    tied = [-3.0, -1.0, -1.0, -4.0]  # two orders share the maximum
    assert Algorithm1().null_probability(tied) == 0.0
    assert Algorithm1(ties="leaked").null_probability(tied) == 0.5


@pytest.mark.parametrize(
    "bad", [[-1.0], [], [[-1.0, -2.0]], [-1.0, float("nan")], [-1.0, float("inf")]]
)
def test_invalid_logprobs_rejected(bad: list) -> None:
    with pytest.raises(ValueError):
        Algorithm1().score(bad)
    with pytest.raises(ValueError):
        rank_p_value(bad, exhaustive=True)


# --------------------------------------------------------------------------- rank p-value, gap


def test_rank_p_value_exhaustive_hand_computed() -> None:
    lp = -np.arange(24, dtype=float)  # original -0 is the largest
    assert rank_p_value(lp, exhaustive=True) == pytest.approx(1 / 24)
    lp2 = lp.copy()
    lp2[0] = -2.5  # the others are -1 ... -23; greater or equal: itself, -1, -2 -> 3 of 24
    assert rank_p_value(lp2, exhaustive=True) == pytest.approx(3 / 24)


def test_rank_p_value_ties_count_against_leakage() -> None:
    assert rank_p_value([-1.0, -1.0, -1.0, -2.0], exhaustive=True) == 0.75


def test_rank_p_value_monte_carlo_hand_computed() -> None:
    # K = 4 random orders; one of them (-0.5) beats the original: p = (1 + 1) / (4 + 1)
    assert rank_p_value([-1.0, -0.5, -2.0, -3.0, -4.0], exhaustive=False) == pytest.approx(0.4)
    # original beats all K = 9: the smallest attainable value 1 / (K + 1)
    assert rank_p_value([0.0] + [-1.0] * 9, exhaustive=False) == pytest.approx(0.1)


def test_gap_hand_computed() -> None:
    assert gap([-1.0, -2.0, -4.0]) == pytest.approx(2.0)
    assert gap([0.0, 1.0, 2.0, 3.0]) == pytest.approx(-2.0)


def test_gap_has_zero_mean_over_relabellings() -> None:
    """E[gap | values] = 0 under H0: averaging over which order is the original gives 0."""
    rng = np.random.default_rng(3)
    lp = rng.normal(size=24)
    gaps = [gap(np.r_[lp[j], np.delete(lp, j)]) for j in range(lp.size)]
    assert np.mean(gaps) == pytest.approx(0.0, abs=1e-12)
    assert np.std(gaps) > 0.1


# --------------------------------------------------------------------------- Algorithm 2


@pytest.mark.parametrize(
    ("n", "expected"), [(2, (-0.2,)), (3, (-0.2,)), (4, (-0.2,)), (5, (-0.25,)), (6, (-0.25,))]
)
def test_default_deltas(n: int, expected: tuple[float, ...]) -> None:
    assert default_deltas(n) == expected
    assert Algorithm2().deltas_for(n) == expected


def test_default_deltas_rejects_one_option() -> None:
    with pytest.raises(ConfigError):
        default_deltas(1)


def test_alg2_matches_direct_sklearn_call() -> None:
    rng = np.random.default_rng(7)
    lp = rng.normal(-20.0, 2.0, 24)
    forest = IsolationForest(n_estimators=100, contamination="auto", random_state=42)
    expected = forest.fit(lp.reshape(-1, 1)).decision_function(lp.reshape(-1, 1))
    got = Algorithm2().outlier_scores(lp)
    np.testing.assert_array_equal(got, expected)
    r = Algorithm2().score(lp, n_options=4)
    assert r.argmax == int(np.argmax(lp))
    assert r.score == expected[np.argmax(lp)]
    assert r.flags == {-0.2: bool(expected[np.argmax(lp)] < -0.2)}


def test_alg2_obvious_outlier_max_is_flagged_and_anchored() -> None:
    r = Algorithm2().score(_outlier_item(at=0), n_options=4)
    assert r.argmax == 0
    assert r.score < -0.3
    assert r.flags == {-0.2: True}
    assert r.anchored == {-0.2: True}


def test_alg2_outlier_elsewhere_is_flagged_but_not_anchored() -> None:
    r = Algorithm2().score(_outlier_item(at=5), n_options=4)
    assert r.argmax == 5
    assert r.flags == {-0.2: True}
    assert r.anchored == {-0.2: False}


@pytest.mark.parametrize("lp", [np.full(24, -3.0), np.linspace(-5.0, -4.0, 24)])
def test_alg2_flat_set_not_flagged(lp: np.ndarray) -> None:
    r = Algorithm2().score(lp, n_options=4)
    assert r.flags == {-0.2: False}
    assert r.anchored == {-0.2: False}


def test_alg2_first_max_wins_ties() -> None:
    lp = np.array([-3.0, -1.0, -2.0, -1.0, -4.0, -5.0])
    assert Algorithm2(deltas=[0.0]).score(lp, n_options=3).argmax == 1


def test_alg2_custom_deltas_and_determinism() -> None:
    lp = _outlier_item(n=120, at=3, seed=1)
    alg = Algorithm2(deltas=[-0.1, -0.2, -0.6])
    a = alg.score(lp, n_options=5)
    b = alg.score(lp, n_options=5)
    assert a == b
    assert set(a.flags) == {-0.1, -0.2, -0.6}
    assert a.flags[-0.1] and a.flags[-0.2] and not a.flags[-0.6]


def test_alg2_rejects_bad_parameters() -> None:
    with pytest.raises(ConfigError):
        Algorithm2(deltas=[])
    with pytest.raises(ConfigError):
        Algorithm2(deltas=[float("nan")])
    with pytest.raises(ConfigError):
        Algorithm2(n_estimators=0)


def test_outlier_scores_do_not_depend_on_positions_up_to_256() -> None:
    """The exact null of the anchored flag relies on this (every tree sees every value)."""
    rng = np.random.default_rng(11)
    alg = Algorithm2(n_estimators=20)
    for n in (24, 120):
        lp = rng.normal(size=n)
        perm = rng.permutation(n)
        np.testing.assert_array_equal(alg.outlier_scores(lp)[perm], alg.outlier_scores(lp[perm]))


# --------------------------------------------------------------------------- score_item


def test_score_item_fields_and_json_round_trip() -> None:
    lp = _outlier_item(at=0)
    item = score_item(lp, n_options=4, exhaustive=True, alg1=Algorithm1(), alg2=Algorithm2())
    assert (item.rank, item.n_tied, item.alg1, item.n_orders) == (1, 0, True, 24)
    assert item.p_value == pytest.approx(1 / 24)
    assert item.gap == pytest.approx(lp[0] - lp[1:].mean())
    assert item.alg1_null == pytest.approx(1 / 24)
    assert item.alg2_argmax == 0 and item.alg2_flags == {-0.2: True}
    assert item.alg2_anchored == {-0.2: True}
    assert item.null_anchored == {-0.2: pytest.approx(1 / 24)}
    d = json.loads(json.dumps(item.to_dict()))
    assert d["alg2"] == {"-0.2": True} and d["null_anchored"]["-0.2"] == pytest.approx(1 / 24)
    assert PermutationItemScore.from_dict(d) == item
    # a stored record carries more keys (id, logprobs ...): they are ignored
    assert item_score_from_dict({**d, "id": "x", "logprobs": lp.tolist()}) == item


def test_score_item_null_is_zero_when_max_is_not_an_outlier() -> None:
    item = score_item(np.linspace(-5.0, -4.0, 24)[::-1], n_options=4, exhaustive=True)
    assert item.rank == 1 and item.alg1
    assert item.alg2_flags == {-0.2: False}
    assert item.null_anchored == {-0.2: 0.0}


def test_score_item_null_anchored_equals_brute_force_relabelling() -> None:
    """P0(delta) = average over which order is the original of the anchored flag."""
    alg2 = Algorithm2(deltas=[-0.2, -0.05, 0.05], n_estimators=15)
    lp = _outlier_item(at=7, seed=4)
    lp[3] = lp[7]  # a tie at the maximum: m = 2
    item = score_item(lp, n_options=4, exhaustive=True, alg2=alg2)
    fired = {d: 0.0 for d in item.null_anchored}
    for j in range(lp.size):
        relabelled = np.r_[lp[j], np.delete(lp, j)]
        r = alg2.score(relabelled, n_options=4)
        for d in fired:
            fired[d] += r.anchored[d] / lp.size
    assert item.null_anchored == pytest.approx(fired)
    assert any(v > 0 for v in fired.values())
    assert max(fired.values()) == pytest.approx(2 / 24)


def test_score_item_monte_carlo() -> None:
    rng = np.random.default_rng(5)
    lp = rng.normal(size=50)  # original + 49 random orders of 6 options
    item = score_item(lp, n_options=6, exhaustive=False)
    assert item.n_orders == 50 and not item.exhaustive
    assert item.p_value == pytest.approx(np.count_nonzero(lp >= lp[0]) / 50)
    assert set(item.alg2_flags) == {-0.25}


def test_score_item_validates_counts() -> None:
    with pytest.raises(ValueError, match="needs 24"):
        score_item(np.zeros(23), n_options=4, exhaustive=True)
    with pytest.raises(ValueError, match="distinct orders"):
        score_item(np.zeros(7), n_options=3, exhaustive=False)


def test_delta_key() -> None:
    assert delta_key(-0.2) == "-0.2"
    assert delta_key(-0.25) == "-0.25"
    assert float(delta_key(0.1 + 0.2)) == 0.1 + 0.2
    assert not math.isnan(float(delta_key(-0.15)))


# --------------------------------------------------------------------------- other thresholds


@pytest.mark.parametrize("seed", range(6))
def test_rethreshold_equals_scoring_with_those_thresholds(seed: int) -> None:
    """Other ties and deltas from a stored score (no forest fit) give what score_item gives
    with them: on tied maxima, ties with the original, outliers and clusters, 4 and 5 options."""
    rng = np.random.default_rng(seed)
    n_options = 4 if seed % 2 else 5
    lp = np.round(rng.normal(-20.0, 1.0, math.factorial(n_options)), 1)  # rounding makes ties
    if seed % 3 == 0:
        lp[0] = lp.max()  # the original shares the maximum with another order
        lp[7] = lp[0]
    elif seed % 3 == 1:
        lp[0] = lp.max() + 4.0  # a clear outlier at the original
    stored = score_item(lp, n_options=n_options, exhaustive=True)
    for ties in ("not_leaked", "leaked"):
        for deltas in (None, (-0.3, -0.1, 0.0), (0.2,)):
            a1, a2 = Algorithm1(ties=ties), Algorithm2(deltas=deltas)  # type: ignore[arg-type]
            want = score_item(lp, n_options=n_options, exhaustive=True, alg1=a1, alg2=a2)
            got = rethreshold(item_score_from_dict(stored.to_dict()), lp, alg1=a1, alg2=a2)
            assert got == want and got.to_dict() == want.to_dict()


def test_rethreshold_refuses_log_probs_of_another_item() -> None:
    lp = _outlier_item()
    stored = score_item(lp, n_options=4, exhaustive=True)
    with pytest.raises(ValueError, match="23 log-probs for an item scored under 24 orders"):
        rethreshold(stored, lp[:23])
    with pytest.raises(ValueError, match="maximum is order 3, the stored score's 0"):
        rethreshold(stored, _outlier_item(at=3))
