"""Two models on the same items: is one of them more drawn to the published option orders?

A permutation run says whether one model prefers each item's original order more than chance.
Comparing two runs on the same items asks a paired question: did model B (a fine-tuned copy, a
later checkpoint, another model) see more of the benchmark than model A? Per item, three
values measure how much a model favours the published order, each higher when it does:

* ``alg1``: the original order has the highest log-prob (the paper's Algorithm 1);
* ``share``: the share of the other orders the original beats (ties count half), 0.5 on
  average for a model with no preference, whatever its scale;
* ``gap``: the original's log-prob minus the mean of the others (nats).

H0 (of every test here): *on every item, A and B are equally drawn to the published order*:
the pair (A's value, B's value) is as likely as (B's value, A's value), independently across
items. Then each item's difference B - A is as likely positive as negative, and the tests are
exact: McNemar's (a binomial test of the items flagged by one model only) for ``alg1`` and a
sign-flip randomization test of the summed differences for ``share`` and ``gap``. H0 does not
say that neither model leaked: two models that saw the benchmark alike do not differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats as sps

from contamscope.detectors.stats import wilson_interval

__all__ = [
    "COMPARE_NULL",
    "PairedItem",
    "beaten_share",
    "compare_pairs",
    "leaning",
    "mcnemar",
    "newcombe_interval",
    "sign_flip_test",
]

COMPARE_NULL = (
    "on every item, the two models are equally drawn to the published option order: "
    "(A's value, B's value) is as likely as (B's value, A's value)"
)

SIGN_FLIP_EXACT = 20
"""Up to this many non-zero differences the sign-flip test enumerates all 2^n assignments."""
SIGN_FLIP_DRAWS = 20_000
"""Seeded Monte Carlo sign assignments beyond that (p = (hits + 1) / (draws + 1))."""

STATISTICS = ("alg1", "share", "gap")


def beaten_share(logprobs: Sequence[float] | NDArray[Any]) -> float:
    """Share of the other orders whose log-prob is below the original's (index 0), ties half.

    Its mean is exactly 0.5 when the original is a uniform draw from the item's values.

    >>> beaten_share([-1.0, -2.0, -1.0, -0.5])
    0.5
    """
    lp = np.asarray(logprobs, dtype=np.float64)
    if lp.size < 2:
        raise ValueError("an item needs at least 2 scored orders")
    others = lp[1:]
    below = np.count_nonzero(others < lp[0])
    tied = np.count_nonzero(others == lp[0])
    return float((below + 0.5 * tied) / others.size)


@dataclass(frozen=True)
class PairedItem:
    """One item's values under model A and model B (the same item, the same scored orders)."""

    id: str
    subject: str | None
    alg1_a: bool
    alg1_b: bool
    share_a: float
    share_b: float
    gap_a: float
    gap_b: float


def mcnemar(b_only: int, a_only: int) -> dict[str, float]:
    """Exact McNemar test: under H0 an item flagged by one model only is B's as often as A's.

    Returns the one-sided p-values ``b_greater`` (P(at least ``b_only`` of the discordant
    items are B's)) and ``a_greater``, and ``two_sided`` (twice the smaller, at most 1).

    >>> mcnemar(5, 0)["b_greater"]
    0.03125
    """
    n = b_only + a_only
    if n == 0:
        return {"b_greater": 1.0, "a_greater": 1.0, "two_sided": 1.0}
    b_greater = float(sps.binom.sf(b_only - 1, n, 0.5))
    a_greater = float(sps.binom.sf(a_only - 1, n, 0.5))
    return {
        "b_greater": b_greater,
        "a_greater": a_greater,
        "two_sided": min(1.0, 2.0 * min(b_greater, a_greater)),
    }


def newcombe_interval(
    both: int, b_only: int, a_only: int, neither: int, conf: float = 0.95
) -> tuple[float, float]:
    """Confidence interval of rate(B) - rate(A) for paired proportions: Newcombe's (1998)
    method 10, from each rate's Wilson interval and the phi correlation of the 2 x 2 table.

    >>> [round(x, 4) for x in newcombe_interval(10, 5, 0, 85)]
    [0.0047, 0.1046]
    """
    n = both + b_only + a_only + neither
    if n <= 0:
        raise ValueError("no paired items")
    p_b, p_a = (both + b_only) / n, (both + a_only) / n
    l_b, u_b = wilson_interval(both + b_only, n, conf)
    l_a, u_a = wilson_interval(both + a_only, n, conf)
    denom = (both + b_only) * (a_only + neither) * (both + a_only) * (b_only + neither)
    phi = (both * neither - b_only * a_only) / math.sqrt(denom) if denom > 0 else 0.0
    lower = math.sqrt(
        max(0.0, (p_b - l_b) ** 2 - 2 * phi * (p_b - l_b) * (u_a - p_a) + (u_a - p_a) ** 2)
    )
    upper = math.sqrt(
        max(0.0, (u_b - p_b) ** 2 - 2 * phi * (u_b - p_b) * (p_a - l_a) + (p_a - l_a) ** 2)
    )
    d = p_b - p_a
    return max(-1.0, d - lower), min(1.0, d + upper)


def sign_flip_test(diffs: Sequence[float] | NDArray[Any], seed: int = 0) -> dict[str, Any]:
    """Sign-flip randomization test of the sum of paired differences (B - A).

    Under H0 each difference is as likely ``+d`` as ``-d``. One-sided p-values ``b_greater``
    (P(sum >= observed)) and ``a_greater`` (P(sum <= observed)) over every assignment of signs
    when at most :data:`SIGN_FLIP_EXACT` differences are non-zero, else over
    :data:`SIGN_FLIP_DRAWS` seeded draws; ``two_sided`` is twice the smaller, at most 1.

    >>> sign_flip_test([1.0, 2.0, 3.0])["b_greater"]   # 1 of 8 sign assignments reaches 6
    0.125
    """
    d = np.asarray(diffs, dtype=np.float64)
    d = d[d != 0.0]
    if d.size == 0:
        return {
            "b_greater": 1.0,
            "a_greater": 1.0,
            "two_sided": 1.0,
            "method": "sign flip (no differences)",
            "n_resamples": 1,
        }
    observed = float(d.sum())
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))
    if d.size <= SIGN_FLIP_EXACT:
        sums = np.zeros(1)
        for x in d:
            sums = (sums[:, None] + np.array([x, -x])[None, :]).ravel()
        ge = float(np.mean(sums >= observed - tol))
        le = float(np.mean(sums <= observed + tol))
        method, count = "sign flip (exact)", int(sums.size)
    else:
        rng = np.random.default_rng(seed)
        total = float(d.sum())
        hits_ge = hits_le = 0
        chunk = max(1, min(SIGN_FLIP_DRAWS, 4_000_000 // d.size))
        for start in range(0, SIGN_FLIP_DRAWS, chunk):
            b = min(chunk, SIGN_FLIP_DRAWS - start)
            # random bits, one per difference: sum of (2 bit - 1) d = 2 (bits @ d) - sum(d)
            raw = rng.integers(0, 256, size=(b, (d.size + 7) // 8), dtype=np.uint8)
            bits = np.unpackbits(raw, axis=1, count=d.size).astype(np.float64)
            sums = 2.0 * (bits @ d) - total
            hits_ge += int(np.count_nonzero(sums >= observed - tol))
            hits_le += int(np.count_nonzero(sums <= observed + tol))
        ge = (hits_ge + 1) / (SIGN_FLIP_DRAWS + 1)
        le = (hits_le + 1) / (SIGN_FLIP_DRAWS + 1)
        method, count = "sign flip (Monte Carlo)", SIGN_FLIP_DRAWS
    return {
        "b_greater": ge,
        "a_greater": le,
        "two_sided": min(1.0, 2.0 * min(ge, le)),
        "method": method,
        "n_resamples": count,
    }


def _mean_ci(d: NDArray[np.float64]) -> list[float] | None:
    """Two-sided 95% t interval of the mean difference; None for one item or no variance."""
    if d.size < 2 or float(np.ptp(d)) == 0.0:
        return None
    half = float(sps.t.ppf(0.975, d.size - 1)) * float(d.std(ddof=1)) / math.sqrt(d.size)
    m = float(d.mean())
    return [m - half, m + half]


def leaning(test: dict[str, Any]) -> str:
    """Which model a paired test's one-sided p-values point to ("B", "A", or "none" when
    equal), whether or not it is significant."""
    if test["b_greater"] < test["a_greater"]:
        return "B"
    if test["a_greater"] < test["b_greater"]:
        return "A"
    return "none"


def compare_pairs(pairs: Sequence[PairedItem], alpha: float = 0.05) -> dict[str, Any]:
    """The three paired tests on ``pairs``, their Bonferroni-combined p-value (the smallest
    two-sided p times 3) and which model it points to.

    ``direction`` is "B" when the combined p is at most ``alpha`` and the smallest p's test
    finds B more drawn to the published orders, "A" for the reverse, "none" otherwise.
    """
    n = len(pairs)
    out: dict[str, Any] = {"n_items": n, "alpha": alpha, "null_hypothesis": COMPARE_NULL}
    if n == 0:
        out.update({k: None for k in STATISTICS})
        out.update(p_value=None, direction="none")
        return out
    a1 = np.array([p.alg1_a for p in pairs], dtype=bool)
    b1 = np.array([p.alg1_b for p in pairs], dtype=bool)
    both, b_only = int(np.sum(a1 & b1)), int(np.sum(b1 & ~a1))
    a_only, neither = int(np.sum(a1 & ~b1)), int(np.sum(~a1 & ~b1))
    test = mcnemar(b_only, a_only)
    out["alg1"] = {
        "a": float(a1.mean()),
        "b": float(b1.mean()),
        "a_count": int(a1.sum()),
        "b_count": int(b1.sum()),
        "difference": float(b1.mean() - a1.mean()),
        "ci": list(newcombe_interval(both, b_only, a_only, neither)),
        "both": both,
        "b_only": b_only,
        "a_only": a_only,
        "neither": neither,
        **test,
        "method": "McNemar (exact binomial)",
        "ci_method": "Newcombe hybrid score (method 10)",
    }
    for key in ("share", "gap"):
        va = np.array([getattr(p, f"{key}_a") for p in pairs], dtype=np.float64)
        vb = np.array([getattr(p, f"{key}_b") for p in pairs], dtype=np.float64)
        d = vb - va
        out[key] = {
            "a": float(va.mean()),
            "b": float(vb.mean()),
            "difference": float(d.mean()),
            "ci": _mean_ci(d),
            "ci_method": "t interval of the mean difference",
            **sign_flip_test(d),
        }
    smallest = min(STATISTICS, key=lambda k: out[k]["two_sided"])
    p = min(1.0, len(STATISTICS) * out[smallest]["two_sided"])
    out["p_value"] = p
    out["smallest"] = smallest
    out["direction"] = leaning(out[smallest]) if p <= alpha else "none"
    return out
