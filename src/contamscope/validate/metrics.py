"""Detection metrics of an injected-contamination experiment (pure: no model, no torch).

Every evaluated item has a ground-truth label (``True``: it was in the continued-training data,
"leaked"; ``False``: it was not, "clean") and, per detector, a binary verdict and a continuous
score (higher = more leaked). From those come the usual confusion-matrix metrics and a
rank-based AUC (the Mann-Whitney probability that a random leaked item scores above a random
clean one, ties counting one half).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import rankdata

from ..detectors import delta_key, exact_interval
from ..detectors.benbench import CI_MIN_ITEMS

__all__ = [
    "BinaryMetrics",
    "Detector",
    "auc",
    "binary_metrics",
    "detectors_for",
    "evaluate_records",
    "mean_gap",
]


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Rank-based area under the ROC curve; None when one class is empty.

    >>> auc([0.9, 0.8, 0.1, 0.2], [True, True, False, False])
    1.0
    >>> auc([1.0, 1.0], [True, False])
    0.5
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    if s.shape != y.shape:
        raise ValueError(f"{s.size} scores but {y.size} labels")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = rankdata(s)  # average ranks for ties
    u = float(ranks[y].sum()) - n_pos * (n_pos + 1) / 2
    return u / (n_pos * n_neg)


@dataclass(frozen=True)
class BinaryMetrics:
    """Verdicts of one detector against the ground truth (positive = leaked)."""

    n: int
    """Items evaluated."""
    tp: int
    """Leaked items flagged."""
    fp: int
    """Clean items flagged (false positives)."""
    tn: int
    """Clean items not flagged."""
    fn: int
    """Leaked items missed."""
    accuracy: float
    """(tp + tn) / n."""
    precision: float | None
    """tp / (tp + fp); None when nothing was flagged."""
    recall: float | None
    """tp / (tp + fn): the share of leaked items found; None without leaked items."""
    f1: float | None
    """Harmonic mean of precision and recall (0 when both are 0; None when undefined)."""
    fpr: float | None
    """fp / (fp + tn): the share of clean items flagged; None without clean items."""
    fpr_ci: tuple[float, float] | None
    """95% Clopper-Pearson (exact) interval of ``fpr``: it covers at least 95% at any number of
    clean items, where Wilson's covered less with few."""
    auc: float | None
    """Rank-based AUC of the detector's continuous score (None when a class is empty)."""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["fpr_ci"] = list(self.fpr_ci) if self.fpr_ci is not None else None
        return d


def binary_metrics(
    flags: Sequence[bool], labels: Sequence[bool], scores: Sequence[float] | None = None
) -> BinaryMetrics:
    """Confusion-matrix metrics of ``flags`` against ``labels`` (and AUC of ``scores``).

    >>> m = binary_metrics([True, True, False, False], [True, False, True, False])
    >>> (m.tp, m.fp, m.tn, m.fn, m.accuracy, m.precision, m.recall, m.f1, m.fpr)
    (1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5)
    """
    if len(flags) != len(labels):
        raise ValueError(f"{len(flags)} verdicts but {len(labels)} labels")
    if not labels:
        raise ValueError("no items to evaluate")
    pairs = list(zip((bool(f) for f in flags), (bool(y) for y in labels)))
    tp = sum(f and y for f, y in pairs)
    fp = sum(f and not y for f, y in pairs)
    tn = sum(not f and not y for f, y in pairs)
    fn = sum(not f and y for f, y in pairs)
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    if precision is None or recall is None:
        f1 = None
    else:
        f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    n_clean = fp + tn
    return BinaryMetrics(
        n=len(pairs),
        tp=tp,
        fp=fp,
        tn=tn,
        fn=fn,
        accuracy=(tp + tn) / len(pairs),
        precision=precision,
        recall=recall,
        f1=f1,
        fpr=fp / n_clean if n_clean else None,
        fpr_ci=exact_interval(fp, n_clean) if n_clean else None,
        auc=auc(scores, labels) if scores is not None else None,
    )


@dataclass(frozen=True)
class Detector:
    """One item-level verdict read off a stored permutation record."""

    name: str
    """Row label, e.g. ``alg1``, ``alg2@-0.2``, ``rank@0.05``."""
    description: str
    """What the verdict is and what its null rate is."""
    flag: Callable[[Mapping[str, Any]], bool]
    """The binary verdict (True = leaked)."""
    score: Callable[[Mapping[str, Any]], float]
    """Continuous statistic for the AUC (higher = more leaked)."""


def _margin(rec: Mapping[str, Any]) -> float:
    """Original order's log-prob minus the best other order's (> 0 iff Algorithm 1 fires)."""
    lp = rec["logprobs"]
    return float(lp[0] - max(lp[1:]))


def _alg2_flag(key: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda r: bool(r["alg2"][key])


def _anchored_flag(key: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda r: bool(r["alg2_anchored"][key])


def _minus_outlier(r: Mapping[str, Any]) -> float:
    return -float(r["alg2_score"])


def _minus_outlier_anchored(r: Mapping[str, Any]) -> float:
    return -float(r["alg2_score"]) if int(r["alg2_argmax"]) == 0 else -math.inf


def detectors_for(deltas: Sequence[float], alpha: float) -> list[Detector]:
    """The detectors evaluated per checkpoint: Algorithm 1, Algorithm 2 (plain and anchored) at
    each ``delta``, and the calibrated rank test at level ``alpha``."""
    out = [
        Detector(
            "alg1",
            "Algorithm 1 (paper, scenario a): the original order has the strictly highest "
            "log-prob; null rate 1/N per item. AUC from the margin over the best other order.",
            lambda r: bool(r["alg1"]),
            _margin,
        )
    ]
    for d in deltas:
        key = delta_key(d)
        out.append(
            Detector(
                f"alg2@{key}",
                f"Algorithm 2 (paper, scenario b): the maximum is an IsolationForest outlier "
                f"(score < {key}), whichever order it is; null rate not known from the item. "
                "AUC from minus the outlier score.",
                _alg2_flag(key),
                _minus_outlier,
            )
        )
        out.append(
            Detector(
                f"alg2-anchored@{key}",
                f"Algorithm 2 at {key} AND the maximum is the original order; exact null rate "
                "<= 1/N. AUC from minus the outlier score, items whose maximum is not the "
                "original ranked last.",
                _anchored_flag(key),
                _minus_outlier_anchored,
            )
        )
    out.append(
        Detector(
            f"rank@{alpha:g}",
            f"Calibrated rank test: exact permutation p-value of the original order <= {alpha:g} "
            "(H0: the original is exchangeable with the other orders). AUC from minus the p-value.",
            lambda r: float(r["p_value"]) <= alpha,
            lambda r: -float(r["p_value"]),
        )
    )
    return out


def roc_points(
    scores: Sequence[float], labels: Sequence[bool], max_points: int = 101
) -> list[list[float]] | None:
    """ROC curve of ``scores`` (higher = leaked) as ``[fpr, tpr]`` pairs from (0, 0) to (1, 1),
    one per distinct threshold (thinned to about ``max_points``); None when a class is empty.

    >>> roc_points([0.9, 0.8, 0.3, 0.1], [True, False, True, False])
    [[0.0, 0.0], [0.0, 0.5], [0.5, 0.5], [0.5, 1.0], [1.0, 1.0]]
    """
    pos = sum(1 for y in labels if y)
    neg = len(labels) - pos
    if not pos or not neg:
        return None
    pairs = sorted(
        ((s if math.isfinite(s) else -1e300, bool(y)) for s, y in zip(scores, labels)),
        key=lambda x: -x[0],
    )
    points = [[0.0, 0.0]]
    tp = fp = 0
    for i, (s, y) in enumerate(pairs):
        tp += y
        fp += not y
        if i + 1 == len(pairs) or pairs[i + 1][0] != s:
            points.append([fp / neg, tp / pos])
    if len(points) > max_points:
        step = (len(points) - 1) / (max_points - 1)
        points = [points[round(i * step)] for i in range(max_points)]
    return points


def evaluate_records(
    records: Sequence[Mapping[str, Any]],
    leaked_ids: set[str],
    detectors: Sequence[Detector],
) -> dict[str, BinaryMetrics]:
    """Metrics per detector over the analysed records (excluded records are skipped)."""
    used = [r for r in records if not r.get("excluded")]
    labels = [r["id"] in leaked_ids for r in used]
    out: dict[str, BinaryMetrics] = {}
    for det in detectors:
        scores = [det.score(r) for r in used]
        finite = [s if math.isfinite(s) else -1e300 for s in scores]
        out[det.name] = binary_metrics([det.flag(r) for r in used], labels, finite)
    return out


def mean_gap(
    leaked: Sequence[float],
    clean: Sequence[float],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    min_items: int = CI_MIN_ITEMS,
) -> dict[str, Any]:
    """mean(leaked) - mean(clean) over two independent groups, with a 95% bootstrap interval
    (each group resampled with replacement on its own; percentile interval), withheld (``ci``
    None, ``ci_note`` saying why) below ``min_items`` items in either group: a bootstrap
    interval cannot reach beyond the resampled means, so it covers far less than 95% of the
    time on a few items (the benbench command withholds its own below 5; QA).

    >>> g = mean_gap([1.0, 2.0, 3.0, 2.0, 1.0], [4.0, 5.0, 6.0, 5.0, 4.0], n_boot=500)
    >>> g["gap"], g["leaked"], g["clean"], g["ci"][1] < 0
    (-3.0, 1.8, 4.8, True)
    >>> mean_gap([1.0, 2.0], [4.0, 5.0])["ci_note"]
    'no 95% interval below 5 items a group (2 leaked, 2 clean): a bootstrap one covers far less'
    """
    a = np.asarray(leaked, dtype=np.float64)
    b = np.asarray(clean, dtype=np.float64)
    out: dict[str, Any] = {
        "n_leaked": int(a.size),
        "n_clean": int(b.size),
        "leaked": float(a.mean()) if a.size else None,
        "clean": float(b.mean()) if b.size else None,
        "gap": None,
        "ci": None,
    }
    if not a.size or not b.size:
        return out
    out["gap"] = float(a.mean() - b.mean())
    floor = max(2, min_items)  # (one item: no resampling at all)
    if min(a.size, b.size) < floor:
        out["ci_note"] = (
            f"no 95% interval below {floor} items a group ({a.size} leaked, "
            f"{b.size} clean): a bootstrap one covers far less"
        )
        return out
    rng = np.random.default_rng(seed)
    ra = a[rng.integers(0, a.size, size=(n_boot, a.size))].mean(axis=1)
    rb = b[rng.integers(0, b.size, size=(n_boot, b.size))].mean(axis=1)
    lo, hi = np.quantile(ra - rb, [0.025, 0.975])
    out["ci"] = [float(lo), float(hi)]
    return out
