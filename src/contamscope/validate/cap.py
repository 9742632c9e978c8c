"""Validation of CAP (the consistency-ratio paper): does the verdict name the trained split?

A benchmark with two splits (the first is CAP's reference, e.g. ``dev`` or ``train``) is sampled
with the seed, N items per split; the copy is trained on the N items of ONE split only, written
as the CAP pipeline prompts them followed by the reference answer (multiple choice: the prompt
and the answer letter). The CAP pipeline (original vs modified inputs, both splits) runs on the
untrained model and on every checkpoint; per epoch the summary holds M, C and PCR per split, the
PCR difference with its bootstrap interval, the verdict of each reader (greedy generation and,
for multiple choice, the log-likelihood choice) and whether it names the trained split:
``fine-tuned on <reference>`` when the reference split was trained on, ``contaminated by
<other>`` when the other one was.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ..data.cap import CapData
from ..errors import ConfigError
from ..perturb.templates import PromptTemplate
from ..pipeline.cap import CapConfig, _letter_cont, build_cap_summary, mcq_input, run_cap
from ..store import CachedScorer, RunDir
from .data import Split
from .pipeline import ScoreHooks, ValidationMethod, read_records

__all__ = ["CapValidation", "cap_training_text"]

_LABELS = "ABCDEFGHIJ"


def cap_training_text(
    item: Any, task: str, supplied: bool = False, template: PromptTemplate | None = None
) -> str:
    """The text a leaked CAP item is trained on: the prompt the CAP pipeline sends (in
    ``template``'s layout when the run has one), then the reference answer (multiple choice: the
    answer letter, spaced as the log-likelihood reader scores it; QA: the reference after a
    space).

    >>> from contamscope.data.items import MCQItem
    >>> it = MCQItem(id="q", question="2 + 2?", options=("3", "4"), answer=1)
    >>> cap_training_text(it, "mcq")
    'Question: 2 + 2?\\nA. 3\\nB. 4\\nAnswer: B'
    >>> zh = PromptTemplate("zh", "问：{question}\\n", "{label}) {text}\\n", "答：")
    >>> cap_training_text(it, "mcq", template=zh)
    '问：2 + 2?\\nA) 3\\nB) 4\\n答：B'
    """
    if task == "mcq":
        prompt = mcq_input(item, template, supplied)
        return prompt + _letter_cont(prompt, _LABELS[item.answer])
    sep = "" if item.question[-1:].isspace() else " "
    return item.question + sep + (item.answer or "")


def _sample(items: list[Any], n: int, seed: int) -> list[Any]:
    keep = set(random.Random(seed).sample(range(len(items)), n))
    return [it for i, it in enumerate(items) if i in keep]


@dataclass
class CapValidation(ValidationMethod):
    """CAP's split-level verdict on a two-split benchmark, trained on one split."""

    data: CapData
    """The loaded CAP benchmark (exactly two splits, the first being CAP's reference)."""
    trained_split: str
    """The split whose sampled items are trained on."""
    cap: CapConfig = field(default_factory=CapConfig)
    """The cap command's settings (task, alpha, scale, generation length, bootstrap)."""

    name = "cap"

    def __post_init__(self) -> None:
        if len(self.data.splits) != 2:
            raise ConfigError("--splits: CAP validation compares exactly two splits, e.g. dev,test")
        if self.trained_split not in self.data.splits:
            raise ConfigError(
                f"--train-split {self.trained_split!r}: not one of --splits "
                f"({', '.join(self.data.splits)})"
            )
        if self.cap.task not in ("mcq", "qa"):
            raise ConfigError(
                f"--task {self.cap.task}: CAP validation trains on mcq or qa items "
                "(summaries need paraphrases and an embedder)"
            )
        if self.cap.chat:
            raise ConfigError("--chat: the copy is trained on plain text; validate without it")

    @property
    def splits(self) -> list[str]:
        return list(self.data.splits)

    @property
    def other_split(self) -> str:
        return next(s for s in self.splits if s != self.trained_split)

    @property
    def expected_verdict(self) -> str:
        ref, other = self.splits
        return f"fine-tuned on {ref}" if self.trained_split == ref else f"contaminated by {other}"

    def skipped_rows(self) -> list[str]:
        return [str(p) for p in self.data.problems]

    def benchmark(self) -> dict[str, Any]:
        return {
            "source": self.data.source,
            "format": self.data.format,
            "content_hash": self.data.content_hash,
            "task": self.data.task,
            "items_loaded": {s: len(sp.items) for s, sp in self.data.splits.items()},
        }

    def settings(self) -> dict[str, Any]:
        return {
            "validated_method": self.name,
            "splits": self.splits,
            "trained_split": self.trained_split,
            "cap": self.cap.settings(),
        }

    def summary_settings(self) -> dict[str, Any]:
        """:meth:`settings` and CAP's analysis settings (the PCR constant, scale, bootstrap,
        smallest difference called evidence): they were in each epoch's summary only (QA)."""
        from ..pipeline.cap import CAP_ANALYSIS

        settings = self.settings()
        settings["cap"] = settings["cap"] | {k: getattr(self.cap, k) for k in CAP_ANALYSIS}
        return settings

    def draw(self, n_items: int, seed: int) -> Split:
        chosen = {}
        for s in self.splits:
            items = self.data.splits[s].items
            if len(items) < n_items:
                raise ConfigError(f"--n-items {n_items}: split {s!r} has only {len(items)} items")
            chosen[s] = _sample(items, n_items, seed)
        leaked, clean = chosen[self.trained_split], chosen[self.other_split]
        return Split(items=tuple(leaked + clean), leaked=tuple(leaked), clean=tuple(clean))

    def split_record(self, split: Split) -> dict[str, Any]:
        return {
            "trained_split": self.trained_split,
            "other_split": self.other_split,
            "leaked": [it.id for it in split.leaked],
            "clean": [it.id for it in split.clean],
        }

    def split_counts(self, split: Split) -> dict[str, Any]:
        return {
            **super().split_counts(split),
            "trained_split": self.trained_split,
            "other_split": self.other_split,
        }

    def _supplied(self, split: str, item_id: str) -> bool:
        return item_id in (self.data.splits[split].modified or {})

    def training_texts(self, split: Split) -> list[str]:
        return [
            cap_training_text(
                it, self.cap.task, self._supplied(self.trained_split, it.id), self.cap.template
            )
            for it in split.leaked
        ]

    def require(self, backend: Any) -> None:
        backend.require(generate=True, method="CAP")

    def score(
        self,
        scorer: CachedScorer,
        run_dir: RunDir,
        split: Split,
        *,
        overwrite: bool,
        hooks: ScoreHooks,
    ) -> list[dict[str, Any]]:
        selected = {
            self.trained_split: list(split.leaked),
            self.other_split: list(split.clean),
        }
        run_cap(
            self.data,
            {s: selected[s] for s in self.splits},  # CAP's reference split first
            scorer,
            run_dir,
            self.cap,
            selection={"n_items": len(split.leaked), "validate": True},
            overwrite=overwrite,
            on_start=hooks.on_start,
            on_items=hooks.on_items,
        )
        return read_records(run_dir.items_path)

    def evaluate(self, records: list[dict[str, Any]], split: Split) -> dict[str, Any]:
        summary = build_cap_summary(records, self.cap, splits=self.splits, provenance={})
        readers: dict[str, Any] = {}
        for reader, stats in summary["statistics"].items():
            comp = stats["comparisons"][0]
            readers[reader] = {
                "splits": {
                    s: {k: v[k] for k in ("n", "m", "m_modified", "c", "pcr")}
                    for s, v in stats["splits"].items()
                },
                "pcr_diff": comp["pcr_diff"],
                "ci": [comp["ci_low"], comp["ci_high"]],
                "p_value": comp["p_value"],
                "verdict": comp["verdict"],
                "names_trained_split": comp["verdict"] == self.expected_verdict,
                "excess": {  # beyond the paper: M - C per split, no tanh ceiling
                    "diff": comp.get("excess_diff"),
                    "ci": [comp.get("excess_ci_low"), comp.get("excess_ci_high")],
                    "p_value": comp.get("excess_p_value"),
                    "verdict": comp.get("excess_verdict"),
                    "names_trained_split": comp.get("excess_verdict") == self.expected_verdict,
                },
            }
        gen = readers["generate"]
        return {
            "verdict": gen["verdict"],
            "names_trained_split": gen["names_trained_split"],
            "expected_verdict": self.expected_verdict,
            "readers": readers,
            "counts": summary["counts"],
        }

    def describe(self) -> dict[str, str]:
        ref, other = self.splits
        return {
            "generate": (
                f"CAP verdict from greedy generations: PCR_{ref} - PCR_{other} with a bootstrap "
                "95% CI and a split-label permutation test; 'fine-tuned on' / 'contaminated by' "
                "when the CI excludes 0 and p <= 0.05."
            ),
            "loglik": (
                "The same from the log-likelihood choice of the answer letter (multiple choice)."
            ),
        }

    def summary_extras(self) -> dict[str, Any]:
        return {"expected_verdict": self.expected_verdict}
