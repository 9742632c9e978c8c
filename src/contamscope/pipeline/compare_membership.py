"""Compare two finished membership runs (``contamscope compare`` on ``membership`` runs).

Reads the two run folders only (no model, no score cache). The benchmark items and the
reference items both runs scored are paired by id; per model the AUC of the benchmark's
statistic against the references' says how much more familiar the model is with the benchmark
than with text it cannot have seen, and :func:`~contamscope.detectors.compare.compare_aucs`
tests whether one model's AUC is larger (DeLong's test for correlated AUCs from 30 + 30
items, the paired swap test below).
"""

from __future__ import annotations

from typing import Any

from ..detectors.combined import COMBINED_COMPONENTS
from ..detectors.compare import AUC_NULL, compare_aucs
from ..detectors.verdict import p_text
from ..errors import ConfigError
from ..report.membership import MEASURED as ALIKE
from ..report.rundata import RunData
from ..wording import plural, shell

__all__ = ["compare_membership"]

LISTED = 20
"""Item ids kept per list (all are counted)."""


def _config(run: RunData) -> dict[str, Any]:
    config = run.summary.get("config") or {}
    return config if isinstance(config, dict) else {}


def _can_read(run: RunData, statistic: str) -> bool:
    """Whether the run's records hold what ``statistic`` reads (its option orders' scores)."""
    from .membership import ORDER_STATISTICS

    config = run.settings.get("config") or {}
    return statistic not in ORDER_STATISTICS or (isinstance(config, dict) and "orders" in config)


def _check_alike(a: RunData, b: RunData) -> tuple[str, ...]:
    """Refuse runs whose numbers do not compare; return the statistics to test."""
    for role in ("benchmark", "reference"):
        ra, rb = a.summary.get(role) or {}, b.summary.get(role) or {}
        ha, hb = ra.get("content_hash"), rb.get("content_hash")
        if (ha and hb and ha != hb) or (not (ha and hb) and ra.get("source") != rb.get("source")):
            raise ConfigError(
                f"{a.path} and {b.path} read different {role} files ({ra.get('source')}; "
                f"{rb.get('source')}): compare runs on the same benchmark and references"
            )
    ca, cb = _config(a), _config(b)
    for key in ALIKE:
        if ca.get(key) != cb.get(key):
            name = {"template": "--template", "k": "--k"}[key]
            va, vb = (
                v.get("name") if isinstance(v, dict) else v for v in (ca.get(key), cb.get(key))
            )
            raise ConfigError(
                f"{a.path} and {b.path} were scored with another {name} ({va} vs {vb}): "
                "compare runs scored alike"
            )
    sa, sb = ca.get("statistic"), cb.get("statistic")
    if sa != sb:
        # reanalyse can take a run only to a statistic its records hold (gap and combined
        # need every option order scored)
        if _can_read(b, str(sa)):
            hint = f"`contamscope reanalyse {shell(b.path)} --statistic {sa}` (nothing is scored)"
        elif _can_read(a, str(sb)):
            hint = f"`contamscope reanalyse {shell(a.path)} --statistic {sb}` (nothing is scored)"
        else:
            hint = f"its membership command re-run with --statistic {sa} on {b.path}"
        raise ConfigError(
            f"{a.path} and {b.path} test other statistics (--statistic {sa} vs {sb}): bring one "
            f"to the other's with {hint}"
        )
    return COMBINED_COMPONENTS if sa == "combined" else (str(sa),)


def _values(run: RunData, statistics: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The run's items with every statistic tested, by id (benchmark and reference)."""
    out: dict[str, dict[str, Any]] = {}
    for rec in run.iter_records():
        stats = rec.get("statistics") or {}
        if rec.get("excluded") or any(stats.get(s) is None for s in statistics):
            continue
        out.setdefault(str(rec.get("id")), rec)
    return out


def compare_membership(a: RunData, b: RunData, *, alpha: float = 0.05) -> dict[str, Any]:
    """Compare membership runs ``a`` (A) and ``b`` (B) on the benchmark and reference items
    both scored. Raises :class:`~contamscope.errors.ConfigError` for runs that do not compare
    or share too few items (2 of each kind)."""
    from .compare import COMPARE_SCHEMA, _side, same_model

    statistics = _check_alike(a, b)
    va, vb = _values(a, statistics), _values(b, statistics)
    common = [i for i in va if i in vb]
    by_role = {
        role: [i for i in common if va[i].get("role") == role]
        for role in ("benchmark", "reference")
    }
    short = [plural(len(ids), f"{role} item") for role, ids in by_role.items() if len(ids) < 2]
    if short:
        raise ConfigError(
            f"{a.path} and {b.path}: nothing to compare, the runs share only "
            f"{' and '.join(short)} (2 of each, scored in both, are needed)"
        )
    bench, ref = by_role["benchmark"], by_role["reference"]
    values = {
        s: (
            [va[i]["statistics"][s] for i in bench],
            [va[i]["statistics"][s] for i in ref],
            [vb[i]["statistics"][s] for i in bench],
            [vb[i]["statistics"][s] for i in ref],
        )
        for s in statistics
    }
    stats = compare_aucs(values, alpha)
    flags = {who: {i for i in bench if run[i].get("flag")} for who, run in (("a", va), ("b", vb))}
    stats["flags"] = {
        "a": len(flags["a"]),
        "b": len(flags["b"]),
        "b_only": len(flags["b"] - flags["a"]),
        "a_only": len(flags["a"] - flags["b"]),
    }

    def count(v: dict[str, dict[str, Any]], role: str) -> int:
        return sum(1 for r in v.values() if r.get("role") == role)

    side_a = _side(a, {r: count(va, r) for r in ("benchmark", "reference")})
    side_b = _side(b, {r: count(vb, r) for r in ("benchmark", "reference")})
    return {
        "schema": COMPARE_SCHEMA,
        "method": "membership",
        "null_hypothesis": AUC_NULL,
        "a": side_a,
        "b": side_b,
        "benchmark": a.benchmark,
        "reference": (a.summary.get("reference") or {}).get("source"),
        "config": {k: _config(a).get(k) for k in (*ALIKE, "statistic")},
        "counts": {
            "benchmark": len(bench),
            "reference": len(ref),
            **{
                f"only_{who}_{role}": count(v, role) - len(by_role[role])
                for who, v in (("a", va), ("b", vb))
                for role in ("benchmark", "reference")
            },
        },
        "same_model": same_model(side_a, side_b),
        "statistics": stats,
        "items": {
            "flagged_b_only": sorted(flags["b"] - flags["a"], key=bench.index)[:LISTED],
            "flagged_a_only": sorted(flags["a"] - flags["b"], key=bench.index)[:LISTED],
        },
        "verdict": auc_verdict(stats, a.model, b.model),
        "paired_items": [
            {
                "id": i,
                "role": va[i]["role"],
                **{f"{s}_a": va[i]["statistics"][s] for s in statistics},
                **{f"{s}_b": vb[i]["statistics"][s] for s in statistics},
                "p_a": va[i].get("p_value"),
                "p_b": vb[i].get("p_value"),
                "flag_a": va[i].get("flag"),
                "flag_b": vb[i].get("flag"),
            }
            for i in bench + ref
        ],
    }


STAT_NAMES = {"min_k_pp": "Min-K%++", "min_k": "Min-K%", "loss": "loss", "zlib": "zlib"}
STAT_NAMES["gap"] = "permutation gap"


def auc_verdict(stats: dict[str, Any], model_a: str, model_b: str) -> dict[str, Any]:
    """A one-line reading of :func:`~contamscope.detectors.compare.compare_aucs`' result."""
    from .compare import paired_verdict

    p = stats["p_value"]
    m = len(stats["tested"])
    name = STAT_NAMES.get(stats["smallest"], stats["smallest"])
    where = f"p = {p_text(p)}, {name} AUC" + (f"; smallest of {m} tests x {m}" if m > 1 else "")
    return paired_verdict(
        stats,
        model_a,
        model_b,
        where,
        "more familiar with the benchmark",
        "{who} ({more}) tells the benchmark from the reference items better than {other} "
        "({less}) ({where}): {who} has seen more of this benchmark, or the references differ "
        "from it in a way it notices more",
    )
