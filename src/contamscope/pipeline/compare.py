"""Compare two finished permutation runs item by item (``contamscope compare``; BenBench,
membership and CAP runs: :mod:`~contamscope.pipeline.compare_benbench`,
:mod:`~contamscope.pipeline.compare_membership`, :mod:`~contamscope.pipeline.compare_cap`).

Reads the two run folders only (no model, no score cache): the items both runs scored under
the same orders are paired, and :func:`~contamscope.detectors.compare.compare_pairs` tests
whether one model is more drawn to the published option orders than the other, on all paired
items, on those without a natural option order, and per subject (Benjamini-Hochberg).
"""

from __future__ import annotations

from typing import Any

from ..data.items import same_text
from ..detectors.compare import (
    COMPARE_NULL,
    PairedItem,
    beaten_share,
    compare_pairs,
    leaning,
)
from ..detectors.verdict import p_text
from ..errors import ConfigError
from ..report.rundata import RunData, load_run, records_short, refuse_newer, run_config
from ..store.run import RunFolder
from ..wording import level_pct, plural
from .permutation_summary import SUBJECT_LEVEL

__all__ = ["COMPARE_SCHEMA", "compare_runs"]

COMPARE_SCHEMA = "contamscope.compare/1"
LISTED = 20
"""Item ids kept per list of items flagged by one model only (all are counted)."""


COMPARED = ("permutation", "benbench", "membership", "cap")
"""The methods whose runs compare item by item."""


def _runs(run_a: RunFolder, run_b: RunFolder) -> tuple[RunData, RunData]:
    a, b = load_run(run_a), load_run(run_b)
    for run in (a, b):
        refuse_newer(run, "compare")
        if run.method not in COMPARED:
            raise ConfigError(
                f"{run.path}: a {run.method or 'unknown'} run; compare reads two permutation "
                "runs (contamscope permutation or sweep), two benbench, two membership or two cap "
                "runs"
            )
    if a.method != b.method:
        raise ConfigError(
            f"{a.path} is a {a.method} run and {b.path} a {b.method} run: compare two runs of "
            "one method"
        )
    return a, b


def _scored(run: RunData) -> dict[str, dict[str, Any]]:
    """The run's analysed items by id (first record of an id; excluded items left out)."""
    out: dict[str, dict[str, Any]] = {}
    for rec in run.iter_records():
        lp = rec.get("logprobs")
        if rec.get("excluded") or not isinstance(lp, list) or len(lp) < 2:
            continue
        out.setdefault(str(rec.get("id")), rec)
    return out


def _setting(run: RunData, key: str) -> Any:
    return run_config(run).get(key)


def _template_name(template: Any) -> str:
    return str(template.get("name", "?")) if isinstance(template, dict) else str(template)


def _check_alike(a: RunData, b: RunData) -> None:
    """Refuse runs whose numbers do not compare: other benchmark files, another text layout,
    ties counted differently."""
    ha = (a.summary.get("benchmark") or {}).get("content_hash")
    hb = (b.summary.get("benchmark") or {}).get("content_hash")
    if ha and hb and ha != hb:
        raise ConfigError(
            f"{a.path} and {b.path} read different benchmark files ({a.benchmark}, content "
            f"{str(ha)[:12]}; {b.benchmark}, content {str(hb)[:12]}): compare runs on the same "
            "benchmark"
        )
    if (not ha or not hb) and a.benchmark != b.benchmark:
        raise ConfigError(
            f"{a.path} and {b.path} read different benchmarks ({a.benchmark}; {b.benchmark})"
        )
    ta, tb = _setting(a, "template"), _setting(b, "template")
    if ta != tb:
        raise ConfigError(
            f"{a.path} and {b.path} lay the options out differently (--template "
            f"{_template_name(ta)} vs {_template_name(tb)}): their log-probs are of other "
            "texts; compare runs with one template"
        )
    if _setting(a, "ties") != _setting(b, "ties"):
        raise ConfigError(
            f"{a.path} and {b.path} count ties differently (--ties {_setting(a, 'ties')} vs "
            f"{_setting(b, 'ties')}): compare runs with one --ties"
        )


def _pair(ra: dict[str, Any], rb: dict[str, Any]) -> PairedItem:
    return PairedItem(
        id=str(ra["id"]),
        subject=ra.get("subject") or rb.get("subject"),
        alg1_a=bool(ra.get("alg1")),
        alg1_b=bool(rb.get("alg1")),
        share_a=beaten_share(ra["logprobs"]),
        share_b=beaten_share(rb["logprobs"]),
        gap_a=float(ra["gap"]),
        gap_b=float(rb["gap"]),
        group=_option_list(ra),
    )


def _option_list(record: dict[str, Any]) -> str | None:
    """The item's options in their published order, as the run's template renders them (read
    as :func:`~contamscope.data.items.same_text` reads them): items with the same one are one
    draw of that order."""
    conts = record.get("continuations")
    if not isinstance(conts, list) or not conts or not isinstance(conts[0], str):
        return None
    return same_text(conts[0])


def _natural_ids(run: RunData) -> set[str]:
    natural = run.summary.get("natural_order") or {}
    return {str(x) for x in natural.get("ids") or []}


def _side(run: RunData, n_scored: Any) -> dict[str, Any]:
    """One run's line of a comparison (``n_scored``: how many items it scored)."""
    model = run.summary.get("model") or {}
    model = model if isinstance(model, dict) else {}
    return {
        "run": str(run.path),
        "model": run.model,
        "fingerprint": model.get("fingerprint"),
        "legacy_fingerprints": list(model.get("legacy_fingerprints") or []),
        "items_scored": n_scored,
    }


def same_model(side_a: dict[str, Any], side_b: dict[str, Any]) -> bool:
    """Whether two runs' lines name one model set-up: the same fingerprint, or one run's the
    fingerprint the other's set-up had under an earlier version (a local model's path-based
    identity).

    >>> same_model({"fingerprint": "n|x"}, {"fingerprint": "o|x", "legacy_fingerprints": ["n|x"]})
    True
    >>> same_model({"fingerprint": None}, {"fingerprint": None})
    False
    """
    fa, fb = side_a.get("fingerprint"), side_b.get("fingerprint")
    if not fa or not fb:
        return False
    return (
        fa == fb
        or fa in (side_b.get("legacy_fingerprints") or ())
        or fb in (side_a.get("legacy_fingerprints") or ())
    )


def _by_subject(pairs: list[PairedItem], alpha: float) -> dict[str, Any] | None:
    from ..detectors.membership import benjamini_hochberg

    groups: dict[str, list[PairedItem]] = {}
    for p in pairs:
        if p.subject:
            groups.setdefault(str(p.subject), []).append(p)
    if len(groups) < 2:
        return None
    rows = []
    for subject, group in sorted(groups.items()):
        res = compare_pairs(group, alpha)
        rows.append(
            {
                "subject": subject,
                "n_items": len(group),
                "alg1_difference": res["alg1"]["difference"],
                "share_difference": res["share"]["difference"],
                "gap_difference": res["gap"]["difference"],
                "p_value": res["p_value"],
                "p_floor": res["p_floor"],
                "toward": leaning(res[res["smallest"]]),
            }
        )
    qs = benjamini_hochberg([r["p_value"] for r in rows])
    for r, q in zip(rows, qs, strict=True):
        r["q_value"] = float(q)
        r["flagged"] = bool(q <= SUBJECT_LEVEL)
    rows.sort(key=lambda r: (r["p_value"], r["subject"]))
    return {
        "null_hypothesis": "per subject: " + COMPARE_NULL,
        "p_value": "the smallest of the subject's three paired p-values times 3 (Bonferroni), "
        "on its items without a natural option order",
        "level": SUBJECT_LEVEL,
        "rows": rows,
        "flagged": [r["subject"] for r in rows if r["flagged"]],
        "n_tested": len(rows),
        # q >= p >= the floor: a subject whose floor exceeds the level cannot be flagged
        "n_too_few_items": sum(r["p_floor"] > SUBJECT_LEVEL for r in rows),
    }


def _no_common_item(a: Any, b: Any, sa: dict[str, Any], sb: dict[str, Any]) -> str:
    """Why two runs share no item: one has no scored record (a missing items.jsonl is refused
    by :func:`compare_runs` first), or their item ids differ (ids are made from the file
    name: the same items in a file named otherwise have other ids)."""
    for run, scored in ((a, sa), (b, sb)):
        if not scored:
            return f"{run.path} has no scored item"
    first_a, first_b = next(iter(sa)), next(iter(sb))
    return (
        f"no item id is in both (A's first {first_a!r}, B's {first_b!r}; ids are made from "
        "the benchmark file's name, so the same items in a file named otherwise have other ids)"
    )


_RESCORE = "the command that scored the run, re-run, scores the others again"
"""What mends a run whose items.jsonl lost records."""


def compare_runs(run_a: RunFolder, run_b: RunFolder, *, alpha: float = 0.05) -> dict[str, Any]:
    """Compare permutation runs ``run_a`` (A, e.g. a base model) and ``run_b`` (B, e.g. its
    fine-tuned copy) on the items both scored under the same orders; or two BenBench runs
    (:func:`~contamscope.pipeline.compare_benbench.compare_benbench`), two membership runs
    (:func:`~contamscope.pipeline.compare_membership.compare_membership`) or two CAP runs
    (:func:`~contamscope.pipeline.compare_cap.compare_cap`).

    Raises :class:`~contamscope.errors.ConfigError` (or ``StoreError`` for an unreadable folder)
    for runs that do not compare or share no item.
    """
    a, b = _runs(run_a, run_b)
    for run in (a, b):  # (BenBench, membership and CAP runs said "nothing to compare, no item
        # has an original-vs-paraphrase gap in both" or "share only 0 items"; compare QA)
        if not run.items_path.exists():
            raise ConfigError(
                f"{a.path} and {b.path}: nothing to compare, {run.path} has no items.jsonl"
            )
    shorts = [
        f"{side}: {run.items_path} holds {short[0]} of the {plural(short[1], 'item record')} "
        "its summary.json counts"
        for side, run in (("A", a), ("B", b))
        if (short := records_short(run)) is not None
    ]
    try:
        if a.method == "benbench":
            from .compare_benbench import compare_benbench

            result = compare_benbench(a, b, alpha=alpha)
        elif a.method == "membership":
            from .compare_membership import compare_membership

            result = compare_membership(a, b, alpha=alpha)
        elif a.method == "cap":
            from .compare_cap import compare_cap

            result = compare_cap(a, b, alpha=alpha)
        else:
            result = _compare_permutation(a, b, alpha)
    except ConfigError as exc:
        if not shorts:
            raise
        # (why there was nothing to compare: records taken out; QA)
        raise ConfigError(f"{exc} ({'; '.join(shorts)}: {_RESCORE})") from None
    # (a run that had lost records was compared on the rest without a word; QA)
    result["warnings"] = [f"{short}: compared on those it holds ({_RESCORE})" for short in shorts]
    return result


def _compare_permutation(a: RunData, b: RunData, alpha: float) -> dict[str, Any]:
    """:func:`compare_runs` of two permutation runs."""
    _check_alike(a, b)
    sa, sb = _scored(a), _scored(b)
    common = [i for i in sa if i in sb]
    same = [i for i in common if sa[i].get("orders") == sb[i].get("orders")]
    if not same:
        why = (
            _no_common_item(a, b, sa, sb)
            if not common
            else f"the {len(common)} items scored in both were scored under other option orders "
            "(another --seed, --mc-orders or --max-exhaustive)"
        )
        raise ConfigError(f"{a.path} and {b.path}: nothing to compare, {why}")
    pairs = [_pair(sa[i], sb[i]) for i in same]
    natural = _natural_ids(a) | _natural_ids(b)
    without = [p for p in pairs if p.id not in natural]
    stats = compare_pairs(pairs, alpha)
    tested = compare_pairs(without, alpha) if len(without) < len(pairs) else None
    b_only = [p.id for p in pairs if p.alg1_b and not p.alg1_a]
    a_only = [p.id for p in pairs if p.alg1_a and not p.alg1_b]
    increased = sorted(
        (p for p in pairs if p.gap_b > p.gap_a), key=lambda p: p.gap_b - p.gap_a, reverse=True
    )
    side_a, side_b = _side(a, len(sa)), _side(b, len(sb))
    return {
        "schema": COMPARE_SCHEMA,
        "method": "permutation",
        "null_hypothesis": COMPARE_NULL,
        "a": side_a,
        "b": side_b,
        "benchmark": a.benchmark,
        "template": (_setting(a, "template") or {}).get("name"),
        "counts": {
            "paired": len(pairs),
            "only_a": len(sa) - len(common),
            "only_b": len(sb) - len(common),
            "other_orders": len(common) - len(same),
            "natural_order": len(pairs) - len(without),
        },
        "same_model": same_model(side_a, side_b),
        "statistics": stats,
        "without_natural": tested,
        "by_subject": _by_subject(without, alpha),
        "items": {
            "alg1_b_only": b_only[:LISTED],
            "alg1_a_only": a_only[:LISTED],
            "largest_gap_increase": [
                {"id": p.id, "gap_a": p.gap_a, "gap_b": p.gap_b} for p in increased[:LISTED]
            ],
        },
        # on the items a single run's verdict tests: a natural option order (a truth-table
        # block, sorted numbers) draws a clean model too, and two models differ in how much
        "verdict": compare_verdict(  # the statistics verdict_statistics() names
            tested or stats, a.model, b.model, len(pairs) - len(without)
        ),
        "paired_items": [
            {
                "id": p.id,
                "subject": p.subject,
                "natural_order": p.id in natural,
                "alg1_a": p.alg1_a,
                "alg1_b": p.alg1_b,
                "share_a": p.share_a,
                "share_b": p.share_b,
                "gap_a": p.gap_a,
                "gap_b": p.gap_b,
            }
            for p in pairs
        ],
    }


def verdict_statistics(result: dict[str, Any]) -> dict[str, Any]:
    """The paired statistics a permutation comparison's verdict read (:func:`compare_runs`):
    on the items without a natural option order where some were set aside, else on all."""
    return result.get("without_natural") or result["statistics"]


def paired_verdict(
    stats: dict[str, Any], model_a: str, model_b: str, where: str, label: str, reading: str
) -> dict[str, Any]:
    """A one-line verdict of a paired comparison: "no difference" when ``stats['direction']``
    is "none", else "<who> <label>" with ``reading`` (formatted with ``who``, ``more``,
    ``other`` and ``less``: the model found more familiar, and the other one); ``where`` names
    the p-value and its test."""
    p, alpha, direction = stats["p_value"], stats["alpha"], stats["direction"]
    if direction == "none":
        floor = stats.get("p_floor")
        if floor is not None and floor > alpha:  # no outcome could have been significant
            n = stats.get("n_items")
            on = f"on {plural(n, 'paired item')}" if n else "on these items"
            return {
                "label": "no difference",
                "p_value": p,
                "text": f"A ({model_a}) and B ({model_b}) do not differ at {level_pct(alpha)} "
                f"({where}); {on} no p-value below {floor:.3g} was possible, so no difference "
                "could have been found: compare on more items",
            }
        return {
            "label": "no difference",
            "p_value": p,
            "text": f"A ({model_a}) and B ({model_b}) do not differ at {level_pct(alpha)} ({where}): "
            "absence of evidence is not proof that they saw the benchmark alike",
        }
    more, less = (model_b, model_a) if direction == "B" else (model_a, model_b)
    who, other = ("B", "A") if direction == "B" else ("A", "B")
    return {
        "label": f"{who} {label}",
        "p_value": p,
        "text": reading.format(who=who, more=more, other=other, less=less, where=where),
    }


def compare_verdict(
    stats: dict[str, Any], model_a: str, model_b: str, set_aside: int = 0
) -> dict[str, Any]:
    """A one-line reading of :func:`compare_pairs`' result; ``set_aside``: paired items with
    a natural option order, left out of ``stats`` (as a single run's verdict leaves them)."""
    p = stats["p_value"]
    aside = (
        f"; {plural(set_aside, 'paired item')} with a natural option order set aside, as a "
        "run's verdict sets them aside"
        if set_aside
        else ""
    )
    if p is None:
        text = (
            f"every paired item has a natural option order{aside}"
            if set_aside
            else "no paired items"
        )
        return {"label": "nothing to compare", "text": text, "p_value": None}
    smallest = {"alg1": "Algorithm 1", "share": "share of orders beaten", "gap": "mean gap"}[
        stats["smallest"]
    ]
    return paired_verdict(
        stats,
        model_a,
        model_b,
        f"p = {p_text(p)}, {smallest}; smallest of three paired tests x 3{aside}",
        "more drawn to the published orders",
        "{who} ({more}) is more drawn to the published option orders than {other} ({less}) "
        "({where}): {who} has seen more of this benchmark, or is more sensitive to the order it "
        "was published in",
    )
