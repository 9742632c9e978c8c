"""Validation of the permutation detectors (the permutation paper's Tables 1 and 2).

Leaked items are trained on in exactly the layout the permutation pipeline scores (template
prefix + option block; original order in scenario ``a``, one random order per item in ``b``);
all N items are scored under every option order per checkpoint, and Algorithm 1, Algorithm 2
(plain and anchored) and the calibrated rank test are measured against the ground truth.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..backends.base import Backend
from ..data.items import LoadResult
from ..detectors import delta_key
from ..detectors.combined import CombinedResult, CombinedTest
from ..detectors.membership import STATISTICS, conformal_p_values, mann_whitney
from ..errors import ConfigError
from ..pipeline import PermutationConfig, run_permutation
from ..pipeline.membership import MembershipConfig, run_membership
from ..pipeline.permutation_summary import natural_order_summary
from ..store import CachedScorer, RunDir
from .data import (
    Scenario,
    Split,
    draw_reference,
    split_items,
    training_order,
    training_text,
)
from .metrics import Detector, detectors_for, evaluate_records, roc_points
from .pipeline import ScoreHooks, ValidationMethod, read_records

__all__ = ["PAPER_DELTAS", "PermutationValidation"]

AUTO_REFERENCE_ITEMS = 100
"""Reference items drawn by default for the membership detectors."""

PAPER_DELTAS = (-0.2, -0.17, -0.15)
"""The outlier thresholds of the permutation paper's Table 2."""


def _default_permutation() -> PermutationConfig:
    return PermutationConfig(deltas=PAPER_DELTAS)


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _diagnostics(records: list[dict[str, Any]], leaked: set[str]) -> dict[str, Any]:
    """Mean log-prob of the original order and mean gap, leaked vs clean (training's effect)."""
    used = [r for r in records if not r.get("excluded")]
    out: dict[str, Any] = {}
    for name, keep in (("leaked", True), ("clean", False)):
        part = [r for r in used if (r["id"] in leaked) == keep]
        out[name] = {
            "n": len(part),
            "mean_original_logprob": _mean([r["logprobs"][0] for r in part]),
            "mean_gap": _mean([r["gap"] for r in part]),
        }
    return out


def _value(r: Mapping[str, Any], stat: str) -> float | None:
    """A record's finite value of ``stat``: the permutation gap (its own field), the combined
    score (set by :func:`_with_reference_p_values`) or a membership statistic."""
    own = stat in ("gap", "combined_score")
    v = r.get(stat) if own else (r.get("membership") or {}).get(stat)
    return float(v) if v is not None and math.isfinite(v) else None


def _values(records: list[dict[str, Any]], stat: str) -> list[float]:
    return [v for v in (_value(r, stat) for r in records) if v is not None]


def _pair(r: Mapping[str, Any]) -> tuple[float, float] | None:
    """(gap, Min-K%++) of a record that has both."""
    g, m = _value(r, "gap"), _value(r, "min_k_pp")
    return None if g is None or m is None else (g, m)


def _with_reference_p_values(
    evaluated: list[dict[str, Any]], reference: list[dict[str, Any]], combined: CombinedTest
) -> tuple[list[dict[str, Any]], CombinedResult | None]:
    """Copies of the evaluated records with ``membership_p[stat]``: each membership statistic's
    and the permutation gap's conformal p-value among the reference items' values, and the
    combined test's (gap + Min-K%++, pooled ranks) p-value and ``combined_score`` (absent where
    missing); and the combined test's result (None without items that have both)."""
    out = [dict(r, membership_p={}) for r in evaluated]
    for stat in (*STATISTICS, "gap"):
        refs = _values(reference, stat)
        for r in out:
            v = _value(r, stat)
            if refs and v is not None:
                r["membership_p"][stat] = float(conformal_p_values([v], refs)[0])
    ref_pairs = [p for p in map(_pair, reference) if p is not None]
    testable = [(r, p) for r in out if (p := _pair(r)) is not None]
    if not ref_pairs or not testable:
        return out, None
    result = combined.score([p for _, p in testable], ref_pairs)
    for (r, _), pv, tv in zip(testable, result.p_values, result.scores):
        r["membership_p"]["combined"] = float(pv)
        r["combined_score"] = float(tv)
    return out, result


def _membership_flag(stat: str, alpha: float) -> Callable[[Mapping[str, Any]], bool]:
    def flag(r: Mapping[str, Any]) -> bool:
        p = (r.get("membership_p") or {}).get(stat)
        return p is not None and p <= alpha

    return flag


def _membership_score(stat: str) -> Callable[[Mapping[str, Any]], float]:
    key = "combined_score" if stat == "combined" else stat

    def score(r: Mapping[str, Any]) -> float:
        v = _value(r, key)
        return -math.inf if v is None else v

    return score


def check_statistic(statistic: str) -> None:
    """Refuse a membership statistic validate cannot declare: its dataset test would be absent.

    >>> check_statistic("combined")
    Traceback (most recent call last):
    ...
    contamscope.errors.ConfigError: --statistic 'combined': validate declares one of min_k_pp, min_k, loss, zlib (the combined and gap detectors are reported anyway)
    """
    if statistic not in STATISTICS:
        raise ConfigError(
            f"--statistic {statistic!r}: validate declares one of "
            f"{', '.join(STATISTICS)} (the combined and gap detectors are reported anyway)"
        )


@dataclass
class PermutationValidation(ValidationMethod):
    """Permutation detectors on a multiple-choice benchmark."""

    loaded: LoadResult
    """The benchmark (multiple-choice items)."""
    scenario: Scenario = "a"
    """``a``: leaked items trained in their original option order; ``b``: in a random order."""
    permutation: PermutationConfig = field(default_factory=_default_permutation)
    """Scoring and detector settings (the paper's three Algorithm-2 deltas by default)."""
    seed: int = 0
    """Seed of the scenario-b orders (the experiment's seed)."""
    reference_items: int | None = None
    """Clean reference items for the membership test (never trained on, not evaluated, no
    option set shared with an evaluated item); 0 leaves the membership detectors out. None:
    up to :data:`AUTO_REFERENCE_ITEMS` of those available, left out when fewer than
    ``1/alpha`` are (no p-value could then reach alpha)."""
    membership: MembershipConfig = field(default_factory=MembershipConfig)
    """Settings of the membership test (its declared statistic, k, alpha)."""

    name = "permutation"
    _reference: tuple[Any, ...] = field(default=(), init=False, repr=False)

    def __post_init__(self) -> None:
        if self.scenario not in ("a", "b"):
            raise ConfigError(f"--scenario {self.scenario!r}: expected a or b")
        k, alpha = self.reference_items, self.membership.alpha
        if k and k + 1 < 1 / alpha - 1e-9:  # the auto default leaves them out instead
            need = math.ceil(1 / alpha - 1 - 1e-9)
            raise ConfigError(
                f"--reference-items {k}: with alpha {alpha:g} the membership detectors could flag "
                f"nothing (smallest p-value 1/{k + 1}); give at least {need}, or 0 to leave them "
                "out"
            )
        check_statistic(self.membership.statistic)

    def skipped_rows(self) -> list[str]:
        return [str(p) for p in self.loaded.problems]

    def benchmark(self) -> dict[str, Any]:
        return {
            "source": self.loaded.source,
            "format": self.loaded.format,
            "content_hash": self.loaded.content_hash,
            "items_loaded": len(self.loaded.items),
        }

    def settings(self) -> dict[str, Any]:
        # alpha is analysis only, as in the permutation command: another --alpha re-analyses
        # the folder's records (the membership test's scoring settings hold no alpha either)
        perm = {k: v for k, v in self.permutation.settings().items() if k != "alpha"}
        out: dict[str, Any] = {"scenario": self.scenario, "permutation": perm}
        if self.reference_items != 0:
            out["reference_items"] = self.reference_items
            out["membership"] = self.membership.scoring_settings()
        return out

    def _settings_with_alpha(self, alpha: Any) -> dict[str, Any]:
        out = self.settings()
        out["permutation"] = out["permutation"] | {"alpha": alpha}
        return out

    def summary_settings(self) -> dict[str, Any]:
        return self._settings_with_alpha(self.permutation.alpha)

    def earlier_settings(self, stored: dict[str, Any]) -> list[dict[str, Any]]:
        old = stored.get("permutation")
        if isinstance(old, dict) and "alpha" in old:  # written when settings.json held alpha
            return [self._settings_with_alpha(old["alpha"])]
        return []

    def draw(self, n_items: int, seed: int) -> Split:
        split = split_items(
            self.loaded.items,
            n_items,
            seed=seed,
            include_non_exchangeable=self.permutation.include_non_exchangeable,
        )
        k = self.reference_items
        if k is None:  # auto: as many as available up to the default, if enough to reach alpha
            avail = len(
                draw_reference(
                    self.loaded.items,
                    split,
                    None,
                    seed=seed,
                    include_non_exchangeable=self.permutation.include_non_exchangeable,
                )
            )
            k = min(AUTO_REFERENCE_ITEMS, avail)
            if k + 1 < 1 / self.membership.alpha:
                k = 0
        self._reference = draw_reference(
            self.loaded.items,
            split,
            k,
            seed=seed,
            include_non_exchangeable=self.permutation.include_non_exchangeable,
        )
        return split

    def require(self, backend: Backend) -> None:
        if self._reference:
            backend.require(
                prompt_logprobs=True,
                token_logprobs=True,
                token_stats=self.membership.statistic == "min_k_pp",
                vocab_stats=self.membership.statistic == "min_k_pp",
                method="validate (membership detectors; --reference-items 0 leaves them out)",
            )

    def split_counts(self, split: Split) -> dict[str, Any]:
        return {**super().split_counts(split), "n_reference": len(self._reference)}

    def _orders(self, split: Split) -> dict[str, tuple[int, ...]]:
        return {it.id: training_order(it, self.scenario, self.seed) for it in split.leaked}

    def split_record(self, split: Split) -> dict[str, Any]:
        orders = self._orders(split)
        return {
            "leaked": [{"id": it.id, "training_order": list(orders[it.id])} for it in split.leaked],
            "clean": [it.id for it in split.clean],
            "reference": [it.id for it in self._reference],
        }

    def training_texts(self, split: Split) -> list[str]:
        orders = self._orders(split)
        tpl = self.permutation.template
        return [training_text(it, tpl, orders[it.id]) for it in split.leaked]

    def score(
        self,
        scorer: CachedScorer,
        run_dir: RunDir,
        split: Split,
        *,
        overwrite: bool,
        hooks: ScoreHooks,
    ) -> list[dict[str, Any]]:
        ref_dir = RunDir(run_dir.path / "reference")
        n_ref = len(self._reference)
        ref_done = len(read_records(ref_dir.items_path)) if ref_dir.items_path.is_file() else 0

        def on_start(total: int, done: int) -> None:  # one bar: evaluated + reference items
            if hooks.on_start is not None:
                hooks.on_start(total + n_ref, done + min(ref_done, n_ref))

        run_permutation(
            self.loaded,
            list(split.items),
            scorer,
            run_dir,
            self.permutation,
            selection={"n_items": len(split.items), "seed": self.seed, "validate": True},
            overwrite=overwrite,
            on_start=on_start,
            on_items=hooks.on_items,
        )
        records = read_records(run_dir.items_path)
        if not self._reference:
            return records
        # the reference items under every order too (their original orders' gaps are the
        # empirical null of the reference-calibrated permutation detectors)
        run_permutation(
            self.loaded,
            list(self._reference),
            scorer,
            ref_dir,
            self.permutation,
            selection={"reference_items": n_ref, "seed": self.seed, "validate": True},
            overwrite=overwrite,
            on_items=hooks.on_items,
        )
        ref_perm = {r["id"]: r for r in read_records(ref_dir.items_path)}
        # the membership test: token statistics of the original text, evaluated + reference
        mdir = RunDir(run_dir.path / "membership")
        run_membership(
            self.loaded,
            list(split.items),
            self.loaded,
            list(self._reference),
            scorer,
            mdir,
            self.membership,
            selection={"validate": True},
            overwrite=overwrite,
        )
        stats = {r["id"]: r.get("statistics") for r in read_records(mdir.items_path)}
        for r in records:
            r["membership"] = stats.get(f"benchmark/{r['id']}")
        records.extend(
            {
                **ref_perm.get(it.id, {"id": it.id}),
                "role": "reference",
                "excluded": "reference item (calibration)",
                "membership": stats.get(f"reference/{it.id}"),
            }
            for it in self._reference
        )
        return records

    def _detectors(self) -> list[Any]:
        return detectors_for(self.permutation.deltas or PAPER_DELTAS, self.permutation.alpha)

    def _membership_detectors(self) -> list[Detector]:
        a = self.membership.alpha
        out = [
            Detector(
                f"combined@{a:g}",
                "Reference-calibrated combined test (docs/methods.md): the permutation gap "
                "(original order's log-prob minus the other orders' mean) and Min-K%++ of the "
                "original text, ranked together with the reference items'; full-conformal "
                f"p-value <= {a:g} (H0: the item's pair is exchangeable with the references'; "
                f"false-positive rate <= {a:g}). AUC from the item's pooled-rank score.",
                _membership_flag("combined", a),
                _membership_score("combined"),
            ),
            Detector(
                f"gap-ref@{a:g}",
                "Permutation gap calibrated on the reference items: conformal p-value of the "
                f"item's gap among the references' gaps <= {a:g} (H0: exchangeable with the "
                f"references; false-positive rate <= {a:g}). AUC from the gap.",
                _membership_flag("gap", a),
                _membership_score("gap"),
            ),
        ]
        for stat in STATISTICS:
            declared = " (the membership command's declared statistic)" * (
                stat == self.membership.statistic
            )
            out.append(
                Detector(
                    f"membership-{stat}@{a:g}",
                    f"Reference-calibrated membership test on {stat}{declared}: conformal "
                    f"p-value of the item's {stat} among the reference items' <= {a:g} (H0: the "
                    "item is exchangeable with items the model never saw; false-positive rate "
                    f"<= {a:g}). AUC from the statistic.",
                    _membership_flag(stat, a),
                    _membership_score(stat),
                )
            )
        return out

    def evaluate(self, records: list[dict[str, Any]], split: Split) -> dict[str, Any]:
        evaluated = [r for r in records if r.get("role") != "reference"]
        reference = [r for r in records if r.get("role") == "reference" and r.get("membership")]
        detectors = self._detectors()
        dataset: dict[str, Any] = {}
        if reference:
            combined = CombinedTest(alpha=self.membership.alpha, seed=self.seed)
            evaluated, res = _with_reference_p_values(evaluated, reference, combined)
            detectors = detectors + self._membership_detectors()
            stat = self.membership.statistic
            bench, refs = _values(evaluated, stat), _values(reference, stat)
            if bench and refs:
                dataset["membership"] = {
                    "statistic": stat,
                    **mann_whitney(bench, refs, seed=self.seed).to_dict(),
                }
            if res is not None:
                dataset["combined"] = {
                    "statistic": "combined (gap + min_k_pp, pooled ranks)",
                    **res.dataset.to_dict(),
                    "flagged": int(res.flags.sum()),
                    "n_items": int(res.flags.size),
                }
        by_id = {it.id: it for it in split.items}
        used = [r for r in evaluated if not r.get("excluded")]
        natural = natural_order_summary(used, by_id, self.permutation.alpha)
        dataset["permutation_natural_order"] = {
            k: v for k, v in natural.items() if k != "statistics_without"
        }
        dataset["permutation_without_natural_order"] = natural["statistics_without"]
        metrics = evaluate_records(evaluated, split.leaked_ids, detectors)
        labels = [r["id"] in split.leaked_ids for r in used]
        return {
            "detectors": {k: m.to_dict() for k, m in metrics.items()},
            "roc": {d.name: roc_points([d.score(r) for r in used], labels) for d in detectors},
            "dataset": dataset,
            "diagnostics": _diagnostics(evaluated, split.leaked_ids),
            "excluded": sum(1 for r in evaluated if r.get("excluded")),
        }

    def describe(self) -> dict[str, str]:
        dets = self._detectors() + (self._membership_detectors() if self._reference else [])
        return {d.name: d.description for d in dets}

    def summary_extras(self) -> dict[str, Any]:
        return {"deltas": [delta_key(d) for d in self.permutation.deltas or PAPER_DELTAS]}
