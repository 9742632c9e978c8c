"""Validation of the permutation detectors (the permutation paper's Tables 1 and 2).

Leaked items are trained on in exactly the layout the permutation pipeline scores (template
prefix + option block; original order in scenario ``a``, one random order per item in ``b``);
all N items are scored under every option order per checkpoint, and Algorithm 1, Algorithm 2
(plain and anchored) and the calibrated rank test are measured against the ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..data.items import LoadResult
from ..detectors import delta_key
from ..errors import ConfigError
from ..pipeline import PermutationConfig, run_permutation
from ..store import CachedScorer, RunDir
from .data import Scenario, Split, split_items, training_order, training_text
from .metrics import detectors_for, evaluate_records
from .pipeline import ScoreHooks, ValidationMethod, read_records

__all__ = ["PAPER_DELTAS", "PermutationValidation"]

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

    name = "permutation"

    def __post_init__(self) -> None:
        if self.scenario not in ("a", "b"):
            raise ConfigError(f"--scenario {self.scenario!r}: expected a or b")

    def benchmark(self) -> dict[str, Any]:
        return {
            "source": self.loaded.source,
            "format": self.loaded.format,
            "content_hash": self.loaded.content_hash,
            "items_loaded": len(self.loaded.items),
        }

    def settings(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "permutation": self.permutation.settings()}

    def draw(self, n_items: int, seed: int) -> Split:
        return split_items(
            self.loaded.items,
            n_items,
            seed=seed,
            include_non_exchangeable=self.permutation.include_non_exchangeable,
        )

    def _orders(self, split: Split) -> dict[str, tuple[int, ...]]:
        return {it.id: training_order(it, self.scenario, self.seed) for it in split.leaked}

    def split_record(self, split: Split) -> dict[str, Any]:
        orders = self._orders(split)
        return {
            "leaked": [{"id": it.id, "training_order": list(orders[it.id])} for it in split.leaked],
            "clean": [it.id for it in split.clean],
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
        run_permutation(
            self.loaded,
            list(split.items),
            scorer,
            run_dir,
            self.permutation,
            selection={"n_items": len(split.items), "seed": self.seed, "validate": True},
            overwrite=overwrite,
            on_start=hooks.on_start,
            on_items=hooks.on_items,
        )
        return read_records(run_dir.items_path)

    def _detectors(self) -> list[Any]:
        return detectors_for(self.permutation.deltas or PAPER_DELTAS, self.permutation.alpha)

    def evaluate(self, records: list[dict[str, Any]], split: Split) -> dict[str, Any]:
        metrics = evaluate_records(records, split.leaked_ids, self._detectors())
        return {
            "detectors": {k: m.to_dict() for k, m in metrics.items()},
            "diagnostics": _diagnostics(records, split.leaked_ids),
            "excluded": sum(1 for r in records if r.get("excluded")),
        }

    def describe(self) -> dict[str, str]:
        return {d.name: d.description for d in self._detectors()}

    def summary_extras(self) -> dict[str, Any]:
        return {"deltas": [delta_key(d) for d in self.permutation.deltas or PAPER_DELTAS]}
