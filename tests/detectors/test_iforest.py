"""Algorithm 2's IsolationForest scores computed from scikit-learn's trees directly
(detectors/iforest.py): the same numbers as the estimator, and the estimator where not."""

from __future__ import annotations

import numpy as np
import pytest

from contamscope.detectors import iforest
from contamscope.detectors.permutation import Algorithm2


def _cases() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    cases = [rng.normal(-500.0, 6.0, size=24) for _ in range(12)]  # MMLU-like
    cases += [np.round(rng.normal(-40.0, 2.0, size=24), 0) for _ in range(6)]  # many ties
    cases += [rng.normal(-900.0, 20.0, size=120) for _ in range(3)]  # CMB's 120 orders
    cases += [rng.normal(0.0, 1.0, size=k) for k in (1, 2, 3, 7, 255, 256)]
    cases += [np.full(24, -7.25), np.array([-1.0, -1.0, -1.0 - 1e-9])]  # constant, near-constant
    return cases


def test_the_same_numbers_as_isolation_forest() -> None:
    if not iforest.available():  # (another scikit-learn's tree internals: the estimator is used)
        pytest.skip("this scikit-learn's tree classes do not reproduce IsolationForest here")
    for values in _cases():
        for seed, trees in ((42, 100), (7, 25)):
            fast = iforest.isolation_scores(values, trees, seed)
            assert np.array_equal(fast, iforest.sklearn_scores(values, trees, seed)), values.size


def test_algorithm2_uses_it_only_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.random.default_rng(0).normal(-300.0, 4.0, size=24)
    want = iforest.sklearn_scores(values)

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("the estimator was used")

    with monkeypatch.context() as m:  # the default settings: the direct path
        m.setattr(iforest, "sklearn_scores", refuse)
        assert np.array_equal(Algorithm2().outlier_scores(values), want)
    with monkeypatch.context() as m:  # a failed probe, another contamination, over 256 values
        m.setattr(iforest, "isolation_scores", refuse)
        m.setattr(iforest, "available", lambda: False)
        assert np.array_equal(Algorithm2().outlier_scores(values), want)
    with monkeypatch.context() as m:
        m.setattr(iforest, "isolation_scores", refuse)
        got = Algorithm2(contamination=0.1).outlier_scores(values)
        assert np.array_equal(got, iforest.sklearn_scores(values, contamination=0.1))
        many = np.random.default_rng(1).normal(size=300)
        assert Algorithm2().outlier_scores(many).shape == (300,)
    with pytest.raises(ValueError, match="1 to 256 values"):
        iforest.isolation_scores(np.zeros(257))
