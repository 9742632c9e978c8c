"""Validation of BenBench (Xu et al. 2024): instance-level n-gram detection and the perplexity gap.

N QA items (GSM8K-style) are drawn and split in half; the leaked half is trained on as the text
whose n-grams BenBench predicts (``--ngram-text``, by default question and answer joined by a
space). Per checkpoint the BenBench pipeline scores all N items (no paraphrases: only the
original versions are needed), and per item come the instance-level flags (every one of the k
n-grams predicted; exact, and ROUGE-L / edit similarity when lenient) and the answer perplexity.
The flags are measured with the benbench command's own thresholds (nothing tuned on these
items); perplexity, which has no per-item threshold, is measured by its AUC and by the
dataset-level gap mean(leaked) - mean(clean) with a bootstrap interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..data.items import LoadResult
from ..pipeline.benbench import BenBenchConfig, SplitInput, run_benbench
from ..store import CachedScorer, RunDir
from .data import Split, split_items
from .metrics import auc, binary_metrics, mean_gap
from .pipeline import ScoreHooks, ValidationMethod, read_records

__all__ = ["BenBenchValidation", "SPLIT_NAME"]

SPLIT_NAME = "test"
"""The BenBench split name the evaluated items are scored under (record ids ``test/<id>``)."""

_FLAGS: dict[str, tuple[str, str, str]] = {
    # detector name: (record flag, per-item accuracy metric, description)
    "ngram-exact-all": (
        "exact_all",
        "ngram_exact",
        "BenBench instance-level flag: all k n-grams of question + answer predicted exactly "
        "(greedy, teacher-forced). AUC from the item's exact n-gram accuracy.",
    ),
    "ngram-rouge-all": (
        "rouge_all",
        "ngram_rouge",
        "Instance-level flag, lenient: every n-gram's ROUGE-L F above the threshold. AUC from "
        "the item's ROUGE-L n-gram accuracy.",
    ),
    "ngram-edit-all": (
        "edit_all",
        "ngram_edit",
        "Instance-level flag, lenient: every n-gram's edit similarity above the threshold. AUC "
        "from the item's edit-similarity n-gram accuracy.",
    ),
}


def _orig(rec: Mapping[str, Any], key: str) -> float | None:
    m = (rec.get("metrics") or {}).get("original")
    return None if m is None or m.get(key) is None else float(m[key])


@dataclass
class BenBenchValidation(ValidationMethod):
    """BenBench's instance-level n-gram detector and perplexity on a QA benchmark."""

    loaded: LoadResult
    """The QA benchmark (``QAItem`` with reference answers)."""
    benbench: BenBenchConfig = field(default_factory=BenBenchConfig)
    """The benbench command's settings (n, k, layouts, thresholds, bootstrap)."""

    name = "benbench"

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
        return {"validated_method": self.name, "benbench": self.benbench.settings()}

    def draw(self, n_items: int, seed: int) -> Split:
        return split_items(self.loaded.items, n_items, seed=seed)

    def split_record(self, split: Split) -> dict[str, Any]:
        return {
            "leaked": [it.id for it in split.leaked],
            "clean": [it.id for it in split.clean],
            "record_ids": f"{SPLIT_NAME}/<id>",
        }

    def training_texts(self, split: Split) -> list[str]:
        cfg = self.benbench
        return [cfg.fill(cfg.ngram_text, it.question, it.answer or "") for it in split.leaked]

    def score(
        self,
        scorer: CachedScorer,
        run_dir: RunDir,
        split: Split,
        *,
        overwrite: bool,
        hooks: ScoreHooks,
    ) -> list[dict[str, Any]]:
        run_benbench(
            [SplitInput(SPLIT_NAME, self.loaded, list(split.items), [])],
            scorer,
            run_dir,
            self.benbench,
            selection={"n_items": len(split.items), "validate": True},
            overwrite=overwrite,
            on_start=hooks.on_start,
            on_items=hooks.on_items,
        )
        return read_records(run_dir.items_path)

    def _flags(self) -> dict[str, tuple[str, str, str]]:
        if self.benbench.lenient:
            return _FLAGS
        return {"ngram-exact-all": _FLAGS["ngram-exact-all"]}

    def evaluate(self, records: list[dict[str, Any]], split: Split) -> dict[str, Any]:
        leaked = split.leaked_ids
        used = [r for r in records if not r.get("excluded")]
        labels = [r["item_id"] in leaked for r in used]
        detectors = {}
        for name, (flag, metric, _) in self._flags().items():
            flags = [bool(r["flags"].get(flag)) for r in used]
            scores = [_orig(r, metric) for r in used]  # None (no n-gram): ranked last
            detectors[name] = binary_metrics(
                flags, labels, [-1.0 if s is None else s for s in scores]
            ).to_dict()
        ppl = [_orig(r, "ppl") for r in used]
        ppl_ok = [(p, y) for p, y in zip(ppl, labels) if p is not None and math.isfinite(p)]
        gaps = {}
        for key in ("ppl", "nll", "ngram_exact"):
            # the items the AUC reads (a non-finite perplexity made the gap -inf; QA)
            got = [(_orig(r, key), y) for r, y in zip(used, labels)]
            vals = [(v, y) for v, y in got if v is not None and math.isfinite(v)]
            gaps[key] = mean_gap(
                [v for v, y in vals if y],
                [v for v, y in vals if not y],
                n_boot=self.benbench.n_boot,
                seed=self.benbench.seed,
            )
        return {
            "detectors": detectors,
            "scores": {
                "perplexity": {
                    "auc": auc([-p for p, _ in ppl_ok], [y for _, y in ppl_ok]),
                    "n": len(ppl_ok),
                    "direction": "lower answer perplexity = more likely leaked",
                }
            },
            "gaps": gaps,
            "excluded": len(records) - len(used),
        }

    def describe(self) -> dict[str, str]:
        out = {name: desc for name, (_, _, desc) in self._flags().items()}
        out["perplexity"] = (
            "Answer perplexity given the question (BenBench layout) as a score, lower = leaked: "
            "AUC only (BenBench has no per-item perplexity threshold)."
        )
        out["gaps"] = (
            "Dataset level: mean(leaked) - mean(clean) of per-item answer perplexity, NLL and "
            "exact n-gram accuracy, with a 95% bootstrap interval (groups resampled separately; none "
            "below 5 items a group, where it would cover far less)."
        )
        return out
