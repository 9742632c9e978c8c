"""Documented contracts of BenBench's Delta statistics (detectors/benbench.py), each checked
against a value or a property derived here (mutation QA)."""

from __future__ import annotations

import numpy as np
import pytest

from contamscope.detectors.benbench import (
    SPARSE_MIN_ITEMS,
    SPARSE_WARNING,
    SPARSE_ZERO_SHARE,
    delta_stats,
)


@pytest.mark.parametrize(("n", "seed"), [(6, 0), (12, 1), (30, 2)])
def test_relative_interval_is_delta_interval_scaled_when_the_reference_is_constant(
    n: int, seed: int
) -> None:
    """delta_stats: "Delta = mean(original) - mean(reference) ... with studentized bootstrap
    (bootstrap-t) 95% intervals"; "relative_pct = 100 * Delta / mean(ref), its interval
    studentized with the delta method's standard error". With every reference value equal
    to c, relative_pct is exactly 100 / c times Delta, the delta method's standard error
    100 / c times Delta's standard error sd / sqrt(n) (here sd(o - c) = sd(o)), and each
    resample's likewise: both intervals are the same bootstrap-t interval, one scaled by
    100 / c (mutation QA)."""
    rng = np.random.default_rng(seed)
    c = 2.0
    o = rng.lognormal(0.8, 0.4, n)
    r = np.full(n, c)
    d = delta_stats(o.tolist(), r.tolist(), n_boot=2000, seed=seed)
    assert d["ci"] is not None and d["relative_ci"] is not None
    assert d["relative_pct"] == pytest.approx(100.0 / c * d["delta"], rel=1e-12)
    assert d["relative_ci"] == pytest.approx([100.0 / c * x for x in d["ci"]], rel=1e-9)
    assert d["ci"][0] < d["delta"] < d["ci"][1]


def test_sparse_warning_starts_at_exactly_half_the_differences_zero() -> None:
    """delta_stats / SPARSE_ZERO_SHARE: the interval is flagged "when at least this share of
    the items' differences are exactly 0 and fewer than SPARSE_MIN_NONZERO are not": 5 zero
    differences of 10 (exactly half) is flagged, 4 of 10 is not (mutation QA)."""
    orig = [0.2, 0.0, 0.4, 0.0, 0.2, 0.0, 0.6, 0.0, 0.2, 0.0]
    ref = [0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.2, 0.0, 0.1, 0.0]
    n = len(orig)
    zeros = sum(a == b for a, b in zip(orig, ref, strict=True))
    assert n >= SPARSE_MIN_ITEMS and zeros == 5 and zeros >= SPARSE_ZERO_SHARE * n
    d = delta_stats(orig, ref)
    assert d["ci"] is not None
    assert d["ci_warning"] == SPARSE_WARNING.format(nz=n - zeros, n=n)
    # one more item that differs: 4 zeros of 10, below the share, no warning
    orig2 = [*orig[:-1], 0.3]
    d2 = delta_stats(orig2, ref)
    assert d2["ci"] is not None and d2["ci_warning"] is None
