"""Documented contracts of the validation metrics (validate/metrics.py), each checked against a
value computed here, independently of the code under test (mutation QA): an enumeration, exact
fractions, or the formula the docstring states, written out."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import pytest

from contamscope.validate import detectors_for, evaluate_records
from contamscope.validate.metrics import mean_gap, roc_points


def _roc_by_threshold(scores: list[float], labels: list[bool]) -> list[list[float]]:
    """The ROC curve written out: (0, 0), then for each distinct score t, highest first,
    (share of clean items scoring >= t, share of leaked items scoring >= t)."""
    pos = sum(labels)
    neg = len(labels) - pos
    points = [[0.0, 0.0]]
    for t in sorted(set(scores), reverse=True):
        fp = sum(1 for s, y in zip(scores, labels, strict=True) if s >= t and not y)
        tp = sum(1 for s, y in zip(scores, labels, strict=True) if s >= t and y)
        points.append([fp / neg, tp / pos])
    return points


def test_roc_has_one_point_per_distinct_threshold() -> None:
    """roc_points: "``[fpr, tpr]`` pairs from (0, 0) to (1, 1), one per distinct threshold".
    Two tied pairs (one leaked, one clean at 0.9; the same at 0.1): the thresholds 0.9 and 0.1
    give (1/2, 1/2) and (1, 1), and no point between tied items (mutation QA)."""
    scores, labels = [0.9, 0.9, 0.1, 0.1], [True, False, True, False]
    want = _roc_by_threshold(scores, labels)
    assert want == [[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]]
    assert roc_points(scores, labels) == want
    # the clean item listed first: the same curve
    assert roc_points([0.9, 0.9, 0.1, 0.1], [False, True, False, True]) == want


def _exact_quantile(values: list[Fraction], q: Fraction) -> Fraction:
    """The smallest value whose share of the (equally likely) ``values`` reaches q."""
    ordered = sorted(values)
    for k, v in enumerate(ordered, 1):
        if Fraction(k, len(ordered)) >= q:
            return v
    raise AssertionError("q above 1")


def test_mean_gap_interval_is_the_central_95_percent_one() -> None:
    """mean_gap: "a 95% bootstrap interval (each group resampled with replacement on its own;
    percentile interval)": its ends are the 2.5% and 97.5% quantiles of the resampled gap.
    Leaked [0, 1, 1] resamples to a mean of 0 with probability 1/27 = 3.7%, so the 2.5%
    quantile is 0 - 2, where a 5% quantile would be 1/3 - 2 (mutation QA)."""
    leaked, clean = [0.0, 1.0, 1.0], [2.0, 2.0]
    draws = [
        Fraction(sum(int(leaked[i]) for i in idx), 3) - 2
        for idx in itertools.product(range(3), repeat=3)
    ]
    lo = _exact_quantile(draws, Fraction(25, 1000))
    hi = _exact_quantile(draws, Fraction(975, 1000))
    assert (lo, hi) == (Fraction(-2), Fraction(-1))
    assert _exact_quantile(draws, Fraction(5, 100)) == Fraction(1, 3) - 2  # not the 5% one
    g = mean_gap(leaked, clean, n_boot=20_000, min_items=2)
    assert g["gap"] == pytest.approx(2 / 3 - 2)
    assert g["ci"] == pytest.approx([float(lo), float(hi)])


def _record(item_id: str, **fields: Any) -> dict[str, Any]:
    """A stored permutation record with the fields the detectors read."""
    base = {
        "id": item_id,
        "logprobs": [-1.0, -2.0],
        "alg1": False,
        "alg2": {"-0.2": False},
        "alg2_anchored": {"-0.2": False},
        "alg2_score": 0.0,
        "alg2_argmax": 0,
        "p_value": 1.0,
    }
    return base | fields


def _mann_whitney(leaked: list[float], clean: list[float]) -> float:
    """P(leaked score > clean score) + P(equal) / 2, over every pair."""
    wins = sum((x > y) + 0.5 * (x == y) for x in leaked for y in clean)
    return wins / (len(leaked) * len(clean))


def test_anchored_alg2_auc_ranks_items_whose_maximum_is_not_the_original_last() -> None:
    """The anchored Algorithm-2 detector: "AUC from minus the outlier score, items whose
    maximum is not the original ranked last". The leaked item's maximum is its original order
    (score -0.3: minus it 0.3); the clean ones' maxima are other orders, however outlying, so
    they rank below it: AUC 1 (mutation QA)."""
    records = [
        _record("a", alg2_score=-0.3, alg2_argmax=0),
        _record("b", alg2_score=-0.9, alg2_argmax=1),
        _record("c", alg2_score=-0.8, alg2_argmax=2),
    ]
    # minus the outlier score where the maximum is the original, else below every score
    lowest = -1e300
    leaked = [0.3]
    clean = [lowest, lowest]
    want = _mann_whitney(leaked, clean)
    assert want == 1.0
    out = evaluate_records(records, {"a"}, detectors_for([-0.2], 0.05))
    assert out["alg2-anchored@-0.2"].auc == want
    # the plain detector ranks by minus the score whatever the maximum: b and c above a
    assert out["alg2@-0.2"].auc == _mann_whitney([0.3], [0.9, 0.8]) == 0.0


def test_rank_detector_flags_p_at_exactly_alpha() -> None:
    """The rank detector: "exact permutation p-value of the original order <= alpha". An
    original order strictly on top of 20 scored orders has p = 1/20, exactly 0.05: flagged
    at alpha 0.05 (mutation QA)."""
    n_orders = 20
    top = [-1.0, *(-2.0 - k for k in range(n_orders - 1))]
    p = Fraction(sum(v >= top[0] for v in top), n_orders)
    assert p == Fraction(1, 20) and float(p) == 0.05
    records = [
        _record("leaked", logprobs=top, p_value=float(p)),
        _record("clean", logprobs=top[::-1], p_value=1.0),
    ]
    m = evaluate_records(records, {"leaked"}, detectors_for([-0.2], 0.05))["rank@0.05"]
    assert (m.tp, m.fp, m.tn, m.fn) == (1, 0, 1, 0)


def test_mean_gap_withholds_its_interval_below_five_items_a_group() -> None:
    """validate --method benbench printed a bootstrap interval of the leaked - clean gap on 2 +
    2 items, where the benbench command withholds its own below 5 (a bootstrap interval of a
    mean on n items covers at most 1 - 2^(1-n); QA). The table says why the cell has none."""
    from contamscope.validate.report import tables

    few = mean_gap([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0, 9.0])
    assert few["gap"] == pytest.approx(-4.5) and few["ci"] is None
    assert "below 5 items a group (4 leaked, 5 clean)" in few["ci_note"]
    enough = mean_gap([1.0, 2.0, 3.0, 4.0, 5.0], [5.0, 6.0, 7.0, 8.0, 9.0])
    assert enough["ci"] is not None and "ci_note" not in enough
    summary = {
        "validated_method": "benbench",
        "results": [
            {"epochs": e, "detectors": {}, "scores": {}, "gaps": {"nll": g}}
            for e, g in ((0, few), (1, enough))
        ],
    }
    _, _, body = tables(summary)[1]
    assert body[0][-1] == "-4.500 [no CI: < 5 a group]"
    lo, hi = enough["ci"]
    assert body[1][-1] == f"-4.000 [{lo:.3f}, {hi:.3f}]"
