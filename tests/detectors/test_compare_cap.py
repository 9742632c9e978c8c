"""The paired test of two models' CAP leans (detectors.compare_cap): exactness, level, power,
symmetry and the undefined cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from contamscope.detectors.compare import sign_flip_test
from contamscope.detectors.compare_cap import compare_leans, lean_difference


def _split(rng: np.random.Generator, n: int, pm: float, pc: float, qm: float, qc: float) -> tuple:
    """Paired binary readings: A right with prob pm, consistent pc; B with qm, qc."""
    return tuple(rng.binomial(1, p, n).astype(float) for p in (pm, pc, qm, qc))


def _brute_d(ref: tuple, other: tuple, swaps: tuple[int, ...], stat: str) -> float:
    """D after swapping A's and B's readings of the items in ``swaps`` (indices over ref then
    other), recomputed from scratch."""
    parts = []
    offset = 0
    for split in (ref, other):
        ma, ca, mb, cb = (np.array(x, float) for x in split)
        for i in range(len(ma)):
            if offset + i in swaps:
                ma[i], mb[i] = mb[i], ma[i]
                ca[i], cb[i] = cb[i], ca[i]
        offset += len(ma)
        if stat == "excess":
            parts.append((ma.mean() - ca.mean(), mb.mean() - cb.mean()))
        else:
            parts.append(tuple(math.tanh((m.mean() + 0.01) / (c.mean() + 0.01))
                               for m, c in ((ma, ca), (mb, cb))))  # fmt: skip
    (a_r, b_r), (a_o, b_o) = parts
    return (b_o - b_r) - (a_o - a_r)


def test_exact_swap_test_enumerates_every_assignment() -> None:
    rng = np.random.default_rng(3)
    ref, other = _split(rng, 3, 0.5, 0.5, 0.5, 0.5), _split(rng, 4, 0.3, 0.6, 0.9, 0.2)
    r = lean_difference(ref, other)
    n = 7
    for stat in ("excess", "pcr"):
        obs = _brute_d(ref, other, (), stat)
        assert r[stat]["difference"] == pytest.approx(obs)
        # every subset of the 7 items (swapping an item with equal readings changes nothing)
        ds = [_brute_d(ref, other, s, stat) for k in range(n + 1)
              for s in itertools.combinations(range(n), k)]  # fmt: skip
        ge = np.mean([d >= obs - 1e-9 for d in ds])
        le = np.mean([d <= obs + 1e-9 for d in ds])
        assert r[stat]["b_greater"] == pytest.approx(ge)
        assert r[stat]["a_greater"] == pytest.approx(le)
        assert r[stat]["method"] == "swap test (exact)"


def test_excess_test_is_the_sign_flip_test_of_weighted_item_differences() -> None:
    rng = np.random.default_rng(5)
    ref, other = _split(rng, 30, 0.5, 0.5, 0.5, 0.5), _split(rng, 20, 0.4, 0.5, 0.8, 0.3)
    r = lean_difference(ref, other)
    # swapping item i flips the sign of its term: +-(e_B - e_A)/n, + on other, - on reference
    v = [-(mb - cb - ma + ca) / 30 for ma, ca, mb, cb in zip(*ref, strict=True)]
    v += [(mb - cb - ma + ca) / 20 for ma, ca, mb, cb in zip(*other, strict=True)]
    assert r["difference"] == pytest.approx(sum(v))
    flip = sign_flip_test(v)
    # both Monte Carlo at this size (different draws): they agree to a few hundredths
    assert r["two_sided"] == pytest.approx(flip["two_sided"], abs=0.03)


def test_swapping_the_models_negates_d_and_keeps_p() -> None:
    rng = np.random.default_rng(7)
    ref, other = _split(rng, 6, 0.5, 0.5, 0.5, 0.5), _split(rng, 6, 0.3, 0.6, 0.9, 0.2)
    r = lean_difference(ref, other)
    back = lean_difference(
        (ref[2], ref[3], ref[0], ref[1]), (other[2], other[3], other[0], other[1])
    )
    for stat in ("excess", "pcr"):
        assert back[stat]["difference"] == pytest.approx(-r[stat]["difference"])
        assert back[stat]["two_sided"] == pytest.approx(r[stat]["two_sided"])
        assert back[stat]["b_greater"] == pytest.approx(r[stat]["a_greater"])
    assert back["a"]["other"] == r["b"]["other"]


def test_level_under_exchangeable_readings_and_power_when_b_trained_on_other() -> None:
    rng = np.random.default_rng(11)
    rejected = 0
    runs = 300
    for k in range(runs):  # A and B drawn alike: H0 holds
        res = lean_difference(
            _split(rng, 30, 0.4, 0.5, 0.4, 0.5), _split(rng, 30, 0.4, 0.5, 0.4, 0.5),
            n_boot=200, seed=k,
        )  # fmt: skip
        rejected += res["two_sided"] <= 0.05
    assert rejected / runs <= 0.08  # 5% nominal; binomial sd 1.3 points at 300 runs
    found = 0
    for k in range(50):  # B right more often and less consistent on the other split only
        res = lean_difference(
            _split(rng, 60, 0.4, 0.5, 0.4, 0.5), _split(rng, 60, 0.4, 0.5, 0.9, 0.3),
            n_boot=200, seed=k,
        )  # fmt: skip
        found += res["two_sided"] <= 0.05 and res["b_greater"] < res["a_greater"]
    assert found >= 40  # a normal approximation gives about 95% power here


def test_undefined_pcr_keeps_the_excess_test() -> None:
    # alpha 0 and a split with no right and no consistent answer: PCR is 0 / 0
    ref = ([0, 0], [0, 0], [0, 1], [0, 0])
    other = ([1, 1], [1, 0], [0, 0], [1, 1])
    r = lean_difference(ref, other, alpha=0.0)
    assert r["pcr"]["difference"] is None and r["pcr"]["two_sided"] is None
    assert r["excess"]["two_sided"] is not None
    assert r["a"]["reference"]["pcr"] is None
    out = compare_leans({"generate/test": (ref, other)}, pcr_alpha=0.0)
    assert out["tested"] == ["generate/test"]


def test_compare_leans_bonferroni_and_direction() -> None:
    rng = np.random.default_rng(13)
    ref = _split(rng, 40, 0.4, 0.5, 0.4, 0.5)
    strong = _split(rng, 40, 0.4, 0.5, 0.95, 0.2)
    weak = _split(rng, 40, 0.4, 0.5, 0.4, 0.5)
    out = compare_leans({"generate/test": (ref, weak), "loglik/test": (ref, strong)})
    assert out["smallest"] == "loglik/test" and out["direction"] == "B"
    assert out["p_value"] == pytest.approx(min(1.0, 2 * out["loglik/test"]["two_sided"]))
    with pytest.raises(ValueError, match="four paired sequences"):
        lean_difference(([], [], [], []), strong)
