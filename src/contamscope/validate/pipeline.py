"""Injected-contamination validation of the permutation detectors, end to end.

Draw N items, split them in half, score the untouched model (epoch 0), continue training a copy
on the leaked half and save a checkpoint at each requested epoch count, score every checkpoint
on all N items with the permutation pipeline, and measure each detector against the known
ground truth. Every stage writes into the run folder and is skipped on a re-run when finished
(complete checkpoints are reused, scoring runs resume item by item).
"""

from __future__ import annotations

import copy
import gc
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..backends import load_backend
from ..backends.base import Backend
from ..data.items import LoadResult
from ..detectors import delta_key
from ..errors import ConfigError
from ..pipeline import PermutationConfig, run_permutation
from ..pipeline.permutation import _git_commit, _package_versions
from ..store import RUN_SCHEMA_VERSION, CachedScorer, RunDir, ScoreCache
from .data import Scenario, Split, split_items, training_order, training_text
from .metrics import detectors_for, evaluate_records
from .train import (
    EpochLog,
    TrainConfig,
    checkpoint_complete,
    save_checkpoint,
    tokenize_texts,
    train_epochs,
)

__all__ = [
    "ValidateConfig",
    "ValidationOutcome",
    "run_validation",
    "SUMMARY_SCHEMA",
    "PAPER_DELTAS",
]

SUMMARY_SCHEMA = "contamscope.validate.summary/1"
PAPER_DELTAS = (-0.2, -0.17, -0.15)
"""The outlier thresholds of the permutation paper's Table 2."""


def _default_permutation() -> PermutationConfig:
    return PermutationConfig(deltas=PAPER_DELTAS)


@dataclass(frozen=True)
class ValidateConfig:
    """Settings of an injected-contamination experiment."""

    n_items: int = 100
    """Items drawn from the benchmark; half are trained on (leaked), half are not (clean)."""
    epochs: tuple[int, ...] = (1, 2, 3, 5)
    """Epoch counts at which the trained copy is checkpointed and evaluated."""
    scenario: Scenario = "a"
    """``a``: leaked items trained in their original option order; ``b``: in a random order."""
    seed: int = 0
    """Seed of the item draw, the leaked/clean split and the scenario-b orders."""
    baseline: bool = True
    """Also evaluate the untrained model (reported as epoch 0)."""
    keep_checkpoints: bool = True
    """Keep the checkpoint folders after scoring (needed to resume without retraining)."""
    train: TrainConfig = field(default_factory=TrainConfig)
    """Continued-training settings."""
    permutation: PermutationConfig = field(default_factory=_default_permutation)
    """Scoring and detector settings (the paper's three Algorithm-2 deltas by default)."""

    def __post_init__(self) -> None:
        if not self.epochs or any(e < 1 for e in self.epochs):
            raise ConfigError("--epochs must be positive integers, e.g. 1,2,3,5")
        if list(self.epochs) != sorted(set(self.epochs)):
            raise ConfigError("--epochs must be increasing and distinct, e.g. 1,2,3,5")
        if self.scenario not in ("a", "b"):
            raise ConfigError(f"--scenario {self.scenario!r}: expected a or b")

    def settings(self) -> dict[str, Any]:
        """What must match for a re-run to reuse the folder. ``epochs``, ``baseline`` and
        ``keep_checkpoints`` only add or drop work (training is deterministic at a constant rate,
        so a checkpoint does not depend on how many epochs follow it); a re-run may change them."""
        return {
            "n_items": self.n_items,
            "scenario": self.scenario,
            "seed": self.seed,
            "train": self.train.settings(),
            "permutation": self.permutation.settings(),
        }


@dataclass
class ValidationOutcome:
    summary: dict[str, Any]
    run_dir: Path


def _read_records(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


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


def run_validation(
    loaded: LoadResult,
    model: str,
    config: ValidateConfig,
    out: Path,
    *,
    device: str = "auto",
    dtype: str = "auto",
    options: dict[str, str] | None = None,
    cache: ScoreCache | None = None,
    overwrite: bool = False,
    on_phase: Callable[[str], None] | None = None,
    on_train_start: Callable[[int], None] | None = None,
    on_train_step: Callable[[int], None] | None = None,
    on_score_start: Callable[[str, int, int], None] | None = None,
    on_items: Callable[[int], None] | None = None,
) -> ValidationOutcome:
    """Run the whole experiment into ``out`` and return its summary (also in summary.json).

    Progress hooks: ``on_phase(text)``; ``on_train_start(total_texts)`` and
    ``on_train_step(n_texts)``; ``on_score_start(label, total, done)`` and ``on_items(n)``.
    """
    t_start = time.perf_counter()
    phase = on_phase or (lambda _text: None)
    split = split_items(
        loaded.items,
        config.n_items,
        seed=config.seed,
        include_non_exchangeable=config.permutation.include_non_exchangeable,
    )
    template = config.permutation.template
    orders = {it.id: training_order(it, config.scenario, config.seed) for it in split.leaked}
    settings = {
        "method": "validate",
        "run_schema": RUN_SCHEMA_VERSION,
        "model": model,
        "benchmark": loaded.source,
        "benchmark_hash": loaded.content_hash,
        "config": config.settings(),
    }
    out = Path(out)
    root = RunDir(out)
    if overwrite:
        for sub in [out / "checkpoints", *out.glob("epoch-*")]:
            shutil.rmtree(sub, ignore_errors=True)
    root.open(settings, overwrite=overwrite)
    (out / "split.json").write_text(
        json.dumps(
            {
                "leaked": [
                    {"id": it.id, "training_order": list(orders[it.id])} for it in split.leaked
                ],
                "clean": [it.id for it in split.clean],
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )

    phase(f"loading model {model}")
    backend = load_backend(model, device=device, dtype=dtype, options=options or {})
    hf: Any = backend
    if not all(hasattr(hf, a) for a in ("model", "tokenizer", "bos_id")):
        raise ConfigError(f"--model {model}: validation needs a local transformers model to train")
    bos_token = "none" if hf.bos_id is None else str(hf.tokenizer.convert_ids_to_tokens(hf.bos_id))
    ckpt_options = dict(options or {}, bos=bos_token)
    selection = {"n_items": len(split.items), "seed": config.seed, "validate": True}
    timings: dict[str, float] = {}

    def score(label: str, be: Backend) -> list[dict[str, Any]]:
        scorer = CachedScorer(be, cache)
        t0 = time.perf_counter()
        run_permutation(
            loaded,
            split.items,
            scorer,
            RunDir(out / label),
            config.permutation,
            selection=selection,
            overwrite=overwrite,
            on_start=(lambda total, done: on_score_start(label, total, done))
            if on_score_start
            else None,
            on_items=on_items,
        )
        timings[f"scoring_{label}_seconds"] = round(time.perf_counter() - t0, 3)
        return _read_records(out / label / "items.jsonl")

    records: dict[int, list[dict[str, Any]]] = {}
    model_info = backend.describe()
    if config.baseline:
        phase("scoring the untrained model (epoch 0)")
        records[0] = score("epoch-0", backend)

    ckdir = {e: out / "checkpoints" / f"epoch-{e}" for e in config.epochs}
    log_path = out / "train_log.json"
    missing = [e for e in config.epochs if not checkpoint_complete(ckdir[e])]
    train_logs: list[dict[str, Any]]
    if missing:
        phase(f"training a copy on {len(split.leaked)} leaked items for {max(missing)} epochs")
        train_model = copy.deepcopy(hf.model).float()
        tokenizer = hf.tokenizer
        texts = [training_text(it, template, orders[it.id]) for it in split.leaked]
        seqs = tokenize_texts(tokenizer, texts, hf.bos_id)
        del backend
        hf = None
        gc.collect()
        if on_train_start is not None:
            on_train_start(len(seqs) * max(missing))

        def after_epoch(epoch: int, log: EpochLog) -> None:
            if epoch in ckdir and not checkpoint_complete(ckdir[epoch]):
                info = {
                    "epochs": epoch,
                    "base_model": model,
                    "settings": settings,
                    "log": log.__dict__,
                }
                save_checkpoint(train_model, tokenizer, ckdir[epoch], info)

        t0 = time.perf_counter()
        logs = train_epochs(
            train_model,
            seqs,
            max(missing),
            config.train,
            after_epoch=after_epoch,
            on_step=on_train_step,
        )
        timings["training_seconds"] = round(time.perf_counter() - t0, 3)
        train_logs = [dict(log.__dict__) for log in logs]
        log_path.write_text(json.dumps(train_logs, indent=1) + "\n", encoding="utf-8")
        del train_model
        gc.collect()
    else:
        del backend
        hf = None
        gc.collect()
        train_logs = json.loads(log_path.read_text()) if log_path.is_file() else []

    for e in config.epochs:
        phase(f"scoring the checkpoint after {e} epoch{'s' if e > 1 else ''}")
        be = load_backend(f"hf:{ckdir[e]}", device=device, dtype=dtype, options=ckpt_options)
        records[e] = score(f"epoch-{e}", be)
        del be
        gc.collect()
        if not config.keep_checkpoints:
            shutil.rmtree(ckdir[e], ignore_errors=True)

    deltas = config.permutation.deltas or PAPER_DELTAS
    detectors = detectors_for(deltas, config.permutation.alpha)
    leaked_ids = split.leaked_ids
    results = []
    for e in sorted(records):
        metrics = evaluate_records(records[e], leaked_ids, detectors)
        results.append(
            {
                "epochs": e,
                "run": f"epoch-{e}",
                "detectors": {k: m.to_dict() for k, m in metrics.items()},
                "diagnostics": _diagnostics(records[e], leaked_ids),
                "excluded": sum(1 for r in records[e] if r.get("excluded")),
            }
        )
    timings["total_seconds"] = round(time.perf_counter() - t_start, 3)
    summary = build_summary(
        loaded, model, model_info, config, split, results, train_logs, detectors, timings
    )
    summary["deltas"] = [delta_key(d) for d in deltas]
    root.write_summary(summary)
    return ValidationOutcome(summary, out)


def build_summary(
    loaded: LoadResult,
    model: str,
    model_info: dict[str, Any],
    config: ValidateConfig,
    split: Split,
    results: list[dict[str, Any]],
    train_logs: list[dict[str, Any]],
    detectors: list[Any],
    timings: dict[str, float],
) -> dict[str, Any]:
    """summary.json of a validation run: provenance, the split, training, metrics per epoch."""
    return {
        "schema": SUMMARY_SCHEMA,
        "method": "validate",
        "validated_method": "permutation",
        "contamscope_version": __version__,
        "git_commit": _git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": {"spec": model, **{k: v for k, v in model_info.items() if k != "spec"}},
        "benchmark": {
            "source": loaded.source,
            "format": loaded.format,
            "content_hash": loaded.content_hash,
            "items_loaded": len(loaded.items),
        },
        "config": {
            **config.settings(),
            "epochs": list(config.epochs),
            "baseline": config.baseline,
        },
        "split": {
            "n_items": len(split.items),
            "n_leaked": len(split.leaked),
            "n_clean": len(split.clean),
            "file": "split.json",
        },
        "training": train_logs,
        "detectors": {d.name: d.description for d in detectors},
        "results": results,
        "timings": timings,
        "versions": _package_versions(),
    }
