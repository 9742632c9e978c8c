"""Documented contracts of CAP's split comparison (detectors/cap.py), each checked against a
value computed here (mutation QA)."""

from __future__ import annotations

import math

import pytest

from contamscope.detectors.cap import compare_splits, excess_verdict, permutation_p, split_score


def test_permutation_p_is_never_below_its_monte_carlo_floor() -> None:
    """permutation_p: "twice the smaller of (1 + #{relabellings with difference >= observed}) /
    (1 + n_perm) and (1 + #{difference <= observed}) / (1 + n_perm)": so at least 2 / (1 +
    n_perm), even for the most extreme labelling of 10 + 10 items, which a random relabelling
    reaches with chance 1 / C(20, 10) (mutation QA)."""
    rm, rc = [1.0] * 10, [0.0] * 10
    om, oc = [0.0] * 10, [1.0] * 10
    observed = split_score(rm, rc).pcr - split_score(om, oc).pcr
    for n_perm in (99, 999):
        p = permutation_p(
            (rm, rc), (om, oc), observed, alpha=0.01, scale="tanh", n_perm=n_perm, seed=0
        )
        assert p >= 2 / (1 + n_perm) - 1e-15
        assert p <= 1.0
    # the comparison's p-value is the same test over n_boot relabellings
    c = compare_splits(
        "train", "test", (rm, rc), (om, oc), split_score(rm, rc), split_score(om, oc), n_boot=500
    )
    assert c.p_value >= 2 / 501 - 1e-15
    assert c.excess_p_value is not None and c.excess_p_value >= 2 / 501 - 1e-15
    assert 1 / math.comb(20, 10) < 2 / 501  # the exact p is below the floor: the floor binds


def test_excess_verdict_needs_an_interval_that_excludes_zero() -> None:
    """excess_verdict: "a split is named when the interval excludes 0 and p is at most
    VERDICT_LEVEL": an interval that ends exactly at 0 includes 0, so "no evidence", on
    either side (mutation QA)."""
    assert excess_verdict("train", "test", 0.1, 0.0, 0.2, 0.01) == "no evidence"
    assert excess_verdict("train", "test", -0.1, -0.2, 0.0, 0.01) == "no evidence"
    # just off 0 the same p names the split: the test above is about the end at 0
    assert excess_verdict("train", "test", 0.1, 1e-9, 0.2, 0.01) == "fine-tuned on train"
    assert excess_verdict("train", "test", -0.1, -0.2, -1e-9, 0.01) == "contaminated by test"


@pytest.mark.parametrize("p", [0.01, 0.05])
def test_excess_verdict_at_zero_is_no_evidence_at_any_p(p: float) -> None:
    """excess_verdict: the interval must exclude 0 whatever p is (mutation QA)."""
    assert excess_verdict("train", "val", 0.3, 0.0, 0.6, p) == "no evidence"


def test_few_items_get_the_exact_permutation_p_whatever_n_boot() -> None:
    """4 + 3 items have 35 labellings: the Monte Carlo p over --bootstrap 500 relabellings read
    0.044 ("contaminated") and over 2,000 read 0.056 ("no evidence"), where the exact p is 2/35
    (CAP QA). Every labelling is counted now: the p-value is the one computed here, the same at
    any n_boot; 10 + 10 items (184,756 labellings) stay Monte Carlo."""
    import itertools

    m = [0.9, 0.8, 1.0, 0.7, 0.2, 0.3, 0.1]
    c = [0.5, 0.4, 0.6, 0.5, 0.6, 0.5, 0.7]
    ref, other = (m[:4], c[:4]), (m[4:], c[4:])
    observed = split_score(*ref).pcr - split_score(*other).pcr
    diffs = []
    for chosen in itertools.combinations(range(7), 4):
        rest = [i for i in range(7) if i not in chosen]
        a = split_score([m[i] for i in chosen], [c[i] for i in chosen]).pcr
        b = split_score([m[i] for i in rest], [c[i] for i in rest]).pcr
        diffs.append(a - b)
    upper = sum(d >= observed - 1e-12 for d in diffs) / 35
    lower = sum(d <= observed + 1e-12 for d in diffs) / 35
    want = min(1.0, 2 * min(upper, lower))
    for n_boot in (200, 500, 2000):
        comp = compare_splits(
            "train", "test", ref, other, split_score(*ref), split_score(*other), n_boot=n_boot
        )
        assert (comp.p_exact, comp.n_relabellings) == (True, 35)
        assert comp.p_value == pytest.approx(want, abs=1e-12)
        p = permutation_p(ref, other, observed, alpha=0.01, scale="tanh", n_perm=n_boot, seed=3)
        assert p == pytest.approx(want, abs=1e-12)
    big = compare_splits(
        "train", "test", ([1.0] * 10, [0.0] * 10), ([0.0] * 10, [1.0] * 10),
        split_score([1.0] * 10, [0.0] * 10), split_score([0.0] * 10, [1.0] * 10), n_boot=500,
    )  # fmt: skip
    assert (big.p_exact, big.n_relabellings) == (False, 500)
