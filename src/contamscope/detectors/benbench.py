"""BenBench metrics (Xu et al. 2024): perplexity and n-gram accuracy, pure functions.

Nothing here touches a model: the inputs are token ids, teacher-forced log-probs and greedy
predictions (:class:`~contamscope.backends.base.TokenStats` values) and, for the lenient n-gram
criteria, generated texts. See ``docs/benbench.md`` for every definition and where the paper's
text and its published code disagree.

>>> starting_points(40, n=5, k=5)
[2, 10, 18, 26, 35]
>>> round(rouge_l_f("the cat sat on", "the cat is on"), 4)
0.75
>>> edit_similarity("kitten", "sitting")
0.5714285714285714
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from contamscope.detectors.stats import MC_RESAMPLES, in_own_order, randomization_p, usable_keys

__all__ = [
    "NgramResult",
    "NgramItem",
    "starting_points",
    "exact_ngram_hits",
    "first_mismatch",
    "rouge_l_f",
    "edit_similarity",
    "ngram_item",
    "answer_perplexity",
    "mean_or_none",
    "delta_stats",
    "delta_train_test",
    "CI_MIN_ITEMS",
    "paraphrase_test",
    "split_label_p",
    "LOWER_IS_FAMILIAR",
    "METRICS",
]

METRICS: dict[str, str] = {
    "ppl": "mean per-item answer perplexity (the paper's dataset perplexity); lower = more familiar",
    "nll": "mean per-item answer NLL in nats/token (log of the per-item perplexity)",
    "ngram_exact": "mean per-item exact-match n-gram accuracy; higher = more familiar",
    "ngram_rouge": "mean per-item n-gram accuracy, ROUGE-L F above the threshold",
    "ngram_edit": "mean per-item n-gram accuracy, edit similarity above the threshold",
}
"""Dataset metrics and what they mean. Every one is a mean over items of a per-item value."""

LOWER_IS_FAMILIAR = frozenset({"ppl", "nll"})
"""Metrics whose leak direction is down (Delta < 0); the n-gram accuracies' is up."""


# --------------------------------------------------------------------------- n-gram positions


def starting_points(
    n_tokens: int, *, n: int = 5, k: int = 5, max_len: int | None = None
) -> list[int]:
    """The paper's code's ``k`` starting points of an ``n_tokens``-token text, evenly spaced.

    ``np.linspace(2, min(n_tokens, max_len) - n, num=k, endpoint=True, dtype=int)``: the first
    n-gram is predicted from the first 2 tokens, the last one ends at the text's end. Texts with
    ``n_tokens - n - 1 <= 0`` have none (the code skips them). Positions may repeat for short
    texts; each repeat counts, as in the code.
    """
    if n < 1 or k < 1:
        raise ValueError("n and k must be at least 1")
    if n_tokens - n - 1 <= 0:
        return []
    top = min(n_tokens, max_len) if max_len is not None else n_tokens
    if top - n < 2:
        return []
    return [int(x) for x in np.linspace(2, top - n, num=k, endpoint=True, dtype=int)]


def first_mismatch(tokens: Sequence[int], greedy: Sequence[int], start: int, n: int) -> int | None:
    """Offset (0..n-1) of the first n-gram position where greedy decoding leaves the true text,
    or None when greedy decoding from ``tokens[:start]`` reproduces ``tokens[start:start+n]``.

    Teacher forcing: ``greedy[i]`` is the argmax given the true ``tokens[:i]``; while the greedy
    continuation matches, its context *is* the true text, so the first difference decides.
    """
    for j in range(n):
        if greedy[start + j] != tokens[start + j]:
            return j
    return None


def exact_ngram_hits(
    tokens: Sequence[int], greedy: Sequence[int], starts: Sequence[int], n: int
) -> list[bool]:
    """Exact-match n-gram prediction at each starting point, from one teacher-forced pass.

    >>> exact_ngram_hits([5, 6, 7, 8, 9], [5, 6, 0, 8, 9], [0, 3], 2)
    [True, True]
    >>> exact_ngram_hits([5, 6, 7, 8, 9], [5, 6, 0, 8, 9], [1], 2)
    [False]
    """
    return [first_mismatch(tokens, greedy, s, n) is None for s in starts]


# --------------------------------------------------------------------------- lenient similarity


_ROUGE_TOKEN = re.compile(
    r"[\u3005\u3007\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]"
    r"|[a-z0-9]+|[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]+"
)


def _rouge_tokens(text: str) -> list[str]:
    """rouge_score's default tokenisation (lowercase; runs of a-z and 0-9 are words, the rest
    separates them), and beyond it each Chinese character or kana one token and each run of
    Hangul a word: rouge_score drops them, so ROUGE-L was 0 on every Chinese n-gram, an exact
    match included (Chinese QA). The text is read in NFKC first, so full-width digits and
    letters and half-width katakana count as their ordinary forms ("１２５元" and "９８０元"
    read alike when both were dropped; diff-review QA). ASCII text tokenises as rouge_score's.

    The paper's code also Porter-stems words longer than 3 characters (``use_stemmer=True``);
    contamscope does not (no NLTK dependency): see docs/benbench.md.

    >>> _rouge_tokens("The cat's 2 hats, 甲公司")
    ['the', 'cat', 's', '2', 'hats', '甲', '公', '司']
    >>> _rouge_tokens("共计１２５元 ＧＤＰ ｱｲ")
    ['共', '计', '125', '元', 'gdp', 'ア', 'イ']
    """
    return _ROUGE_TOKEN.findall(unicodedata.normalize("NFKC", text).lower())


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l_f(predicted: str, reference: str) -> float:
    """ROUGE-L F1 between two texts: LCS of their word tokens, F = 2PR / (P + R).

    P = LCS / len(predicted), R = LCS / len(reference); 0 when either has no tokens (as
    rouge_score). Example: ``"the cat sat on"`` vs ``"the cat is on"`` share 3 of 4 words:
    P = R = F = 0.75.
    """
    p, r = _rouge_tokens(predicted), _rouge_tokens(reference)
    lcs = _lcs(p, r)
    if lcs == 0:
        return 0.0
    prec, rec = lcs / len(p), lcs / len(r)
    return 2 * prec * rec / (prec + rec)


def edit_similarity(predicted: str, reference: str) -> float:
    """1 - Levenshtein(predicted, reference) / max(len): characters, as the paper's code.

    Two empty texts are identical (1.0; the code would divide by zero).
    """
    if predicted == reference:
        return 1.0
    a, b = predicted, reference
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        cur = [i]
        for j, cb in enumerate(b, start=1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return 1.0 - prev[-1] / max(len(predicted), len(reference))


# --------------------------------------------------------------------------- per item


@dataclass(frozen=True)
class NgramResult:
    """One starting point: the true n-gram, the model's greedy n-gram and how they compare."""

    start: int
    """Token index of the n-gram's first token (the prefix is ``tokens[:start]``)."""
    original: str
    """Text of the true n-gram."""
    predicted: str | None
    """Text of the greedy n-gram; None when not needed (lenient criteria off, no exact match)."""
    exact: bool
    """Greedy decoding reproduces the true n-gram token for token."""
    mismatch_at: int | None
    """Offset of the first wrong token (None when exact)."""
    rouge_l: float | None
    """ROUGE-L F of predicted vs original (None when ``predicted`` is None)."""
    edit_sim: float | None
    """Edit similarity of predicted vs original (None when ``predicted`` is None)."""
    generated: bool
    """True when ``predicted`` came from real greedy generation (not from teacher forcing)."""


@dataclass(frozen=True)
class NgramItem:
    """n-gram accuracy of one text: per starting point and per criterion."""

    n_tokens: int
    results: tuple[NgramResult, ...]
    exact: float | None
    """Fraction of starting points predicted exactly (None: no starting point)."""
    rouge: float | None
    """Fraction with ROUGE-L F above the threshold (None: no point, or lenient criteria off)."""
    edit: float | None
    """Fraction with edit similarity above the threshold (None as for ``rouge``)."""
    all_exact: bool
    """Instance-level flag: every n-gram predicted exactly (False when there is none)."""
    all_rouge: bool | None
    all_edit: bool | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["results"] = [asdict(r) for r in self.results]
        return d


def _above(x: float, threshold: float, inclusive: bool) -> bool:
    return x >= threshold if inclusive else x > threshold


def ngram_item(
    n_tokens: int,
    results: Sequence[NgramResult],
    *,
    rouge_threshold: float = 0.75,
    edit_threshold: float = 0.9,
    inclusive: bool = False,
) -> NgramItem:
    """Aggregate one text's starting points. ``inclusive``: ``>=`` instead of the paper's ``>``."""
    res = tuple(results)
    if not res:
        return NgramItem(n_tokens, res, None, None, None, False, None, None)
    exact = sum(r.exact for r in res) / len(res)
    lenient = all(r.predicted is not None for r in res)
    rouge = edit = None
    all_rouge = all_edit = None
    if lenient:
        r_ok = [_above(r.rouge_l or 0.0, rouge_threshold, inclusive) for r in res]
        e_ok = [_above(r.edit_sim or 0.0, edit_threshold, inclusive) for r in res]
        rouge, edit = sum(r_ok) / len(res), sum(e_ok) / len(res)
        all_rouge, all_edit = all(r_ok), all(e_ok)
    return NgramItem(
        n_tokens, res, exact, rouge, edit, all(r.exact for r in res), all_rouge, all_edit
    )


def answer_perplexity(logprobs: Sequence[float]) -> tuple[float, float]:
    """(mean NLL in nats/token, perplexity = exp(mean NLL)) of the answer tokens.

    >>> nll, ppl = answer_perplexity([math.log(0.5), math.log(0.25)])
    >>> round(nll, 4), round(ppl, 4)
    (1.0397, 2.8284)
    """
    if not logprobs:
        raise ValueError("no answer tokens to score")
    nll = -sum(logprobs) / len(logprobs)
    return nll, math.exp(nll)


# --------------------------------------------------------------------------- dataset level


def mean_or_none(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


CI_MIN_ITEMS = 5
"""No interval for a split's Delta below this many paired items. A bootstrap interval of a mean
cannot reach beyond the items' own smallest and largest difference, so at ``n`` items it covers
at most ``1 - 2^(1 - n)`` of the time (0.50, 0.75, 0.875 at 2, 3, 4 items; measured the same):
no resampling method fixes that. The randomization p-value holds at any size."""

CI_MIN_SPLIT_ITEMS = 3
"""No Welch interval for ``Delta_train - Delta_test`` below this many items in either split."""

SPARSE_ZERO_SHARE = 0.5
SPARSE_MIN_NONZERO = 20
"""A Delta's interval is flagged (``ci_warning``) when at least this share of the items'
differences are exactly 0 and fewer than :data:`SPARSE_MIN_NONZERO` are not: n-gram accuracies
near 0, where most items score 0 on both versions. In simulation (docs/benbench.md) such
intervals covered 0.65-0.95 of the time from 8 items (below 0.90 in 15 of 23 cases); the others
0.89-0.96 (benchmarks/benbench_sparse_ci.py)."""

SPARSE_MIN_ITEMS = 8
"""The flag starts at this many items: at 5-7 the sparse intervals it would flag covered 1.00
in simulation and the others fell short too (0.50-0.91), so it would point at the wrong ones."""

SPARSE_WARNING = (
    "{nz} of {n} items score differently on the original and its paraphrases, so the interval "
    "rests on few values: in simulation such intervals covered as little as 0.65 of the time, "
    "not 0.95"
)

_USABLE = 0.9
"""The share of bootstrap resamples that must give a usable statistic (a standard error above 0
and, for the relative Delta, a reference mean other than 0), or no interval is given."""


TOO_LARGE = "the values are too large for an interval in floating point"
"""Why an interval is left out where the items' values (perplexities above about 1e154, whose
squares overflow) cannot be resampled: it came out as [nan, nan], written as bare NaN (QA)."""


def _boot_t_ci(
    stat: float, se: float, stat_b: Any, se_b: Any, level: float = 0.95
) -> tuple[list[float] | None, str | None]:
    """The equal-tailed studentized bootstrap (bootstrap-t) interval
    ``[stat - q_hi * se, stat - q_lo * se]``, ``q`` the quantiles of ``(stat* - stat) / se*``
    over the resamples whose ``se*`` is above 0 and finite."""
    if not (math.isfinite(stat) and math.isfinite(se)):  # (NaN ends were written; QA)
        return None, TOO_LARGE
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = (stat_b - stat) / se_b
    ok = np.isfinite(t) & (se_b > 0)
    if ok.mean() < _USABLE:
        return None, "too few resamples give a usable standard error"
    lo, hi = np.quantile(t[ok], [(1 - level) / 2, 1 - (1 - level) / 2])
    ends = [float(stat - hi * se), float(stat - lo * se)]
    if not all(math.isfinite(x) for x in ends):
        return None, TOO_LARGE
    return ends, None


def _tiny(x: Any) -> float:
    return 1e-12 * max(1.0, float(np.max(np.abs(x))))


def _ratio_z(o: Any, r: Any) -> Any:
    """Per-item linearisation of ``100 * (mean(o) / mean(r) - 1)`` along the last axis (the
    delta method): its standard error is ``100 * sd(z) / sqrt(n)``."""
    mo, mr = o.mean(axis=-1, keepdims=True), r.mean(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (o - (mo / mr) * r) / mr


def _paired(original: Sequence[float], reference: Sequence[float]) -> tuple[Any, Any]:
    if len(original) != len(reference):
        raise ValueError("original and reference must be paired")
    return np.asarray(original, dtype=float), np.asarray(reference, dtype=float)


def delta_stats(
    original: Sequence[float],
    reference: Sequence[float],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    keys: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Delta = mean(original) - mean(reference) over paired items, with studentized bootstrap
    (bootstrap-t) 95% intervals, items resampled as pairs.

    ``original[i]`` and ``reference[i]`` belong to the same item (reference = the mean over the
    item's paraphrases). ``relative_pct`` = 100 * Delta / mean(ref), its interval studentized
    with the delta method's standard error. No interval (``ci`` None, ``ci_note`` says why)
    below :data:`CI_MIN_ITEMS` items, when every item's difference is the same, or when too few
    resamples are usable (``relative_ci``: also when mean(ref) is 0). ``ci_warning`` says when
    an interval rests on few nonzero differences (:data:`SPARSE_ZERO_SHARE`). Measured coverage
    (docs/statistics.md): 0.94-0.95 from 5 items on symmetric data; the expanded percentile
    interval used before covered 0.92 at 5 items and 0.49-0.87 at 2-4, and on skewed data
    bootstrap-t gains 4-8 points.

    The resamples draw the items in an order of their own: ``keys`` (one per item, e.g. a
    digest of its texts), else their values. By values, two perplexities that differ in
    their last digits (another batch size) can trade places, and with them their pairs: the
    interval then moved by its Monte Carlo error; keyed, it stays.
    """
    o, r = _paired(original, reference)
    if keys is not None and len(keys) != o.size:
        raise ValueError("keys must give one key per item")
    if not usable_keys(keys, o.size):  # keys given twice: by value, as without keys (QA)
        keys = None
    n = o.size
    out: dict[str, Any] = {
        "n": n,
        "original": None,
        "reference": None,
        "delta": None,
        "ci": None,
        "relative_pct": None,
        "relative_ci": None,
        "ci_note": None,
        "ci_warning": None,
    }
    if n == 0:
        return out
    mo, mr = float(o.mean()), float(r.mean())
    out.update(original=mo, reference=mr, delta=mo - mr)
    if mr != 0:
        out["relative_pct"] = 100.0 * (mo - mr) / mr
    if n < CI_MIN_ITEMS:
        out["ci_note"] = (
            f"fewer than {CI_MIN_ITEMS} items (an interval would miss far more than 5% of the time)"
        )
        return out
    if keys is not None:  # the interval depends on the items, not on their order
        by_key = np.array(sorted(range(n), key=keys.__getitem__), dtype=np.intp)
        o, r = o[by_key], r[by_key]
    else:
        o, r = in_own_order(o, r)
    d = o - r
    with np.errstate(over="ignore", invalid="ignore"):  # (perplexities near 1e200: QA)
        sd = float(d.std(ddof=1))
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    if not math.isfinite(sd):
        out["ci_note"] = TOO_LARGE
    elif sd <= _tiny(d):
        out["ci_note"] = "every item's difference is the same (no spread to resample)"
    else:
        db = d[idx]
        se_b = db.std(axis=1, ddof=1) / math.sqrt(n)
        se_b[se_b <= _tiny(d)] = 0.0
        out["ci"], out["ci_note"] = _boot_t_ci(mo - mr, sd / math.sqrt(n), db.mean(axis=1), se_b)
        nz = int(np.count_nonzero(np.abs(d) > _tiny(np.abs(o) + np.abs(r))))
        sparse = n - nz >= SPARSE_ZERO_SHARE * n and nz < SPARSE_MIN_NONZERO
        if out["ci"] and n >= SPARSE_MIN_ITEMS and sparse:
            out["ci_warning"] = SPARSE_WARNING.format(nz=nz, n=n)
    if mr != 0:
        with np.errstate(over="ignore", invalid="ignore"):
            se = 100.0 * float(_ratio_z(o, r).std(ddof=1)) / math.sqrt(n)
        if se > 0 and math.isfinite(se):
            ob, rb = o[idx], r[idx]
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                rel_b = 100.0 * (ob.mean(axis=1) / rb.mean(axis=1) - 1.0)
                se_rb = 100.0 * _ratio_z(ob, rb).std(axis=1, ddof=1) / math.sqrt(n)
            se_rb = np.where(np.isfinite(se_rb) & (se_rb > 1e-12 * se), se_rb, 0.0)
            out["relative_ci"] = _boot_t_ci(out["relative_pct"], se, rel_b, se_rb)[0]
    return out


def _welch_ci(est: float, va: float, vb: float, na: int, nb: int) -> list[float] | None:
    """Welch's t interval (95%) of a difference of two independent means with variances of the
    mean ``va`` and ``vb``."""
    v = va + vb
    if not (v > 0 and math.isfinite(v)):
        return None
    df = v**2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    half = _t_quantile(df) * math.sqrt(v)
    return [est - half, est + half]


def _var_of_mean(x: Any) -> float:
    """The variance of the mean of ``x``; 0 when its values are equal up to rounding."""
    sd = float(x.std(ddof=1))
    return 0.0 if sd <= _tiny(x) else sd**2 / x.size


def _t_quantile(df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


def delta_train_test(
    train: tuple[Sequence[float], Sequence[float]],
    test: tuple[Sequence[float], Sequence[float]],
    *,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Delta_train - Delta_test (absolute and relative), with Welch's t 95% interval.

    Each argument is ``(original values, reference values)`` paired by item; the splits are
    independent. H0 for the CI: the original-vs-paraphrase gap is the same on both splits (no
    preferential exposure to one split). The relative value is the difference of the splits'
    relative Deltas, in percentage points, its interval from the delta method's standard
    errors. No interval below :data:`CI_MIN_SPLIT_ITEMS` items in either split (``ci_note``
    says why). Measured coverage 0.94-0.99 from 2 + 2 items in every scenario of
    docs/statistics.md; the bootstrap interval used before covered 0.63-0.92 at 2 + 2 and
    3 + 3. ``n_boot`` and ``seed`` are kept for callers; the interval needs no resampling.
    """
    del n_boot, seed
    (oa, ra), (ob, rb) = (_paired(*split) for split in (train, test))
    na, nb = oa.size, ob.size
    out: dict[str, Any] = {
        "n_train": na,
        "n_test": nb,
        "value": None,
        "ci": None,
        "relative_pct": None,
        "relative_ci": None,
        "ci_note": None,
    }
    if not na or not nb:
        return out
    da, db = oa - ra, ob - rb
    out["value"] = float(da.mean() - db.mean())
    if ra.mean() != 0 and rb.mean() != 0:
        out["relative_pct"] = 100.0 * float(oa.mean() / ra.mean() - ob.mean() / rb.mean())
    if min(na, nb) < CI_MIN_SPLIT_ITEMS:
        out["ci_note"] = f"fewer than {CI_MIN_SPLIT_ITEMS} items in a split"
        return out
    out["ci"] = _welch_ci(out["value"], _var_of_mean(da), _var_of_mean(db), na, nb)
    if out["ci"] is None:
        out["ci_note"] = "every item's difference is the same on both splits"
    if out["relative_pct"] is not None:
        za, zb = 100.0 * _ratio_z(oa, ra), 100.0 * _ratio_z(ob, rb)
        out["relative_ci"] = _welch_ci(
            out["relative_pct"], _var_of_mean(za), _var_of_mean(zb), na, nb
        )
    return out


# --------------------------------------------------------------------------- p-values


def paraphrase_test(
    original: Sequence[float],
    references: Sequence[Sequence[float]],
    *,
    lower_is_familiar: bool,
    keys: Sequence[str] | None = None,
) -> dict[str, Any]:
    """One-sided randomization test of Delta (original - mean of the item's paraphrases).

    H0: each item's original text is exchangeable with its paraphrases for this model, i.e.
    which of the item's ``1 + len(references[i])`` versions is the original is a uniform
    draw. The statistic is the sum over items of ``original - mean(paraphrases)`` (n x Delta),
    signed so that the leak direction (lower perplexity/NLL, higher n-gram accuracy) is
    positive; the p-value is P(statistic >= observed) over the relabellings: exact up to
    10^6 of them, else 20,000 seeded draws (:func:`~contamscope.detectors.stats.randomization_p`).
    It holds its level at any number of items. Items without a paraphrase are left out.

    A clean model can reject H0 when the paraphrases are less natural than the originals;
    Delta_train - Delta_test (:func:`split_label_p`) cancels that. See docs/benbench.md.

    >>> paraphrase_test([0.0, 0.0], [[1.0], [1.0, 1.0]], lower_is_familiar=True)["p_value"]
    0.16666666666666666
    """
    if len(original) != len(references):
        raise ValueError("original and references must be paired")
    if keys is not None and len(keys) != len(original):
        raise ValueError("keys must give one key per item")
    sign = -1.0 if lower_is_familiar else 1.0
    nulls, kept = [], []
    for i, (o, refs) in enumerate(zip(original, references, strict=True)):
        if len(refs) == 0:
            continue
        kept.append(i)
        v = sign * np.asarray([o, *refs], dtype=np.float64)
        # each version's value minus the mean of the item's other versions
        nulls.append(v - (v.sum() - v) / (v.size - 1))
    if not nulls:
        return {"p_value": None, "test": None, "n_resamples": None}
    # drawn in the order of ``keys`` (the items' texts) where given: by value, originals that
    # moved in their last digits (another batch size) moved p by its Monte Carlo error (QA)
    p, method, resamples = randomization_p(
        nulls, [str(keys[i]) for i in kept] if keys is not None else None
    )
    return {"p_value": p, "test": method, "n_resamples": resamples}


def split_label_p(
    a: Sequence[float], b: Sequence[float], *, n_perm: int = MC_RESAMPLES, seed: int = 0
) -> float | None:
    """Two-sided split-label permutation p-value of mean(a) - mean(b).

    H0: the per-item values of both splits come from one distribution (no split is treated
    differently), so any assignment of the pooled items to splits of the same sizes is as
    likely. p = (1 + #{relabellings with |difference| >= |observed|}) / (1 + n_perm), seeded;
    valid at any number of items. None when either split is empty.

    >>> split_label_p([1.0, 2.0], [3.0, 4.0], n_perm=999) > 0.2   # 4 items cannot reach 0.05
    True
    """
    (x,), (y,) = in_own_order(a), in_own_order(b)  # p depends on the items, not their order
    if x.size == 0 or y.size == 0:
        return None
    pooled = np.concatenate([x, y])
    total, na, nb = float(pooled.sum()), x.size, y.size
    observed = abs(float(x.mean()) - float(y.mean()))
    tol = 1e-12 * max(1.0, observed)
    rng = np.random.default_rng(seed)
    hits = 0
    chunk = max(1, min(n_perm, 4_000_000 // pooled.size))  # bounded memory
    for start in range(0, n_perm, chunk):
        rows = min(chunk, n_perm - start)
        perm = rng.permuted(np.broadcast_to(pooled, (rows, pooled.size)), axis=1)
        sa = perm[:, :na].sum(axis=1)
        diff = np.abs(sa / na - (total - sa) / nb)
        hits += int(np.count_nonzero(diff >= observed - tol))
    return (1 + hits) / (1 + n_perm)
