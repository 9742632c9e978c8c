"""Reference items for a permutation run: a finished run of the same model on items it never
saw, which gives Algorithm 2 a measured false-positive rate (``--reference-run``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..detectors import Algorithm1, Algorithm2
from ..store import RunDir, RunFolder, folder_path

if TYPE_CHECKING:
    from .permutation import PermutationConfig

__all__ = ["Reference", "read_reference", "reference_with_check"]


@dataclass(frozen=True)
class Reference:
    """Items known to be clean, scored by the model tested: a finished permutation run."""

    scores: list[Any]
    """Their item scores under the run's thresholds (PermutationItemScore)."""
    info: dict[str, Any]
    """What summary.json says of them (``reference_run``)."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """The reference run's settings (how to read its benchmark again for the likeness check)."""
    ids: frozenset[str] = frozenset()
    """Its analysed items' ids."""


def read_reference(
    path: RunFolder, settings: Mapping[str, Any], config: PermutationConfig, records: Any
) -> Reference:
    """The finished permutation run at ``path`` as reference items for the run of
    ``settings`` (whose ``records`` are its items): scored by the same model set-up (its
    fingerprint), laid out and ordered alike, on other items. Its records are read, not
    changed; their flags are derived under ``config``'s thresholds."""
    from ..detectors import item_score_from_dict, rethreshold
    from ..detectors.stats import REFERENCE_NULL
    from ..errors import ConfigError
    from ..store.run import read_records

    path = folder_path(path, "--reference-run (reference_run)")
    where = f"--reference-run {path}"
    ref_settings, _ = RunDir(path).finished_run("permutation")
    if ref_settings.get("model_fingerprint") != settings.get("model_fingerprint"):
        raise ConfigError(
            f"{where}: scored by another model set-up ({ref_settings.get('model_fingerprint')}, "
            f"not {settings.get('model_fingerprint')}); reference items must be scored by the "
            "model tested"
        )
    same = ("template", "max_exhaustive", "mc_orders", "seed")
    theirs, ours = ref_settings.get("config") or {}, settings.get("config") or {}
    other = [k for k in same if theirs.get(k) != ours.get(k)]
    if other:
        raise ConfigError(f"{where}: scored with another {other[0].replace('_', '-')}")
    if ref_settings.get("benchmark_hash") == settings.get("benchmark_hash"):
        raise ConfigError(
            f"{where}: a run on this same benchmark (files {str(settings.get('benchmark_hash'))[:12]}"
            "), whatever its subjects or items: a leak of the benchmark may cover them too, so "
            "they cannot stand for unseen items; give a run on items the model never saw"
        )
    tested = {
        (r["prefix"].strip(), r["continuations"][0])
        for r in records
        if not r.get("excluded") and r.get("continuations")
    }
    alg1, alg2 = Algorithm1(ties=config.ties), Algorithm2(deltas=config.deltas)
    scores, shared, analysed = [], [], set()
    for r in read_records(Path(path)):
        if r.get("excluded"):
            continue
        analysed.add(r["id"])
        if (r["prefix"].strip(), r["continuations"][0]) in tested:
            shared.append(r["id"])
        lp = r["logprobs"]
        scores.append(rethreshold(item_score_from_dict(r), lp, alg1=alg1, alg2=alg2))
    if shared:
        raise ConfigError(
            f"{where}: {len(shared)} of its items "
            f"{'is a tested item' if len(shared) == 1 else 'are tested items'} too (first "
            f"{shared[0]}); "
            "reference items must be items the model never saw"
        )
    if not scores:
        raise ConfigError(f"{where}: no reference item was analysed (all excluded)")
    return Reference(
        scores,
        {
            "run": str(Path(path).resolve()),  # a later reanalyse may run elsewhere
            "benchmark": ref_settings.get("benchmark"),
            "n_items": len(scores),
            "null_hypothesis": REFERENCE_NULL,
        },
        ref_settings,
        frozenset(analysed),
    )


def _reference_items(settings: Mapping[str, Any], ids: frozenset[str]) -> tuple[list[Any], str]:
    """The reference run's analysed items from its benchmark, read as it read them, for the
    likeness check; ([], why) when that benchmark cannot be read or changed since."""
    from ..data import load_benchmark
    from ..errors import ContamscopeError
    from .permutation import run_benchmark

    try:
        loaded = load_benchmark(**run_benchmark(settings))
    except ContamscopeError as exc:
        return [], f"its benchmark cannot be read ({exc})"
    if loaded.content_hash != settings.get("benchmark_hash"):
        return [], "its benchmark's content changed since it ran"
    return [it for it in loaded.items if it.id in ids], ""


def reference_with_check(
    reference: Reference, included: Sequence[dict[str, Any]], by_id: Mapping[str, Any]
) -> dict[str, Any]:
    """``reference_run`` with ``check``: are the reference items written like the analysed
    benchmark items (the membership test's check, :func:`reference_likeness`)? Algorithm 2's
    measured false-positive rate carries over to the benchmark only if they are. The reference
    run's benchmark is read here, once per summary (``check_skipped``: why it could not be)."""
    from .membership import reference_likeness

    tested = [by_id[r["id"]] for r in included if r["id"] in by_id]
    if not tested:
        return reference.info
    items, unread = _reference_items(reference.settings, reference.ids)
    if unread:
        return reference.info | {"check_skipped": unread}
    if not items:
        return reference.info
    return reference.info | {"check": reference_likeness(tested, items)}
