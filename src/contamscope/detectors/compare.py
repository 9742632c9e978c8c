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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats as sps

from contamscope.detectors.stats import cluster_ci, wilson_interval

__all__ = [
    "AUC_NULL",
    "COMPARE_NULL",
    "GAP_NULL",
    "PairedItem",
    "beaten_share",
    "cluster_ci",
    "compare_aucs",
    "compare_gaps",
    "compare_pairs",
    "leaning",
    "mcnemar",
    "newcombe_interval",
    "paired_auc_difference",
    "paired_difference",
    "paired_p_floor",
    "random_bits",
    "sign_flip_test",
    "signed_sum_test",
]

COMPARE_NULL = (
    "on every item, the two models are equally drawn to the published option order: "
    "(A's value, B's value) is as likely as (B's value, A's value)"
)

GAP_NULL = (
    "on every item, the two models are equally more familiar with its original wording than "
    "with its paraphrases: (A's gap, B's gap) is as likely as (B's gap, A's gap)"
)
"""H0 of :func:`compare_gaps` (two BenBench runs)."""

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
    group: str | None = None
    """The item's option list in its published order (as the run's template renders it, read
    as :func:`~contamscope.data.items.same_text` reads it): items with the same one are one
    draw of that order (docs/statistics.md, "Items that share one option list"); None: shares
    nothing."""


def signed_sum_test(values: Sequence[int]) -> dict[str, Any]:
    """Exact sign-flip test of a sum of integers: under H0 each value is as likely negated.
    The McNemar test of groups: a group's value is its items flagged by B only less those by
    A only, and swapping the two models for the group negates it. Enumerates the sum's
    distribution by convolution, at any number of values.

    >>> signed_sum_test([1, 1, 1, 1, 1])["b_greater"] == mcnemar(5, 0)["b_greater"]
    True
    """
    v = [abs(int(x)) for x in values if x]
    observed = int(sum(int(x) for x in values))
    total = sum(v)
    pmf = np.zeros(2 * total + 1)
    pmf[total] = 1.0  # index = sum + total
    for x in v:
        pmf = 0.5 * (np.roll(pmf, x) + np.roll(pmf, -x))
    ge = float(min(1.0, pmf[observed + total :].sum()))
    le = float(min(1.0, pmf[: observed + total + 1].sum()))
    return _sided(ge, le, "sign flip of groups (exact)")  # by convolution: nothing drawn


def _units(pairs: Sequence[PairedItem]) -> list[list[int]] | None:
    """The pairs grouped into independent draws: one list per shared option list (two or
    more items), one per other item; None when no two items share one."""
    by: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        if p.group is not None:
            by.setdefault(p.group, []).append(i)
    shared = [g for g in by.values() if len(g) > 1]
    if not shared:
        return None
    grouped = {i for g in shared for i in g}
    return shared + [[i] for i in range(len(pairs)) if i not in grouped]


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


def random_bits(rng: np.random.Generator, rows: int, k: int) -> NDArray[np.float64]:
    """``rows`` x ``k`` fair random 0/1 values (as floats), one byte drawn per 8 of them."""
    raw = rng.integers(0, 256, size=(rows, (k + 7) // 8), dtype=np.uint8)
    return np.unpackbits(raw, axis=1, count=k).astype(np.float64)


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
            sums = 2.0 * (random_bits(rng, b, d.size) @ d) - total
            hits_ge += int(np.count_nonzero(sums >= observed - tol))
            hits_le += int(np.count_nonzero(sums <= observed + tol))
        ge = (hits_ge + 1) / (SIGN_FLIP_DRAWS + 1)
        le = (hits_le + 1) / (SIGN_FLIP_DRAWS + 1)
        method, count = "sign flip (Monte Carlo)", SIGN_FLIP_DRAWS
    return _sided(ge, le, method, count)


def _sided(ge: float, le: float, method: str, count: int | None = None) -> dict[str, Any]:
    """A randomization test's result: its one-sided p-values (B's side ``ge``, A's ``le``),
    the two-sided one (twice the smaller, at most 1), the test and its resamples (where it
    drew or enumerated assignments)."""
    out = {"b_greater": ge, "a_greater": le, "two_sided": min(1.0, 2.0 * min(ge, le))}
    return out | {"method": method} | ({} if count is None else {"n_resamples": count})


def _mean_ci(d: NDArray[np.float64]) -> list[float] | None:
    """Two-sided 95% t interval of the mean difference; None for one item or no variance."""
    if d.size < 2 or float(np.ptp(d)) == 0.0:
        return None
    half = float(sps.t.ppf(0.975, d.size - 1)) * float(d.std(ddof=1)) / math.sqrt(d.size)
    m = float(d.mean())
    return [m - half, m + half]


CLUSTER_CI = "cluster-robust t interval of the mean difference (a shared option list one cluster)"
"""How the intervals are computed where some paired items share one option list."""


def paired_difference(
    a: Sequence[float] | NDArray[Any],
    b: Sequence[float] | NDArray[Any],
    units: Sequence[Sequence[int]] | None = None,
) -> dict[str, Any]:
    """A value measured on the same items under A and under B (``a[i]``, ``b[i]``: item i):
    the means, the mean difference B - A with its t interval, and :func:`sign_flip_test` of the
    differences, summed per unit of ``units`` (items that are one draw, swapped together)
    where given.

    >>> r = paired_difference([0.0, 0.1, 0.2], [1.0, 1.2, 1.1])
    >>> round(r["difference"], 3), r["b_greater"]
    (1.0, 0.125)
    """
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if va.shape != vb.shape or va.ndim != 1 or va.size == 0:
        raise ValueError("a and b must be paired, one value per item, at least one item")
    d = vb - va
    return {
        "a": float(va.mean()),
        "b": float(vb.mean()),
        "difference": float(d.mean()),
        "ci": _mean_ci(d) if units is None else cluster_ci(d, units),
        "ci_method": "t interval of the mean difference" if units is None else CLUSTER_CI,
        **sign_flip_test(d if units is None else np.array([d[list(u)].sum() for u in units])),
    }


def leaning(test: dict[str, Any]) -> str:
    """Which model a paired test's one-sided p-values point to ("B", "A", or "none" when
    equal), whether or not it is significant."""
    if test["b_greater"] < test["a_greater"]:
        return "B"
    if test["a_greater"] < test["b_greater"]:
        return "A"
    return "none"


def paired_p_floor(n_items: int, n_tests: int) -> float:
    """A lower bound on the combined p-value ``n_tests`` paired tests (exact McNemar, sign
    flip, swap test) can give on ``n_items`` pairs, whatever the models did: each test's most
    extreme outcome (every item differing, all one way) has two-sided p = 2 / 2^n (a Monte
    Carlo test stops higher), and the combined p is the smallest times ``n_tests``. Above
    ``alpha`` no comparison of that size can find a difference.

    >>> round(paired_p_floor(6, 3), 4), round(paired_p_floor(7, 3), 4)   # 6 items: none possible
    (0.0938, 0.0469)
    """
    if n_items <= 0:
        return 1.0
    return min(1.0, n_tests * 2.0 ** (1 - n_items))


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
    units = _units(pairs)
    test = (
        mcnemar(b_only, a_only)
        if units is None
        else signed_sum_test([int(b1[u].sum()) - int(a1[u].sum()) for u in units])
    )
    out["alg1"] = {
        "a": float(a1.mean()),
        "b": float(b1.mean()),
        "a_count": int(a1.sum()),
        "b_count": int(b1.sum()),
        "difference": float(b1.mean() - a1.mean()),
        "ci": (
            list(newcombe_interval(both, b_only, a_only, neither))
            if units is None
            else cluster_ci(b1.astype(np.float64) - a1.astype(np.float64), units)
        ),
        "both": both,
        "b_only": b_only,
        "a_only": a_only,
        "neither": neither,
        "method": "McNemar (exact binomial)",
        **test,
        "ci_method": "Newcombe hybrid score (method 10)" if units is None else CLUSTER_CI,
    }
    for key in ("share", "gap"):
        out[key] = paired_difference(
            [getattr(p, f"{key}_a") for p in pairs],
            [getattr(p, f"{key}_b") for p in pairs],
            units,
        )
    ci = out["share"]["ci"]
    if ci is not None:  # a share lies in [0, 1], so a difference of shares in [-1, 1]
        out["share"]["ci"] = [max(-1.0, ci[0]), min(1.0, ci[1])]
    smallest = min(STATISTICS, key=lambda k: out[k]["two_sided"])
    p = min(1.0, len(STATISTICS) * out[smallest]["two_sided"])
    out["p_value"] = p
    out["p_floor"] = paired_p_floor(n if units is None else len(units), len(STATISTICS))
    if units is not None:
        shared = [u for u in units if len(u) > 1]
        out["shared_orders"] = {
            "null_hypothesis": "items with the same options in the same published order are "
            "one draw of that order: the two models are swapped for all of them at once",
            "n_groups": len(shared),
            "n_items": sum(len(u) for u in shared),
            "largest": max(len(u) for u in shared),
        }
    out["smallest"] = smallest
    out["direction"] = leaning(out[smallest]) if p <= alpha else "none"
    return out


def compare_gaps(
    gaps: Mapping[str, tuple[Sequence[float], Sequence[float]]], alpha: float = 0.05
) -> dict[str, Any]:
    """Two BenBench runs on the same items: is one model more familiar with the original
    wording, relative to the paraphrases, than the other?

    ``gaps[metric] = (A's gaps, B's gaps)``, paired by item: each item's original-vs-paraphrase
    gap under each model, signed so that higher is more familiar with the original (for an NLL,
    the paraphrases' mean minus the original's; for an n-gram accuracy, the original's minus
    the paraphrases' mean). The gap cancels what a model's general skill does to both versions
    alike, as BenBench's Delta does. Each metric gets :func:`paired_difference` (a sign-flip
    test, H0 :data:`GAP_NULL`); a metric with no paired item is None. The combined ``p_value``
    is the smallest two-sided p times the number of metrics tested (Bonferroni), and
    ``direction`` the model its test points to when that p is at most ``alpha``.

    >>> r = compare_gaps({"nll": ([0.0] * 6, [0.5] * 6), "ngram_exact": ([0.1] * 6, [0.1] * 6)})
    >>> r["smallest"], r["p_value"], r["direction"]     # 2 x (2 / 64), two metrics
    ('nll', 0.0625, 'none')
    """
    out: dict[str, Any] = {"alpha": alpha, "null_hypothesis": GAP_NULL, "metrics": list(gaps)}
    tested = []
    for key, (va, vb) in gaps.items():
        if len(va) != len(vb):
            raise ValueError(f"{key}: A's and B's gaps must be paired")
        out[key] = {"n_items": len(va), **paired_difference(va, vb)} if len(va) else None
        if out[key] is not None:
            tested.append(key)
    out["n_items"] = max((out[k]["n_items"] for k in tested), default=0)
    out["p_floor"] = paired_p_floor(out["n_items"], len(tested)) if tested else None
    return _bonferroni(out, tested, alpha)


def _bonferroni(out: dict[str, Any], tested: list[str], alpha: float) -> dict[str, Any]:
    """``out`` with the smallest two-sided p of the ``tested`` keys times their number
    (``p_value``), its key (``smallest``) and the model it points to when significant."""
    if not tested:
        out.update(p_value=None, smallest=None, tested=[], direction="none")
        return out
    smallest = min(tested, key=lambda k: out[k]["two_sided"])
    p = min(1.0, len(tested) * out[smallest]["two_sided"])
    out.update(p_value=p, smallest=smallest, tested=tested)
    out["direction"] = leaning(out[smallest]) if p <= alpha else "none"
    return out


AUC_NULL = (
    "the two models separate the benchmark items from the reference items equally well: "
    "AUC(B) = AUC(A), on the same items"
)
"""H0 of :func:`compare_aucs` (two membership runs)."""


def _placements(x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[Any, Any]:
    """DeLong's structural components: per benchmark value the share of references below it,
    per reference value the share of benchmark values above it (ties half each)."""
    ys, xs = np.sort(y), np.sort(x)
    v10 = (np.searchsorted(ys, x, "left") + np.searchsorted(ys, x, "right")) / (2.0 * y.size)
    above = 2 * x.size - np.searchsorted(xs, y, "left") - np.searchsorted(xs, y, "right")
    return v10, above / (2.0 * x.size)


def paired_auc_difference(
    bench_a: Sequence[float] | NDArray[Any],
    ref_a: Sequence[float] | NDArray[Any],
    bench_b: Sequence[float] | NDArray[Any],
    ref_b: Sequence[float] | NDArray[Any],
) -> dict[str, Any]:
    """AUC(B) - AUC(A) of benchmark against reference values, the same items under both models
    (``bench_a[i]`` and ``bench_b[i]``: item i), by DeLong, DeLong and Clarke-Pearson's (1988)
    test for correlated AUCs: the variance of the difference from the covariance of each
    model's structural components, a normal z, two-sided and one-sided p-values and a 95%
    interval. Asymptotic, so with fewer than :data:`DELONG_MIN` benchmark or reference items
    (or no DeLong variance) the p-values are the paired swap test's (:func:`_auc_swap_test`),
    the interval still DeLong's; docs/statistics.md gives both tests' measured levels.

    >>> r = paired_auc_difference([3, 4, 5, 6], [1, 2, 3.5, 5.5], [3, 4, 5, 6], [1, 2, 3.5, 5.5])
    >>> r["a"], r["difference"], r["two_sided"]
    (0.75, 0.0, 1.0)
    """
    xa, ya = np.asarray(bench_a, np.float64), np.asarray(ref_a, np.float64)
    xb, yb = np.asarray(bench_b, np.float64), np.asarray(ref_b, np.float64)
    if xa.shape != xb.shape or ya.shape != yb.shape or xa.size < 2 or ya.size < 2:
        raise ValueError("A's and B's values must be paired, at least 2 of each kind")
    v10a, v01a = _placements(xa, ya)
    v10b, v01b = _placements(xb, yb)
    auc_a, auc_b = float(v10a.mean()), float(v10b.mean())
    s10 = np.cov(np.vstack([v10a, v10b]), ddof=1)
    s01 = np.cov(np.vstack([v01a, v01b]), ddof=1)
    var = float(
        (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / xa.size
        + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / ya.size
    )
    d = auc_b - auc_a
    out: dict[str, Any] = {
        "n_benchmark": int(xa.size),
        "n_reference": int(ya.size),
        "a": auc_a,
        "b": auc_b,
        "difference": d,
        "method": "DeLong (paired AUCs, normal approximation)",
        "ci_method": "DeLong variance, normal 95% interval",
    }
    if min(xa.size, ya.size) < DELONG_MIN or var <= 1e-15:
        # few items of either kind (the normal approximation fails: two models that each
        # separate 3 + 3 items perfectly, one each way, gave p = 0, and 3 benchmark items among
        # 100 references rejected a true H0 in 16% of pairs at 0.05), or no DeLong variance
        # (separation, or the same runs): the paired swap test, valid at every size
        out.update(_auc_swap_test(xa, ya, xb, yb, d))
        if var > 1e-15:
            se = math.sqrt(var)
            out["ci"] = [max(-1.0, d - 1.959964 * se), min(1.0, d + 1.959964 * se)]
        else:
            out.update(ci=None, ci_method="none: no DeLong variance (every item placed alike)")
        out["z"] = None
        return out
    se = math.sqrt(var)
    z = d / se
    out.update(
        ci=[max(-1.0, d - 1.959964 * se), min(1.0, d + 1.959964 * se)],
        z=z,
        b_greater=float(sps.norm.sf(z)),
        a_greater=float(sps.norm.cdf(z)),
        two_sided=float(min(1.0, 2 * sps.norm.sf(abs(z)))),
    )
    return out


SWAP_EXACT = 16
"""At most this many benchmark + reference items, :func:`paired_auc_difference`'s swap test
enumerates every swap of the two models' values (2^16 assignments); above it, it draws
:data:`SIGN_FLIP_DRAWS` of them."""

DELONG_MIN = 30
"""Fewest benchmark items, and fewest reference items, for :func:`paired_auc_difference` to
use DeLong's normal z; below it the swap test. DeLong's level measured under H0 (4,000 pairs
each, p <= 0.05): 18.8% at 2 + 40 items, 15.9% at 3 + 100, 8.5% at 8 + 100, 6.2% at 20 + 100,
5.4% at 50 + 50 (docs/statistics.md)."""


def _auc_swap_test(
    xa: NDArray[np.float64],
    ya: NDArray[np.float64],
    xb: NDArray[np.float64],
    yb: NDArray[np.float64],
    observed: float,
    seed: int = 0,
) -> dict[str, Any]:
    """Under H0 the models are exchangeable on each item: swapping A's and B's values of any
    set of items is as likely. The AUC difference over every swap (at most
    :data:`SWAP_EXACT` items), else over :data:`SIGN_FLIP_DRAWS` seeded swaps. A swap moves a
    value between the models' scales: with B's on another scale the test keeps its level and
    loses power (docs/statistics.md, measured)."""
    nb, n = xa.size, xa.size + ya.size
    if n <= SWAP_EXACT:
        masks = ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
        kind, count = "exact", 2**n
    else:
        masks = random_bits(np.random.default_rng(seed), SIGN_FLIP_DRAWS, n).astype(bool)
        kind, count = "Monte Carlo", SIGN_FLIP_DRAWS
    diffs = np.empty(len(masks))
    step = max(1, min(4096, 4_000_000 // (nb * ya.size)))  # at most 4M comparisons at a time
    for s in range(0, len(masks), step):
        m = masks[s : s + step]
        a_x, b_x = np.where(m[:, :nb], xb, xa), np.where(m[:, :nb], xa, xb)
        a_y, b_y = np.where(m[:, nb:], yb, ya), np.where(m[:, nb:], ya, yb)
        diffs[s : s + len(m)] = _aucs(b_x, b_y) - _aucs(a_x, a_y)
    tol = 1e-12
    if kind == "exact":
        ge, le = float(np.mean(diffs >= observed - tol)), float(np.mean(diffs <= observed + tol))
    else:
        ge = (int(np.count_nonzero(diffs >= observed - tol)) + 1) / (count + 1)
        le = (int(np.count_nonzero(diffs <= observed + tol)) + 1) / (count + 1)
    return _sided(ge, le, f"paired swap test of the AUC difference ({kind})", count)


def _aucs(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row-wise AUC of ``x`` (rows x benchmark items) against ``y`` (rows x references)."""
    sign = np.sign(x[:, :, None] - y[:, None, :])  # +1 above, 0 tied (a half), -1 below
    return np.asarray(0.5 + 0.5 * sign.mean(axis=(1, 2)), dtype=np.float64)


def compare_aucs(
    values: Mapping[str, tuple[Any, Any, Any, Any]], alpha: float = 0.05
) -> dict[str, Any]:
    """Two membership runs on the same benchmark and reference items: does one model separate
    the benchmark from the references better (is more familiar with the benchmark, relative to
    text it cannot have seen)?

    ``values[statistic] = (A's benchmark values, A's reference values, B's benchmark values,
    B's reference values)``, each list in one item order for both models, higher = more
    familiar. Each statistic gets :func:`paired_auc_difference` (H0 :data:`AUC_NULL`); the
    combined ``p_value`` is the smallest two-sided p times the number of statistics
    (Bonferroni), and ``direction`` the model its test points to when that p is at most
    ``alpha``.
    """
    out: dict[str, Any] = {"alpha": alpha, "null_hypothesis": AUC_NULL, "metrics": list(values)}
    for key, (xa, ya, xb, yb) in values.items():
        out[key] = paired_auc_difference(xa, ya, xb, yb)
    if values:  # the swap test's most extreme outcome: 2 / 2^n; DeLong's, lower, is asymptotic
        n = min(r["n_benchmark"] + r["n_reference"] for r in (out[k] for k in values))
        out["p_floor"] = paired_p_floor(n, len(values)) if n <= SWAP_EXACT else None
        out["n_items"] = n
    return _bonferroni(out, list(values), alpha)
