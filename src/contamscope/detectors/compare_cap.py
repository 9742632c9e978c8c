"""Two models' CAP runs on the same items: does one lean further toward the tested split?

For one model, CAP reads a split's exposure from ``PCR = scale((M + alpha) / (C + alpha))``:
training on a split raises its performance M more than the consistency C of its answers between
the original and the modified inputs, so ``PCR_other - PCR_reference`` > 0 points at the other
split (``test``), < 0 at the reference split (``train``). For two models on the same items the
difference in differences

    D = (lean_other)_B - (lean_other)_A,   lean_other = X_other - X_reference

says whether B leans further toward the other split than A does (D > 0: B is the more exposed to
it, relative to the reference split). What both splits share, a model's general skill on the
task, cancels within each model, as in CAP's own train-test contrast. Two scales X:

* ``excess``, M - C (the tested one): what PCR's ratio compares, on a linear scale. D is then a
  weighted sum of per-item differences, the swap test below is a sign-flip test, and a model
  more skilled on both splits alike leaves D's expectation at 0.
* ``pcr``, CAP's PCR (the paper's scale, reported): its non-linear scale turns equal skill on
  both splits into a lean: with B 0.15 more skilled on both, its test reached p <= 0.05 in 16%
  of simulated pairs at 1,000 items per split (M - C: 5%); and tanh saturates once M is a few
  times C, so it found a copy that memorised 80% of 50 test items in 69% of pairs (M - C:
  83%). With 30% memorised it was slightly ahead (68% vs 64% at 200 items);
  benchmarks/compare_cap_null.py.

H0 (:data:`PCR_NULL`): *on every item, the two models' readings are exchangeable*: (A's (M, C),
B's (M, C)) is as likely as (B's, A's), independently across items. The test swaps the two
models' readings item by item: exactly, over every assignment of the items whose readings differ
when there are at most :data:`SWAP_EXACT` of them, else over :data:`SWAP_DRAWS` seeded draws. The
95% interval is the expanded percentile interval of D over a paired bootstrap (items resampled
within each split, the same items for both models).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from contamscope.detectors.cap import _CHUNK, Scale, _clean, _pcr_of, _spread
from contamscope.detectors.compare import _bonferroni, paired_p_floor, random_bits
from contamscope.detectors.stats import expanded_tail, tail_draws

__all__ = ["PCR_NULL", "SWAP_DRAWS", "SWAP_EXACT", "compare_leans", "lean_difference"]

PCR_NULL = (
    "on every item, the two models' performance and consistency are exchangeable: "
    "(A's (M, C), B's (M, C)) is as likely as (B's, A's)"
)
SWAP_EXACT = 14
"""Up to this many items whose readings differ, the swap test enumerates every assignment."""
SWAP_DRAWS = 20_000
"""Seeded random assignments of the swap test beyond :data:`SWAP_EXACT` differing items."""

Readings = tuple[Sequence[float], Sequence[float], Sequence[float], Sequence[float]]
"""One split's paired items: A's M, A's C, B's M, B's C (one value per item, same items)."""


def _d(means: NDArray[Any], stat: str, alpha: float, scale: Scale) -> NDArray[Any]:
    """D from the 8 means per row: reference (m_a, c_a, m_b, c_b), then other (the same);
    ``stat`` "excess" (on M - C) or "pcr" (on PCR)."""
    if stat == "excess":
        e = [means[..., 2 * k] - means[..., 2 * k + 1] for k in range(4)]
    else:
        e = [_pcr_of(means[..., 2 * k], means[..., 2 * k + 1], alpha, scale) for k in range(4)]
    a_r, b_r, a_o, b_o = e
    return np.asarray((b_o - b_r) - (a_o - a_r), dtype=np.float64)


def _arrays(split: Readings, name: str) -> NDArray[np.float64]:
    arr = np.asarray([np.asarray(x, dtype=np.float64) for x in split])
    if arr.ndim != 2 or arr.shape[0] != 4 or arr.shape[1] == 0:
        raise ValueError(f"{name}: four paired sequences (A's M, C; B's M, C), at least one item")
    return arr


def _swap_test(
    ref: NDArray[np.float64], other: NDArray[np.float64], observed: dict[str, float],
    alpha: float, scale: Scale, seed: int,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Per statistic, the one-sided and two-sided p of D under random swaps of A's and B's
    readings per item (the same swaps for both statistics)."""
    base = np.concatenate([ref.mean(axis=1), other.mean(axis=1)])  # 8 means
    # per differing item: how swapping it moves the 8 means (A gets B's value, B gets A's)
    moves = []
    for k, arr in enumerate((ref, other)):
        dm, dc = (arr[2] - arr[0]) / arr.shape[1], (arr[3] - arr[1]) / arr.shape[1]
        for i in np.flatnonzero((dm != 0) | (dc != 0)):
            row = np.zeros(8)
            row[4 * k : 4 * k + 4] = (dm[i], dc[i], -dm[i], -dc[i])
            moves.append(row)
    if not moves:
        return {stat: {"b_greater": 1.0, "a_greater": 1.0, "two_sided": 1.0,
                       "method": "swap test (no differences)", "n_resamples": 1}
                for stat in observed}  # fmt: skip
    shift = np.asarray(moves)
    k = len(moves)
    exact = k <= SWAP_EXACT
    rng = np.random.default_rng(seed)
    step = max(1, min(SWAP_DRAWS, _CHUNK // k))
    counts = {stat: [0, 0, 0] for stat in observed}  # >=, <=, defined
    for start in range(0, 2**k if exact else SWAP_DRAWS, step):
        if exact:
            rows = np.arange(start, min(start + step, 2**k))
            masks = ((rows[:, None] >> np.arange(k)[None, :]) & 1).astype(np.float64)
        else:
            masks = random_bits(rng, min(step, SWAP_DRAWS - start), k)
        moved = base + masks @ shift
        for stat, obs in observed.items():
            tol = 1e-9 * max(1.0, abs(obs))
            d = _d(moved, stat, alpha, scale)
            d = d[np.isfinite(d)]
            c = counts[stat]
            c[0] += int(np.count_nonzero(d >= obs - tol))
            c[1] += int(np.count_nonzero(d <= obs + tol))
            c[2] += d.size
    out = {}
    for stat, (ge, le, used) in counts.items():
        if exact:  # the observed assignment is one of the enumerated ones
            p_ge, p_le = ge / max(used, 1), le / max(used, 1)
        else:
            p_ge, p_le = (ge + 1) / (used + 1), (le + 1) / (used + 1)
        out[stat] = {"b_greater": p_ge, "a_greater": p_le,
                     "two_sided": min(1.0, 2.0 * min(p_ge, p_le)),
                     "method": "swap test (exact)" if exact else "swap test (Monte Carlo)",
                     "n_resamples": 2**k if exact else SWAP_DRAWS}  # fmt: skip
    return out


def _bootstrap(
    ref: NDArray[np.float64], other: NDArray[np.float64], n_boot: int, seed: int
) -> NDArray[np.float64]:
    """The 8 means over ``n_boot`` paired resamples (the same items for A and B, within each
    split), one row per resample."""
    rng = np.random.default_rng(seed + 1)
    out = []
    step = max(1, _CHUNK // max(ref.shape[1], other.shape[1]))
    for start in range(0, n_boot, step):
        b = min(step, n_boot - start)
        means = []
        for arr in (ref, other):
            idx = rng.integers(0, arr.shape[1], size=(b, arr.shape[1]))
            means.append(np.stack([arr[j][idx].mean(axis=1) for j in range(4)], axis=1))
        out.append(np.concatenate(means, axis=1))
    return np.concatenate(out)


STATISTICS = ("excess", "pcr")
"""The scales D is computed on: M - C (tested) and PCR (the paper's, reported)."""


def _levels(arr: NDArray[np.float64], who: int, alpha: float, scale: Scale) -> dict[str, float]:
    m, c = float(arr[2 * who].mean()), float(arr[2 * who + 1].mean())
    return {
        "m": m,
        "c": c,
        "excess": m - c,
        "pcr": float(_pcr_of(np.array(m), np.array(c), alpha, scale)),
    }


def lean_difference(
    reference: Readings,
    other: Readings,
    *,
    alpha: float = 0.01,
    scale: Scale = "tanh",
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """D = (X_other - X_reference)_B - (X_other - X_reference)_A on paired items, for X = M - C
    (``excess``, tested) and X = PCR (``pcr``), each with the swap test of H0
    :data:`PCR_NULL` and a paired-bootstrap 95% interval (expanded, over ``n_boot`` resamples or
    more at few items: :func:`~contamscope.detectors.stats.tail_draws`).

    ``reference`` and ``other`` hold each split's paired readings (:data:`Readings`). The
    result has M, C, M - C and PCR per model and split (``a``, ``b``: ``reference``,
    ``other``), and per statistic each model's lean, ``difference`` (D), ``ci``, one-sided
    ``b_greater`` (P(D' >= D) under swaps) and ``a_greater``, and ``two_sided`` (twice the
    smaller, at most 1). The excess statistic's test is repeated at the top level.

    >>> ref = ([1, 0, 1, 0], [1, 0, 1, 0], [1, 0, 1, 0], [1, 0, 1, 0])  # alike on the reference
    >>> other = ([0] * 4, [1] * 4, [1] * 4, [0] * 4)     # B right but inconsistent on all 4
    >>> r = lean_difference(ref, other)
    >>> r["difference"], r["b_greater"], r["method"]    # 1 of 2^4 swaps reaches it
    (2.0, 0.0625, 'swap test (exact)')
    >>> r["ci"], r["ci_method"]  # the 4 items alike: no zero-width "[2.0, 2.0]"
    (None, 'none: every paired bootstrap resample gave the same difference')
    """
    r, o = _arrays(reference, "reference"), _arrays(other, "other")
    base = np.concatenate([r.mean(axis=1), o.mean(axis=1)])
    out: dict[str, Any] = {"n_reference": r.shape[1], "n_other": o.shape[1]}
    for k, who in enumerate(("a", "b")):
        lv = {"reference": _levels(r, k, alpha, scale), "other": _levels(o, k, alpha, scale)}
        out[who] = {
            **{part: {x: _clean(v) for x, v in lv[part].items()} for part in lv},
            **{
                f"lean_{stat}": _clean(lv["other"][stat] - lv["reference"][stat])
                for stat in STATISTICS
            },
        }
    observed = {stat: float(_d(base, stat, alpha, scale)) for stat in STATISTICS}
    defined = {stat: v for stat, v in observed.items() if math.isfinite(v)}
    tests = _swap_test(r, o, defined, alpha, scale, seed)
    n = min(r.shape[1], o.shape[1])
    drawn = tail_draws(n_boot, expanded_tail(n), r.shape[1] + o.shape[1]) if n >= 2 else n_boot
    boots = _bootstrap(r, o, drawn, seed)
    for stat in STATISTICS:
        if stat not in defined:
            out[stat] = {"difference": None, "ci": None, "b_greater": None, "a_greater": None,
                         "two_sided": None, "method": "undefined PCR (alpha 0 and no consistent "
                         "item)", "n_resamples": 0}  # fmt: skip
            continue
        d = _d(boots, stat, alpha, scale)
        d = d[np.isfinite(d)]
        ci = flat = None
        if d.size and n >= 2:
            tail = expanded_tail(n)
            low, high = _spread(np.quantile(d, [tail, 1 - tail]))  # NaN: every resample alike
            flat = math.isnan(low)
            ci = None if flat else [low, high]
        out[stat] = {
            "difference": defined[stat],
            "ci": ci,
            "ci_method": "none: every paired bootstrap resample gave the same difference"
            if flat
            else f"expanded percentile, {d.size} paired bootstrap resamples",
            **tests[stat],
        }
    out.update(out["excess"])
    return out


def compare_leans(
    tests: dict[str, tuple[Readings, Readings]],
    *,
    alpha: float = 0.05,
    pcr_alpha: float = 0.01,
    scale: Scale = "tanh",
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """:func:`lean_difference` for each ``tests[key] = (reference, other)`` (one per reader and
    tested split); the combined ``p_value`` is the smallest two-sided p of the excess
    statistic times the number of tests (Bonferroni), ``direction`` the model its test points
    to when that p is at most ``alpha`` ("none" otherwise). ``pcr_alpha`` is CAP's smoothing
    constant."""
    out: dict[str, Any] = {"alpha": alpha, "null_hypothesis": PCR_NULL, "metrics": list(tests)}
    for k, (key, (ref, other)) in enumerate(tests.items()):
        out[key] = lean_difference(
            ref, other, alpha=pcr_alpha, scale=scale, n_boot=n_boot, seed=seed + k
        )
    tested = [k for k in tests if out[k]["two_sided"] is not None]
    sizes = [out[k]["n_reference"] + out[k]["n_other"] for k in tested]
    out["p_floor"] = paired_p_floor(max(sizes), len(tested)) if tested else None
    return _bonferroni(out, tested, alpha)
