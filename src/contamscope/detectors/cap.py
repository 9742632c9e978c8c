"""CAP (Zhao et al.): Performance Consistency Ratio, pure functions over stored predictions.

``PCR = scale((M + alpha) / (C + alpha))`` per split, where M is the model's performance on the
original inputs and C the consistency of its predictions between the original and the
consistency-preserving modified inputs. Training on a split raises M more than C, so
``PCR_train - PCR_test`` > 0 points at fine-tuning on the training split, < 0 at contamination by
the test split (paper, section 3.3). Beyond the paper: a bootstrap 95% CI of the difference, so
"close to zero" has a stated meaning, a split-label permutation test, and the same contrast on
M - C (``excess_*``), which tanh's ceiling cannot hide (docs/cap.md).

>>> round(pcr(0.2304, 0.727), 4)   # FinMA-Full-7B, FinQA train (paper, Table 7)
0.3151
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np

from contamscope.detectors.stats import expanded_tail, in_own_order, tail_draws

__all__ = [
    "Scale",
    "SCALES",
    "tokens",
    "rouge_l",
    "rouge_n",
    "jaccard",
    "map_choice",
    "mcq_fields",
    "refresh_choices",
    "LABELS",
    "pcr",
    "SplitScore",
    "split_score",
    "Comparison",
    "compare_splits",
    "excess_verdict",
    "holm",
    "adjust_for_family",
    "verdict",
]

Scale = Literal["tanh", "linear", "sigmoid"]
SCALES: tuple[str, ...] = ("tanh", "linear", "sigmoid")

_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W_]+", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; each CJK character is a token (no stemming, no stop words).

    >>> tokens("Net income rose 7.5% in 2020; 净利润")
    ['net', 'income', 'rose', '7', '5', 'in', '2020', '净', '利', '润']
    """
    return _TOKEN.findall(text.lower())


def _f1(overlap: int, n_pred: int, n_ref: int) -> float:
    if overlap == 0 or n_pred == 0 or n_ref == 0:
        return 0.0
    p, r = overlap / n_pred, overlap / n_ref
    return 2 * p * r / (p + r)


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1 (longest common subsequence of :func:`tokens`), as rouge-score without stemming.

    >>> round(rouge_l("the cat sat on the mat", "the cat lay on the mat"), 4)
    0.8333
    """
    p, r = tokens(prediction), tokens(reference)
    return _f1(_lcs(p, r), len(p), len(r))


def rouge_n(prediction: str, reference: str, n: int = 2) -> float:
    """ROUGE-N F1 over clipped n-gram counts of :func:`tokens` (ROUGE-2 for ``n=2``).

    >>> rouge_n("the cat sat", "the cat sat", 2)
    1.0
    """
    from collections import Counter

    def grams(t: list[str]) -> Counter[tuple[str, ...]]:
        return Counter(tuple(t[i : i + n]) for i in range(len(t) - n + 1))

    gp, gr = grams(tokens(prediction)), grams(tokens(reference))
    overlap = sum((gp & gr).values())
    return _f1(overlap, sum(gp.values()), sum(gr.values()))


def jaccard(a: str, b: str) -> float:
    """Jaccard similarity (1 - Jaccard distance) of the token sets. Two empty texts give 0: no
    answer is no consistent answer, as an unmapped choice is for multiple choice (with 1, a
    model that answered nothing was perfectly consistent, and a run of empty answers read
    "no evidence" with PCR difference 0 [0, 0] instead of inconclusive).

    >>> jaccard("revenue rose 5%", "revenue rose 7%"), jaccard("", " ")
    (0.5, 0.0)
    """
    sa, sb = set(tokens(a)), set(tokens(b))
    if not sa and not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)


_OPEN = r"[\(\[（【\"'*]*"
"""What may stand before a label: brackets, quotes, Markdown bold."""

_LEAD = re.compile(
    r"^\s*(?:(?:the\s+)?(?:correct\s+)?(?:answer|option|choice)(?:\s*(?:is|:))?\s*"
    r"|(?:正确)?答案(?:\s*(?:应该是|应为|是|为))?(?:\s*[:：])?\s*|选择(?:\s*[:：])?\s*|选项\s*"
    r"|选\s*)?" + _OPEN + r"([A-J])(?![A-Za-z])",
    re.IGNORECASE,
)
"""A label the answer starts with, after "Answer:", "答案是" ...: as :data:`_STATED`, each run of
spaces has one place to go."""

_STATED = re.compile(
    r"(?i:answer\s+is|answer\s*:|答案(?:\s*(?:应该是|应为|是|为))?(?:\s*[:：])?|[故应]选|[所因]以选"
    r"|因此选|选择(?:\s*[:：])?)\s*" + _OPEN + r"([A-J])(?![A-Za-z])"
)
r"""An answer stated anywhere ("..., 故选B", "so the answer is D"): an upper-case label only.
Each run of spaces has one place to go (three ``\s*`` in a row after "答案" made an answer of
"答案" and 1,500 spaces take 55 s to map; security QA)."""


_ARTICLE = re.compile(r"[AI]\s+(?!(?:is|was)\b)[a-z]")
"""English "A" / "I" starting a sentence ("A molecule called ATP"), not an option label."""

_NEXT_LABEL = re.compile(r"\s*(?:[,/、，;|]|or\b|and\b|或|和)\s*([A-J])(?![A-Za-z])")
"""Another label after the first ("[A, B, C, D", "A/B", "A or B"): a list, not one answer."""


def _lists_labels(text: str, m: re.Match[str], n: int) -> bool:
    """Another option label right after the one ``m`` matched ("A/B", "A或B")."""
    after = _NEXT_LABEL.match(text, m.end())
    return bool(
        after and after.group(1) != m.group(1) and ord(after.group(1).upper()) - ord("A") < n
    )


def map_choice(text: str, options: Sequence[str]) -> int | None:
    """Map a free-text answer to an option index by rules, or ``None`` (unmapped).

    Rules, in order: (1) the answer starts with a letter label, optionally after "Answer:",
    "The answer is", "答案：", "正确答案是", "选择：", a bracket, a quote or Markdown bold ("B",
    "(B)", "B. 1640", "答案：B", "**B**"); a lower-case letter counts only when nothing follows
    it; (2) else an upper-case label stated anywhere ("..., 故选B", "so the answer is D");
    answers stated with different labels ("答案是A，不对，答案是B") or a list of labels
    ("A/B") are no choice; (3) else the answer contains exactly one option's text (stripped,
    at least 2 characters) and no other option's text.

    >>> map_choice(" B. 1640万元", ["1730万元", "1640万元", "1650万元", "1740万元"])
    1
    >>> map_choice("I think it is 1650万元", ["1730万元", "1640万元", "1650万元", "1740万元"])
    2
    >>> map_choice("a quick guess", ["x", "y"]) is None
    True
    >>> map_choice("A molecule called ATP.", ["ADP", "ATP", "NAD", "FAD"])  # an article, not A
    1
    >>> map_choice("A is correct", ["ADP", "ATP"]), map_choice("A: ADP", ["ADP", "ATP"])
    (0, 0)
    >>> map_choice("[A, B, C, D", ["1", "2", "3", "4"]) is None  # the labels echoed, no choice
    True
    """
    n = len(options)
    stripped = text.strip()
    m = _LEAD.match(stripped)
    if m and _ARTICLE.match(stripped[m.start(1) :]):  # "A molecule ...", "I think ...": words
        m = None
    stated: set[int] = set()
    for st in _STATED.finditer(stripped):
        if _lists_labels(stripped, st, n):
            return None
        if ord(st.group(1)) - ord("A") < n:
            stated.add(ord(st.group(1)) - ord("A"))
    if len(stated) > 1:
        return None  # answers stated with different labels: no one choice
    if m:
        letter = m.group(1)
        if _lists_labels(stripped, m, n):
            return None  # several labels named: no one choice (a reply echoing "[A, B, C, D")
        rest = stripped[m.end() :].strip(" .):）】\"'*")
        if letter.isupper() or not rest:
            idx = ord(letter.upper()) - ord("A")
            if idx < n and stated <= {idx}:
                return idx
            if idx < n:
                return None  # starts with one label, states another
    if stated:
        return stated.pop()
    hits = [i for i, o in enumerate(options) if len(o.strip()) >= 2 and o.strip() in stripped]
    if len(hits) > 1:  # drop options contained in a longer hit ("10" inside "100")
        hits = [
            i
            for i in hits
            if not any(
                j != i and options[i].strip() in options[j].strip() and j in hits for j in hits
            )
        ]
    return hits[0] if len(hits) == 1 else None


LABELS = "ABCDEFGHIJ"
"""Option labels, in order."""


def mcq_fields(
    text: str, options: Sequence[str], answer: int | None,
    mod_text: str, mod_options: Sequence[str], mod_answer: int | None,
) -> dict[str, Any]:  # fmt: skip
    """A multiple-choice item's chosen options (:func:`map_choice`), M and C, from its texts."""
    c0, c1 = map_choice(text, options), map_choice(mod_text, mod_options)
    same = c0 is not None and c1 is not None
    return {
        "choice": c0,
        "modified_choice": c1,
        "strict_m": None if answer is None else float(text.strip() == LABELS[answer]),
        "strict_m_modified": (
            None if mod_answer is None else float(mod_text.strip() == LABELS[mod_answer])
        ),
        "m": None if answer is None else float(c0 == answer),
        "m_modified": None if mod_answer is None else float(c1 == mod_answer),
        "c": float(same and options[c0].strip() == mod_options[c1].strip()),  # type: ignore[index]
    }


def refresh_choices(rec: dict[str, Any]) -> dict[str, Any]:
    """A stored multiple-choice record with its choices, M and C mapped again from its stored
    generations by the current :func:`map_choice` rules, so that a run resumed or analysed
    after the rules changed counts every item alike (in place; other records as they are)."""
    if "choice" in rec and "prediction" in rec and "modified_options" in rec:
        rec.update(
            mcq_fields(
                rec["prediction"],
                rec["options"],
                rec.get("answer"),
                rec["modified_prediction"],
                rec["modified_options"],
                rec.get("modified_answer"),
            )  # fmt: skip
        )
    return rec


def pcr(m: float, c: float, *, alpha: float = 0.01, scale: Scale = "tanh") -> float:
    """Performance Consistency Ratio: ``scale((m + alpha) / (c + alpha))`` (paper, eq. 9).

    ``scale`` is ``tanh`` (the paper's default), ``linear`` (no scaling) or ``sigmoid`` (the
    paper's Table 3 ablation). With ``alpha = 0`` and ``c = 0`` the ratio is undefined: NaN
    (``m = 0``) or infinite.

    >>> round(pcr(0.4235, 0.4765) - pcr(0.4544, 0.4674), 4)  # Baichuan-13B, FinEval (Table 3)
    -0.038
    """
    num, den = m + alpha, c + alpha
    ratio = (math.nan if num == 0 else math.inf) if den == 0 else num / den
    if scale == "tanh":
        return math.tanh(ratio)
    if scale == "linear":
        return ratio
    if scale == "sigmoid":
        return 1.0 / (1.0 + math.exp(-ratio)) if ratio == ratio else math.nan
    raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")


@dataclass(frozen=True)
class SplitScore:
    """M, C and PCR of one split over its analysed items."""

    n: int
    """Items analysed (with a performance and a consistency value)."""
    m: float
    """Performance on the original inputs (mean per-item metric)."""
    m_modified: float | None
    """Performance on the modified inputs (against the modified reference), for the baselines."""
    c: float
    """Consistency between the predictions on original and modified inputs (mean)."""
    pcr: float
    """scale((m + alpha) / (c + alpha))."""
    decline: float | None
    """Baseline Delta = M_ori - M_mod (performance decline)."""
    relative_decline: float | None
    """Baseline delta = Delta / M_ori (None when M_ori is 0)."""

    def to_dict(self) -> dict[str, Any]:
        return {k: _clean(v) for k, v in asdict(self).items()}


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _mean(xs: Sequence[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else math.nan


def split_score(
    m: Sequence[float],
    c: Sequence[float],
    m_modified: Sequence[float] | None = None,
    *,
    alpha: float = 0.01,
    scale: Scale = "tanh",
) -> SplitScore:
    """Score one split from per-item performance ``m`` and consistency ``c`` (same items).

    >>> s = split_score([1, 0, 1, 1], [1, 1, 0, 1], [1, 0, 0, 1])
    >>> s.m, s.c, s.decline, round(s.relative_decline, 4)
    (0.75, 0.75, 0.25, 0.3333)
    """
    if len(m) != len(c):
        raise ValueError("m and c must have one value per item")
    mm, cc = _mean(m), _mean(c)
    mmod = _mean(m_modified) if m_modified else None
    decline = mm - mmod if mmod is not None else None
    rel = decline / mm if decline is not None and mm else None
    return SplitScore(len(m), mm, mmod, cc, pcr(mm, cc, alpha=alpha, scale=scale), decline, rel)


@dataclass(frozen=True)
class Comparison:
    """PCR of the reference (training) split minus PCR of another split, with a bootstrap CI."""

    reference: str
    """The split the model may have been fine-tuned on (``train``)."""
    other: str
    """The split tested for contamination (``test``, ``val``)."""
    pcr_diff: float
    """PCR_reference - PCR_other (paper's PCR_train-test)."""
    ci_low: float
    """2.5% percentile of the bootstrap distribution of the difference."""
    ci_high: float
    """97.5% percentile."""
    p_value: float
    """Two-sided p-value of the split-label permutation test, H0: the two splits' items are
    exchangeable (equally exposed, drawn alike), so PCR_reference - PCR_other is as likely as
    that of any relabelling of the pooled items: exact over every distinct labelling where
    there are at most :data:`EXACT_RELABELLINGS` (:attr:`p_exact`), else Monte Carlo over
    ``n_boot`` seeded relabellings, (1 + hits) / (1 + n); valid at any number of items."""
    p_adjusted: float | None
    """Holm-adjusted p-value when the reference is compared with two or more splits (the
    family of the run's comparisons; the verdict then uses it); None with one comparison."""
    n_boot: int
    """Bootstrap resamples the CI rests on (items resampled with replacement within each split;
    the p-value rests on ``n_boot`` relabellings as asked): :attr:`n_drawn`, less those with an
    undefined PCR difference (``alpha`` 0 and a resample with M = C = 0 in a split, or with
    ``linear`` scale C = 0: :func:`pcr`), which ``reasoning`` then says."""
    decline_diff: float | None
    """Baseline: Delta_reference - Delta_other."""
    relative_decline_diff: float | None
    """Baseline (paper's delta_train-test): delta_reference - delta_other."""
    verdict: str
    """``fine-tuned on <reference>``, ``contaminated by <other>``, ``no evidence``, or
    ``inconclusive`` (the difference is undefined, or a split has M = C = 0 and so a constant
    PCR)."""
    reasoning: str
    """One sentence saying why."""
    excess_diff: float | None = None
    """Beyond the paper: (M - C)_reference - (M - C)_other, PCR's comparison of M with C on a
    linear scale, which does not saturate as tanh does once M is a few times C."""
    excess_ci_low: float | None = None
    """Its expanded percentile interval over the same resamples (2.5% side)."""
    excess_ci_high: float | None = None
    """97.5% side."""
    excess_p_value: float | None = None
    """Its split-label permutation test's two-sided p (the same relabellings, the same H0)."""
    excess_p_adjusted: float | None = None
    """Holm-adjusted over the run's comparisons when there are two or more; else None."""
    excess_verdict: str | None = None
    """The verdict the excess reads (CI excluding 0 and p at :data:`VERDICT_LEVEL`): ``fine-tuned
    on <reference>``, ``contaminated by <other>``, ``no evidence`` or ``inconclusive``."""
    n_drawn: int | None = None
    """Bootstrap resamples drawn: the ``n_boot`` asked, or more where the smaller split has few
    items, so that 25 lie beyond each end of the interval (:func:`tail_draws`)."""
    p_exact: bool | None = None
    """Whether the p-values count every distinct labelling of the pooled items (at most
    :data:`EXACT_RELABELLINGS`: an exact test) or ``n_boot`` seeded random ones (Monte Carlo);
    None where no test was run (an empty split)."""
    n_relabellings: int | None = None
    """The labellings the p-values count (every one, or ``n_boot`` drawn)."""

    def to_dict(self) -> dict[str, Any]:
        return {k: _clean(v) for k, v in asdict(self).items()}


def excess_verdict(
    reference: str, other: str, diff: float, low: float, high: float, p: float
) -> str:
    """The verdict of the excess comparison (M - C per split): a split is named when the
    interval excludes 0 and ``p`` is at most :data:`VERDICT_LEVEL`; where there is no interval
    (NaN ends: every resample alike) ``p`` and the sign of ``diff`` decide.

    >>> excess_verdict("train", "test", -0.6, -0.9, -0.3, 0.002)
    'contaminated by test'
    """
    if not all(math.isfinite(x) for x in (diff, p)):
        return "inconclusive"
    if not (math.isfinite(low) and math.isfinite(high)):  # no interval (every resample alike):
        low = high = diff  # the permutation test decides
    if p <= VERDICT_LEVEL and low > 0:
        return f"fine-tuned on {reference}"
    if p <= VERDICT_LEVEL and high < 0:
        return f"contaminated by {other}"
    return "no evidence"


_CHUNK = 2_000_000
"""Elements per block of the resampling arrays (bounded memory)."""


def _boot_means(
    rng: np.random.Generator, m: np.ndarray, c: np.ndarray, n_boot: int
) -> tuple[np.ndarray, np.ndarray]:
    """M and C of ``n_boot`` resamples of the items (with replacement), drawn in chunks (a
    small split's many resamples beside a large split's items: :func:`tail_draws`)."""
    step = max(1, _CHUNK // max(1, len(m)))
    parts = []
    for start in range(0, n_boot, step):
        idx = rng.integers(0, len(m), size=(min(step, n_boot - start), len(m)))
        parts.append((m[idx].mean(axis=1), c[idx].mean(axis=1)))
    return np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])


def _pcr_of(mm: np.ndarray, cc: np.ndarray, alpha: float, scale: Scale) -> np.ndarray:
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # alpha 0, C 0: NaN/inf
        return _scaled((mm + alpha) / (cc + alpha), scale)


def _boot_pcr(
    rng: np.random.Generator, m: np.ndarray, c: np.ndarray, n_boot: int, alpha: float, scale: Scale
) -> np.ndarray:
    return _pcr_of(*_boot_means(rng, m, c, n_boot), alpha, scale)


VERDICT_LEVEL = 0.05
"""A verdict names a split only when the permutation p-value is at most this, too."""


def _relabel_means(
    rng: np.random.Generator, m: np.ndarray, c: np.ndarray, n_ref: int, n_perm: int
) -> tuple[np.ndarray, ...]:
    """M and C of the reference and the other split over ``n_perm`` random relabellings of the
    pooled items: (M_ref, C_ref, M_other, C_other), one value per relabelling."""
    out = np.empty((4, n_perm))
    step = max(1, 2_000_000 // max(1, len(m)))
    for s in range(0, n_perm, step):
        b = min(step, n_perm - s)
        order = np.argsort(rng.random((b, len(m))), axis=1)
        mp, cp = m[order], c[order]
        out[0, s : s + b] = mp[:, :n_ref].mean(1)
        out[1, s : s + b] = cp[:, :n_ref].mean(1)
        out[2, s : s + b] = mp[:, n_ref:].mean(1)
        out[3, s : s + b] = cp[:, n_ref:].mean(1)
    return tuple(out)


EXACT_RELABELLINGS = 100_000
"""At most this many distinct split labellings of the pooled items (C(n, n_reference)), the
permutation test counts them all (exact) instead of drawing ``n_boot`` at random: at 4 + 3
items (35 labellings) the Monte Carlo p moved across 0.05 between ``--bootstrap`` 500 and 2,000
(0.044 and 0.056; exact 2/35 = 0.057), and the verdict with it (CAP QA)."""


def _all_relabel_means(m: np.ndarray, c: np.ndarray, n_ref: int) -> tuple[np.ndarray, ...]:
    """As :func:`_relabel_means`, over every distinct labelling once (the observed one too)."""
    n = len(m)
    idx = np.array(list(itertools.combinations(range(n), n_ref)), dtype=np.intp).reshape(-1, n_ref)
    ref = np.zeros((len(idx), n), dtype=bool)
    np.put_along_axis(ref, idx, True, axis=1)
    other = ~ref
    return (
        ref @ m / n_ref,
        ref @ c / n_ref,
        other @ m / (n - n_ref),
        other @ c / (n - n_ref),
    )


def relabellings(
    seed: int, m: np.ndarray, c: np.ndarray, n_ref: int, n_perm: int
) -> tuple[tuple[np.ndarray, ...], bool]:
    """(M_ref, C_ref, M_other, C_other) per relabelling, and whether they are every distinct
    labelling (exact: at most :data:`EXACT_RELABELLINGS` of them) rather than ``n_perm``
    seeded random ones."""
    if 0 < n_ref < len(m) and math.comb(len(m), n_ref) <= EXACT_RELABELLINGS:
        return _all_relabel_means(m, c, n_ref), True
    return _relabel_means(np.random.default_rng(seed), m, c, n_ref, n_perm), False


def _relabel(
    rng: np.random.Generator,
    m: np.ndarray,
    c: np.ndarray,
    n_ref: int,
    n_perm: int,
    alpha: float,
    scale: Scale,
) -> np.ndarray:
    """PCR_reference - PCR_other over ``n_perm`` random relabellings of the pooled items."""
    mr, cr, mo, co = _relabel_means(rng, m, c, n_ref, n_perm)
    return np.asarray(_pcr_of(mr, cr, alpha, scale) - _pcr_of(mo, co, alpha, scale))


def _tail_p(d: np.ndarray, observed: float, exact: bool = False) -> float:
    """Two-sided equal-tailed p of ``observed`` among the relabelled differences ``d``: random
    relabellings count the observed one too ((1 + hits) / (1 + n)); ``exact`` (every distinct
    labelling, the observed among them) counts them as they are (hits / n)."""
    d = d[np.isfinite(d)]
    if exact and not len(d):
        return math.nan
    tol = 1e-12 * max(1.0, abs(observed))
    one = 0 if exact else 1
    upper = (one + np.count_nonzero(d >= observed - tol)) / (one + len(d))
    lower = (one + np.count_nonzero(d <= observed + tol)) / (one + len(d))
    return float(min(1.0, 2 * min(upper, lower)))


def _scaled(ratio: np.ndarray, scale: Scale) -> np.ndarray:
    if scale == "tanh":
        return np.tanh(ratio)
    if scale == "sigmoid":
        return 1.0 / (1.0 + np.exp(-ratio))
    return ratio


def permutation_p(
    ref_items: tuple[Sequence[float], Sequence[float]],
    other_items: tuple[Sequence[float], Sequence[float]],
    observed: float,
    *,
    alpha: float,
    scale: Scale,
    n_perm: int,
    seed: int,
) -> float:
    """Two-sided (equal-tailed) p-value of the split-label permutation test of PCR_reference -
    PCR_other: twice the smaller of (1 + #{relabellings with difference >= observed}) /
    (1 + n_perm) and (1 + #{difference <= observed}) / (1 + n_perm), at most 1. Valid at any
    number of items (one item per split cannot reach 0.05), and each direction of the verdict
    gets at most half the level. The relabelled differences are skewed when the splits differ
    in size (a small split's PCR swings further), so counting |difference| >= |observed| left
    almost no power to name a small split: 0.1% at 5 or 12 reference items against 50 or 100
    (benchmarks/cap_null.py). NaN when undefined.

    >>> permutation_p(([1.0], [0.0]), ([0.0], [1.0]), 0.99, alpha=0.01, scale="tanh",
    ...               n_perm=999, seed=0) > 0.4   # one item each: any labelling is as likely
    True
    """
    if math.isnan(observed):
        return math.nan
    (rm, rc), (om, oc) = in_own_order(*ref_items), in_own_order(*other_items)
    m, c = np.concatenate([rm, om]), np.concatenate([rc, oc])
    (mr, cr, mo, co), exact = relabellings(seed, m, c, len(ref_items[0]), n_perm)
    with np.errstate(invalid="ignore"):
        d = np.asarray(_pcr_of(mr, cr, alpha, scale) - _pcr_of(mo, co, alpha, scale))
    return _tail_p(d, observed, exact)


def verdict(
    reference: str,
    other: str,
    diff: float,
    low: float,
    high: float,
    min_diff: float = 0.0,
    blank: Sequence[str] = (),
    p_value: float | None = None,
) -> tuple[str, str]:
    """Verdict and reasoning from the difference, its 95% CI and (when given) the permutation
    p-value, which must be at most :data:`VERDICT_LEVEL` too; ``blank`` names the splits
    with M = C = 0, whose PCR is scale(1) whatever the exposure.

    >>> verdict("train", "test", -0.2, -0.3, -0.1)[0]
    'contaminated by test'
    """
    span = (
        f"PCR_{reference} - PCR_{other} = {diff:+.4f}, 95% CI [{low:+.4f}, {high:+.4f}]"
        if diff == diff and low == low
        else f"PCR_{reference} - PCR_{other}"  # not "+nan, 95% CI [+nan, +nan]"
    )
    if blank:
        return "inconclusive", (
            f"{span}: M = C = 0 on {' and '.join(blank)} (no right and no consistent answer: "
            "unmapped or empty answers?), whose PCR is then a constant"
        )
    if diff == diff and low != low and p_value is not None and p_value == p_value:
        # no interval, every resample alike (each split's items read alike): the permutation
        # test decides, as it must anyway
        span = (
            f"PCR_{reference} - PCR_{other} = {diff:+.4f} (no interval: every bootstrap "
            "resample gave this difference, as each split's items read alike)"
        )
        low = high = diff
        if not p_value <= VERDICT_LEVEL:
            return "no evidence", (
                f"{span}; the split-label permutation test does not reject equal exposure "
                f"(p = {p_value:.3g} > {VERDICT_LEVEL})"
            )
    elif not (diff == diff and low == low):
        return "inconclusive", (
            f"{span}: undefined (a split without analysed items, or, with --pcr-alpha 0, "
            "without consistent items)"
        )
    if (low > 0 or high < 0) and p_value is not None and not p_value <= VERDICT_LEVEL:
        return "no evidence", (
            f"{span} excludes 0, but the split-label permutation test does not reject equal "
            f"exposure (p = {p_value:.3g} > {VERDICT_LEVEL}): too few items to tell (a "
            "bootstrap interval is only approximate with few items)"
        )
    if low > 0 and diff >= min_diff:
        return (
            f"fine-tuned on {reference}",
            f"{span} lies above 0: performance rose more than consistency on {reference}, "
            "as fine-tuning on that split predicts",
        )
    if high < 0 and -diff >= min_diff:
        return (
            f"contaminated by {other}",
            f"{span} lies below 0: {other} shows the higher performance-to-consistency ratio, "
            "as training on that split predicts",
        )
    why = "includes 0" if low <= 0 <= high else f"is smaller than --min-diff {min_diff}"
    return (
        "no evidence",
        f"{span} {why}: no detectable difference in exposure (or equal exposure of both splits)",
    )


def compare_splits(
    reference: str,
    other: str,
    ref_items: tuple[Sequence[float], Sequence[float]],
    other_items: tuple[Sequence[float], Sequence[float]],
    ref_score: SplitScore,
    other_score: SplitScore,
    *,
    alpha: float = 0.01,
    scale: Scale = "tanh",
    n_boot: int = 2000,
    seed: int = 0,
    min_diff: float = 0.0,
) -> Comparison:
    """Compare two splits: ``*_items`` are the per-item ``(m, c)`` lists of each split.

    H0: the two splits are equally exposed, their items exchangeable, i.e. PCR_reference =
    PCR_other. The CI is the expanded percentile interval (:func:`expanded_tail` at the
    smaller split's size) of the difference over ``n_boot`` resamples of each split's items
    (more at few items, so that 25 lie beyond each end: :func:`tail_draws`);
    the plain percentile interval covered the true difference in 79-91% of runs where a split
    had 5 items (benchmarks/cap_null.py). The p-value is the split-label permutation test's
    over every distinct labelling where there are at most :data:`EXACT_RELABELLINGS` (exact),
    else over ``n_boot`` random ones (:func:`permutation_p`, Monte Carlo); valid at any size. A verdict names a split when the CI excludes 0
    and p <= :data:`VERDICT_LEVEL` (the bootstrap alone named one in 34% of clean pairs of
    2-item splits, 20% at 3, 8% at 8). Several comparisons of one run are one family:
    :func:`adjust_for_family` decides them on Holm-adjusted p-values.
    """
    diff = ref_score.pcr - other_score.pcr
    ex = (ref_score.m - ref_score.c) - (other_score.m - other_score.c)
    low = high = p = ex_low = ex_high = ex_p = math.nan
    used, drawn, exact, n_perm = 0, n_boot, False, 0
    if ref_score.n and other_score.n:
        rng = np.random.default_rng(seed)
        rm, rc = in_own_order(*ref_items)  # resampled by the items, not by their order
        om, oc = in_own_order(*other_items)
        n = min(len(rm), len(om))  # the smaller split's
        tail = expanded_tail(n) if n >= 2 else 0.025
        drawn = tail_draws(n_boot, tail, len(rm) + len(om))
        ma, ca = _boot_means(rng, rm, rc, drawn)
        mb, cb = _boot_means(rng, om, oc, drawn)
        with np.errstate(invalid="ignore"):  # inf - inf: undefined, dropped below
            d = _pcr_of(ma, ca, alpha, scale) - _pcr_of(mb, cb, alpha, scale)
        d = d[np.isfinite(d)]
        used = len(d)
        perm, exact = relabellings(seed, np.r_[rm, om], np.r_[rc, oc], len(rm), n_boot)
        n_perm = len(perm[0])
        if len(d):
            low, high = _spread(np.quantile(d, [tail, 1 - tail]))
            pr, po = (
                _pcr_of(perm[0], perm[1], alpha, scale),
                _pcr_of(perm[2], perm[3], alpha, scale),
            )
            p = _tail_p(np.asarray(pr - po), diff, exact)
        ex_low, ex_high = _spread(np.quantile((ma - ca) - (mb - cb), [tail, 1 - tail]))
        ex_p = _tail_p((perm[0] - perm[1]) - (perm[2] - perm[3]), ex, exact)
    blank = [
        s for s, sc in ((reference, ref_score), (other, other_score)) if sc.n and not (sc.m or sc.c)
    ]
    label, why = verdict(reference, other, diff, low, high, min_diff, blank, p)
    why += _dropped(used or drawn, drawn)
    dd = (
        ref_score.decline - other_score.decline
        if ref_score.decline is not None and other_score.decline is not None
        else None
    )
    rd = (
        ref_score.relative_decline - other_score.relative_decline
        if ref_score.relative_decline is not None and other_score.relative_decline is not None
        else None
    )
    return Comparison(
        reference, other, diff, low, high, p, None, used or drawn, dd, rd, label, why,
        ex, ex_low, ex_high, ex_p, None,
        "inconclusive" if blank else excess_verdict(reference, other, ex, ex_low, ex_high, ex_p),
        drawn, exact if n_perm else None, n_perm or None,
    )  # fmt: skip


def _spread(ends: Any) -> tuple[float, float]:
    """An interval's two ends, or NaN for both where they are equal: a zero-width interval
    (every resample alike, as with one item per split) would read as a precise measurement."""
    low, high = (float(x) for x in ends)
    return (low, high) if high > low else (math.nan, math.nan)


def _dropped(used: int, n_boot: int) -> str:
    if used < n_boot:
        return f" ({n_boot - used} of {n_boot} resamples had an undefined PCR and were dropped)"
    return ""


def adjust_for_family(
    comparisons: Sequence[Comparison], *, n_boot: int, min_diff: float = 0.0
) -> list[Comparison]:
    """Comparisons of one reference with two or more splits, decided as one family: each gets
    its Holm-adjusted p-value (:func:`holm`), and a verdict that names a split needs that
    p-value at :data:`VERDICT_LEVEL`. Inconclusive comparisons stay so. One comparison is
    returned as it is."""
    if len(comparisons) < 2:
        return list(comparisons)
    out = []
    ex_adjusted = holm([math.nan if c.excess_p_value is None else c.excess_p_value
                        for c in comparisons])  # fmt: skip
    for c, adj, ex_adj in zip(
        comparisons, holm([c.p_value for c in comparisons]), ex_adjusted, strict=True
    ):
        if not math.isnan(ex_adj) and c.excess_diff is not None:
            lo, hi = c.excess_ci_low, c.excess_ci_high
            # an inconclusive one (a split with M = C = 0) stays so, as PCR's does below (it
            # read "no evidence" with three splits; QA)
            ex_label = c.excess_verdict if c.excess_verdict == "inconclusive" else excess_verdict(
                c.reference, c.other, c.excess_diff, math.nan if lo is None else lo,
                math.nan if hi is None else hi, ex_adj)  # fmt: skip
            c = replace(c, excess_p_adjusted=ex_adj, excess_verdict=ex_label)
        if math.isnan(adj):
            out.append(c)
            continue
        label, why = c.verdict, c.reasoning
        if label != "inconclusive":
            label, why = verdict(c.reference, c.other, c.pcr_diff, c.ci_low, c.ci_high, min_diff,
                                 (), adj)  # fmt: skip
            why += f" (p Holm-adjusted over the run's comparisons: {adj:.3g}, raw {c.p_value:.3g})"
            why += _dropped(c.n_boot, c.n_drawn or n_boot)
        out.append(replace(c, p_adjusted=adj, verdict=label, reasoning=why))
    return out


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values: the family-wise error rate of "adjusted p <= level"
    is at most the level under any dependence. NaN (undefined) p-values stay NaN and are not
    counted in the family.

    >>> [round(x, 3) for x in holm([0.01, 0.04, 0.03])]
    [0.03, 0.06, 0.06]
    """
    ps = np.asarray(p_values, dtype=float)
    out = np.full(ps.shape, math.nan)
    ok = np.flatnonzero(np.isfinite(ps))
    order = ok[np.argsort(ps[ok], kind="stable")]
    m, running = len(order), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(ps[i])))
        out[i] = running
    return [float(x) for x in out]
