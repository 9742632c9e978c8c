"""Compare two finished BenBench runs item by item (``contamscope compare`` on ``benbench`` runs).

Reads the two run folders only (no model, no score cache). The items both runs analysed from
the same texts (the same original and the same paraphrases) are paired; per item and model the
gap between the original and its paraphrases (NLL, n-gram accuracies) says how much more
familiar the model is with the published wording than with a rewording of it, and
:func:`~contamscope.detectors.compare.compare_gaps` tests whether one model's gaps are larger:
on the test split (all paired items when the runs have no test split), and on each split.
"""

from __future__ import annotations

from typing import Any

from ..detectors.compare import GAP_NULL, compare_gaps
from ..detectors.verdict import p_text
from ..errors import ConfigError
from ..report.benbench import MEASURED as ALIKE
from ..report.rundata import RunData, run_config
from ..wording import shell

__all__ = ["GAP_METRICS", "compare_benbench"]

GAP_METRICS: dict[str, str] = {
    "nll": "NLL gap, paraphrases - original (nats/token)",
    "ngram_exact": "n-gram accuracy gap, original - paraphrases (exact)",
    "ngram_rouge": "n-gram accuracy gap, original - paraphrases (ROUGE-L)",
    "ngram_edit": "n-gram accuracy gap, original - paraphrases (edit similarity)",
}
"""The per-item gaps compared, each signed so that higher is more familiar with the original.
(Perplexity is left out: its gap is the NLL's, on another scale.)"""

SIGN = {"nll": -1.0, "ngram_exact": 1.0, "ngram_rouge": 1.0, "ngram_edit": 1.0}
"""Sign of each metric's Delta (original - paraphrases) in its gap."""

THRESHOLDS = ("rouge_threshold", "edit_threshold", "inclusive")
"""Settings of the lenient criteria: ``reanalyse`` can bring one run to the other's."""
LISTED = 20
"""Item ids kept per list (all are counted)."""


def _check_alike(a: RunData, b: RunData) -> list[str]:
    """Refuse runs whose numbers do not compare; return the splits both ran."""
    ca, cb = run_config(a), run_config(b)
    other = [k for k in ALIKE if ca.get(k) != cb.get(k)]
    if other:
        shown = ", ".join(f"{k} {ca.get(k)!r} vs {cb.get(k)!r}" for k in other)
        raise ConfigError(
            f"{a.path} and {b.path} measured other things ({shown}): compare BenBench runs with "
            "the same --n, --k, layouts and --lenient"
        )
    if ca.get("lenient") and any(ca.get(k) != cb.get(k) for k in THRESHOLDS):
        shown = ", ".join(f"{k} {ca.get(k)} vs {cb.get(k)}" for k in THRESHOLDS)
        raise ConfigError(
            f"{a.path} and {b.path} judge n-grams by other thresholds ({shown}): bring one to "
            f"the other's with `contamscope reanalyse {shell(b.path)} --rouge-threshold "
            f"{ca.get('rouge_threshold')} --edit-threshold {ca.get('edit_threshold')}"
            f"{' --inclusive' if ca.get('inclusive') else ' --no-inclusive'}` (nothing is scored)"
        )
    ba, bb = a.summary.get("benchmark") or {}, b.summary.get("benchmark") or {}
    common = [s for s in ba if s in bb]
    if not common:
        raise ConfigError(
            f"{a.path} and {b.path} share no split (A: {', '.join(ba) or 'none'}; B: "
            f"{', '.join(bb) or 'none'})"
        )
    for split in common:
        ha, hb = (ba[split] or {}).get("content_hash"), (bb[split] or {}).get("content_hash")
        if ha and hb and ha != hb:
            raise ConfigError(
                f"{a.path} and {b.path} read different {split} files ({ba[split].get('source')}, "
                f"content {str(ha)[:12]}; {bb[split].get('source')}, content {str(hb)[:12]}): "
                "compare runs on the same benchmark"
            )
    return common


def _texts(rec: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """The versions the item's numbers come from: the original and its usable paraphrases."""
    return tuple(
        (str(v.get("name")), str(v.get("question")), str(v.get("answer")))
        for v in rec.get("versions") or []
        if not v.get("excluded")
    )


def _usable(run: RunData, splits: list[str]) -> tuple[dict[str, dict[str, Any]], int]:
    """The run's items with an original-vs-paraphrase gap, by id; and how many analysed items
    of these splits have none (no usable paraphrase)."""
    out: dict[str, dict[str, Any]] = {}
    no_paraphrase = 0
    for rec in run.iter_records():
        if rec.get("split") not in splits or rec.get("excluded"):
            continue
        metrics = rec.get("metrics") or {}
        if metrics.get("delta") is None:
            no_paraphrase += 1
            continue
        out.setdefault(str(rec.get("id")), rec)
    return out, no_paraphrase


def _gaps(rec: dict[str, Any]) -> dict[str, float | None]:
    delta = rec["metrics"]["delta"]
    return {k: None if delta.get(k) is None else SIGN[k] * float(delta[k]) for k in GAP_METRICS}


def _flag(rec: dict[str, Any]) -> bool:
    return bool((rec.get("flags") or {}).get("exact_all"))


def _statistics(pairs: list[dict[str, Any]], alpha: float) -> dict[str, Any]:
    gaps: dict[str, tuple[list[float], list[float]]] = {}
    for k in GAP_METRICS:
        use = [p for p in pairs if p[f"{k}_a"] is not None and p[f"{k}_b"] is not None]
        if any(p[f"{k}_a"] is not None or p[f"{k}_b"] is not None for p in pairs):
            gaps[k] = ([p[f"{k}_a"] for p in use], [p[f"{k}_b"] for p in use])
    stats = compare_gaps(gaps, alpha)
    a_flag = [p["flag_a"] for p in pairs]
    b_flag = [p["flag_b"] for p in pairs]
    stats["flags"] = {
        "a": sum(a_flag),
        "b": sum(b_flag),
        "b_only": sum(1 for p in pairs if p["flag_b"] and not p["flag_a"]),
        "a_only": sum(1 for p in pairs if p["flag_a"] and not p["flag_b"]),
    }
    return stats


def compare_benbench(a: RunData, b: RunData, *, alpha: float = 0.05) -> dict[str, Any]:
    """Compare BenBench runs ``a`` (A, e.g. a base model) and ``b`` (B, e.g. its fine-tuned
    copy) on the items both analysed from the same original and paraphrases.

    Raises :class:`~contamscope.errors.ConfigError` for runs that do not compare or share no
    item.
    """
    from .compare import COMPARE_SCHEMA, _side, same_model

    splits = _check_alike(a, b)
    ua, none_a = _usable(a, splits)
    ub, none_b = _usable(b, splits)
    common = [i for i in ua if i in ub]
    same = [i for i in common if _texts(ua[i]) == _texts(ub[i])]
    if not same:
        why = (
            "no item has an original-vs-paraphrase gap in both"
            if not common
            else f"the {len(common)} items analysed in both were analysed from other "
            "paraphrases (another paraphraser, or a paraphrase too long for one model)"
        )
        raise ConfigError(f"{a.path} and {b.path}: nothing to compare, {why}")
    pairs = []
    for i in same:
        ga, gb = _gaps(ua[i]), _gaps(ub[i])
        pair: dict[str, Any] = {"id": i, "split": ua[i].get("split")}
        for k in GAP_METRICS:
            pair[f"{k}_a"], pair[f"{k}_b"] = ga[k], gb[k]
        pair["flag_a"], pair["flag_b"] = _flag(ua[i]), _flag(ub[i])
        pairs.append(pair)
    by_split: dict[str, list[dict[str, Any]]] = {}
    for p in pairs:
        by_split.setdefault(str(p["split"]), []).append(p)
    if "test" in splits and "test" not in by_split:
        raise ConfigError(
            f"{a.path} and {b.path}: no test item has an original-vs-paraphrase gap in both "
            f"runs from the same texts (only {', '.join(by_split)} items pair); the test split "
            "is what a comparison reads"
        )
    main = "test" if "test" in by_split else None
    tested = by_split["test"] if main else pairs
    stats = _statistics(tested, alpha)
    key = stats["smallest"] or "nll"
    increased = sorted(
        (p for p in tested if p[f"{key}_a"] is not None and p[f"{key}_b"] is not None),
        key=lambda p: p[f"{key}_b"] - p[f"{key}_a"],
        reverse=True,
    )
    side_a, side_b = _side(a, len(ua)), _side(b, len(ub))
    return {
        "schema": COMPARE_SCHEMA,
        "method": "benbench",
        "null_hypothesis": GAP_NULL,
        "a": side_a,
        "b": side_b,
        "benchmark": a.benchmark,
        "config": {k: run_config(a).get(k) for k in (*ALIKE, *THRESHOLDS)},
        "tested_on": main or "all paired items",
        "counts": {
            "paired": len(pairs),
            "only_a": len(ua) - len(common),
            "only_b": len(ub) - len(common),
            "other_paraphrases": len(common) - len(same),
            "no_paraphrase_a": none_a,
            "no_paraphrase_b": none_b,
            "by_split": {s: len(ps) for s, ps in sorted(by_split.items())},
        },
        "same_model": same_model(side_a, side_b),
        "statistics": stats,
        "by_split": (
            {s: _statistics(ps, alpha) for s, ps in sorted(by_split.items())}
            if len(by_split) > 1
            else None
        ),
        "items": {
            "largest_gap_increase": {
                "metric": key,
                "items": [
                    {"id": p["id"], "a": p[f"{key}_a"], "b": p[f"{key}_b"]}
                    for p in increased[:LISTED]
                ],
            },
            "flagged_b_only": [p["id"] for p in tested if p["flag_b"] and not p["flag_a"]][:LISTED],
            "flagged_a_only": [p["id"] for p in tested if p["flag_a"] and not p["flag_b"]][:LISTED],
        },
        "verdict": gap_verdict(stats, a.model, b.model, main),
        "paired_items": pairs,
    }


def gap_verdict(
    stats: dict[str, Any], model_a: str, model_b: str, split: str | None
) -> dict[str, Any]:
    """A one-line reading of :func:`~contamscope.detectors.compare.compare_gaps`' result."""
    from .compare import paired_verdict

    p = stats["p_value"]
    if p is None:
        return {"label": "nothing to compare", "text": "no paired gaps", "p_value": None}
    m = len(stats["tested"])
    where = (
        f"p = {p_text(p)}, {GAP_METRICS[stats['smallest']].split(',')[0]}; smallest of {m} paired "
        f"tests x {m}; {'the ' + split + ' split' if split else 'all paired items'}"
    )
    return paired_verdict(
        stats,
        model_a,
        model_b,
        where,
        "more familiar with the original wording",
        "{who} ({more}) is more familiar with the benchmark's original wording, relative to its "
        "paraphrases, than {other} ({less}) ({where}): {who} has seen more of this benchmark's "
        "text",
    )
