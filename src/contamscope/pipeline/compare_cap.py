"""Compare two finished CAP runs item by item (``contamscope compare`` on ``cap`` runs).

Reads the two run folders only (no model, no score cache). The items both runs analysed from the
same texts (the same original and the same modified input) are paired; per model and split,
performance on the original inputs (M) against the consistency of the answers between original
and modified inputs (C) says how exposed the model is, and
:func:`~contamscope.detectors.compare_cap.compare_leans` tests whether one model's M - C rises
further from the reference split (``train``) to a tested split (``test``) than the other's: the
difference in differences, per reader (greedy generation; for multiple choice also the
log-likelihood choice) and tested split; the same on CAP's PCR is reported beside it.
"""

from __future__ import annotations

from typing import Any

from ..detectors.compare_cap import PCR_NULL, Readings, compare_leans
from ..detectors.verdict import p_text
from ..errors import ConfigError
from ..report.cap import MEASURED as ALIKE
from ..report.rundata import RunData, run_config
from ..wording import shell
from .cap import CAP_ANALYSIS, READERS, CapConfig, analysis_config, item_readings

__all__ = ["compare_cap"]

ANALYSIS = ("alpha", "scale", "mcq_metric", "similarity_threshold", "include_unmodified")
"""Analysis settings two runs must share; ``reanalyse`` brings one run to the other's."""
_FLAG = {"alpha": "--pcr-alpha", "scale": "--scale", "mcq_metric": "--mcq-metric",
         "similarity_threshold": "--similarity-threshold"}  # fmt: skip
READER_NAMES = {"generate": "generation", "loglik": "log-likelihood choice"}
LISTED = 20
"""Item ids kept per list (all are counted)."""


def _hint(b: RunData, ca: CapConfig, keys: list[str]) -> str:
    flags = []
    for k in keys:
        v = getattr(ca, k)
        if k == "include_unmodified":
            flags.append("--include-unmodified" if v else "--exclude-unmodified")
        elif k != "similarity_threshold" or ca.task == "summary":
            flags.append(f"{_FLAG[k]} {v}")
    return f"`contamscope reanalyse {shell(b.path)} {' '.join(flags)}`"


def _check_alike(a: RunData, b: RunData) -> tuple[CapConfig, str, list[str]]:
    """Refuse runs whose numbers do not compare; return the analysis, the reference split and
    the other splits both ran."""
    ga, gb = run_config(a), run_config(b)
    other = [k for k in ALIKE if ga.get(k) != gb.get(k)]
    if other:
        shown = ", ".join(f"{k} {_short(ga.get(k))} vs {_short(gb.get(k))}" for k in other)
        raise ConfigError(
            f"{a.path} and {b.path} generated differently ({shown}): compare CAP runs of one "
            "task with the same --template, --chat and --max-new-tokens"
        )
    ba, bb = a.summary.get("benchmark") or {}, b.summary.get("benchmark") or {}
    ha, hb = ba.get("content_hash"), bb.get("content_hash")
    if (ha and hb and ha != hb) or (not (ha and hb) and ba.get("source") != bb.get("source")):
        raise ConfigError(
            f"{a.path} and {b.path} read different benchmarks ({ba.get('source')}; "
            f"{bb.get('source')}): compare runs on the same benchmark"
        )
    ca, cb = analysis_config(a.summary), analysis_config(b.summary)
    keys = [k for k in ANALYSIS if getattr(ca, k) != getattr(cb, k)]
    if ca.task != "summary" and "similarity_threshold" in keys:
        keys.remove("similarity_threshold")  # not used by this task
    if ca.task != "mcq" and "mcq_metric" in keys:
        keys.remove("mcq_metric")
    if keys:
        shown = ", ".join(f"{k} {getattr(ca, k)} vs {getattr(cb, k)}" for k in keys)
        raise ConfigError(
            f"{a.path} and {b.path} were analysed differently ({shown}): bring one to the "
            f"other's with {_hint(b, ca, keys)} (nothing is generated)"
        )
    sa, sb = list(a.summary.get("splits") or []), list(b.summary.get("splits") or [])
    if not sa or not sb or sa[0] != sb[0]:
        raise ConfigError(
            f"{a.path} and {b.path} have other reference splits ({sa[0] if sa else 'none'} vs "
            f"{sb[0] if sb else 'none'}): compare runs with the same first --splits entry"
        )
    others = [s for s in sa[1:] if s in sb[1:]]
    if not others:
        raise ConfigError(
            f"{a.path} and {b.path} test no split in common besides the reference {sa[0]} "
            f"(A: {', '.join(sa[1:])}; B: {', '.join(sb[1:])})"
        )
    return ca, sa[0], others


def _short(v: Any) -> str:
    return str(v.get("name", "?")) if isinstance(v, dict) else repr(v)


def _texts(rec: dict[str, Any]) -> tuple[str, str]:
    return str(rec.get("input")), str(rec.get("modified_input"))


def _analysed(
    run: RunData, splits: list[str], cfg: CapConfig
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, tuple[float, float]]]]:
    """The run's records of these splits by id, and the readings of those CAP analyses."""
    recs: dict[str, dict[str, Any]] = {}
    readings: dict[str, dict[str, tuple[float, float]]] = {}
    for rec in run.iter_records():
        key = str(rec.get("id"))
        if rec.get("split") not in splits or key in recs:
            continue
        found = item_readings(rec, cfg)
        if found:
            recs[key], readings[key] = rec, found
    return recs, readings


def compare_cap(a: RunData, b: RunData, *, alpha: float = 0.05) -> dict[str, Any]:
    """Compare CAP runs ``a`` (A, e.g. a base model) and ``b`` (B, e.g. its fine-tuned copy) on
    the items both analysed from the same original and modified inputs.

    Raises :class:`~contamscope.errors.ConfigError` for runs that do not compare or share no
    item of the reference split and of a tested split.
    """
    from .compare import COMPARE_SCHEMA, _side, same_model

    cfg, ref, others = _check_alike(a, b)
    splits = [ref, *others]
    ra, reads_a = _analysed(a, splits, cfg)
    rb, reads_b = _analysed(b, splits, cfg)
    common = [i for i in ra if i in rb]
    same = [i for i in common if _texts(ra[i]) == _texts(rb[i])]
    by_split: dict[str, list[str]] = {}
    for i in same:
        by_split.setdefault(str(ra[i]["split"]), []).append(i)
    if ref not in by_split or not any(s in by_split for s in others):
        have = ", ".join(f"{s} {len(v)}" for s, v in sorted(by_split.items())) or "none"
        why = (
            "no item was analysed in both"
            if not common
            else f"{len(common) - len(same)} of the {len(common)} items analysed in both were "
            "analysed from other modified inputs (another --seed or --year-shift, or another "
            "paraphraser)"
            if len(same) < len(common)
            else "the items analysed in both are all of one split"
        )
        raise ConfigError(
            f"{a.path} and {b.path}: nothing to compare on the reference split {ref} and a "
            f"tested split ({why}; paired: {have})"
        )
    tests: dict[str, tuple[Readings, Readings]] = {}
    for reader in READERS:
        for s in others:
            both = {
                sp: [
                    i for i in by_split.get(sp, []) if reader in reads_a[i] and reader in reads_b[i]
                ]
                for sp in (ref, s)
            }
            if both[ref] and both[s]:
                tests[f"{reader}/{s}"] = (
                    _readings(both[ref], reads_a, reads_b, reader),
                    _readings(both[s], reads_a, reads_b, reader),
                )
    stats = compare_leans(
        tests, alpha=alpha, pcr_alpha=cfg.alpha, scale=cfg.scale, n_boot=cfg.n_boot,
        seed=cfg.seed,
    )  # fmt: skip
    stats["reference_split"] = ref
    key = stats["smallest"] or next(iter(tests))
    reader, tested_split = key.split("/", 1)
    paired = [
        {"id": i, "split": ra[i]["split"]}
        | {
            f"{r}_{v}_{w}": reads[i][r][j] if r in reads[i] else None
            for r in READERS
            for j, v in enumerate(("m", "c"))
            for w, reads in (("a", reads_a), ("b", reads_b))
        }
        for i in same
    ]
    moved = sorted(
        (p for p in paired if p["split"] == tested_split and p[f"{reader}_m_b"] is not None
         and p[f"{reader}_m_a"] is not None),
        key=lambda p: _excess(p, reader, "b") - _excess(p, reader, "a"),
        reverse=True,
    )  # fmt: skip
    side_a, side_b = _side(a, len(ra)), _side(b, len(rb))
    return {
        "schema": COMPARE_SCHEMA,
        "method": "cap",
        "null_hypothesis": PCR_NULL,
        "a": side_a,
        "b": side_b,
        "benchmark": a.benchmark,
        "task": cfg.task,
        "reference_split": ref,
        "tested_splits": others,
        "config": {k: getattr(cfg, k) for k in CAP_ANALYSIS if k not in ("n_boot", "min_diff")}
        | {"n_boot": cfg.n_boot},
        "counts": {
            "paired": len(same),
            "only_a": len(ra) - len(common),
            "only_b": len(rb) - len(common),
            "other_modifications": len(common) - len(same),
            "by_split": {s: len(by_split.get(s, [])) for s in splits},
        },
        "same_model": same_model(side_a, side_b),
        "statistics": stats,
        "items": {
            "largest_excess_increase": {
                "reader": reader,
                "split": tested_split,
                "items": [
                    {"id": p["id"], "a": _excess(p, reader, "a"), "b": _excess(p, reader, "b")}
                    for p in moved[:LISTED]
                    if _excess(p, reader, "b") > _excess(p, reader, "a")
                ],
            }
        },
        "verdict": lean_verdict(stats, a.model, b.model, ref),
        "paired_items": paired,
    }


def _excess(p: dict[str, Any], reader: str, who: str) -> float:
    """An item's performance minus its consistency under one model (what PCR rewards)."""
    return float(p[f"{reader}_m_{who}"]) - float(p[f"{reader}_c_{who}"])


def _readings(
    ids: list[str],
    reads_a: dict[str, dict[str, tuple[float, float]]],
    reads_b: dict[str, dict[str, tuple[float, float]]],
    reader: str,
) -> Readings:
    return (
        [reads_a[i][reader][0] for i in ids],
        [reads_a[i][reader][1] for i in ids],
        [reads_b[i][reader][0] for i in ids],
        [reads_b[i][reader][1] for i in ids],
    )


def lean_verdict(
    stats: dict[str, Any], model_a: str, model_b: str, reference: str
) -> dict[str, Any]:
    """A one-line reading of :func:`~contamscope.detectors.compare_cap.compare_leans`'
    result."""
    from .compare import paired_verdict

    p = stats["p_value"]
    if p is None:
        return {"label": "nothing to compare", "text": "no defined difference", "p_value": None}
    m = len(stats["tested"])
    reader, split = stats["smallest"].split("/", 1)
    where = f"p = {p_text(p)}, M - C lean, {READER_NAMES[reader]} on {split}" + (
        f"; smallest of {m} paired tests x {m}" if m > 1 else ""
    )
    return paired_verdict(
        stats,
        model_a,
        model_b,
        where,
        f"leans further toward {split}",
        "{who} ({more}) leans further toward " + split + " than {other} ({less}) ({where}): "
        "relative to " + reference + ", {who}'s performance on " + split + " outruns the "
        "consistency of its answers more, as training on " + split + " predicts (or {other} was "
        "fine-tuned more on " + reference + ")",
    )
