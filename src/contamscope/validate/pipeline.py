"""Injected-contamination validation, end to end, for any detection method.

Draw N items, split them into leaked and clean, score the untouched model (epoch 0), continue
training a copy on the leaked items and save a checkpoint at each requested epoch count, run the
method's own pipeline on every checkpoint, and measure its detectors against the known ground
truth. What is method-specific (which items, the training text, the scoring pipeline and the
per-epoch evaluation) lives in a :class:`ValidationMethod`; the split, training, checkpoints,
resume and the summary are shared. Every stage writes into the run folder and is skipped on a
re-run when finished (complete checkpoints are reused, scoring runs resume item by item).
"""

from __future__ import annotations

import copy
import gc
import json
import shutil
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .. import __version__
from ..backends import load_backend
from ..backends.base import Backend
from ..errors import ConfigError, note
from ..paths import replace_text
from ..pipeline.provenance import git_commit, package_versions
from ..store import RUN_SCHEMA_VERSION, CachedScorer, RunDir, ScoreCache, read_records
from ..wording import plural
from .data import Split
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
    "ValidationMethod",
    "ValidationOutcome",
    "ScoreHooks",
    "run_validation",
    "SUMMARY_SCHEMA",
    "read_records",
]

SUMMARY_SCHEMA = "contamscope.validate.summary/1"


@dataclass(frozen=True)
class ValidateConfig:
    """Settings of an injected-contamination experiment shared by every method."""

    n_items: int = 100
    """Items drawn from the benchmark; about half are trained on (leaked), half are not (clean).
    CAP: items drawn from each split (the trained split's are all trained on)."""
    epochs: tuple[int, ...] = (1, 2, 3, 5)
    """Epoch counts at which the trained copy is checkpointed and evaluated."""
    seed: int = 0
    """Seed of the item draw, the leaked/clean split and the method's own randomness."""
    baseline: bool = True
    """Also evaluate the untrained model (reported as epoch 0)."""
    keep_checkpoints: bool = True
    """Keep the checkpoint folders after scoring (needed to resume without retraining)."""
    train: TrainConfig = field(default_factory=TrainConfig)
    """Continued-training settings."""

    def __post_init__(self) -> None:
        if self.n_items < 2:
            raise ConfigError("--n-items must be at least 2 (one leaked, one clean)")
        if not self.epochs or any(e < 1 for e in self.epochs):
            raise ConfigError("--epochs must be positive integers, e.g. 1,2,3,5")
        if list(self.epochs) != sorted(set(self.epochs)):
            raise ConfigError("--epochs must be increasing and distinct, e.g. 1,2,3,5")

    def settings(self) -> dict[str, Any]:
        """What must match for a re-run to reuse the folder. ``epochs``, ``baseline`` and
        ``keep_checkpoints`` only add or drop work (training is deterministic at a constant rate,
        so a checkpoint does not depend on how many epochs follow it); a re-run may change them."""
        return {"n_items": self.n_items, "seed": self.seed, "train": self.train.settings()}


@dataclass
class ScoreHooks:
    """Progress callbacks handed to a method's scoring pipeline."""

    on_start: Callable[[int, int], None] | None = None
    """``(total items, items already done)``."""
    on_items: Callable[[float], None] | None = None
    """``(items finished now)``."""


class ValidationMethod(ABC):
    """What one detection method contributes to a validation experiment."""

    name: ClassVar[str]
    """The validated method (``permutation``, ``benbench``, ``cap``)."""

    @abstractmethod
    def benchmark(self) -> dict[str, Any]:
        """``source``, ``format``, ``content_hash`` and ``items_loaded`` of the data."""

    @abstractmethod
    def settings(self) -> dict[str, Any]:
        """Method settings that change the stored records (a re-run must match them)."""

    def summary_settings(self) -> dict[str, Any]:
        """The settings as summary.json reports them: :meth:`settings` and the analysis-only
        ones (a re-run may change those: it re-analyses the folder's records)."""
        return self.settings()

    def earlier_settings(self, stored: dict[str, Any]) -> list[dict[str, Any]]:
        """Method settings that a folder written by an earlier version stored for the records
        these :meth:`settings` make (given the folder's stored method settings)."""
        return []

    @abstractmethod
    def skipped_rows(self) -> list[str]:
        """Input rows the loader skipped, ``file:line: reason`` (summary.json)."""

    @abstractmethod
    def draw(self, n_items: int, seed: int) -> Split:
        """The evaluated items and which of them are trained on."""

    @abstractmethod
    def split_record(self, split: Split) -> dict[str, Any]:
        """Contents of ``split.json`` (``leaked`` and ``clean`` item ids at least)."""

    @abstractmethod
    def training_texts(self, split: Split) -> list[str]:
        """The plain texts the copy is trained on, in the layout the method's pipeline reads."""

    @abstractmethod
    def score(
        self,
        scorer: CachedScorer,
        run_dir: RunDir,
        split: Split,
        *,
        overwrite: bool,
        hooks: ScoreHooks,
    ) -> list[dict[str, Any]]:
        """Run the method's pipeline on the evaluated items into ``run_dir``; return its records."""

    @abstractmethod
    def evaluate(self, records: list[dict[str, Any]], split: Split) -> dict[str, Any]:
        """The per-epoch result: detector metrics against the ground truth (pure)."""

    @abstractmethod
    def describe(self) -> dict[str, str]:
        """What each reported detector / statistic is (summary.json ``detectors``)."""

    def require(self, backend: Backend) -> None:  # noqa: B027 - optional hook
        """Refuse a backend that cannot run the method (before any work)."""

    def split_counts(self, split: Split) -> dict[str, Any]:
        return {
            "n_items": len(split.items),
            "n_leaked": len(split.leaked),
            "n_clean": len(split.clean),
        }

    def summary_extras(self) -> dict[str, Any]:
        """Extra top-level summary fields."""
        return {}


@dataclass
class ValidationOutcome:
    summary: dict[str, Any]
    run_dir: Path


def _check_same_split(path: Path, record: dict[str, Any], overwrite: bool) -> None:
    """Refuse a re-run whose draw differs from the folder's (the settings match, so only an
    automatic choice can: ``--reference-items`` left to pick its count, which depends on
    ``--alpha``); its stored scores and checkpoints belong to the other split."""
    if overwrite or not path.is_file():
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # unreadable: rewritten below
    if not isinstance(old, dict) or old == record:
        return
    if {k: v for k, v in old.items() if k != "reference"} != {
        k: v for k, v in record.items() if k != "reference"
    }:
        raise ConfigError(
            f"{path}: the folder's run drew other items than this one; --overwrite (or another "
            "--out) to start it again"
        )
    raise ConfigError(
        f"--alpha: this run draws {plural(len(record.get('reference', [])), 'reference item')}, "
        f"the folder's run drew {len(old.get('reference', []))} (the automatic --reference-items "
        "depends on --alpha); run with the folder's --alpha, or --overwrite / another --out"
    )


def _read_train_log(path: Path) -> list[dict[str, Any]]:
    """The epochs an earlier run logged ([] when none, or the file is unreadable)."""
    try:
        logs = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    ok = isinstance(logs, list) and all(isinstance(d, dict) and "epoch" in d for d in logs)
    return logs if ok else []


def _say_unequal(leaked: int, clean: int) -> None:
    """A note where one half of the draw is under 40% of it: items that share one option set
    go to one side whole, and with big blocks the halves came out 9 and 1, every rate resting
    on one item, without a word (QA)."""
    if abs(leaked - clean) > 1 and min(leaked, clean) < 0.4 * (leaked + clean):  # (not odd n)
        note(
            f"the halves are unequal: {leaked} leaked and {clean} clean items (items sharing one "
            "option set go to one side whole); the rates rest on the smaller half: more "
            "--n-items or another --seed evens them"
        )


def run_validation(
    method: ValidationMethod,
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
    on_items: Callable[[float], None] | None = None,
) -> ValidationOutcome:
    """Run the whole experiment into ``out`` and return its summary (also in summary.json).

    Progress hooks: ``on_phase(text)``; ``on_train_start(total_texts)`` and
    ``on_train_step(n_texts)``; ``on_score_start(label, total, done)`` and ``on_items(n)``.
    """
    t_start = time.perf_counter()
    phase = on_phase or (lambda _text: None)
    split = method.draw(config.n_items, config.seed)
    _say_unequal(len(split.leaked), len(split.clean))
    bench = method.benchmark()
    settings = {
        "method": "validate",
        "run_schema": RUN_SCHEMA_VERSION,
        "model": model,
        "benchmark": bench["source"],
        "benchmark_hash": bench["content_hash"],
        "config": {**config.settings(), **method.settings()},
    }
    out = Path(out)
    root = RunDir(out)
    if overwrite:
        for sub in [out / "checkpoints", *out.glob("epoch-*")]:
            shutil.rmtree(sub, ignore_errors=True)
    stored = None if overwrite else root.stored_settings()
    stored_config = stored.get("config") if isinstance(stored, dict) else None
    upgrades = (
        [
            settings | {"config": {**config.settings(), **old}}
            for old in method.earlier_settings(stored_config)
        ]
        if isinstance(stored_config, dict)
        else []
    )
    root.open(settings, overwrite=overwrite, upgrades=upgrades)
    record = method.split_record(split)
    _check_same_split(out / "split.json", record, overwrite)
    replace_text(out / "split.json", json.dumps(record, indent=1) + "\n")

    phase(f"loading model {model}")
    backend = load_backend(model, device=device, dtype=dtype, options=options or {})
    hf: Any = backend
    if not all(hasattr(hf, a) for a in ("model", "tokenizer", "bos_id")):
        raise ConfigError(f"--model {model}: validation needs a local transformers model to train")
    method.require(backend)
    bos_token = "none" if hf.bos_id is None else str(hf.tokenizer.convert_ids_to_tokens(hf.bos_id))
    ckpt_options = dict(options or {}, bos=bos_token)
    timings: dict[str, float] = {}

    def score(label: str, be: Backend) -> list[dict[str, Any]]:
        hooks = ScoreHooks(
            on_start=(lambda total, done: on_score_start(label, total, done))
            if on_score_start
            else None,
            on_items=on_items,
        )
        t0 = time.perf_counter()
        recs = method.score(
            CachedScorer(be, cache), RunDir(out / label), split, overwrite=overwrite, hooks=hooks
        )
        timings[f"scoring_{label}_seconds"] = round(time.perf_counter() - t0, 3)
        return recs

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
        texts = method.training_texts(split)
        phase(
            f"training a copy on {plural(len(texts), 'leaked item')} for "
            f"{plural(max(missing), 'epoch')}"
        )
        train_model = copy.deepcopy(hf.model).float()
        tokenizer = hf.tokenizer
        seqs = tokenize_texts(tokenizer, texts, hf.bos_id)
        del backend
        hf = None
        gc.collect()
        if on_train_start is not None:
            on_train_start(len(seqs) * max(missing))

        def after_epoch(epoch: int, log: EpochLog) -> None:
            if epoch in ckdir and not checkpoint_complete(ckdir[epoch]):
                info = {  # no wall time: the marker is one of the files that identify the
                    # checkpoint, and a retrained one (same weights) must be the same model
                    "epochs": epoch,
                    "base_model": model,
                    "settings": settings,
                    "log": {k: v for k, v in log.__dict__.items() if k != "seconds"},
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
        # training is deterministic, so an epoch logged by an earlier run is the same epoch: a
        # run that only trains the missing early checkpoints keeps the later epochs' logs
        merged = {int(d["epoch"]): d for d in _read_train_log(log_path)}
        merged.update({log.epoch: dict(log.__dict__) for log in logs})
        train_logs = [merged[e] for e in sorted(merged)]
        replace_text(log_path, json.dumps(train_logs, indent=1) + "\n")
        del train_model
        gc.collect()
    else:
        del backend
        hf = None
        gc.collect()
        train_logs = _read_train_log(log_path)

    for e in config.epochs:
        phase(f"scoring the checkpoint after {e} epoch{'s' if e > 1 else ''}")
        be = load_backend(f"hf:{ckdir[e]}", device=device, dtype=dtype, options=ckpt_options)
        records[e] = score(f"epoch-{e}", be)
        del be
        gc.collect()
        if not config.keep_checkpoints:
            shutil.rmtree(ckdir[e], ignore_errors=True)

    results = [
        {"epochs": e, "run": f"epoch-{e}", **method.evaluate(records[e], split)}
        for e in sorted(records)
    ]
    timings["total_seconds"] = round(time.perf_counter() - t_start, 3)
    summary = build_summary(
        method, bench, model, model_info, config, settings, split, results, train_logs, timings
    )
    root.write_summary(summary)
    return ValidationOutcome(summary, out)


def build_summary(
    method: ValidationMethod,
    bench: dict[str, Any],
    model: str,
    model_info: dict[str, Any],
    config: ValidateConfig,
    settings: dict[str, Any],
    split: Split,
    results: list[dict[str, Any]],
    train_logs: list[dict[str, Any]],
    timings: dict[str, float],
) -> dict[str, Any]:
    """summary.json of a validation run: provenance, the split, training, metrics per epoch."""
    return {
        "schema": SUMMARY_SCHEMA,
        "method": "validate",
        "validated_method": method.name,
        "contamscope_version": __version__,
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": {"spec": model, **{k: v for k, v in model_info.items() if k != "spec"}},
        "benchmark": bench,
        "config": {
            **config.settings(),
            **method.summary_settings(),
            "epochs": list(config.epochs),
            "baseline": config.baseline,
        },
        "split": {**method.split_counts(split), "file": "split.json"},
        "training": train_logs,
        "detectors": method.describe(),
        "results": results,
        "skipped_rows": method.skipped_rows(),
        "timings": timings,
        "versions": package_versions(),
        **method.summary_extras(),
    }
